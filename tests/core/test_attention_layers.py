"""The per-layer attention terms of recent models, each against the Hugging Face function it
mirrors: sliding windows (``masking_utils.sliding_window_causal_mask_function`` and
``sliding_window_bidirectional_mask_function``), chunks (``chunked_causal_mask_function``)
and GPT-OSS's sink logits (``models.gpt_oss.modeling_gpt_oss.eager_attention_forward``)."""

import math

import pytest
import torch
import torch.nn.functional as F
from transformers import Llama4TextConfig, MistralConfig, ModernBertConfig
from transformers import masking_utils as mu
from transformers.models.gpt_oss import modeling_gpt_oss

import posenc_core as pc
from posenc_core.attention import chunked_mask, sliding_window_mask

# (s_q, s_k): prefill of several lengths, one query, decoding queries (s_q < s_k)
LENGTHS = [(1, 1), (2, 2), (5, 5), (9, 9), (1, 9), (3, 9), (4, 7)]
WINDOWS = [1, 2, 3, 4, 8, 9, 10, 100]  # 1, and windows >= s (the whole sequence)
CHUNKS = [1, 2, 3, 4, 8, 9, 100]


def hf_grid(mask_function, s_q, s_k):
    """A Hugging Face mask function on the (s_q, s_k) index grid, the queries being the last
    s_q of the s_k positions (q_idx = s_k - s_q + row, as ``sdpa_mask``'s q_offset)."""
    q_idx = torch.arange(s_k - s_q, s_k)[:, None]
    kv_idx = torch.arange(s_k)[None, :]
    zero = torch.tensor(0)
    return mask_function(zero, zero, q_idx, kv_idx).expand(s_q, s_k)


def hf_sdpa_mask(mask_function, s_q, s_k):
    """The same through ``masking_utils.sdpa_mask`` with q_offset = s_k - s_q: (s_q, s_k)."""
    mask = mu.sdpa_mask(
        batch_size=1,
        q_length=s_q,
        kv_length=s_k,
        q_offset=s_k - s_q,
        mask_function=mask_function,
        allow_is_causal_skip=False,
    )
    return mask[0, 0]


def hf_window(window, causal):
    if causal:
        return mu.sliding_window_causal_mask_function(window)
    return mu.sliding_window_bidirectional_mask_function(window)


def hf_chunk(chunk, causal):
    left_padding = torch.zeros(1, dtype=torch.long)
    if causal:
        return mu.chunked_causal_mask_function(chunk, left_padding)
    return mu.chunked_overlay(chunk, left_padding)  # the causal function without its causal part


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("window", WINDOWS)
@pytest.mark.parametrize("s_q, s_k", LENGTHS)
def test_sliding_window_mask_equals_hugging_face(s_q, s_k, window, causal):
    """``sliding_window_causal_mask_function`` (i - window < j <= i) and
    ``sliding_window_bidirectional_mask_function`` (|i - j| <= window) on index grids and
    through ``sdpa_mask`` with decoding offsets."""
    got = sliding_window_mask(s_q, s_k, window=window, causal=causal)
    assert got.dtype == torch.bool and got.shape == (s_q, s_k)
    assert torch.equal(got, hf_grid(hf_window(window, causal), s_q, s_k))
    assert torch.equal(got, hf_sdpa_mask(hf_window(window, causal), s_q, s_k))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("s_q, s_k", LENGTHS)
def test_chunked_mask_equals_hugging_face(s_q, s_k, chunk, causal):
    """``chunked_causal_mask_function`` (i // chunk == j // chunk and j <= i; no left padding)
    and, without causal, ``chunked_overlay`` alone, on index grids and through ``sdpa_mask``."""
    got = chunked_mask(s_q, s_k, chunk=chunk, causal=causal)
    assert got.dtype == torch.bool and got.shape == (s_q, s_k)
    assert torch.equal(got, hf_grid(hf_chunk(chunk, causal), s_q, s_k))
    assert torch.equal(got, hf_sdpa_mask(hf_chunk(chunk, causal), s_q, s_k))


def test_an_off_by_one_window_or_chunk_differs_from_hugging_face():
    """The comparisons above can fail: window + 1, window - 1, a strict bidirectional
    inequality |i - j| < window, or the next chunk length all give other masks."""
    s, w = 9, 3
    hf_causal = hf_grid(hf_window(w, True), s, s)
    hf_bidir = hf_grid(hf_window(w, False), s, s)
    assert not torch.equal(sliding_window_mask(s, window=w + 1), hf_causal)
    assert not torch.equal(sliding_window_mask(s, window=w - 1), hf_causal)
    assert not torch.equal(sliding_window_mask(s, window=w + 1, causal=False), hf_bidir)
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    assert not torch.equal((i - j).abs() < w, hf_bidir)  # a strict inequality is not HF's
    assert not torch.equal(chunked_mask(s, chunk=w + 1), hf_grid(hf_chunk(w, True), s, s))
    # the causal window counts the query itself: w keys per row once the window is full
    assert hf_causal.sum(-1).tolist() == [1, 2, 3, 3, 3, 3, 3, 3, 3]
    assert hf_bidir.sum(-1).max().item() == 2 * w + 1


def test_whole_hugging_face_masks_without_a_model():
    """``create_sliding_window_causal_mask`` (Mistral's config), ``create_chunked_causal_mask``
    (Llama 4's ``attention_chunk_size``) and ``create_bidirectional_sliding_window_mask``
    (ModernBERT, whose config's ``sliding_window`` is ``local_attention // 2``), as the models
    build them, for a batch of 2 sequences of 10 tokens."""
    x = torch.zeros(2, 10, 4)
    mistral = MistralConfig(sliding_window=4, attn_implementation="sdpa")
    m = mu.create_sliding_window_causal_mask(mistral, x, None, None, allow_is_causal_skip=False)
    assert m.shape == (2, 1, 10, 10)
    assert torch.equal(m[0, 0], sliding_window_mask(10, window=4))
    llama4 = Llama4TextConfig(attention_chunk_size=3, attn_implementation="sdpa")
    m = mu.create_chunked_causal_mask(llama4, x, None, None, allow_is_causal_skip=False)
    assert torch.equal(m[1, 0], chunked_mask(10, chunk=3))
    bert = ModernBertConfig(local_attention=6, attn_implementation="sdpa")
    assert bert.sliding_window == 3
    m = mu.create_bidirectional_sliding_window_mask(
        bert, x, None, None, allow_is_bidirectional_skip=False
    )
    got = sliding_window_mask(10, window=bert.local_attention // 2, causal=False)
    assert torch.equal(m[0, 0], got)
    assert got.sum(-1).max().item() == bert.local_attention + 1  # 7 keys for local_attention 6


def reference(q, k, v, keep=None, bias=None, sinks=None):
    """softmax(q k^T / sqrt(d) + bias, masked by ``keep``) v in float64, with an optional sink
    column appended before the softmax and dropped after it."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias.double()
    if keep is not None:
        scores = scores.masked_fill(~keep, float("-inf"))
    if sinks is not None:
        col = sinks.double().reshape(-1, 1, 1).expand(*scores.shape[:-1], 1)
        w = torch.softmax(torch.cat([scores, col], -1), -1)[..., :-1]
    else:
        w = torch.softmax(scores, -1)
    return w @ v, w


def qkv(b, h, s_q, s_k, d=8, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(b, h, s_q, d, generator=g, dtype=dtype),
        torch.randn(b, h, s_k, d, generator=g, dtype=dtype),
        torch.randn(b, h, s_k, d, generator=g, dtype=dtype),
    )


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(
    "kind, size", [("window", 1), ("window", 3), ("window", 9), ("chunk", 1), ("chunk", 4)]
)
@pytest.mark.parametrize("s_q, s_k", [(7, 7), (3, 7), (1, 7)])
def test_attention_with_window_or_chunk_matches_hugging_face_masks(s_q, s_k, kind, size, causal):
    """attention(window=..., chunk=...) equals the float64 softmax masked by the Hugging Face
    mask function, on the fused (SDPA) path and the weights path, with a bias too.
    Tolerances 1e-5: float32 attention of O(1) scores against float64 (SDPA's rounding)."""
    q, k, v = qkv(2, 3, s_q, s_k)
    fn = hf_window(size, causal) if kind == "window" else hf_chunk(size, causal)
    keep = hf_grid(fn, s_q, s_k)
    bias = torch.randn(3, 1, s_k, generator=torch.Generator().manual_seed(1))
    for b in (None, bias):
        ref_out, ref_w = reference(q, k, v, keep, b)
        kwargs = {kind: size, "causal": causal, "bias": b}
        torch.testing.assert_close(
            pc.attention(q, k, v, **kwargs).double(), ref_out, atol=1e-5, rtol=1e-5
        )
        out, w = pc.attention(q, k, v, return_weights=True, **kwargs)
        torch.testing.assert_close(out.double(), ref_out, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(w.double(), ref_w, atol=1e-6, rtol=1e-5)
        assert torch.all(w[..., ~keep] == 0)


def test_window_at_least_the_sequence_is_full_attention():
    q, k, v = qkv(1, 2, 6, 6, dtype=torch.float64)
    for causal in (True, False):
        full = pc.attention(q, k, v, causal=causal)
        for window in (6, 7, 10**30):
            torch.testing.assert_close(pc.attention(q, k, v, causal=causal, window=window), full)
        torch.testing.assert_close(pc.attention(q, k, v, causal=causal, chunk=10**30), full)


class FakeGptOssAttention:
    """The attributes GPT-OSS's ``eager_attention_forward`` reads from its module."""

    def __init__(self, sinks, groups=1):
        self.sinks = sinks
        self.num_key_value_groups = groups
        self.training = False


def gpt_oss(q, k, v, sinks, mask_function=None, groups=1):
    """Hugging Face's GPT-OSS eager attention, with its eager (additive, dtype-min) mask;
    returns the output as (b, h, s_q, d) and the weights."""
    b, _, s_q, d = q.shape
    s_k = k.shape[-2]
    mask = None
    if mask_function is not None:
        mask = mu.eager_mask(
            batch_size=b,
            q_length=s_q,
            kv_length=s_k,
            q_offset=s_k - s_q,
            mask_function=mask_function,
            dtype=q.dtype,
        )
    out, w = modeling_gpt_oss.eager_attention_forward(
        FakeGptOssAttention(sinks, groups), q, k, v, mask, scaling=d**-0.5
    )
    return out.transpose(1, 2), w


@pytest.mark.parametrize(
    "s_q, s_k, window", [(6, 6, None), (6, 6, 2), (6, 6, 1), (2, 6, 3), (1, 6, None)]
)
def test_sinks_match_gpt_oss_eager_attention(s_q, s_k, window):
    """Sinks (with GPT-OSS's causal or sliding-window mask) against ``eager_attention_forward``
    in ``transformers.models.gpt_oss.modeling_gpt_oss``, outputs and weights, on both of
    attention's return modes. Tolerances: HF scales by d**-0.5 and masks with float32's
    minimum, we divide by sqrt(d) and mask with -inf; scores differ by about one float32
    ulp (1.2e-7 relative), which the softmax and the sum over <= 6 keys of O(1) values keep
    near 1e-7 (measured: at most 1.2e-7 on outputs up to 2.4); atol 1e-6, rtol 1e-5 leave a
    margin of about ten."""
    h = 4
    q, k, v = qkv(2, h, s_q, s_k, seed=3)
    sinks = torch.tensor([-1.0, 0.0, 0.5, 3.0])
    fn = mu.causal_mask_function if window is None else hf_window(window, True)
    ref_out, ref_w = gpt_oss(q, k, v, sinks, fn)
    out, w = pc.attention(q, k, v, causal=True, window=window, sinks=sinks, return_weights=True)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(w, ref_w, atol=1e-6, rtol=1e-5)
    assert torch.equal(pc.attention(q, k, v, causal=True, window=window, sinks=sinks), out)
    assert torch.all(w.sum(-1) < 1)
    # the sink matters: without it the weights differ from GPT-OSS's
    assert not torch.allclose(pc.attention(q, k, v, causal=True, window=window), ref_out)


def test_sinks_match_gpt_oss_with_grouped_keys_and_without_a_mask():
    """``eager_attention_forward`` with num_key_value_groups=2 (repeat_kv) and no mask: the
    same as our attention on keys and values repeated per head (repeat_interleave)."""
    q, _, _ = qkv(1, 4, 5, 5, seed=4)
    _, k, v = qkv(1, 2, 5, 5, seed=5)
    sinks = torch.tensor([0.3, -2.0, 1.0, 0.0])
    ref_out, ref_w = gpt_oss(q, k, v, sinks, groups=2)
    k4, v4 = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    out, w = pc.attention(q, k4, v4, sinks=sinks, return_weights=True)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=1e-5)  # as in the test above
    torch.testing.assert_close(w, ref_w, atol=1e-6, rtol=1e-5)


def test_sink_dtype_follows_gpt_oss():
    """bfloat16 queries with float32 sinks: HF's torch.cat promotes the logits to float32 for
    the softmax and casts the weights back to bfloat16 (the values' dtype); ours does the
    same, so the two agree to float32 rounding before the final bfloat16 matmul (bfloat16
    tolerances: torch's defaults for bfloat16, rtol 1.6e-2, atol 1e-5)."""
    q, k, v = qkv(1, 2, 4, 4, seed=6, dtype=torch.bfloat16)
    sinks = torch.tensor([0.25, -0.5])
    ref_out, ref_w = gpt_oss(q, k, v, sinks, mu.causal_mask_function)
    out, w = pc.attention(q, k, v, causal=True, sinks=sinks, return_weights=True)
    assert w.dtype == ref_w.dtype == torch.bfloat16 and out.dtype == torch.bfloat16
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(out, ref_out)


def loop_reference_with_sinks(q, k, v, sinks, keep):
    """Attention with a sink logit per head written out with loops in float64: for each
    (batch, head, query), exp of each visible score and of the sink, normalised by their sum,
    the sink's share dropped."""
    b, h, s_q, d = q.shape
    out = torch.zeros(b, h, s_q, v.shape[-1], dtype=torch.float64)
    weights = torch.zeros(b, h, s_q, k.shape[-2], dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            for i in range(s_q):
                logits = {
                    j: float(q[bi, hi, i].double() @ k[bi, hi, j].double()) / math.sqrt(d)
                    for j in range(k.shape[-2])
                    if keep[i, j]
                }
                top = max([*logits.values(), float(sinks[hi])])
                e = {j: math.exp(x - top) for j, x in logits.items()}
                total = sum(e.values()) + math.exp(float(sinks[hi]) - top)
                for j, x in e.items():
                    weights[bi, hi, i, j] = x / total
                    out[bi, hi, i] += x / total * v[bi, hi, j].double()
    return out, weights


@pytest.mark.parametrize(
    "causal, window, chunk", [(True, None, None), (True, 2, None), (False, None, 3)]
)
def test_sinks_match_a_float64_loop(causal, window, chunk):
    q, k, v = qkv(2, 3, 5, 7, seed=7, dtype=torch.float64)
    sinks = torch.tensor([-0.5, 1.5, 20.0], dtype=torch.float64)  # 20: the sink takes ~all
    if window is not None:
        keep = sliding_window_mask(5, 7, window=window, causal=causal)
    elif chunk is not None:
        keep = chunked_mask(5, 7, chunk=chunk, causal=causal)
    else:
        keep = torch.ones(5, 7, dtype=torch.bool).tril(2)
    ref_out, ref_w = loop_reference_with_sinks(q, k, v, sinks, keep)
    out, w = pc.attention(
        q, k, v, causal=causal, window=window, chunk=chunk, sinks=sinks, return_weights=True
    )
    torch.testing.assert_close(out, ref_out, atol=1e-12, rtol=1e-12)  # float64 rounding
    torch.testing.assert_close(w, ref_w, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(out, reference(q, k, v, keep, sinks=sinks)[0])


def test_sinks_keep_a_fully_masked_row_finite():
    """A row whose keys are all hidden puts all its weight on the sink: zeros, not NaN."""
    q, k, v = qkv(1, 2, 3, 3, dtype=torch.float64)
    bias = torch.zeros(3, 3, dtype=torch.float64)
    bias[1] = float("-inf")
    out, w = pc.attention(
        q, k, v, bias=bias, sinks=torch.zeros(2, dtype=torch.float64), return_weights=True
    )
    assert torch.all(w[..., 1, :] == 0) and torch.all(out[..., 1, :] == 0)
    assert torch.isfinite(out).all()


def test_sdpa_runs_unless_sinks_or_weights(monkeypatch):
    """The documented paths: SDPA for a window or a chunk (as an additive mask), the explicit
    softmax with sinks."""
    calls = []
    sdpa = F.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls.append(kwargs.get("attn_mask"))
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counted)
    q, k, v = qkv(1, 2, 5, 5)
    pc.attention(q, k, v, causal=True, window=2)
    pc.attention(q, k, v, chunk=2)
    assert len(calls) == 2 and all(m is not None and m.shape == (5, 5) for m in calls)
    pc.attention(q, k, v, causal=True, window=2, sinks=torch.zeros(2))
    pc.attention(q, k, v, window=2, return_weights=True)
    assert len(calls) == 2


def test_self_attention_and_module_pass_the_terms_through():
    """self_attention and MultiHeadSelfAttention give attention the window, chunk and sinks;
    the module's learned sinks start at zero, one per head, and receive gradients."""
    g = torch.Generator().manual_seed(8)
    x = torch.randn(2, 6, 16, generator=g, dtype=torch.float64)
    wq, wk, wv = (torch.randn(16, 8, generator=g, dtype=torch.float64) for _ in range(3))
    for kwargs in ({"window": 2, "causal": True}, {"chunk": 3}, {"window": 1}):
        torch.testing.assert_close(
            pc.self_attention(x, wq, wk, wv, **kwargs),
            pc.attention(x @ wq, x @ wk, x @ wv, **kwargs),
        )
    sinks = torch.tensor([0.5], dtype=torch.float64)
    torch.testing.assert_close(
        pc.self_attention(x[:, None], wq, wk, wv, sinks=sinks, causal=True),
        pc.attention(x[:, None] @ wq, x[:, None] @ wk, x[:, None] @ wv, sinks=sinks, causal=True),
    )
    mha = pc.MultiHeadSelfAttention(16, 4, sinks=True).double()
    assert pc.MultiHeadSelfAttention(16, 4).sinks is None
    assert mha.sinks.shape == (4,) and torch.all(mha.sinks == 0)
    y, w = mha(x, causal=True, window=3, return_weights=True)
    q, k, val = mha.qkv(x).view(2, 6, 3, 4, 4).permute(2, 0, 3, 1, 4).unbind(0)
    ctx, w_ref = pc.attention(
        q, k, val, causal=True, window=3, sinks=mha.sinks, return_weights=True
    )
    torch.testing.assert_close(w, w_ref)
    torch.testing.assert_close(y, mha.out(ctx.transpose(1, 2).reshape(2, 6, 16)))
    assert torch.all(w.sum(-1) < 1)  # zero sinks still take a share: exp(0) / (... + 1)
    assert torch.all(w[..., ~sliding_window_mask(6, window=3)] == 0)
    y.sum().backward()
    assert mha.sinks.grad is not None and torch.isfinite(mha.sinks.grad).all()
    assert mha.sinks.grad.abs().sum() > 0
    torch.testing.assert_close(mha(x, chunk=2), mha(x, chunk=2, return_weights=True)[0])


def z(*shape, dtype=torch.float32, device="cpu"):
    return torch.zeros(shape, dtype=dtype, device=device)


Q = z(1, 2, 3, 4)
MHA = pc.MultiHeadSelfAttention(8, 2)


def att(**kwargs):
    return lambda: pc.attention(Q, Q, Q, **kwargs)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        pytest.param(att(window=0), ValueError, r"window must be a positive integer, got 0"),
        pytest.param(att(window=-2), ValueError, r"window must be a positive integer, got -2"),
        pytest.param(att(window=True), TypeError, r"window must be a positive integer, got bool"),
        pytest.param(att(window=2.0), TypeError, r"window must be .*got float 2.0"),
        pytest.param(att(window="3"), TypeError, r"window must be .*got str '3'"),
        pytest.param(att(chunk=0), ValueError, r"chunk must be a positive integer, got 0"),
        pytest.param(att(chunk=False), TypeError, r"chunk must be a positive integer, got bool"),
        pytest.param(att(chunk=1.5), TypeError, r"chunk must be .*got float 1.5"),
        pytest.param(
            att(window=2, chunk=2),
            ValueError,
            r"window and chunk are mutually exclusive.*window=2, chunk=2",
        ),
        pytest.param(
            lambda: pc.attention(z(5, 4), z(3, 4), z(3, 4), window=2),
            ValueError,
            r"with window or chunk, q may not be longer than k.*s_q=5, s_k=3",
        ),
        pytest.param(att(sinks=z(3)), ValueError, r"sinks must have shape \(h,\) = \(2,\).*\(3,\)"),
        pytest.param(att(sinks=z(2, 1)), ValueError, r"sinks must have shape.*got \(2, 1\)"),
        pytest.param(att(sinks=z(2, dtype=torch.long)), TypeError, r"sinks must be a real.*int64"),
        pytest.param(att(sinks=z(2, dtype=torch.bool)), TypeError, r"sinks must be a real.*bool"),
        pytest.param(att(sinks=[0.0, 0.0]), TypeError, r"sinks must be a torch.Tensor, got list"),
        pytest.param(
            att(sinks=torch.tensor([0.0, float("nan")])), ValueError, r"sinks must be finite.*nan"
        ),
        pytest.param(
            att(sinks=torch.tensor([float("inf"), 0.0])), ValueError, r"sinks must be finite.*inf"
        ),
        pytest.param(
            att(sinks=z(2, device="meta")), ValueError, r"sinks must be on the same device.*meta"
        ),
        pytest.param(
            lambda: pc.attention(z(3, 4), z(3, 4), z(3, 4), sinks=z(1)),
            ValueError,
            r"sinks need a head dimension.*\(3, 3\)",
        ),
        pytest.param(
            lambda: pc.self_attention(z(3, 4), z(4, 2), z(4, 2), z(4, 2), window=0),
            ValueError,
            r"window must be a positive integer, got 0",
        ),
        pytest.param(
            lambda: MHA(z(1, 3, 8), window=1, chunk=1),
            ValueError,
            r"window and chunk are mutually exclusive",
        ),
        pytest.param(
            lambda: pc.MultiHeadSelfAttention(8, 2, sinks=1),
            TypeError,
            r"sinks must be True or False, got int 1",
        ),
        pytest.param(
            lambda: sliding_window_mask(3, 2, window=1), ValueError, r"s_k must be at least s_q.*"
        ),
        pytest.param(
            lambda: sliding_window_mask(-1, window=1), ValueError, r"s_q must be a non-negative"
        ),
        pytest.param(
            lambda: sliding_window_mask(True, window=1), TypeError, r"s_q must be .*got bool"
        ),
        pytest.param(
            lambda: sliding_window_mask(3, window=0), ValueError, r"window must be a positive"
        ),
        pytest.param(
            lambda: sliding_window_mask(3, window=2, causal=1), TypeError, r"causal must be True"
        ),
        pytest.param(lambda: chunked_mask(3, chunk=-1), ValueError, r"chunk must be a positive"),
        pytest.param(lambda: chunked_mask(3, 4.0, chunk=1), TypeError, r"s_k must be .*float"),
        pytest.param(
            lambda: sliding_window_mask(2**20, window=4),
            ValueError,
            r"sliding_window_mask: the mask for s_q=1048576 x s_k=1048576.*MAX_RESULT_BYTES",
        ),
        pytest.param(
            lambda: chunked_mask(0, 2**40, chunk=4),
            ValueError,
            r"chunked_mask: the mask.*MAX_RESULT_BYTES",
        ),
        pytest.param(  # a stride-0 q of 2**17 positions: the mask alone would be 640 GiB
            lambda: pc.attention(*(z(1, 4).expand(2**17, 4),) * 3, window=8),
            ValueError,
            r"attention: the sliding-window or chunked mask.*MAX_RESULT_BYTES",
        ),
        pytest.param(  # sinks take the explicit path: its scores are refused the same way
            lambda: pc.attention(*(z(1, 1, 4).expand(1, 2**16, 4),) * 3, sinks=z(1)),
            ValueError,
            r"attention: the attention scores and weights.*explicit path",
        ),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_masks_of_zero_queries_and_huge_windows():
    assert sliding_window_mask(0, 5, window=3).shape == (0, 5)
    assert chunked_mask(0, chunk=3).shape == (0, 0)
    assert torch.all(sliding_window_mask(4, window=2**80, causal=False))
    assert torch.equal(chunked_mask(4, chunk=2**80), torch.ones(4, 4, dtype=torch.bool).tril())
