"""The mixing study: its configs say what the architectures say, it trains as the language-model
study trains, a tiny run writes and reloads what the chapter reads, and the committed results
describe today's code."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from posenc_core.book.studies import corpus, lm_study, training
from posenc_core.book.studies import mixing_study as ms


def test_the_training_loop_is_the_language_model_studys():
    c = lm_study.LMStudyConfig(steps=6, warmup=2)
    data = corpus.corpus_split("train")
    trained = []
    for train in (lm_study._train, training.train_steps):
        torch.manual_seed(0)
        model = lm_study.build_lm("rope", c, 0)
        g = torch.Generator().manual_seed(5)
        losses = train(model, data, 6, 4, 16, lambda s: lm_study._lr_at(s, c), g, "cpu")
        trained.append((losses, model.state_dict()))
    assert trained[0][0] == trained[1][0]
    for name, value in trained[0][1].items():
        assert torch.equal(value, trained[1][1][name]), name
    assert [training.warmup_cosine(s, c) for s in range(8)] == [
        lm_study._lr_at(s, c) for s in range(8)
    ]


def test_scaling_goes_to_the_global_layers_or_to_every_layer():
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}
    scaled = {
        where: [
            p.rope.scaling.rope_type for p in ms.layout_plan("olmo3", scaling=yarn, where=where)
        ]
        for where in ms.SCALING
    }
    assert scaled == {"global": ["default"] * 3 + ["yarn"], "all": ["yarn"] * 4}
    gemma = ms.layout_plan("gemma3", scaling={"rope_type": "linear", "factor": 8.0})
    assert [(p.rope.base, p.rope.scaling.rope_type) for p in gemma] == [(1e4, "default")] * 3 + [
        (1e6, "linear")
    ]
    with pytest.raises(ValueError, match="layout 'rope' has no per-layer-type rope settings"):
        ms.layout_config("rope", scaling=yarn)
    with pytest.raises(ValueError, match="where"):
        ms.layout_config("olmo3", scaling=yarn, where="local")


def test_bad_options_are_refused_with_the_option_named():
    with pytest.raises(ValueError, match="window must be under train_len=64"):
        ms.MixingConfig(window=64)
    with pytest.raises(ValueError, match="probe_distances must lie in"):
        ms.MixingConfig(probe_distances=(16,))
    with pytest.raises(ValueError, match="layout"):
        ms.MixingConfig(layouts=("gemma5",))
    with pytest.raises(ValueError, match="p_rope must be in"):
        ms.MixingConfig(p_rope=0.0)
    with pytest.raises(TypeError, match="config must be a MixingConfig"):
        ms.run_mixing_study(lm_study.LMStudyConfig())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("mix") / "mixing_study.json"
    c = ms.MixingConfig(layouts=("rope", "cohere2"), seeds=(0,), steps=2, bugs=("global-rotated",),
                        scaling_layouts=(), probe_samples=2, secondary_samples=2,
                        secondary_windows=2, eval_batch=4, probe_distances=(32, 480))  # fmt: skip
    held = corpus.heldout_excerpt()[:2100]
    ms.run_mixing_study(c, out=out, on_progress=None, eval_data=held, lm_results="skip")
    return out


def test_a_tiny_run_writes_what_the_chapter_reads(tiny):
    res = ms.load_results(tiny)
    assert set(res["runs"]) == {"rope/0", "cohere2/0"}
    run = res["runs"]["cohere2/0"]
    assert len(run["loss"]) == 512 and len(run["secondary"]["loss"]) == 512
    assert set(run["probe"]) == {"32", "480"} and set(run["probe"]["480"]) == {"copy", "control"}
    assert set(res["bugs"]) == {"global-rotated/0"}
    assert res["layouts"]["cohere2"]["plan"][3][1:4] == ["full", "-", "-"]  # no rotation
    model = ms.load_layered("cohere2", 0, results=tiny)
    assert model.plan[3].rope is None and model.plan[0].window == 16
    with pytest.raises(KeyError, match="there are: cohere2/0, rope/0"):
        ms.load_layered("gemma3", 0, results=tiny)


def test_a_changed_checkpoint_is_refused(tiny, tmp_path):
    res = json.loads(tiny.read_text())
    file = tiny.parent / res["checkpoints"]["rope/0"]["file"]
    copy = tmp_path / file.name
    copy.write_bytes(file.read_bytes()[:-1] + b"\0")
    (tmp_path / "mixing_study.json").write_text(json.dumps(res))
    assert hashlib.sha256(copy.read_bytes()).hexdigest() != res["checkpoints"]["rope/0"]["sha256"]
    with pytest.raises(ValueError, match="refusing"):
        ms.load_layered("rope", 0, results=tmp_path / "mixing_study.json")


def test_committed_results_are_not_stale():
    res = ms.load_results()
    assert ms.is_stale(res) == [], (
        "run `make study` (python -m posenc_core.book.studies.mixing_study)"
    )
    assert ms.is_stale({**res, "source_keys": {}})[0].startswith("code changed")
    assert set(res["runs"]) == {f"{n}/{s}" for n in ms.LAYOUTS for s in (0, 1, 2)}
    for key in res["checkpoints"]:
        ms.load_layered(*key.split("/")[:1], int(key.split("/")[1]))
