"""posenc_core.book.instruments.caches: positions in a KV cache that evicts keys."""

import pytest
import torch

from posenc_core.book.instruments import caches
from posenc_core.book.studies import corpus, heldout
from posenc_core.book.studies import lm_study as ls


@pytest.fixture(scope="module")
def rope():
    return ls.load_lm("rope", 0)


@pytest.fixture(scope="module")
def tokens():
    return heldout.windows(corpus.heldout_excerpt(), 24, max_windows=2)[:, :-1]


@pytest.mark.parametrize("rule", caches.RULES)
def test_a_cache_that_evicts_nothing_is_the_model_itself(rope, tokens, rule):
    with torch.no_grad():
        plain = rope(tokens)
    for sinks in (0, 3):
        got = caches.window_forward(rope, tokens, size=24, sinks=sinks, rule=rule)
        torch.testing.assert_close(got, plain, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rule", caches.RULES)
@pytest.mark.parametrize("size, sinks", [(8, 0), (8, 3), (5, 1)])
def test_one_pass_equals_the_explicit_rolling_cache(rope, tokens, rule, size, sinks):
    """The one-pass emulation against a cache that evicts and rotates token by token."""
    fast = caches.window_forward(rope, tokens, size=size, sinks=sinks, rule=rule)
    slow = caches.rolling_decode(rope, tokens, size=size, sinks=sinks, rule=rule)
    torch.testing.assert_close(fast, slow, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        plain = rope(tokens)
    torch.testing.assert_close(fast[:, :size], plain[:, :size], rtol=1e-4, atol=1e-4)
    assert (fast[:, size:] - plain[:, size:]).abs().max() > 1e-2  # eviction changes the rest


def test_the_rules_differ_only_in_where_the_sinks_sit(rope, tokens):
    text0 = caches.window_forward(rope, tokens, size=8, rule="text")
    cache0 = caches.window_forward(rope, tokens, size=8, rule="cache")
    assert torch.equal(text0, cache0)  # no sinks: recent keys have the same offsets either way
    text = caches.window_forward(rope, tokens, size=8, sinks=2, rule="text")
    cache = caches.window_forward(rope, tokens, size=8, sinks=2, rule="cache")
    assert torch.equal(text[:, :8], cache[:, :8])  # nothing evicted yet
    assert (text[:, 8:] - cache[:, 8:]).abs().max() > 1e-3


def test_visible_keys_by_counting():
    keep = caches.visible_keys(12, 5, 2)
    for i in range(12):
        row = [j for j in range(12) if keep[i, j]]
        expected = list(range(i + 1)) if i < 5 else [0, 1, *range(i - 2, i + 1)]
        assert row == expected, i


def test_bad_arguments_name_what_is_wrong(rope, tokens):
    with pytest.raises(ValueError, match="sinks must be smaller than size"):
        caches.window_forward(rope, tokens, size=4, sinks=4)
    with pytest.raises(ValueError, match="size must be a positive integer"):
        caches.rolling_decode(rope, tokens, size=0)
    with pytest.raises(ValueError, match="rule"):
        caches.window_forward(rope, tokens, size=4, rule="slots")
    with pytest.raises(TypeError, match="RoPE ByteLM, got 'alibi'"):
        caches.window_forward(ls.load_lm("alibi", 0), tokens, size=4)
    with pytest.raises(ValueError, match="int64"):
        caches.window_forward(rope, tokens.float(), size=4)


def test_keys_never_rerotated_lose_their_order_once_the_cache_is_full(rope, tokens):
    """Under "inserted" every key written to the last slot meets the query at offset 0, so the
    order of those keys cannot matter: swapping two of them leaves the last logits alone."""
    size = 6
    ins = caches.window_forward(rope, tokens, size=size, sinks=1, rule="inserted")
    ok = caches.window_forward(rope, tokens, size=size, sinks=1, rule="cache")
    torch.testing.assert_close(ins[:, :size], ok[:, :size], rtol=1e-4, atol=1e-4)
    assert (ins[:, size:] - ok[:, size:]).abs().max() > 1e-2
    # the last query sees the sink and keys 19..23; keys 20 and 21 were written to the last
    # slot, so exchanging their tokens changes nothing at the last position but their own
    swapped = tokens.clone()
    swapped[:, [20, 21]] = tokens[:, [21, 20]]
    one = caches.window_forward(rope, swapped, size=size, sinks=1, rule="inserted")
    other = caches.window_forward(rope, swapped, size=size, sinks=1, rule="cache")
    assert (one[:, -1] - ins[:, -1]).abs().max() < (other[:, -1] - ok[:, -1]).abs().max()


@pytest.mark.parametrize("chunk", [1, 5, 8, 24, 40])
def test_chunked_prefill_is_the_full_pass_and_restarting_is_positions_mod_chunk(
    rope, tokens, chunk
):
    with torch.no_grad():
        plain = rope(tokens)
        emulated = rope(tokens, positions=torch.arange(tokens.shape[1]) % chunk)
    torch.testing.assert_close(caches.chunked_prefill(rope, tokens, chunk=chunk), plain,
                               rtol=1e-4, atol=1e-4)  # fmt: skip
    wrong = caches.chunked_prefill(rope, tokens, chunk=chunk, restart=True)
    torch.testing.assert_close(wrong, emulated, rtol=1e-4, atol=1e-4)
    if chunk < tokens.shape[1]:
        assert (wrong[:, chunk:] - plain[:, chunk:]).abs().max() > 1e-2
    torch.testing.assert_close(wrong[:, :chunk], plain[:, :chunk], rtol=1e-4, atol=1e-4)


def test_rejected_drafts_by_counting():
    t = torch.arange(10)[None].repeat(2, 1) + 100  # (2, 10): tokens 100 .. 109
    cached, real = caches.with_rejected_drafts(t, accepted=4, rejected=2)
    # rounds: 100-103, drafts 105 106, 104-107, drafts 109 109 (clamped), 108 109
    assert cached[0].tolist() == [100, 101, 102, 103, 105, 106, 104, 105, 106, 107, 109, 109,
                                  108, 109]  # fmt: skip
    assert real.tolist() == [0, 1, 2, 3, 6, 7, 8, 9, 12, 13]
    assert torch.equal(cached[:, real], t)
    same, idx = caches.with_rejected_drafts(t, accepted=3, rejected=0)
    assert torch.equal(same, t) and idx.tolist() == list(range(10))
    with pytest.raises(ValueError, match="accepted"):
        caches.with_rejected_drafts(t, accepted=0, rejected=1)
    with pytest.raises(ValueError, match="chunk"):
        caches.chunked_prefill(ls.load_lm("rope", 0), t, chunk=0)


def test_rejected_drafts_refuses_what_no_decoder_does():
    """More tokens accepted per round than the text holds, tokens that are not int64 (b, s):
    refused with the argument, the value and what is allowed."""
    t = torch.arange(10)[None] + 100  # (1, 10)
    with pytest.raises(ValueError, match=r"accepted must be an integer in 1\.\.10 .*got 11"):
        caches.with_rejected_drafts(t, accepted=11, rejected=1)
    with pytest.raises(ValueError, match=r"tokens must be int64 of shape \(b, s\).*float32"):
        caches.with_rejected_drafts(t.float(), accepted=2, rejected=1)
    with pytest.raises(ValueError, match=r"tokens must be int64 of shape \(b, s\).*\(1, 1, 10\)"):
        caches.with_rejected_drafts(t[None], accepted=2, rejected=1)
    with pytest.raises(ValueError, match=r"tokens must hold at least one token.*\(1, 0\)"):
        caches.with_rejected_drafts(t[:, :0], accepted=1, rejected=1)
    with pytest.raises(ValueError, match="rejected must be a non-negative integer, got -1"):
        caches.with_rejected_drafts(t, accepted=2, rejected=-1)
    cached, real = caches.with_rejected_drafts(t, accepted=10, rejected=3)  # one round: all
    assert torch.equal(cached, t) and real.tolist() == list(range(10))
