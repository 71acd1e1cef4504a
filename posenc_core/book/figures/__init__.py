"""The book's figures, drawn from posenc_core's numbers, by kind of plot.

- ``style``: colours, sizes and how a figure is shown;
- ``matrices``: heatmaps, tables, masks, pair layouts, buckets;
- ``curves``: curves, bands and losses by position;
- ``geometry``: the unit circle;
- ``several_axes``: RoPE over several axes;
- ``overview``: the intro's overview;
- :mod:`~posenc_core.book.figures.explorer_frames`: the frames of the explorers.

Every figure function returns a :class:`matplotlib.figure.Figure` and is importable from this
package (``from posenc_core.book import figures``; ``figures.unit_circle_figure(...)``), as
the chapters do. The numerical core never imports it.
"""

from posenc_core.book.figures.curves import (
    band_panels_figure,
    marked_curves_figure,
    mean_band_figure,
    offset_profiles_figure,
    paired_curves_figure,
    position_loss_figure,
    seed_band,
    wavelength_figure,
)
from posenc_core.book.figures.geometry import (
    unit_circle_figure,
)
from posenc_core.book.figures.matrices import (
    heatmap_figure,
    masked_matrices_figure,
    matrices_figure,
    pair_layout_figure,
    rows_figure,
    sinusoidal_heatmap,
    t5_bucket_figure,
)
from posenc_core.book.figures.overview import (
    schemes_overview_figure,
)
from posenc_core.book.figures.several_axes import (
    AXIS_COLOURS,
    pair_axis_figure,
    pair_usage_figure,
    score_grid_figure,
)
from posenc_core.book.figures.style import (
    COLUMN_WIDTH,
    DISPLAY_DPI,
    DIVERGING,
    MIN_TEXT_PT,
    OKABE_ITO,
    PIXEL_RATIO,
    SEQUENTIAL,
    TEXT_SIZE_KEY,
    TRAINING_TINT,
    as_numpy,
    drawn_text_pt,
    figure_for_display,
    first_column,
    legend_below,
    length_ticks,
    new_figure,
    panel_grid,
    show_figures_sharp,
    smallest_text_pt,
)

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
    "heatmap_figure",
    "sinusoidal_heatmap",
    "matrices_figure",
    "rows_figure",
    "masked_matrices_figure",
    "pair_layout_figure",
    "t5_bucket_figure",
    "marked_curves_figure",
    "wavelength_figure",
    "paired_curves_figure",
    "offset_profiles_figure",
    "mean_band_figure",
    "band_panels_figure",
    "seed_band",
    "position_loss_figure",
    "unit_circle_figure",
    "AXIS_COLOURS",
    "pair_axis_figure",
    "score_grid_figure",
    "pair_usage_figure",
    "schemes_overview_figure",
]
