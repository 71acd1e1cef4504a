"""Chapter 7c's "Loss and retrieval": every number its sentences and tables print, recomputed
here from the two committed results files with ``json`` alone and compared with what the
build glued (``_build/jupyter_execute/chapters/07c_scaling_measured.glue.json``).

- loss beyond L: mean of ``lm_study.json``'s loss per position over positions L .. 8L - 1
  (``runs["rope/<seed>"]`` unscaled, ``scaling["<method>/<s>/<seed>"]``,
  ``finetune["<method>/4/<seed>"]["loss_by_step"]["200"]`` fine-tuned);
- retrieval: ``mixing_study.json``'s ``methods[...]["probe"][d]``, control - copy, mean over
  d >= L; both averaged over seeds;
- the rankings: lowest loss first, largest retrieval first; Kendall's tau-a and the pairs the
  two orders put the other way round, counted pair by pair here.
"""

import ast
import itertools
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GLUE = ROOT / "_build" / "jupyter_execute" / "chapters" / "07c_scaling_measured.glue.json"
DATA = ROOT / "posenc_core" / "book" / "data"

if not GLUE.is_file():
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)

STEM = "07c_scaling_measured"
LABELS = {"none": "no scaling", "pi": "PI", "ntk": "NTK-aware", "dynamic": "dynamic NTK",
          "yarn": "YaRN", "llama3": "Llama 3.1", "finetuned-pi": "PI, fine-tuned",
          "finetuned-yarn": "YaRN, fine-tuned"}  # fmt: skip


def glued(name: str):
    text = json.loads(GLUE.read_text(encoding="utf-8"))[name]["data"]["text/plain"]
    if text.startswith("np.float64(") and text.endswith(")"):
        text = text[len("np.float64(") : -1]
    return ast.literal_eval(text)


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))


LM, MIX = _load("lm_study.json"), _load("mixing_study.json")
L = LM["config"]["train_len"]
SEEDS = LM["seeds"]


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


def _loss_beyond(method: str, factor: int, seed: int) -> float:
    if method == "none":
        curve = LM["runs"][f"rope/{seed}"]["loss"]
    elif method.startswith("finetuned-"):
        entry = LM["finetune"][f"{method[len('finetuned-') :]}/{factor}/{seed}"]
        curve = entry["loss_by_step"]["200"]
    else:
        curve = LM["scaling"][f"{method}/{factor}/{seed}"]["loss"]
    return _mean(curve[L:])


def _retrieval(method: str, factor: int, seed: int) -> float:
    probe = MIX["methods"][f"{method}/{factor}/{seed}"]["probe"]
    return _mean(v["control"] - v["copy"] for d, v in probe.items() if int(d) >= L)


ENTRIES = sorted({(e["method"], e["factor"]) for e in MIX["methods"].values()})


def _scores(methods, seeds):
    return {
        m: (
            _mean(_loss_beyond(m, s, seed) for seed in seeds),
            _mean(_retrieval(m, s, seed) for seed in seeds),
        )
        for m, s in methods
    }


def _group(factor: int):
    return [(m, s) for m, s in ENTRIES if s == factor or m == "none"]


def _pairs(scores):
    """(agree, swaps): pairs ordered alike; swapped pairs (a better by loss, b by retrieval)."""
    agree, swaps = 0, []
    for a, b in itertools.combinations(scores, 2):
        if scores[a][0] > scores[b][0]:
            a, b = b, a
        dloss, dret = scores[b][0] - scores[a][0], scores[b][1] - scores[a][1]
        if abs(dloss) < 1e-9 or abs(dret) < 1e-9:
            continue
        if dret > 0:
            swaps.append((a, b, dloss, dret))
        else:
            agree += 1
    return agree, swaps


def _tau(scores) -> float:
    agree, swaps = _pairs(scores)
    n = len(scores)
    return (agree - len(swaps)) / (n * (n - 1) / 2)


@pytest.mark.parametrize("method,factor", ENTRIES, ids=lambda v: str(v))
def test_table_row_is_the_loss_beyond_L_and_the_retrieval_of_the_study_files(method, factor):
    loss = _mean(_loss_beyond(method, factor, seed) for seed in SEEDS)
    ret = _mean(_retrieval(method, factor, seed) for seed in SEEDS)
    assert glued(f"ch7-ret-{method}-{factor}-loss") == pytest.approx(loss, abs=1e-9)
    assert glued(f"ch7-ret-{method}-{factor}") == pytest.approx(ret, abs=1e-9)
    seeds = ", ".join(f"{_retrieval(method, factor, seed):.2f}" for seed in SEEDS)
    assert glued(f"ch7-ret-{method}-{factor}-seeds") == seeds


@pytest.mark.parametrize("factor", sorted({s for _, s in ENTRIES} - {1}))
def test_ranks_tau_and_swapped_pairs_as_the_section_says(factor):
    group = _group(factor)
    scores = _scores(group, SEEDS)
    by_loss = sorted(scores, key=lambda m: scores[m][0])
    by_ret = sorted(scores, key=lambda m: -scores[m][1])
    for m in scores:
        rank = f"{by_loss.index(m) + 1}, {by_ret.index(m) + 1}"
        assert glued(f"ch7-ret-rank-{factor}-{m}") == rank, m
    assert glued(f"ch7-ret-tau-{factor}") == pytest.approx(_tau(scores), abs=1e-12)
    per_seed = ", ".join(f"{_tau(_scores(group, [seed])):+.2f}" for seed in SEEDS)
    assert glued(f"ch7-ret-tau-{factor}-seeds") == per_seed
    _, swaps = _pairs(scores)
    n = len(scores)
    assert glued(f"ch7-ret-pairs-{factor}") == n * (n - 1) // 2
    assert glued(f"ch7-ret-nswaps-{factor}") == len(swaps)

    def seeds_swapped(a, b):
        return sum(
            any((x, y) == (a, b) for x, y, *_ in _pairs(_scores(group, [seed]))[1])
            for seed in SEEDS
        )

    def said(a, b, dloss, dret):
        return (
            f"{LABELS[b]} over {LABELS[a]} (loss {dloss:.2f} higher, retrieval {dret:.2f} "
            f"more; {seeds_swapped(a, b)} of {len(SEEDS)} seeds)"
        )

    every = [w for w in swaps if seeds_swapped(*w[:2]) == len(SEEDS)]
    assert glued(f"ch7-ret-nevery-{factor}") == len(every)
    top = glued(f"ch7-ret-top-{factor}")
    assert top == (said(*max(swaps, key=lambda w: w[3])) if swaps else "none")
    listed = glued(f"ch7-ret-every-{factor}")
    assert listed.count(" over ") == len(every) and (every or listed == "none")
    for w in every:  # in any order
        assert said(*w) in listed


def test_the_probe_described_is_the_probe_in_the_file():
    """The section's probe: the distances every entry holds, its span and its samples."""
    config = MIX["config"]
    distances = [int(d) for d in next(iter(MIX["methods"].values()))["probe"]]
    assert all([int(d) for d in e["probe"]] == distances for e in MIX["methods"].values()), (
        "entries probed at different distances"
    )
    assert glued("ch7-ret-distances") == ", ".join(map(str, distances))
    assert distances == list(config["probe_distances"])
    assert glued("ch7-ret-span") == config["probe_span"]
    assert glued("ch7-ret-samples") == config["secondary_samples"]
    assert any(d >= L for d in distances) and any(d < L for d in distances)
