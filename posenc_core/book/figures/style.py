"""How the book's figures look and are shown: the colours, the size of the text column, the
smallest text, and the PNG a notebook displays (twice the shown resolution, with its smallest
text size recorded); the helpers every figure module uses to lay out panels and legends.

Book layer: imports the core, torch, numpy and matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

__all__ = [
    "OKABE_ITO",
    "DIVERGING",
    "SEQUENTIAL",
    "TRAINING_TINT",
    "COLUMN_WIDTH",
    "DISPLAY_DPI",
    "PIXEL_RATIO",
    "MIN_TEXT_PT",
    "TEXT_SIZE_KEY",
    "smallest_text_pt",
    "drawn_text_pt",
    "figure_for_display",
    "show_figures_sharp",
    "as_numpy",
    "new_figure",
    "panel_grid",
    "first_column",
    "legend_below",
    "length_ticks",
]


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
    return drawn_text_pt(fig)


def drawn_text_pt(fig: Figure) -> float:
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
    box) with its smallest text size in the text chunk
    ``TEXT_SIZE_KEY``, and the size to
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


def show_figures_sharp() -> None:
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


def as_numpy(t: torch.Tensor | np.ndarray) -> np.ndarray:
    return (
        t.detach().cpu().double().numpy()
        if isinstance(t, torch.Tensor)
        else np.asarray(t, dtype=float)
    )


def new_figure(
    width: float = COLUMN_WIDTH, height: float = 3.6, ncols: int = 1, nrows: int = 1, **kw
):
    # wider than the column would only be shrunk on the page, text with it
    width = min(width, COLUMN_WIDTH)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kw)
    plt.close(fig)  # keep pyplot from showing it a second time; callers display or glue it
    show_figures_sharp()
    return fig, axes


def panel_grid(n: int, row_height: float, *, max_cols: int = 2, extra: float = 0.0, **kw):
    """``n`` panels for the column: at most ``max_cols`` a row (each panel stays large enough
    to read), rows of ``row_height`` inches plus ``extra`` (a legend below, say). Returns the
    figure and the ``n`` axes in reading order; the grid's unused cells are hidden."""
    cols = max(1, min(n, max_cols))
    rows = -(-n // cols)
    fig, grid = new_figure(COLUMN_WIDTH, row_height * rows + extra, nrows=rows, ncols=cols,
                        squeeze=False, **kw)  # fmt: skip
    flat = list(grid.ravel())
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def first_column(axes: Sequence, cols: int) -> list:
    """The axes that start a row of a grid filled row by row, ``cols`` a row."""
    return list(axes[::cols])


def legend_below(fig: Figure, handles=None, labels=None, *, ax=None, ncol: int | None = None):
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


def length_ticks(ax, train_len: int, n_positions: int) -> None:
    """Put the x ticks of a by-position axis at 0, L, 2L, ... labelled "0", "L", "2L", ..."""
    ticks = np.arange(0, n_positions + 1, train_len)
    step = max(1, int(np.ceil(len(ticks) / 9)))  # at most about 9 labels
    ticks = ticks[::step]
    ax.set_xticks(ticks, ["0" if t == 0 else ("L" if t == train_len else f"{t // train_len}L")
                          for t in ticks])  # fmt: skip
