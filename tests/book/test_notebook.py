"""glue's mapping form: one myst_nb.glue call per value under the book build, the plain
fallback without myst_nb."""

import builtins

import numpy as np
import pytest

from posenc_core.book.notebook import glue


@pytest.fixture
def stored(monkeypatch):
    import myst_nb

    calls = []
    monkeypatch.setattr(
        myst_nb,
        "glue",
        lambda name, value, display=False: calls.append((name, value, display)),
    )
    return calls


@pytest.fixture
def no_myst_nb(monkeypatch):
    """A stock Jupyter: importing myst_nb fails."""
    real_import = builtins.__import__

    def no_myst(name, *args, **kwargs):
        if name.startswith("myst_nb"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_myst)


def test_a_mapping_is_glued_one_value_at_a_time(stored):
    glue({"a": 1.5, "b": np.float64(0.25), "c": "text"})
    assert stored == [("a", 1.5, False), ("b", 0.25, False), ("c", "text", False)]
    assert type(stored[1][1]) is float  # numpy scalars unwrapped, as for one value


def test_a_mapping_glues_what_one_call_per_value_glues(stored):
    values = {"x": np.int64(3), "y": [1, 2], "z": 2.0}
    glue(values, display=True)
    one_by_one = list(stored)
    stored.clear()
    for name, value in values.items():
        glue(name, value, display=True)
    assert stored == one_by_one


def test_a_mapping_without_myst_nb_is_skipped_or_shown(no_myst_nb, capsys):
    glue({"x": 1.5, "y": 2.5})
    assert capsys.readouterr().out == ""
    glue({"x": 1.5, "y": 2.5}, display=True)
    out = capsys.readouterr().out
    assert "1.5" in out and "2.5" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (({"a": 1}, 2), "value must be omitted"),
        (("a",), "needs a value"),
        (({"": 1},), "non-empty string"),
        ((3, 1), "non-empty string or a mapping"),
    ],
)
def test_bad_calls_are_refused(args, message):
    with pytest.raises(TypeError, match=message):
        glue(*args)


def test_glue_falls_back_outside_a_book_build(no_myst_nb, capsys):
    glue("x", 1.5)  # no myst_nb: silently skipped
    glue("y", 2.5, display=True)  # shown instead
    assert "2.5" in capsys.readouterr().out


def test_glue_stores_numpy_scalars_as_python_numbers(monkeypatch):
    # myst_nb glues a value's repr; np.float64(0.5) would reach the text as
    # "np.float64(0.5)", which {glue:text}`name:.3f` cannot format
    import myst_nb

    stored = {}
    monkeypatch.setattr(
        myst_nb, "glue", lambda name, value, display=False: stored.update({name: value})
    )
    glue("f", np.float64(0.5))
    glue("i", np.int64(3))
    assert type(stored["f"]) is float and stored["f"] == 0.5
    assert type(stored["i"]) is int and stored["i"] == 3
