"""Properties of rotary position embedding (Su et al. 2021, "RoFormer", Sec. 3.2-3.4; chapter 7).

Each test states a property a reader of the book meets in the text: scores depend only on
the offset m - n, rotations keep lengths, the two pair layouts are one permutation apart,
decoding with a KV cache gives what a full pass gives, and bad arguments are refused with a
message that names them. Agreement with published implementations (Hugging Face, Meta,
RoFormer's matrix) is in ``test_rope_reference.py``.
"""

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rounding import is_nearest

import posenc_core as pc
from posenc_core.rope import kernels, native

LAYOUTS = ("half", "interleaved")
F64 = torch.float64

# Scalings whose tables do not depend on the sequence length (dynamic does, by design).
STATIC_SCALINGS = [
    None,
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "ntk", "factor": 8.0},
    {"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 64},
    {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
]
SCALING_IDS = ["default", "linear", "ntk", "yarn", "llama3"]


def randn(*shape, seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).to(dtype)


def pairs(x, layout):
    """(first, second) element of every rotated pair, written out independently of posenc_core."""
    h = x.shape[-1] // 2
    if layout == "half":
        return x[..., :h], x[..., h:]
    return x[..., 0::2], x[..., 1::2]


def turn90(x, layout):
    """(a, b) -> (-b, a) on every pair, by explicit indexing (RoFormer Eq. 34's second term)."""
    out = torch.empty_like(x)
    a, b = pairs(x, layout)
    oa, ob = pairs(out, layout)
    oa.copy_(-b)
    ob.copy_(a)
    return out


def rope_at(x, positions, layout="half", base=10000.0, scaling=None):
    """apply_rope with tables for ``positions`` (shape (s,)) in the dtype of x (float32 tables
    for low precision)."""
    dtype = x.dtype if x.dtype in (torch.float32, F64) else torch.float32
    cos, sin = pc.rope_cos_sin(
        positions, x.shape[-1], base=base, scaling=scaling, layout=layout, dtype=dtype
    )
    return pc.apply_rope(x, cos, sin, layout=layout)


# --------------------------------------------------------------------------- 1. relative positions


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    head_dim=st.sampled_from([2, 4, 8, 64]),
    base=st.sampled_from([10000.0, 500000.0]),
    layout=st.sampled_from(LAYOUTS),
    m=st.integers(0, 5000),
    n=st.integers(0, 5000),
    t=st.integers(-10000, 10000),
)
def test_score_depends_only_on_offset(seed, head_dim, base, layout, m, n, t):
    """<R_m q, R_n k> = <R_{m+t} q, R_{n+t} k> = <q, R_{n-m} k> (RoFormer Eq. 16)."""
    q, k = randn(1, head_dim, seed=seed), randn(1, head_dim, seed=seed + 1)

    def score(mq, nk):
        return float((rope_at(q, [mq], layout, base) * rope_at(k, [nk], layout, base)).sum())

    reference = score(m, n)
    # float64 angles up to 15000 rad carry ~1e-12 rad of error; scores are O(sqrt(head_dim))
    assert score(m + t, n + t) == pytest.approx(reference, abs=1e-9)
    assert float((q * rope_at(k, [n - m], layout, base)).sum()) == pytest.approx(
        reference, abs=1e-9
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_score_does_change_with_offset(layout):
    """The offset is visible: the same q, k at distance 0, 1, 2, ... give different scores."""
    q, k = randn(1, 16, seed=1), randn(1, 16, seed=2)
    scores = [float((rope_at(q, [0], layout) * rope_at(k, [n], layout)).sum()) for n in range(8)]
    assert min(abs(a - b) for i, a in enumerate(scores) for b in scores[i + 1 :]) > 1e-3


# --------------------------------------------------------------------------- 2, 3. rotations


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "scaling", STATIC_SCALINGS[:3] + STATIC_SCALINGS[4:], ids=["default", "linear", "ntk", "llama3"]
)
def test_pair_norms_kept_and_position_zero_is_identity(layout, scaling):
    """Every (x_a, x_b) pair keeps its length; position 0 leaves x exactly as it was."""
    x = randn(3, 7, 32, seed=3)
    positions = torch.tensor([0.0, 1.0, 2.5, 17.0, 1000.0, 123456.0, 2.0**20])
    y = rope_at(x, positions, layout, scaling=scaling)
    xa, xb = pairs(x, layout)
    ya, yb = pairs(y, layout)
    torch.testing.assert_close(ya**2 + yb**2, xa**2 + xb**2, rtol=1e-13, atol=1e-13)
    assert torch.equal(y[:, 0], x[:, 0])
    assert not torch.allclose(y[:, 1], x[:, 1])  # and other positions do rotate


def test_yarn_scales_norms_by_its_attention_factor():
    """YaRN multiplies cos and sin by its attention factor, so every pair length scales by it."""
    scaling = STATIC_SCALINGS[3]
    x = randn(5, 32, seed=4)
    y = rope_at(x, torch.arange(5), "half", scaling=scaling)
    factor = 0.1 * math.log(16.0) + 1.0  # Peng et al. 2023, Eq. 22 (sqrt(1/t) = 0.1 ln s + 1)
    torch.testing.assert_close(y.norm(dim=-1), factor * x.norm(dim=-1), rtol=1e-13, atol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_rotate_pairs_is_a_quarter_turn(layout):
    """rotate_pairs(x) is the (a, b) -> (-b, a) turn; twice it is -x; it equals RoPE at angle
    pi/2."""
    x = randn(4, 5, 10, seed=5)
    r = pc.rotate_pairs(x, layout=layout)
    assert torch.equal(r, turn90(x, layout))
    assert torch.equal(pc.rotate_pairs(r, layout=layout), -x)
    # head_dim 2 has the single frequency theta_0 = 1, so position pi/2 is a quarter turn
    x2 = randn(6, 2, seed=6)
    quarter = torch.full((6,), math.pi / 2, dtype=F64)
    torch.testing.assert_close(
        rope_at(x2, quarter, layout), pc.rotate_pairs(x2, layout=layout), rtol=0, atol=1e-15
    )


def test_python_float_positions_are_not_rounded_to_float32():
    """rope_angles promises float64 angles; a Python float position must not pass through float32
    (float32 would turn 123456789.0 into 123456792.0 and pi/2 into pi/2 + 4e-8)."""
    for positions in ([123456789.0], 123456789.0, [math.pi / 2]):
        expected = float(torch.tensor(positions, dtype=F64).reshape(-1)[0])
        assert pc.rope.rope_angles(positions, 2).reshape(-1)[0].item() == expected


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    layout=st.sampled_from(LAYOUTS),
    m=st.floats(-1e5, 1e5, allow_nan=False),
    head_dim=st.sampled_from([2, 8, 64]),
)
def test_rotating_by_m_then_minus_m_returns_input(seed, layout, m, head_dim):
    """R_{-m} R_m = I."""
    x = randn(3, head_dim, seed=seed)
    m = torch.full((3,), m, dtype=F64)
    back = rope_at(rope_at(x, m, layout), -m, layout)
    torch.testing.assert_close(back, x, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- 4. layouts


@settings(max_examples=60, deadline=None)
@given(
    half=st.integers(1, 128),
    seed=st.integers(0, 2**31 - 1),
    positions=st.lists(st.integers(0, 2**20), min_size=1, max_size=12),
)
def test_layout_permutations(half, seed, positions):
    """perm = [0, 2, ..., d-2, 1, 3, ..., d-1] and its inverse round-trip; RoPE commutes with it:
    rotating x[..., perm] in the half layout = (x rotated in the interleaved layout)[..., perm],
    bit for bit (the same products and sums, in another order of the pairs)."""
    head_dim = 2 * half
    perm, inv = pc.rope.interleaved_to_half(head_dim), pc.rope.half_to_interleaved(head_dim)
    assert perm.tolist() == list(range(0, head_dim, 2)) + list(range(1, head_dim, 2))
    x = randn(2, len(positions), head_dim, seed=seed)
    assert torch.equal(x[..., perm][..., inv], x)
    assert torch.equal(x[..., inv][..., perm], x)
    pos = torch.tensor(positions)
    assert torch.equal(
        rope_at(x[..., perm], pos, "half"), rope_at(x, pos, "interleaved")[..., perm]
    )


def _scores(wq, wk, x, n_heads, layout):
    """Per-head RoPE attention logits (h, s, s) for inputs x (s, d_model) and projections W
    (h*d, d_model)."""
    s = x.shape[0]
    q = (x @ wq.T).reshape(s, n_heads, -1).transpose(0, 1)  # (h, s, d)
    k = (x @ wk.T).reshape(s, n_heads, -1).transpose(0, 1)
    positions = torch.arange(s)
    return rope_at(q, positions, layout) @ rope_at(k, positions, layout).transpose(-1, -2)


def test_permuted_weights_give_the_same_scores_in_the_other_layout():
    """A checkpoint trained with interleaved RoPE (Meta) runs with half RoPE (Hugging Face) once
    its W_q and W_k rows are permuted per head; forgetting the permutation silently changes the
    scores."""
    n_heads, head_dim, d_model, s = 3, 8, 12, 6
    wq, wk = randn(n_heads * head_dim, d_model, seed=7), randn(n_heads * head_dim, d_model, seed=8)
    x = randn(s, d_model, seed=9)
    meta = _scores(wq, wk, x, n_heads, "interleaved")
    wq_h = pc.permute_qk_weight(wq, n_heads, to="half")
    wk_h = pc.permute_qk_weight(wk, n_heads, to="half")
    torch.testing.assert_close(
        _scores(wq_h, wk_h, x, n_heads, "half"), meta, rtol=1e-12, atol=1e-12
    )
    assert torch.equal(pc.permute_qk_weight(wq_h, n_heads, to="interleaved"), wq)
    assert torch.equal(pc.permute_qk_weight(wk_h, n_heads, to="interleaved"), wk)
    # the bug: interleaved-trained weights with half RoPE
    wrong = _scores(wq, wk, x, n_heads, "half")
    assert (wrong - meta).abs().max() > 0.1 * meta.abs().max()
    # the permutation only moves rows within a head
    for h in range(n_heads):
        rows = slice(h * head_dim, (h + 1) * head_dim)
        assert sorted(map(tuple, wq_h[rows].tolist())) == sorted(map(tuple, wq[rows].tolist()))


# --------------------------------------------------------------------------- 5, 6. module, cache


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("scaling", STATIC_SCALINGS, ids=SCALING_IDS)
def test_kv_cache_decoding_matches_full_pass(layout, scaling):
    """Rotating a prefix, then the rest at offset len(prefix) (int or explicit positions), then
    one token at a time, gives the rotation of the full sequence."""
    b, h, s, d, p = 2, 3, 11, 16, 7
    q, k = (
        randn(b, h, s, d, seed=10, dtype=torch.float32),
        randn(b, h, s, d, seed=11, dtype=torch.float32),
    )
    full_q, full_k = pc.RotaryEmbedding(d, scaling=scaling, layout=layout)(q, k)
    module = pc.RotaryEmbedding(d, scaling=scaling, layout=layout)
    pq, pk = module(q[..., :p, :], k[..., :p, :])
    rq, rk = module(q[..., p:, :], k[..., p:, :], positions=p)
    eq, ek = module(q[..., p:, :], k[..., p:, :], positions=torch.arange(p, s))
    steps = [module(q[..., i : i + 1, :], k[..., i : i + 1, :], positions=i) for i in range(s)]
    tol = dict(rtol=2.4e-7, atol=2.4e-7)  # float32 rounding: same tables, same arithmetic
    torch.testing.assert_close(torch.cat((pq, rq), -2), full_q, **tol)
    torch.testing.assert_close(torch.cat((pk, rk), -2), full_k, **tol)
    torch.testing.assert_close(torch.cat((pq, eq), -2), full_q, **tol)
    torch.testing.assert_close(torch.cat((pk, ek), -2), full_k, **tol)
    torch.testing.assert_close(torch.cat([sq for sq, _ in steps], -2), full_q, **tol)
    torch.testing.assert_close(torch.cat([sk for _, sk in steps], -2), full_k, **tol)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fractional", [False, True])
def test_per_batch_positions_equal_per_row(layout, fractional):
    """positions of shape (b, s) with q of shape (b, h, s, d): row i is rotated by its own
    positions."""
    b, h, s, d = 3, 2, 5, 8
    q, k = randn(b, h, s, d, seed=12), randn(b, h, s, d, seed=13)
    positions = torch.tensor([[0, 1, 2, 3, 4], [10, 11, 12, 13, 14], [7, 3, 1000, 0, 2]])
    if fractional:
        positions = positions + 0.25
    module = pc.RotaryEmbedding(d, layout=layout)
    bq, bk = module(q, k, positions=positions)
    for i in range(b):
        rq, rk = module(q[i : i + 1], k[i : i + 1], positions=positions[i])
        torch.testing.assert_close(bq[i : i + 1], rq, rtol=1e-15, atol=1e-15)
        torch.testing.assert_close(bk[i : i + 1], rk, rtol=1e-15, atol=1e-15)
        torch.testing.assert_close(
            bq[i], rope_at(q[i], positions[i], layout), rtol=1e-15, atol=1e-15
        )
    assert not torch.allclose(bq[0], bq[1])


def numpy_rope(x, positions, layout, base=10000.0):
    """Independent float64 rotation with numpy: angle m * base**(-2i/d) on every pair."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[-1]
    angles = np.asarray(positions, dtype=np.float64)[:, None] * base ** (
        -np.arange(0, d, 2) / d
    )  # (s, d/2)
    c, s = np.cos(angles), np.sin(angles)
    out = np.empty_like(x)
    if layout == "half":
        a, b = x[..., : d // 2], x[..., d // 2 :]
        out[..., : d // 2], out[..., d // 2 :] = a * c - b * s, b * c + a * s
    else:
        a, b = x[..., 0::2], x[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * c - b * s, b * c + a * s
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cache_never_goes_stale(layout):
    """Growing and reusing the cache (s=8, s=100, s=3 at offset 5000, then s=8 again) gives what a
    direct rope_cos_sin + apply_rope gives; so does moving the module to bfloat16 (it has no
    buffers to round), and float64 inputs get float64 accuracy."""
    d = 32
    module = pc.RotaryEmbedding(d, layout=layout)
    assert list(module.buffers()) == [] and list(module.parameters()) == []
    calls = [(8, None), (100, None), (3, 5000), (8, None)]
    results = []
    for s, offset in calls:
        q, k = (
            randn(2, 4, s, d, seed=s, dtype=torch.float32),
            randn(2, 4, s, d, seed=s + 1, dtype=torch.float32),
        )
        got_q, got_k = module(q, k, positions=offset)
        positions = torch.arange(s) + (offset or 0)
        torch.testing.assert_close(got_q, rope_at(q, positions, layout), rtol=2.4e-7, atol=2.4e-7)
        torch.testing.assert_close(got_k, rope_at(k, positions, layout), rtol=2.4e-7, atol=2.4e-7)
        results.append((q, k, offset, got_q))
    module.to(torch.bfloat16)
    for q, k, offset, got_q in results:
        again, _ = module(q, k, positions=offset)
        assert again.dtype == torch.float32
        torch.testing.assert_close(again, got_q, rtol=0, atol=0)
    # float64 inputs after all that: within float64 rounding of an independent numpy rotation
    q = randn(1, 2, 6, d, seed=14)
    got_q, _ = module(q, q, positions=5000)
    assert got_q.dtype == F64
    expected = numpy_rope(q.numpy(), np.arange(5000, 5006), layout)
    np.testing.assert_allclose(got_q.numpy(), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("offset", [2**16, 600_000, 2**20, 2**40])
def test_huge_offsets_need_no_table_of_every_earlier_position(offset):
    """One decoding step at position 2**40 works (a table with a row per earlier position would
    need terabytes) and equals the direct computation; from 2**16 on, the module computes the rows
    it needs per call and caches nothing (a step at 600000 must not allocate 2**20 rows)."""
    d = 16
    module = pc.RotaryEmbedding(d)
    q = randn(1, 2, 2, d, seed=15)
    got_q, _ = module(q, q, positions=offset)
    assert module._cos is None and module._sin is None
    module(q, q, positions=2**16 - 2)  # the last two rows below the limit: cached, 2**16 rows
    assert module._cos.shape == (2**16, d)
    expected = numpy_rope(q.numpy(), [offset, offset + 1], "half")
    # float64 angles near 2**40 carry ~2**40 * 2**-53 rad of error each
    np.testing.assert_allclose(got_q.numpy(), expected, rtol=0, atol=offset * 2.0**-53 * 64)


def test_empty_sequence():
    """A sequence of length 0 (nothing new to rotate) gives empty results, not an error."""
    q = randn(2, 3, 0, 8)
    cos, sin = pc.rope_cos_sin(torch.arange(0), 8, dtype=F64)
    assert pc.apply_rope(q, cos, sin).shape == (2, 3, 0, 8)
    rq, rk = pc.RotaryEmbedding(8)(q, q, positions=5)
    assert rq.shape == rk.shape == (2, 3, 0, 8)


# --------------------------------------------------------------------------- 7. dtypes, autograd


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, F64])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_dtype_kept_and_input_untouched(dtype, layout):
    """Outputs have the input's dtype and device; the input tensor is not modified."""
    x = randn(2, 3, 5, 8, seed=16, dtype=dtype)
    k = randn(2, 3, 5, 8, seed=17, dtype=dtype)
    x0, k0 = x.clone(), k.clone()
    for table in (torch.float32, dtype):
        cos, sin = pc.rope_cos_sin(torch.arange(1, 6), 8, layout=layout, dtype=table)
        for c, s in (
            (cos, sin),
            (cos.expand(2, 1, 5, 8), sin.expand(2, 1, 5, 8)),
        ):  # shared / per-batch
            y = pc.apply_rope(x, c, s, layout=layout)
            assert y.dtype == dtype and y.device == x.device and y.shape == x.shape
            assert not torch.equal(y, x)
    rq, rk = pc.RotaryEmbedding(8, layout=layout)(x, k, positions=1)
    assert rq.dtype == rk.dtype == dtype
    assert torch.equal(x, x0) and torch.equal(k, k0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_results_stay_on_device_and_match_cpu(layout):
    """Tables and rotations are made on the inputs' device and agree with the CPU within float32
    rounding."""
    positions = torch.tensor([[0, 1, 2, 3], [9, 100, 4096, 70000]])
    q = randn(2, 3, 4, 16, seed=23, dtype=torch.float32)
    cpu_q, _ = pc.RotaryEmbedding(16, layout=layout)(q, q, positions=positions)
    cuda_q, cuda_k = pc.RotaryEmbedding(16, layout=layout)(
        q.cuda(), q.cuda(), positions=positions.cuda()
    )
    cos, _ = pc.rope_cos_sin(positions.cuda(), 16, layout=layout)
    assert cuda_q.device.type == cuda_k.device.type == cos.device.type == "cuda"
    torch.testing.assert_close(cuda_q.cpu(), cpu_q, rtol=2.4e-7, atol=2.4e-7)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradients(layout):
    """Autograd: gradcheck passes; the gradient of sum(w * R_m x) is R_m^T w = R_{-m} w (a
    rotation's transpose is its inverse); values with requires_grad equal the no-grad fast path."""
    positions = torch.tensor([0.0, 1.0, 7.0, 300.0])
    cos, sin = pc.rope_cos_sin(positions, 6, layout=layout, dtype=F64)
    x = randn(2, 4, 6, seed=18).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: pc.apply_rope(t, cos, sin, layout=layout), (x,))
    c = cos.clone().requires_grad_()
    s = sin.clone().requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, b: pc.apply_rope(x.detach(), a, b, layout=layout), (c, s)
    )
    w = randn(2, 4, 6, seed=19)
    y = pc.apply_rope(x, cos, sin, layout=layout)
    (y * w).sum().backward()
    torch.testing.assert_close(x.grad, rope_at(w, -positions, layout), rtol=1e-14, atol=1e-14)
    with torch.no_grad():
        fast = pc.apply_rope(x, cos, sin, layout=layout)
    torch.testing.assert_close(y.detach(), fast, rtol=1e-15, atol=1e-15)
    for dtype in (torch.float32, torch.bfloat16):
        xd = randn(2, 4, 6, seed=20, dtype=dtype).requires_grad_()
        c32, s32 = pc.rope_cos_sin(positions, 6, layout=layout)
        with_grad = pc.apply_rope(xd, c32, s32, layout=layout)
        assert with_grad.requires_grad and with_grad.dtype == dtype
        with torch.no_grad():
            without = pc.apply_rope(xd, c32, s32, layout=layout)
        assert torch.equal(with_grad, without)  # the same roundings with and without autograd
        # the gradient also passes the final rounding (a cast): R_m^T w, rounded to the dtype
        (with_grad.double() * w).sum().backward()
        torch.testing.assert_close(
            xd.grad.double(),
            rope_at(w, -positions, layout),
            rtol=0,
            atol=2 * torch.finfo(dtype).eps * 4,
        )


# --------------------------------------------------------------------------- 8. chunked fast path


@pytest.mark.parametrize("chunk", [6, 16, 50, 1 << 20])
@pytest.mark.parametrize("table_shape", ["s d", "1 1 s d", "b 1 s d", "1 d"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("contiguous", [True, False])
def test_chunked_fast_path_equals_plain_formula(
    monkeypatch, chunk, table_shape, layout, contiguous
):
    """x * cos + turn90(x) * sin (RoFormer Eq. 34), whatever the chunk size, table shape and
    strides."""
    monkeypatch.setattr(kernels, "CHUNK_ELEMENTS", chunk)
    b, h, s, d = 3, 5, 7, 6  # odd sizes; s * d = 42 is above and below the chunk sizes
    x = randn(b, h, s, d, seed=21) if contiguous else randn(b, s, h, d, seed=21).transpose(1, 2)
    assert x.is_contiguous() == contiguous
    positions = (
        torch.arange(s) if table_shape != "b 1 s d" else torch.arange(b * s).reshape(b, s) * 3
    )
    cos, sin = pc.rope_cos_sin(positions, d, layout=layout, dtype=F64)
    cos, sin = {
        "s d": (cos, sin),
        "1 1 s d": (cos[None, None], sin[None, None]),
        "b 1 s d": (cos[:, None], sin[:, None]),
        "1 d": (cos[3:4], sin[3:4]),
    }[table_shape]
    plain = x * cos + turn90(x, layout) * sin
    # every product and sum is its own rounded operation, as in the formula: equal bit for bit
    assert torch.equal(pc.apply_rope(x, cos, sin, layout=layout, fused=False), plain)
    # bfloat16 input: computed in float64, rounded once: the nearest bfloat16 to the formula
    xb = x.to(torch.bfloat16)
    exact_b = xb.double() * cos + turn90(xb.double(), layout) * sin
    got_b = pc.apply_rope(xb, cos, sin, layout=layout, fused=False)
    assert got_b.dtype == torch.bfloat16 and bool(is_nearest(got_b, exact_b, 0.0).all())


def test_long_sequence_chunked_over_positions(monkeypatch):
    """When one sequence is longer than a chunk, the split over positions keeps each row's angle."""
    monkeypatch.setattr(kernels, "CHUNK_ELEMENTS", 64)
    x = randn(2, 1, 333, 10, seed=22)
    cos, sin = pc.rope_cos_sin(torch.arange(333), 10, dtype=F64)
    expected = numpy_rope(x.numpy(), np.arange(333), "half")
    np.testing.assert_allclose(pc.apply_rope(x, cos, sin).numpy(), expected, rtol=0, atol=1e-13)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_in_place_rounding_equals_round_once(dtype):
    """The chunk loop's bit-level rounding (to odd at float32 precision, then torch's conversion)
    gives round_once's values: on random magnitudes across the range, on the values next to every
    rounding midpoint of the dtype, and on 0, -0, infinities, NaN and overflow."""
    from posenc_core._numerics import round_once, round_once_into

    g = torch.Generator().manual_seed(30)
    spread = [
        torch.randn(20000, generator=g, dtype=F64) * 10.0**e
        for e in (-37, -20, -7, -5, 0, 4, 30, 38)
    ]
    low = torch.randn(20000, generator=g).to(dtype)
    up = torch.nextafter(low, torch.full_like(low, math.inf))
    mid = (low.double() + up.double()) / 2  # exactly halfway: ties to even
    near = [mid, torch.nextafter(mid, mid + 1), torch.nextafter(mid, mid - 1)]
    special = torch.tensor(
        [0.0, -0.0, math.inf, -math.inf, math.nan, 3.4e38, -3.39e38, 65504.0, 65520.0, 2.0**-126],
        dtype=F64,
    )
    y = torch.cat(spread + near + [special])
    if dtype == torch.bfloat16:  # the caller sends bfloat16 results below 2**-126 to round_once
        y = y[(y.abs() >= 2.0**-126) | (y == 0) | y.isnan()]
    out = torch.empty(y.shape, dtype=dtype)
    round_once_into(y.clone(), out, torch.empty(y.shape, dtype=torch.int64))
    expected = round_once(y, dtype)
    same_bits = out.view(torch.int16) == expected.view(torch.int16)
    assert bool((same_bits | (out.isnan() & expected.isnan())).all())


@pytest.mark.parametrize("where", ["x", "table", "midpoint"])
def test_low_precision_tiny_values_are_rounded_once_too(where):
    """bfloat16 results below 2**-126 (float32 subnormals) are where the bit-level rounding would
    round twice; inputs or tables with nonzero entries below 2**-33 send the chunk to round_once,
    and every result is still the nearest bfloat16 to the formula. "midpoint" builds the failing
    case: x = 2**-120 times cos = 2**-14 (1 + 2**-23) is 2**-134 + 2**-157, just above the
    midpoint between 0 and bfloat16's smallest subnormal 2**-133, so the nearest value is 2**-133;
    rounding to float32 first (granularity 2**-149 there) lands on the midpoint, then on 0."""
    g = torch.Generator().manual_seed(31)
    x = torch.randn(3, 4, 64, 16, generator=g, dtype=F64)
    cos, sin = pc.rope_cos_sin(torch.arange(64), 16)
    if where == "x":
        x = x * 2.0**-125  # results near the bottom of bfloat16's range
        x[0, 0, 0, 0] = 1.0
    elif where == "table":
        cos, sin = cos * 2.0**-124, sin * 2.0**-124
    else:
        x = torch.zeros(1, 1, 2, 16, dtype=F64)
        x[0, 0, 0, 0] = 2.0**-120
        cos, sin = cos[:2].clone(), sin[:2].clone()  # position 0: sin is 0
        cos[0, 0] = 2.0**-14 * (1 + 2.0**-23)
    xb = x.to(torch.bfloat16)
    got = pc.apply_rope(xb, cos, sin, fused=False)
    exact = xb.double() * cos.double() + turn90(xb.double(), "half") * sin.double()
    assert bool(((exact.abs() < 2.0**-126) & (exact != 0)).any())  # the case is really exercised
    assert bool(is_nearest(got, exact, 0.0).all())
    if where == "midpoint":
        assert got[0, 0, 0, 0].item() == 2.0**-133


# --------------------------------------------------------------------------- 8b. fused kernel


def _tables(table_shape, b, s, d, layout, dtype):
    positions = (
        torch.arange(s) if table_shape != "b 1 s d" else torch.arange(b * s).reshape(b, s) * 3
    )
    cos, sin = pc.rope_cos_sin(positions, d, layout=layout, dtype=dtype)
    return {
        "s d": (cos, sin),
        "1 1 s d": (cos[None, None], sin[None, None]),
        "b 1 s d": (cos[:, None], sin[:, None]),
        "1 d": (cos[3:4], sin[3:4]),
    }[table_shape]


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("table_shape", ["s d", "1 1 s d", "b 1 s d", "1 d"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_fused_kernel_equals_the_formula_bit_for_bit(dtype, table_shape, layout):
    """fused=True (the native kernel) gives x * cos + turn90(x) * sin exactly: every product and
    sum rounded once, as in the formula (RoFormer Eq. 34), whatever the table shape."""
    b, h, s, d = 3, 5, 7, 6
    contiguous = table_shape != "1 1 s d"  # one case with strides from a (b, s, h, d) projection
    x = (
        randn(b, h, s, d, seed=23, dtype=dtype)
        if contiguous
        else randn(b, s, h, d, seed=23, dtype=dtype).transpose(1, 2)
    )
    cos, sin = _tables(table_shape, b, s, d, layout, F64 if dtype == F64 else torch.float32)
    got = pc.apply_rope(x, cos, sin, layout=layout, fused=True)
    assert got.dtype == dtype and got.shape == x.shape and got.is_contiguous()
    assert torch.equal(got, x * cos + turn90(x, layout) * sin)
    assert torch.equal(
        x, randn(b, h, s, d, seed=23, dtype=dtype) if contiguous else x
    )  # input untouched


class _Spy:
    """Stands in for native.kernel: records the calls that reach the native kernel."""

    def __init__(self):
        self.real, self.calls = native.kernel, []
        self.error = None

    def library(self):
        return self.real.library()

    def rotate(self, x, cos, sin, layout, out):
        self.calls.append("in place" if out is x else "out")
        return self.real.rotate(x, cos, sin, layout, out)


def test_auto_mode_takes_the_native_kernel_without_autograd_only(monkeypatch):
    """fused=None takes the native kernel for CPU inputs of every floating dtype and table shape
    (converted to the working dtype first) when there is no autograd; fused=False and autograd
    callers never do, and every route gives the formula's values."""
    spy = _Spy()
    monkeypatch.setattr(native, "kernel", spy)
    cos, sin = pc.rope_cos_sin(torch.arange(5), 8)
    x = randn(2, 5, 8, seed=24, dtype=torch.float32)
    expected = x * cos + turn90(x, "half") * sin
    assert torch.equal(pc.apply_rope(x, cos, sin), expected) and len(spy.calls) == 1
    pc.apply_rope(x.to(torch.bfloat16), cos, sin)  # float64 working dtype: native too
    pc.apply_rope(x, cos.expand(2, 5, 8), sin.expand(2, 5, 8))  # per-batch tables
    assert len(spy.calls) == 3
    assert torch.equal(pc.apply_rope(x, cos, sin, fused=False), expected)
    with_grad = pc.apply_rope(x.clone().requires_grad_(), cos, sin)  # autograd: the formula
    assert with_grad.requires_grad and len(spy.calls) == 3
    assert torch.equal(with_grad.detach(), expected)


def test_auto_mode_falls_back_silently_when_the_native_kernel_cannot_be_built(
    monkeypatch, tmp_path
):
    """Without a C compiler, auto mode uses the eager path (same values) without a warning in
    the reader's notebook; native.status() names the reason; fused=True raises a RuntimeError
    naming it instead."""
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("POSENC_NATIVE", raising=False)
    broken = native.NativeKernel(compiler="no-such-c-compiler-posenc")
    monkeypatch.setattr(native, "kernel", broken)
    x = randn(2, 5, 8, seed=25, dtype=torch.float32)
    cos, sin = pc.rope_cos_sin(torch.arange(5), 8)
    expected = x * cos + turn90(x, "half") * sin
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(pc.apply_rope(x, cos, sin), expected)
        assert torch.equal(pc.apply_rope(x, cos, sin), expected)
    state = native.status()
    assert not state.available
    assert "no C compiler 'no-such-c-compiler-posenc'" in state.reason
    with pytest.raises(
        RuntimeError, match=r"apply_rope\(fused=True\): the native kernel is unavailable: "
    ):
        pc.apply_rope(x, cos, sin, fused=True)


def test_apply_rope_inside_a_compiled_model_traces_as_one_graph():
    """Under torch.compile of the caller, apply_rope is the plain formula (no chunk loop, no
    nested compile), so fullgraph=True compiles and the values are unchanged."""
    x = randn(2, 3, 7, 8, seed=26, dtype=torch.float32)
    cos, sin = pc.rope_cos_sin(torch.arange(7), 8)

    def block(t):
        return pc.apply_rope(t, cos, sin) * 2.0

    compiled = torch.compile(block, fullgraph=True, dynamic=False)
    assert torch.equal(compiled(x), (x * cos + turn90(x, "half") * sin) * 2.0)


# --------------------------------------------------------------------------- 8c. scaling as data


def test_unscaled_frequencies_are_the_sinusoidal_frequencies():
    """RoPE's theta_i = base**(-2i/d) are the sinusoidal omega_i (Vaswani et al. 2017, Sec. 3.5):
    the same float64 values, bit for bit, for every head_dim and base (chapter 3 relies on it)."""
    for head_dim in list(range(2, 130, 2)) + [192, 256, 512]:
        for base in (1.0001, 2.0, 10.0, 1234.5, 10000.0, 500000.0, 1e6, 1e9):
            assert torch.equal(
                pc.rope_frequencies(head_dim, base=base),
                pc.sinusoidal_frequencies(head_dim, base=base),
            )


def test_parse_scaling_gives_a_frozen_rope_scaling_with_hugging_faces_defaults():
    """A Hugging Face dict becomes a RopeScaling whose attributes are its keys; YaRN's absent
    keys take transformers' defaults (beta_fast 32, beta_slow 1, truncate True); the legacy key
    ``type`` is read as ``rope_type``; keys the type does not use are ignored."""
    yarn = pc.rope.parse_scaling(
        {"type": "yarn", "factor": 4, "original_max_position_embeddings": 64, "low_freq_factor": 9}
    )
    assert isinstance(yarn, pc.RopeScaling)
    assert (yarn.rope_type, yarn.factor, yarn.original_max_position_embeddings) == ("yarn", 4.0, 64)
    assert (yarn.beta_fast, yarn.beta_slow, yarn.truncate) == (32.0, 1.0, True)
    assert yarn.low_freq_factor is None and yarn.attention_factor is None
    assert yarn.attention_scaling == pytest.approx(0.1 * math.log(4.0) + 1.0, rel=1e-15)
    assert yarn == pc.RopeScaling("yarn", factor=4.0, original_max_position_embeddings=64)
    with pytest.raises(AttributeError):
        yarn.factor = 8.0
    assert pc.rope.parse_scaling(None) == pc.RopeScaling() and pc.RopeScaling().factor is None
    assert pc.rope.parse_scaling(yarn) is yarn
    assert yarn.to_dict() == {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 64,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": True,
    }
    assert pc.rope.parse_scaling(yarn.to_dict()) == yarn


@pytest.mark.parametrize("scaling", STATIC_SCALINGS[1:], ids=SCALING_IDS[1:])
def test_a_rope_scaling_and_its_dict_give_the_same_numbers(scaling):
    """Every entry point takes the parsed RopeScaling as well as the dict, with identical results;
    RotaryEmbedding keeps only the parsed form."""
    parsed = pc.rope.parse_scaling(scaling)
    for fn in (pc.rope_frequencies, lambda d, **kw: pc.rope_cos_sin([0, 3, 70], d, **kw)[1]):
        assert torch.equal(fn(16, scaling=parsed), fn(16, scaling=scaling))
    module = pc.RotaryEmbedding(16, scaling=scaling)
    assert module.scaling == parsed
    assert not any(isinstance(v, dict) and v == scaling for v in vars(module).values())
    q = randn(1, 2, 5, 16, seed=40, dtype=torch.float32)
    for a, b in zip(module(q, q, 3), pc.RotaryEmbedding(16, scaling=parsed)(q, q, 3)):
        assert torch.equal(a, b)


@pytest.mark.parametrize("scaling", STATIC_SCALINGS[1:], ids=SCALING_IDS[1:])
def test_set_scaling_gives_the_module_built_with_that_scaling(scaling):
    """Switching a module's scaling after its tables were cached (a trained model switched to PI
    or YaRN at inference) gives what a module built with the scaling gives, and back again."""
    q = randn(1, 2, 40, 16, seed=41, dtype=torch.float32)
    module = pc.RotaryEmbedding(16)
    plain = module(q, q)  # fills the cache for positions 0 .. 39
    module.set_scaling(scaling)
    for a, b in zip(module(q, q), pc.RotaryEmbedding(16, scaling=scaling)(q, q)):
        assert torch.equal(a, b)
    module.set_scaling(None)
    for a, b in zip(module(q, q), plain):
        assert torch.equal(a, b)


def test_set_scaling_refuses_what_the_constructor_refuses_and_keeps_the_old_one():
    module = pc.RotaryEmbedding(16, scaling={"rope_type": "linear", "factor": 2.0})
    with pytest.raises(ValueError, match="factor"):
        module.set_scaling({"rope_type": "linear", "factor": -1.0})
    assert module.scaling == pc.rope.parse_scaling({"rope_type": "linear", "factor": 2.0})


def test_a_new_rope_type_is_one_function_and_one_table_entry(monkeypatch):
    """Registering a function in VARIANTS is all it takes: parse_scaling accepts the type, and
    rope_frequencies, rope_cos_sin and RotaryEmbedding use it (here theta_i / factor**2)."""
    from posenc_core.rope import scaling as scaling_mod

    def squared_inv_freq(base, head_dim, scaling, seq_len):
        return pc.sinusoidal_frequencies(head_dim, base=base) / scaling.factor**2

    monkeypatch.setitem(
        scaling_mod.VARIANTS, "squared", scaling_mod.Variant(squared_inv_freq, ("factor",))
    )
    sq = {"rope_type": "squared", "factor": 3.0}
    expected = [10000.0 ** (-2 * i / 8) / 9.0 for i in range(4)]  # Python math
    np.testing.assert_allclose(pc.rope_frequencies(8, scaling=sq).numpy(), expected, rtol=1e-15)
    x = randn(1, 4, 8, seed=41)
    cos, sin = pc.rope_cos_sin(torch.arange(4), 8, scaling=sq, dtype=F64)
    got, _ = pc.RotaryEmbedding(8, scaling=sq)(x, x)
    assert torch.equal(got, pc.apply_rope(x, cos, sin))
    with pytest.raises(ValueError, match=r"'squared'.*needs the key 'factor'"):
        pc.rope.parse_scaling({"rope_type": "squared"})


# --------------------------------------------------------------------------- 9. bad input

_X = torch.zeros(2, 5, 8)
_COS = torch.zeros(5, 8)
_Q = torch.zeros(1, 2, 3, 8)


def _llama3(**kw):
    return {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
        **kw,
    }


BAD = [
    ("odd head_dim", lambda: pc.rope_frequencies(7), ValueError, r"head_dim.*even.*7"),
    ("odd head_dim module", lambda: pc.RotaryEmbedding(7), ValueError, r"head_dim.*7"),
    ("odd head_dim cos_sin", lambda: pc.rope_cos_sin([0, 1], 5), ValueError, r"head_dim.*5"),
    ("zero head_dim", lambda: pc.rope_frequencies(0), ValueError, r"head_dim.*0"),
    ("negative head_dim", lambda: pc.rope_frequencies(-4), ValueError, r"head_dim.*-4"),
    ("float head_dim", lambda: pc.rope_frequencies(2.5), TypeError, r"head_dim.*2\.5"),
    ("bool head_dim", lambda: pc.rope_frequencies(True), TypeError, r"head_dim.*True"),
    (
        "base one",
        lambda: pc.rope_frequencies(8, base=1.0),
        ValueError,
        r"base.*greater than 1.*1\.0",
    ),
    ("base below one", lambda: pc.rope_cos_sin([0], 8, base=0.5), ValueError, r"base.*0\.5"),
    ("negative base", lambda: pc.RotaryEmbedding(8, base=-10000.0), ValueError, r"base.*-10000"),
    ("nan base", lambda: pc.rope_frequencies(8, base=float("nan")), ValueError, r"base.*nan"),
    ("inf base", lambda: pc.rope_frequencies(8, base=float("inf")), ValueError, r"base.*inf"),
    ("string base", lambda: pc.rope_frequencies(8, base="10000"), TypeError, r"base.*'10000'"),
    (
        "layout cos_sin",
        lambda: pc.rope_cos_sin([0], 8, layout="neox"),
        ValueError,
        r"layout.*'half'.*'interleaved'.*'neox'",
    ),
    (
        "layout apply",
        lambda: pc.apply_rope(_X, _COS, _COS, layout="gptj"),
        ValueError,
        r"layout.*'half'.*'interleaved'.*'gptj'",
    ),
    (
        "layout rotate",
        lambda: pc.rotate_pairs(_X, layout="Half"),
        ValueError,
        r"layout.*'half'.*'interleaved'.*'Half'",
    ),
    (
        "layout module",
        lambda: pc.RotaryEmbedding(8, layout=None),
        ValueError,
        r"layout.*'half'.*'interleaved'.*None",
    ),
    (
        "permute to",
        lambda: pc.permute_qk_weight(torch.zeros(16, 4), 2, to="meta"),
        ValueError,
        r"to.*'half'.*'interleaved'.*'meta'",
    ),
    (
        "rope_type",
        lambda: pc.rope_frequencies(8, scaling={"rope_type": "mystery", "factor": 2.0}),
        ValueError,
        r"rope_type.*'linear'.*'ntk'.*'dynamic'.*'yarn'.*'llama3'.*'longrope'.*'mystery'",
    ),
    (
        "legacy type",
        lambda: pc.rope.parse_scaling({"type": "su", "factor": 2.0}),
        ValueError,
        r"rope_type.*'yarn'.*'su'",
    ),
    (
        "factor below one",
        lambda: pc.rope_frequencies(8, scaling={"rope_type": "linear", "factor": 0.5}),
        ValueError,
        r"factor.*0\.5",
    ),
    (
        "factor missing",
        lambda: pc.rope_frequencies(8, scaling={"rope_type": "linear"}),
        ValueError,
        r"'factor'",
    ),
    (
        "yarn without L0",
        lambda: pc.rope_frequencies(8, scaling={"rope_type": "yarn", "factor": 4.0}),
        ValueError,
        r"'yarn'.*original_max_position_embeddings",
    ),
    (
        "llama3 without L0",
        lambda: pc.rope_frequencies(
            8,
            scaling={k: v for k, v in _llama3().items() if k != "original_max_position_embeddings"},
        ),
        ValueError,
        r"'llama3'.*original_max_position_embeddings",
    ),
    (
        "dynamic without L0",
        lambda: pc.RotaryEmbedding(8, scaling={"rope_type": "dynamic", "factor": 2.0}),
        ValueError,
        r"'dynamic'.*original_max_position_embeddings",
    ),
    (
        "llama3 high < low",
        lambda: pc.rope_frequencies(8, scaling=_llama3(low_freq_factor=4.0, high_freq_factor=1.0)),
        ValueError,
        r"high_freq_factor.*low_freq_factor.*low=4\.0, high=1\.0",
    ),
    (
        "llama3 low <= 0",
        lambda: pc.rope_frequencies(8, scaling=_llama3(low_freq_factor=0.0, high_freq_factor=2.0)),
        ValueError,
        r"high_freq_factor >= low_freq_factor > 0.*low=0\.0, high=2\.0",
    ),
    (
        "rope_theta",
        lambda: pc.rope_frequencies(
            8, base=10000.0, scaling={"rope_type": "default", "rope_theta": 500000.0}
        ),
        ValueError,
        r"rope_theta.*500000.*base=10000",
    ),
    (
        "rope_theta module",
        lambda: pc.RotaryEmbedding(8, scaling=_llama3(rope_theta=500000.0)),
        ValueError,
        r"rope_theta.*500000.*base=10000",
    ),
    (
        "nan position",
        lambda: pc.rope_cos_sin(torch.tensor([0.0, float("nan")]), 8),
        ValueError,
        r"positions.*nan",
    ),
    (
        "inf position",
        lambda: pc.rope_cos_sin([0.0, float("inf")], 8),
        ValueError,
        r"positions.*inf",
    ),
    (
        "-inf angles",
        lambda: pc.rope.rope_angles(torch.tensor([float("-inf")]), 8),
        ValueError,
        r"positions.*-inf",
    ),
    ("bool position", lambda: pc.rope_cos_sin(True, 8), TypeError, r"positions.*bool"),
    (
        "nan position module",
        lambda: pc.RotaryEmbedding(8)(_Q, _Q, positions=torch.tensor([0.0, 1.0, float("nan")])),
        ValueError,
        r"positions.*nan",
    ),
    (
        "inf position module",
        lambda: pc.RotaryEmbedding(8)(_Q, _Q, positions=torch.tensor([[0.0, float("inf"), 1.0]])),
        ValueError,
        r"positions.*inf",
    ),
    (
        "positions shape module",
        lambda: pc.RotaryEmbedding(8)(_Q, _Q, positions=torch.arange(4)),
        ValueError,
        r"positions.*s=3.*\(4,\)",
    ),
    (
        "cos does not broadcast",
        lambda: pc.apply_rope(_X, torch.zeros(6, 8), torch.zeros(6, 8)),
        ValueError,
        r"cos and sin.*\(6, 8\).*x.*\(2, 5, 8\)",
    ),
    (
        "cos wider than x",
        lambda: pc.apply_rope(_X, torch.zeros(5, 10), torch.zeros(5, 10)),
        ValueError,
        r"cos and sin must have an even last dimension r.*2 <= r <= head_dim=8.*\(5, 10\)",
    ),
    (
        "cos odd rotary width",
        lambda: pc.apply_rope(_X, torch.zeros(5, 5), torch.zeros(5, 5)),
        ValueError,
        r"even last dimension r.*head_dim=8.*got shape \(5, 5\)",
    ),
    (
        "cos empty rotary width",
        lambda: pc.apply_rope(_X, torch.zeros(5, 0), torch.zeros(5, 0)),
        ValueError,
        r"2 <= r <= head_dim=8.*got shape \(5, 0\)",
    ),
    (
        "partial tables do not broadcast",
        lambda: pc.apply_rope(_X, torch.zeros(6, 4), torch.zeros(6, 4)),
        ValueError,
        r"cos and sin of shape \(6, 4\) must broadcast to x of shape \(2, 5, 8\).*first 4",
    ),
    (
        "out of another shape",
        lambda: pc.apply_rope(_X, _COS, _COS, out=torch.zeros(2, 5, 6)),
        ValueError,
        r"out must have the shape, dtype and device of x \(\(2, 5, 8\), torch\.float32, cpu\), "
        r"got \(2, 5, 6\), torch\.float32, cpu",
    ),
    (
        "out of another dtype",
        lambda: pc.apply_rope(_X, _COS, _COS, out=torch.zeros(2, 5, 8, dtype=torch.float64)),
        ValueError,
        r"out must have the shape, dtype.*got \(2, 5, 8\), torch\.float64",
    ),
    (
        "out not a tensor",
        lambda: pc.apply_rope(_X, _COS, _COS, out=[0.0]),
        TypeError,
        r"out must be None or a torch\.Tensor, got list",
    ),
    (
        "out partly overlapping x",
        lambda: pc.apply_rope((buf := torch.zeros(3, 5, 8))[:2], _COS, _COS, out=buf[1:]),
        ValueError,
        r"out must be x itself .* or share no memory with x, cos or sin; got an out that partly",
    ),
    (
        "out overlapping the table",
        lambda: pc.apply_rope(torch.zeros(1, 5, 8), (t := torch.zeros(1, 5, 8))[0], t[0], out=t),
        ValueError,
        r"partly overlaps",
    ),
    (
        "out with autograd",
        lambda: pc.apply_rope(_X.clone().requires_grad_(), _COS, _COS, out=torch.zeros(2, 5, 8)),
        ValueError,
        r"out= does not support autograd.*requires grad",
    ),
    (
        "cos vs sin",
        lambda: pc.apply_rope(_X, _COS, torch.zeros(1, 8)),
        ValueError,
        r"cos and sin.*\(5, 8\).*\(1, 8\)",
    ),
    (
        "integer x",
        lambda: pc.apply_rope(torch.zeros(2, 5, 8, dtype=torch.int64), _COS, _COS),
        TypeError,
        r"x must.*floating.*torch\.int64",
    ),
    (
        "integer cos",
        lambda: pc.apply_rope(_X, _COS.long(), _COS),
        TypeError,
        r"cos must.*torch\.int64",
    ),
    ("integer q", lambda: pc.RotaryEmbedding(8)(_Q.int(), _Q), TypeError, r"q must.*torch\.int32"),
    (
        "fused not a bool",
        lambda: pc.apply_rope(_X, _COS, _COS, fused=1),
        TypeError,
        r"fused must be None, True or False, got 1",
    ),
    (
        "fused with autograd",
        lambda: pc.apply_rope(_X.clone().requires_grad_(), _COS, _COS, fused=True),
        ValueError,
        r"fused=True computes without autograd",
    ),
    (
        "fused off the CPU",
        lambda: pc.apply_rope(_X.to("meta"), _COS.to("meta"), _COS.to("meta"), fused=True),
        ValueError,
        r"fused=True is for CPU tensors, got x on meta",
    ),
    (
        "odd x width",
        lambda: pc.apply_rope(torch.zeros(5, 7), torch.zeros(5, 7), torch.zeros(5, 7)),
        ValueError,
        r"head_dim.*7",
    ),
    (
        "int dtype",
        lambda: pc.rope_cos_sin([0], 8, dtype=torch.int32),
        TypeError,
        r"dtype.*floating.*torch\.int32",
    ),
    (
        "complex dtype",
        lambda: pc.rope_cos_sin([0], 8, dtype=torch.complex64),
        TypeError,
        r"dtype.*torch\.complex64",
    ),
    (
        "string dtype",
        lambda: pc.rope_cos_sin([0], 8, dtype="float32"),
        TypeError,
        r"dtype.*torch\.dtype.*'float32'",
    ),
    (
        "q head_dim",
        lambda: pc.RotaryEmbedding(8)(torch.zeros(1, 2, 3, 6), _Q),
        ValueError,
        r"q .*head_dim=8.*\(1, 2, 3, 6\)",
    ),
    (
        "k head_dim",
        lambda: pc.RotaryEmbedding(8)(_Q, torch.zeros(1, 2, 3, 16)),
        ValueError,
        r"k .*head_dim=8.*\(1, 2, 3, 16\)",
    ),
    (
        "q, k lengths",
        lambda: pc.RotaryEmbedding(8)(_Q, torch.zeros(1, 2, 4, 8)),
        ValueError,
        r"q and k.*sequence length.*3 and 4",
    ),
    (
        "negative offset",
        lambda: pc.RotaryEmbedding(8)(_Q, _Q, positions=-1),
        ValueError,
        r"positions.*offset.*-1",
    ),
    ("n_heads", lambda: pc.permute_qk_weight(torch.zeros(12, 4), 5), ValueError, r"n_heads=5"),
    (
        "odd width rotate",
        lambda: pc.rotate_pairs(torch.zeros(3, 7)),
        ValueError,
        r"x\.shape\[-1\].*even.*7",
    ),
    (
        "odd width rotate interleaved",
        lambda: pc.rotate_pairs(torch.zeros(3, 7), layout="interleaved"),
        ValueError,
        r"x\.shape\[-1\].*7",
    ),
    ("odd perm", lambda: pc.rope.interleaved_to_half(7), ValueError, r"head_dim.*even.*7"),
    ("zero perm", lambda: pc.rope.half_to_interleaved(0), ValueError, r"head_dim.*0"),
    ("bool perm", lambda: pc.rope.interleaved_to_half(True), TypeError, r"head_dim.*True"),
    (
        "bool positions module",
        lambda: pc.RotaryEmbedding(8)(_Q, _Q, positions=torch.tensor([False, True, True])),
        TypeError,
        r"positions must hold integers or real numbers, got dtype torch\.bool",
    ),
    (
        "complex positions module",
        lambda: pc.RotaryEmbedding(8)(_Q, _Q, positions=torch.zeros(3, dtype=torch.complex64)),
        TypeError,
        r"positions.*torch\.complex64",
    ),
    (
        "positions batch module",
        lambda: pc.RotaryEmbedding(8)(_Q, _Q, positions=torch.zeros(2, 3, dtype=torch.long)),
        ValueError,
        r"positions of shape \(2, 3\) give 2 sequences, "
        r"but q of shape \(1, 2, 3, 8\) has batch size 1",
    ),
    (
        "mscale string",
        lambda: pc.rope.parse_scaling(
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 64,
                "mscale": "a",
                "mscale_all_dim": 1,
            }
        ),
        TypeError,
        r"scaling\['mscale'\].*'a'",
    ),
    (
        "mscale negative",
        lambda: pc.rope.parse_scaling(
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 64,
                "mscale": 1,
                "mscale_all_dim": -1,
            }
        ),
        ValueError,
        r"scaling\['mscale_all_dim'\] must be >= 0.*-1",
    ),
    (
        "partial rotary string",
        lambda: pc.rope.parse_scaling(
            {"rope_type": "linear", "factor": 2, "partial_rotary_factor": "x"}
        ),
        TypeError,
        r"partial_rotary_factor.*'x'",
    ),
    (
        "partial rotary",
        lambda: pc.rope.parse_scaling(
            {"rope_type": "linear", "factor": 2, "partial_rotary_factor": 0.5}
        ),
        ValueError,
        r"partial_rotary_factor.*1\.0.*0\.5",
    ),
    (
        "truncate string",
        lambda: pc.rope.parse_scaling(
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 64,
                "truncate": "no",
            }
        ),
        TypeError,
        r"scaling\['truncate'\] must be True or False.*'no'",
    ),
    (
        "attention_factor negative",
        lambda: pc.rope.rope_attention_factor(
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 64,
                "attention_factor": -1,
            }
        ),
        ValueError,
        r"attention_factor.*> 0.*-1",
    ),
    (
        "attention_factor nan",
        lambda: pc.rope.rope_attention_factor(
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 64,
                "attention_factor": float("nan"),
            }
        ),
        ValueError,
        r"attention_factor.*finite.*nan",
    ),
    (
        "scaling not a dict",
        lambda: pc.rope.rope_attention_factor([("rope_type", "yarn")]),
        TypeError,
        r"scaling.*list",
    ),
    ("negative seq_len", lambda: pc.rope_frequencies(8, seq_len=-5), ValueError, r"seq_len.*-5"),
    ("float seq_len", lambda: pc.rope_cos_sin([0], 8, seq_len=2.5), TypeError, r"seq_len.*2\.5"),
    (
        "bool seq_len",
        lambda: pc.rope.rope_angles([0], 8, seq_len=True),
        TypeError,
        r"seq_len.*True",
    ),
    (
        "RopeScaling without its factor",
        lambda: pc.RopeScaling("linear"),
        ValueError,
        r"rope_type 'linear' needs factor, got None",
    ),
    (
        "RopeScaling with a parameter its type does not use",
        lambda: pc.RopeScaling("linear", factor=2.0, beta_fast=8.0),
        ValueError,
        r"rope_type 'linear' does not use beta_fast, got beta_fast=8\.0; it uses factor",
    ),
    (
        "RopeScaling type",
        lambda: pc.RopeScaling("mystery", factor=2.0),
        ValueError,
        r"rope_type.*'default'.*'llama3'.*'longrope'.*'mystery'",
    ),
    (
        "RopeScaling factor",
        lambda: pc.RopeScaling("ntk", factor=0.5),
        ValueError,
        r"scaling\['factor'\].*>= 1.*0\.5",
    ),
    (
        "per-batch positions with 2-D q",
        lambda: pc.RotaryEmbedding(8)(_Q[0, 0], _Q[0, 0], positions=torch.zeros(1, 3)),
        ValueError,
        r"positions of shape \(1, 3\) give tables of shape \(1, 3, 8\) that do not broadcast "
        r"to q of shape \(3, 8\)",
    ),
    (
        "ntk with head_dim 2 at construction",
        lambda: pc.RotaryEmbedding(2, scaling={"rope_type": "ntk", "factor": 2.0}),
        ValueError,
        r"head_dim must be > 2 for ntk.*2",
    ),
]


@pytest.mark.parametrize("call, exc, pattern", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_refused_with_a_message_naming_it(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
