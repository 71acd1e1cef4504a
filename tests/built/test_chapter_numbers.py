"""Numbers the chapters print, checked against closed forms computed here with ``math``.

Each test reads a value the build glued (``_build/jupyter_execute/chapters/*.glue.json``) and
compares it with an independent formula: the errata of an expert reading (chapters 7 and 9),
so that a number the text once got wrong stays right.
"""

import ast
import json
import math
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXECUTED = ROOT / "_build" / "jupyter_execute" / "chapters"

if not EXECUTED.is_dir():
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)


def glued(stem: str, name: str):
    """The value a chapter glued under ``name``, read back from its text/plain form."""
    data = json.loads((EXECUTED / f"{stem}.glue.json").read_text(encoding="utf-8"))
    text = data[name]["data"]["text/plain"]
    if text.startswith("np.float64(") and text.endswith(")"):
        text = text[len("np.float64(") : -1]
    return ast.literal_eval(text)


@pytest.mark.parametrize("head", range(1, 9))
def test_alibi_weight_that_moves_is_the_geometric_tail(head):
    """Chapter 7: 512 -> 4096 keys moves the weight beyond distance 512,
    e^(-512 m)(1 - e^(-3584 m)) / (1 - e^(-4096 m)) for slope m = 2^-head (8 heads). Relative
    only (abs=0): head 1's value is 6.6e-112, and the chapter once printed half of it."""
    m = 2.0**-head
    tail = math.exp(-512 * m) * -math.expm1(-3584 * m) / -math.expm1(-4096 * m)
    assert glued("07_alibi_long_context", f"ch7-tv-{head}") == pytest.approx(tail, rel=1e-9, abs=0)


def test_rope_pair_turns_within_the_training_length():
    """Chapter 9: pair i of a 16-wide head turns L / (2 pi) * 10000^(-i/8) times in L = 64;
    pair 4 makes about a tenth of a turn, pairs 5 to 7 much less."""
    turns = [64 / (2 * math.pi) * 10000 ** (-i / 8) for i in range(8)]
    for i, expected in enumerate(turns):
        assert glued("09_beyond_one_axis", f"ch9-turns-{i}") == pytest.approx(
            expected, rel=1e-12, abs=0
        )
    assert turns[4] > 0.1 > turns[5]


def test_one_decoded_token_shows_both_decode_step_bugs():
    """Chapter 8: each bug alone moves the first decoded byte's logits; the correct step does
    not (float32 rounding only)."""
    stem = "08_when_positions_go_wrong"
    assert glued(stem, "ch8-step-gap-correct") < 1e-4
    assert glued(stem, "ch8-step-gap-position") > 0.5
    assert glued(stem, "ch8-step-gap-key") > 0.5


DATA = ROOT / "posenc_core" / "book" / "data"


def _runs(name: str) -> dict:
    return json.loads((DATA / name).read_text(encoding="utf-8"))["runs"]


def _mean(values) -> float:
    return sum(values) / len(values)


def test_rope_behind_a_window_recovers_as_chapter_5_says():
    """Chapter 5: the same RoPE models behind a window of L are perfect on [0, L) of *first* and
    near it on *lookback* (read here straight from the results file), and the window changes
    nothing at length L."""
    runs = _runs("learned_vs_fixed.json")
    stem = "05_learned_vs_fixed"

    def band(setting, task, field, lo, hi):
        rows = [r[field]["128"][lo:hi] for r in runs.values()
                if (r["setting"], r["task"], r["scheme"]) == (setting, task, "rope")]  # fmt: skip
        return _mean([_mean(row) for row in rows])

    first = band("encoder", "first", "window_acc", 0, 32)
    assert glued(stem, "ch5-winv-encoder-first-rope-0") == pytest.approx(first, rel=1e-12)
    assert first > 0.99 > 0.2 > band("encoder", "first", "acc", 0, 32)
    assert band("encoder", "lookback", "window_acc", 64, 128) > 0.9
    assert band("decoder", "lookback", "window_acc", 64, 128) > 0.99
    assert glued(stem, "ch5-win-same-at-L") == "True"
    assert all(r["window_acc"]["32"] == r["acc"]["32"] for r in runs.values())


def test_the_embedding_recipe_share_of_the_sinusoidal_gap():
    """Chapter 5: the control (the others' embeddings) closes a fraction of the sinusoidal-learned
    gap on [0, L), seed by seed: (sinusoidal - control) / (sinusoidal - learned), from the file."""
    runs = _runs("lm_study.json")

    def inside(scheme):
        rows = sorted((r["seed"], r["loss"][:64]) for r in runs.values() if r["scheme"] == scheme)
        return [_mean(loss) for _, loss in rows]

    sin, control, learned = inside("sinusoidal"), inside("sinusoidal-matched"), inside("learned")
    share = _mean([a - b for a, b in zip(sin, control)]) / _mean(
        [a - b for a, b in zip(sin, learned)]
    )
    assert glued("05_learned_vs_fixed", "ch5-recipe-share") == pytest.approx(share, rel=1e-9)
    assert all(a > b > c for a, b, c in zip(sin, control, learned))  # "still trails" on every seed


def test_xpos_sweep_order_and_far_attention_as_chapter_9_says():
    """Chapter 9: on [4L, 8L), every seed orders L/8 and L/2 < 2L < 8L < RoPE, and far queries
    put most of RoPE's attention L or more back but little of xPos's at B = L/2."""
    saved = json.loads((DATA / "lm_study.json").read_text(encoding="utf-8"))

    def far(entries):
        return [_mean(r["loss"][256:]) for r in sorted(entries, key=lambda r: r["seed"])]

    main = {s: [r for r in saved["runs"].values() if r["scheme"] == s] for s in ("rope", "xpos")}
    sweep = {b: [r for r in saved["xpos_sweep"].values() if r["scale_base"] == b]
             for b in (8.0, 128.0, 512.0)}  # fmt: skip
    loss = {"rope": far(main["rope"]), 32.0: far(main["xpos"])}
    loss |= {b: far(entries) for b, entries in sweep.items()}
    for seed in range(3):
        assert max(loss[8.0][seed], loss[32.0][seed]) < loss[128.0][seed]
        assert loss[128.0][seed] < loss[512.0][seed] < loss["rope"][seed]
    assert glued("09_beyond_one_axis", "ch9-sweep-ordered") == "True"

    def beyond_l(entries):  # share of weight at distance >= 64, mean over layers and seeds
        shares = []
        for r in entries:
            edges, mass = r["attention"]["edges"], r["attention"]["far"]["mass"]
            k = edges.index(64)
            shares.append(_mean([sum(layer[k:]) for layer in mass]))
        return _mean(shares)

    rope, xpos = beyond_l(main["rope"]), beyond_l(main["xpos"])
    assert glued("09_beyond_one_axis", "ch9-att-far-rope") == pytest.approx(rope, rel=1e-9)
    assert glued("09_beyond_one_axis", "ch9-att-far-xpos-32") == pytest.approx(xpos, rel=1e-9)
    assert rope > 0.75 and xpos < 0.3


def _bugs() -> dict:
    return json.loads((DATA / "evaluations.json").read_text(encoding="utf-8"))["bugs"]


def _band(rows, lo, hi=None) -> list[float]:
    """Per seed, the mean of a stored curve over positions [lo, hi)."""
    return [_mean(r[lo:hi]) for r in rows]


STEM_8B = "08b_caches_and_windows"


def test_windows_and_sinks_as_chapter_8b_says():
    """Chapter 8b: a cache of L keys beats full attention on [4L, 8L); sinks at text positions
    and keys never re-rotated cost more than the cache rule beyond L on every seed; losing the
    first tokens costs this model almost nothing (read straight from evaluations.json)."""
    bugs, L = _bugs(), 64
    full = _band(bugs["theta-converse"]["correct"], 4 * L)
    window = _band(bugs["window-no-sinks"]["correct"], 4 * L)
    assert _mean(window) < _mean(full)
    assert glued(STEM_8B, "ch8b-window-far") == pytest.approx(_mean(window), abs=1e-9)
    ok = _band(bugs["sinks-text-positions"]["correct"], L)
    for key in ("sinks-text-positions", "sinks-not-rerotated"):
        bad = _band(bugs[key]["broken"], L)
        assert all(b > o + 0.05 for b, o in zip(bad, ok)), key
    gap = [abs(b - o) for b, o in zip(_band(bugs["window-no-sinks"]["broken"], L), ok)]
    assert max(gap) < 0.01
    assert glued(STEM_8B, "ch8b-nosink-diff") == pytest.approx(max(gap), abs=1e-9)
    assert glued(STEM_8B, "ch8b-first-attn") < 2 * glued(STEM_8B, "ch8b-uniform-first")


def test_longrope_switch_costs_as_chapter_8b_says():
    """Chapter 8b: keeping the cache costs most just after the switch, on every seed, and
    choosing the long factors once costs inside L0 on every seed."""
    bugs, L = _bugs(), 64
    stale, long = bugs["longrope-stale-cache"], bugs["longrope-long-always"]
    after = [b - o for b, o in zip(_band(stale["broken"], L, L + 16),
                                   _band(stale["correct"], L, L + 16))]  # fmt: skip
    assert min(after) > 0.1
    assert glued(STEM_8B, "ch8b-stale-after") == pytest.approx(
        _mean(_band(stale["broken"], L, L + 16)), abs=1e-9
    )
    late = [b - o for b, o in zip(_band(stale["broken"], 2 * L), _band(stale["correct"], 2 * L))]
    assert max(late) < min(after) / 2  # the cost fades
    short = [b - o for b, o in zip(_band(long["broken"], 0, L), _band(long["correct"], 0, L))]
    assert min(short) > 0.05


def test_lost_bases_and_serving_offsets_as_chapter_8b_says():
    """Chapter 8b: both wrong bases cost inside L and the converse helps on [4L, 8L); chunks
    from 0, kept drafts and the lagging counter cost inside L on every seed."""
    bugs, L = _bugs(), 64
    for key in ("theta-default", "theta-converse", "chunk-restart", "drafts-kept",
                "draft-position-lag"):  # fmt: skip
        bad, ok = _band(bugs[key]["broken"], L // 2, L), _band(bugs[key]["correct"], L // 2, L)
        assert all(b > o + 0.1 for b, o in zip(bad, ok)), key
    conv = bugs["theta-converse"]
    assert _mean(_band(conv["broken"], 4 * L)) < _mean(_band(conv["correct"], 4 * L)) - 0.5
    assert glued(STEM_8B, "ch8b-probe-500k-10k") > glued(STEM_8B, "ch8b-probe-500k-500k") + 0.1
    assert glued(STEM_8B, "ch8b-probe-10k-500k") > glued(STEM_8B, "ch8b-probe-10k-10k") + 0.1


def test_hugging_face_checks_of_chapter_8b():
    """Chapter 8b: Phi-3's forward keeps stale keys past L0 and generate does not; Qwen2-VL's
    decoding is exact with the deltas and off without them, and the text model's default is the
    dropped delta."""
    g = lambda name: glued(STEM_8B, name)  # noqa: E731
    assert g("ch8b-phi3-before") < 1e-5 < 1e-4 < g("ch8b-phi3-after")
    assert g("ch8b-phi3-same") == 1
    assert g("ch8b-mrope-right") < 1e-5
    assert min(g("ch8b-mrope-dropped-min"), g("ch8b-mrope-stale-min")) > 100 * 1e-5
    assert g("ch8b-mrope-default-min") == g("ch8b-mrope-dropped-min")
    assert g("ch8b-mrope-delta") == -18 and g("ch8b-mrope-n") == 34


# Errata of issue #39: each test fails if the sentence it guards came back.

STEM_5 = "05_learned_vs_fixed"


def _encoder_band(setting, task, scheme, field, lo, hi) -> float:
    """Chapter 5's study file: mean over seeds of the accuracy on positions [lo, hi) of the test
    sequences of length 4L, with full attention (``acc``) or behind the window (``window_acc``)."""
    saved = json.loads((DATA / "learned_vs_fixed.json").read_text(encoding="utf-8"))
    n = str(saved["config"]["eval_factor"] * saved["config"]["train_len"])
    rows = [r[field][n][lo:hi] for r in saved["runs"].values()
            if (r["setting"], r["task"], r["scheme"]) == (setting, task, scheme)]  # fmt: skip
    return _mean([_mean(row) for row in rows])


def test_window_relays_the_first_token_as_chapter_5_says():
    """Chapter 5: behind a window of L, two layers relay token 0 up to 2L - 2 away, so on
    [L, 2L) of *first* the RoPE and sinusoidal encoders and the sinusoidal decoder stay well
    above chance 1/V; on [2L, 4L), out of reach, every scheme is at chance. (The chapter once
    said every scheme falls to chance beyond L.)"""
    config = json.loads((DATA / "learned_vs_fixed.json").read_text(encoding="utf-8"))["config"]
    L, chance = config["train_len"], 1 / config["vocab"]
    assert glued(STEM_5, "ch5-chance") == pytest.approx(chance, rel=1e-12)
    assert config["n_layers"] == 2 and glued(STEM_5, "ch5-relay-reach") == 2 * L - 2
    for setting, scheme in (("encoder", "rope"), ("encoder", "sinusoidal"),
                            ("decoder", "sinusoidal")):  # fmt: skip
        near = _encoder_band(setting, "first", scheme, "window_acc", L, 2 * L)
        assert near > 3 * chance, (setting, scheme)
        assert glued(STEM_5, f"ch5-winv-{setting}-first-{scheme}-1") == pytest.approx(near)
    far = [_encoder_band(se, "first", s, "window_acc", 2 * L, 4 * L)
           for se in config["settings"] for s in config["schemes"]]  # fmt: skip
    assert max(far) < 1.25 * chance
    assert glued(STEM_5, "ch5-win-far-first-max") == pytest.approx(max(far))
    assert glued(STEM_5, "ch5-win-far-first-min") == pytest.approx(min(far))


@pytest.mark.parametrize(
    ("setting", "scheme"),
    [("encoder", "sinusoidal"), ("decoder", "sinusoidal"), ("decoder", "learned")],
)
def test_window_lifts_the_absolute_schemes_a_little_on_lookback(setting, scheme):
    """Chapter 5: on [2L, 4L) of *lookback* the window gives the absolute schemes something
    (the chapter once said nothing), and far less than RoPE's near-perfect score."""
    L = 32
    plain = _encoder_band(setting, "lookback", scheme, "acc", 2 * L, 4 * L)
    banded = _encoder_band(setting, "lookback", scheme, "window_acc", 2 * L, 4 * L)
    assert plain + 0.03 < banded < 0.5
    assert _encoder_band(setting, "lookback", "rope", "window_acc", 2 * L, 4 * L) > 0.9
    shown = glued(STEM_5, f"ch5-win-{setting}-lookback-{scheme}-2")
    assert shown == f"{plain:.2f}\u00a0→\u00a0{banded:.2f}"


def _lm_curves(scheme: str) -> list[list[float]]:
    return [r["loss"] for r in sorted(_runs("lm_study.json").values(), key=lambda r: r["seed"])
            if r["scheme"] == scheme]  # fmt: skip


def test_alibi_per_position_and_whole_sequence_as_chapter_5_says():
    """Chapter 5: per position, ALiBi's loss on [4L, 8L) is above its [L/2, L) band on every
    seed; as Press et al. measure it (the mean over a whole window) the 8L window is below the
    first L positions on every seed. The two measures disagree, and the chapter says which is
    which."""
    curves, L = _lm_curves("alibi"), 64
    assert len(curves) == 3
    for loss in curves:
        assert _mean(loss[4 * L : 8 * L]) > _mean(loss[L // 2 : L])
        assert _mean(loss[: 8 * L]) < _mean(loss[:L])
    whole, first = _mean([_mean(c[: 8 * L]) for c in curves]), _mean([_mean(c[:L]) for c in curves])
    assert glued(STEM_5, "ch5-lm-alibi-whole-8L") == pytest.approx(whole, rel=1e-9)
    assert glued(STEM_5, "ch5-lm-alibi-whole-L") == pytest.approx(first, rel=1e-9)


def test_first_rise_is_the_start_of_a_window_as_chapter_5_says():
    """Chapter 5: the first rise of 20% is the first p >= L/2 whose window [p, p + L/8) averages
    20% above [L/2, L); for the learned table that window starts inside L and reaches past it,
    which is why the table can date a rise before L."""
    L, w = 64, 8
    assert glued(STEM_5, "ch5-rise-window") == w
    starts = []
    for loss in _lm_curves("learned"):
        level = 1.2 * _mean(loss[L // 2 : L])
        starts.append(next(p for p in range(L // 2, len(loss) - w + 1)
                           if _mean(loss[p : p + w]) > level))  # fmt: skip
    assert all(p < L <= p + w - 1 for p in starts)
    assert glued(STEM_5, "ch5-lm-rise-learned") == ", ".join(map(str, starts))


def test_first_token_gets_less_than_uniform_as_chapter_8b_says():
    """Chapter 8b: uniform attention over keys 0..i gives token 0 a share 1/(i + 1), 0.021 on
    average over queries in [L/2, L); the trained models give it at most about a third of that
    (the chapter once called it "about" uniform)."""
    uniform = _mean([1 / (i + 1) for i in range(32, 64)])
    assert glued(STEM_8B, "ch8b-uniform-first") == pytest.approx(uniform, rel=1e-9)
    most, least = glued(STEM_8B, "ch8b-first-attn"), glued(STEM_8B, "ch8b-first-attn-min")
    assert least <= most < 0.4 * uniform
    assert glued(STEM_8B, "ch8b-first-share") == pytest.approx(most / uniform, rel=1e-9)


def test_keys_never_rerotated_climb_after_the_window_fills():
    """Chapter 8b, figure 8.6: keys never re-rotated cost 2.1-2.3 on [64, 72) and 3.0-3.6 on
    [80, 96) (per seed), not 2.9-3.7 right after 64; the caption's glue and the alt text's
    numbers both come from evaluations.json."""
    rows = _bugs()["sinks-not-rerotated"]["broken"]
    first, then = _band(rows, 64, 72), _band(rows, 80, 96)
    assert max(first) < min(then)
    for name, values in (("first", first), ("then", then)):
        assert glued(STEM_8B, f"ch8b-norerot-{name}-lo") == pytest.approx(min(values))
        assert glued(STEM_8B, f"ch8b-norerot-{name}-hi") == pytest.approx(max(values))
    source = json.loads((ROOT / "chapters" / f"{STEM_8B}.ipynb").read_text(encoding="utf-8"))
    alt = next(line for cell in source["cells"] for line in cell["source"]
               if line.startswith(":alt:") and "never re-rotated" in line)  # fmt: skip
    later = [_mean(r[p : p + 8]) for r in rows for p in range(96, 512, 8)]
    for low, high in ((first, first), (then, then), (later, later)):
        assert f"between {min(low):.1f} and {max(high):.1f}" in alt.replace("about ", "")


@pytest.mark.parametrize("grid", [(1, 1, 6), (1, 2, 3)])
def test_mrope_delta_of_one_image_as_chapter_8b_says(grid):
    """Chapter 8b: text after an image resumes at its largest id plus one, so an image of
    t x h x w patches adds max(t, h, w) - t h w to rope_deltas: 0 for a 1 x 1 x 6 strip (the
    chapter once said negative for any image larger than one patch), -3 for 1 x 2 x 3."""
    t, h, w = grid
    name = "ch8b-mrope-delta-strip" if grid == (1, 1, 6) else "ch8b-mrope-delta-grid"
    assert glued(STEM_8B, name) == max(t, h, w) - t * h * w


def test_wrong_base_numbers_name_their_samples_as_chapter_8b_says():
    """Chapter 8b: the box's 500,000-read-at-10,000 numbers come from the bug table's windows of
    8L, the section's from the probe over every whole window of L; they differ, and each is
    what its file holds."""
    saved, L = json.loads((DATA / "evaluations.json").read_text(encoding="utf-8")), 64
    excerpt = (DATA / "pygments_heldout.bin").stat().st_size
    assert glued(STEM_8B, "ch8b-probe-windows") == (excerpt - 1) // L
    assert glued(STEM_8B, "ch8b-bug-windows") == saved["settings"]["bug_windows"] == 128
    table = _mean(_band(saved["bugs"]["theta-default"]["correct"], L // 2, L))
    probe = saved["base_probe"]
    i500 = probe["bases"].index(500000.0)
    probed = _mean([row[i500] for row in probe["rope-b500000"]])
    assert glued(STEM_8B, "ch8b-theta-default-in-ok") == pytest.approx(table, rel=1e-9)
    assert glued(STEM_8B, "ch8b-probe-500k-500k") == pytest.approx(probed, rel=1e-9)
    assert abs(table - probed) > 0.1
