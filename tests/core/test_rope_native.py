"""The native CPU kernel of apply_rope (posenc_core/rope/native.py), bit for bit.

References: for float32/float64 the formula x * cos + rotate_pairs(x) * sin evaluated by torch
one operation at a time (Hugging Face's ``q * cos + rotate_half(q) * sin`` for the half
layout); for bfloat16/float16 with tables of the same dtype the float64 formula rounded once
(float64 holds these sums exactly, so that is the correctly rounded value; the adversarial
cases against exact rational arithmetic are in test_rope_kernels.py); with float64 tables the
eager path (``kernels.apply_eager``, the float64 formula rounded once). Also: odd sizes,
strides, broadcast tables, in place, KV-cache slices, thread counts, and a build that fails.
"""

import sys
import warnings
from pathlib import Path

import pytest
import torch
from transformers.models.llama.modeling_llama import rotate_half

import posenc_core as pc
from posenc_core._numerics import round_once
from posenc_core.rope import kernels, native

sys.path.insert(0, str(Path(__file__).parent))
from test_rope_kernels import adversarial, exact_rotation  # noqa: E402

LAYOUTS = ("half", "interleaved")
F64 = torch.float64
LOW = (torch.bfloat16, torch.float16)


def randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).to(dtype)


def bits(t):
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def bits_equal(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def plain(x, cos, sin, layout):
    """The formula one torch operation at a time on the first r dims, in the tables' dtype
    (float64 for bfloat16/float16 x, then rounded once); x[..., r:] passed through."""
    r = cos.shape[-1]
    work = F64 if x.dtype in LOW else cos.dtype
    xr, cos, sin = x[..., :r].to(work), cos.to(work), sin.to(work)
    h = r // 2
    if layout == "half":
        turned = torch.cat((-xr[..., h:], xr[..., :h]), -1)
    else:
        turned = torch.stack((-xr[..., 1::2], xr[..., 0::2]), -1).flatten(-2)
    y = round_once(xr * cos + turned * sin, x.dtype)
    return torch.cat((y, x[..., r:]), -1) if r < x.shape[-1] else y


def native_rotate(x, cos, sin, layout="half", out=None, threads=None):
    out = torch.empty_like(x) if out is None else out
    native.kernel.rotate(x, cos, sin, layout, out, threads=threads)
    return out


@pytest.fixture(autouse=True)
def needs_the_kernel():
    if native.kernel.library() is None:
        pytest.skip(f"no native kernel here: {native.kernel.error}")


# --------------------------------------------------------------------------- float32 / float64


@pytest.mark.parametrize("dtype", [torch.float32, F64])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "s, d, r", [(1, 2, 2), (3, 6, 6), (5, 37, 34), (7, 64, 16), (2, 130, 130), (9, 128, 128)]
)
def test_float_kernel_is_the_formula_bit_for_bit(dtype, layout, s, d, r):
    """Every product and sum rounded as the formula rounds it, for odd sizes (s = 1, d = 2,
    r = 2, pair counts that are not a multiple of the vector width, an odd d with partial
    rotary), out of place and in place."""
    x = randn(2, 3, s, d, seed=s * d + r, dtype=dtype)
    cos, sin = pc.rope_cos_sin(torch.arange(s) * 37, r, layout=layout, dtype=dtype)
    expected = plain(x, cos, sin, layout)
    assert bits_equal(native_rotate(x, cos, sin, layout), expected)
    y = x.clone()
    native_rotate(y, cos, sin, layout, out=y)
    assert bits_equal(y, expected)


def test_float32_equals_hugging_faces_formula_on_a_large_input():
    """Llama's ``q * cos + rotate_half(q) * sin`` (transformers), bit for bit, on an input large
    enough to run on several threads."""
    q = randn(2, 8, 256, 128, seed=1)
    cos, sin = pc.rope_cos_sin(torch.arange(256), 128)
    assert bits_equal(pc.apply_rope(q, cos, sin, fused=True), q * cos + rotate_half(q) * sin)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_strides_broadcast_tables_and_kv_cache_slices(dtype, layout):
    """x with the strides of a (b, s, h, d) projection seen as (b, h, s, d); per-batch tables
    (b, 1, s, r) and a single position's table (1, r); out= into a slice of a KV cache: all equal
    the formula on contiguous copies."""
    b, h, s, d = 2, 3, 5, 16
    x = randn(b, s, h, d, seed=2, dtype=dtype).transpose(1, 2)  # (b, h, s, d), not contiguous
    work = dtype if dtype != torch.float32 else torch.float32
    per_batch = pc.rope_cos_sin(torch.arange(b * s).reshape(b, s) * 3, d, layout=layout, dtype=work)
    single = pc.rope_cos_sin(torch.tensor([11]), d, layout=layout, dtype=work)
    for cos, sin in ((per_batch[0][:, None], per_batch[1][:, None]), single):
        expected = plain(x.contiguous(), cos, sin, layout)
        assert bits_equal(native_rotate(x, cos, sin, layout), expected)
        cache = torch.zeros(b, h, 12, d, dtype=dtype)
        native_rotate(x, cos, sin, layout, out=cache[:, :, 4:9])
        assert bits_equal(cache[:, :, 4:9], expected)
        assert not cache[:, :, :4].any() and not cache[:, :, 9:].any()


def test_a_non_contiguous_last_dimension_goes_through_a_copy():
    """x whose last dimension is strided (a view of every other element) is rotated from a
    contiguous copy, in place too."""
    base = randn(2, 4, 12)
    x = base[..., ::2]  # (2, 4, 6), stride 2 in the last dimension
    cos, sin = pc.rope_cos_sin(torch.arange(4), 6)
    expected = plain(x.contiguous(), cos, sin, "half")
    assert bits_equal(pc.apply_rope(x, cos, sin, fused=True), expected)
    pc.apply_rope(x, cos, sin, fused=True, out=x)
    assert bits_equal(x.contiguous(), expected)


def test_more_leading_dimensions_than_the_kernel_indexes():
    """x with more dimensions than native.MAX_DIMS is flattened first, same values."""
    x = randn(*([1] * native.MAX_DIMS), 3, 4, seed=3)
    cos, sin = pc.rope_cos_sin(torch.arange(3), 4)
    assert bits_equal(pc.apply_rope(x, cos, sin, fused=True), plain(x, cos, sin, "half"))


# --------------------------------------------------------------------------- bfloat16 / float16


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("r", [2, 10, 64])
def test_low_precision_is_the_float64_formula_rounded_once(dtype, layout, r):
    """Same-dtype tables: the float64 formula rounded once (exact here), and float64 tables:
    the eager path's float64 formula rounded once, bit for bit, partial rotary and in place
    included."""
    x = randn(2, 3, 33, 64, seed=r, dtype=dtype)
    for table in (dtype, F64):
        cos, sin = pc.rope_cos_sin(torch.arange(33) * 5, r, layout=layout, dtype=table)
        expected = plain(x, cos, sin, layout) if table == dtype else torch.empty_like(x)
        if table == F64:
            expected[..., r:] = x[..., r:]
            kernels.apply_eager(x[..., :r], cos, sin, layout, True, expected[..., :r])
        assert bits_equal(native_rotate(x, cos, sin, layout), expected)
        y = x.clone()
        native_rotate(y, cos, sin, layout, out=y)
        assert bits_equal(y, expected)


@pytest.mark.parametrize("dtype", LOW)
def test_every_low_precision_value_passes_through_unchanged_by_a_zero_angle(dtype):
    """cos = 1, sin = 0 on every finite bit pattern of the dtype (subnormals and signed zeros
    included), paired with its neighbour: each nonzero input comes back bit for bit, zeros with
    the formula's sign (x1 * 1 - x2 * 0); so the conversions to and from float32 are exact."""
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    x = every.reshape(1, -1, 2)  # one pair per row
    x = x[0][x[0].isfinite().all(-1)][None]  # (1, n, 2)
    cos, sin = torch.ones(1, 2, dtype=dtype), torch.zeros(1, 2, dtype=dtype)
    got = native_rotate(x, cos, sin)
    assert bits_equal(got, plain(x, cos, sin, "half"))
    nonzero = got != 0
    assert torch.equal(got[nonzero], x[nonzero])


@pytest.mark.parametrize("dtype", LOW)
def test_wide_exponents_are_correctly_rounded(dtype):
    """Random x and tables with exponents spread over the whole range of the dtype (products
    that underflow float32 for bfloat16, subnormal float16 results, overflow): every finite
    nonzero element is the exact value correctly rounded (Python fractions), the rest equal the
    float64 formula's (zeros with their sign, inf, NaN)."""
    g = torch.Generator().manual_seed(70)
    lo, hi = (-140, 128) if dtype == torch.bfloat16 else (-25, 16)
    x = torch.randn(1, 2, 24, 16, generator=g, dtype=F64) * 2.0 ** torch.randint(
        lo, hi, (1, 2, 24, 16), generator=g
    )
    tab = torch.rand(2, 24, 16, generator=g, dtype=F64) * 2.0 ** torch.randint(
        lo // 2, 1, (2, 24, 16), generator=g
    )
    x, cos, sin = x.to(dtype), tab[0].to(dtype), tab[1].to(dtype)
    got = native_rotate(x, cos, sin)
    exact = exact_rotation(x, cos, sin, "half")
    f64 = plain(x.double(), cos.double(), sin.double(), "half")
    ok = exact.isfinite() & (exact != 0)
    assert torch.equal(got.double()[ok], exact[ok])
    special = ~ok & ~f64.isnan()
    assert bits_equal(got[special], round_once(f64, dtype)[special])
    assert bool(ok.sum() > 0.9 * ok.numel())


def test_bfloat16_tables_out_of_range_take_the_exact_path():
    """bfloat16 tables with an entry below 2**-63 send the rows that use it to the exact
    float64 path (counted), with correctly rounded results; the other rows stay on float32."""
    x, cos, sin = adversarial(torch.bfloat16)
    keep = [i for i in range(x.shape[-2]) if i not in (6, 7, 9, 14)]  # no unsafe |x| rows
    x, cos, sin = x[..., keep, :].contiguous(), cos[keep].clone(), sin[keep]
    cos[2, 3] = 2.0**-70
    out = torch.empty_like(x)
    assert native.kernel.rotate(x, cos, sin, "half", out) == x.shape[0] * x.shape[1]  # row 2
    exact = exact_rotation(x, cos, sin, "half")
    ok = exact.isfinite() & (exact != 0)
    assert torch.equal(out.double()[ok], exact[ok])
    eager = pc.apply_rope(x, cos, sin, fused=False)  # exact_low; NaN payloads aside, the same
    assert torch.equal(out.isnan(), eager.isnan())
    assert bits_equal(out[~out.isnan()], eager[~eager.isnan()])


# --------------------------------------------------------------------------- threads


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_thread_count_does_not_change_the_bits(dtype):
    """Each element is computed on its own: 1, 2 and 3 threads give identical bits."""
    x = randn(2, 4, 64, 128, seed=4, dtype=dtype)  # 65536 elements: above the parallel threshold
    cos, sin = pc.rope_cos_sin(torch.arange(64), 128, dtype=dtype)
    one = native_rotate(x, cos, sin, threads=1)
    for n in (2, 3):
        assert bits_equal(native_rotate(x, cos, sin, threads=n), one)


# --------------------------------------------------------------------------- building


def test_the_library_is_cached_by_source_and_compiler(monkeypatch, tmp_path):
    """A fresh kernel with the same cache directory loads the library built before (one file,
    same modification time); nothing else is left in the directory."""
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    first = native.NativeKernel()
    assert first.library() is not None, first.error
    built = list(tmp_path.iterdir())
    assert len(built) == 1 and built[0].suffix == ".so"
    stamp = built[0].stat().st_mtime_ns
    assert native.NativeKernel().library() is not None
    assert list(tmp_path.iterdir()) == built and built[0].stat().st_mtime_ns == stamp


def test_an_unwritable_cache_falls_back_to_a_temporary_directory(monkeypatch, tmp_path):
    """Neither $POSENC_CACHE_DIR nor ~/.cache can be created (a file is in the way): the library
    is built in a fresh temporary directory and works."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("POSENC_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setenv("HOME", str(blocker))
    folder = native.cache_dir()
    assert blocker not in folder.parents and folder.is_dir()
    kernel = native.NativeKernel()
    assert kernel.library() is not None, kernel.error


def test_a_compile_error_is_reported_by_its_first_line(monkeypatch, tmp_path):
    """A compiler that rejects the build leaves the reason (the line naming the error) in
    ``error``, tries only once, and auto mode warns once and uses the eager path."""
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "FLAGS", (*native.FLAGS, "-fno-such-flag-posenc"))
    broken = native.NativeKernel()
    assert broken.library() is None
    assert "failed" in broken.error and "no-such-flag-posenc" in broken.error
    assert "\n" not in broken.error and not list(tmp_path.glob("*.so"))
    monkeypatch.setattr(native, "kernel", broken)
    x = randn(2, 5, 8, seed=5)
    cos, sin = pc.rope_cos_sin(torch.arange(5), 8)
    with pytest.warns(RuntimeWarning, match=r"no-such-flag-posenc"):
        got = pc.apply_rope(x, cos, sin)
    assert bits_equal(got, plain(x, cos, sin, "half"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pc.apply_rope(x, cos, sin)


def test_the_portable_build_without_intrinsics_gives_the_same_bits(monkeypatch, tmp_path):
    """Built with -DPOSENC_NO_INTRINSICS (the compiler-vectorised C that non-AVX-512 machines
    run), the bfloat16/float16 kinds give the intrinsics build's bits on the adversarial cases
    and on every finite float16/bfloat16 pattern at a zero angle."""
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "FLAGS", (*native.FLAGS, "-DPOSENC_NO_INTRINSICS"))
    portable = native.NativeKernel()
    assert portable.library() is not None, portable.error
    for dtype in LOW:
        x, cos, sin = adversarial(dtype)
        every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
        y = every[every.isfinite()][: 2 * 1024 * 16].reshape(16, 1024, 2)
        for xs, c, s in ((x, cos, sin), (y, torch.ones(1, 2, dtype=dtype), sin[:1, :2] * 0)):
            a, b = torch.empty_like(xs), torch.empty_like(xs)
            native.kernel.rotate(xs, c, s, "half", a)
            portable.rotate(xs, c, s, "half", b)
            nan = a.isnan()
            assert torch.equal(nan, b.isnan()) and bits_equal(a[~nan], b[~nan])


def test_bfloat16_sums_that_cancel_below_the_normal_range_round_correctly():
    """Products of at least 2**-126 (the float32 path, no exact-path rows) whose difference is a
    bfloat16 subnormal, on every pair of a full vector: x1 c1 - x2 s1 with x1 = x2 (1 + 2**-7)
    and c1 = s1 gives 2**-123 * 2**-7 * k; the results equal the exact values."""
    k = torch.arange(32, dtype=F64) % 15 + 1  # 1 .. 15: results k * 2**-130 < 2**-126
    x = torch.zeros(1, 1, 2, 64, dtype=F64)
    x[..., :32] = 2.0**-60 * (1 + k * 2.0**-7)  # x1: 8 significant bits for k < 128
    x[..., 32:] = 2.0**-60  # x2
    tab = torch.full((2, 64), 2.0**-63, dtype=F64)
    x, tab = x.to(torch.bfloat16), tab.to(torch.bfloat16)
    out = torch.empty_like(x)
    assert native.kernel.rotate(x, tab, tab, "half", out) == 0  # no row on the exact path
    exact = exact_rotation(x, tab, tab, "half")
    assert bool(((exact[..., :32].abs() < 2.0**-126) & (exact[..., :32] != 0)).all())
    assert torch.equal(out.double(), exact)
