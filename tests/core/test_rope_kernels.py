"""apply_rope's partial rotary, ``out=`` (in place, into a KV cache) and its fast paths.

Partial rotary (GPT-NeoX/Pythia, GPT-J, Phi): tables of width r < d rotate the first r dims
and pass the rest through bit for bit. The references are Hugging Face's own functions:
GPT-NeoX's ``apply_rotary_pos_emb`` (``rotate_half`` on ``q[..., :r]``, then ``cat``) for
``layout="half"`` and GPT-J's (``rotate_every_two`` on the first ``rotary_dim`` dims) for
``"interleaved"``; for float32/float64 every path must equal them bit for bit, since both
evaluate x * cos + rotate_pairs(x) * sin with the same roundings.
"""

import math

import pytest
import torch
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_rope
from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_rope

import posenc_core as pc
from posenc_core.rope import native

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
        pc.apply_rope(k, cos, sin, fused=fused, out=block)
        expected[:, :, t0:t1] = pc.apply_rope(k, cos, sin, fused=False)
    assert bits_equal(cache, expected)
    assert not cache[:, :, 11:].any()


def test_auto_mode_rotates_out_and_in_place_natively(monkeypatch):
    """fused=None takes the native kernel for an out= call and for an in-place one (out is x,
    rotated without a temporary), with the out-of-place values."""
    calls = []
    real = native.kernel.rotate
    monkeypatch.setattr(
        native.kernel,
        "rotate",
        lambda x, c, s, layout, out: calls.append(out is x) or real(x, c, s, layout, out),
    )
    x = randn(2, 3, 7, 32, seed=5)
    cos, sin = pc.rope_cos_sin(torch.arange(7), 32)
    expected = pc.apply_rope(x, cos, sin, fused=False)
    buf = torch.empty_like(x)
    pc.apply_rope(x, cos, sin, out=buf)
    pc.apply_rope(x, cos, sin, out=x)
    assert calls == [False, True]
    assert bits_equal(buf, expected) and bits_equal(x, expected)


# --------------------------------------------------------------------------- bfloat16 / float16

LOW = {torch.bfloat16: (8, -126), torch.float16: (11, -14)}  # significant bits, min exponent


def exact_nearest(z, dtype):
    """The value of ``dtype`` nearest to the exact rational z (ties to even; subnormals and
    overflow as IEEE 754 rounds them), from the format's definition alone (a Fraction)."""
    from fractions import Fraction

    bits, emin = LOW[dtype]
    if z == 0:
        return 0.0
    a = abs(z)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # 2**e <= a < 2**(e + 2)
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - bits + 1)
    k, rest = divmod(a, quantum)
    if rest > quantum / 2 or (rest == quantum / 2 and k % 2 == 1):
        k += 1
    value = float(k * quantum)
    if value > torch.finfo(dtype).max:
        value = float("inf")
    return value if z > 0 else -value


def exact_rotation(x, cos, sin, layout):
    """Every element of the rotation correctly rounded, in exact rational arithmetic (Python
    fractions; the formula's x1 c1 - x2 s1 and x2 c2 + x1 s2 for each pair)."""
    from fractions import Fraction

    def first_second(t):
        h = t.shape[-1] // 2
        return (t[..., :h], t[..., h:]) if layout == "half" else (t[..., 0::2], t[..., 1::2])

    cos, sin = cos.expand(x.shape), sin.expand(x.shape)
    (x1, x2), (c1, c2), (s1, s2) = first_second(x), first_second(cos), first_second(sin)
    out = torch.empty(x.shape, dtype=F64)
    o1, o2 = first_second(out)
    flat = [t.double().reshape(-1).tolist() for t in (x1, x2, c1, c2, s1, s2)]
    first, second = [], []
    for a, b, ca, cb, sa, sb in zip(*flat):
        if not all(map(math.isfinite, (a, b, ca, cb, sa, sb))):
            first.append(math.nan)  # no rational value: compared with float64's instead
            second.append(math.nan)
            continue
        fa, fb = Fraction(a), Fraction(b)
        first.append(exact_nearest(fa * Fraction(ca) - fb * Fraction(sa), x.dtype))
        second.append(exact_nearest(fb * Fraction(cb) + fa * Fraction(sb), x.dtype))
    o1.copy_(torch.tensor(first, dtype=F64).reshape(o1.shape))
    o2.copy_(torch.tensor(second, dtype=F64).reshape(o2.shape))
    return out


def float64_rounded(x, cos, sin, layout):
    """The formula in float64, rounded once (posenc_core's round_once, checked against
    numpy's float64 -> float32 -> nearest in tests/core/test_rope.py): the correctly rounded
    value whenever float64 holds the sum exactly, and the reference for zeros, inf and NaN."""
    from posenc_core._numerics import round_once

    xd, cd, sd = x.double(), cos.double(), sin.double()
    return round_once(xd * cd + pc.rotate_pairs(xd, layout=layout) * sd, x.dtype)


def adversarial(dtype, s=40, d=32):
    """x (2, 3, s, d) and tables (s, d) of ``dtype`` with rows built to break a careless
    kernel: sums exactly at a midpoint of the dtype plus a tiny second product of either sign
    (or none), subnormal results, products that underflow float32 (bfloat16), huge values,
    overflow to inf, inf and NaN inputs, signed zeros; the other rows random with exponents
    spread widely."""
    g = torch.Generator().manual_seed(50)
    x = torch.randn(2, 3, s, d, generator=g, dtype=F64) * 2.0 ** torch.randint(
        -20, 20, (2, 3, s, d), generator=g
    )
    cos = torch.rand(s, d, generator=g, dtype=F64) * 2.0 ** torch.randint(
        -8, 1, (s, d), generator=g
    )
    sin = torch.rand(s, d, generator=g, dtype=F64) * 2.0 ** torch.randint(
        -8, 1, (s, d), generator=g
    )
    h = d // 2
    ulp = 2.0 ** -(LOW[dtype][0] - 1)

    def row(i, x1, x2, c, sn):  # every pair of row i: x1, x2 with cos c and sin sn
        x[..., i, :h], x[..., i, h:] = x1, x2
        cos[i], sin[i] = c, sn

    # x1 * c exactly a midpoint of the dtype, then a second product of either sign too small
    # for float32 (and, for the last of each, for float64) to hold the sum exactly
    if dtype == torch.bfloat16:  # (1 + 2**-7) * 1.5 = 1.10000011b: 9 bits
        mid_x, mid_c, tinies, sn = 1 + ulp, 1.5, [0.0, 2.0**-30, -(2.0**-30), 2.0**-60], 0.25
    else:  # 1025 * 1.5 = 1537.5, between float16's 1537 and 1538; 2**-48 is 59 bits below
        mid_x, mid_c, tinies, sn = 1025.0, 1.5, [0.0, 2.0**-20, -(2.0**-20), 2.0**-24], 2.0**-24
    for i, tiny in enumerate(tinies + [-tinies[-1]]):
        row(i, mid_x, tiny, mid_c, sn)  # first = midpoint - tiny * sn
    other_mid = 1 + 3 * ulp if dtype == torch.bfloat16 else 1027.0  # ties go the other way
    row(5, other_mid, -tinies[-1], mid_c, sn)
    if dtype == torch.bfloat16:
        row(6, 2.0**-70, 2.0**-80, 2.0**-60, 2.0**-62)  # products below 2**-126: fallback
        row(7, 2.0**-120, 3.0 * 2.0**-130, 0.75, 0.5)  # subnormal results
        row(8, 2.0**90, -(2.0**91), 0.5, 0.25)  # huge x
        row(14, 2.0**110, -(2.0**111), 0.5, 0.25)  # huger: fallback
        row(9, 3e38, 3e38, 1.0, 1.0)  # second product sum overflows to inf
    else:
        row(6, 2.0**-24, 3 * 2.0**-24, 0.5, 0.25)  # subnormal results at the midpoint
        row(7, 6e-5, -5e-5, 0.5, 0.75)  # results near the subnormal boundary 2**-14
        row(8, 65504.0, 65504.0, 0.75, 0.25)  # second = 65504: finite; first = 32752
        row(9, 65504.0, -65504.0, 1.0, 1.0)  # first: 131008 overflows to inf
    row(10, float("inf"), 1.0, 0.5, 0.25)
    row(11, float("nan"), 1.0, 0.5, 0.25)
    row(12, -0.0, 0.0, 0.5, 0.25)  # (-0) * c - 0 * s = -0; 0 * c + (-0) * s = 0
    row(13, -0.0, -0.0, 0.5, 0.0)
    return x.to(dtype), cos.to(dtype), sin.to(dtype)


def same_values(a, b):
    """Equal bit for bit, except that any NaN matches any NaN (payloads carry no value; torch's
    own conversions disagree on them)."""
    nan = a.isnan()
    return torch.equal(nan, b.isnan()) and bits_equal(a[~nan], b[~nan])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("with_fallback_row", [False, True])
def test_low_precision_kernel_rounds_adversarial_cases_correctly(dtype, with_fallback_row):
    """bfloat16/float16 x with tables of its dtype: the native kernel (exact float32 products,
    TwoSum, rounding to odd, then to nearest even) gives every element the correctly rounded
    value of the formula (exact rational arithmetic as the reference), ties, subnormals, huge
    values and overflow included; infinities, NaN and signed zeros are those of the float64
    formula. bfloat16 rows whose products could underflow float32 take the kernel's exact
    float64 path (counted), which must give the same; so must the eager path (exact_low)."""
    x, cos, sin = adversarial(dtype)
    if not with_fallback_row:  # bfloat16 rows 6, 7, 9 and 14 hold |x| the kernel hands on
        keep = [i for i in range(x.shape[-2]) if i not in (6, 7, 9, 14)]
        x, cos, sin = x[..., keep, :].contiguous(), cos[keep], sin[keep]
    got = pc.apply_rope(x, cos, sin, fused=True)
    exact_rows = native.kernel.rotate(x, cos, sin, "half", torch.empty_like(x))
    assert (exact_rows > 0) == (with_fallback_row and dtype == torch.bfloat16)
    assert same_values(got, pc.apply_rope(x, cos, sin, fused=False))
    f64 = float64_rounded(x, cos, sin, "half")
    exact = exact_rotation(x, cos, sin, "half")
    compare = exact.isfinite() & (exact != 0) | exact.isinf() & ~f64.isnan()
    assert torch.equal(got.double()[compare], exact[compare])
    rest = ~compare  # zeros (their sign), inf and NaN: as the float64 formula gives them
    assert bits_equal(got[rest & ~f64.isnan()], f64[rest & ~f64.isnan()])
    assert torch.equal(got.isnan(), f64.isnan())
    # the cases are really exercised: ties that float64 rounding alone gets wrong, -0 results
    assert not torch.equal(f64.double()[compare], exact[compare])
    assert bool((got.view(torch.int16) == -32768).any())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_low_precision_kernel_equals_rounded_float64_formula(dtype, layout):
    """On random unit-normal inputs with rope_cos_sin tables of the same dtype, shared (s, d)
    and broadcast (b, 1, s, d), the fused kernel equals the float64 formula rounded once, bit
    for bit (float64 holds these sums exactly)."""
    b, h, s, d = 2, 3, 33, 32
    x = randn(b, h, s, d, seed=60, dtype=dtype)
    for positions in (torch.arange(s), torch.arange(b * s).reshape(b, s) * 5):
        cos, sin = pc.rope_cos_sin(positions, d, layout=layout, dtype=dtype)
        if positions.dim() == 2:
            cos, sin = cos[:, None], sin[:, None]  # (b, 1, s, d)
        got = pc.apply_rope(x, cos, sin, layout=layout, fused=True)
        assert bits_equal(got, float64_rounded(x, cos, sin, layout))


def test_low_precision_partial_rotary_in_place_and_auto_mode():
    """bfloat16 with partial rotary: out of place and in place in auto mode (the native kernel),
    equal to the float64 formula rounded once on the first r dims and to x on the rest; a row
    with a tiny |x| (the kernel's exact float64 path) too, in place as well."""
    x = randn(2, 3, 9, 32, seed=61, dtype=torch.bfloat16)
    x[1, 2, 3, 5] = 2.0**-100  # sends the call to the float64 path after the kernel
    cos, sin = pc.rope_cos_sin(torch.arange(9), 8, dtype=torch.bfloat16)
    expected = torch.cat((float64_rounded(x[..., :8], cos, sin, "half"), x[..., 8:]), -1)
    assert bits_equal(pc.apply_rope(x, cos, sin), expected)
    y = x.clone()
    pc.apply_rope(y, cos, sin, out=y)
    assert bits_equal(y, expected)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_float64_tables_with_low_precision_x_stay_correctly_rounded(dtype):
    """RotaryEmbedding's case: bfloat16/float16 x with float64 tables gives the float64 formula
    rounded once (the correctly rounded exact rotation here), on the native kernel and on the
    eager path alike."""
    x = randn(2, 3, 9, 16, seed=62, dtype=dtype)
    cos, sin = pc.rope_cos_sin(torch.arange(9), 16, dtype=F64)
    expected = float64_rounded(x, cos, sin, "half")
    assert bits_equal(pc.apply_rope(x, cos, sin, fused=True), expected)
    assert bits_equal(pc.apply_rope(x, cos, sin, fused=False), expected)
