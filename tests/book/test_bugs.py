"""posenc_core.book.instruments.bugs: chapter 8's bugs, checked against independent derivations.

Each bug is checked for what it is claimed to do, by a route other than its own code: the
correct counterparts against the plain model (padding done right against the unpadded batch,
packing done right against each document alone), the cache bug against a full pass with the
positions it implies, YaRN's dropped factor against the score scale it removes, and the
relativity claims (RoPE hides a uniform shift) against the learned table, which does not.
"""

import math

import numpy as np
import pytest
import torch

from posenc_core.attention import attention
from posenc_core.book import exercises
from posenc_core.book.instruments import bugs as dbg
from posenc_core.book.models.byte_lm import ByteLM
from posenc_core.book.studies import corpus, heldout
from posenc_core.book.studies import lm_study as ls
from posenc_core.rope import RotaryEmbedding, parse_scaling, permute_qk_weight


@pytest.fixture(scope="module")
def rope():
    return ls.load_lm("rope", 0)


@pytest.fixture(scope="module")
def learned():
    return ls.load_lm("learned", 0)


@pytest.fixture(scope="module")
def partial():
    return ls.load_lm("rope", 0, rotary_dim=8)


@pytest.fixture(scope="module")
def text():
    return heldout.windows(corpus.heldout_excerpt(), 512, max_windows=3)[:, :-1]


def gap(a, b):
    return float((a - b).detach().abs().max())


@torch.no_grad()
def test_the_instruments_options_reproduce_the_trained_pass(rope, learned, text):
    """ByteLM.forward is the one forward pass; its options, given what the model does anyway
    (its own rotation, its own attention, the default positions), change nothing, bit for bit."""
    plain = rope(text)
    assert torch.equal(rope(text, rotate=rope.rope), plain)
    assert torch.equal(rope(text, positions=torch.arange(text.shape[1])), plain)

    def attend(layer, q, k, v):
        return attention(*rope.rope(q, k), v, causal=True)

    assert torch.equal(rope(text, attend=attend), plain)
    t = text[:, :64]
    assert torch.equal(learned(t, positions=torch.arange(64)), learned(t))


@torch.no_grad()
def test_cached_decoding_matches_the_full_pass(rope, text):
    t = text[:, :160]
    assert gap(dbg.cached_forward(rope, t, prefill=32), rope(t)) < 1e-4
    assert gap(dbg.cached_forward(rope, t, prefill=160), rope(t)) < 1e-4


@torch.no_grad()
def test_off_by_one_cache_is_a_full_pass_that_skips_position_p(rope, text):
    """Every decoded token (and its cached key) sits one position too far: the same as a full
    pass with positions 0 .. p-1, p+1, p+2, ...; the prompt's logits are untouched."""
    t, p = text[:, :128], 32
    bad = dbg.cached_forward(rope, t, prefill=p, step=dbg.off_by_one_step)
    skip = torch.cat([torch.arange(p), torch.arange(p, 128) + 1])
    assert gap(bad, rope(t, positions=skip)) < 1e-4
    assert gap(bad[:, :p], rope(t[:, :p])) < 1e-5
    assert gap(bad[:, p:], rope(t)[:, p:]) > 0.1


@torch.no_grad()
def test_chapter_8s_broken_decode_step_differs_and_the_probe_names_both_bugs(rope, text):
    def step(rope_, cache, q, k, v):  # chapter 8's exercise: key cached unrotated, position late
        cache["k"] = torch.cat([cache["k"], k], dim=-2)
        cache["v"] = torch.cat([cache["v"], v], dim=-2)
        q, _ = rope_(q, k, cache["k"].shape[-2])
        return q

    t = text[:, :96]
    assert gap(dbg.cached_forward(rope, t, prefill=32, step=step), rope(t)) > 0.1
    fb = exercises.check_decode_step(step)
    assert not fb
    assert "query is rotated at position n + 1" in fb.message
    assert "cached key is not rotated" in fb.message
    assert exercises.check_decode_step(dbg.correct_step)


@torch.no_grad()
def test_one_decoded_token_already_meets_its_own_unrotated_key(rope, text):
    """Chapter 8's decode-step exercise: the cache takes the new key before the new query
    attends, so a key cached unrotated (at the right position) shows in the first decoded
    token's logits; the correct step does not."""

    def key_unrotated(rope_, cache, q, k, v):
        q, _ = rope_(q, k, cache["k"].shape[-2])
        cache["k"] = torch.cat([cache["k"], k], dim=-2)
        cache["v"] = torch.cat([cache["v"], v], dim=-2)
        return q

    t = text[:, :9]
    full = rope(t)
    bad = dbg.cached_forward(rope, t, prefill=8, step=key_unrotated)
    good = dbg.cached_forward(rope, t, prefill=8)
    assert gap(bad[:, 8], full[:, 8]) > 0.5
    assert gap(good[:, 8], full[:, 8]) < 1e-4
    assert gap(bad[:, :8], full[:, :8]) < 1e-5  # the prompt is untouched


def test_a_step_that_does_not_append_is_refused(rope, text):
    def lazy(rope_, cache, q, k, v):
        return rope_(q, k, cache["k"].shape[-2])[0]

    with pytest.raises(ValueError, match="append exactly one key"):
        dbg.cached_forward(rope, text[:, :40], prefill=32, step=lazy)


@torch.no_grad()
def test_interleaved_checkpoint_is_the_same_model_in_the_other_layout(rope, text):
    state = dbg.interleaved_checkpoint(rope)
    m = ByteLM("rope", d_model=64, n_layers=2, n_heads=4, max_len=512)
    m.rope.layout = "interleaved"
    m.load_state_dict(state)
    assert gap(m(text), rope(text)) < 1e-4
    # loaded into half-split code without conversion: q.k at offset 0 is a dot product of
    # vectors permuted alike, so the first position (which sees only itself) is unchanged
    wrong = dbg.BUGS["layout"].broken(rope, text)
    assert gap(wrong[:, 0], rope(text)[:, 0]) < 1e-4
    assert gap(wrong[:, 1:], rope(text)[:, 1:]) > 1.0


@torch.no_grad()
def test_conversion_checker_accepts_the_fix_and_names_the_biases(rope):
    def fixed(state, n_heads):
        out = dict(state)
        for name, t in state.items():
            if name.endswith(("attn.qkv.weight", "attn.qkv.bias")):
                q, k, v = t.chunk(3)
                q, k = (permute_qk_weight(x, n_heads, to="half") for x in (q, k))
                out[name] = torch.cat([q, k, v])
        return out

    assert exercises.check_checkpoint_conversion(fixed)
    fb = exercises.check_checkpoint_conversion(dbg.convert_checkpoint_broken)
    assert not fb and "query bias rows are still in interleaved order" in fb.message
    assert "weight" not in fb.message.split("problem(s):")[1].split("bias")[0]

    def values_too(state, n_heads):
        out = fixed(state, n_heads)
        for name in out:
            if name.endswith("attn.qkv.weight"):
                q, k, v = out[name].chunk(3)
                out[name] = torch.cat([q, k, permute_qk_weight(v, n_heads, to="half")])
        return out

    assert "value rows were permuted" in exercises.check_checkpoint_conversion(values_too).message
    assert "raised KeyError" in exercises.check_checkpoint_conversion(lambda s, n: s["x"]).message


@torch.no_grad()
def test_partial_rotary_bugs_touch_what_they_claim(partial, text):
    assert partial.rope.rotary_dim == 8
    plain = partial(text)
    for key in ("partial-denominator", "partial-slice"):
        assert gap(dbg.BUGS[key].broken(partial, text), plain) > 0.1, key
    # the slice bug rotates dims 8..15 and leaves 0..7 alone
    x = torch.randn(1, 1, 5, 16, dtype=torch.float32)
    inv = 10000.0 ** -(torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    rot = dbg._rotate_with(*dbg._rotation_tables(inv, torch.arange(5)), first=8)
    q, _ = rot(x, x, torch.arange(5))
    assert torch.equal(q[..., :8], x[..., :8])
    ref, _ = RotaryEmbedding(8)(x[..., 8:], x[..., 8:])
    assert gap(q[..., 8:], ref) < 1e-6
    # with the right denominator the same path reproduces the model's own rotation
    right = dbg._rotate_with(*dbg._rotation_tables(inv, torch.arange(512)))
    assert gap(partial(text, rotate=right), plain) < 1e-4


def test_bf16_angles_round_positions_past_256():
    """bfloat16 has 8 significant bits: 257 rounds to 256 (ties to even), 258 stays."""
    cos, sin = dbg.bf16_angle_tables(16, 300)
    assert float(cos[257, 0]) == pytest.approx(math.cos(256.0), abs=1e-6)
    assert float(cos[258, 0]) == pytest.approx(math.cos(258.0), abs=1e-6)
    assert float(cos[255, 0]) == pytest.approx(math.cos(255.0), abs=1e-6)
    exact = torch.arange(300, dtype=torch.float64)[:, None] * (
        10000.0 ** -(torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    )
    err = (cos[:, :8].double() - exact.cos()).abs().max(1).values
    assert err[:8].max() < 0.02 and err[256:].max() > 0.1


@torch.no_grad()
def test_padding_done_right_is_the_unpadded_batch(rope, learned, text):
    ok = dbg.BUGS["padding-positions"].correct
    assert gap(ok(rope, text), rope(text)) < 1e-4
    assert gap(ok(learned, text[:, :64]), learned(text[:, :64])) < 1e-4
    # RoPE sees only offsets: positions shifted by the pads change nothing beyond rounding;
    # the learned table reads other rows
    assert gap(dbg.BUGS["padding-positions"].broken(rope, text), rope(text)) < 1e-4
    lp = dbg.BUGS["learned-padding-positions"].broken(learned, text[:, :64])
    assert gap(lp, learned(text[:, :64])) > 0.5
    # rows with no pads are untouched by either bug
    assert gap(lp[0], learned(text[:1, :64])[0]) < 1e-5
    assert gap(dbg.BUGS["padding-unmasked"].broken(rope, text), rope(text)) > 0.5


@torch.no_grad()
def test_packing_done_right_is_each_document_alone(rope, learned, text):
    ok = dbg.BUGS["packing-no-mask"].correct
    for m in (rope, learned):
        packed = ok(m, text)
        for j in range(0, 512, 64):
            assert gap(packed[:, j : j + 64], m(text[:, j : j + 64])) < 1e-4
    assert gap(dbg.BUGS["packing-no-restart"].broken(rope, text), ok(rope, text)) < 1e-4
    no_mask = dbg.BUGS["packing-no-mask"].broken(rope, text)
    assert gap(no_mask[:, :64], ok(rope, text)[:, :64]) < 1e-5  # the first document is fine
    assert gap(no_mask[:, 64:], ok(rope, text)[:, 64:]) > 0.5
    lnr = dbg.BUGS["learned-packing-no-restart"].broken(learned, text)
    assert gap(lnr[:, 64:], ok(learned, text)[:, 64:]) > 0.5


@torch.no_grad()
def test_yarn_factor_bugs_are_score_temperatures(rope, text):
    m = parse_scaling(dbg.YARN).attention_scaling
    assert m == pytest.approx(0.1 * math.log(8) + 1)
    yarn = RotaryEmbedding(16, scaling=dbg.YARN)
    ok = dbg.BUGS["yarn-dropped"].correct(rope, text)
    dropped = dbg.BUGS["yarn-dropped"].broken(rope, text)
    twice = dbg.BUGS["yarn-twice"].broken(rope, text)
    assert gap(rope(text, rotate=yarn), ok) < 1e-5
    # cos and sin carry m, so the scores carry m^2: dropping it is scores / m^2
    assert gap(dropped, rope(text, rotate=yarn, score_scale=1 / m**2)) < 1e-4
    assert gap(twice, rope(text, rotate=yarn, score_scale=m**2)) < 1e-4


@torch.no_grad()
def test_ignored_config_is_plain_rope(rope, text):
    assert dbg.rope_scaling_from_config_broken(dbg.CONFIG) is None
    assert gap(dbg.BUGS["config-ignored"].broken(rope, text), rope(text)) < 1e-6
    fb = exercises.check_scaling_loader(dbg.rope_scaling_from_config_broken)
    assert not fb and "4 of 8" in fb.message and "instead of raising ValueError" in fb.message


def test_sticky_dynamic_ntk_keeps_the_longest_base():
    d = 16
    dyn = dbg.StickyDynamicNTK(d, factor=8.0, original_max_position_embeddings=64)

    def formula(length):  # Hugging Face's dynamic NTK base, written out
        b = 10000.0 * ((8.0 * length / 64) - 7.0) ** (d / (d - 2))
        return b ** -(np.arange(0, d, 2) / d)

    np.testing.assert_allclose(dyn.inv_freq(256).numpy(), formula(256), rtol=1e-12)
    dyn.inv_freq(512)
    np.testing.assert_allclose(dyn.inv_freq(256).numpy(), formula(512), rtol=1e-12)
    np.testing.assert_allclose(dyn.inv_freq(32).numpy(), 10000.0 ** -(np.arange(0, d, 2) / d))
    np.testing.assert_allclose(dyn.inv_freq(256).numpy(), formula(256), rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"factor": 0.0}, ValueError, r"factor must be a finite number >= 1 .*got 0\.0"),
        ({"factor": -2.0}, ValueError, r"factor must be a finite number >= 1 .*got -2\.0"),
        ({"factor": math.inf}, ValueError, "factor must be finite, got inf"),
        ({"factor": "8"}, TypeError, "factor must be a real number, got str '8'"),
        ({"head_dim": 15}, ValueError, "head_dim must be a positive even integer.*got 15"),
        ({"head_dim": 0}, ValueError, "head_dim must be a positive integer, got 0"),
        (
            {"original_max_position_embeddings": 0},
            ValueError,
            "original_max_position_embeddings must be a positive integer, got 0",
        ),
        (
            {"original_max_position_embeddings": 64.0},
            TypeError,
            "original_max_position_embeddings must be a positive integer, got float 64.0",
        ),
        ({"base": 0.0}, ValueError, "base must be a finite number greater than 1, got 0.0"),
        ({"base": math.nan}, ValueError, "base must be finite, got nan"),
    ],
)
def test_sticky_dynamic_ntk_refuses_bad_arguments(kwargs, error, message):
    """Checked as the core checks a RoPE scaling (a factor >= 1, as RopeScaling's)."""
    args = {"head_dim": 16, "factor": 8.0, "original_max_position_embeddings": 64, **kwargs}
    with pytest.raises(error, match=message):
        dbg.StickyDynamicNTK(args.pop("head_dim"), **args)


@torch.no_grad()
def test_a_uniform_shift_is_hidden_by_rope_and_not_by_a_learned_table(rope, learned, text):
    assert gap(dbg.BUGS["rope-off-by-one"].broken(rope, text), rope(text)) < 1e-4
    t = text[:, :64]
    assert gap(dbg.BUGS["learned-off-by-one"].broken(learned, t), learned(t)) > 0.5


def test_every_bug_cites_reports_and_names_a_model():
    labels = [bug.label for bug in dbg.BUGS.values()]
    assert len(set(labels)) == len(labels) and max(map(len, labels)) <= 16
    for key, bug in dbg.BUGS.items():
        assert bug.key == key and bug.model in ("rope", "rope-r8", "rope-b500000", "learned")
        assert all("/" in r and "#" in r for r in bug.reports)
        if dbg.PARTS[key] == 2 and key != "theta-converse":  # 8b's one without a report
            assert bug.reports, key
    assert list(dbg.PARTS) == list(dbg.BUGS)
    assert [k for k, p in dbg.PARTS.items() if p == 2][0] == "window-no-sinks"
    assert sorted(set(dbg.PARTS.values())) == [1, 2] and sum(dbg.PARTS.values()) == 18 + 2 * 10


def test_longrope_switch_runs_use_the_factors_they_claim(rope, text):
    t = text[:, :256]
    l0 = dbg.LONGROPE["original_max_position_embeddings"]
    with torch.no_grad():
        plain = rope(t)
        long_only = rope(t, rotate=RotaryEmbedding(16, scaling=dbg.LONGROPE))  # s > L0
    bug = dbg.BUGS["longrope-stale-cache"]
    ok = bug.correct(rope, t)
    assert gap(ok[:, :l0], plain[:, :l0]) < 1e-4  # short factors are 1: the model itself
    assert gap(ok[:, l0:], long_only[:, l0:]) < 1e-4  # after the crossover: all long
    stale = bug.broken(rope, t)
    assert gap(stale[:, :l0], plain[:, :l0]) < 1e-4
    assert gap(stale[:, l0:], ok[:, l0:]) > 0.1  # cached short keys meet long queries
    always = dbg.BUGS["longrope-long-always"].broken(rope, t)
    assert gap(always, long_only) < 1e-4 and gap(always[:, :l0], plain[:, :l0]) > 0.1
    assert rope.rope_scaling.rope_type == "default"  # the runs worked on copies


def test_base_chunk_and_draft_bugs_touch_what_they_claim(rope, text):
    t = text[:, :128]
    with torch.no_grad():
        plain = rope(t)
    assert gap(dbg._based(10000.0)(rope, t), plain) < 1e-4  # the model's own base
    assert gap(dbg.BUGS["theta-converse"].broken(rope, t), plain) > 0.1
    chunk = dbg.BUGS["chunk-restart"].broken(rope, t)
    assert gap(chunk[:, : dbg.CHUNK], plain[:, : dbg.CHUNK]) < 1e-4
    assert gap(chunk[:, dbg.CHUNK :], plain[:, dbg.CHUNK :]) > 0.1
    kept = dbg.BUGS["drafts-kept"].broken(rope, t)
    k = dbg.DRAFTS[0]
    assert gap(kept[:, :k], plain[:, :k]) < 1e-4 and gap(kept[:, k:], plain[:, k:]) > 0.1


def test_the_position_lag_follows_a_counter_that_advances_by_one_per_round(rope, text):
    """An independent simulation of transformers#30042's counter against the bug's ids."""
    k, s = dbg.DRAFTS[0], 40
    counter, positions = 0, []
    for start in range(0, s, k):  # one round verifies k tokens from the counter on
        positions += [counter + i for i in range(min(k, s - start))]
        counter += 1  # the bug: one step per round, not k
    seen = {}

    def record(q, kk, pos):
        seen["pos"] = pos.clone()
        return rope.rope(q, kk, pos)

    t = text[:, :s]
    with torch.no_grad():
        lagged = dbg.BUGS["draft-position-lag"].broken(rope, t)
        simulated = rope(t, positions=torch.tensor(positions), rotate=record)
    assert seen["pos"].tolist() == positions
    torch.testing.assert_close(lagged, simulated)


def test_bug_curves_share_baselines_and_have_seed_rows(rope, learned):
    data = corpus.heldout_excerpt()[:8000]
    out = dbg.bug_curves(
        ["layout", "bf16-angles", "learned-off-by-one"],
        {"rope": [rope, rope], "learned": [learned]},
        data,
        max_windows=4,
    )
    assert out["layout"]["broken"].shape == (2, 512)
    assert out["learned-off-by-one"]["correct"].shape == (1, 64)
    assert out["layout"]["correct"] is out["bf16-angles"]["correct"]
    np.testing.assert_allclose(
        out["layout"]["correct"][0],
        ls.per_position_loss(rope, data, 512, max_windows=4),
        rtol=1e-6,
    )
    lay = out["layout"]
    assert lay["broken"][:, 1:64].mean() > lay["correct"][:, 1:64].mean() + 0.3
    with pytest.raises(ValueError, match="runs on model 'learned'"):
        dbg.bug_curves(["learned-off-by-one"], {"rope": [rope]}, data)


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda m, t: m(t.float()), ValueError, "int64"),
        (lambda m, t: m(t, positions=torch.arange(5)), ValueError, "shape"),
        (lambda m, t: m(t, positions=torch.arange(512.0)), TypeError, "integers"),
        (lambda m, t: m(t, positions=torch.arange(512) - 1), ValueError, ">= 0"),
        (lambda m, t: m(t, rotate=3), TypeError, "rotate"),
        (lambda m, t: m(t, attend=print, score_scale=2.0), ValueError, "attend replaces"),
        (lambda m, t: m(t, attend=3), TypeError, "attend"),
        (lambda m, t: dbg.cached_forward("model", t), TypeError, "ByteLM"),
        (lambda m, t: dbg.cached_forward(m, t, prefill=0), ValueError, "prefill"),
        (lambda m, t: heldout.position_loss(lambda x: x, corpus.heldout_excerpt(), 64), ValueError,
         r"\(b, s, 256\)"),
        (lambda m, t: heldout.windows(torch.arange(10), 64), ValueError, "no window"),
    ],
)  # fmt: skip
def test_bad_input_names_the_argument(rope, text, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(rope, text)


def test_learned_positions_past_the_table_are_refused(learned, text):
    with pytest.raises(ValueError, match=r"learned table has rows only for positions 0\.\.511"):
        learned(text, positions=torch.arange(512) + 1)
    with pytest.raises(ValueError, match="needs a RoPE model"):
        dbg.cached_forward(learned, text)
