"""Chapter 10's numbers, recomputed from the committed mixing study with json and plain Python.

Each test reads a value the build glued (``10_mixing_layers.glue.json`` under
``_build/jupyter_execute/chapters``) and recomputes it from
``posenc_core/book/data/mixing_study.json`` without posenc_core, numpy or torch, so a sentence of
the chapter cannot drift from the file it cites.
"""

import ast
import json
import math
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXECUTED = ROOT / "_build" / "jupyter_execute" / "chapters"
GLUE = EXECUTED / "10_mixing_layers.glue.json"

if not GLUE.is_file():
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)

RES = json.loads((ROOT / "posenc_core/book/data/mixing_study.json").read_text(encoding="utf-8"))
GLUED = json.loads(GLUE.read_text(encoding="utf-8"))
L = RES["config"]["train_len"]
P = L * RES["config"]["eval_factor"]
SEEDS = RES["config"]["seeds"]
D = sorted(RES["config"]["probe_distances"])


def glued(name):
    text = GLUED[name]["data"]["text/plain"]
    if text.startswith("np.float64(") and text.endswith(")"):
        text = text[len("np.float64(") : -1]
    return ast.literal_eval(text)


def mean(values):
    return sum(values) / len(values)


def span(entry, lo, hi, secondary=False):
    curve = (entry["secondary"] if secondary else entry)["loss"]
    return mean(curve[lo:hi])


def saving(entry, d, secondary=False):
    probe = (entry["secondary"] if secondary else entry)["probe"][str(d)]
    return probe["control"] - probe["copy"]


def per_seed(values, fmt):
    return ", ".join(format(v, fmt) for v in values)


def run(layout, seed):
    return RES["runs"][f"{layout}/{seed}"]


LAYOUTS = list(RES["layouts"])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_table_of_layouts_is_the_results_file(layout):
    inside = [span(run(layout, s), L // 2, L) for s in SEEDS]
    beyond = [span(run(layout, s), L, P) for s in SEEDS]
    assert glued(f"ch10-{layout}-in") == pytest.approx(mean(inside), abs=1e-9)
    assert glued(f"ch10-{layout}-beyond") == pytest.approx(mean(beyond), abs=1e-9)
    near = max(d for d in D if d <= L)
    far = max(d for d in D if P - RES["config"]["probe_span"] - d > 0)
    assert glued(f"ch10-{layout}-near") == pytest.approx(
        mean([saving(run(layout, s), near) for s in SEEDS]), abs=1e-9
    )
    assert glued(f"ch10-{layout}-far-seeds") == per_seed(
        [saving(run(layout, s), far) for s in SEEDS], ".2f"
    )
    ref_in = [span(run("rope", s), L // 2, L) for s in SEEDS]
    assert glued(f"ch10-{layout}-in-diff") == per_seed(
        [a - b for a, b in zip(inside, ref_in)], "+.3f"
    )


def test_the_temperature_is_compared_seed_by_seed():
    diff = [span(run("llama4", s), L, P) - span(run("cohere2", s), L, P) for s in SEEDS]
    assert glued("ch10-temp-beyond") == per_seed(diff, "+.3f")
    assert glued("ch10-temp-8L") == pytest.approx(1 + 0.1 * math.log1p(P // L), rel=1e-12)


@pytest.mark.parametrize("key", sorted({k.rsplit("/", 1)[0] for k in RES["scaling"]}))
def test_scaling_on_the_global_layers_or_all_is_the_results_file(key):
    layout, method, factor, where = key.split("/")
    s = int(factor)
    inside = [
        span(RES["scaling"][f"{key}/{seed}"], L // 2, L)
        - span(run(layout, seed), L // 2, L, secondary=True)
        for seed in SEEDS
    ]
    target = [
        span(RES["scaling"][f"{key}/{seed}"], L, s * L)
        - span(run(layout, seed), L, s * L, secondary=True)
        for seed in SEEDS
    ]
    name = f"ch10-sc-{layout}-{method}-{factor}-{where}"
    assert glued(f"{name}-in") == pytest.approx(mean(inside), abs=1e-9)
    assert glued(f"{name}-target-seeds") == per_seed(target, "+.3f")


@pytest.mark.parametrize("bug", sorted({k.rsplit("/", 1)[0] for k in RES["bugs"]}))
def test_each_bug_is_measured_against_its_own_correct_model(bug):
    layout = RES["bug_summaries"][bug]["layout"]
    inside = [
        span(RES["bugs"][f"{bug}/{s}"], 0, L) - span(run(layout, s), 0, L, secondary=True)
        for s in SEEDS
    ]
    d = max(d for d in D if P - RES["config"]["probe_span"] - d > 0)  # first copy after byte 0
    far = [
        saving(RES["bugs"][f"{bug}/{s}"], d) - saving(run(layout, s), d, secondary=True)
        for s in SEEDS
    ]
    assert glued(f"ch10-bug-{bug}-in-seeds") == per_seed(inside, "+.3f")
    assert glued(f"ch10-bug-{bug}-far") == pytest.approx(mean(far), abs=1e-9)
