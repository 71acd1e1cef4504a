"""The learned-versus-fixed study (posenc_core.book.studies.encoder_study) and its committed
results file."""

import dataclasses
import itertools
import json

import numpy as np
import pytest
import torch

from posenc_core.book.models import encoder
from posenc_core.book.studies import encoder_results, synthetic_tasks
from posenc_core.book.studies import encoder_study as ex

RESULTS = ex.RESULTS_FILE
TINY = {
    "steps": 40,
    "seeds": [0],
    "train_len": 8,
    "eval_factor": 2,
    "d_model": 32,
    "n_layers": 1,
    "batch": 32,
    "eval_batch": 8,
    "log_every": 20,
}


def test_results_file_matches_the_current_code_and_defaults():
    assert RESULTS.exists(), f"{RESULTS} is missing: run `make study`"
    saved = ex.load_results(RESULTS)
    problems = ex.is_stale(saved)
    assert not problems, (
        f"{RESULTS.name} is stale ({'; '.join(problems)}): run `make study` and commit it"
    )
    c = ex.StudyConfig.from_dict(saved["config"])
    assert set(saved["runs"]) == {ex.run_key(*p) for p in c.plan()}
    assert len(c.seeds) >= 3 and set(encoder.SCHEMES) <= set(c.schemes)
    assert set(c.settings) == set(ex.SETTINGS)
    assert set(saved["versions"]) >= {"torch", "numpy", "python"}
    L = str(c.train_len)
    for key, run in saved["runs"].items():  # the band hides nothing at the training length
        assert set(run["window_acc"]) == set(run["acc"]), key
        assert run["window_acc"][L] == run["acc"][L], key


@pytest.mark.parametrize("setting", ex.SETTINGS)
def test_smoke_training_lowers_the_loss_for_every_scheme(setting):
    res = ex.run_encoder_study(settings=[setting], tasks=["lookback"], on_progress=None, **TINY)
    assert len(res["runs"]) == len(encoder.SCHEMES)
    for key, run in res["runs"].items():
        curve = run["curve"]
        first, last = sum(curve[:5]) / 5, sum(curve[-5:]) / 5
        assert last < first, f"{key}: loss did not fall ({first:.3f} -> {last:.3f})"
        assert [len(v) for v in run["acc"].values()] == [8, 16]  # one value per position


def test_decoder_skips_the_tasks_whose_answer_lies_in_the_future():
    c = ex.StudyConfig(tasks=["first", "reverse"], seeds=[0])
    assert {(s, t) for s, t, _, _ in c.plan()} == {
        ("encoder", "first"),
        ("encoder", "reverse"),
        ("decoder", "first"),
    }
    with pytest.raises(ValueError, match="nothing to run"):
        ex.StudyConfig(settings=["decoder"], tasks=["swap"])


def test_decoder_output_at_a_position_ignores_later_tokens():
    model = ex.build_encoder("rope", ex.StudyConfig(**TINY), 0, "decoder")
    x = torch.randint(16, (2, 10))
    y = x.clone()
    y[:, 6:] = (y[:, 6:] + 1) % 16  # change the future of position 5
    with torch.no_grad():
        torch.testing.assert_close(model(x)[:, :6], model(y)[:, :6])
        assert not torch.allclose(model(x)[:, 6:], model(y)[:, 6:])


def test_initialisation_is_gpt2s_and_the_sinusoidal_embedding_is_scaled():
    torch.manual_seed(0)
    m = encoder.TinyTransformer(16, 64, 4, 2, scheme="learned", max_len=512)
    assert abs(m.pos.weight.std().item() - 0.02) < 0.002  # BERT / GPT-2: N(0, 0.02)
    assert abs(m.blocks[0].attn.qkv.weight.std().item() - 0.02) < 0.002
    assert abs(m.blocks[0].attn.out.weight.std().item() - 0.01) < 0.002  # 0.02 / sqrt(2 * 2)
    assert torch.count_nonzero(m.head.bias) == 0
    s = encoder.TinyTransformer(512, 64, 4, 2, scheme="sinusoidal", max_len=8)
    assert abs(s.embed.weight.std().item() - 64**-0.5) < 0.01  # Vaswani: N(0, 1/d) ...
    x = s.embed(torch.zeros(1, 1, dtype=torch.long))
    torch.testing.assert_close(s.pos(x)[0, 0], 8.0 * x[0, 0] + torch.tensor([0.0, 1.0] * 32))


def test_no_position_encoder_is_permutation_equivariant():
    torch.manual_seed(0)
    model = encoder.TinyTransformer(16, 32, 4, 2, scheme="none").eval()
    x = torch.randint(16, (3, 12))
    perm = torch.randperm(12)
    with torch.no_grad():
        torch.testing.assert_close(model(x[:, perm]), model(x)[:, perm], rtol=1e-5, atol=1e-5)
    for scheme in ("sinusoidal", "learned", "rope", "alibi"):  # every positional scheme breaks it
        m = encoder.TinyTransformer(16, 32, 4, 2, scheme=scheme, max_len=12, learned_init_std=1.0)
        with torch.no_grad():
            assert not torch.allclose(m.eval()(x[:, perm]), m(x)[:, perm], atol=1e-4), scheme


def test_symmetric_alibi_encoder_is_reversal_equivariant_and_causal_alibi_is_not():
    torch.manual_seed(0)
    x = torch.randint(16, (3, 12))
    alibi = encoder.TinyTransformer(16, 32, 4, 2, scheme="alibi").eval()
    with torch.no_grad():
        torch.testing.assert_close(alibi(x.flip(1)), alibi(x).flip(1), rtol=1e-5, atol=1e-5)
        causal = encoder.TinyTransformer(16, 32, 4, 2, scheme="alibi", causal=True).eval()
        assert not torch.allclose(causal(x.flip(1)), causal(x).flip(1), atol=1e-4)


def test_reversal_cap_by_enumeration():
    """For n = 5, V = 2 enumerate all 32 inputs: the best reversal-equivariant predictor
    (one answer per orbit {x at i, reversed x at n-1-i}) reaches exactly the cap."""
    n, vocab, k = 5, 2, 1
    for task in ("first", "lookback"):
        idx = synthetic_tasks.target_index(task, n, k)

        def target(x, i, idx=idx):
            return vocab if idx[i] is None else x[idx[i]]

        total = 0.0
        for x in itertools.product(range(vocab), repeat=n):
            for i in range(n):
                # answers that serve (x, i) and (reversed x, n-1-i) at once: count the best
                xr = x[::-1]
                pair = [target(x, i), target(xr, n - 1 - i)]
                total += max(pair.count(a) for a in pair) / 2
        best = total / (vocab**n * n)
        assert best == pytest.approx(synthetic_tasks.reversal_cap(task, n, vocab, k).mean())
    assert synthetic_tasks.reversal_cap("lookback", 64, 16, 3)[10] == pytest.approx(
        (1 + 1 / 16) / 2
    )


def test_tasks_targets():
    gen = torch.Generator().manual_seed(0)
    x, y = synthetic_tasks.make_batch("reverse", 2, 5, 10, gen)
    assert torch.equal(y, x.flip(-1))
    x, y = synthetic_tasks.make_batch("lookback", 2, 5, 10, gen, k=2)
    assert torch.equal(y[:, :2], torch.full((2, 2), 10)) and torch.equal(y[:, 2:], x[:, :3])
    x, y = synthetic_tasks.make_batch("first", 2, 5, 10, gen)
    assert torch.equal(y, x[:, :1].expand(2, 5))
    x, y = synthetic_tasks.make_batch("swap", 1, 5, 10, gen)
    assert torch.equal(y[0], x[0, [1, 0, 3, 2, 4]])


def test_same_seed_gives_identical_losses_and_other_seed_differs():
    cfg = {**TINY, "steps": 15, "settings": ["encoder"], "tasks": ["lookback"]}
    runs = [
        ex.run_encoder_study(schemes=["learned"], on_progress=None, **{**cfg, "seeds": [s]})
        for s in (3, 3, 4)
    ]
    curves = [
        r["runs"][ex.run_key("encoder", "lookback", "learned", s)]["curve"]
        for r, s in zip(runs, (3, 3, 4))
    ]
    assert curves[0] == curves[1]
    assert curves[0] != curves[2]


def test_learned_table_past_its_rows_raises():
    model = encoder.TinyTransformer(16, 32, 4, 1, scheme="learned", max_len=8)
    with pytest.raises(ValueError, match="rows only for positions 0..7"):
        model(torch.zeros(1, 9, dtype=torch.long))
    assert ex.build_encoder("learned", ex.StudyConfig(**TINY), 0).position_table().shape == (16, 32)


def test_interrupt_keeps_finished_runs_and_resume_completes_them():
    def stop_in_second_run(event):
        if event["event"] == "step" and event["run"] == 2:
            raise KeyboardInterrupt

    cfg = {**TINY, "steps": 5, "settings": ["encoder"], "tasks": ["lookback"]}
    cfg["schemes"] = ["none", "rope"]
    part = ex.run_encoder_study(on_progress=stop_in_second_run, **cfg)
    key = ex.run_key("encoder", "lookback", "none", 0)
    assert part["interrupted"] and list(part["runs"]) == [key]
    done = ex.run_encoder_study(on_progress=None, resume=part, **cfg)
    assert not done["interrupted"] and len(done["runs"]) == 2
    assert done["runs"][key] is part["runs"][key]


def test_progress_reports_time_left():
    events = []
    ex.run_encoder_study(on_progress=events.append, **{**TINY, "steps": 4, "schemes": ["none"]})
    done = [e for e in events if e["event"] == "done"]
    assert [e["fraction_done"] for e in done] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert all(e["elapsed"] >= 0 for e in events)


def test_two_worker_processes_give_the_same_numbers_as_one():
    cfg = {**TINY, "steps": 6, "tasks": ["first"], "schemes": ["rope"]}
    one = ex.run_encoder_study(on_progress=None, **cfg)["runs"]
    two = ex.run_encoder_study(on_progress=None, workers=2, **cfg)["runs"]
    assert list(one) == list(two)
    for key in one:
        assert one[key]["curve"] == two[key]["curve"] and one[key]["acc"] == two[key]["acc"]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"schemes": ["sinusoid"]}, ValueError, "scheme"),
        ({"settings": ["causal"]}, ValueError, "setting"),
        ({"tasks": "reverse"}, TypeError, "tasks must be a non-empty list"),
        ({"steps": 0}, ValueError, "steps"),
        ({"min_len": 40}, ValueError, "min_len=40 must be <= train_len=32"),
        ({"lr": -1.0}, ValueError, "lr must be > 0"),
        ({"stepz": 10}, TypeError, "unknown study option"),
        ({"seeds": 3}, TypeError, "seeds must be a non-empty list"),
        ({"on_progress": 3}, TypeError, "on_progress must be callable"),
    ],
)
def test_bad_arguments_give_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        ex.run_encoder_study(**kwargs)
    if "on_progress" not in kwargs:  # the same check, made once, when the configuration is made
        with pytest.raises(error, match=match):
            ex.StudyConfig.from_dict(kwargs)


def test_config_round_trips_through_the_results_file_format():
    cfg = ex.StudyConfig(**TINY)
    d = cfg.to_dict()
    assert list(d) == [f.name for f in dataclasses.fields(ex.StudyConfig)]
    assert d["seeds"] == [0] and isinstance(d["tasks"], list) and isinstance(d["lr"], float)
    assert ex.StudyConfig.from_dict(json.loads(json.dumps(d))) == cfg
    assert cfg.replace(steps=7).steps == 7 and cfg.steps == 40
    assert ex.StudyConfig().eval_lengths == (32, 64, 128)
    assert encoder_results.bands(ex.StudyConfig()) == [(0, 32), (32, 64), (64, 128)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.steps = 1
    saved = ex.load_results(RESULTS)["config"]  # the committed file still reads
    assert set(saved) == set(d)
    assert ex.StudyConfig.from_dict(saved).to_dict() == saved


def test_functions_take_a_study_config_not_a_dict():
    with pytest.raises(TypeError, match="config must be a StudyConfig.*got dict"):
        ex.build_encoder("rope", TINY, 0)
    with pytest.raises(TypeError, match="config must be a StudyConfig"):
        ex.run_encoder_study(TINY)


def test_summaries_read_per_position_accuracy():
    def run(setting, seed, acc):
        return {"setting": setting, "task": "first", "scheme": "rope", "seed": seed, "acc": acc}

    runs = {
        "a": run("encoder", 1, {"4": [1.0, 1.0, 0.0, 0.0]}),
        "b": run("encoder", 0, {"4": [1.0, 0.5, 0.5, 0.0]}),
        "c": run("decoder", 0, {"4": [0.0, 0.0, 0.0, 0.0]}),
    }
    results = {"config": ex.StudyConfig().to_dict(), "runs": runs}
    a = encoder_results.position_accuracy(results, "encoder", "first", "rope")
    np.testing.assert_array_equal(a, [[1.0, 0.5, 0.5, 0.0], [1.0, 1.0, 0.0, 0.0]])  # by seed
    assert encoder_results.band_accuracy(results, "encoder", "first", "rope", 0, 2) == (
        0.875,
        0.125,
    )
    with pytest.raises(KeyError, match="task='lookback'.*decoder/first/rope, encoder/first/rope"):
        encoder_results.runs_for(results, "encoder", "lookback", "rope")


def test_bad_model_arguments():
    with pytest.raises(ValueError, match="scheme"):
        encoder.TinyTransformer(16, scheme="relative")
    with pytest.raises(ValueError, match="must divide d_model"):
        encoder.TinyTransformer(16, 30, 4)
    with pytest.raises(ValueError, match="integer tensor"):
        encoder.TinyTransformer(16)(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="different configuration"):
        ex.run_encoder_study(
            resume={"config": ex.StudyConfig(steps=1).to_dict(), "runs": {}},
            on_progress=None,
            steps=2,
        )


def test_parameter_counts():
    assert encoder.learned_table_parameters(512, 768) == 393_216
    m = encoder.TinyTransformer(16, 32, 4, 1, scheme="learned", max_len=8)
    counts = encoder.parameter_counts(m)
    assert counts["positional"] == 8 * 32
    assert (
        counts["total"] - counts["positional"]
        == encoder.parameter_counts(encoder.TinyTransformer(16, 32, 4, 1, scheme="none"))["total"]
    )


def test_window_hides_exactly_the_keys_at_offset_w_or_more():
    torch.manual_seed(0)
    x = torch.randint(16, (2, 12))
    for scheme, causal in (("rope", False), ("alibi", False), ("learned", True)):
        m = encoder.TinyTransformer(16, 32, 4, 2, scheme=scheme, max_len=12, causal=causal).eval()
        with torch.no_grad():
            assert torch.equal(m(x, window=12), m(x))  # no offset reaches 12: nothing hidden
            banded = m(x, window=3)
            assert not torch.allclose(banded, m(x), atol=1e-4)
            # two layers of a band of 3 reach 4 positions away at most: change token 0 and
            # nothing from position 5 on may move
            y = x.clone()
            y[:, 0] = (y[:, 0] + 1) % 16
            torch.testing.assert_close(m(y, window=3)[:, 5:], banded[:, 5:], rtol=0, atol=0)
            assert not torch.allclose(m(y, window=3)[:, :5], banded[:, :5], atol=1e-5)
    with pytest.raises(ValueError, match="window must be a positive integer, got 0"):
        m(x, window=0)
    with pytest.raises(TypeError, match="window must be a positive integer, got float"):
        m(x, window=2.0)


def test_windowed_evaluation_reads_the_same_sequences_and_is_stored():
    c = ex.StudyConfig(**TINY)
    model = ex.build_encoder("rope", c, 0, "encoder")
    plain = ex.evaluate(model, "lookback", c, 0)
    banded = ex.evaluate(model, "lookback", c, 0, window=c.train_len)
    assert plain["8"] == banded["8"]  # at length L no offset reaches L: identical
    res = ex.run_encoder_study(c, on_progress=None, settings=["encoder"], tasks=["lookback"])
    run = res["runs"][ex.run_key("encoder", "lookback", "rope", 0)]
    assert run["window_acc"]["8"] == run["acc"]["8"]
    a = encoder_results.position_accuracy(res, "encoder", "lookback", "rope", windowed=True)
    np.testing.assert_array_equal(a, [run["window_acc"]["16"]])
