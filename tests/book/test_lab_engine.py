"""The model lab's forward pass, bytelm.js, against PyTorch's ByteLM, in node (the golden test).

For every model of :data:`posenc_core.book.widgets.lab.MODELS` and every change it offers
(each scaling method at each factor, each bug that acts on one pass, the correct packing some
bugs are measured against), PyTorch computes the logits of a held-out text with the change
applied through posenc_core (:func:`~posenc_core.book.widgets.lab.torch_logits`: the bugs' own
``broken`` functions, ``set_rope_scaling``, ``with_plan``), and lab_engine.test.mjs runs
bytelm.js on the same bytes from the widget's own spec (:func:`~posenc_core.book.widgets.lab.
lab_spec`) and the committed checkpoints, and requires max |js - torch| <= 1e-4 max |torch| per
case. The texts: 100 bytes (past L = 64, where the methods and the position bugs act) for every
change, and 8L = 512 bytes for the unmodified models and a few changes.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import torch

from posenc_core.book.studies import corpus, heldout
from posenc_core.book.widgets import lab

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "lab_engine.test.mjs"
SHORT = 100
LONG_CHANGES = ("none", "yarn:8", "bug:rope-off-by-one", "bug:bf16-angles", "bug:packing-no-mask",
                "yarn:8:global", "bug:window-dropped", "dynamic:4:all")  # fmt: skip


@pytest.fixture(autouse=True)
def _one_thread():
    """Hundreds of small passes: one PyTorch thread each (with xdist's two processes on two
    cores, two threads each spin-wait for the core the other process holds)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _texts() -> tuple[torch.Tensor, torch.Tensor]:
    wins = heldout.windows(corpus.heldout_excerpt(), 512, max_windows=3)
    return wins[1, :SHORT], wins[2, :512]


def test_lab_engine_matches_pytorch(tmp_path, node_test):
    short, long = _texts()
    spec = lab.lab_spec()
    cases, refs = [], []
    for entry in spec["models"]:
        key = entry["name"]
        for change in entry["runs"]:
            text = [short]
            if change in LONG_CHANGES:
                text.append(long[: entry["runs"][change]["max_len"]])
            for t in text:
                logits = lab.torch_logits(key, change, t[None])[0]  # (s, 256)
                refs.append(logits.float().numpy().ravel())
                cases.append({"model": key, "change": change, "tokens": t.tolist()})
    reference = tmp_path / "reference.f32"
    np.concatenate(refs).astype("<f4").tofile(reference)
    report = tmp_path / "report.json"
    fixture = tmp_path / "lab_engine.json"
    fixture.write_text(json.dumps({
        "spec": spec, "cases": cases, "reference": str(reference), "report": str(report),
        "weights": {k: str(lab.checkpoint(k)[0]) for k in lab.MODELS},
    }))  # fmt: skip
    node_test(SCRIPT, {"LAB_ENGINE": str(fixture)}, "the lab's forward pass")
    worst = json.loads(report.read_text())
    assert set(worst) == set(lab.MODELS)
    print("\nlargest |js - torch| / max |torch| per model:")
    for key, w in worst.items():
        print(f"  {key:20s} {w['ratio']:.2e} ({w['change']}, {w['cases']} cases)")


def test_every_change_differs_from_none_unless_marked_same():
    """A change the widget offers must change the pass (else its control would move while
    nothing changes), and one marked ``same`` must not."""
    short, _ = _texts()
    spec = lab.lab_spec(("rope", "mix-cohere2", "mix-gemma4"))
    for entry in spec["models"]:
        plain = lab.torch_logits(entry["name"], "none", short[None])
        for change, run in entry["runs"].items():
            if change == "none":
                continue
            other = lab.torch_logits(entry["name"], change, short[None])
            assert torch.equal(other, plain) == run["same"], (entry["name"], change)


@pytest.mark.parametrize("bad", ["yarn:3", "bug:layout-typo", "pi:4:global", 7])
def test_bad_changes_are_refused(bad):
    with pytest.raises((ValueError, TypeError), match="change"):
        lab.run_spec("rope", bad)
