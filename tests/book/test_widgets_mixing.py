"""The mixing-layers explorer (posenc_core/book/widgets/mixing.py) and the per-measure axes of
position_loss_explorer (measured.py) it is built on.

The curves the page carries are recomputed here from the results dict with json and numpy
alone (the loss bucketed by 8 and averaged per seed; control minus copy at each distance), on
a small hand-made results file with the study's schema, and on the committed file when it is
there. What the browser does with them is checked in tests/built/test_explorers.py.
"""

from __future__ import annotations

import itertools
import json
import pathlib

import numpy as np
import pytest

from posenc_core.book import widgets
from posenc_core.book.widgets import mixing

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "posenc_core" / "book" / "data" / "mixing_study.json"

# written out here, not read from the module: what a reader sees on each button
MODELS = {"rope": "RoPE everywhere", "olmo3": "OLMo 3", "cohere2": "Cohere2", "smollm3": "SmolLM3"}
BUGS = {"window-dropped": "window dropped", "no-rope-inverted": "no_rope_layers inverted"}
BUG_LAYOUT = {"window-dropped": "cohere2", "no-rope-inverted": "smollm3"}
L, P, SEEDS, DIST = 8, 64, (0, 1, 2), (4, 8, 16, 32, 48)


def small_results(seed: int = 0) -> dict:
    """A results dict with the mixing study's schema: 4 layouts, 2 bugs, 3 seeds, L = 8."""
    g = np.random.default_rng(seed)

    def probe():
        return {str(d): {"copy": float(g.uniform(0.5, 2)), "control": float(g.uniform(1, 3))}
                for d in DIST}  # fmt: skip

    def loss():
        return (3.0 - np.linspace(0, 1.5, P) + 0.1 * g.standard_normal(P)).tolist()

    runs = {
        f"{n}/{s}": {"layout": n, "seed": s, "loss": loss(), "probe": probe(),
                     "secondary": {"loss": loss(), "probe": probe()}}
        for n in MODELS for s in SEEDS
    }  # fmt: skip
    bugs = {
        f"{b}/{s}": {"bug": b, "layout": BUG_LAYOUT[b], "seed": s, "loss": loss(), "probe": probe()}
        for b in BUGS for s in SEEDS
    }  # fmt: skip
    config = {"layouts": list(MODELS), "seeds": list(SEEDS), "train_len": L, "eval_factor": 8,
              "probe_distances": list(DIST), "bugs": list(BUGS)}  # fmt: skip
    # through JSON, as the file is read
    return json.loads(json.dumps({"config": config, "runs": runs, "bugs": bugs}))


def source_of(results: dict, key: list) -> tuple[np.ndarray, np.ndarray | None, str | None]:
    """(curves, reference curves, reference label) of a page entry's key, from the dict alone:
    (S, P) loss or (S, D) control - copy; a layout's reference is the first layout's run, a
    bug's its layout's secondary measurement."""
    measure, model, bug = key
    name = {v: k for k, v in MODELS.items()}[model]
    seeds = results["config"]["seeds"]
    dist = results["config"]["probe_distances"]

    def value(entry):
        if measure == "loss by position":
            return entry["loss"]
        return [entry["probe"][str(d)]["control"] - entry["probe"][str(d)]["copy"] for d in dist]

    if bug == "none":
        own = np.array([value(results["runs"][f"{name}/{s}"]) for s in seeds])
        if name == "rope":
            return own, None, None
        ref = np.array([value(results["runs"][f"rope/{s}"]) for s in seeds])
        return own, ref, "RoPE everywhere"
    (b,) = [b for b, lab in BUGS.items() if lab == bug]
    own = np.array([value(results["bugs"][f"{b}/{s}"]) for s in seeds])
    ref = np.array([value(results["runs"][f"{name}/{s}"]["secondary"]) for s in seeds])
    return own, ref, f"{model} without the bug, same text"


def expected_band(a: np.ndarray, measure: str) -> dict:
    """What the page must carry for curves ``a``, computed with numpy only."""
    if measure == "loss by position":
        per = a.reshape(a.shape[0], -1, 8).mean(2)  # buckets of 8 positions
        x = np.arange(per.shape[1]) * 8 + 3.5
        within, beyond = a[:, L // 2 : L], a[:, L:]
    else:
        per, x = a, np.array(DIST, dtype=float)
        d = np.array(DIST)
        within, beyond = a[:, (d >= L // 2) & (d < L)], a[:, d >= L]
    return {
        "x": x,
        "mean": per.mean(0),
        "low": per.min(0),
        "high": per.max(0),
        "in_range": within.mean(1),
        "beyond": beyond.mean(1),
    }


def page_consts(e) -> dict:
    """The explorer's constants as the page holds them (the widget state through JSON)."""
    return json.loads(json.dumps(e.widget.get_state()["spec"]))["consts"]


def test_the_page_carries_the_results_curves_and_references():
    r = small_results()
    consts = page_consts(mixing.mixing_explorer(r))
    assert len(consts["curves"]) == 2 * (len(MODELS) + len(BUGS))
    for entry in consts["curves"]:
        own, ref, label = source_of(r, entry["key"])
        want = expected_band(own, entry["key"][0])
        for name, value in want.items():
            np.testing.assert_allclose(entry[name], value, rtol=1e-13, atol=1e-15, err_msg=name)
        if ref is None:
            assert entry["reference"] is None
            continue
        page_ref = consts["references"][entry["reference"]]
        assert page_ref["label"] == label
        band = expected_band(ref, entry["key"][0])
        for name in ("x", "mean", "low", "high"):
            np.testing.assert_allclose(page_ref[name], band[name], rtol=1e-13, atol=1e-15)
        assert page_ref["in_range_mean"] == pytest.approx(band["in_range"].mean(), rel=1e-13)
        assert page_ref["beyond_mean"] == pytest.approx(band["beyond"].mean(), rel=1e-13)
    # each reference once: RoPE's two measures, and each bug's layout's two
    assert len(consts["references"]) == 2 + 2 * len(BUGS)


def test_each_measure_has_its_axis():
    r = small_results()
    for part in ("runs", "bugs"):  # every copy helps: 0 must still be on the plot
        for entry in r[part].values():
            for probe in (entry["probe"], entry.get("secondary", {}).get("probe", {})):
                for v in probe.values():
                    v["copy"] = v["control"] - 0.25
    consts = page_consts(mixing.mixing_explorer(r))
    axes = consts["axes"]
    by_measure = {e["key"][0]: axes[e["axis"]] for e in consts["curves"]}
    loss, probe = by_measure["loss by position"], by_measure["retrieval by distance"]
    assert loss["xlabel"] == "position" and not loss["points"]
    assert "nats per byte" in loss["ylabel"] and loss["shade"] == "trained\non 0..8"
    assert probe["points"] and probe["symbol"] == "d"
    assert probe["ylim"][0] < 0 < probe["ylim"][1]  # "nothing saved" is on the plot
    saved = [v for e in consts["curves"] if e["key"][0] == "retrieval by distance"
             for v in e["low"] + e["high"]]  # fmt: skip
    assert probe["ylim"][0] <= min(saved) and max(saved) <= probe["ylim"][1]
    assert consts["positions"] == P and consts["train_len"] == L


def test_every_option_has_data_and_every_choice_draws_what_it_names():
    e = mixing.mixing_explorer(small_results())
    assert e.params["measure"].options == ("loss by position", "retrieval by distance")
    assert e.params["model"].options == tuple(MODELS.values())
    assert e.params["bug"].options == ("none", *BUGS.values())
    keys = [tuple(c["key"]) for c in page_consts(e)["curves"]]
    for name, p in e.params.items():
        i = list(e.params).index(name)
        for option in p.options:
            assert any(k[i] == option for k in keys), (name, option)
    for measure, model, bug in itertools.product(*(p.options for p in e.params.values())):
        shown = e.compute({"measure": measure, "model": model, "bug": bug})["shown"]
        assert shown[:2] == [measure, model]
        layout = {v: k for k, v in MODELS.items()}[model]
        bugs_here = [lab for b, lab in BUGS.items() if BUG_LAYOUT[b] == layout]
        # a bug not measured on this layout falls back to the layout as trained
        assert shown[2] == (bug if bug in bugs_here else "none")


def test_default_and_first_choice():
    e = mixing.mixing_explorer(small_results())
    assert e.values == {"measure": "loss by position", "model": "OLMo 3", "bug": "none"}
    e = mixing.mixing_explorer(small_results(), measure="retrieval by distance", model="Cohere2")
    assert e.values == {"measure": "retrieval by distance", "model": "Cohere2", "bug": "none"}
    assert e.data["x"].tolist() == list(map(float, DIST))
    e = mixing.mixing_explorer(small_results(), bugs=False)
    assert list(e.params) == ["measure", "model"]
    assert len(page_consts(e)["curves"]) == 2 * len(MODELS)


def test_the_stand_in_draws_each_measure(tmp_path):
    import matplotlib.pyplot as plt

    e = mixing.mixing_explorer(small_results())
    for measure in e.params["measure"].options:
        fig = e.figure({"measure": measure, "model": "Cohere2", "bug": "window dropped"})
        (ax,) = [a for a in fig.axes if a.get_visible()]
        assert ax.get_xlim() == (0.0, float(P))
        lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2]
        assert len(lines) == 2  # the curve and its layout without the bug
        plt.close(fig)
    html = e.noscript_html()
    assert html.startswith("<noscript>") and "OLMo 3" in html


@pytest.mark.parametrize(
    ("change", "error", "pattern"),
    [
        (lambda r: 42, TypeError, r"results must be a results dict"),
        (lambda r: {**r, "config": {"layouts": ["rope"]}}, ValueError, r"results\['config'\]"),
        (lambda r: {**r, "runs": {k: v for k, v in r["runs"].items() if k != "olmo3/2"}},
         ValueError, r"results\['runs'\] has no entry 'olmo3/2'"),
        (lambda r: {**r, "bugs": {}}, ValueError, r"results\['bugs'\] has no entry"),
    ],
)  # fmt: skip
def test_bad_results_are_refused_by_name(change, error, pattern):
    with pytest.raises(error, match=pattern):
        mixing.mixing_explorer(change(small_results()))


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"measure": "loss"}, ValueError, r"measure must be one of .*'loss'"),
        ({"model": "Llama 3"}, ValueError, r"model must be one of .*'Llama 3'"),
        ({"bugs": "yes"}, TypeError, r"bugs must be True or False"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        mixing.mixing_explorer(small_results(), **kwargs)


def test_a_path_is_read_as_the_dict(tmp_path):
    path = tmp_path / "mixing_study.json"
    path.write_text(json.dumps(small_results(3)))
    a = page_consts(mixing.mixing_explorer(path))
    assert a == page_consts(mixing.mixing_explorer(str(path)))
    assert a == page_consts(mixing.mixing_explorer(small_results(3)))


# ------------------------------------------------- position_loss_explorer with several axes


def two_measures(n_seeds: int = 2) -> dict:
    g = np.random.default_rng(1)
    return {
        ("loss", "a"): g.uniform(1, 2, (n_seeds, 32)),
        ("loss", "b"): g.uniform(1, 2, (n_seeds, 32)),
        ("probe", "a"): g.uniform(-1, 1, (n_seeds, 3)),
        ("probe", "b"): g.uniform(-1, 1, (n_seeds, 3)),
    }


PROBE_AXIS = widgets.CurveAxis(x=(4, 8, 24), xlabel="distance", ylabel="saved", symbol="d")


def test_an_axis_of_its_own_carries_its_x_and_means_over_x():
    curves = two_measures()
    e = widgets.position_loss_explorer(
        curves, train_len=8, controls=("measure", "model"),
        axes={"loss": widgets.CurveAxis(), "probe": PROBE_AXIS},
    )  # fmt: skip
    data = e.compute({"measure": "probe", "model": "b"})
    a = curves["probe", "b"]
    assert data["x"].tolist() == [4.0, 8.0, 24.0]
    np.testing.assert_array_equal(data["mean"], a.mean(0))
    np.testing.assert_array_equal(data["in_range"], a[:, 0])  # x in [4, 8): 4 only
    np.testing.assert_array_equal(data["beyond"], a[:, 1:].mean(1))  # x >= 8
    consts = page_consts(e)
    assert [c["axis"] for c in consts["curves"]] == [0, 0, 1, 1]
    loss_axis, probe_axis = consts["axes"]
    assert probe_axis["ylabel"] == "saved" and probe_axis["points"]
    assert loss_axis["ylabel"] == "held-out loss (nats per byte)" and not loss_axis["points"]
    lows = np.concatenate([curves["probe", k].min(0) for k in "ab"])
    assert probe_axis["ylim"][0] < lows.min() < loss_axis["ylim"][0]  # limits per axis


def test_one_axis_keeps_the_single_measure_explorers_as_they_were():
    x = two_measures()["loss", "a"]
    consts = page_consts(widgets.position_loss_explorer({"s": x}, train_len=8, ylim=(0, 3)))
    assert consts["axes"] == [{"xlabel": "position", "ylabel": "held-out loss (nats per byte)",
                               "ylim": [0, 3], "shade": "trained\non 0..8", "symbol": "",
                               "points": False}]  # fmt: skip
    assert consts["curves"][0]["axis"] == 0 and consts["positions"] == 32


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"axes": {"loss": "position"}}, TypeError, r"axes must map values of 'measure'"),
        ({"axes": {"loss": widgets.CurveAxis()}}, ValueError, r"axes has no axis for measure"),
        ({"axes": {"loss": widgets.CurveAxis(), "probe": widgets.CurveAxis(x=(8, 16, 24))}},
         ValueError, r"axes\[1\]\.x must have a value in \[4, 8\)"),
        ({"axes": {"loss": widgets.CurveAxis(), "probe": widgets.CurveAxis(x=(4, 8, 40))}},
         ValueError, r"axes\[1\]\.x must lie in \[0, 32\]"),
        ({"axes": {"loss": widgets.CurveAxis(), "probe": widgets.CurveAxis(x=(4, 8))}},
         ValueError, r"curves\[\('probe', 'a'\)\] must have shape \(S, 2\)"),
        ({"axes": {"loss": widgets.CurveAxis(), "probe": PROBE_AXIS},
          "reference": ("r", np.ones((2, 32)))}, ValueError, r"references per key"),
    ],
)  # fmt: skip
def test_bad_axes_are_refused_by_name(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        widgets.position_loss_explorer(
            two_measures(), train_len=8, controls=("measure", "model"), **kwargs
        )


# ------------------------------------------------------------------- the committed results


@pytest.mark.skipif(not COMMITTED.exists(), reason="mixing_study.json is not committed yet")
def test_the_committed_results_give_every_layout_and_bug_in_a_small_state():
    r = json.loads(COMMITTED.read_text(encoding="utf-8"))
    e = mixing.mixing_explorer()
    layouts = r["config"]["layouts"]
    assert len(e.params["model"].options) == len(layouts) == 8
    assert len(e.params["bug"].options) == 1 + len(r["config"]["bugs"])
    consts = page_consts(e)
    assert len(consts["curves"]) == 2 * (len(layouts) + len(r["config"]["bugs"]))
    size = len(json.dumps(e.widget.get_state()["spec"]))
    assert size < 300_000, size  # numbers, not images
