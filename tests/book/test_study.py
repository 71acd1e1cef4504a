"""The learned-versus-fixed study (posenc_core.book.study) and its committed results file."""

import dataclasses
import json
import pathlib

import pytest
import torch

from posenc_core.book import study as ex

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "chapters" / "data" / "learned_vs_fixed.json"
TINY = {
    "steps": 40,
    "seeds": [0],
    "train_len": 8,
    "eval_factor": 2,
    "d_model": 32,
    "n_layers": 1,
    "batch": 32,
    "eval_batch": 8,
}


def test_results_file_matches_the_current_code_and_defaults():
    assert RESULTS.exists(), f"{RESULTS} is missing: run `make study`"
    saved = ex.load_results(RESULTS)
    problems = ex.is_stale(saved)
    assert not problems, (
        f"{RESULTS.name} is stale ({'; '.join(problems)}): run `make study` and commit it"
    )
    c = saved["config"]
    expected = {
        ex.run_key(t, s, seed) for t in c["tasks"] for s in c["schemes"] for seed in c["seeds"]
    }
    assert set(saved["runs"]) == expected
    assert len(c["seeds"]) >= 3 and set(ex.SCHEMES) <= set(c["schemes"])
    assert all(set(k) >= {"torch", "numpy", "python"} for k in [saved["versions"]])


@pytest.mark.parametrize("task", ex.TASKS)
def test_smoke_training_lowers_the_loss_for_every_scheme(task):
    res = ex.run_study(tasks=[task], on_progress=None, **TINY)
    assert len(res["runs"]) == len(ex.STUDY_SCHEMES)
    for key, run in res["runs"].items():
        curve = run["curve"]
        first, last = sum(curve[:5]) / 5, sum(curve[-5:]) / 5
        assert last < first, f"{key}: loss did not fall ({first:.3f} -> {last:.3f})"


def test_same_seed_gives_identical_losses_and_other_seed_differs():
    cfg = {**TINY, "steps": 15}
    runs = [
        ex.run_study(
            tasks=["lookback"], schemes=["learned"], on_progress=None, **{**cfg, "seeds": [s]}
        )
        for s in (3, 3, 4)
    ]
    curves = [
        r["runs"][ex.run_key("lookback", "learned", s)]["curve"] for r, s in zip(runs, (3, 3, 4))
    ]
    assert curves[0] == curves[1]
    assert curves[0] != curves[2]


def test_no_position_model_is_permutation_equivariant():
    torch.manual_seed(0)
    model = ex.TinyTransformer(16, 32, 4, 2, scheme="none").eval()
    x = torch.randint(16, (3, 12))
    perm = torch.randperm(12)
    with torch.no_grad():
        torch.testing.assert_close(model(x[:, perm]), model(x)[:, perm], rtol=1e-5, atol=1e-5)
    for scheme in ("sinusoidal", "learned", "rope", "alibi"):  # every positional scheme breaks it
        m = ex.TinyTransformer(16, 32, 4, 2, scheme=scheme, max_len=12, learned_init_std=1.0).eval()
        with torch.no_grad():
            assert not torch.allclose(m(x[:, perm]), m(x)[:, perm], atol=1e-4), scheme


def test_learned_table_past_its_rows_raises_and_the_study_records_no_row():
    model = ex.TinyTransformer(16, 32, 4, 1, scheme="learned", max_len=8)
    with pytest.raises(ValueError, match="rows only for positions 0..7"):
        model(torch.zeros(1, 9, dtype=torch.long))
    acc, error = ex.evaluate(model, "reverse", ex.StudyConfig(**TINY), 0)
    assert acc[:8] == [a for a in acc[:8] if a is not None] and acc[8:] == [None] * 8
    assert "max_len=8" in error


def test_tasks_targets():
    gen = torch.Generator().manual_seed(0)
    x, y = ex.make_batch("reverse", 2, 5, 10, gen)
    assert torch.equal(y, x.flip(-1))
    x, y = ex.make_batch("lookback", 2, 5, 10, gen, k=2)
    assert torch.equal(y[:, :2], torch.full((2, 2), 10)) and torch.equal(y[:, 2:], x[:, :3])


def test_interrupt_keeps_finished_runs_and_resume_completes_them():
    calls = []

    def stop_in_second_run(event):
        calls.append(event)
        if event["event"] == "step" and event["run"] == 2:
            raise KeyboardInterrupt

    cfg = {**TINY, "steps": 5, "tasks": ["lookback"], "schemes": ["none", "rope"]}
    part = ex.run_study(on_progress=stop_in_second_run, **cfg)
    assert part["interrupted"] and list(part["runs"]) == ["lookback/none/0"]
    done = ex.run_study(on_progress=None, resume=part, **cfg)
    assert not done["interrupted"] and len(done["runs"]) == 2
    assert done["runs"]["lookback/none/0"] is part["runs"]["lookback/none/0"]


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"schemes": ["sinusoid"]}, ValueError, "scheme"),
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
        ex.run_study(**kwargs)
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
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.steps = 1
    saved = ex.load_results(RESULTS)["config"]  # the committed file still reads
    assert set(saved) == set(d)
    assert ex.StudyConfig.from_dict(saved).to_dict() == saved


def test_functions_take_a_study_config_not_a_dict():
    with pytest.raises(TypeError, match="config must be a StudyConfig.*got dict"):
        ex.build_model("rope", TINY, 0)
    with pytest.raises(TypeError, match="config must be a StudyConfig"):
        ex.run_study(TINY)
    m = ex.build_model("learned_long", ex.StudyConfig(**TINY), 0)
    assert m.position_table().shape == (8 * 2, 32)


def test_runs_for_sorts_by_seed_and_names_what_exists():
    runs = {
        ex.run_key("first", s, seed): {"task": "first", "scheme": s, "seed": seed}
        for seed in (2, 0, 1)
        for s in ("rope", "learned")
    }
    results = {"config": ex.StudyConfig().to_dict(), "runs": runs}
    assert [r["seed"] for r in ex.runs_for(results, "first", "rope")] == [0, 1, 2]
    assert all(r["scheme"] == "rope" for r in ex.runs_for(results, "first", "rope"))
    with pytest.raises(
        KeyError, match=r"task='lookback', scheme='rope'.*first/learned, first/rope"
    ):
        ex.runs_for(results, "lookback", "rope")


def test_bad_model_arguments():
    with pytest.raises(ValueError, match="scheme"):
        ex.TinyTransformer(16, scheme="relative")
    with pytest.raises(ValueError, match="must divide d_model"):
        ex.TinyTransformer(16, 30, 4)
    with pytest.raises(ValueError, match="integer tensor"):
        ex.TinyTransformer(16)(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="different configuration"):
        ex.run_study(
            resume={"config": ex.StudyConfig(steps=1).to_dict(), "runs": {}},
            on_progress=None,
            steps=2,
        )


def test_parameter_counts():
    assert ex.learned_table_parameters(512, 768) == 393_216
    m = ex.TinyTransformer(16, 32, 4, 1, scheme="learned", max_len=8)
    counts = ex.parameter_counts(m)
    assert counts["positional"] == 8 * 32
    assert (
        counts["total"] - counts["positional"]
        == ex.parameter_counts(ex.TinyTransformer(16, 32, 4, 1, scheme="none"))["total"]
    )
