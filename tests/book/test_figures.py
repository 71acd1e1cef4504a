"""Figures draw what posenc_core computes, with colour-blind-safe colour maps."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

import posenc_core as pc
from posenc_core import multi_axis
from posenc_core.book import figures
from posenc_core.book.figures import explorer_frames


def test_heatmap_shows_the_table_and_highlights_a_row():
    fig = figures.sinusoidal_heatmap(100, 128, highlight=7)
    image = fig.axes[0].images[0]
    np.testing.assert_allclose(
        image.get_array(), pc.sinusoidal_table(100, 128, dtype=torch.float64).numpy()
    )
    assert image.get_cmap().name == figures.DIVERGING
    profile = next(line for ax in fig.axes for line in ax.lines if len(line.get_ydata()) == 128)
    np.testing.assert_allclose(
        profile.get_ydata(), pc.sinusoidal_table(100, 128, dtype=torch.float64)[7].numpy()
    )


def test_wavelength_figure_plots_wavelengths_per_base():
    fig = figures.wavelength_figure(64, [100.0, 10000.0], lengths={"L": 512})
    lines = fig.axes[0].lines
    np.testing.assert_allclose(
        lines[0].get_ydata(), pc.sinusoidal_wavelengths(64, base=100.0).numpy()
    )
    np.testing.assert_allclose(
        lines[1].get_ydata(), pc.sinusoidal_wavelengths(64, base=10000.0).numpy()
    )
    assert fig.axes[0].get_yscale() == "log"
    assert {line.get_color().lower() for line in lines[:2]} <= {
        c.lower() for c in figures.OKABE_ITO
    }


def test_matrices_share_one_colour_scale():
    a, b = torch.eye(4), 0.5 * torch.ones(4, 4)
    fig = figures.matrices_figure({"a": a, "b": b})
    lims = {im.get_clim() for ax in fig.axes[:2] for im in ax.images}
    assert lims == {(-1.0, 1.0)}


def _line_data(fig):
    return [np.asarray(line.get_ydata(), dtype=float) for ax in fig.axes for line in ax.lines]


def test_curve_families_plot_the_given_values():
    x = np.arange(5.0)
    fig = figures.paired_curves_figure(
        x, {"a": x**2}, {"a": x + 1}, solid_label="s", dashed_label="d"
    )
    ys = _line_data(fig)
    assert any(np.array_equal(y, x**2) for y in ys) and any(np.array_equal(y, x + 1) for y in ys)
    fig = figures.mean_band_figure(x, {"m": x}, {"m": np.ones(5)}, reference={"r": 2 * x})
    ys = _line_data(fig)
    assert any(np.array_equal(y, x) for y in ys) and any(np.array_equal(y, 2 * x) for y in ys)
    fig = figures.marked_curves_figure(x, {"c": -x}, vlines={"L": 2.0}, hlines={"zero": 0.0})
    assert any(np.array_equal(y, -x) for y in _line_data(fig))


def test_offset_profiles_rescale_rows_to_unit_range():
    offsets = np.arange(-3, 4)
    prof = {"wide": 10 * np.cos(offsets), "narrow": 0.01 * np.sin(offsets)}
    fig = figures.offset_profiles_figure(offsets, prof)
    image = next(im for ax in fig.axes for im in ax.images).get_array()
    np.testing.assert_allclose(image.min(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(image.max(axis=1), 1.0, atol=1e-12)


def test_masked_matrices_keep_finite_values_and_mask_infinities():
    bias = pc.alibi_bias(2, 4, 4, dtype=torch.float64)
    fig = figures.masked_matrices_figure({f"head {h}": bias[h] for h in range(2)})
    data = fig.axes[0].images[0].get_array()
    finite = torch.isfinite(bias[0]).numpy()
    np.testing.assert_allclose(np.ma.getdata(data)[finite], bias[0].numpy()[finite])
    assert np.ma.getmaskarray(data)[~finite].all()


def test_circle_and_layout_figures_draw():
    fig = figures.unit_circle_figure([1.0, 0.1], 20, shift=3, starts=(0, 5))
    assert len(fig.axes) >= 2
    for ax in fig.axes[:2]:
        for coll in ax.collections:
            pts = np.asarray(coll.get_offsets())
            if len(pts) == 20:  # the positions: all on the unit circle
                np.testing.assert_allclose(np.hypot(pts[:, 0], pts[:, 1]), 1.0, atol=1e-12)
    assert figures.pair_layout_figure(8).axes


def test_bad_figure_arguments_name_the_argument():
    with pytest.raises(ValueError, match=r"head_dim must be an even integer in 2..32, got 7"):
        figures.pair_layout_figure(7)
    with pytest.raises(ValueError, match=r"head_dim must be an integer in 2..32, got 34"):
        figures.pair_layout_figure(34)


def test_t5_bucket_figure_draws_the_bucket_ids():
    from posenc_core.t5_bias import relative_position_bucket

    fig = figures.t5_bucket_figure(span=150, grid=40)
    fig.canvas.draw()  # it renders
    curves, images = fig.axes[0:2], fig.axes[2:4]
    r = np.arange(-150, 151)
    for ax, bidirectional in zip(curves, (True, False)):
        ids = relative_position_bucket(torch.from_numpy(r), bidirectional=bidirectional)
        line = next(line for line in ax.lines if len(line.get_ydata()) == r.size)
        np.testing.assert_array_equal(line.get_xdata(), r)
        np.testing.assert_array_equal(line.get_ydata(), ids.numpy())
        assert ax.get_xlabel() == "relative position r = j − i"
    assert curves[0].get_ylabel() == "bucket id"
    assert [ax.get_title() for ax in curves] == ["bidirectional (encoder)", "causal (decoder)"]
    legend = [t.get_text() for t in curves[0].get_legend().get_texts()]
    assert legend == ["exact: |r| < 8", "last bucket: |r| ≥ 91", "max_distance 128"]
    pos = torch.arange(40)
    for ax, bidirectional in zip(images, (True, False)):
        image = ax.images[0]
        expected = relative_position_bucket(pos[None] - pos[:, None], bidirectional=bidirectional)
        np.testing.assert_array_equal(image.get_array(), expected.numpy())
        assert image.get_cmap().name == figures.SEQUENTIAL and image.get_clim() == (0, 31)
        assert ax.get_xlabel() == "key position j"
    assert images[0].get_ylabel() == "query position i"
    assert fig.axes[-1].get_ylabel() == "bucket id"  # the colour bar
    plt.close(fig)
    with pytest.raises(ValueError, match=r"max_distance must be an integer greater than the 8"):
        figures.t5_bucket_figure(max_distance=8)
    with pytest.raises(ValueError, match=r"span must be a positive integer, got 0"):
        figures.t5_bucket_figure(span=0)


def test_seed_band_is_the_bucketed_mean_and_range_over_seeds():
    g = np.random.default_rng(0)
    a = g.standard_normal((3, 40))
    x, mean, low, high = figures.seed_band(a, bucket=8)
    per_seed = a.reshape(3, 5, 8).mean(2)  # 5 buckets of 8 positions
    np.testing.assert_allclose(x, [3.5, 11.5, 19.5, 27.5, 35.5])
    np.testing.assert_allclose(mean, per_seed.mean(0), rtol=1e-12)
    np.testing.assert_allclose(low, per_seed.min(0), rtol=1e-12)
    np.testing.assert_allclose(high, per_seed.max(0), rtol=1e-12)
    x, mean, _, _ = figures.seed_band(a[0], bucket=16)  # one seed; a short last bucket
    np.testing.assert_allclose(x, [7.5, 23.5, 35.5])
    np.testing.assert_allclose(mean, [a[0, :16].mean(), a[0, 16:32].mean(), a[0, 32:].mean()])
    with pytest.raises(ValueError, match=r"curves must have shape \(S, P\)"):
        figures.seed_band(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="bucket"):
        figures.seed_band(a, bucket=0)


def test_position_loss_figure_draws_each_curve_and_the_reference():
    g = np.random.default_rng(1)
    a, b, ref = (g.standard_normal((3, 64)) for _ in range(3))
    fig = figures.position_loss_figure(
        {"left": {"a": a}, "right": {"b": b}},
        train_len=16,
        reference={"ref": ref},
        targets={"right": 48},
    )
    assert len(fig.axes) == 2
    ys = _line_data(fig)
    for c in (a, b, ref):
        assert any(np.allclose(y, figures.seed_band(c)[1]) for y in ys)
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert labels[:3] == ["0", "L", "2L"]
    with pytest.raises(ValueError, match="panels must be a non-empty mapping"):
        figures.position_loss_figure({}, train_len=16)


def test_pair_axis_figure_colours_each_pair_by_its_axis():
    fig = figures.pair_axis_figure(128, (16, 24, 24))
    ax = fig.axes[0]
    image = ax.images[0]
    index = np.asarray(image.get_array())
    assert index.shape == (1, 64)
    np.testing.assert_array_equal(index[0], [0] * 16 + [1] * 24 + [2] * 24)  # t, h, w
    colours = [image.cmap(image.norm(v)) for v in (0, 1, 2)]
    expected = [matplotlib.colors.to_rgba(figures.AXIS_COLOURS[a]) for a in ("t", "h", "w")]
    assert colours == expected
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["temporal", "height", "width"]
    assert "frequency falls left to right" in ax.get_xlabel()
    plt.close(fig)
    schemes = {"axial 2-D": multi_axis.pair_axes(16), "M-RoPE": ["t"] * 2 + ["h"] * 6}
    fig = figures.pair_axis_figure(schemes=schemes)
    index = np.asarray(fig.axes[0].images[0].get_array())
    np.testing.assert_array_equal(index, [[0] * 4 + [1] * 4, [2] * 2 + [3] * 6])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["axial 2-D", "M-RoPE"]
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["row", "column", "temporal", "height"]
    plt.close(fig)
    with pytest.raises(ValueError, match="same positive number of pairs"):
        figures.pair_axis_figure(schemes={"a": ["t"], "b": ["t", "h"]})
    with pytest.raises(ValueError, match="mrope_section must sum to head_dim/2 = 8"):
        figures.pair_axis_figure(16, (1, 1, 1))


def test_patch_scores_figure_draws_the_grids_and_marks_the_query():
    axial = multi_axis.axial_score_grid(5, 6, 2, 3, 16)
    raster = multi_axis.raster_score_grid(5, 6, 2, 3, 16)
    grids, vlim = [axial, raster], (-20.0, 20.0)
    fig = explorer_frames.patch_scores_figure(
        grids, (2, 3), titles=["axial", "raster"], vlim=vlim, title="query"
    )
    panels, bar = fig.axes[:2], fig.axes[2]
    for ax, grid in zip(panels, grids):
        image = ax.images[0]
        np.testing.assert_array_equal(image.get_array(), grid.numpy())
        assert image.get_cmap().name == "viridis" and image.get_clim() == vlim
        (mark,) = ax.patches
        assert mark.get_xy() == (2.5, 1.5) and mark.get_width() == 1  # column 3, row 2
    assert [ax.get_title() for ax in panels] == ["axial", "raster"]
    assert bar.get_ylabel() == "score q . k" and fig.get_suptitle() == "query"
    plt.close(fig)
    with pytest.raises(ValueError, match=r"grids must be \(h, w\) arrays of one shape"):
        explorer_frames.patch_scores_figure([axial, raster[:2]], (0, 0), titles="ab", vlim=vlim)
    with pytest.raises(ValueError, match=r"query\[0\] must be an integer in 0\.\.4, got 5"):
        explorer_frames.patch_scores_figure(grids, (5, 0), titles="ab", vlim=vlim)
    with pytest.raises(ValueError, match="titles must give one title per grid"):
        explorer_frames.patch_scores_figure(grids, (0, 0), titles="a", vlim=vlim)


def test_figure_png_records_the_smallest_text_and_names_bad_arguments():
    fig = figures.sinusoidal_heatmap(10, 8)
    png = explorer_frames.figure_png(fig, dpi=50, colors=16)
    assert png.startswith(b"\x89PNG") and f"{figures.TEXT_SIZE_KEY}\0".encode() in png
    assert _png_size(png) == (round(fig.get_figwidth() * 50), round(fig.get_figheight() * 50))
    with pytest.raises(TypeError, match="fig must be a matplotlib Figure, got int"):
        explorer_frames.figure_png(3)
    with pytest.raises(ValueError, match=r"dpi must be a number in \(0, 600\], got 0"):
        explorer_frames.figure_png(fig, dpi=0)
    with pytest.raises(ValueError, match=r"colors must be None or an integer in 2..256, got 1"):
        explorer_frames.figure_png(fig, colors=1)


def test_pair_usage_figure_bars_are_the_mean_shares_with_seed_ranges():
    rng = np.random.default_rng(0)
    shares = rng.dirichlet(np.ones(8), size=(3, 2, 4))  # (S, l, h, n), rows sum to 1
    lam = 2 * np.pi / (10000.0 ** (-np.arange(0, 16, 2) / 16))
    fig = figures.pair_usage_figure(shares, lam, train_len=64)
    left, right = fig.axes[:2]
    heights = [b.get_height() for b in left.patches[:8]]
    np.testing.assert_allclose(heights, shares.mean((1, 2)).mean(0))
    hatched = [bool(b.get_hatch()) for b in left.patches[:8]]
    assert hatched == list(64 / lam <= 0.125)  # pairs 4..7: at most 1/8 turn within L
    np.testing.assert_allclose(right.images[0].get_array(), shares[0].reshape(8, 8))
    with pytest.raises(ValueError, match="shape"):
        figures.pair_usage_figure(shares[0], lam, train_len=64)
    with pytest.raises(ValueError, match="wavelengths_"):
        figures.pair_usage_figure(shares, lam[:4], train_len=64)


# --- Figures drawn for the book's column ------------------------------------------------


def _png_size(png: bytes) -> tuple[int, int]:
    import struct

    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


def test_figure_for_display_is_twice_the_shown_size_and_records_the_smallest_text():
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.plot([0, 1], [0, 1], label="a line")
    ax.set_title("title", fontsize=12)
    ax.tick_params(labelsize=9)
    ax.annotate("small note", (0.5, 0.5), fontsize=7.5)
    ax.annotate("", (0.2, 0.2))  # an empty annotation has no text to read
    hidden = ax.text(0, 0, "hidden", fontsize=3)
    hidden.set_visible(False)
    plt.close(fig)
    assert figures.smallest_text_pt(fig) == 7.5
    png, shown = figures.figure_for_display(fig)
    width, height = _png_size(png)
    assert shown == {"width": width // figures.PIXEL_RATIO, "height": height // figures.PIXEL_RATIO}
    # a 4 x 2 inch figure (tight box: a little more or less) at DISPLAY_DPI CSS px per inch
    assert 0.8 * 4 * figures.DISPLAY_DPI < shown["width"] < 1.1 * 4 * figures.DISPLAY_DPI
    record = f"{figures.TEXT_SIZE_KEY}\0".encode() + b"7.5"
    assert record in png


def test_smallest_text_pt_names_a_bad_argument():
    with pytest.raises(TypeError, match="fig must be a matplotlib Figure, got int"):
        figures.smallest_text_pt(3)


def test_book_figures_fit_the_column_and_their_text_stays_readable():
    """Widths above the column would be shrunk on the page, their text with them."""
    r = np.random.default_rng(0)
    made = {
        "matrices x3": figures.matrices_figure({k: r.standard_normal((8, 8)) for k in "abc"}),
        "matrices x4 asked 12 in": figures.matrices_figure(
            {k: r.standard_normal((8, 8)) for k in "abcd"}, width=12
        ),
        "circles x3": figures.unit_circle_figure([1.0, 0.1, 0.01], 20),
        "overview": figures.schemes_overview_figure(),
        "heatmap": figures.sinusoidal_heatmap(20, 16, highlight=3),
    }
    for name, fig in made.items():
        assert fig.get_figwidth() <= figures.COLUMN_WIDTH + 1e-9, name
        _, shown = figures.figure_for_display(fig)
        assert shown["width"] <= 680, (name, shown)  # the column is 672 CSS px
        assert figures.smallest_text_pt(fig) >= figures.MIN_TEXT_PT, name


def test_panels_wrap_into_rows_and_hide_the_spare_cell():
    fig = figures.matrices_figure({k: np.eye(4) for k in "abcde"})
    shown = [ax for ax in fig.axes if ax.get_visible() and ax.images]
    assert len(shown) == 5
    rows = {round(ax.get_position().y0, 3) for ax in shown}
    assert len(rows) == 3, "five panels two a row take three rows"


def test_legends_sit_below_the_plot_not_on_the_curves():
    x = np.linspace(0, 1, 20)
    fig = figures.marked_curves_figure(x, {"up": x, "down": 1 - x})
    fig.canvas.draw()
    assert not fig.axes[0].get_legend(), "the legend is the figure's, not inside the axes"
    (legend,) = fig.legends
    assert legend.get_window_extent().y1 <= fig.axes[0].get_window_extent().y0 + 1


def test_shown_figures_use_the_book_formatter_in_ipython():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    fig = figures.sinusoidal_heatmap(10, 8)
    data, metadata = shell.display_formatter.format(fig)
    png = data["image/png"]
    assert figures.TEXT_SIZE_KEY.encode() in png
    width, _ = _png_size(png)
    assert metadata["image/png"]["width"] == width // figures.PIXEL_RATIO


def test_schemes_overview_names_a_bad_argument():
    with pytest.raises(ValueError, match="d_model must be even, got 63"):
        figures.schemes_overview_figure(d_model=63)
