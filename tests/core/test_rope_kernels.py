"""apply_rope's partial rotary, ``out=`` (in place, into a KV cache) and its fast paths.

Partial rotary (GPT-NeoX/Pythia, GPT-J, Phi): tables of width r < d rotate the first r dims
and pass the rest through bit for bit. The references are Hugging Face's own functions:
GPT-NeoX's ``apply_rotary_pos_emb`` (``rotate_half`` on ``q[..., :r]``, then ``cat``) for
``layout="half"`` and GPT-J's (``rotate_every_two`` on the first ``rotary_dim`` dims) for
``"interleaved"``; for float32/float64 every path must equal them bit for bit, since both
evaluate x * cos + rotate_pairs(x) * sin with the same roundings.
"""

import pytest
import torch
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_rope
from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_rope

import posenc_core as pc
from posenc_core.rope import kernels

LAYOUTS = ("half", "interleaved")
F64 = torch.float64


def randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).to(dtype)


def bits_equal(a, b):
    """Equal bit for bit (signed zeros and NaN payloads included)."""
    view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return a.dtype == b.dtype and torch.equal(a.view(view), b.view(view))


def hugging_face(x, positions, r, layout):
    """Hugging Face's partial rotary on x (b, h, s, d): GPT-NeoX's function for the half layout,
    GPT-J's (which takes (b, s, h, d) and per-pair sin/cos) for the interleaved one."""
    if layout == "half":
        cos, sin = pc.rope_cos_sin(positions, r, dtype=x.dtype)  # (b, s, r): HF's cat(f, f)
        return neox_rope(x, x, cos, sin)[0]
    cos, sin = pc.rope_cos_sin(positions, r, layout="interleaved", dtype=x.dtype)
    cos, sin = cos[..., 0::2], sin[..., 0::2]  # (b, s, r/2): GPT-J's sincos halves
    xt = x.transpose(1, 2)  # (b, s, h, d), GPT-J's layout
    rot = gptj_rope(xt[..., :r], sin, cos)  # as GPTJAttention does with rotary_dim
    return torch.cat((rot, xt[..., r:]), -1).transpose(1, 2)


def tables(positions, r, layout, dtype, shape):
    cos, sin = pc.rope_cos_sin(positions, r, layout=layout, dtype=dtype)  # (b, s, r)
    if shape == "s r":
        return cos[0], sin[0]
    return cos[:, None], sin[:, None]  # (b, 1, s, r)


# --------------------------------------------------------------------------- partial rotary


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("r", [2, 8, 24])
@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("shape", ["s r", "b 1 s r"])
def test_partial_rotary_equals_hugging_faces_bit_for_bit(layout, r, dtype, shape):
    """Tables of width r rotate x[..., :r] as GPT-NeoX (half) and GPT-J (interleaved) do and
    pass x[..., r:] through unchanged, on the eager path, bit for bit; r = d is the full
    rotation."""
    b, h, s, d = 2, 3, 5, 24
    positions = torch.arange(b * s).reshape(b, s) * 7 if shape == "b 1 s r" else torch.arange(s)
    x = randn(b, h, s, d, seed=r, dtype=dtype)
    x[0, 0, 0, -1] = -0.0  # a signed zero in the pass-through part
    cos, sin = tables(positions.expand(b, s), r, layout, dtype, shape)
    expected = hugging_face(x, positions.expand(b, s), r, layout)
    got = pc.apply_rope(x, cos, sin, layout=layout, fused=False)
    assert bits_equal(got, expected)
    assert bits_equal(got[..., r:], x[..., r:])
    assert not torch.equal(got[..., :r], x[..., :r])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_partial_rotary_keeps_scores_relative_and_the_rest_untouched(layout):
    """With r < d, the rotated part's scores depend only on m - n (RoFormer Eq. 16) and the
    pass-through part's dot product does not depend on the positions at all."""
    d, r = 10, 4  # an odd number of pass-through dims is fine: they are not paired
    q, k = randn(1, d, seed=1, dtype=F64), randn(1, d, seed=2, dtype=F64)

    def parts(m, n):
        cq, sq = pc.rope_cos_sin([m], r, layout=layout, dtype=F64)
        ck, sk = pc.rope_cos_sin([n], r, layout=layout, dtype=F64)
        rq = pc.apply_rope(q, cq, sq, layout=layout)
        rk = pc.apply_rope(k, ck, sk, layout=layout)
        return float((rq[..., :r] * rk[..., :r]).sum()), float((rq[..., r:] * rk[..., r:]).sum())

    rotated, passed = parts(3, 10)
    assert rotated == pytest.approx(parts(103, 110)[0], abs=1e-12)
    assert rotated != pytest.approx(parts(3, 11)[0], abs=1e-6)
    assert passed == parts(1000, 5)[1] == float((q[..., r:] * k[..., r:]).sum())


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("r", [16, 64])
def test_fused_kernel_partial_and_full_equal_hugging_face(layout, r):
    """The compiled kernel (fused=True), for the full head and for a quarter of it (GPT-NeoX's
    rotary_pct = 0.25), gives Hugging Face's values bit for bit."""
    b, h, s, d = 2, 3, 9, 64
    positions = torch.arange(s).expand(b, s)
    x = randn(b, h, s, d, seed=3)
    cos, sin = tables(positions, r, layout, torch.float32, "s r")
    got = pc.apply_rope(x, cos, sin, layout=layout, fused=True)
    assert bits_equal(got, hugging_face(x, positions, r, layout))


# --------------------------------------------------------------------------- out=


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("r", [32, 8])
def test_out_and_in_place_equal_the_out_of_place_result(fused, r):
    """out=buf writes into buf and returns it; out=x rotates in place; both equal the
    out-of-place result bit for bit, with partial rotary too (the pass-through part of an
    out= buffer is written, of x in place left alone)."""
    x = randn(2, 3, 7, 32, seed=4)
    cos, sin = pc.rope_cos_sin(torch.arange(7), r)
    expected = pc.apply_rope(x, cos, sin, fused=False)
    buf = torch.full_like(x, float("nan"))
    assert pc.apply_rope(x, cos, sin, fused=fused, out=buf) is buf
    assert bits_equal(buf, expected)
    y = x.clone()
    assert pc.apply_rope(y, cos, sin, fused=fused, out=y) is y
    assert bits_equal(y, expected)
    z = x.clone()  # another view of the same elements counts as in place
    assert pc.apply_rope(z, cos, sin, fused=fused, out=z.view(z.shape)).data_ptr() == z.data_ptr()
    assert bits_equal(z, expected)


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_keys_rotated_straight_into_a_kv_cache_slice(fused, dtype):
    """Decoding writes each new block of keys into a preallocated cache (b, h, T, d):
    out=cache[:, :, t0:t1] (not contiguous) gives the out-of-place result bit for bit and
    leaves the rest of the cache alone."""
    b, h, t_max, d = 2, 4, 16, 32
    cache = torch.zeros(b, h, t_max, d, dtype=dtype)
    expected = torch.zeros_like(cache)
    for t0, t1 in ((0, 5), (5, 6), (6, 11)):
        k = randn(b, h, t1 - t0, d, seed=t0, dtype=dtype)
        tab = torch.float32 if dtype == torch.float32 else dtype
        cos, sin = pc.rope_cos_sin(torch.arange(t0, t1), d, dtype=tab)
        block = cache[:, :, t0:t1]
        assert not block.is_contiguous()
        use_fused = fused and kernels.can_fuse(dtype, cos.dtype, sin.dtype)
        pc.apply_rope(k, cos, sin, fused=use_fused, out=block)
        expected[:, :, t0:t1] = pc.apply_rope(k, cos, sin, fused=False)
    assert bits_equal(cache, expected)
    assert not cache[:, :, 11:].any()


def test_auto_mode_fuses_large_inputs_for_out_too(monkeypatch):
    """fused=None takes the compiled kernel for a large out= call as for an out-of-place one."""
    calls = []
    real = kernels.fused_kernel

    class Spy:
        error = None

        def into(self, *args):
            calls.append("into")
            return real.into(*args)

        def in_place(self, *args):
            calls.append("in_place")
            return real.in_place(*args)

    monkeypatch.setattr(kernels, "fused_kernel", Spy())
    monkeypatch.setattr(kernels, "FUSED_MIN_ELEMENTS", 1)
    x = randn(2, 3, 7, 32, seed=5)
    cos, sin = pc.rope_cos_sin(torch.arange(7), 32)
    expected = pc.apply_rope(x, cos, sin, fused=False)
    buf = torch.empty_like(x)
    pc.apply_rope(x, cos, sin, out=buf)
    pc.apply_rope(x, cos, sin, out=x)
    assert calls == ["into", "in_place"]
    assert bits_equal(buf, expected) and bits_equal(x, expected)
