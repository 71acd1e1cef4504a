"""Self-attention is permutation-equivariant without positions and without a causal mask,
and stops being so with either (Vaswani et al. 2017, Eq. 1; chapter 1)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc_core as pc

D, S = 16, 7


def weights(d_head=8):
    return [torch.randn(D, d_head, dtype=torch.float64) / math.sqrt(D) for _ in range(3)]


def manual_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d)) v written out with explicit loops over rows, in float64."""
    out = torch.empty(q.shape[0], v.shape[1], dtype=torch.float64)
    for i in range(q.shape[0]):
        scores = [float(q[i] @ k[j]) / math.sqrt(q.shape[1]) + (0.0 if mask is None else float(mask[i, j])) for j in range(k.shape[0])]
        top = max(scores)
        e = [math.exp(s - top) for s in scores]
        w = torch.tensor([x / sum(e) for x in e], dtype=torch.float64)
        out[i] = w @ v
    return out


@settings(max_examples=25)
@given(perm=st.permutations(list(range(S))))
def test_permuting_inputs_permutes_outputs(perm):
    x = torch.randn(S, D, dtype=torch.float64)
    wq, wk, wv = weights()
    perm = torch.tensor(perm)
    out = pc.self_attention(x, wq, wk, wv)
    torch.testing.assert_close(pc.self_attention(x[perm], wq, wk, wv), out[perm])


def sensitivity(fn, x, perm=None):
    """Largest change between fn(x[perm]) and fn(x)[perm] (default: swap the first two tokens)."""
    if perm is None:
        perm = torch.arange(x.shape[0])
        perm[:2] = torch.tensor([1, 0])
    return (fn(x[perm]) - fn(x)[perm]).abs().max().item()


def test_causal_mask_or_any_positional_scheme_breaks_equivariance():
    x = torch.randn(S, D, dtype=torch.float64)
    wq, wk, wv = weights()
    plain = lambda t: pc.self_attention(t, wq, wk, wv)
    assert sensitivity(plain, x) < 1e-12
    assert sensitivity(lambda t: pc.self_attention(t, wq, wk, wv, causal=True), x) > 1e-3
    pe = pc.sinusoidal_table(S, D, dtype=torch.float64)
    assert sensitivity(lambda t: plain(t + pe), x) > 1e-3
    learned = pc.LearnedPositionalEmbedding(S, D).double()
    with torch.no_grad():
        assert sensitivity(lambda t: plain(learned(t)), x) > 1e-3
    cos, sin = pc.rope_cos_sin(torch.arange(S), 8, dtype=torch.float64)

    def rope_attn(t):
        q, k = pc.apply_rope(t @ wq, cos, sin), pc.apply_rope(t @ wk, cos, sin)
        return pc.attention(q, k, t @ wv)

    assert sensitivity(rope_attn, x) > 1e-3
    alibi = pc.alibi_bias(1, S, S, causal=False, dtype=torch.float64)[0]
    assert sensitivity(lambda t: pc.self_attention(t, wq, wk, wv, bias=alibi), x) > 1e-3


def test_bidirectional_alibi_cannot_tell_a_sequence_from_its_reverse():
    """-m|i-j| is unchanged when both i and j are reflected, so reversing the input just
    reverses the output: a symmetric relative bias sees distance but not direction."""
    x = torch.randn(S, D, dtype=torch.float64)
    wq, wk, wv = weights()
    rev = torch.arange(S - 1, -1, -1)
    alibi = pc.alibi_bias(1, S, S, causal=False, dtype=torch.float64)[0]
    assert sensitivity(lambda t: pc.self_attention(t, wq, wk, wv, bias=alibi), x, rev) < 1e-12
    pe = pc.sinusoidal_table(S, D, dtype=torch.float64)
    assert sensitivity(lambda t: pc.self_attention(t + pe, wq, wk, wv), x, rev) > 1e-3


def test_matches_explicit_softmax_loops():
    x = torch.randn(S, D, dtype=torch.float64)
    wq, wk, wv = weights()
    q, k, v = x @ wq, x @ wk, x @ wv
    torch.testing.assert_close(pc.attention(q, k, v), manual_attention(q, k, v))
    causal = torch.zeros(S, S, dtype=torch.float64).masked_fill(torch.ones(S, S).triu(1).bool(), float("-inf"))
    torch.testing.assert_close(pc.attention(q, k, v, causal=True), manual_attention(q, k, v, causal))
    bias = torch.randn(S, S, dtype=torch.float64)
    torch.testing.assert_close(pc.attention(q, k, v, bias=bias), manual_attention(q, k, v, bias))
    torch.testing.assert_close(pc.attention(q, k, v, bias=bias, causal=True), manual_attention(q, k, v, bias + causal))


def test_weights_path_equals_fused_path_and_rows_sum_to_one():
    q, k, v = (torch.randn(2, 3, S, 8) for _ in range(3))
    bias = pc.alibi_bias(3, S, S)
    for kwargs in ({}, {"causal": True}, {"bias": bias}, {"bias": bias, "causal": True}):
        out, w = pc.attention(q, k, v, return_weights=True, **kwargs)
        torch.testing.assert_close(out, pc.attention(q, k, v, **kwargs), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, S))


def test_decoding_queries_are_the_last_rows():
    q, k, v = (torch.randn(4, S, 8) for _ in range(3))
    full = pc.attention(q, k, v, causal=True)
    torch.testing.assert_close(pc.attention(q[:, -2:], k, v, causal=True), full[:, -2:], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("scheme", ["none", "rope", "alibi"])
def test_multi_head_module(scheme):
    rope = pc.RotaryEmbedding(8) if scheme == "rope" else None
    mha = pc.MultiHeadSelfAttention(32, 4, rope=rope, alibi=scheme == "alibi")
    x = torch.randn(2, 6, 32)
    y, w = mha(x, causal=True, return_weights=True)
    assert y.shape == (2, 6, 32) and w.shape == (2, 4, 6, 6)
    assert torch.all(w.triu(1) == 0)
    torch.testing.assert_close(mha(x, causal=True), y, atol=1e-5, rtol=1e-5)
    y.sum().backward()
    assert mha.qkv.weight.grad is not None and torch.isfinite(mha.qkv.weight.grad).all()


def test_multi_head_without_positions_is_equivariant():
    mha = pc.MultiHeadSelfAttention(32, 4).double()
    x = torch.randn(1, 6, 32, dtype=torch.float64)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    with torch.no_grad():
        torch.testing.assert_close(mha(x[:, perm]), mha(x)[:, perm])


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: pc.attention(torch.zeros(3, 4), torch.zeros(3, 5), torch.zeros(3, 4)), ValueError, "q and k.*last dimension"),
        (lambda: pc.attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(2, 4)), ValueError, "k and v.*sequence"),
        (lambda: pc.attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), bias=torch.zeros(2, 2)), ValueError, r"bias.*\(2, 2\).*\(3, 3\)"),
        (lambda: pc.attention(torch.zeros(5, 4), torch.zeros(3, 4), torch.zeros(3, 4), causal=True), ValueError, "s_q=5, s_k=3"),
        (lambda: pc.attention(torch.zeros(3, 4, dtype=torch.long), torch.zeros(3, 4), torch.zeros(3, 4)), TypeError, "q.*int64"),
        (lambda: pc.attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), causal=1), TypeError, "causal.*int"),
        (lambda: pc.self_attention(torch.zeros(3, 4), torch.zeros(5, 2), torch.zeros(4, 2), torch.zeros(4, 2)), ValueError, r"w_q.*d_model=4.*\(5, 2\)"),
        (lambda: pc.MultiHeadSelfAttention(30, 4), ValueError, "n_heads=4.*d_model=30"),
        (lambda: pc.MultiHeadSelfAttention(32, 4, rope=pc.RotaryEmbedding(16)), ValueError, "rope.head_dim=16.*8"),
        (lambda: pc.MultiHeadSelfAttention(32, 4)(torch.zeros(2, 3, 16)), ValueError, r"x.*d_model=32.*\(2, 3, 16\)"),
    ],
)
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
