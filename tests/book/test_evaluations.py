"""The committed measurements of chapters 8 and 9 (posenc_core.book.studies.evaluations): complete,
not stale, and what the functions compute.

The file was written on one machine; recomputing a sample here compares numbers within a
tolerance (per-position means over windows, whose float32 sums may round differently on
another CPU), never bit for bit.
"""

import numpy as np
import pytest

from posenc_core.book.instruments import bugs as dbg
from posenc_core.book.studies import evaluations as ev
from posenc_core.book.studies import lm_curves

# Stored to 6 decimals; losses are means of float32 cross-entropies over many windows, which
# agree across machines to about 1e-6 of a few nats.
TOLERANCE = 2e-5


@pytest.fixture(scope="module")
def committed():
    return ev.load_results()


@pytest.fixture(scope="module")
def models():
    return ev.trained_models()


def test_committed_measurements_are_not_stale(committed):
    assert ev.is_stale(committed) == [], (
        "run `make study` (python -m posenc_core.book.studies.evaluations)"
    )


def test_every_bug_and_ablation_is_there_with_its_shape(committed):
    bugs = ev.load_bug_curves(committed)
    assert list(bugs) == list(dbg.BUGS)
    for key, c in bugs.items():
        bug = dbg.BUGS[key]
        seeds = 1 if bug.model == "learned" else 3
        shape = (seeds, bug.eval_factor * ev.TRAIN_LEN)
        assert c["broken"].shape == c["correct"].shape == shape, key
        assert np.isfinite(c["broken"]).all() and np.isfinite(c["correct"]).all()
    ablated = ev.load_ablation_curves(committed)
    assert list(ablated) == ["none", *ev.ABLATIONS]
    assert all(a.shape == (3, 8 * ev.TRAIN_LEN) for a in ablated.values())


@pytest.mark.parametrize(
    "key", ["layout", "partial-slice", "learned-off-by-one", "chunk-restart", "theta-default"]
)
def test_a_sample_of_bugs_recomputes_to_the_committed_curves(committed, models, key):
    """One bug per kind of model, measured again now, equals the committed curves."""
    live = ev.bug_curves(models, bugs=[key])[key]
    stored = ev.load_bug_curves(committed)[key]
    for part in ("broken", "correct"):
        np.testing.assert_allclose(live[part], stored[part], rtol=0, atol=TOLERANCE)


def test_a_committed_ablation_recomputes(committed, models):
    name = "four slowest (p-RoPE, p = 1/2)"
    live = ev.ablation_curves(models["rope"][:1], {name: ev.ABLATIONS[name]})
    stored = ev.load_ablation_curves(committed)
    for k in ("none", name):
        np.testing.assert_allclose(live[k][0], stored[k][0], rtol=0, atol=TOLERANCE)


def test_the_unablated_curves_are_the_language_model_studys():
    """An independent source: the study's own per-position curves of the RoPE models."""
    from posenc_core.book.studies import lm_study

    study = lm_curves.scheme_curves(lm_study.load_results(), "rope")
    none = ev.load_ablation_curves()["none"]
    np.testing.assert_allclose(none, study, rtol=0, atol=1e-3)  # the study keeps 4 decimals


def test_staleness_is_detected():
    good = ev.load_results()
    assert any("code changed" in p for p in ev.is_stale({**good, "source_keys": {}}))
    bad_inputs = {**good, "inputs": {**good["inputs"], "excerpt_sha256": "0" * 64}}
    assert ev.is_stale(bad_inputs) == ["the held-out excerpt changed"]
    other = {**good, "settings": {**good["settings"], "bug_windows": 1}}
    assert any("settings" in p for p in ev.is_stale(other))


def test_curves_load_by_page(committed):
    one, two = ev.load_bug_curves(committed, part=1), ev.load_bug_curves(committed, part=2)
    assert len(one) == 18 and len(two) == 10 and not set(one) & set(two)
    assert list(one) + list(two) == list(dbg.BUGS)
    with pytest.raises(ValueError, match="part must be 1, 2 or None"):
        ev.load_bug_curves(committed, part=3)


def test_base_probe_is_complete_and_recomputes(committed, models):
    probe = ev.load_base_probe(committed)
    assert probe["bases"].tolist() == list(ev.PROBE_BASES)
    assert probe["rope"].shape == probe["rope-b500000"].shape == (3, len(ev.PROBE_BASES))
    pick = [ev.PROBE_BASES.index(b) for b in (10000.0, 500000.0)]
    live = ev.base_probe({k: models[k][:1] for k in ("rope", "rope-b500000")}, [10000.0, 500000.0])
    for name in ("rope", "rope-b500000"):
        np.testing.assert_allclose(live[name][0], probe[name][0, pick], rtol=0, atol=TOLERANCE)
    # read with its own base, each model is within 0.01 nats of its best base on every seed
    for name, own in (("rope", 10000.0), ("rope-b500000", 500000.0)):
        at_own = probe[name][:, ev.PROBE_BASES.index(own)]
        assert (at_own <= probe[name].min(axis=1) + 0.01).all(), name
