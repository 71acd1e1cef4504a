"""Every figure function has a phone rendition that fits a phone's text column unshrunk.

``figure_for_display`` returns the desktop PNG with the phone PNG inside it (the private chunk
``PHONE_CHUNK``, which _ext/figure_renditions.py splits out at build time). The phone column is
342 CSS px at a 390 px viewport (measured in the built book; tests/built/test_figure_text.py
checks the displayed text there), so a phone PNG at most that wide is shown at its drawn size
and its smallest text at ``pt * DISPLAY_DPI / 72`` CSS px.
"""

import struct

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch
from matplotlib.text import Text

import posenc_core as pc
from posenc_core.book import figures
from posenc_core.book.figures import (
    curves,
    geometry,
    layer_strips,
    matrices,
    overview,
    several_axes,
    style,
)
from posenc_core.book.notebook import BUILD_ENV
from posenc_core.book.real_configs import REAL_CONFIGS


@pytest.fixture(autouse=True)
def book_build(monkeypatch):
    """The phone rendition is drawn in the book's build only (figure_for_display)."""
    monkeypatch.setenv(BUILD_ENV, "1")


PHONE_COLUMN_PX = 342  # the text column at a 390 x 844 viewport (chromium, the built book)
MIN_DISPLAYED_PX = 9.0


def chunks(png: bytes) -> dict[bytes, bytes]:
    """The PNG's chunks by type (the last of each type), from an independent parse."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    found, at = {}, 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        found[png[at + 4 : at + 8]] = png[at + 8 : at + 8 + length]
        at += 12 + length
    return found


def text_pt(png: bytes) -> float:
    key, _, value = chunks(png)[b"tEXt"].partition(b"\0")
    assert key.decode() == figures.TEXT_SIZE_KEY
    return float(value)


def width_px(png: bytes) -> int:
    return struct.unpack(">I", chunks(png)[b"IHDR"][:4])[0]


def _curves(n: int, labels: list[str], length: int = 256) -> dict:
    g = np.random.default_rng(n)
    return {k: g.standard_normal((3, length)).cumsum(1) / 40 + 2 for k in labels}


def _bands(labels: list[str]) -> dict:
    x = np.arange(50.0)
    return {k: (x, 0.5 + 0.01 * x * (i + 1), 0.05 * np.ones(50)) for i, k in enumerate(labels)}


# One representative call of each figure function, shaped like the chapters' own calls (the
# same number of panels and lengths of labels), small enough to draw in well under a second.
CALLS = {
    "marked_curves_figure": lambda: figures.marked_curves_figure(
        np.arange(100.0),
        {"measured share": np.linspace(1, 0, 100), "1/(i + 1), the formula": 1 / np.arange(1, 101)},
        xlabel="position i",
        ylabel="share of the output",
        vlines={"L = 64": 64.0},
        hlines={"uniform": 0.1},
        logy=True,
        legend_loc="lower left",
    ),
    "wavelength_figure": lambda: figures.wavelength_figure(
        64, [100.0, 10000.0, 500000.0], lengths={"L = 512": 512, "L = 4096": 4096}
    ),
    "paired_curves_figure": lambda: figures.paired_curves_figure(
        np.arange(20.0),
        {"base 10000": np.arange(20.0), "base 500000": np.arange(20.0) / 2},
        {"base 10000": np.arange(20.0) + 1, "base 500000": np.arange(20.0) / 2 + 1},
        solid_label="closed form",
        dashed_label="measured",
        xlabel="offset k",
        ylabel="score",
    ),
    "offset_profiles_figure": lambda: figures.offset_profiles_figure(
        np.arange(-20, 21),
        {f"head {h}": np.cos(np.arange(-20, 21) / (h + 1)) * 10.0**-h for h in range(6)},
        xlabel="key position − query position",
        title="Position–position term by offset, MiniLM layer 0",
    ),
    "mean_band_figure": lambda: figures.mean_band_figure(
        np.arange(30.0),
        {"sinusoidal": np.arange(30.0), "learned": np.arange(30.0) / 2},
        {"sinusoidal": np.ones(30), "learned": np.ones(30)},
        reference={"chance": np.full(30, 3.0)},
        xlabel="training step",
        ylabel="loss",
    ),
    "band_panels_figure": lambda: figures.band_panels_figure(
        {
            name: _bands(["RoPE", "ALiBi", "sinusoidal", "learned", "NoPE"])
            for name in ("first token", "lookback", "copy", "sort")
        },  # fmt: skip
        xlabel="position (sequences of length 4L)",
        ylabel="token accuracy",
        vline=(16, "L = 16"),
        ylim=(0, 1.05),
        width=12,
    ),
    "position_loss_figure": lambda: figures.position_loss_figure(
        {
            "RoPE": _curves(1, ["done right", "no document mask", "positions not restarted"]),
            "learned table": _curves(2, ["done right", "positions not restarted"]),
        },
        train_len=32,
        reference={"RoPE, no scaling": _curves(3, ["x"])["x"]},
        targets={"RoPE": 96},
    ),
    "unit_circle_figure": lambda: figures.unit_circle_figure(
        [1.0, 0.1, 0.01], 24, shift=3, starts=(2, 14), labels=(0,)
    ),
    "sinusoidal_heatmap": lambda: figures.sinusoidal_heatmap(100, 128, highlight=7),
    "heatmap_figure": lambda: figures.heatmap_figure(
        np.random.default_rng(0).standard_normal((40, 64)), highlight=3, title="a table"
    ),
    "matrices_figure": lambda: figures.matrices_figure(
        {k: np.random.default_rng(0).standard_normal((12, 12)) for k in ("NoPE", "sin", "RoPE")},
        xlabel="key position n",
        ylabel="query position m",
        width=11,
        height=3.2,
    ),
    "rows_figure": lambda: figures.rows_figure(
        {
            k: torch.from_numpy(np.random.default_rng(i).standard_normal((3, 64)))
            for i, k in enumerate(("dog bites man", "man bites dog"))
        },
        title="First-layer attention outputs without positions",
    ),
    "masked_matrices_figure": lambda: figures.masked_matrices_figure(
        {f"head {h}": pc.alibi_bias(8, 12, 12, dtype=torch.float64)[h - 1] for h in (1, 4, 8)},
        colorbar_label="bias −m·(i − j)",
    ),
    "pair_layout_figure": lambda: figures.pair_layout_figure(16),
    "t5_bucket_figure": lambda: figures.t5_bucket_figure(span=150, grid=40),
    "schemes_overview_figure": lambda: figures.schemes_overview_figure(),
    "pair_axis_figure": lambda: figures.pair_axis_figure(128, (16, 24, 24)),
    "pair_usage_figure": lambda: figures.pair_usage_figure(
        np.random.default_rng(0).dirichlet(np.ones(8), size=(2, 2, 4)),
        2 * np.pi * 10000.0 ** (np.arange(8) / 8),
        train_len=64,
    ),
}
CALLS["layer_strips_figure"] = lambda: figures.layer_strips_figure(
    {name: pc.rope.layer_plan(REAL_CONFIGS[name]) for name in ("Llama 4 Scout", "Gemma 3 27B")}
)
if hasattr(figures, "base_bound_figure"):  # chapter 3's figure (another module, same style)
    CALLS["base_bound_figure"] = lambda: figures.base_bound_figure(
        [1024, 4096, 32768], [4e3, 2e4, 5e5], published={"Men et al.": [5e3, 2.5e4, 6e5]},
        models={"Llama 2": (4096, 1e4)}
    )  # fmt: skip


def test_every_figure_function_has_a_representative_call():
    modules = (curves, geometry, layer_strips, matrices, overview, several_axes)
    drawn = {name for m in modules for name in m.__all__ if callable(getattr(m, name))}
    assert drawn - {"seed_band", "plan_summary"} <= set(CALLS), drawn - set(CALLS)


def _state(fig) -> tuple:
    """What the phone rendition changes and must put back: size, grid cells, legends, texts."""
    fig.draw_without_rendering()
    texts = [t.get_text() for t in fig.findobj(Text) if t.get_visible()]
    specs = [
        (s.get_gridspec().get_geometry(), s.rowspan, s.colspan) if s else None
        for s in (ax.get_subplotspec() for ax in fig.axes)
    ]
    legends = [leg._ncols for leg in [*fig.legends, *(ax.get_legend() for ax in fig.axes)] if leg]
    return tuple(fig.get_size_inches()), specs, legends, texts


@pytest.mark.parametrize("name", sorted(CALLS))
def test_phone_rendition_fits_the_phone_column_and_its_text_is_readable(name):
    fig, twin = CALLS[name](), CALLS[name]()
    desktop, shown = figures.figure_for_display(fig)
    phone = chunks(desktop).get(figures.PHONE_CHUNK)
    assert phone is not None, f"{name}: the desktop PNG carries no phone rendition"
    assert width_px(phone) / figures.PIXEL_RATIO <= PHONE_COLUMN_PX, name
    displayed = text_pt(phone) * figures.DISPLAY_DPI / 72
    assert displayed >= MIN_DISPLAYED_PX, (name, displayed)
    assert text_pt(phone) >= figures.MIN_TEXT_PT
    # the desktop PNG is the one drawn without a phone rendition, and the figure is put back
    assert chunks(desktop)[b"IHDR"] == chunks(style._png(twin))[b"IHDR"]
    assert shown["width"] == width_px(desktop) // figures.PIXEL_RATIO
    assert _state(fig) == _state(twin)


def test_desktop_png_carries_the_phone_png_in_a_chunk_viewers_skip():
    fig = CALLS["position_loss_figure"]()
    desktop, _ = figures.figure_for_display(fig)
    found = chunks(desktop)
    kind = figures.PHONE_CHUNK
    assert kind[0:1].islower() and kind[1:2].islower(), "ancillary and private"
    assert kind[2:3].isupper(), "the reserved bit stays clear"
    assert list(found)[-1] == b"IEND"
    phone = found[kind]
    assert chunks(phone)[b"IEND"] == b"" and width_px(phone) < width_px(desktop)
    # two panels side by side at 672 px become one under the other on the phone
    assert (
        struct.unpack(">II", chunks(phone)[b"IHDR"][:8])[1]
        > struct.unpack(">II", found[b"IHDR"][:8])[1]
    )


def test_outside_the_book_build_no_phone_rendition_is_drawn(monkeypatch):
    """Jupyter and Colab show the desktop PNG only: the phone PNG is drawn for the build."""
    monkeypatch.delenv(BUILD_ENV)
    fig = CALLS["position_loss_figure"]()
    desktop, _ = figures.figure_for_display(fig)
    assert figures.PHONE_CHUNK not in chunks(desktop)
    assert desktop == style._png(fig)


def test_a_figure_no_wider_than_the_phone_column_carries_no_second_png():
    fig, ax = figures.new_figure(3.0, 2.0)
    ax.plot([0, 1], [0, 1])
    desktop, _ = figures.figure_for_display(fig)
    assert figures.PHONE_CHUNK not in chunks(desktop)


def test_phone_rendition_rejects_what_is_not_a_figure():
    with pytest.raises(TypeError, match="fig must be a matplotlib Figure, got int"):
        figures.phone_rendition(3)
