"""Figures for the book, drawn from posenc_core's numbers.

This module imports matplotlib; the numerical modules never import it. Every function
returns a :class:`matplotlib.figure.Figure` (chapters glue or display it) and uses
colour-blind-safe colours: ColorBrewer's RdBu for signed values in [-1, 1], viridis for
sequential ones, and the Okabe-Ito palette for lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from .. import _validation as check
from ..sinusoidal import sinusoidal_table, wavelengths

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
"""Okabe and Ito's palette, distinguishable under the common colour-vision deficiencies."""

DIVERGING = "RdBu_r"
SEQUENTIAL = "viridis"


def _np(t: torch.Tensor | np.ndarray) -> np.ndarray:
    return (
        t.detach().cpu().double().numpy()
        if isinstance(t, torch.Tensor)
        else np.asarray(t, dtype=float)
    )


def _figure(width: float = 7.0, height: float = 3.6, ncols: int = 1, nrows: int = 1, **kw):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kw)
    plt.close(fig)  # keep pyplot from showing it a second time; callers display or glue it
    return fig, axes


def heatmap_figure(
    table: torch.Tensor | np.ndarray,
    *,
    highlight: int | None = None,
    title: str = "",
    xlabel: str = "dimension",
    ylabel: str = "position",
    signed: bool = True,
    width: float = 7.0,
    height: float = 3.8,
) -> Figure:
    """An (n, d) table as an image, rows = positions, with an optional highlighted row.

    Args:
        table: ``(n, d)`` values.
        highlight: a row to outline and plot underneath as a profile (its "fingerprint").
        signed: diverging colours on [-1, 1] (else viridis on the data range).
    """
    data = _np(table)
    if highlight is None:
        fig, ax = _figure(width, height)
        axes = [ax]
    else:
        fig, axes = _figure(width, height + 1.6, nrows=2, gridspec_kw={"height_ratios": [3, 1]})
    ax = axes[0]
    kw = {"cmap": DIVERGING, "vmin": -1, "vmax": 1} if signed else {"cmap": SEQUENTIAL}
    im = ax.imshow(data, aspect="auto", interpolation="nearest", **kw)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.01)
    if highlight is not None:
        ax.axhline(highlight - 0.5, color="black", lw=1.2)
        ax.axhline(highlight + 0.5, color="black", lw=1.2)
        prof = axes[1]
        prof.plot(np.arange(data.shape[1]), data[highlight], color=OKABE_ITO[0], lw=1.2)
        prof.set(
            xlim=(-0.5, data.shape[1] - 0.5),
            ylim=(-1.1, 1.1) if signed else None,
            xlabel=xlabel,
            ylabel=f"row {highlight}",
        )
        prof.grid(alpha=0.3)
    return fig


def sinusoidal_heatmap(
    n_positions: int = 100,
    d_model: int = 128,
    *,
    base: float = 10000.0,
    highlight: int | None = None,
) -> Figure:
    """Heatmap of :func:`~posenc_core.sinusoidal.sinusoidal_table` (positions x dimensions)."""
    table = sinusoidal_table(n_positions, d_model, base=base, dtype=torch.float64)
    title = f"Sinusoidal encoding, {n_positions} positions x {d_model} dims, base {base:g}"
    return heatmap_figure(table, highlight=highlight, title=title)


def matrices_figure(
    matrices: Mapping[str, torch.Tensor | np.ndarray],
    *,
    signed: bool = True,
    xlabel: str = "position",
    ylabel: str = "position",
    width: float | None = None,
    height: float = 3.4,
    vlim: float | None = None,
) -> Figure:
    """Several square matrices side by side with a shared colour scale (e.g. similarities)."""
    n = len(matrices)
    fig, axes = _figure(width or 3.3 * n + 0.6, height, ncols=n)
    axes = np.atleast_1d(axes)
    datas = [_np(m) for m in matrices.values()]
    if signed:
        lim = vlim if vlim is not None else max(float(np.abs(d).max()) for d in datas)
        kw = {"cmap": DIVERGING, "vmin": -lim, "vmax": lim}
    else:
        kw = {
            "cmap": SEQUENTIAL,
            "vmin": min(float(d.min()) for d in datas),
            "vmax": max(float(d.max()) for d in datas),
        }
    im = None
    for ax, (name, data) in zip(axes, zip(matrices, datas)):
        im = ax.imshow(data, interpolation="nearest", aspect="auto", **kw)
        ax.set(title=name, xlabel=xlabel)
    axes[0].set_ylabel(ylabel)
    fig.colorbar(im, ax=list(axes), fraction=0.03, pad=0.01)
    return fig


def wavelength_figure(
    d_model: int,
    bases: Sequence[float],
    *,
    lengths: Mapping[str, float] | None = None,
    height: float = 3.6,
) -> Figure:
    """Wavelength 2*pi/omega_i of every (sin, cos) pair, one curve per base, log scale."""
    curves = {f"base {b:,.0f}": wavelengths(d_model, base=b) for b in bases}
    x = np.arange(d_model // 2)
    return curves_figure(
        x,
        curves,
        xlabel="pair index i (dimensions 2i, 2i+1)",
        ylabel="wavelength (positions)",
        title=f"Wavelengths for d_model = {d_model}",
        logy=True,
        hlines=lengths,
        height=height,
    )


def rows_figure(
    rows: Mapping[str, torch.Tensor | np.ndarray],
    *,
    labels: Sequence[str] | None = None,
    dims: int = 48,
    title: str = "",
    width: float | None = None,
    height: float = 2.6,
) -> Figure:
    """Several small (tokens x dims) matrices side by side, rows labelled by token."""
    n = len(rows)
    fig, axes = _figure(width or 3.4 * n + 0.6, height, ncols=n)
    axes = np.atleast_1d(axes)
    datas = [_np(r)[:, :dims] for r in rows.values()]
    lim = max(float(np.abs(d).max()) for d in datas)
    im = None
    for ax, (name, data) in zip(axes, zip(rows, datas)):
        im = ax.imshow(
            data, aspect="auto", interpolation="nearest", cmap=DIVERGING, vmin=-lim, vmax=lim
        )
        ax.set(title=name, xlabel=f"output dimension (first {data.shape[1]})")
        tick_labels = name.split() if labels is None else labels
        if len(tick_labels) == data.shape[0]:
            ax.set_yticks(range(data.shape[0]), tick_labels)
    if title:
        fig.suptitle(title)
    fig.colorbar(im, ax=list(axes), fraction=0.03, pad=0.01)
    return fig


def unit_circle_figure(
    omegas: Sequence[float],
    n_positions: int,
    *,
    shift: int | None = None,
    starts: Sequence[int] = (),
    labels: Sequence[int] = (0,),
    width: float | None = None,
    height: float = 3.5,
) -> Figure:
    """One (sin, cos) pair of the sinusoidal encoding as points on the unit circle, one panel
    per frequency.

    Position p is drawn at angle omega * p: x = cos(omega p) (dimension 2i+1), y = sin(omega p)
    (dimension 2i), so p = 0 sits at (1, 0) and increasing p turns counter-clockwise. With
    ``shift`` = k, an arrow joins each start p to p + k: the same turn omega * k whatever p is.

    Args:
        omegas: angular frequencies in radians per position, one panel each.
        n_positions: positions 0 .. n_positions - 1 are drawn, coloured by position.
        shift: the step k drawn from each start (needs ``starts``).
        starts: start positions p of the arrows p -> p + k.
        labels: positions to label with their number.
    """
    n = len(omegas)
    fig, axes = _figure(width or 3.1 * n + 0.8, height, ncols=n)
    axes = np.atleast_1d(axes)
    p = np.arange(n_positions)
    t = np.linspace(0, 2 * np.pi, 361)
    sc = None
    for ax, w in zip(axes, omegas):
        ax.plot(np.cos(t), np.sin(t), color="0.8", lw=1, zorder=1)
        sc = ax.scatter(
            np.cos(w * p),
            np.sin(w * p),
            c=p,
            cmap=SEQUENTIAL,
            s=16,
            zorder=3,
            vmin=0,
            vmax=n_positions - 1,
        )
        for q in labels:
            ax.annotate(
                str(q),
                (1.2 * np.cos(w * q), 1.2 * np.sin(w * q)),
                ha="center",
                va="center",
                fontsize=8,
            )
        if shift is not None:
            for k, s in enumerate(starts):
                a, b = w * s, w * (s + shift)
                ax.annotate(
                    "",
                    xy=(np.cos(b), np.sin(b)),
                    xytext=(np.cos(a), np.sin(a)),
                    zorder=4,
                    arrowprops={
                        "arrowstyle": "->",
                        "color": OKABE_ITO[(k + 3) % len(OKABE_ITO)],
                        "lw": 1.6,
                    },
                )
                for q in (s, s + shift):
                    ax.annotate(
                        str(q),
                        (1.2 * np.cos(w * q), 1.2 * np.sin(w * q)),
                        ha="center",
                        va="center",
                        fontsize=8,
                        color=OKABE_ITO[(k + 3) % len(OKABE_ITO)],
                    )
        ax.set_aspect("equal")
        ax.set(
            xlim=(-1.4, 1.4),
            ylim=(-1.4, 1.4),
            xlabel="cos(ωp)  (dim 2i+1)",
            title=f"ω = {w:.3g} rad/position",
        )
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("sin(ωp)  (dim 2i)")
    fig.colorbar(sc, ax=list(axes), fraction=0.03, pad=0.01, label="position p")
    return fig


def paired_curves_figure(
    x: Sequence[float] | torch.Tensor | np.ndarray,
    solid: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    dashed: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    solid_label: str,
    dashed_label: str,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    width: float = 7.0,
    height: float = 3.6,
) -> Figure:
    """Two families of curves over a shared x that share colours: the k-th solid and the k-th
    dashed curve belong together (e.g. the same sequence length), the line style tells the
    families apart. Legend entries read "<solid_label>, <key>" and "<dashed_label>, <key>"."""
    fig, ax = _figure(width, height)
    xs = _np(x)
    for style, label, family in (("-", solid_label, solid), ("--", dashed_label, dashed)):
        for k, (name, y) in enumerate(family.items()):
            ax.plot(
                xs,
                _np(y),
                ls=style,
                lw=1.6,
                color=OKABE_ITO[k % len(OKABE_ITO)],
                label=f"{label}, {name}",
            )
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, ncol=2)
    return fig


# --------------------------------------------------------------------------- explorer figures
# The interactive explorers of posenc_core.widgets draw with the functions below. Each draws
# a new figure, or, given the figure it returned before (``fig=``), updates that figure's
# artists in place. The layout is computed once, when the figure is created, and
# :func:`figure_png` redraws only the artists that change on top of a cached picture of the
# rest (axes, ticks, labels, colour bars) while the axes limits stay the same, so a live
# slider stays responsive.


def figure_png(fig: Figure, *, dpi: float = 72.0, colors: int | None = None) -> bytes:
    """Render a figure to PNG bytes with matplotlib's Agg renderer.

    Figures from the explorer functions below are redrawn incrementally: the unchanging
    parts are drawn once per size and axes limits, then only the changing artists.

    Args:
        fig: the figure (whatever its backend; it is drawn with Agg).
        dpi: resolution in dots per inch, in (0, 600].
        colors: None for a full-colour PNG (fast to encode, for live updates), or an integer
            in 2..256 for a palette PNG with at most that many colours, several times smaller
            (for frames stored in a page).

    Returns:
        the PNG file as bytes.
    """
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if isinstance(dpi, bool) or not isinstance(dpi, (int, float)) or not 0 < dpi <= 600:
        raise ValueError(f"dpi must be a number in (0, 600], got {dpi!r}")
    if colors is not None and (
        isinstance(colors, bool) or not isinstance(colors, int) or not 2 <= colors <= 256
    ):
        raise ValueError(f"colors must be None or an integer in 2..256, got {colors!r}")
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    if fig.get_dpi() != dpi:
        fig.set_dpi(dpi)
    art = getattr(fig, "_posenc_artists", None)
    animated = art.get("animated") if isinstance(art, dict) else None
    if not animated:
        canvas.draw()
    else:
        key = (
            fig.dpi,
            tuple(fig.get_size_inches()),
            tuple((ax.get_xlim(), ax.get_ylim()) for ax in fig.axes),
        )
        background = art.get("background")
        if background is None or background[0] != key:
            canvas.draw()  # everything except the animated artists
            art["background"] = (key, canvas.copy_from_bbox(fig.bbox))
        else:
            canvas.restore_region(background[1])
        renderer = canvas.get_renderer()
        for artist in sorted(animated, key=lambda a: a.get_zorder()):
            if artist.get_visible():
                artist.draw(renderer)
    image = Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3])
    buf = io.BytesIO()
    if colors is None:
        image.save(buf, format="png", compress_level=1)
    else:
        image = image.quantize(
            colors=colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
        )
        image.save(buf, format="png", optimize=True)
    return buf.getvalue()


def _explorer_artists(fig: Figure | None, kind: str) -> dict | None:
    """The artists that an earlier call of the explorer figure ``kind`` stored on ``fig``."""
    if fig is None:
        return None
    artists = getattr(fig, "_posenc_artists", None)
    if not isinstance(artists, dict) or artists.get("kind") != kind:
        raise ValueError(f"fig must be None or a figure returned by viz.{kind}")
    return artists


def _keep_layout(fig: Figure, artists: dict) -> Figure:
    """Run the constrained layout once and keep it, and mark the artists that change on
    every update as animated, so that :func:`figure_png` redraws only those."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    fig.set_layout_engine("none")
    for artist in artists["animated"]:
        artist.set_animated(True)
    fig._posenc_artists = artists  # type: ignore[attr-defined]
    return fig


def fingerprint_figure(
    table: torch.Tensor | np.ndarray,
    position: int,
    *,
    title: str = "",
    width: float = 6.4,
    height: float = 4.4,
    fig: Figure | None = None,
) -> Figure:
    """A table as a heatmap with one row outlined, and that row (its "fingerprint") plotted
    underneath.

    Args:
        table: ``(n, d)`` values in [-1, 1] (e.g. a sinusoidal table), rows = positions.
        position: the row to outline and plot, 0 <= position < n.
        title: the heatmap's title.
        width, height: figure size in inches, for a new figure.
        fig: a figure this function returned before, to update in place (the table may
            change shape).

    Returns:
        the figure (``fig`` itself when given).
    """
    data = _np(table)
    if data.ndim != 2:
        raise ValueError(f"table must have shape (n, d), got {data.shape}")
    n, d = data.shape
    position = check.int_in_range("position", position, 0, n - 1)  # a row of the table
    art = _explorer_artists(fig, "fingerprint_figure")
    new = art is None
    if new:
        fig, (ax, prof) = _figure(width, height, nrows=2, gridspec_kw={"height_ratios": [3, 1.2]})
        im = ax.imshow(
            data, aspect="auto", interpolation="nearest", cmap=DIVERGING, vmin=-1, vmax=1
        )
        fig.colorbar(im, ax=[ax, prof], fraction=0.04, pad=0.01)
        rows = [ax.axhline(0, color="black", lw=1.2) for _ in range(2)]
        (line,) = prof.plot([], [], color=OKABE_ITO[0], lw=1.2)
        row_text = prof.text(
            0.99,
            0.96,
            "",
            transform=prof.transAxes,
            ha="right",
            va="top",
            fontsize=8,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
        )
        ax.set_ylabel("position")
        ax.tick_params(labelbottom=False)
        prof.set(ylim=(-1.1, 1.1), xlabel="dimension", ylabel="value")
        prof.grid(alpha=0.3)
        animated = [im, *rows, line, row_text, ax.title, *ax.spines.values()]
        art = {
            "kind": "fingerprint_figure",
            "im": im,
            "rows": rows,
            "line": line,
            "row_text": row_text,
            "ax": ax,
            "prof": prof,
            "animated": animated,
        }
    ax, prof = art["ax"], art["prof"]
    art["im"].set_data(data)
    art["im"].set_extent((-0.5, d - 0.5, n - 0.5, -0.5))
    for row, y in zip(art["rows"], (position - 0.5, position + 0.5)):
        row.set_ydata([y, y])
    art["line"].set_data(np.arange(d), data[position])
    art["row_text"].set_text(f"row {position}")
    for a in (ax, prof):
        a.set_xlim(-0.5, d - 0.5)
    ax.set_ylim(n - 0.5, -0.5)
    ax.set_title(title)
    return _keep_layout(ax.figure, art) if new else ax.figure


def base_figure(
    table: torch.Tensor | np.ndarray,
    wavelength: torch.Tensor | np.ndarray,
    offsets: torch.Tensor | np.ndarray,
    similarity: torch.Tensor | np.ndarray,
    *,
    reference: Mapping[str, torch.Tensor | np.ndarray] | None = None,
    reference_label: str = "",
    title: str = "",
    width: float = 7.0,
    height: float = 5.0,
    fig: Figure | None = None,
) -> Figure:
    """Three views of one base: the sinusoidal table, its wavelength spectrum, and the
    similarity of two encodings as a function of their offset.

    Args:
        table: ``(n, d)`` sinusoidal table (top panel, rows = positions).
        wavelength: ``(d/2,)`` wavelengths 2*pi/omega_i (bottom left, log scale); a dotted
            line marks n, the table's length: pairs below it complete a turn within the table.
        offsets, similarity: ``(K,)`` offsets k and the cosine similarity s(k) (bottom right).
        reference: optional ``{"wavelength": ..., "similarity": ...}`` of another base, drawn
            dashed in grey for comparison (same d and offsets).
        reference_label: its legend entry, e.g. "base 10000".
        title: the figure's title.
        width, height: figure size in inches, for a new figure.
        fig: a figure this function returned before, to update in place.

    Returns:
        the figure (``fig`` itself when given).
    """
    data, wl, k, sim = _np(table), _np(wavelength), _np(offsets), _np(similarity)
    if data.ndim != 2:
        raise ValueError(f"table must have shape (n, d), got {data.shape}")
    n, d = data.shape
    if wl.shape != (d // 2,) or k.ndim != 1 or k.shape != sim.shape:
        raise ValueError(
            f"wavelength must have shape (d/2,) = ({d // 2},) and offsets, similarity one 1-D "
            f"shape; got {wl.shape}, {k.shape}, {sim.shape}"
        )
    art = _explorer_artists(fig, "base_figure")
    new = art is None
    if new:
        fig = plt.figure(figsize=(width, height), layout="constrained")
        plt.close(fig)
        axes = fig.subplot_mosaic([["heat", "heat"], ["wave", "sim"]], height_ratios=[1.1, 1])
        heat, wave, simax = axes["heat"], axes["wave"], axes["sim"]
        im = heat.imshow(
            data, aspect="auto", interpolation="nearest", cmap=DIVERGING, vmin=-1, vmax=1
        )
        fig.colorbar(im, ax=heat, fraction=0.04, pad=0.01)
        heat.set(xlabel="dimension", ylabel="position")
        ref_wave = wave.plot(
            [], [], color="0.55", ls="--", lw=1.2, label=reference_label or "reference"
        )[0]
        (wave_line,) = wave.plot([], [], color=OKABE_ITO[0], lw=1.6, label="this base")
        wave.axhline(n, color="0.35", ls=":", lw=1)
        wave.annotate(
            f"{n} positions",
            (0.02, n),
            xycoords=("axes fraction", "data"),
            va="bottom",
            fontsize=8,
            color="0.25",
        )
        wave.set(
            yscale="log", ylim=(3, 3e8), xlabel="pair index i", ylabel="wavelength (positions)"
        )
        ref_sim = simax.plot(
            [], [], color="0.55", ls="--", lw=1, label=reference_label or "reference"
        )[0]
        (sim_line,) = simax.plot([], [], color=OKABE_ITO[3], lw=1.2, label="this base")
        simax.axhline(0, color="0.35", lw=0.8)
        simax.set(xlabel="offset k", ylabel="similarity s(k)")
        for a in (wave, simax):
            a.grid(alpha=0.3)
        wave.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(0, 0.93))
        animated = [im, wave_line, ref_wave, sim_line, ref_sim, heat.title, *heat.spines.values()]
        art = {
            "kind": "base_figure",
            "im": im,
            "heat": heat,
            "wave": wave,
            "sim": simax,
            "wave_line": wave_line,
            "ref_wave": ref_wave,
            "sim_line": sim_line,
            "ref_sim": ref_sim,
            "animated": animated,
        }
    art["im"].set_data(data)
    art["im"].set_extent((-0.5, d - 0.5, n - 0.5, -0.5))
    art["heat"].set(xlim=(-0.5, d - 0.5), ylim=(n - 0.5, -0.5))
    pairs = np.arange(d // 2)
    art["wave_line"].set_data(pairs, wl)
    art["sim_line"].set_data(k, sim)
    low = float(sim.min())
    if reference is not None:
        art["ref_wave"].set_data(pairs, _np(reference["wavelength"]))
        ref = _np(reference["similarity"])
        art["ref_sim"].set_data(k, ref)
        low = min(low, float(ref.min()))
    art["ref_wave"].set_visible(reference is not None)
    art["ref_sim"].set_visible(reference is not None)
    art["wave"].set_xlim(-0.5, d // 2 - 0.5)
    art["sim"].set(xlim=(float(k.min()), float(k.max())), ylim=(min(-0.4, low - 0.05), 1.05))
    art["heat"].set_title(title)
    fig = art["heat"].figure
    return _keep_layout(fig, art) if new else fig


def circle_shift_figure(
    start_points: torch.Tensor | np.ndarray,
    end_points: torch.Tensor | np.ndarray,
    *,
    omega: float,
    shift: int,
    starts: Sequence[int],
    matrix: torch.Tensor | np.ndarray,
    pair: int,
    width: float = 6.4,
    height: float = 3.6,
    fig: Figure | None = None,
) -> Figure:
    """One (sin, cos) pair on the unit circle: positions p and p + k for a few starts p, the
    turn omega * k between them, and the 2x2 block of the shift matrix M_k.

    A point (sin, cos) is drawn at x = cos, y = sin, as in :func:`unit_circle_figure`, so
    position p sits at angle omega * p. Each start gets a colour: a dot at p, a square at
    p + k, spokes from the centre and an arc of the net turn (omega * k modulo one full turn).

    Args:
        start_points: ``(S, 2)`` the pair's (sin, cos) entries at the start positions p.
        end_points: ``(S, 2)`` the same at p + k.
        omega: the pair's angular frequency, radians per position.
        shift: the offset k, an integer >= 0.
        starts: the S start positions p (1 to 4 of them).
        matrix: the ``(2, 2)`` block of M_k acting on the pair's (sin, cos).
        pair: the pair index i, for the text.
        width, height: figure size in inches, for a new figure.
        fig: a figure this function returned before (with as many starts), to update in place.

    Returns:
        the figure (``fig`` itself when given).
    """
    m, p0, p1 = _np(matrix), _np(start_points), _np(end_points)
    starts = list(starts)
    if m.shape != (2, 2):
        raise ValueError(f"matrix must have shape (2, 2), got {m.shape}")
    if not 1 <= len(starts) <= 4:
        raise ValueError(f"starts must hold 1 to 4 positions, got {len(starts)}")
    if p0.shape != (len(starts), 2) or p1.shape != p0.shape:
        raise ValueError(
            f"start_points and end_points must have shape (len(starts), 2) = ({len(starts)}, 2), "
            f"got {p0.shape} and {p1.shape}"
        )
    art = _explorer_artists(fig, "circle_shift_figure")
    if art is not None and len(art["marks"]) != len(starts):
        raise ValueError(
            f"fig was drawn for {len(art['marks'])} starts, got {len(starts)}; draw a new figure"
        )
    new = art is None
    if new:
        fig = plt.figure(figsize=(width, height), layout="constrained")
        plt.close(fig)
        ax, txt = fig.subplots(1, 2, width_ratios=[1, 0.9])
        t = np.linspace(0, 2 * np.pi, 181)
        ax.plot(np.cos(t), np.sin(t), color="0.75", lw=1)
        ax.axhline(0, color="0.85", lw=0.8)
        ax.axvline(0, color="0.85", lw=0.8)
        marks = []
        for j in range(len(starts)):
            c = OKABE_ITO[(j + 3) % len(OKABE_ITO)] if j else OKABE_ITO[0]
            marks.append(
                {
                    "spoke0": ax.plot([], [], color=c, lw=1, ls="--")[0],
                    "spoke1": ax.plot([], [], color=c, lw=1.2)[0],
                    "arc": ax.plot([], [], color=c, lw=2)[0],
                    "p": ax.plot([], [], "o", color=c, ms=7)[0],
                    "q": ax.plot([], [], "s", color=c, ms=7, mfc="white", mew=1.8)[0],
                }
            )
        ax.set_aspect("equal")
        ax.set(
            xlim=(-1.25, 1.25),
            ylim=(-1.25, 1.25),
            xlabel="cos(ω p)  (dim 2i+1)",
            ylabel="sin(ω p)  (dim 2i)",
        )
        legend = ax.legend(
            [mk["q"] for mk in marks],
            [f"p = {p} → {p}" for p in starts],
            fontsize=8,
            loc="lower left",
            frameon=True,
            framealpha=0.9,
        )
        txt.axis("off")
        text = txt.text(
            0, 1, "", va="top", ha="left", family="monospace", fontsize=9, transform=txt.transAxes
        )
        animated = [a for mk in marks for a in mk.values()] + [legend, ax.title, text]
        art = {
            "kind": "circle_shift_figure",
            "ax": ax,
            "marks": marks,
            "text": text,
            "legend": legend,
            "animated": animated,
        }
    ax = art["ax"]
    angle = omega * shift
    net = float(np.fmod(angle, 2 * np.pi))
    turns = int(angle // (2 * np.pi))
    for j, (mk, p, label) in enumerate(zip(art["marks"], starts, art["legend"].get_texts())):
        a0 = float(np.arctan2(p0[j, 0], p0[j, 1]))
        a1 = a0 + net
        mk["p"].set_data([p0[j, 1]], [p0[j, 0]])
        mk["q"].set_data([p1[j, 1]], [p1[j, 0]])
        mk["spoke0"].set_data([0, np.cos(a0)], [0, np.sin(a0)])
        mk["spoke1"].set_data([0, np.cos(a1)], [0, np.sin(a1)])
        r = 0.25 + 0.15 * j
        arc = np.linspace(a0, a1, 48)
        mk["arc"].set_data(r * np.cos(arc), r * np.sin(arc))
        label.set_text(f"p = {p} → {p + shift}")
    ax.set_title(f"pair i = {pair}: turn by ω·k = {angle:.3g} rad", fontsize=10)
    art["text"].set_text(
        f"pair i = {pair} (dims {2 * pair}, {2 * pair + 1})\n"
        f"ω_i   = {omega:.4g} rad/position\n"
        f"k     = {shift}\n"
        f"ω_i·k = {angle:.4g} rad = {np.degrees(angle):.4g}°\n"
        f"      = {turns} full turns + {net:.3f} rad\n\n"
        f"M_k block on (sin, cos):\n"
        f"[{m[0, 0]:+.4f}  {m[0, 1]:+.4f}]\n"
        f"[{m[1, 0]:+.4f}  {m[1, 1]:+.4f}]\n\n"
        f"(sin, cos) at p + k\n  = M_k · (sin, cos) at p\n"
        f"for every start p"
    )
    fig = ax.figure
    return _keep_layout(fig, art) if new else fig


def rope_decay_figure(
    distances: torch.Tensor | np.ndarray,
    score: torch.Tensor | np.ndarray,
    *,
    marker: tuple[float, float],
    bound: torch.Tensor | np.ndarray | None = None,
    title: str = "",
    width: float = 6.4,
    height: float = 3.6,
    fig: Figure | None = None,
) -> Figure:
    """The RoPE score against relative distance (log scale), with one distance marked.

    Args:
        distances: ``(K,)`` positive distances.
        score: ``(K,)`` the score at each distance (e.g.
            :func:`~posenc_core.analysis.rope_score_vs_distance`).
        marker: ``(distance, score)`` of the marked point.
        bound: optional ``(K,)`` curve drawn dashed, e.g. RoFormer's decay bound divided by
            its value at distance 0.
        title: the axes' title.
        width, height: figure size in inches, for a new figure.
        fig: a figure this function returned before, to update in place.

    Returns:
        the figure (``fig`` itself when given).
    """
    x, y = _np(distances), _np(score)
    if x.shape != y.shape or x.ndim != 1 or not (x > 0).all():
        raise ValueError(
            f"distances (positive) and score must be 1-D of one shape, got {x.shape} and {y.shape}"
        )
    art = _explorer_artists(fig, "rope_decay_figure")
    new = art is None
    if new:
        fig, ax = _figure(width, height)
        (line,) = ax.plot([], [], color=OKABE_ITO[0], lw=1.1, label="score, q = k = all ones")
        (bline,) = ax.plot(
            [], [], color=OKABE_ITO[1], lw=1.4, ls="--", label="RoFormer's bound ÷ its value at 0"
        )
        vline = ax.axvline(1, color="0.4", ls=":", lw=1)
        (dot,) = ax.plot([], [], "o", color=OKABE_ITO[3], ms=8, zorder=5)
        note = ax.annotate(
            "",
            (1, 0),
            xytext=(6, -14),
            textcoords="offset points",
            fontsize=9,
            color=OKABE_ITO[3],
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.85},
            zorder=6,
        )
        ax.axhline(0, color="0.35", lw=0.8)
        ax.set(xscale="log", xlabel="relative distance n - m", ylabel="score / head_dim")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, frameon=False, loc="upper right")
        art = {
            "kind": "rope_decay_figure",
            "ax": ax,
            "line": line,
            "bound": bline,
            "vline": vline,
            "dot": dot,
            "note": note,
            "animated": [line, bline, vline, dot, note, ax.title],
        }
    ax = art["ax"]
    art["line"].set_data(x, y)
    art["bound"].set_visible(bound is not None)
    if bound is not None:
        art["bound"].set_data(x, _np(bound))
    md, ms = float(marker[0]), float(marker[1])
    art["vline"].set_xdata([md, md])
    art["dot"].set_data([md], [ms])
    art["note"].xy = (md, ms)
    art["note"].set_text(f"{ms:+.4f}")
    ax.set(xlim=(float(x.min()), float(x.max())), ylim=(min(-0.4, float(y.min()) - 0.05), 1.08))
    ax.set_title(title)
    fig = ax.figure
    return _keep_layout(fig, art) if new else fig


def rope_scaling_figure(
    wavelength: torch.Tensor | np.ndarray,
    ratio: torch.Tensor | np.ndarray,
    *,
    factor: float,
    lines: Mapping[str, float] | None = None,
    title: str = "",
    xlim: tuple[float, float] = (3.0, 1e7),
    ylim: tuple[float, float] = (4e-4, 2.0),
    width: float = 6.4,
    height: float = 3.6,
    fig: Figure | None = None,
) -> Figure:
    """How a context-extension method rescales each RoPE frequency: scaled / original
    frequency against the original wavelength, both on log scales.

    A ratio of 1 means the pair is kept; 1/factor means it is interpolated (its angles are
    divided by the factor, like position interpolation); anything else is in between.

    Args:
        wavelength: ``(d/2,)`` original wavelengths 2*pi/theta_i.
        ratio: ``(d/2,)`` scaled theta_i divided by the original theta_i.
        factor: the context-extension factor s (a dashed line marks 1/s).
        lines: up to 3 named wavelengths to mark with vertical lines (e.g. the original context).
        title: the axes' title.
        xlim, ylim: the axes' limits, fixed so that frames can be compared.
        width, height: figure size in inches, for a new figure.
        fig: a figure this function returned before, to update in place.

    Returns:
        the figure (``fig`` itself when given).
    """
    x, y = _np(wavelength), _np(ratio)
    lines = dict(lines or {})
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(
            f"wavelength and ratio must be 1-D of one shape, got {x.shape} and {y.shape}"
        )
    if len(lines) > 3:
        raise ValueError(f"lines must name at most 3 wavelengths, got {len(lines)}")
    art = _explorer_artists(fig, "rope_scaling_figure")
    new = art is None
    if new:
        fig, ax = _figure(width, height)
        ax.axhline(1.0, color=OKABE_ITO[2], ls="--", lw=1)
        ax.annotate(
            "kept (ratio 1)",
            (0.01, 1.0),
            xycoords=("axes fraction", "data"),
            va="bottom",
            fontsize=8,
            color=OKABE_ITO[2],
        )
        inv = ax.axhline(1.0, color=OKABE_ITO[4], ls="--", lw=1)
        inv_note = ax.text(
            0.01,
            1.0,
            "",
            transform=ax.get_yaxis_transform(),
            va="top",
            fontsize=8,
            color=OKABE_ITO[4],
        )
        (line,) = ax.plot([], [], "o-", color=OKABE_ITO[0], ms=3, lw=1.2)
        vlines = [ax.axvline(10, color="0.4", ls=":", lw=1) for _ in range(3)]
        vnotes = [
            ax.text(
                10,
                0.03,
                "",
                transform=ax.get_xaxis_transform(),
                rotation=90,
                va="bottom",
                ha="right",
                fontsize=8,
                color="0.3",
            )
            for _ in range(3)
        ]
        ax.set(
            xscale="log",
            yscale="log",
            xlim=xlim,
            ylim=ylim,
            xlabel="original wavelength 2π/θ_i (positions)",
            ylabel="scaled θ_i / original θ_i",
        )
        ax.grid(alpha=0.3)
        art = {
            "kind": "rope_scaling_figure",
            "ax": ax,
            "line": line,
            "inv": inv,
            "inv_note": inv_note,
            "vlines": vlines,
            "vnotes": vnotes,
            "animated": [line, inv, inv_note, *vlines, *vnotes, ax.title],
        }
    ax = art["ax"]
    art["line"].set_data(x, y)
    art["inv"].set_ydata([1 / factor, 1 / factor])
    art["inv_note"].set_position((0.01, 1 / factor))
    art["inv_note"].set_text(f"interpolated (ratio 1/{factor:g})")
    items = list(lines.items())
    for j, (vl, vn) in enumerate(zip(art["vlines"], art["vnotes"])):
        show = j < len(items)
        vl.set_visible(show)
        vn.set_visible(show)
        if show:
            name, value = items[j]
            vl.set_xdata([value, value])
            vn.set_position((value, 0.03))
            vn.set_text(name)
    ax.set_title(title, fontsize=10)
    fig = ax.figure
    return _keep_layout(fig, art) if new else fig


# --------------------------------------------------------------------------- chapter 4


def offset_profiles_figure(
    offsets: Sequence[float] | torch.Tensor | np.ndarray,
    profiles: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    xlabel: str = "offset",
    strength_label: str = "range (max − min)",
    title: str = "",
    width: float = 7.4,
    height: float | None = None,
) -> Figure:
    """Several curves over a shared offset axis, one row each: their shape and their size.

    Left: the curves as rows of an image, each rescaled to run from 0 (its minimum) to 1 (its
    maximum), so that a weak curve's shape is as visible as a strong one's (viridis). Right:
    each row's range (max - min) as a horizontal bar on a log scale, the size that the
    rescaling on the left hides.

    Args:
        offsets: ``(K,)`` evenly spaced x values (e.g. key position minus query position).
        profiles: name -> ``(K,)`` values, one row each, drawn top to bottom.
        xlabel, strength_label, title: axis labels and title.
        width, height: figure size in inches (height defaults to fit the rows).
    """
    names = list(profiles)
    data = np.stack([_np(v) for v in profiles.values()])  # (R, K)
    x = _np(offsets)
    if data.shape[1] != x.shape[0]:
        raise ValueError(
            f"each profile must have {x.shape[0]} values (one per offset), got {data.shape[1]}"
        )
    low, spread = data.min(axis=1, keepdims=True), np.ptp(data, axis=1, keepdims=True)
    scaled = (data - low) / np.where(spread == 0, 1.0, spread)
    rows = len(names)
    fig, (ax, bar) = _figure(
        width, height or 0.3 * rows + 2.0, ncols=2, gridspec_kw={"width_ratios": [3.2, 1]}
    )
    half = (x[1] - x[0]) / 2 if x.shape[0] > 1 else 0.5
    im = ax.imshow(
        scaled,
        aspect="auto",
        interpolation="nearest",
        cmap=SEQUENTIAL,
        vmin=0,
        vmax=1,
        extent=(x[0] - half, x[-1] + half, rows - 0.5, -0.5),
    )
    ax.set_yticks(range(rows), names)
    ax.set(xlabel=xlabel, title=title)
    fig.colorbar(
        im,
        ax=ax,
        location="bottom",
        fraction=0.05,
        pad=0.02,
        aspect=40,
        label="each row rescaled: 0 = its minimum, 1 = its maximum",
    )
    bar.barh(range(rows), spread[:, 0], color=OKABE_ITO[0])
    bar.set_xscale("log")
    bar.set_ylim(rows - 0.5, -0.5)
    bar.set_yticks(range(rows), [])
    bar.set(xlabel=strength_label)
    bar.grid(alpha=0.3, axis="x")
    return fig


# --------------------------------------------------------------------------- chapter 6 (RoPE)


def pair_layout_figure(head_dim: int = 8, *, width: float = 7.0, height: float = 2.3) -> Figure:
    """Which dimensions of a head RoPE rotates together, in the two layouts in use.

    Top row: the interleaved layout (RoFormer, Meta's Llama code), pair i = dims (2i, 2i+1).
    Bottom row: the half-split layout (Hugging Face's ``rotate_half``), pair i = dims
    (i, i + head_dim/2). Each box is one dimension, coloured by the pair it belongs to (the
    pair rotates at frequency theta_i); an arc joins the two members of every pair.

    Args:
        head_dim: even number of dimensions to draw, 2 to 32.
        width, height: figure size in inches.
    """
    head_dim = check.int_in_range("head_dim", head_dim, 2, 32)
    if head_dim % 2:
        raise ValueError(f"head_dim must be an even integer in 2..32, got {head_dim}")
    from matplotlib.patches import Arc, Rectangle

    half = head_dim // 2
    fig, ax = _figure(width, height)
    cmap = plt.get_cmap(SEQUENTIAL)
    colour = [cmap(0.1 + 0.8 * i / max(half - 1, 1)) for i in range(half)]
    rows = {
        "interleaved: pair i = (2i, 2i+1)": (1.6, [j // 2 for j in range(head_dim)]),
        "half-split: pair i = (i, i + d/2)": (0.0, [j % half for j in range(head_dim)]),
    }
    for label, (y, pair_of) in rows.items():
        for j, i in enumerate(pair_of):
            ax.add_patch(
                Rectangle((j, y), 0.9, 0.6, facecolor=colour[i], edgecolor="black", lw=0.6)
            )
            text_colour = "white" if i < half / 2 else "black"
            ax.text(
                j + 0.45,
                y + 0.3,
                rf"$\theta_{{{i}}}$",
                ha="center",
                va="center",
                fontsize=8,
                color=text_colour,
            )
            ax.text(j + 0.45, y - 0.12, str(j), ha="center", va="top", fontsize=7, color="0.3")
        for i in range(half):
            a, b = [j for j, p in enumerate(pair_of) if p == i]
            ax.add_patch(
                Arc(
                    ((a + b) / 2 + 0.45, y + 0.6),
                    b - a,
                    0.5 + 0.12 * (b - a),
                    theta1=0,
                    theta2=180,
                    color=colour[i],
                    lw=1.3,
                )
            )
        ax.text(-0.3, y + 0.3, label, ha="right", va="center", fontsize=9)
    ax.set(xlim=(-0.2 - 0.35 * head_dim, head_dim + 0.1), ylim=(-0.55, 2.7))
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(
        f"Which dimensions rotate together (head_dim = {head_dim}; small numbers: dimension index)",
        fontsize=9,
    )
    return fig


def mean_band_figure(
    x: Sequence[float] | torch.Tensor | np.ndarray,
    means: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    spreads: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    reference: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray] | None = None,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    logx: bool = False,
    width: float = 7.0,
    height: float = 3.6,
) -> Figure:
    """Averages over random draws as lines, each with a shaded band of plus or minus its spread.

    Args:
        x: shared x values.
        means: name -> mean curve.
        spreads: name -> half-width of the band (e.g. one standard deviation), same keys as
            ``means``.
        reference: optional name -> curve drawn dashed in black (e.g. a closed form the means
            should follow).
        xlabel, ylabel, title, logx: as in :func:`curves_figure`.
    """
    if set(spreads) != set(means):
        raise ValueError(
            f"spreads must have the keys of means, got {sorted(spreads)} and {sorted(means)}"
        )
    fig, ax = _figure(width, height)
    xs = _np(x)
    for k, (name, mean) in enumerate(means.items()):
        m, s = _np(mean), _np(spreads[name])
        colour = OKABE_ITO[k % len(OKABE_ITO)]
        ax.fill_between(xs, m - s, m + s, color=colour, alpha=0.18, lw=0)
        ax.plot(xs, m, color=colour, lw=1.6, label=f"{name} (mean ± 1 s.d.)")
    for name, curve in (reference or {}).items():
        ax.plot(xs, _np(curve), color="black", ls="--", lw=1.0, label=name)
    ax.axhline(0, color="0.35", lw=0.8)
    if logx:
        ax.set_xscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
    return fig


# ------------------------------------------------------------------ chapter 7 (ALiBi, scaling)


def masked_matrices_figure(
    matrices: Mapping[str, torch.Tensor | np.ndarray],
    *,
    annotate: bool = False,
    mask_label: str = "masked (−∞)",
    colorbar_label: str = "",
    xlabel: str = "key position j",
    ylabel: str = "query position i",
    width: float | None = None,
    height: float = 3.4,
) -> Figure:
    """Several square matrices side by side whose ``-inf`` entries are masked (e.g. ALiBi biases
    under a causal mask).

    Finite entries share one sequential colour scale (viridis, from the smallest finite value to
    the largest); ``-inf`` entries are drawn in light grey and named in a legend.

    Args:
        matrices: name -> ``(n, n)`` values, finite or ``-inf``.
        annotate: write each finite value in its cell (for small matrices, n <= 12).
        mask_label: legend text for the grey cells.
        colorbar_label: label of the colour bar.
        xlabel, ylabel: axis labels.
        width, height: figure size in inches.
    """
    from matplotlib.patches import Patch

    datas = [_np(m) for m in matrices.values()]
    finite = np.concatenate([d[np.isfinite(d)] for d in datas])
    if finite.size == 0:
        raise ValueError("matrices must have at least one finite entry")
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    cmap = plt.get_cmap(SEQUENTIAL).with_extremes(bad="0.86")
    n = len(datas)
    fig, axes = _figure(width or 3.3 * n + 0.9, height, ncols=n)
    axes = np.atleast_1d(axes)
    im = None
    for ax, name, data in zip(axes, matrices, datas):
        shown = np.ma.masked_invalid(np.where(np.isneginf(data), np.nan, data))
        im = ax.imshow(shown, interpolation="nearest", aspect="equal", cmap=cmap, vmin=lo, vmax=hi)
        ax.set(title=name, xlabel=xlabel)
        if annotate and max(data.shape) <= 12:
            for (i, j), value in np.ndenumerate(data):
                if np.isfinite(value):
                    dark = (value - lo) / (hi - lo) < 0.55
                    ax.text(
                        j,
                        i,
                        f"{value + 0.0:.2g}",
                        ha="center",
                        va="center",
                        fontsize=6.5,
                        color="white" if dark else "black",
                    )
    axes[0].set_ylabel(ylabel)
    fig.colorbar(im, ax=list(axes), fraction=0.03, pad=0.01, label=colorbar_label)
    axes[-1].legend(
        handles=[Patch(facecolor="0.86", edgecolor="0.6", label=mask_label)],
        loc="upper right",
        fontsize=8,
        frameon=True,
        framealpha=0.9,
    )
    return fig


def marked_curves_figure(
    x: Sequence[float]
    | torch.Tensor
    | np.ndarray
    | Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    curves: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    hlines: Mapping[str, float] | None = None,
    vlines: Mapping[str, float] | None = None,
    shade: tuple[float, float, str] | None = None,
    markers: bool = False,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
    legend_loc: str = "best",
    vline_label_at: float = 0.02,
    width: float = 7.0,
    height: float = 3.8,
) -> Figure:
    """Named curves with named reference lines and an optional shaded range of x.

    Curves are told apart by colour (Okabe-Ito) and line style, and with ``markers`` also by
    marker shape, so that curves lying on top of each other stay distinguishable.

    Args:
        x: shared x values, or name -> x values per curve.
        curves: name -> y values.
        hlines: name -> y of a dotted horizontal reference line, labelled at the left.
        vlines: name -> x of a dotted vertical reference line, labelled along it.
        shade: ``(x0, x1, label)``: a grey band over that range of x (e.g. the training length).
        markers: draw a marker at every point.
        xlim, ylim: axis limits (default: matplotlib's).
        legend_loc: where the legend goes.
        vline_label_at: height of the vertical lines' labels, as a fraction of the axes
            (0 = bottom).
        xlabel, ylabel, title, logx, logy, width, height: as in :func:`curves_figure`.
    """
    fig, ax = _figure(width, height)
    styles = ("-", "--", "-.", ":")
    marks = ("o", "s", "^", "v", "D", "P", "X", "*")
    if shade is not None:
        ax.axvspan(shade[0], shade[1], color="0.92", zorder=0, label=shade[2])
    for k, (name, y) in enumerate(curves.items()):
        xs = _np(x[name]) if isinstance(x, Mapping) else _np(x)
        ax.plot(
            xs,
            _np(y),
            label=name,
            color=OKABE_ITO[k % len(OKABE_ITO)],
            ls=styles[k % len(styles)],
            lw=1.5,
            marker=marks[k % len(marks)] if markers else None,
            ms=3.5,
            zorder=2 + k,
        )
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    for name, value in (hlines or {}).items():
        ax.axhline(value, color="0.35", ls=":", lw=1, zorder=1)
        ax.annotate(
            name,
            (0.01, value),
            xycoords=("axes fraction", "data"),
            va="bottom",
            fontsize=8,
            color="0.25",
        )
    for name, value in (vlines or {}).items():
        ax.axvline(value, color="0.35", ls=":", lw=1, zorder=1)
        ax.annotate(
            name,
            (value, vline_label_at),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="bottom",
            ha="right",
            fontsize=8,
            color="0.25",
            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
        )
    if xlim is not None:
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc=legend_loc)
    return fig


# ------------------------------------------------------------ chapter 5 (learned versus fixed)


def band_panels_figure(
    panels: Mapping[str, Mapping[str, tuple]],
    *,
    xlabel: str = "",
    ylabel: str = "",
    vline: tuple[float, str] | None = None,
    hlines: Mapping[str, float] | None = None,
    logy: bool = False,
    ylim: tuple[float, float] | None = None,
    width: float | None = None,
    height: float = 3.6,
) -> Figure:
    """Side-by-side panels of mean curves with shaded spreads (e.g. over seeds), sharing y.

    Curves are told apart by colour (Okabe-Ito) and line style; NaN values leave gaps (for
    example lengths a model could not be run at).

    Args:
        panels: panel title -> (curve name -> ``(x, mean, spread)``); the band is mean ± spread.
        vline: ``(x, label)`` for a dotted vertical line in every panel (e.g. the training length).
        hlines: name -> y of a dotted horizontal reference line, labelled at the left.
        logy: logarithmic y axis.
        ylim: y limits.
        xlabel, ylabel, width, height: as in :func:`curves_figure`.
    """
    n = len(panels)
    fig, axes = _figure(width or 4.2 * n + 0.4, height, ncols=n, sharey=True)
    axes = np.atleast_1d(axes)
    styles = ("-", "--", "-.", ":")
    for ax, (title, curves) in zip(axes, panels.items()):
        for k, (name, (x, mean, spread)) in enumerate(curves.items()):
            xs, m, s = _np(x), _np(mean), _np(spread)
            colour = OKABE_ITO[k % len(OKABE_ITO)]
            ax.fill_between(xs, m - s, m + s, color=colour, alpha=0.18, lw=0)
            ax.plot(xs, m, color=colour, ls=styles[k % len(styles)], lw=1.5, label=name)
        if vline is not None:
            ax.axvline(vline[0], color="0.35", ls=":", lw=1)
            ax.annotate(
                vline[1],
                (vline[0], 0.98),
                xycoords=("data", "axes fraction"),
                rotation=90,
                va="top",
                ha="right",
                fontsize=8,
                color="0.25",
            )
        for name, value in (hlines or {}).items():
            ax.axhline(value, color="0.35", ls=":", lw=1)
            ax.annotate(
                name,
                (0.01, value),
                xycoords=("axes fraction", "data"),
                va="bottom",
                fontsize=8,
                color="0.25",
            )
        if logy:
            ax.set_yscale("log")
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set(title=title, xlabel=xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[-1].legend(fontsize=8, frameon=False, loc="best")
    return fig


curves_figure = marked_curves_figure
"""Line plot of several named curves: :func:`marked_curves_figure`, under the name the
early chapters use."""
