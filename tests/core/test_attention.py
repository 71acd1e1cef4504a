"""Self-attention is permutation-equivariant without positions and without a causal mask,
and stops being so with either (Vaswani et al. 2017, Eq. 1; chapter 1)."""

import math

import numpy as np
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
        scores = [
            float(q[i] @ k[j]) / math.sqrt(q.shape[1])
            + (0.0 if mask is None else float(mask[i, j]))
            for j in range(k.shape[0])
        ]
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

    def plain(t):
        return pc.self_attention(t, wq, wk, wv)

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
    causal = torch.zeros(S, S, dtype=torch.float64).masked_fill(
        torch.ones(S, S).triu(1).bool(), float("-inf")
    )
    torch.testing.assert_close(
        pc.attention(q, k, v, causal=True), manual_attention(q, k, v, causal)
    )
    bias = torch.randn(S, S, dtype=torch.float64)
    torch.testing.assert_close(pc.attention(q, k, v, bias=bias), manual_attention(q, k, v, bias))
    torch.testing.assert_close(
        pc.attention(q, k, v, bias=bias, causal=True), manual_attention(q, k, v, bias + causal)
    )


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
    torch.testing.assert_close(
        pc.attention(q[:, -2:], k, v, causal=True), full[:, -2:], atol=1e-6, rtol=1e-5
    )


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
        (
            lambda: pc.attention(torch.zeros(3, 4), torch.zeros(3, 5), torch.zeros(3, 4)),
            ValueError,
            "q and k.*last dimension",
        ),
        (
            lambda: pc.attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(2, 4)),
            ValueError,
            "k and v.*sequence",
        ),
        (
            lambda: pc.attention(
                torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), bias=torch.zeros(2, 2)
            ),
            ValueError,
            r"bias.*\(2, 2\).*\(3, 3\)",
        ),
        (
            lambda: pc.attention(
                torch.zeros(5, 4), torch.zeros(3, 4), torch.zeros(3, 4), causal=True
            ),
            ValueError,
            "s_q=5, s_k=3",
        ),
        (
            lambda: pc.attention(
                torch.zeros(3, 4, dtype=torch.long), torch.zeros(3, 4), torch.zeros(3, 4)
            ),
            TypeError,
            "q.*int64",
        ),
        (
            lambda: pc.attention(torch.zeros(3, 4), torch.zeros(3, 4), torch.zeros(3, 4), causal=1),
            TypeError,
            "causal.*int",
        ),
        (
            lambda: pc.self_attention(
                torch.zeros(3, 4), torch.zeros(5, 2), torch.zeros(4, 2), torch.zeros(4, 2)
            ),
            ValueError,
            r"w_q.*d_model=4.*\(5, 2\)",
        ),
        (lambda: pc.MultiHeadSelfAttention(30, 4), ValueError, "n_heads=4.*d_model=30"),
        (
            lambda: pc.MultiHeadSelfAttention(32, 4, rope=pc.RotaryEmbedding(16)),
            ValueError,
            "rope.head_dim=16.*8",
        ),
        (
            lambda: pc.MultiHeadSelfAttention(32, 4)(torch.zeros(2, 3, 16)),
            ValueError,
            r"x.*d_model=32.*\(2, 3, 16\)",
        ),
    ],
)
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def reference_attention(q, k, v, bias=None):
    """softmax(q k^T / sqrt(d) + bias) v in float64, written with broadcasting matmuls."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias.double()
    w = torch.softmax(scores, dim=-1)
    return w @ v, w


B, H, SQ, SK, DH = 2, 3, 5, 6, 8


@pytest.mark.parametrize(
    "bias_shape",
    [(SQ, SK), (H, 1, SK), (H, SQ, SK), (B, 1, 1, SK), (SK,), (1, H, SQ, 1), ()],
    ids=str,
)
def test_broadcastable_bias_matches_explicit_softmax(bias_shape):
    """A bias that broadcasts to the scores (b, h, s_q, s_k) without enlarging them is added
    to every row it reaches, on the fused path and on the weights path alike."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, SQ, DH, generator=g)
    k, v = torch.randn(B, H, SK, DH, generator=g), torch.randn(B, H, SK, DH, generator=g)
    bias = torch.randn(bias_shape, generator=g)
    ref_out, ref_w = reference_attention(q, k, v, bias)
    torch.testing.assert_close(
        pc.attention(q, k, v, bias=bias).double(), ref_out, atol=1e-5, rtol=1e-5
    )
    out, w = pc.attention(q, k, v, bias=bias, return_weights=True)
    assert out.shape == (B, H, SQ, DH) and w.shape == (B, H, SQ, SK)
    torch.testing.assert_close(out.double(), ref_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w.double(), ref_w, atol=1e-6, rtol=1e-5)
    # a float64 bias with float32 inputs is cast to the inputs' dtype
    assert pc.attention(q, k, v, bias=bias.double()).dtype == torch.float32


def test_keys_and_values_shared_across_heads_broadcast():
    """k and v of shape (b, 1, s_k, d) serve every head of q (b, h, s_q, d), as documented."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(B, H, SQ, DH, generator=g, dtype=torch.float64)
    k, v = (
        torch.randn(B, 1, SK, DH, generator=g, dtype=torch.float64),
        torch.randn(B, 1, SK, DH, generator=g, dtype=torch.float64),
    )
    bias = torch.randn(H, 1, SK, generator=g, dtype=torch.float64)
    expected = pc.attention(q, k.expand(B, H, SK, DH), v.expand(B, H, SK, DH), bias=bias)
    torch.testing.assert_close(pc.attention(q, k, v, bias=bias), expected)
    torch.testing.assert_close(pc.attention(q, k, v, bias=bias, return_weights=True)[0], expected)
    torch.testing.assert_close(expected, reference_attention(q, k, v, bias)[0])


def test_module_bias_broadcasts_to_batch_and_heads():
    mha = pc.MultiHeadSelfAttention(32, 4, alibi=True).double()
    x = torch.randn(2, 5, 32, dtype=torch.float64)
    with torch.no_grad():
        plain, w_plain = mha(x, return_weights=True)
        for shape in ((5, 5), (4, 1, 5), (2, 1, 1, 5)):
            torch.testing.assert_close(mha(x, bias=torch.zeros(shape, dtype=torch.float64)), plain)
        hide_last = torch.tensor(
            [0.0, 0, 0, 0, float("-inf")], dtype=torch.float64
        )  # (s,): a key mask
        _, w = mha(x, bias=hide_last, return_weights=True)
    assert w.shape == w_plain.shape == (2, 4, 5, 5)
    assert torch.all(w[..., -1] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 5, dtype=torch.float64))


def test_numpy_bools_are_accepted_as_flags():
    q, k, v = (torch.randn(4, 8) for _ in range(3))
    out, w = pc.attention(q, k, v, causal=np.bool_(True), return_weights=np.bool_(True))
    torch.testing.assert_close(out, pc.attention(q, k, v, causal=True))
    mha = pc.MultiHeadSelfAttention(16, 2, alibi=np.bool_(True), bias=np.bool_(False))
    assert mha.alibi is True and mha.qkv.bias is None
    assert mha(torch.randn(1, 4, 16), causal=np.bool_(True)).shape == (1, 4, 16)


def z(*shape, dtype=torch.float32, device="cpu"):
    return torch.zeros(shape, dtype=dtype, device=device)


MHA = pc.MultiHeadSelfAttention(32, 4)
MHA_ALIBI = pc.MultiHeadSelfAttention(32, 4, alibi=True)
W = z(4, 2)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        # 1. shapes of q, k, v that do not fit together
        pytest.param(
            lambda: pc.attention(z(2, 3, 4), z(5, 3, 4), z(5, 3, 4)),
            ValueError,
            r"leading.*q, k and v.*q \(2, 3, 4\), k \(5, 3, 4\), v \(5, 3, 4\)",
            id="batch-q-vs-k",
        ),
        pytest.param(
            lambda: pc.attention(z(2, 3, 4), z(2, 3, 4), z(3, 3, 4)),
            ValueError,
            r"leading.*v \(3, 3, 4\)",
            id="batch-k-vs-v",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 5), z(3, 5)),
            ValueError,
            r"q and k.*last dimension.*q \(3, 4\), k \(3, 5\)",
            id="d_h-mismatch",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(2, 4)),
            ValueError,
            r"k and v.*number of keys.*k \(3, 4\), v \(2, 4\)",
            id="keys-mismatch",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 0), z(3, 0), z(3, 4)),
            ValueError,
            r"d_h >= 1.*q \(3, 0\), k \(3, 0\)",
            id="zero-width",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(0, 4), z(0, 4)),
            ValueError,
            r"k and v.*at least one key.*k \(0, 4\), v \(0, 4\)",
            id="no-keys",
        ),
        pytest.param(
            lambda: pc.attention(z(4), z(3, 4), z(3, 4)),
            ValueError,
            r"q must have at least 2 dimensions, got shape \(4,\)",
            id="q-1d",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(4)),
            ValueError,
            r"v must have at least 2 dimensions, got shape \(4,\)",
            id="v-1d",
        ),
        pytest.param(
            lambda: pc.attention([[0.0] * 4] * 3, z(3, 4), z(3, 4)),
            TypeError,
            r"q must be a torch.Tensor, got list",
            id="q-not-tensor",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), None, z(3, 4)),
            TypeError,
            r"k must be a torch.Tensor, got NoneType",
            id="k-not-tensor",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4, device="meta"), z(3, 4)),
            ValueError,
            r"same device.*q cpu, k meta, v cpu",
            id="k-device",
        ),
        # 2. dtypes of q, k, v
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4, dtype=torch.float64), z(3, 4)),
            TypeError,
            r"same dtype.*q torch.float32, k torch.float64, v torch.float32",
            id="dtype-mismatch",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4, dtype=torch.int32)),
            TypeError,
            r"v must be a real floating-point.*int32",
            id="v-int",
        ),
        # 3. a bias that would enlarge the scores, or does not broadcast to them
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4), bias=z(2, 3, 3)),
            ValueError,
            r"bias of shape \(2, 3, 3\).*scores.*\(3, 3\)",
            id="bias-enlarges",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4), bias=z(2, 3, 3), return_weights=True),
            ValueError,
            r"bias of shape \(2, 3, 3\).*\(3, 3\)",
            id="bias-enlarges-weights",
        ),
        pytest.param(
            lambda: pc.attention(z(2, 3, 4), z(2, 5, 4), z(2, 5, 4), bias=z(5, 3)),
            ValueError,
            r"bias of shape \(5, 3\).*\(2, 3, 5\)",
            id="bias-no-broadcast",
        ),
        pytest.param(
            lambda: pc.attention(z(2, 3, 4), z(2, 5, 4), z(2, 5, 4), bias=z(3, 1)[None, None]),
            ValueError,
            r"bias of shape \(1, 1, 3, 1\).*\(2, 3, 5\)",
            id="bias-extra-dims",
        ),
        pytest.param(
            lambda: pc.self_attention(z(3, 4), W, W, W, bias=z(2, 3, 3)),
            ValueError,
            r"bias of shape \(2, 3, 3\).*\(3, 3\)",
            id="self-attention-bias",
        ),
        # 4. a user bias given to the module
        pytest.param(
            lambda: MHA_ALIBI(z(1, 3, 32), bias=z(5, 5)),
            ValueError,
            r"bias of shape \(5, 5\).*\(1, 4, 3, 3\)",
            id="module-alibi-bias",
        ),
        pytest.param(
            lambda: MHA(z(1, 3, 32), bias=z(2, 1, 3, 3)),
            ValueError,
            r"bias of shape \(2, 1, 3, 3\).*\(1, 4, 3, 3\)",
            id="module-bias-enlarges",
        ),
        pytest.param(
            lambda: MHA(z(1, 3, 32), bias=z(3, 3, dtype=torch.bool)),
            TypeError,
            r"bias.*floating-point.*torch.bool.*-inf",
            id="module-bias-bool",
        ),
        pytest.param(
            lambda: MHA(z(1, 3, 32), bias=z(3, 3, device="meta")),
            ValueError,
            r"bias.*device.*cpu.*got meta",
            id="module-bias-device",
        ),
        # 5. flags
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4), causal=1),
            TypeError,
            r"causal must be True or False, got int 1",
            id="causal-int",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4), return_weights="yes"),
            TypeError,
            r"return_weights must be True or False, got str 'yes'",
            id="return_weights-str",
        ),
        pytest.param(
            lambda: pc.self_attention(z(3, 4), W, W, W, causal=0),
            TypeError,
            r"causal must be True or False, got int 0",
            id="self-attention-causal",
        ),
        pytest.param(
            lambda: MHA(z(1, 3, 32), causal="no"),
            TypeError,
            r"causal must be True or False, got str 'no'",
            id="module-causal",
        ),
        pytest.param(
            lambda: MHA(z(1, 3, 32), return_weights=1),
            TypeError,
            r"return_weights must be True or False, got int 1",
            id="module-return_weights",
        ),
        pytest.param(
            lambda: pc.MultiHeadSelfAttention(32, 4, alibi=1),
            TypeError,
            r"alibi must be True or False, got int 1",
            id="module-alibi-flag",
        ),
        pytest.param(
            lambda: pc.MultiHeadSelfAttention(32, 4, bias="no"),
            TypeError,
            r"bias must be True or False, got str 'no'",
            id="module-bias-flag",
        ),
        # 6. bias kind and device; mismatched projections or module dtype
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4), bias=z(3, 3, dtype=torch.bool)),
            TypeError,
            r"bias is added.*floating-point.*got dtype torch.bool.*-inf",
            id="bias-bool",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4), bias=z(3, 3, dtype=torch.int64)),
            TypeError,
            r"bias must be a real floating-point.*int64",
            id="bias-int",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4), bias=[[0.0] * 3] * 3),
            TypeError,
            r"bias must be a torch.Tensor, got list",
            id="bias-not-tensor",
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4), bias=z(3, 3, device="meta")),
            ValueError,
            r"bias must be on the same device.*\(cpu\), got meta",
            id="bias-device",
        ),
        pytest.param(
            lambda: pc.self_attention(z(3, 4), z(4, 2, dtype=torch.float64), W, W),
            TypeError,
            r"w_q must have the dtype of x \(torch.float32\), got torch.float64",
            id="w_q-dtype",
        ),
        pytest.param(
            lambda: pc.self_attention(z(3, 4), W, z(4, 3), W),
            ValueError,
            r"w_q and w_k.*w_q \(4, 2\), w_k \(4, 3\)",
            id="w_q-w_k-width",
        ),
        pytest.param(
            lambda: pc.self_attention(z(3, 4), z(4, 0), z(4, 0), W),
            ValueError,
            r"w_q and w_k must have a width d_h >= 1, got w_q \(4, 0\), w_k \(4, 0\)",
            id="w_q-w_k-empty",
        ),
        pytest.param(
            lambda: MHA(z(1, 3, 32, dtype=torch.float64)),
            TypeError,
            r"x must have the dtype of the module's parameters \(torch.float32\), "
            r"got torch.float64",
            id="module-x-dtype",
        ),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@settings(max_examples=200)
@given(shapes=st.lists(st.lists(st.integers(0, 3), max_size=4).map(tuple), min_size=1, max_size=3))
def test_shape_broadcast_helper_agrees_with_torch(shapes):
    """The checks use a plain-Python broadcast (torch.broadcast_shapes is slow); same answers."""
    from posenc_core.attention import _broadcast

    try:
        expected = tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        expected = None
    assert _broadcast(*shapes) == expected


def counting_checks(monkeypatch):
    """Count the calls of every argument check in posenc_core._validation."""
    import posenc_core._validation as check

    calls = {}
    for name, fn in list(vars(check).items()):
        if callable(fn) and not name.startswith("_") and fn.__module__ == check.__name__:

            def counted(*args, _fn=fn, _name=name, **kwargs):
                calls[_name] = calls.get(_name, 0) + 1
                return _fn(*args, **kwargs)

            monkeypatch.setattr(check, name, counted)
    return calls


def test_the_module_checks_its_arguments_once(monkeypatch):
    """Validate once: the module's forward checks x, the flags and the bias, and what it calls
    (attention, the ALiBi bias) trusts it instead of checking q, k, v and the flags again; the
    size of each thing built from them (the ALiBi bias, the causal mask) is checked once."""
    x, bias = torch.randn(2, 5, 32), torch.randn(5, 5)
    expected = MHA_ALIBI(x, causal=True, bias=bias)
    calls = counting_checks(monkeypatch)
    got = MHA_ALIBI(x, causal=True, bias=bias)
    # x and bias; causal and return_weights; the ALiBi bias and the causal mask
    assert calls == {"tensor": 2, "boolean": 2, "result_size": 2}
    assert torch.equal(got, expected)
    calls.clear()
    pc.self_attention(torch.randn(5, 4), W, W, W, causal=True, bias=torch.zeros(5, 5))
    # x, w_q, w_k, w_v, bias; two flags; the causal mask
    assert calls == {"tensor": 5, "boolean": 2, "result_size": 1}
