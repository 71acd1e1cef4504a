"""The base-bound figure of chapter 3 draws the numbers it is given: the computed bound as its
line, each source's published bases (filled where they meet the bound, hollow where they fail
it) and their ratio to the bound, the models' bases; and its text stays readable."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from posenc_core.analysis import rope_base_lower_bound, rope_base_meets_bound
from posenc_core.book import figures
from posenc_core.book.figures.base_bound import base_bound_figure

CONTEXTS = [1024, 2048, 4096]
# Men et al.'s published bases for these lengths (head_dim 128), as printed in their table
MEN = [4.3e3, 1.6e4, 2.7e4]


@pytest.fixture(scope="module")
def drawn():
    bound = [rope_base_lower_bound(L - 1, 128) for L in CONTEXTS]
    fails = [not rope_base_meets_bound(L - 1, 128, base=b) for L, b in zip(CONTEXTS, MEN)]
    fig = base_bound_figure(
        CONTEXTS, bound, {"Men et al.": MEN}, {"Men et al.": fails}, {"Llama 2": (4096, 1e4)}
    )
    return fig, bound, fails


def _points(ax):
    """(x, y, filled) of every marker drawn by scatter on ``ax``, sorted."""
    out = []
    for coll in ax.collections:
        faces = coll.get_facecolors()
        filled = len(faces) > 0 and faces[0][3] > 0
        out += [(float(x), float(y), bool(filled)) for x, y in coll.get_offsets()]
    return sorted(out)


def test_the_line_is_the_computed_bound(drawn):
    fig, bound, _ = drawn
    line = fig.axes[0].lines[0]
    np.testing.assert_array_equal(line.get_xdata(), CONTEXTS)
    np.testing.assert_allclose(line.get_ydata(), bound, rtol=0)
    assert fig.axes[0].get_yscale() == "log"


def test_published_bases_are_filled_where_they_pass_and_hollow_where_they_fail(drawn):
    fig, _, fails = drawn
    # At L = 4096 the printed 2.7e4 lies just above the bound (26,952) and still fails: the
    # bases that meet it are not an interval (chapter 3; tests/core/test_base_bound.py).
    assert fails == [False, False, True]
    top = [p for p in _points(fig.axes[0]) if p[1] != 1e4]  # leave out the model's star
    assert top == [(L, b, not f) for L, b, f in zip(CONTEXTS, MEN, fails)]


def test_the_lower_panel_is_published_over_computed(drawn):
    fig, bound, fails = drawn
    ratios = _points(fig.axes[1])
    assert [(x, filled) for x, _, filled in ratios] == [(L, not f) for L, f in zip(CONTEXTS, fails)]
    np.testing.assert_allclose([y for _, y, _ in ratios], np.divide(MEN, bound), rtol=1e-12)
    assert [line.get_ydata()[0] for line in fig.axes[1].lines] == [1.0]


def test_a_model_is_a_labelled_star(drawn):
    fig, _, _ = drawn
    assert (4096.0, 1e4, True) in _points(fig.axes[0])
    assert "Llama 2" in [t.get_text() for t in fig.axes[0].texts]


def test_text_is_readable(drawn):
    fig, _, _ = drawn
    assert figures.smallest_text_pt(fig) >= figures.MIN_TEXT_PT
    assert fig.get_size_inches()[0] <= figures.COLUMN_WIDTH


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"contexts": [], "bound": []}, "at least one"),
        ({"bound": [1.0, 2.0]}, "bound must hold one value per context length"),
        ({"bound": [1.0, -2.0, 3.0]}, "bound must be positive"),
        ({"published": {"Su": [1.0]}}, "published['Su']"),
        ({"published": {"Su": [1.0] * 3}, "fails": {"Su": [True]}}, "fails['Su']"),
        ({"fails": {"Su": [True] * 3}}, "not in published"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(kwargs, message):
    args = {"contexts": CONTEXTS, "bound": [1.0, 2.0, 3.0], **kwargs}
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        base_bound_figure(**args)


def test_the_figure_is_exported_by_the_package():
    assert figures.base_bound_figure is base_bound_figure
    assert "base_bound_figure" in figures.__all__
