"""The language-model study (posenc_core.book.studies.lm_study) and its committed results."""

import json

import numpy as np
import pytest
import torch

from posenc_core.book.models import byte_lm
from posenc_core.book.studies import corpus, lm_curves
from posenc_core.book.studies import lm_study as st

TINY = dict(
    seeds=(0,),
    train_len=16,
    steps=60,
    batch=16,
    d_model=32,
    n_layers=1,
    n_heads=2,
    lr=3e-3,
    warmup=5,
    log_every=10,
    t5_num_buckets=8,
    factors=(4,),
    finetune_steps=(3, 6),
    eval_batch=16,
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("lm") / "lm.json"
    data = corpus.heldout_excerpt()
    res = st.run_lm_study(
        st.LMStudyConfig(**TINY),
        out=out,
        on_progress=None,
        train_data=data[16384:],
        eval_data=data[:16384],
    )
    return res, out


def test_smoke_every_scheme_loss_falls(tiny):
    res, _ = tiny
    assert {r["scheme"] for r in res["runs"].values()} == set(byte_lm.SCHEMES)
    for key, run in res["runs"].items():
        curve = [loss for _, loss in run["curve"]]
        assert curve[-1] < curve[0] - 0.5, f"{key}: {curve[0]:.2f} -> {curve[-1]:.2f}"
        assert len(run["loss"]) == 8 * 16  # per position 0 .. 8L-1
    assert len(res["scaling"]) == len(st.METHODS)  # every method at the one factor, one seed
    assert set(res["xpos_sweep"]) == {"2/0", "32/0", "128/0"}  # L/8, 2L, 8L of L = 16
    for run in [*res["runs"].values(), *res["xpos_sweep"].values()]:
        far = run["attention"]["far"]
        assert far["queries"] == [64, 128] and run["attention"]["edges"][-1] == 128
        np.testing.assert_allclose(np.sum(far["mass"], 1), 1.0, atol=1e-3)  # 4 decimals kept
    assert set(next(iter(res["finetune"].values()))["loss_by_step"]) == {"3", "6"}


def test_same_command_gives_the_same_numbers(tiny):
    res, _ = tiny
    data = corpus.heldout_excerpt()
    cfg = st.LMStudyConfig(**{**TINY, "schemes": ("rope",), "finetune_methods": ()})
    _, first = st.train_lm("rope", cfg, 0, train_data=data[16384:])
    _, again = st.train_lm("rope", cfg, 0, train_data=data[16384:])
    _, other = st.train_lm("rope", cfg, 1, train_data=data[16384:])
    assert first == again and first != other
    np.testing.assert_allclose(first, res["runs"]["rope/0"]["curve"], atol=1e-4)  # as saved


def test_per_position_loss_shape_and_meaning():
    torch.manual_seed(0)
    model = st.build_lm("none", st.LMStudyConfig(**TINY), 0)
    data = corpus.heldout_excerpt()[: 10 * 32 + 5]
    curve = st.per_position_loss(model, data, 32, batch=4)
    assert curve.shape == (32,) and curve.dtype == np.float64
    # an untrained GPT-2-initialised model predicts nearly uniformly: about ln(256) nats
    assert np.all(np.abs(curve - np.log(256)) < 0.3)
    with pytest.raises(ValueError, match="holds no window"):
        st.per_position_loss(model, data[:20], 32)


def test_first_rise_on_hand_made_curves():
    L = 16
    flat = np.full(8 * L, 2.0)
    assert lm_curves.first_loss_rise(flat, L) is None
    step = flat.copy()
    step[40:] = 2.3  # 15% above the in-range value from position 40 on
    assert lm_curves.first_loss_rise(step, L, window=1) == 40
    assert (
        lm_curves.first_loss_rise(step, L, window=4) == 39
    )  # [39, 43) averages 2.225 > 2.2, [38, 42) 2.15
    assert lm_curves.first_loss_rise(step, L, rise=0.2, window=1) is None
    early = flat.copy()
    early[:4] = 5.0  # high loss with little context is not a rise: the search starts at L/2
    assert lm_curves.first_loss_rise(early, L, window=1) is None
    spike = flat.copy()
    spike[30] = 2.5  # one noisy position: the window of 2 averages it away (2.25 > 2.2 though)
    assert lm_curves.first_loss_rise(spike, L, window=4) is None
    with pytest.raises(ValueError, match="P >= L"):
        lm_curves.first_loss_rise(flat[:8], L)
    with pytest.raises(ValueError, match="rise"):
        lm_curves.first_loss_rise(flat, L, rise=0)


def test_buckets_never_mix_inside_and_beyond_L():
    assert lm_curves.bucket_edges(64, 512) == [0, 64, 128, 256, 512]
    assert lm_curves.bucket_edges(64, 512, kind="log") == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    curves = np.stack([np.arange(8.0), 2 * np.arange(8.0)])
    np.testing.assert_allclose(lm_curves.bucket_means(curves, [0, 2, 8]), [[0.5, 4.5], [1.0, 9.0]])
    with pytest.raises(ValueError, match="edges"):
        lm_curves.bucket_means(curves, [0, 9])


def test_checkpoint_loader_checks_the_sha(tiny, tmp_path):
    res, out = tiny
    model = st.load_lm("rope", 0, results=out)
    assert model.scheme == "rope" and model.rope_scaling.rope_type == "default"
    x = corpus.heldout_excerpt()[:33]
    with torch.no_grad():
        curve = st.per_position_loss(model, x, 32)
    np.testing.assert_allclose(curve.mean(), np.mean(res["runs"]["rope/0"]["loss"][:32]), atol=1)
    file = out.parent / res["checkpoints"]["rope/0"]["file"]
    data = bytearray(file.read_bytes())
    data[-1] ^= 1
    file.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="SHA-256"):
        st.load_lm("rope", 0, results=out)
    with pytest.raises(KeyError, match="rope/0"):
        st.load_lm("alibi", 5, results=out)


def test_results_file_is_written_with_provenance(tiny):
    _, out = tiny
    saved = json.loads(out.read_text())
    assert set(saved["source_keys"]) == set(st.CODE_MODULES)
    assert {"torch", "numpy", "python", "pygments"} <= set(saved["versions"])
    assert saved["corpus"]["licence"] == "BSD-2-Clause"


def test_committed_results_are_not_stale_and_complete():
    if not st.RESULTS_FILE.exists():
        pytest.skip(f"{st.RESULTS_FILE} does not exist yet: run the study")
    saved = st.load_results()
    problems = st.is_stale(saved)
    assert not problems, f"{st.RESULTS_FILE.name} is stale ({'; '.join(problems)}): re-run it"
    c = st.LMStudyConfig.from_dict(saved["config"])
    assert len(c.seeds) >= 3 and set(c.all_schemes) == set(byte_lm.SCHEMES)
    assert c.extra_schemes == ("xpos", "sinusoidal-matched")  # chapter 5's table shows six
    assert set(saved["runs"]) == {f"{s}/{seed}" for s in c.all_schemes for seed in c.seeds}
    assert set(saved["partial"]) == {f"{r}/{seed}" for r in c.rotary_dims for seed in c.seeds}
    assert set(saved["xpos_sweep"]) == {f"{b:g}/{s}" for b in c.sweep_bases for s in c.seeds}
    assert c.sweep_bases == (8.0, 128.0, 512.0) and c.xpos_base == 32.0  # L/8, 2L, 8L; L/2
    for run in [*saved["runs"].values(), *saved["xpos_sweep"].values()]:
        for band in ("in", "far"):
            np.testing.assert_allclose(np.sum(run["attention"][band]["mass"], 1), 1.0, atol=1e-3)
    assert {f"rope/{seed}" for seed in c.seeds} <= set(saved["checkpoints"])
    assert {f"rope-r8/{seed}" for seed in c.seeds} | {"xpos/0"} <= set(saved["checkpoints"])
    assert c.rope_bases == (500000.0,)  # Llama 3's rope_theta, for chapter 8b
    assert {f"rope-b500000/{seed}" for seed in c.seeds} <= set(saved["checkpoints"])
    assert set(saved["bases"]) == {f"500000/{seed}" for seed in c.seeds}
    for entry in saved["checkpoints"].values():
        assert (st.RESULTS_FILE.parent / entry["file"]).exists()


def test_config_refuses_bad_values():
    with pytest.raises(ValueError, match="scheme"):
        st.LMStudyConfig(schemes=("rope", "bogus"))
    with pytest.raises(ValueError, match="must not repeat schemes"):
        st.LMStudyConfig(schemes=("rope", "xpos"))
    with pytest.raises(ValueError, match="xpos_scale_base"):
        st.LMStudyConfig(xpos_scale_base=0.0)
    with pytest.raises(ValueError, match="must not repeat the B in use, 32.0"):
        st.LMStudyConfig(xpos_sweep=(0.5,))  # 0.5 L = 32 = the default B
    with pytest.raises(ValueError, match="distinct values > 0"):
        st.LMStudyConfig(xpos_sweep=(2.0, 2.0))
    with pytest.raises(ValueError, match="lr"):
        st.LMStudyConfig(lr=0)
    with pytest.raises(ValueError, match="strictly increasing"):
        st.LMStudyConfig(finetune_steps=(50, 25))
    with pytest.raises(TypeError, match="seeds"):
        st.LMStudyConfig(seeds=3)
    with pytest.raises(ValueError, match="n_heads"):
        st.LMStudyConfig(d_model=64, n_heads=3)
    with pytest.raises(TypeError, match="unknown study option"):
        st.LMStudyConfig.from_dict({"stepz": 3})
    with pytest.raises(TypeError, match="LMStudyConfig"):
        st.train_lm("rope", {"steps": 3}, 0)


def test_partial_rotary_runs_are_trained_saved_and_loadable(tiny):
    res, out = tiny
    assert set(res["partial"]) == {"8/0"}
    curves = lm_curves.partial_curves(res, 8)
    assert curves.shape == (1, 8 * 16)
    m = st.load_lm("rope", 0, rotary_dim=8, results=out)
    assert m.rope.rotary_dim == 8
    np.testing.assert_allclose(
        st.per_position_loss(m, corpus.heldout_excerpt()[:16384], 8 * 16), curves[0], atol=1e-3
    )
    with pytest.raises(KeyError, match="rotary_dim=4"):
        lm_curves.partial_curves(res, 4)


def test_runs_at_another_base_are_trained_saved_and_loadable(tiny):
    res, out = tiny
    assert set(res["bases"]) == {"500000/0"}
    curves = lm_curves.base_curves(res, 500000)
    m = st.load_lm("rope", 0, base=500000, results=out)
    assert m.rope.base == 500000.0 and m.rope.rotary_dim == 16
    np.testing.assert_allclose(
        st.per_position_loss(m, corpus.heldout_excerpt()[:16384], 8 * 16), curves[0], atol=1e-3
    )
    shas = {k: v["sha256"] for k, v in res["checkpoints"].items()}
    assert shas["rope-b500000/0"] != shas["rope/0"]  # another model, not a copy at another base
    with pytest.raises(KeyError, match="base=1000"):
        lm_curves.base_curves(res, 1000)
    with pytest.raises(KeyError, match="base=1000 .*there are: .*rope-b500000/0"):
        st.load_lm("rope", 0, base=1000, results=out)
    with pytest.raises(ValueError, match="rotary_dim or base"):
        st.load_lm("rope", 0, base=500000, rotary_dim=8, results=out)


@pytest.mark.parametrize(
    "bases, pattern",
    [((10000.0,), "not base=10000"), ((5e5, 5e5), "distinct"), ((1.0,), "rope_base")],
)
def test_rope_bases_are_checked(bases, pattern):
    with pytest.raises(ValueError, match=pattern):
        st.LMStudyConfig(rope_bases=bases)
    with pytest.raises(ValueError, match="need the 'rope' scheme"):
        st.LMStudyConfig(schemes=("none",), finetune_methods=(), rotary_dims=())


@pytest.mark.parametrize(
    "dims, pattern",
    [((16,), "2 <= r < head_dim=16"), ((7,), "even"), ((8, 8), "repeat"), ((0,), "positive")],
)
def test_rotary_dims_are_checked(dims, pattern):
    with pytest.raises(ValueError, match=pattern):
        st.LMStudyConfig(rotary_dims=dims)


def test_committed_partial_rotary_checkpoints_load():
    m = st.load_lm("rope", 1, rotary_dim=8)
    assert m.rope.rotary_dim == 8 and m.rope.head_dim == 16
    with pytest.raises(KeyError, match="rope-r8/0"):
        st.load_lm("rope", 0, rotary_dim=4)


def test_sweep_and_attention_are_read_seed_by_seed(tiny):
    res, _ = tiny
    curves = lm_curves.xpos_sweep_curves(res, 128.0)
    np.testing.assert_array_equal(curves, [res["xpos_sweep"]["128/0"]["loss"]])
    edges, share, mean = lm_curves.attention_by_distance(res, "xpos", scale_base=2.0)
    assert edges[0] == 0 and edges[-1] == 8 * 16 and share.shape == (1, 1, len(edges) - 1)
    edges, share, mean = lm_curves.attention_by_distance(res, "alibi", queries="in")
    assert res["runs"]["alibi/0"]["attention"]["in"]["queries"] == [8, 16]
    np.testing.assert_array_equal(mean, [res["runs"]["alibi/0"]["attention"]["in"]["mean"]])
    d, beyond = lm_curves.attention_beyond(res, "alibi", queries="in")
    np.testing.assert_allclose(beyond[:, 0], 1.0, atol=1e-3)
    k = list(d).index(4)  # share at distance >= 4: the bands from edge 4 on, mean over layers
    np.testing.assert_allclose(beyond[0, k], np.sum(share[0, :, k:], 1).mean())
    with pytest.raises(KeyError, match=r"scale_base=3.0; there are \[2.0, 32.0, 128.0\]"):
        lm_curves.xpos_sweep_curves(res, 3.0)
    with pytest.raises(ValueError, match="queries"):
        lm_curves.attention_by_distance(res, "rope", queries="near")
