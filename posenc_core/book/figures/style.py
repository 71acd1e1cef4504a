"""How the book's figures look and are shown: the colours, the size of the text column, the
smallest text, and the PNG a notebook displays (twice the shown resolution, with its smallest
text size recorded); the helpers every figure module uses to lay out panels and legends.

Book layer: imports the core, torch, numpy and matplotlib.
"""

from __future__ import annotations

import contextlib
import functools
import math
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
    "PHONE_WIDTH",
    "PHONE_CHUNK",
    "KEEP_COLUMNS",
    "PHONE_DRAWING",
    "REMAKE_LEGEND",
    "BELOW_ON_PHONE",
    "smallest_text_pt",
    "drawn_text_pt",
    "figure_for_display",
    "phone_rendition",
    "png_size",
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


# The phone rendition. At a 390 px viewport the text column is 342 CSS px (measured in the
# built book: the viewport less 48 px of padding, up to 767 px); a figure drawn PHONE_WIDTH
# inches wide at DISPLAY_DPI fits it unshrunk, and still shows 7 pt text at 9 px or more on a
# 360 px phone (312 / 330 x 9.7 px).
PHONE_WIDTH = 3.3
"""Width in inches of a figure's phone rendition, drawn by :func:`phone_rendition`."""


PHONE_CHUNK = b"poPh"
"""Type of the private, ancillary PNG chunk that carries the phone rendition (a whole PNG)
inside the desktop one: viewers and browsers skip it (lower-case first letter: ancillary;
second: private), and the book's build (_ext/figure_renditions.py) splits it into a file of
its own."""


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
    box) with its smallest text size in the text chunk ``TEXT_SIZE_KEY``, and the size to show
    it at (``{"width": w, "height": h}`` in CSS px, the PNG's size over PIXEL_RATIO).

    In the book's build (``POSENC_BOOK_BUILD=1``, :data:`posenc_core.book.notebook.BUILD_ENV`)
    a figure wider than ``PHONE_WIDTH`` also carries :func:`phone_rendition` in a
    ``PHONE_CHUNK`` chunk, which the build serves to phones (``_ext/figure_renditions.py``).
    Elsewhere (Jupyter, Colab) nothing would show it, so it is not drawn: it costs about
    three times the desktop PNG's time.

    Registered as IPython's ``image/png`` formatter for figures by every figure function of
    this module, so that Jupyter, Colab and the book (MyST-NB reads the width and height)
    show figures at their drawn size and twice the resolution.
    """
    import os

    from posenc_core.book.notebook import BUILD_ENV

    png = _png(fig)
    width, height = png_size(png)
    if os.environ.get(BUILD_ENV) == "1" and width / PIXEL_RATIO > PHONE_WIDTH * DISPLAY_DPI:
        png = _with_chunk(png, PHONE_CHUNK, phone_rendition(fig))
    return png, {"width": width // PIXEL_RATIO, "height": height // PIXEL_RATIO}


def phone_rendition(fig: Figure) -> bytes:
    """``fig`` redrawn for a phone's text column, as a PNG like :func:`figure_for_display`'s.

    The same figure at the same point sizes, at most ``PHONE_WIDTH`` inches wide (tight
    bounding box): a grid of panels side by side is laid out as one column (unless the figure
    sets ``KEEP_COLUMNS``), legends that can be remade (``REMAKE_LEGEND``) get fewer columns
    until they fit, long titles, labels and y tick labels wrap, and x tick labels that run
    into each other are thinned. ``fig`` is restored afterwards. A figure that sets
    ``PHONE_DRAWING`` is drawn again by that function instead.
    """
    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    make = getattr(fig, PHONE_DRAWING, None)
    if make is not None:
        fig = make()
    with _phone_layout(fig):
        return _png(fig)


def png_size(png: bytes) -> tuple[int, int]:
    """Width and height in pixels of the PNG ``png`` (from its IHDR chunk)."""
    import struct

    if png[:8] != _PNG_SIGNATURE:
        raise ValueError(f"png must start with the PNG signature, got {png[:8]!r}")
    return struct.unpack(">II", png[16:24])  # IHDR, right after the 8-byte signature


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png(fig: Figure) -> bytes:
    import io

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
    return buf.getvalue()


def _with_chunk(png: bytes, kind: bytes, data: bytes) -> bytes:
    """``png`` with a chunk of type ``kind`` holding ``data`` inserted before its IEND."""
    import struct
    import zlib

    chunk = struct.pack(">I", len(data)) + kind + data
    chunk += struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    iend = png.rindex(b"IEND") - 4  # the IEND chunk: length (0), type, CRC
    return png[:iend] + chunk + png[iend:]


@contextlib.contextmanager
def _phone_layout(fig: Figure):
    """Lay ``fig`` out for PHONE_WIDTH inside the block; restore its layout on leaving."""
    size = fig.get_size_inches().copy()
    specs = [(ax, ax.get_subplotspec()) for ax in fig.axes if ax.get_subplotspec() is not None]
    in_layout = [(ax, ax.get_in_layout()) for ax, _ in specs]
    undo: list = []  # what _wrap_long_texts and _thin_ticks changed, as calls that put it back
    ylabels = [(ax, ax.get_ylabel(), ax.yaxis.get_tick_params()["labelleft"]) for ax, _ in specs]
    try:
        rows = _one_column(fig, specs)
        fig.set_size_inches(PHONE_WIDTH, size[1] * rows)
        _legends_below(fig, undo)
        _fit_legends(fig, undo)
        _wrap_long_texts(fig, undo)
        _thin_ticks(fig, undo)
        room = PHONE_WIDTH - 2 * plt.rcParams["savefig.pad_inches"]  # the tight box's margin
        for _ in range(4):  # text that sticks out (a long tick label): narrow the figure
            fig.draw_without_rendering()
            excess = fig.get_tightbbox().width - room
            if excess <= 0:
                break
            width, height = fig.get_size_inches()
            if width - excess < 0.5 * PHONE_WIDTH:
                break  # something does not shrink with the figure; the test will say what
            fig.set_size_inches(width - excess - 0.02, height)
        yield
    finally:
        for ax, spec in specs:
            ax.set_subplotspec(spec)
        for ax, flag in in_layout:
            ax.set_in_layout(flag)
        for put_back in reversed(undo):
            put_back()
        for ax, label, ticks in ylabels:
            ax.set_ylabel(label)
            ax.tick_params(axis="y", labelleft=ticks)
        fig.set_size_inches(size)
        # constrained layout starts from where the axes are and converges in a few draws
        for _ in range(3):
            fig.draw_without_rendering()


PHONE_DRAWING = "_posenc_phone_drawing"
"""Attribute of a figure that holds a function of no arguments drawing the figure again for
the phone (``PHONE_WIDTH`` wide), where the same drawing in one column would not do (a diagram
whose labels sit beside it, say)."""


KEEP_COLUMNS = "_posenc_phone_keep_columns"
"""Attribute that a figure function sets (True) on a figure whose panels share their rows (a
table and its bars) and so stay side by side in the phone rendition."""


def _legends(fig: Figure) -> list:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


REMAKE_LEGEND = "_posenc_remake"
"""Attribute of a legend that holds a function of a column count making the same legend again
with that many columns (matplotlib packs a legend's columns when it is made). The phone
rendition calls it for a legend wider than the figure, and :func:`legend_below` sets it."""


BELOW_ON_PHONE = "_posenc_below_on_phone"
"""Attribute of a legend inside an axes (True) that the phone rendition shows under the plot
instead, where the narrower axes leave it no free corner."""


def _legends_below(fig: Figure, undo: list) -> None:
    """Each axes legend marked ``BELOW_ON_PHONE`` hidden, and the same entries below the plot."""
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None or not getattr(leg, BELOW_ON_PHONE, False):
            continue
        labels = [t.get_text() for t in leg.texts]
        below = legend_below(fig, leg.legend_handles, labels)
        leg.set_visible(False)
        undo.append(functools.partial(leg.set_visible, True))
        undo.append(functools.partial(fig.legends.remove, below))


def _fit_legends(fig: Figure, undo: list) -> None:
    """Fewer columns for each legend that can be remade (``REMAKE_LEGEND``), one at a time,
    until it lies within the figure's width."""
    for ax, leg in [(None, leg) for leg in fig.legends] + [
        (ax, ax.get_legend()) for ax in fig.axes
    ]:
        remake = getattr(leg, REMAKE_LEGEND, None)
        if remake is None:
            continue
        if ax is None:
            undo.append(functools.partial(fig.legends.__setitem__, slice(None), list(fig.legends)))
        else:
            undo.append(functools.partial(setattr, ax, "legend_", leg))
        while leg._ncols > 1:
            fig.draw_without_rendering()
            box = leg.get_window_extent()
            if box.x0 >= 0 and box.x1 <= fig.bbox.width and box.width <= 0.98 * fig.bbox.width:
                break
            narrower = remake(leg._ncols - 1)
            if ax is None:  # a figure's legend: in the old one's place
                fig.legends.remove(narrower)
                fig.legends[fig.legends.index(leg)] = narrower
            leg = narrower


def _wrap_long_texts(fig: Figure, undo: list) -> None:
    """Break titles, axis labels and long y tick labels that are wider than their room into
    lines at spaces. The room: a title or an x label its axes' width plus a little, a y label
    its axes' height, a y tick label a third of the figure, a figure title the figure."""
    from matplotlib.ticker import FuncFormatter

    fig.draw_without_rendering()
    width = fig.bbox.width
    items = [(t, 0.95 * width) for t in (fig._suptitle, fig._supxlabel) if t is not None]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        box = ax.get_window_extent()
        room = box.width + 0.1 * width
        items += [(t, room) for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label)]
        items.append((ax.yaxis.label, box.height))
    for text, room in items:
        if text.get_rotation() not in (90, 270) and text.get_text():
            box = text.get_window_extent()  # centred text grows both ways: the nearer edge
            middle = (box.x0 + box.x1) / 2
            room = min(room, 0.95 * 2 * min(middle, width - middle))
        wrapped = _wrapped(text, room)
        if wrapped is not None:
            undo.append(functools.partial(text.set_text, text.get_text()))
            text.set_text(wrapped)
    for ax in fig.axes:  # tick labels are written by the axis's formatter at every draw
        if not ax.get_visible():
            continue
        labels = {t.get_text(): _wrapped(t, width / 3) for t in ax.get_yticklabels()}
        labels = {k: v for k, v in labels.items() if v}
        if labels:
            formatter = ax.yaxis.get_major_formatter()
            undo.append(functools.partial(ax.yaxis.set_major_formatter, formatter))
            ax.yaxis.set_major_formatter(FuncFormatter(
                lambda x, pos, f=formatter, new=labels: new.get(f(x, pos), f(x, pos))))  # fmt: skip


def _wrapped(text, room: float) -> str | None:
    """``text``'s words in lines that fit ``room`` display px, or None if it fits as it is."""
    import textwrap

    words = text.get_text()
    if not text.get_visible() or " " not in words or "$" in words or "\n" in words:
        return None
    box = text.get_window_extent()
    size = box.height if text.get_rotation() in (90, 270) else box.width
    if size <= room:
        return None
    lines = math.ceil(size / room)  # as few lines as fit, of about equal length
    for chars in range(math.ceil(len(words) / lines), len(words) + 1):
        wrapped = textwrap.wrap(words, chars)
        if len(wrapped) <= lines:
            return "\n".join(wrapped)
    return None


def _thin_ticks(fig: Figure, undo: list) -> None:
    """Where an axes' x tick labels run into each other, keep every second (third, ...) one."""
    fig.draw_without_rendering()
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        labels = [t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        boxes = [t.get_window_extent() for t in labels]
        for step in range(1, len(labels)):
            kept = boxes[::step]
            if all(a.x1 + 2 <= b.x0 for a, b in zip(kept, kept[1:])):
                break
        else:
            continue
        for i, t in enumerate(labels):
            if i % step:
                t.set_visible(False)
                undo.append(functools.partial(t.set_visible, True))


def _one_column(fig: Figure, specs: list) -> float:
    """Put the panels of a grid side by side one under the other, in reading order; returns
    how many times taller the figure must be. A grid with a column that holds only colour
    bars is left alone (the bar belongs beside its plot); so are figures of several grids."""
    from matplotlib.gridspec import GridSpec

    grids = {spec.get_gridspec() for _, spec in specs}
    if len(grids) != 1 or getattr(fig, KEEP_COLUMNS, False):
        return 1.0
    grid = grids.pop()
    nrows, ncols = grid.get_geometry()
    panels = [(ax, s) for ax, s in specs if ax.get_visible() and not hasattr(ax, "_colorbar")]
    used = {c for _, s in panels for c in s.colspan}
    if ncols < 2 or used != set(range(ncols)):
        return 1.0
    ratios = grid.get_height_ratios() or [1] * nrows
    panels.sort(key=lambda p: (p[1].rowspan.start, p[1].colspan.start))
    column = GridSpec(len(panels), 1, figure=fig,
                      height_ratios=[ratios[s.rowspan.start] for _, s in panels])  # fmt: skip
    row_label = {s.rowspan.start: ax.get_ylabel() for ax, s in panels if ax.get_ylabel()}
    for i, (ax, spec) in enumerate(panels):
        ax.set_subplotspec(column[i])
        if spec.colspan.start > 0 and ax.get_shared_y_axes().get_siblings(ax) != [ax]:
            # a shared y axis labelled in the first column only: each panel is first now
            ax.tick_params(axis="y", labelleft=True)
            ax.set_ylabel(ax.get_ylabel() or row_label.get(spec.rowspan.start, ""))
    for ax, _ in specs:
        if not ax.get_visible():
            ax.set_in_layout(False)
    used_rows = {r for _, s in panels for r in s.rowspan}
    return sum(ratios[s.rowspan.start] for _, s in panels) / sum(ratios[r] for r in used_rows)


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
    legend = fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8,
                        frameon=False)  # fmt: skip
    setattr(legend, REMAKE_LEGEND, lambda n: legend_below(fig, handles, labels, ncol=n))
    return legend


def length_ticks(ax, train_len: int, n_positions: int) -> None:
    """Put the x ticks of a by-position axis at 0, L, 2L, ... labelled "0", "L", "2L", ..."""
    ticks = np.arange(0, n_positions + 1, train_len)
    step = max(1, int(np.ceil(len(ticks) / 9)))  # at most about 9 labels
    ticks = ticks[::step]
    ax.set_xticks(ticks, ["0" if t == 0 else ("L" if t == train_len else f"{t // train_len}L")
                          for t in ticks])  # fmt: skip
