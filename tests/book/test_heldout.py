"""posenc_core.book.studies.heldout: the held-out windows and what is measured on them."""

import numpy as np
import pytest
import torch

from posenc_core.book.studies import heldout

DATA = torch.arange(200) % 256


def _uniform(tokens):
    """Two layers, three heads, every query spreading its weight evenly over keys 0 .. i."""
    b, s = tokens.shape
    w = torch.ones(s, s, dtype=torch.float64).tril()
    w = (w / w.sum(-1, keepdim=True)).expand(b, 3, s, s)
    return [w, w]


def _previous(tokens):
    """One layer whose every query puts all its weight on the key just before it (itself at 0)."""
    b, s = tokens.shape
    w = torch.zeros(s, s)
    w[torch.arange(s), (torch.arange(s) - 1).clamp_min(0)] = 1.0
    return [w.expand(b, 2, s, s)]


def test_uniform_attention_by_distance_matches_counting():
    edges = [0, 1, 2, 4, 8, 16, 32]
    mass, mean = heldout.attention_by_distance(_uniform, DATA, 32, (10, 30), edges, batch=2)
    expected = np.zeros(len(edges) - 1)
    for i in range(10, 30):
        for d in range(i + 1):  # each key j = i - d gets 1 / (i + 1)
            band = next(k for k in range(len(edges) - 1) if edges[k] <= d < edges[k + 1])
            expected[band] += 1 / (i + 1) / 20
    assert mass.shape == (2, 6) and mean.shape == (2,)
    np.testing.assert_allclose(mass, [expected, expected], rtol=1e-12)
    np.testing.assert_allclose(mass.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(mean, sum(i / 2 for i in range(10, 30)) / 20, rtol=1e-12)


def test_previous_token_attention_is_all_at_distance_one():
    mass, mean = heldout.attention_by_distance(_previous, DATA, 16, (1, 16), [0, 1, 2, 16])
    np.testing.assert_array_equal(mass, [[0.0, 1.0, 0.0]])
    np.testing.assert_array_equal(mean, [1.0])


def test_record_holds_both_bands_and_power_of_two_edges():
    rec = heldout.attention_record(_uniform, DATA, 24, {"in": (4, 8), "far": (12, 24)})
    assert rec["edges"] == [0, 1, 2, 4, 8, 16, 24]
    assert rec["windows"] == heldout.ATTENTION_WINDOWS
    assert rec["far"]["queries"] == [12, 24] and len(rec["far"]["mass"]) == 2


@pytest.mark.parametrize(
    "queries, edges, match",
    [
        ((8, 4), [0, 32], "queries must be"),
        ((0, 40), [0, 64], "queries must be"),
        ((0, 8), [1, 8], "edges must increase from 0"),
        ((0, 8), [0, 4], "at least hi = 8"),
        ((0, 8), [0, 4, 4, 8], "edges must increase"),
    ],
)
def test_bad_arguments_name_what_is_wrong(queries, edges, match):
    with pytest.raises(ValueError, match=match):
        heldout.attention_by_distance(_uniform, DATA, 32, queries, edges)
    with pytest.raises(TypeError, match="weights_of must be callable"):
        heldout.attention_by_distance("model", DATA, 32, (0, 8), [0, 8])
