"""The model lab's Python side (posenc_core.book.widgets.lab): its spec, its refusals, the
weights it hands out and the widget's answer to a kernel request. The forward pass itself is
checked against PyTorch in test_lab_engine.py, the page in tests/built/test_lab.py."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from posenc_core.book.instruments import bugs
from posenc_core.book.studies import lm_study, mixing_study
from posenc_core.book.widgets import lab


def test_every_trained_scheme_and_layout_is_a_lab_model():
    """The issue's list: NoPE, sinusoidal, learned, RoPE, ALiBi, T5, xPos, partial-rotary and
    base-500,000 RoPE, and every mixed layout of chapter 10."""
    schemes = {m.name for m in lab.MODELS.values() if m.study == "lm"}
    assert schemes == set(lm_study.LMStudyConfig().schemes) | {"xpos", "sinusoidal-matched"}
    assert {m.name for m in lab.MODELS.values() if m.study == "mix"} == set(mixing_study.LAYOUTS)
    assert lab.MODELS["rope-r8"].rotary_dim == 8 and lab.MODELS["rope-b500000"].base == 5e5


def test_bugs_are_split_into_one_pass_and_left_out_and_none_is_lost():
    assert set(lab.ONE_PASS_BUGS) | set(lab.OTHER_BUGS) == set(bugs.BUGS)
    assert not set(lab.ONE_PASS_BUGS) & set(lab.OTHER_BUGS)


def test_changes_follow_the_model():
    rope = lab.changes("rope")
    assert "yarn:8" in rope and "p-rope:0.25" in rope and "bug:bf16-angles" in rope
    assert lab.changes("alibi") == ["none"]
    assert lab.changes("learned") == ["none", "bug:learned-off-by-one",
                                      "bug:learned-packing-no-restart"]  # fmt: skip
    mix = lab.changes("mix-olmo3")
    assert "pi:4:global" in mix and "pi:4:all" in mix
    # one rope setting for every layer: the global layers are all of them
    assert "pi:4:all" in lab.changes("mix-rope") and "pi:4:global" not in lab.changes("mix-rope")
    assert "bug:window-dropped" in lab.changes("mix-cohere2")


def test_references_are_the_correct_counterparts():
    assert lab.reference_of("rope", "yarn:8") == "none"
    assert lab.reference_of("rope", "bug:yarn-dropped") == "yarn:8"
    assert lab.reference_of("rope", "bug:packing-no-mask") == "packed"
    assert lab.reference_of("rope", "bug:dynamic-sticky") == "dynamic:8"
    assert lab.reference_of("rope", "bug:rope-off-by-one") == "none"


def test_change_of_reads_the_controls():
    v = dict(lab.DEFAULTS)
    assert lab.change_of(v) == "none"
    assert lab.change_of({**v, "method": "yarn", "factor": 8}) == "yarn:8"
    assert lab.change_of({**v, "method": "p-rope", "factor": 0.25}) == "p-rope:0.25"
    assert lab.change_of({**v, "model": "mix-olmo3", "method": "pi", "factor": 4.0,
                          "where": "all"}) == "pi:4:all"  # fmt: skip
    assert lab.change_of({**v, "method": "pi", "bug": "layout"}) == "bug:layout"


def test_the_spec_is_json_and_holds_each_checkpoint_by_name_and_checksum():
    spec = lab.lab_spec(("rope", "mix-gpt_oss"))
    json.dumps(spec, allow_nan=False)
    for entry in spec["models"]:
        path, sha = lab.checkpoint(entry["name"])
        assert entry["file"] == path.name and entry["sha256"] == sha
        assert entry["bytes"] == path.stat().st_size
    gpt = spec["models"][1]
    assert [layer[4] for layer in gpt["layers"]] == [1, 1, 1, 1]  # sinks in every layer
    assert [layer[1] for layer in gpt["layers"]] == [16, 0, 16, 0]  # window 16 in local layers


def test_weights_are_the_committed_bytes_and_a_changed_file_is_refused(tmp_path, monkeypatch):
    path, sha = lab.checkpoint("rope")
    data = lab.weights("rope")
    assert hashlib.sha256(data).hexdigest() == sha and data == path.read_bytes()
    bad = tmp_path / path.name
    bad.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    monkeypatch.setattr(lab, "checkpoint", lambda key: (bad, sha))
    with pytest.raises(ValueError, match="SHA-256"):
        lab.weights("rope")


@pytest.mark.parametrize(
    ("values", "error", "match"),
    [
        ({"model": "gpt2"}, ValueError, "model"),
        ({"colour": 1}, TypeError, "colour"),
        ({"model": "alibi", "method": "pi", "factor": 4}, ValueError, "change"),
        ({"method": "yarn", "factor": 3}, ValueError, "change"),
        ({"layer": 2}, ValueError, "layer"),
        ({"head": -1}, ValueError, "head"),
        ({"excerpt": 99}, ValueError, "excerpt"),
        ({"text": b"bytes"}, TypeError, "text"),
    ],
)
def test_bad_controls_are_refused_with_their_name(values, error, match):
    with pytest.raises(error, match=match):
        lab.model_lab(**values)


def test_set_moves_the_controls_and_refuses_what_the_model_lacks():
    m = lab.model_lab()
    m.set(model="mix-cohere2", layer=3, bug="window-dropped")
    assert m.widget.values["layer"] == 3 and lab.change_of(m.values) == "bug:window-dropped"
    with pytest.raises(ValueError, match="change"):
        m.set(model="rope")  # the bug belongs to the mixed layout
    assert m.values["model"] == "mix-cohere2"


def test_loss_is_the_cross_entropy_of_the_changed_and_reference_logits():
    m = lab.model_lab(model="rope", method="pi", factor=8, text="def f(x):\n    return x\n" * 6)
    out = m.loss()
    t = m.tokens()
    assert out["change"] == "pi:8" and out["reference"] == "none"
    for key, loss in (("pi:8", out["loss"]), ("none", out["reference_loss"])):
        logits = lab.torch_logits("rope", key, t)[0].double()
        p = torch.log_softmax(logits, -1)[torch.arange(t.shape[1] - 1), t[0, 1:]]
        assert torch.allclose(torch.as_tensor(loss), -p)
    assert out["loss"].shape == (t.shape[1] - 1,)


def test_text_is_utf8_cut_to_the_longest_the_model_reads():
    m = lab.model_lab(text="é" * 400)
    assert m.tokens().shape == (1, 512) and m.tokens()[0, :2].tolist() == [0xC3, 0xA9]
    assert lab.model_lab().tokens().shape == (1, 512)  # an excerpt of 8L held-out bytes


def test_a_kernel_request_for_weights_is_answered_with_the_checkpoint():
    m = lab.model_lab()
    sent = []
    m.widget.send = lambda content, buffers=None: sent.append((content, buffers))
    m._on_message(m.widget, {"kind": "weights", "model": "t5"}, [])
    m._on_message(m.widget, {"kind": "weights", "model": "../../etc/passwd"}, [])
    m._on_message(m.widget, "nonsense", [])
    assert len(sent) == 1
    content, buffers = sent[0]
    assert content == {"kind": "weights", "model": "t5", "sha256": lab.checkpoint("t5")[1]}
    assert buffers == [lab.weights("t5")]


def test_the_engine_travels_with_the_widget():
    m = lab.model_lab()
    assert m.widget.engine == (lab.HERE / "bytelm.js").read_text(encoding="utf-8")
    assert "export default" in m.widget._esm and m.widget.weights_base == lab.WEIGHTS_BASE
