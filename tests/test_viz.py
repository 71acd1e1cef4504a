"""Figures draw what posenc_core computes, with colour-blind-safe colour maps."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import torch

import posenc_core as pc
from posenc_core import viz
from posenc_core.notebook import glue


def test_heatmap_shows_the_table_and_highlights_a_row():
    fig = viz.sinusoidal_heatmap(100, 128, highlight=7)
    image = fig.axes[0].images[0]
    np.testing.assert_allclose(image.get_array(), pc.sinusoidal_table(100, 128, dtype=torch.float64).numpy())
    assert image.get_cmap().name == viz.DIVERGING
    profile = next(line for ax in fig.axes for line in ax.lines if len(line.get_ydata()) == 128)
    np.testing.assert_allclose(profile.get_ydata(), pc.sinusoidal_table(100, 128, dtype=torch.float64)[7].numpy())


def test_wavelength_figure_plots_wavelengths_per_base():
    fig = viz.wavelength_figure(64, [100.0, 10000.0], lengths={"L": 512})
    lines = fig.axes[0].lines
    np.testing.assert_allclose(lines[0].get_ydata(), pc.wavelengths(64, base=100.0).numpy())
    np.testing.assert_allclose(lines[1].get_ydata(), pc.wavelengths(64, base=10000.0).numpy())
    assert fig.axes[0].get_yscale() == "log"
    assert {l.get_color().lower() for l in lines[:2]} <= {c.lower() for c in viz.OKABE_ITO}


def test_matrices_share_one_colour_scale():
    a, b = torch.eye(4), 0.5 * torch.ones(4, 4)
    fig = viz.matrices_figure({"a": a, "b": b})
    lims = {im.get_clim() for ax in fig.axes[:2] for im in ax.images}
    assert lims == {(-1.0, 1.0)}


def test_glue_falls_back_outside_a_book_build(monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_myst(name, *args, **kwargs):
        if name.startswith("myst_nb"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_myst)
    glue("x", 1.5)  # no myst_nb: silently skipped
    glue("y", 2.5, display=True)  # shown instead
    assert "2.5" in capsys.readouterr().out
