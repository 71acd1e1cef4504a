"""The explorers' pictures for pages read without JavaScript: :func:`figure_png` renders one,
and the two views no chapter draws (the base's three panels, the patch-score grids) are here.

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

__all__ = ["figure_png", "base_figure", "patch_scores_figure"]


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
