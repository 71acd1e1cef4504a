"""The book's figures, drawn from posenc_core's numbers, by kind of plot.

- ``style``: colours, sizes and how a figure is shown;
- ``matrices``: heatmaps, tables, masks, pair layouts, buckets;
- ``curves``: curves, bands and losses by position;
- ``geometry``: the unit circle;
- ``several_axes``: RoPE over several axes;
- ``overview``: the intro's overview;
- ``base_bound``: the lower bound of the RoPE base against context length (chapter 3);
- ``layer_strips``: real models' positional plans, layer by layer (the mixing-layers chapter);
- ``method_retrieval``: loss against retrieval for chapter 7c's methods;
- :mod:`~posenc_core.book.figures.explorer_frames`: the PNG an explorer shows without
  JavaScript, and the explorer views no chapter draws (the others reuse the chapter's figure).

Every figure function returns a :class:`matplotlib.figure.Figure` and is importable from this
package (``from posenc_core.book import figures``; ``figures.unit_circle_figure(...)``), as
the chapters do. The numerical core never imports it.
"""

from posenc_core.book.figures import (
    base_bound,
    curves,
    geometry,
    layer_strips,
    matrices,
    method_retrieval,
    overview,
    several_axes,
    style,
)
from posenc_core.book.figures.base_bound import *  # noqa: F403
from posenc_core.book.figures.curves import *  # noqa: F403
from posenc_core.book.figures.geometry import *  # noqa: F403
from posenc_core.book.figures.layer_strips import *  # noqa: F403
from posenc_core.book.figures.matrices import *  # noqa: F403
from posenc_core.book.figures.method_retrieval import *  # noqa: F403
from posenc_core.book.figures.overview import *  # noqa: F403
from posenc_core.book.figures.several_axes import *  # noqa: F403
from posenc_core.book.figures.style import *  # noqa: F403

# Each module's own __all__ says what it offers; the package offers all of them.
__all__ = [
    name
    for module in (
        style,
        matrices,
        curves,
        geometry,
        several_axes,
        overview,
        base_bound,
        layer_strips,
        method_retrieval,
    )
    for name in module.__all__
]
