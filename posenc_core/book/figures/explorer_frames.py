"""The explorers' figures drawn with matplotlib: what a page shows where JavaScript does not
run, and ``Explorer.figure()`` in a notebook.

The explorers themselves draw in the browser (``posenc_core/book/widgets/explorer.js``); these
functions draw the same quantities for one set of values. Each draws a new figure or, given
the figure it returned before (``fig=``), updates that figure's artists in place; the layout is
computed once, when the figure is created. :func:`figure_png` then redraws only the artists that
change on top of a cached picture of the rest (axes, ticks, labels, colour bars) while the axes
limits stay the same. The chapters' own figures are in :mod:`posenc_core.book.figures`, whose
palette and helpers these share.

This module imports matplotlib; the numerical core never imports it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from posenc_core import _validation as check
from posenc_core.book.figures.style import (
    DIVERGING,
    OKABE_ITO,
    TEXT_SIZE_KEY,
    as_numpy,
    drawn_text_pt,
    new_figure,
)

__all__ = [
    "EXPLORER_MIN_PT",
    "figure_png",
    "fingerprint_figure",
    "base_figure",
    "circle_shift_figure",
    "rope_decay_figure",
    "rope_scaling_figure",
    "position_band_figure",
    "patch_scores_figure",
]

EXPLORER_MIN_PT = 9.0
"""Smallest text of the explorers' matplotlib figures, in points. The figure a page shows
without JavaScript is drawn at 72 px per inch, one CSS px per point."""


def figure_png(fig: Figure, *, dpi: float = 72.0, colors: int | None = None) -> bytes:
    """Render a figure to PNG bytes with matplotlib's Agg renderer.

    Figures from the explorer functions below are redrawn incrementally: the unchanging
    parts are drawn once per size and axes limits, then only the changing artists.

    Args:
        fig: the figure (whatever its backend; it is drawn with Agg).
        dpi: resolution in dots per inch, in (0, 600].
        colors: None for a full-colour PNG (fast to encode, for live updates), or an integer
            in 2..256 for a palette PNG with at most that many colours, several times smaller
            (for the figure stored in a page).

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
    from PIL.PngImagePlugin import PngInfo

    image = Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3])
    # the smallest text, in points (as figures.figure_for_display records it), so that a test of
    # the built page can check what a reader sees; the figure was just drawn, so its tick
    # labels exist
    info = PngInfo()
    info.add_text(TEXT_SIZE_KEY, f"{drawn_text_pt(fig):g}")
    buf = io.BytesIO()
    if colors is None:
        image.save(buf, format="png", compress_level=1, pnginfo=info)
    else:
        image = image.quantize(
            colors=colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
        )
        image.save(buf, format="png", optimize=True, pnginfo=info)
    return buf.getvalue()


def _explorer_artists(fig: Figure | None, kind: str) -> dict | None:
    """The artists that an earlier call of the explorer figure ``kind`` stored on ``fig``."""
    if fig is None:
        return None
    artists = getattr(fig, "_posenc_artists", None)
    if not isinstance(artists, dict) or artists.get("kind") != kind:
        raise ValueError(f"fig must be None or a figure returned by explorer_frames.{kind}")
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
    data = as_numpy(table)
    if data.ndim != 2:
        raise ValueError(f"table must have shape (n, d), got {data.shape}")
    n, d = data.shape
    position = check.int_in_range("position", position, 0, n - 1)  # a row of the table
    art = _explorer_artists(fig, "fingerprint_figure")
    new = art is None
    if new:
        fig, (ax, prof) = new_figure(
            width, height, nrows=2, gridspec_kw={"height_ratios": [3, 1.2]}
        )
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
            fontsize=EXPLORER_MIN_PT,
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
    data, wl, k, sim = (
        as_numpy(table),
        as_numpy(wavelength),
        as_numpy(offsets),
        as_numpy(similarity),
    )
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
            fontsize=EXPLORER_MIN_PT,
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
        wave.legend(
            fontsize=EXPLORER_MIN_PT, frameon=False, loc="upper left", bbox_to_anchor=(0, 0.93)
        )
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
        art["ref_wave"].set_data(pairs, as_numpy(reference["wavelength"]))
        ref = as_numpy(reference["similarity"])
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

    A point (sin, cos) is drawn at x = cos, y = sin, as in
    :func:`~posenc_core.book.figures.unit_circle_figure`, so
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
    m, p0, p1 = as_numpy(matrix), as_numpy(start_points), as_numpy(end_points)
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
            fontsize=EXPLORER_MIN_PT,
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
    x, y = as_numpy(distances), as_numpy(score)
    if x.shape != y.shape or x.ndim != 1 or not (x > 0).all():
        raise ValueError(
            f"distances (positive) and score must be 1-D of one shape, got {x.shape} and {y.shape}"
        )
    art = _explorer_artists(fig, "rope_decay_figure")
    new = art is None
    if new:
        fig, ax = new_figure(width, height)
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
        ax.legend(fontsize=EXPLORER_MIN_PT, frameon=False, loc="upper right")
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
        art["bound"].set_data(x, as_numpy(bound))
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
    x, y = as_numpy(wavelength), as_numpy(ratio)
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
        fig, ax = new_figure(width, height)
        ax.axhline(1.0, color=OKABE_ITO[2], ls="--", lw=1)
        ax.annotate(
            "kept (ratio 1)",
            (0.01, 1.0),
            xycoords=("axes fraction", "data"),
            va="bottom",
            fontsize=EXPLORER_MIN_PT,
            color=OKABE_ITO[2],
        )
        inv = ax.axhline(1.0, color=OKABE_ITO[4], ls="--", lw=1)
        inv_note = ax.text(
            0.01,
            1.0,
            "",
            transform=ax.get_yaxis_transform(),
            va="top",
            fontsize=EXPLORER_MIN_PT,
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
                fontsize=EXPLORER_MIN_PT,
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


def position_band_figure(
    x: np.ndarray,
    mean: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    *,
    train_len: int,
    reference: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
    label: str = "selected",
    reference_label: str = "reference",
    n_seeds: int | None = None,
    ylim: tuple[float, float] | None = None,
    ylabel: str = "held-out loss (nats per byte)",
    title: str = "",
    width: float = 6.4,
    height: float = 3.6,
    fig: Figure | None = None,
) -> Figure:
    """One curve by position over seeds (mean line, min-max band), against a reference curve.

    The inputs are what :func:`~posenc_core.book.figures.seed_band` returns; the training length
    [0, L) is shaded and the x ticks are multiples of L. The x range, the y limits, the legend
    and the reference's position are fixed when the figure is created (so frames compare).

    Args:
        x: ``(B,)`` bucket centres; mean, low, high: ``(B,)`` statistics over seeds.
        train_len: L.
        reference: optional ``(x, mean, low, high)`` drawn black dashed with a grey band.
        label, reference_label: legend entries (fixed at creation).
        n_seeds: written in the legend ("min-max over 3 seeds"); None: "over seeds".
        ylim: y limits (default: from the data of the first call, with a margin).
        ylabel, title: axis label; the title changes with every update.
        width, height: figure size in inches, for a new figure.
        fig: a figure this function returned before, to update in place.

    Returns:
        the figure (``fig`` itself when given).
    """
    xs, m, lo, hi = (as_numpy(a) for a in (x, mean, low, high))
    if not (xs.ndim == 1 and xs.shape == m.shape == lo.shape == hi.shape and xs.size):
        raise ValueError(
            f"x, mean, low and high must be 1-D of one shape, got {xs.shape}, {m.shape}, "
            f"{lo.shape} and {hi.shape}"
        )
    train_len = check.positive_int("train_len", train_len)
    art = _explorer_artists(fig, "position_band_figure")
    new = art is None
    if new:
        from posenc_core.book.figures import length_ticks

        fig, ax = new_figure(width, height)
        n_pos = int(round(2 * xs[-1] - xs[-2] + 1)) if xs.size > 1 else int(xs[-1]) + 1
        ax.axvspan(0, train_len, color="0.93", zorder=0, label=f"training length L = {train_len}")
        seeds = "seeds" if n_seeds is None else f"{n_seeds} seeds"
        if reference is not None:
            rx, rm, rlo, rhi = (as_numpy(a) for a in reference)
            ax.fill_between(rx, rlo, rhi, color="0.6", alpha=0.3, lw=0, zorder=1)
            ax.plot(rx, rm, color="black", ls="--", lw=1.2, zorder=2, label=reference_label)
        (line,) = ax.plot([], [], color=OKABE_ITO[0], lw=1.6, zorder=4, label=label)
        ax.fill_between(
            [], [], [], color=OKABE_ITO[0], alpha=0.25, lw=0, label=f"min-max over {seeds}"
        )  # fmt: skip (legend entry only)
        length_ticks(ax, train_len, n_pos)
        if ylim is None:
            both = [lo, hi] + ([rlo, rhi] if reference is not None else [])
            a, b = float(min(v.min() for v in both)), float(max(v.max() for v in both))
            ylim = (a - 0.05 * (b - a), b + 0.05 * (b - a))
        ax.set(xlim=(0, n_pos), ylim=ylim, xlabel=f"position (L = {train_len})", ylabel=ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=EXPLORER_MIN_PT, frameon=False, loc="upper left")
        art = {
            "kind": "position_band_figure",
            "ax": ax,
            "line": line,
            "band": None,
            "animated": [line, ax.title],
        }
    ax = art["ax"]
    art["line"].set_data(xs, m)
    if art["band"] is not None:
        art["animated"].remove(art["band"])
        art["band"].remove()
    band = ax.fill_between(xs, lo, hi, color=OKABE_ITO[0], alpha=0.25, lw=0, zorder=3)
    art["band"] = band
    art["animated"].append(band)
    if not new:
        band.set_animated(True)
    ax.set_title(title, fontsize=10)
    fig = ax.figure
    return _keep_layout(fig, art) if new else fig


def patch_scores_figure(
    grids: Sequence[np.ndarray],
    query: tuple[int, int],
    *,
    titles: Sequence[str],
    vlim: tuple[float, float],
    title: str = "",
    width: float = 6.4,
    height: float = 3.3,
    fig: Figure | None = None,
) -> Figure:
    """Score grids of one query patch against every patch, side by side (chapter 9's explorer).

    One panel per grid on one colour scale (viridis, fixed at ``vlim`` so frames compare),
    the query patch outlined in black, one colour bar. Later calls with ``fig`` only replace
    the images, move the outline and change the title.

    Args:
        grids: ``(h, w)`` score grids, all of one shape.
        query: ``(row, col)`` of the query patch.
        titles: one title per panel (fixed at creation).
        vlim: colour scale limits.
        title: the figure's title (changes with every update).
        width, height: figure size in inches, for a new figure.
        fig: a figure this function returned before, to update in place.

    Returns:
        the figure (``fig`` itself when given).
    """
    from matplotlib.patches import Rectangle

    gs = [as_numpy(g) for g in grids]
    if not gs or any(g.ndim != 2 or g.shape != gs[0].shape for g in gs):
        raise ValueError(f"grids must be (h, w) arrays of one shape, got {[g.shape for g in gs]}")
    if len(titles) != len(gs):
        raise ValueError(f"titles must give one title per grid, got {len(titles)} for {len(gs)}")
    r, c = query
    art = _explorer_artists(fig, "patch_scores_figure")
    new = art is None
    if new:
        fig, axes = new_figure(width, height, ncols=len(gs))
        axes = list(np.atleast_1d(axes))
        images, marks = [], []
        for ax, g, t in zip(axes, gs, titles):
            images.append(ax.imshow(g, cmap="viridis", vmin=vlim[0], vmax=vlim[1]))
            mark = Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="black", lw=2.2)
            ax.add_patch(mark)
            marks.append(mark)
            ax.set_title(t, fontsize=9)
            ax.set(xlabel="column", ylabel="row")
        fig.colorbar(images[0], ax=axes, fraction=0.04, pad=0.03, label="score q . k")
        art = {
            "kind": "patch_scores_figure",
            "images": images,
            "marks": marks,
            "animated": [*images, *marks, fig._suptitle or fig.suptitle(" ", fontsize=10)],
        }
    for image, mark, g in zip(art["images"], art["marks"], gs):
        image.set_data(g)
        mark.set_xy((c - 0.5, r - 0.5))
    fig = art["images"][0].figure
    fig._suptitle.set_text(title)
    return _keep_layout(fig, art) if new else fig
