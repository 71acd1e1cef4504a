"""Reading the mixing study's results: entries in seed order, losses, savings and span means,
checked on a small hand-made results dict."""

from __future__ import annotations

import numpy as np
import pytest

from posenc_core.book.studies import mixing_results as mr


def entry(layout, seed, loss, copy, control):
    probe = {"32": {"copy": copy, "control": control}, "8": {"copy": 1.0, "control": 1.5}}
    return {"layout": layout, "seed": seed, "loss": loss, "probe": probe,
            "secondary": {"loss": [x + 1 for x in loss], "probe": probe}}  # fmt: skip


RESULTS = {
    "config": {"probe_distances": [8, 32]},
    "runs": {
        "a/1": entry("a", 1, [1.0, 2.0, 3.0, 4.0], 2.0, 3.0),
        "a/0": entry("a", 0, [0.0, 1.0, 2.0, 3.0], 1.0, 4.0),
        "b/0": entry("b", 0, [5.0] * 4, 1.0, 1.0),
    },
    "bugs": {}, "scaling": {}, "methods": {},
}  # fmt: skip


def test_entries_come_in_seed_order_and_filtered():
    assert [e["seed"] for e in mr.entries(RESULTS, "runs", layout="a")] == [0, 1]
    with pytest.raises(ValueError, match="no entry of runs has"):
        mr.entries(RESULTS, "runs", layout="c")
    with pytest.raises(ValueError, match="group must be one of"):
        mr.entries(RESULTS, "curves")


def test_losses_savings_and_span_means_are_the_numbers_written_above():
    found = mr.entries(RESULTS, "runs", layout="a")
    np.testing.assert_array_equal(mr.loss(found), [[0, 1, 2, 3], [1, 2, 3, 4]])
    np.testing.assert_array_equal(mr.loss(found, secondary=True), [[1, 2, 3, 4], [2, 3, 4, 5]])
    # distances in increasing order: d = 8 first, then d = 32
    np.testing.assert_array_equal(mr.gain(found), [[0.5, 3.0], [0.5, 1.0]])
    np.testing.assert_array_equal(mr.gain(found, what="copy"), [[1.0, 1.0], [1.0, 2.0]])
    np.testing.assert_array_equal(mr.span_mean(mr.loss(found), 1, 3), [1.5, 2.5])
    assert mr.distances(RESULTS) == [8, 32]
    with pytest.raises(ValueError, match="what must be"):
        mr.gain(found, what="ratio")
    with pytest.raises(ValueError, match="lo < hi"):
        mr.span_mean(mr.loss(found), 3, 3)
