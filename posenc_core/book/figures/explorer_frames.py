"""The explorers' pictures for pages read without JavaScript: :func:`figure_png` renders one,
and the views no chapter draws (the base's three panels, the patch-score grids, the shift
matrix behind a head, one query and key under RoPE) are here.

The explorers draw in the browser (``posenc_core/book/widgets/explorer.js``). Where a chapter
draws the same quantity, the stand-in is that chapter's figure function called with the
explorer's values (e.g. :func:`~posenc_core.book.figures.sinusoidal_heatmap`); see
:mod:`posenc_core.book.widgets`. Tested in ``tests/book/test_widgets.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from posenc_core import _validation as check
from posenc_core.book.figures.style import (
    COLUMN_WIDTH,
    DIVERGING,
    OKABE_ITO,
    SEQUENTIAL,
    TEXT_SIZE_KEY,
    as_numpy,
    drawn_text_pt,
    new_figure,
    show_figures_sharp,
)

__all__ = ["figure_png", "base_figure", "patch_scores_figure", "rope_pair_figure", "shift_figure"]


def figure_png(fig: Figure, *, dpi: float = 72.0, colors: int | None = None) -> bytes:
    """Render a figure to PNG bytes with matplotlib's Agg renderer.

    The PNG records the figure's smallest text size, in points, under ``TEXT_SIZE_KEY``.

    Args:
        fig: the figure (whatever its backend; it is drawn with Agg).
        dpi: resolution in dots per inch, in (0, 600].
        colors: None for a full-colour PNG, or an integer in 2..256 for a palette PNG with at
            most that many colours, several times smaller (for a figure stored in a page).

    Returns:
        the PNG file as bytes.
    """
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image
    from PIL.PngImagePlugin import PngInfo

    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if isinstance(dpi, bool) or not isinstance(dpi, (int, float)) or not 0 < dpi <= 600:
        raise ValueError(f"dpi must be a number in (0, 600], got {dpi!r}")
    if colors is not None and (
        isinstance(colors, bool) or not isinstance(colors, int) or not 2 <= colors <= 256
    ):
        raise ValueError(f"colors must be None or an integer in 2..256, got {colors!r}")
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    fig.set_dpi(dpi)
    canvas.draw()
    image = Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3])
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


def base_figure(
    table: torch.Tensor | np.ndarray,
    wavelength: torch.Tensor | np.ndarray,
    offsets: torch.Tensor | np.ndarray,
    similarity: torch.Tensor | np.ndarray,
    *,
    reference: Mapping[str, torch.Tensor | np.ndarray] | None = None,
    reference_label: str = "",
    title: str = "",
    width: float = COLUMN_WIDTH,
    height: float = 5.0,
) -> Figure:
    """Three views of one base: the sinusoidal table, its wavelengths and the similarity s(k).

    Args:
        table: ``(n, d)`` sinusoidal table (top panel, rows = positions).
        wavelength: ``(d/2,)`` wavelengths 2*pi/omega_i (bottom left, log scale, with n marked).
        offsets, similarity: ``(K,)`` offsets k and the cosine similarity s(k) (bottom right).
        reference: optional ``{"wavelength": ..., "similarity": ...}`` of another base, dashed
            grey, labelled ``reference_label``.
        title, width, height: the figure's title and size in inches.

    Returns:
        the figure.
    """
    data, wl, k, sim = (as_numpy(a) for a in (table, wavelength, offsets, similarity))
    if data.ndim != 2:
        raise ValueError(f"table must have shape (n, d), got {data.shape}")
    n, d = data.shape
    if wl.shape != (d // 2,) or k.ndim != 1 or k.shape != sim.shape:
        raise ValueError(
            f"wavelength must have shape (d/2,) = ({d // 2},) and offsets, similarity one 1-D "
            f"shape; got {wl.shape}, {k.shape}, {sim.shape}"
        )
    fig = plt.figure(figsize=(width, height), layout="constrained")
    plt.close(fig)
    show_figures_sharp()
    axes = fig.subplot_mosaic([["heat", "heat"], ["wave", "sim"]], height_ratios=[1.1, 1])
    heat, wave, simax = axes["heat"], axes["wave"], axes["sim"]
    im = heat.imshow(data, aspect="auto", interpolation="nearest", cmap=DIVERGING, vmin=-1, vmax=1)
    fig.colorbar(im, ax=heat, fraction=0.04, pad=0.01)
    heat.set(xlabel="dimension", ylabel="position", title=title)
    pairs, low = np.arange(d // 2), float(sim.min())
    if reference is not None:
        ref_sim = as_numpy(reference["similarity"])
        label = reference_label or "reference"
        wave.plot(pairs, as_numpy(reference["wavelength"]), color="0.55", ls="--", label=label)
        simax.plot(k, ref_sim, color="0.55", ls="--", lw=1)
        low = min(low, float(ref_sim.min()))
    wave.plot(pairs, wl, color=OKABE_ITO[0], lw=1.6, label="this base")
    wave.axhline(n, color="0.35", ls=":", lw=1)
    wave.annotate(f"{n} positions", (0.02, n), xycoords=("axes fraction", "data"),
                  va="bottom", fontsize=8, color="0.25")  # fmt: skip
    wave.set(yscale="log", xlim=(-0.5, d // 2 - 0.5), ylim=(3, 3e8), xlabel="pair index i",
             ylabel="wavelength (positions)")  # fmt: skip
    wave.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(0, 0.93))
    simax.plot(k, sim, color=OKABE_ITO[3], lw=1.2)
    simax.axhline(0, color="0.35", lw=0.8)
    simax.set(xlim=(float(k.min()), float(k.max())), ylim=(min(-0.4, low - 0.05), 1.05),
              xlabel="offset k", ylabel="similarity s(k)")  # fmt: skip
    for a in (wave, simax):
        a.grid(alpha=0.3)
    return fig


def patch_scores_figure(
    grids: Sequence[torch.Tensor | np.ndarray],
    query: tuple[int, int],
    *,
    titles: Sequence[str],
    vlim: tuple[float, float],
    title: str = "",
    width: float = COLUMN_WIDTH,
    height: float = 3.3,
) -> Figure:
    """Score grids of one query patch against every patch, side by side on one colour scale.

    For :func:`~posenc_core.multi_axis.axial_score_grid` beside
    :func:`~posenc_core.multi_axis.raster_score_grid` (chapter 9's explorer).

    Args:
        grids: ``(h, w)`` score grids, all of one shape.
        query: ``(row, col)`` of the query patch, outlined in black in every panel.
        titles: one title per panel.
        vlim: the colour scale's limits (viridis).
        title, width, height: the figure's title and size in inches.

    Returns:
        the figure, with one colour bar.
    """
    from matplotlib.patches import Rectangle

    gs = [as_numpy(g) for g in grids]
    if not gs or any(g.ndim != 2 or g.shape != gs[0].shape for g in gs):
        raise ValueError(f"grids must be (h, w) arrays of one shape, got {[g.shape for g in gs]}")
    if len(titles) != len(gs):
        raise ValueError(f"titles must give one title per grid, got {len(titles)} for {len(gs)}")
    r = check.int_in_range("query[0]", query[0], 0, gs[0].shape[0] - 1)
    c = check.int_in_range("query[1]", query[1], 0, gs[0].shape[1] - 1)
    fig, axes = new_figure(width, height, ncols=len(gs))
    axes = list(np.atleast_1d(axes))
    image = None
    for ax, g, t in zip(axes, gs, titles):
        image = ax.imshow(g, cmap=SEQUENTIAL, vmin=vlim[0], vmax=vlim[1])
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, ec="black", lw=2.2))
        ax.set_title(t, fontsize=9)
        ax.set(xlabel="column", ylabel="row")
    fig.colorbar(image, ax=axes, fraction=0.04, pad=0.03, label="score q . k")
    fig.suptitle(title, fontsize=10)
    return fig


def shift_figure(
    shifted: torch.Tensor | np.ndarray,
    rotated: torch.Tensor | np.ndarray,
    positions: torch.Tensor | np.ndarray,
    scores: torch.Tensor | np.ndarray,
    *,
    position: int,
    offset: int,
    projection: str,
    ylim: tuple[float, float],
    width: float = COLUMN_WIDTH,
    height: float = 4.6,
) -> Figure:
    """PE(p + k) beside M_k PE(p), and the position–position term along p (chapter 4's
    explorer, :func:`~posenc_core.book.widgets.closed_form.shift_explorer`).

    Args:
        shifted, rotated: ``(d,)`` PE(p + k) (a line) and M_k PE(p) (rings).
        positions, scores: ``(n,)`` positions p' and PE(p')^T A PE(p' + k) at each.
        position, offset: p (marked on the curve) and k.
        projection: what A is, for the lower title.
        ylim: the score axis' limits.
        width, height: the figure's size in inches.

    Returns:
        the figure.
    """
    a, b, x, y = (as_numpy(t) for t in (shifted, rotated, positions, scores))
    if a.shape != b.shape or a.ndim != 1 or x.shape != y.shape or x.ndim != 1:
        raise ValueError(
            f"shifted, rotated must be one (d,) shape and positions, scores one (n,) shape; got "
            f"{a.shape}, {b.shape}, {x.shape}, {y.shape}"
        )
    p, k = int(position), int(offset)
    fig, (top, low) = new_figure(width, height, nrows=2)
    dims = np.arange(a.size)
    top.plot(dims, a, color=OKABE_ITO[0], lw=1.4, marker="o", ms=3, label=f"PE({p + k})")
    top.plot(dims, b, ls="none", marker="o", ms=9, mfc="none", mec=OKABE_ITO[1], mew=1.6,
             label=f"M_{k} PE({p})")  # fmt: skip
    top.set(xlabel="dimension", ylim=(-1.2, 1.7), title=f"PE(p + k) = M_k PE(p): p = {p}, k = {k}")
    top.legend(fontsize=9, frameon=False, ncols=2, loc="upper center")
    low.plot(x, y, color=OKABE_ITO[2], lw=1.6)
    low.plot([p], [y[int(np.argmin(np.abs(x - p)))]], "o", color=OKABE_ITO[3], ms=6)
    low.set(xlabel="position p", ylabel="score", ylim=ylim,
            title=f"PE(p)ᵀ A PE(p + {k}) for every p, {projection}")  # fmt: skip
    for ax in (top, low):
        ax.grid(alpha=0.3)
    return fig


def rope_pair_figure(
    q: torch.Tensor | np.ndarray,
    k: torch.Tensor | np.ndarray,
    q_rot: torch.Tensor | np.ndarray,
    k_rot: torch.Tensor | np.ndarray,
    shifts: torch.Tensor | np.ndarray,
    curves: Mapping[str, torch.Tensor | np.ndarray],
    *,
    title: str,
    bound: float,
    width: float = COLUMN_WIDTH,
    height: float = 4.4,
) -> Figure:
    """One query and one key pair by pair (dims 2i, 2i+1) before and after the rotation, and
    the score as both positions move on together (chapter 6's explorer,
    :func:`~posenc_core.book.widgets.closed_form.rope_pair_explorer`).

    Args:
        q, k: ``(d,)`` the vectors before the rotation (faint); q_rot, k_rot: after it.
        shifts: ``(T,)`` shifts t; curves: label -> ``(T,)`` score at (m + t, n + t), the first
            solid, the others dashed.
        title: the figure's title; bound: the score axis' half range (the norm of q times the
            norm of k).
        width, height: the figure's size in inches.

    Returns:
        the figure.
    """
    vecs = [as_numpy(t) for t in (q, k, q_rot, k_rot)]
    d = vecs[0].size
    if d % 2 or any(v.shape != (d,) for v in vecs):
        raise ValueError(f"q, k, q_rot, k_rot must be one (d,) shape, d even; got {vecs[0].shape}")
    pairs = d // 2
    fig = plt.figure(figsize=(width, height), layout="constrained")
    plt.close(fig)
    show_figures_sharp()
    axes = fig.subplot_mosaic([[f"p{i}" for i in range(pairs)], ["score"] * pairs],
                              height_ratios=[1, 1.3])  # fmt: skip
    reach = 1.08 * max(float(np.hypot(v[0::2], v[1::2]).max()) for v in vecs)
    for i in range(pairs):
        ax = axes[f"p{i}"]
        for j, v in enumerate(vecs):  # q, k faint; q_rot, k_rot solid
            style = {"arrowstyle": "->", "lw": 1.6, "alpha": 0.3 if j < 2 else 1.0}
            style["color"] = OKABE_ITO[0] if j % 2 == 0 else OKABE_ITO[3]
            ax.annotate("", (v[2 * i], v[2 * i + 1]), (0, 0), arrowprops=style)
        ax.set(xlim=(-reach, reach), ylim=(-reach, reach), aspect="equal", xticks=[], yticks=[])
        ax.set_title(f"pair {i}", fontsize=9)
    ax = axes["score"]
    for j, (label, y) in enumerate(curves.items()):
        style = {"lw": 1.6, "color": OKABE_ITO[2]} if j == 0 else {"ls": "--", "color": "0.45"}
        ax.plot(as_numpy(shifts), as_numpy(y), label=label, **style)
    ax.set(xlabel="both positions moved by t", ylabel="score", ylim=(-bound, bound))
    ax.legend(fontsize=9, frameon=False, ncols=2, loc="lower left")
    ax.grid(alpha=0.3)
    fig.suptitle(title + " (blue: query, red: key; faint: before the rotation)", fontsize=9)
    return fig
