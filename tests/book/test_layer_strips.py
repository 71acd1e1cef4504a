"""The layer strips draw each plan cell by cell: one cell per layer, a layer without rotation
unlike one with, a mark where a layer carries one, a legend that names every mark drawn; the
one-line summary counts the layers as the plan has them; and the phone rendition stays
readable."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.colors as mcolors
import pytest

from posenc_core.book import figures
from posenc_core.book.figures.layer_strips import layer_strips_figure, plan_summary
from posenc_core.book.real_configs import REAL_CONFIGS
from posenc_core.rope import layer_plan

PLANS = {name: layer_plan(config) for name, config in REAL_CONFIGS.items()}


@pytest.fixture(scope="module")
def fig():
    return layer_strips_figure(PLANS)


def cells(ax):
    return [p for p in ax.patches]


def legend_texts(fig):
    return {t.get_text() for leg in fig.legends for t in leg.texts}


def test_one_strip_per_model_one_cell_per_layer(fig):
    assert [ax.get_title(loc="left") for ax in fig.axes] == list(PLANS)
    for ax, plan in zip(fig.axes, PLANS.values()):
        assert len(cells(ax)) == len(plan), ax.get_title(loc="left")
        # cell i sits at layer i, left to right
        assert [c.get_x() + 0.5 for c in cells(ax)] == list(range(len(plan)))


def test_a_layer_without_rotation_is_drawn_unlike_one_with(fig):
    """Llama 4 Scout: layer 3 is NoPE (white, hatched), layer 0 rotates (filled, no hatch)."""
    ax = fig.axes[list(PLANS).index("Llama 4 Scout")]
    rope, nope = cells(ax)[0], cells(ax)[3]
    assert rope.get_hatch() is None and nope.get_hatch()
    assert mcolors.to_hex(nope.get_facecolor()) == "#ffffff"
    assert mcolors.to_hex(rope.get_facecolor()) != "#ffffff"
    # in every strip, hatched cells are exactly the layers that do not rotate
    for ax, plan in zip(fig.axes, PLANS.values()):
        hatched = [bool(c.get_hatch()) for c in cells(ax)]
        assert hatched == [p.rope is None for p in plan], ax.get_title(loc="left")


def test_colours_follow_the_attention_kind(fig):
    """Gemma 3: sliding and full layers differ in colour; a NoPE cell keeps its kind's colour
    as its border (Command A's full layers)."""
    ax = fig.axes[list(PLANS).index("Gemma 3 27B")]
    sliding, full = cells(ax)[0], cells(ax)[5]
    assert mcolors.to_hex(sliding.get_facecolor()) != mcolors.to_hex(full.get_facecolor())
    ax = fig.axes[list(PLANS).index("Command A")]
    assert mcolors.to_hex(cells(ax)[3].get_edgecolor()) == mcolors.to_hex(full.get_facecolor())


def marks(ax):
    """label -> sorted layers it marks, from the scatters drawn on ``ax``."""
    return {c.get_label(): sorted(int(x) for x, _ in c.get_offsets()) for c in ax.collections}


def test_marks_sit_on_the_layers_that_carry_them(fig):
    names = list(PLANS)
    gemma3 = marks(fig.axes[names.index("Gemma 3 27B")])
    globals_ = list(range(5, 62, 6))  # the report's every 6th layer
    assert gemma3["base unlike the other rotating layers"] == globals_
    assert gemma3["scaled rotation (rope_type)"] == globals_
    llama = marks(fig.axes[names.index("Llama 4 Scout")])
    assert llama["query temperature"] == list(range(3, 48, 4))
    gpt = marks(fig.axes[names.index("GPT-OSS 120b")])
    assert gpt["sink logits"] == list(range(36))
    qwen = marks(fig.axes[names.index("Qwen3-Next 80B-A3B")])
    assert qwen == {"partial rotation or p-RoPE": list(range(3, 48, 4))}
    assert marks(fig.axes[names.index("SmolLM3 3B")]) == {}  # nothing to mark


def test_the_legend_lists_every_mark_drawn_and_no_other(fig):
    drawn = {c.get_label() for ax in fig.axes for c in ax.collections}
    assert len(drawn) == 5
    texts = legend_texts(fig)
    assert drawn <= texts
    one = layer_strips_figure({"SmolLM3 3B": PLANS["SmolLM3 3B"]})
    assert legend_texts(one) == {"full attention", "no rotation (NoPE, linear)"}


@pytest.mark.parametrize(
    "name, summary",
    [
        (
            "Llama 4 Scout",
            "48 layers: 36 chunked (8192) RoPE, base 500k, llama3 x16 + 12 full NoPE, temperature",
        ),
        ("SmolLM3 3B", "36 layers: 27 full RoPE, base 5M + 9 full NoPE"),
        ("Qwen3-Next 80B-A3B", "48 layers: 36 linear + 12 full RoPE, base 10M, partial 0.25"),
    ],
)
def test_summary_counts_the_layers(name, summary):
    """Counts from the model cards (Llama 4: every 4th of 48 NoPE, so 36 + 12; SmolLM3: 27 +
    9; Qwen3-Next: 12 x (3 linear + 1 attention))."""
    assert plan_summary(PLANS[name]) == summary


def test_summary_says_once_what_every_group_shares():
    got = plan_summary(PLANS["GPT-OSS 120b"])
    assert got == "36 layers: 18 sliding (128) RoPE + 18 full RoPE; base 150k, yarn x32, sinks"


def test_bad_input_is_refused():
    with pytest.raises(TypeError, match="plans must be a non-empty mapping"):
        layer_strips_figure({})
    with pytest.raises(TypeError, match=r"plans\['x'\] must be what .*layer_plan returns"):
        layer_strips_figure({"x": [1, 2]})
    with pytest.raises(ValueError, match="width must be a number of inches >= 2, got 1"):
        layer_strips_figure(PLANS, width=1)
    with pytest.raises(TypeError, match="plans must be what .*layer_plan returns.*got str"):
        plan_summary("48 layers")


def test_strips_share_one_cell_width_unless_asked_not_to(fig):
    """Same scale: every strip spans the deepest model's 64 layers (Command A); otherwise
    each strip spans its own layers."""
    assert {ax.get_xlim() for ax in fig.axes} == {(-0.5, 63.5)}
    own = layer_strips_figure(PLANS, same_scale=False)
    assert [ax.get_xlim()[1] for ax in own.axes] == [len(p) - 0.5 for p in PLANS.values()]


def test_phone_rendition_fits_and_reads():
    """As tests/book/test_figures_phone.py checks every figure: at most 342 CSS px wide and
    its smallest text >= 9 px as shown (the phone drawing is the figure at PHONE_WIDTH)."""
    phone = figures.phone_rendition(layer_strips_figure(PLANS))
    width, _ = figures.png_size(phone)
    assert width / figures.PIXEL_RATIO <= 342
    small = layer_strips_figure(PLANS, width=figures.PHONE_WIDTH)
    assert figures.smallest_text_pt(small) * figures.DISPLAY_DPI / 72 >= 9.0
