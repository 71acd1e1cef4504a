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
from matplotlib.patches import Patch

from .. import _validation as check
from ..multi_axis import pair_axes
from ..sinusoidal import sinusoidal_table, wavelengths
from ..t5_bias import _check_buckets, relative_position_bucket

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
"""Okabe and Ito's palette, distinguishable under the common colour-vision deficiencies."""

DIVERGING = "RdBu_r"
SEQUENTIAL = "viridis"
TRAINING_TINT = "#DCEBF7"
"""Background of the positions seen in training (a pale blue; grey is kept for reference bands)."""

# How figures are sized and shown. The book's text column is 672 CSS px wide at 1280 px (and
# a phone's is about 360 px); a figure is drawn at DISPLAY_DPI CSS px per inch, so one at most
# COLUMN_WIDTH inches wide (tight bounding box) is shown at its drawn size, never shrunk, and
# its smallest text (MIN_TEXT_PT) is 7 pt x 100/72 = 9.7 CSS px. It is stored at PIXEL_RATIO
# times that resolution, sharp on high-density screens.
COLUMN_WIDTH = 6.6
DISPLAY_DPI = 100
PIXEL_RATIO = 2
MIN_TEXT_PT = 7.0
TEXT_SIZE_KEY = "posenc:smallest-text-pt"
"""Key of the PNG text chunk that holds a shown figure's smallest text size, in points."""


def smallest_text_pt(fig: Figure) -> float:
    """The size in points of the smallest visible, non-empty text of ``fig`` (titles, labels,
    tick labels, legends, annotations); ``inf`` when it has none."""
    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    fig.canvas.draw()  # tick labels exist only once drawn
    return _drawn_text_pt(fig)


def _drawn_text_pt(fig: Figure) -> float:
    """:func:`smallest_text_pt` of a figure that has just been drawn (no second draw)."""
    from matplotlib.text import Text

    sizes = [
        t.get_fontsize()
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.get_visible())
    ]
    return min(sizes, default=float("inf"))


def figure_for_display(fig: Figure) -> tuple[bytes, dict]:
    """``fig`` as the notebooks show it: a PNG at ``DISPLAY_DPI * PIXEL_RATIO`` (tight bounding
    box) with its smallest text size in the text chunk :data:`TEXT_SIZE_KEY`, and the size to
    show it at (``{"width": w, "height": h}`` in CSS px, the PNG's size over PIXEL_RATIO).

    Registered as IPython's ``image/png`` formatter for figures by every figure function of
    this module, so that Jupyter, Colab and the book (MyST-NB reads the width and height)
    show figures at their drawn size and twice the resolution.
    """
    import io
    import struct

    smallest = smallest_text_pt(fig)
    buf = io.BytesIO()
    fig.savefig(
        buf,
        format="png",
        dpi=DISPLAY_DPI * PIXEL_RATIO,
        bbox_inches="tight",
        facecolor="white",
        metadata={TEXT_SIZE_KEY: f"{smallest:g}"},
    )
    png = buf.getvalue()
    width, height = struct.unpack(">II", png[16:24])  # IHDR, right after the 8-byte signature
    return png, {"width": width // PIXEL_RATIO, "height": height // PIXEL_RATIO}


def _show_figures_sharp() -> None:
    """In an IPython session, show this module's figures with :func:`figure_for_display`.
    Called after a figure is made: matplotlib's inline backend registers its own formatter
    when pyplot first makes a figure, and the last registration wins."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    formatters = getattr(getattr(shell, "display_formatter", None), "formatters", None)
    if not formatters or "image/png" not in formatters:
        return
    formatters["image/png"].for_type(Figure, figure_for_display)


def _np(t: torch.Tensor | np.ndarray) -> np.ndarray:
    return (
        t.detach().cpu().double().numpy()
        if isinstance(t, torch.Tensor)
        else np.asarray(t, dtype=float)
    )


def _figure(width: float = COLUMN_WIDTH, height: float = 3.6, ncols: int = 1, nrows: int = 1, **kw):
    # wider than the column would only be shrunk on the page, text with it
    width = min(width, COLUMN_WIDTH)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kw)
    plt.close(fig)  # keep pyplot from showing it a second time; callers display or glue it
    _show_figures_sharp()
    return fig, axes


def _panels(n: int, row_height: float, *, max_cols: int = 2, extra: float = 0.0, **kw):
    """``n`` panels for the column: at most ``max_cols`` a row (each panel stays large enough
    to read), rows of ``row_height`` inches plus ``extra`` (a legend below, say). Returns the
    figure and the ``n`` axes in reading order; the grid's unused cells are hidden."""
    cols = max(1, min(n, max_cols))
    rows = -(-n // cols)
    fig, grid = _figure(COLUMN_WIDTH, row_height * rows + extra, nrows=rows, ncols=cols,
                        squeeze=False, **kw)  # fmt: skip
    flat = list(grid.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def _first_column(axes: Sequence, cols: int) -> list:
    """The axes that start a row of a grid filled row by row, ``cols`` a row."""
    return list(axes[::cols])


def _legend_below(fig: Figure, handles=None, labels=None, *, ax=None, ncol: int | None = None):
    """A legend under the plot area, outside every axes, so that it never covers data."""
    if handles is None:
        handles, labels, seen = [], [], set()
        for source in [ax] if ax is not None else fig.axes:
            for h, label in zip(*source.get_legend_handles_labels()):
                if label not in seen:
                    seen.add(label)
                    handles.append(h)
                    labels.append(label)
    if not handles:
        return None
    ncol = ncol or min(len(handles), 3)
    return fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8,
                      frameon=False)  # fmt: skip


def heatmap_figure(
    table: torch.Tensor | np.ndarray,
    *,
    highlight: int | None = None,
    title: str = "",
    xlabel: str = "dimension",
    ylabel: str = "position",
    signed: bool = True,
    width: float = COLUMN_WIDTH,
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
    cols = 3 if n == 3 else 2
    fig, axes = _panels(n, height * 0.8 if n > 2 else height, max_cols=cols)
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
    for ax in _first_column(axes, cols):
        ax.set_ylabel(ylabel)
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
    fig, axes = _panels(n, height, max_cols=2)
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
    cols = min(n, 3)
    fig, axes = _panels(n, min(height, 2.9), max_cols=cols)
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
        )
        ax.set_title(f"ω = {w:.3g} rad/position", fontsize=9)
        ax.grid(alpha=0.3)
    for ax in _first_column(axes, cols):
        ax.set_ylabel("sin(ωp)  (dim 2i)")
    fig.colorbar(sc, ax=list(axes), location="bottom", fraction=0.04, aspect=50, label="position p")
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
    width: float = COLUMN_WIDTH,
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
    _legend_below(fig, ncol=2)
    return fig


# --------------------------------------------------------------------------- chapter 4


def offset_profiles_figure(
    offsets: Sequence[float] | torch.Tensor | np.ndarray,
    profiles: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    xlabel: str = "offset",
    strength_label: str = "range (max − min)",
    title: str = "",
    width: float = COLUMN_WIDTH,
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


def pair_layout_figure(
    head_dim: int = 8, *, width: float = COLUMN_WIDTH, height: float = 2.3
) -> Figure:
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
    width: float = COLUMN_WIDTH,
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
    _legend_below(fig)
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
    cols = 3 if n == 3 else 2
    fig, axes = _panels(n, height * 0.85 if n > 2 else height, max_cols=cols)
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
                        fontsize=MIN_TEXT_PT,
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
    legend_loc: str = "below",
    vline_label_at: float = 0.02,
    width: float = COLUMN_WIDTH,
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
        legend_loc: where the legend goes: ``"below"`` (default) under the plot, outside the
            axes, so that it never covers a curve; or a matplotlib location inside the axes.
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
    if legend_loc == "below":
        _legend_below(fig)
    else:
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
    fig, axes = _panels(n, height, max_cols=2, extra=0.4, sharey=True)
    styles = ("-", "--", "-.", ":")
    for ax, (title, curves) in zip(axes, panels.items()):
        for k, (name, (x, mean, spread)) in enumerate(curves.items()):
            xs, m, s = _np(x), _np(mean), _np(spread)
            colour = OKABE_ITO[k % len(OKABE_ITO)]
            ax.fill_between(xs, m - s, m + s, color=colour, alpha=0.18, lw=0)
            ax.plot(xs, m, color=colour, ls=styles[k % len(styles)], lw=1.5, label=name)
        if vline is not None:
            # named in the legend below the plot: a label written along the line ran through
            # the curves it crosses
            ax.axvline(vline[0], color="0.35", ls=":", lw=1.2, label=vline[1])
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
    for ax in _first_column(axes, 2):
        ax.set_ylabel(ylabel)
    _legend_below(fig)
    return fig


curves_figure = marked_curves_figure
"""Line plot of several named curves: :func:`marked_curves_figure`, under the name the
early chapters use."""


# ------------------------------------------------------- chapter 7 (T5's bucketed relative bias)


def t5_bucket_figure(
    *,
    num_buckets: int = 32,
    max_distance: int = 128,
    span: int | None = None,
    grid: int | None = None,
    width: float = COLUMN_WIDTH,
    height: float = 6.4,
) -> Figure:
    """T5's bucket ids (:func:`~posenc_core.t5_bias.relative_position_bucket`), bidirectional
    (an encoder) beside causal (a decoder).

    Top row: the bucket id against the relative position ``r = j - i`` (key minus query), with
    the exact region shaded, the distance from which every key shares the last bucket, and
    ``max_distance`` marked. Bottom row: the ids on a grid of query positions i and key
    positions j (a Toeplitz image: constant along every diagonal), sequential colours
    (viridis).

    Args:
        num_buckets, max_distance: as in :func:`~posenc_core.t5_bias.relative_position_bucket`
            (T5's 32 and 128 by default).
        span: the top row shows ``r`` in ``-span .. span``, a positive integer (default
            ``max_distance + max_distance // 4``).
        grid: the bottom row shows ``grid`` queries and keys, a positive integer (default
            ``span``).
        width, height: figure size in inches.
    """
    for bidirectional in (True, False):  # both panels need valid arguments
        _check_buckets(bidirectional, num_buckets, max_distance)
    span = max_distance + max_distance // 4 if span is None else check.positive_int("span", span)
    grid = span if grid is None else check.positive_int("grid", grid)
    r = torch.arange(-span, span + 1)  # (2 span + 1,)
    pos = torch.arange(grid)
    rel = pos[None, :] - pos[:, None]  # (grid, grid), j - i
    fig, axes = _figure(width, height, ncols=2, nrows=2, gridspec_kw={"height_ratios": [1, 1.25]})
    images = []
    for col, bidirectional in enumerate((True, False)):
        kw = {
            "bidirectional": bidirectional,
            "num_buckets": num_buckets,
            "max_distance": max_distance,
        }
        ids = relative_position_bucket(r, **kw)  # (2 span + 1,)
        half = num_buckets // 2 if bidirectional else num_buckets
        exact = half // 2
        back = relative_position_bucket(-torch.arange(max_distance + 1), **kw)
        last = int((back == half - 1).nonzero()[0])  # the last bucket starts here
        name = "bidirectional (encoder)" if bidirectional else "causal (decoder)"
        ax = axes[0, col]
        lo = -exact + 0.5
        hi = exact - 0.5 if bidirectional else 0.5
        ax.axvspan(lo, hi, color="0.88", zorder=0, label=f"exact: |r| < {exact}")
        ax.plot(_np(r), _np(ids), color=OKABE_ITO[col], lw=1.4, drawstyle="steps-mid")
        marks = [(-last, f"last bucket: |r| ≥ {last}", "--")]
        marks.append((-max_distance, f"max_distance {max_distance}", ":"))
        if bidirectional:
            marks += [(last, None, "--"), (max_distance, None, ":")]
        for x, label, ls in marks:
            ax.axvline(x, color="0.35", ls=ls, lw=1, zorder=1, label=label)
        ax.set(
            title=name,
            xlabel="relative position r = j − i",
            ylabel="bucket id" if col == 0 else "",
            ylim=(-0.5, num_buckets - 0.5),
        )
        ax.grid(alpha=0.3)
        ax.legend(
            fontsize=7,
            framealpha=0.9,
            edgecolor="none",
            loc="upper left" if bidirectional else "upper right",
        )
        ax = axes[1, col]
        image = relative_position_bucket(rel, **kw)  # (grid, grid)
        images.append(
            ax.imshow(
                _np(image),
                cmap=SEQUENTIAL,
                vmin=0,
                vmax=num_buckets - 1,
                interpolation="nearest",
                aspect="equal",
            )
        )
        ax.set(
            xlabel="key position j",
            ylabel="query position i" if col == 0 else "",
            title=f"bucket ids, {grid} × {grid}",
        )
    fig.colorbar(images[-1], ax=list(axes[1]), fraction=0.04, pad=0.02, label="bucket id")
    return fig


# ------------------------------------------- chapters 5 and 7 (the language model, by position)


def seed_band(
    curves: Sequence[Sequence[float]] | torch.Tensor | np.ndarray, *, bucket: int = 8
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-position curves of several seeds, bucketed: the mean and the min-max band.

    Positions are grouped into consecutive buckets of ``bucket`` positions ([0, bucket),
    [bucket, 2 bucket), ...; a shorter last bucket if ``bucket`` does not divide P). Each seed's
    curve is averaged over each bucket first; the band is the smallest and largest of those
    seed means, the line their mean over seeds.

    Args:
        curves: ``(S, P)`` values, one row per seed (``(P,)``: one seed).
        bucket: positions per bucket, a positive integer (1: no bucketing).

    Returns:
        ``(x, mean, low, high)``, each ``(B,)``: the centre of each bucket (the mean of its
        positions) and the statistics over seeds.
    """
    a = _np(curves)
    a = a[None] if a.ndim == 1 else a
    if a.ndim != 2 or a.shape[1] < 1 or a.shape[0] < 1:
        raise ValueError(f"curves must have shape (S, P) or (P,), got {tuple(np.shape(curves))}")
    w = check.positive_int("bucket", bucket)
    edges = list(range(0, a.shape[1], w)) + [a.shape[1]]
    per_seed = np.stack([a[:, lo:hi].mean(1) for lo, hi in zip(edges[:-1], edges[1:])], 1)
    x = np.array([(lo + hi - 1) / 2 for lo, hi in zip(edges[:-1], edges[1:])])
    return x, per_seed.mean(0), per_seed.min(0), per_seed.max(0)


def _length_ticks(ax, train_len: int, n_positions: int) -> None:
    """Put the x ticks of a by-position axis at 0, L, 2L, ... labelled "0", "L", "2L", ..."""
    ticks = np.arange(0, n_positions + 1, train_len)
    step = max(1, int(np.ceil(len(ticks) / 9)))  # at most about 9 labels
    ticks = ticks[::step]
    ax.set_xticks(ticks, ["0" if t == 0 else ("L" if t == train_len else f"{t // train_len}L")
                          for t in ticks])  # fmt: skip


def position_loss_figure(
    panels: Mapping[str, Mapping[str, Sequence[Sequence[float]] | np.ndarray]],
    *,
    train_len: int,
    reference: Mapping[str, Sequence[Sequence[float]] | np.ndarray] | None = None,
    targets: Mapping[str, float] | None = None,
    bucket: int = 8,
    ylim: tuple[float, float] | None = None,
    xlabel: str | None = None,
    ylabel: str = "held-out loss (nats per byte)",
    width: float | None = None,
    height: float = 3.8,
) -> Figure:
    """Loss by position over several seeds, in side-by-side panels that share y.

    Each curve is a ``(S, P)`` stack (one row per seed, e.g.
    :func:`~posenc_core.book.lm_study.method_curves`), drawn as :func:`seed_band` gives it: the
    mean over seeds of bucketed means, with a shaded min-max band over seeds. The training
    length is shaded and the x ticks are multiples of L.

    Args:
        panels: panel title -> (curve name -> ``(S, P)`` curves).
        train_len: L, in positions.
        reference: optional name -> ``(S, P)`` curves drawn in every panel in black, dashed,
            with a grey band (e.g. the unscaled model).
        targets: optional panel title -> x of a dotted vertical line in that panel (e.g. the
            length s L that a factor s targets).
        bucket: positions per bucket (see :func:`seed_band`).
        ylim: y limits (default: matplotlib's).
        xlabel: default ``"position (L = <train_len>)"``.
        ylabel, width, height: axis label and figure size (width default 4.2 per panel).

    Returns:
        the figure.
    """
    train_len = check.positive_int("train_len", train_len)
    if not isinstance(panels, Mapping) or not panels:
        raise ValueError(f"panels must be a non-empty mapping of title -> curves, got {panels!r}")
    n = len(panels)
    fig, axes = _panels(n, height, max_cols=2, extra=0.5, sharey=True)
    styles = ("-", "--", "-.", ":")
    n_pos = 0
    for ax, (title, curves) in zip(axes, panels.items()):
        ax.axvspan(
            0, train_len, color=TRAINING_TINT, zorder=0, label=f"training length L = {train_len}"
        )
        for name, c in (reference or {}).items():
            x, m, lo, hi = seed_band(c, bucket=bucket)
            ax.fill_between(x, lo, hi, color="0.6", alpha=0.3, lw=0, zorder=1)
            ax.plot(x, m, color="black", ls="--", lw=1.2, label=name, zorder=2)
            n_pos = max(n_pos, _np(c).shape[-1])
        for k, (name, c) in enumerate(curves.items()):
            x, m, lo, hi = seed_band(c, bucket=bucket)
            colour = OKABE_ITO[k % len(OKABE_ITO)]
            ax.fill_between(x, lo, hi, color=colour, alpha=0.2, lw=0, zorder=3)
            ax.plot(x, m, color=colour, ls=styles[k % len(styles)], lw=1.5, label=name, zorder=4)
            n_pos = max(n_pos, _np(c).shape[-1])
        if targets and title in targets:
            ax.axvline(targets[title], color="0.35", ls=":", lw=1.2, zorder=1)
        _length_ticks(ax, train_len, n_pos)
        ax.set_xlim(0, n_pos)
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set(title=title, xlabel=xlabel or f"position (L = {train_len})")
        ax.grid(alpha=0.3)
    for ax in _first_column(axes, 2):
        ax.set_ylabel(ylabel)
    _legend_below(fig)
    return fig


# ------------------------------------------- chapter 9 (axial 2-D RoPE and M-RoPE, several axes)

AXIS_COLOURS = {
    "row": OKABE_ITO[0],
    "col": OKABE_ITO[1],
    "t": OKABE_ITO[2],
    "h": OKABE_ITO[3],
    "w": OKABE_ITO[4],
}
"""The Okabe-Ito colour of each axis in :func:`pair_axis_figure` (other names get the rest of
the palette, in order of appearance)."""

_AXIS_NAMES = {"row": "row", "col": "column", "t": "temporal", "h": "height", "w": "width"}


def pair_axis_figure(
    head_dim: int = 128,
    mrope_section: Sequence[int] | None = None,
    *,
    schemes: Mapping[str, Sequence[str]] | None = None,
    width: float = COLUMN_WIDTH,
    height: float | None = None,
) -> Figure:
    """Which axis each frequency pair of a head turns with: a strip of head_dim/2 cells per
    scheme, coloured by axis (Okabe-Ito, ``AXIS_COLOURS``), pair indices on the x axis.

    One strip from :func:`~posenc_core.multi_axis.pair_axes` (``mrope_section`` given: M-RoPE's
    temporal, height and width sections; None: axial 2-D RoPE's row and column halves), or
    one strip per entry of ``schemes`` (e.g. axial 2-D above M-RoPE). Within each axis's run of
    pairs the frequency falls from left to right (theta_i = base**(-2i/d) in M-RoPE; the same
    run of frequencies in each half in axial 2-D).

    Args:
        head_dim: per-head width for the single strip (ignored with ``schemes``).
        mrope_section: three pair counts summing to head_dim/2, or None (axial 2-D).
        schemes: optional scheme name -> list of axis names, one per pair, all of one length
            (e.g. ``{"axial 2-D": pair_axes(128), "M-RoPE": pair_axes(128, (16, 24, 24))}``).
        width: figure width in inches; height default 1.0 + 0.6 per strip.

    Returns:
        the figure (one row of cells per scheme, one column per pair, and a legend).
    """
    if schemes is None:
        name = "axial 2-D" if mrope_section is None else f"M-RoPE {list(mrope_section)}"
        schemes = {name: pair_axes(head_dim, mrope_section)}
    if not isinstance(schemes, Mapping) or not schemes:
        raise ValueError(f"schemes must be a non-empty mapping of name -> axes, got {schemes!r}")
    rows = [list(axes) for axes in schemes.values()]
    n_pairs = len(rows[0])
    if n_pairs == 0 or any(len(r) != n_pairs for r in rows):
        raise ValueError(
            f"schemes must give every scheme the same positive number of pairs, got lengths "
            f"{[len(r) for r in rows]}"
        )
    names = list(dict.fromkeys(a for r in rows for a in r))  # axes in order of appearance
    spare = iter(c for c in OKABE_ITO if c not in AXIS_COLOURS.values())
    colours = [AXIS_COLOURS.get(a) or next(spare) for a in names]
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    index = np.array([[names.index(a) for a in r] for r in rows], dtype=float)  # (n, d/2)
    fig, ax = _figure(width, height or 1.0 + 0.6 * len(rows))
    ax.imshow(
        index,
        cmap=ListedColormap(colours),
        vmin=-0.5,
        vmax=len(names) - 0.5,
        aspect="auto",
        interpolation="nearest",
    )
    ax.set_yticks(range(len(rows)), list(schemes))
    step = max(1, n_pairs // 16)
    ax.set_xticks(range(0, n_pairs, step))
    ax.set_xticks(np.arange(-0.5, n_pairs, 1), minor=True)
    ax.tick_params(axis="x", which="minor", length=0)
    ax.grid(which="minor", axis="x", color="white", lw=0.4)
    ax.set_xlabel("pair index i (within each axis's run of pairs, frequency falls left to right)")
    handles = [Patch(color=c, label=_AXIS_NAMES.get(a, a)) for a, c in zip(names, colours)]
    ax.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=len(names),
        fontsize=8,
        frameon=False,
    )
    return fig


def score_grid_figure(
    scores: torch.Tensor | np.ndarray | Sequence[torch.Tensor | np.ndarray],
    *,
    query: tuple[int, int] | None = None,
    titles: Sequence[str] | None = None,
    cmap: str = SEQUENTIAL,
    label: str = "score",
    width: float | None = None,
    height: float = 3.2,
) -> Figure:
    """One or more (h, w) score grids side by side on one colour scale, the query patch marked.

    For :func:`~posenc_core.multi_axis.axial_score_grid` beside
    :func:`~posenc_core.multi_axis.raster_score_grid`: each cell is a key patch, its colour
    the query's score against it.

    Args:
        scores: an ``(h, w)`` grid or a sequence of them, all of one shape.
        query: the query's ``(row, col)``, outlined in black in every panel (None: no mark).
        titles: one title per grid (default none).
        cmap: ``"viridis"`` or ``"cividis"`` (colour-blind-safe sequential maps).
        label: the colour bar's label.
        width, height: figure size in inches (width default 3.2 per grid + 0.8).

    Returns:
        the figure, with one colour bar shared by the panels.
    """
    cmap = check.choice("cmap", cmap, ("viridis", "cividis"))
    single = isinstance(scores, (torch.Tensor, np.ndarray))
    grids = [_np(scores)] if single else [_np(g) for g in scores]
    if not grids or any(g.ndim != 2 or g.shape != grids[0].shape for g in grids):
        shapes = [g.shape for g in grids]
        raise ValueError(f"scores must be one or more (h, w) grids of one shape, got {shapes}")
    h, w = grids[0].shape
    if titles is not None and len(titles) != len(grids):
        raise ValueError(f"titles must give one title per grid ({len(grids)}), got {titles!r}")
    if query is not None:
        if not isinstance(query, Sequence) or len(query) != 2:
            raise TypeError(f"query must be a (row, col) pair or None, got {query!r}")
        query = (
            check.int_in_range("query[0]", query[0], 0, h - 1),
            check.int_in_range("query[1]", query[1], 0, w - 1),
        )
    from matplotlib.patches import Rectangle

    n = len(grids)
    fig, axes = _figure(width or 3.2 * n + 0.8, height, ncols=n)
    axes = np.atleast_1d(axes)
    lo = min(float(g.min()) for g in grids)
    hi = max(float(g.max()) for g in grids)
    image = None
    for i, (ax, grid) in enumerate(zip(axes, grids)):
        image = ax.imshow(grid, cmap=cmap, vmin=lo, vmax=hi, interpolation="nearest")
        if query is not None:
            r, c = query
            ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="black", lw=2))
        ax.set(xlabel="key column", ylabel="key row" if i == 0 else "")
        if titles is not None:
            ax.set_title(titles[i], fontsize=9)
    fig.colorbar(image, ax=list(axes), fraction=0.04, pad=0.02, label=label)
    return fig


def pair_usage_figure(
    shares: np.ndarray | torch.Tensor,
    wavelengths_: np.ndarray | torch.Tensor | Sequence[float],
    *,
    train_len: int,
    seed: int = 0,
    width: float = COLUMN_WIDTH,
    height: float = 3.4,
) -> Figure:
    """Where a trained RoPE model puts its query/key norm, pair by pair (chapter 9).

    Left: the share of each pair in sum_i abs(q_i) abs(k_i), the mean over layers, heads and seeds
    as bars with a min-max range over seeds, and a dotted line at the uniform share 1/n; pairs
    that make at most an eighth of a turn within the training length are hatched. Right: the
    same shares for one seed, one row per layer and head.

    Args:
        shares: ``(S, l, h, n)`` shares (each (seed, layer, head) row sums to 1), e.g. from
            :func:`~posenc_core.book.frequency_use.pair_norms` of queries and keys.
        wavelengths_: ``(n,)`` wavelength of each pair, in positions.
        train_len: L, for the hatching and the tick labels (wavelength in units of L).
        seed: the seed shown on the right.

    Returns:
        the figure.
    """
    a = _np(shares).astype(float)
    if a.ndim != 4:
        raise ValueError(f"shares must have shape (S, l, h, n), got {a.shape}")
    lam = np.asarray(_np(torch.as_tensor(wavelengths_)), dtype=float)
    n = a.shape[-1]
    if lam.shape != (n,):
        raise ValueError(f"wavelengths_ must have shape ({n},), got {lam.shape}")
    L = check.positive_int("train_len", train_len)
    seed = check.int_in_range("seed", seed, 0, a.shape[0] - 1)
    per_seed = a.mean((1, 2))  # (S, n)
    mean, lo, hi = per_seed.mean(0), per_seed.min(0), per_seed.max(0)
    fig, (left, right) = _figure(width, height, ncols=2, gridspec_kw={"width_ratios": [1.3, 1]})
    x = np.arange(n)
    slow = L / lam <= 0.125
    bars = left.bar(x, mean, color=OKABE_ITO[0], yerr=[mean - lo, hi - mean], capsize=3)
    for bar, s in zip(bars, slow):
        if s:
            bar.set_hatch("//")
            bar.set_facecolor("white")
            bar.set_edgecolor(OKABE_ITO[0])
    left.axhline(1 / n, color="0.3", ls=":", lw=1.2, label=f"uniform, 1/{n}")
    left.set_xticks(x, [f"{i}\n{w / L:.3g}L" for i, w in enumerate(lam)], fontsize=7)
    left.set(xlabel="pair (top) and its wavelength (bottom)", ylabel="share of |q| |k|")
    handles, _ = left.get_legend_handles_labels()
    hatched = Patch(facecolor="white", edgecolor=OKABE_ITO[0], hatch="//")
    left.legend([*handles, hatched], [f"uniform, 1/{n}", "at most 1/8 turn within L"],
                fontsize=7.5, frameon=False)  # fmt: skip
    left.grid(alpha=0.3, axis="y")
    rows = a[seed].reshape(-1, n)
    im = right.imshow(rows, cmap=SEQUENTIAL, aspect="auto", vmin=0)
    right.set_yticks(
        range(rows.shape[0]), [f"{y}.{h}" for y in range(a.shape[1]) for h in range(a.shape[2])]
    )
    right.set_xticks(x)
    right.set(xlabel="pair (0 = fastest)", ylabel="layer.head", title=f"seed {seed}")
    fig.colorbar(im, ax=right, fraction=0.05, pad=0.03, label="share")
    return fig


# --------------------------------------------------------------------------- the intro


def schemes_overview_figure(
    *, n_positions: int = 64, d_model: int = 64, max_offset: int = 256, n_heads: int = 8
) -> Figure:
    """The book in one figure: four ways of giving attention position, computed by
    posenc_core. (a) the sinusoidal table added to the tokens; (b) the similarity of two of
    its rows, a function of their offset only; (c) RoPE's score for a query and key that
    match (all ones, head_dim 128) as the offset grows, for two bases; (d) ALiBi's bias, a
    straight line per head.

    Args:
        n_positions, d_model: size of the sinusoidal table in (a).
        max_offset: offsets 0 .. max_offset in (b)-(d).
        n_heads: ALiBi heads drawn in (d).
    """
    from ..alibi import alibi_slopes
    from ..analysis import rope_score_vs_distance, sinusoidal_similarity

    n_positions = check.positive_int("n_positions", n_positions)
    d_model = check.positive_int("d_model", d_model)
    max_offset = check.positive_int("max_offset", max_offset)
    n_heads = check.positive_int("n_heads", n_heads)
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    fig, (a, b, c, d) = _panels(4, 2.5, max_cols=2)
    im = a.imshow(
        _np(sinusoidal_table(n_positions, d_model, dtype=torch.float64)),
        aspect="auto",
        interpolation="nearest",
        cmap=DIVERGING,
        vmin=-1,
        vmax=1,
    )
    a.set(xlabel="dimension", ylabel="position", title="(a) sinusoidal: add a vector")
    fig.colorbar(im, ax=a, fraction=0.05, pad=0.02)
    k = np.arange(max_offset + 1)
    b.plot(k, _np(sinusoidal_similarity(list(k), d_model)), color=OKABE_ITO[0], lw=1.4)
    b.set(xlabel="offset k", ylabel="cos(PE(p), PE(p+k))", title="(b) rows know their offset")
    far = np.unique(np.geomspace(1, 64 * max_offset, 200).astype(int))
    for j, base in enumerate((10000.0, 500000.0)):
        score = _np(rope_score_vs_distance(list(far), 128, base=base))
        c.plot(far, score, color=OKABE_ITO[1 + j], lw=1.3, label=f"base {base:,.0f}")
    c.set_xscale("log")
    c.set(xlabel="offset n − m", ylabel="score / head_dim", title="(c) RoPE: rotate q and k")
    c.legend(fontsize=8, frameon=False, loc="upper right")
    slopes = _np(alibi_slopes(n_heads, dtype=torch.float64))
    for h, m in enumerate(slopes):
        d.plot(k, -m * k, color=plt.get_cmap(SEQUENTIAL)(h / max(n_heads - 1, 1)), lw=1.2)
    d.set(xlabel="distance to the key", ylabel="bias added to the score")
    d.set_title("(d) ALiBi: a line per head")
    for ax in (b, c, d):
        ax.grid(alpha=0.3)
    return fig
