"""The native CPU kernel of apply_rope (posenc_core/rope/native.py, native.c), bit for bit.

References: for float32/float64 the formula x * cos + rotate_pairs(x) * sin evaluated by torch
one operation at a time (Hugging Face's ``q * cos + rotate_half(q) * sin`` for the half
layout); for bfloat16/float16 with tables of the same dtype the float64 formula rounded once
(float64 holds these sums exactly, so that is the correctly rounded value; the adversarial
cases against exact rational arithmetic are in test_rope_kernels.py); with float64 tables the
eager path (``kernels.apply_eager``, the float64 formula rounded once). Also: odd sizes,
strides, broadcast tables, in place, KV-cache slices, an out= that overlaps itself, NaN
positions, thread counts, rows as wide as the eager path takes; and the build: the cache and
its trust checks (ownership, modes, symbolic links, SHA-256 records), corrupt libraries,
read-only caches, one compile for many threads, POSENC_NATIVE, status(), a compiler without
OpenMP, and the source compiling without warnings in every configuration.
"""

import contextlib
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
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
def default_mode(monkeypatch):
    """Every test starts without POSENC_NATIVE (the tests of it set it themselves)."""
    monkeypatch.delenv("POSENC_NATIVE", raising=False)


@pytest.fixture(autouse=True)
def needs_the_kernel(default_mode):
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


def _streamed_cases():
    """float32 outputs of at least native.c's NT_MIN_BYTES (16 MB), written out of place: the
    streamed-store path (aligned rows), and a slice of a wider buffer (rows not aligned to the
    vector width: the ordinary stores), each for the whole head and for partial rotary."""
    q = randn(2, 8, 2048, 128, seed=31)  # 4M floats: 16 MB
    yield "aligned", q, torch.empty_like(q)
    wide = torch.zeros(2, 8, 2048, 136)
    yield "misaligned slice", q, wide[..., 3:131]


@pytest.mark.parametrize("r", [128, 96])
def test_large_outputs_written_out_of_place_are_the_formula_bit_for_bit(r):
    """Out of place into a large float32 buffer the kernel streams its stores past the cache
    (non-temporal stores); the values are the formula's, bit for bit, aligned or not, and the
    pass-through dims are copied."""
    cos, sin = pc.rope_cos_sin(torch.arange(2048), r)
    for name, q, out in _streamed_cases():
        expected = torch.cat([q[..., :r] * cos + rotate_half(q[..., :r]) * sin, q[..., r:]], -1)
        got = pc.apply_rope(q, cos, sin, out=out, fused=True)
        assert got is out and bits_equal(out, expected), name
        assert bits_equal(pc.apply_rope(q, cos, sin, fused=True), expected), name


@pytest.mark.skipif(not native._X86, reason="the AVX (256-bit) build is x86 only")
def test_the_avx2_build_streams_the_same_bits(monkeypatch, tmp_path):
    """A machine with AVX2 but no AVX-512 streams its stores with 256-bit vectors: built with
    -mno-avx512f, the large out-of-place outputs equal the default build's, bit for bit."""
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "FLAGS", (*native.FLAGS, "-mno-avx512f"))
    avx2 = native.NativeKernel()
    assert avx2.library() is not None, avx2.error
    cos, sin = pc.rope_cos_sin(torch.arange(2048), 128)
    for name, q, out in _streamed_cases():
        expected = q * cos + rotate_half(q) * sin
        avx2.rotate(q, cos, sin, "half", out)
        assert bits_equal(out, expected), name


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


def test_sequences_longer_than_a_tile_are_the_formula_bit_for_bit():
    """For an x of 16 MB or more, native.c cuts the positions into tiles of
    POSENC_TILE_ELEMENTS / r rows (1024 for r = 128): 2500 positions make two whole tiles and a
    partial one, each head visited once per tile; out of place (streamed stores) and in place,
    on 1, 2 and 3 threads (3 threads: tile counts rounded up to a multiple of the thread
    count), equal to the formula."""
    x = randn(2, 8, 2500, 128, seed=61)  # 20 MB
    cos, sin = pc.rope_cos_sin(torch.arange(2500), 128)
    expected = plain(x, cos, sin, "half")
    for n in (1, 2, 3):
        assert bits_equal(native_rotate(x, cos, sin, threads=n), expected), n
        y = x.clone()
        native_rotate(y, cos, sin, out=y, threads=n)
        assert bits_equal(y, expected), n


def test_a_build_with_tiny_tiles_gives_the_formula_bit_for_bit(monkeypatch, tmp_path):
    """Built with tiles of 48 table elements (POSENC_TILE_ELEMENTS and
    POSENC_SMALL_TILE_ELEMENTS: 1 to 6 positions here, where the default makes one tile of
    these small inputs), every kind, both layouts, shared and per-batch tables, partial
    rotary, out of place and in place, on 1 to 3 threads, equals the formula: the tile edges (a
    table row converted at each tile's first head, a partial last tile, heads split over
    threads) change no bit."""
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    tiles = ("-DPOSENC_TILE_ELEMENTS=48", "-DPOSENC_SMALL_TILE_ELEMENTS=48")
    monkeypatch.setattr(native, "FLAGS", (*native.FLAGS, *tiles))
    tiny = native.NativeKernel()
    assert tiny.library() is not None, tiny.error
    cases = [(dt, dt) for dt in (torch.float32, F64, *LOW)] + [(dt, F64) for dt in LOW]
    for (dtype, work), layout, r in (
        (c, lay, r) for c in cases for lay in LAYOUTS for r in (8, 16, 32)
    ):
        x = randn(3, 20, 37, 34, seed=r, dtype=dtype)  # 75480 elements: several threads
        shared = pc.rope_cos_sin(torch.arange(37) * 5, r, layout=layout, dtype=work)
        batch = pc.rope_cos_sin(torch.arange(3 * 37).reshape(3, 37), r, layout=layout, dtype=work)
        for cos, sin in (shared, (batch[0][:, None], batch[1][:, None])):
            expected = plain(x, cos, sin, layout)
            for n in (1, 2, 3):
                got = torch.empty_like(x)
                tiny.rotate(x, cos, sin, layout, got, threads=n)
                y = x.clone()
                tiny.rotate(y, cos, sin, layout, y, threads=n)
                for res in (got, y):
                    nan = expected.isnan()
                    assert torch.equal(res.isnan(), nan), (dtype, work, layout, r, n)
                    assert bits_equal(res[~nan], expected[~nan]), (dtype, work, layout, r, n)


# --------------------------------------------------------------------------- helpers for builds

REPO = Path(__file__).parents[2]
REAL_CC = shutil.which(os.environ.get("CC") or "cc")
INF = float("inf")
FAKE_LIBRARY = "#include <stdint.h>\nint64_t rope_rotate(void) { return 777; }\n"


def run_python(code, **env):
    """Run ``code`` in a fresh Python process (with ``env`` added), from the repository root."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **env},
        cwd=REPO,
    )


def counting_compiler(tmp_path, refuse=None):
    """A $CC wrapper that logs every call's arguments, fails when given ``refuse``, and runs
    the real compiler otherwise; returns (script, log)."""
    if REAL_CC is None:
        pytest.skip("no C compiler")
    log, script = tmp_path / "cc.log", tmp_path / "cc-wrapper"
    refusal = (
        f'for a in "$@"; do if [ "$a" = "{refuse}" ]; then '
        f"echo \"error: unsupported option '{refuse}'\" >&2; exit 1; fi; done\n"
        if refuse
        else ""
    )
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n{refusal}exec "{REAL_CC}" "$@"\n')
    script.chmod(0o755)
    return script, log


def kernel_compile_lines(log):
    """The logged compiler calls that compile the kernel's source (not --version, not the
    OpenMP probe)."""
    if not log.exists():
        return []
    return [ln for ln in log.read_text().splitlines() if re.search(r"rope_native_\S*\.c$", ln)]


def compiles(log):
    return len(kernel_compile_lines(log))


def compile_fake(path):
    """A library under ``path`` whose rope_rotate writes nothing and returns 777."""
    src = path.with_name("fake.c")
    src.write_text(FAKE_LIBRARY)
    subprocess.run([REAL_CC, "-shared", "-fPIC", "-o", str(path), str(src)], check=True)
    src.unlink()


def write_record(library):
    digest = hashlib.sha256(library.read_bytes()).hexdigest()
    Path(str(library) + ".sha256").write_text(digest + "\n")


def sha256_record(library):
    return Path(str(library) + ".sha256").read_text().strip()


def copy_cache(source_folder, target):
    """A private copy of a cache folder (modes and times kept)."""
    shutil.copytree(source_folder, target)
    target.chmod(0o700)
    return target


def rename_for(cache, kern):
    """Rename the library in ``cache`` (built by the default compiler) and its record to the
    names ``kern``'s compiler gives them: every word of CC is part of the name, so a wrapper
    around the same compiler has libraries of its own."""
    default, text = native.NativeKernel()._compiler_identity(), native.source()
    for openmp in (True, False):
        flags = native.compile_flags(openmp)
        old = cache / native.library_name(text, default, flags)
        if old.exists():
            new = cache / native.library_name(text, kern._compiler_identity(), flags)
            old.rename(new)
            Path(str(old) + ".sha256").rename(str(new) + ".sha256")


def spy_on(monkeypatch, kern):
    """``kern`` as native.kernel, recording the calls that reach its rotate in ``kern.calls``."""
    kern.calls = []
    real = kern.rotate

    def rotate(x, cos, sin, layout, out, threads=None):
        kern.calls.append("in place" if out is x else "out")
        return real(x, cos, sin, layout, out, threads)

    monkeypatch.setattr(kern, "rotate", rotate, raising=False)
    monkeypatch.setattr(native, "kernel", kern)
    return kern


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache folder built once by a fresh kernel under umask 000, into folders it had to
    create (cache/, b/ and a/ were missing); tests copy it rather than compile again."""
    cache = tmp_path_factory.mktemp("built") / "a" / "b" / "cache"
    old = os.umask(0)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("POSENC_CACHE_DIR", str(cache))
            fresh = native.NativeKernel()
            lib = fresh.library()
    finally:
        os.umask(old)
    assert lib is not None, fresh.error
    return cache


# --------------------------------------------------------------------------- overlapping out=


@pytest.mark.parametrize("fused", [None, True, False])
def test_an_out_that_overlaps_itself_is_refused_on_every_path(fused):
    """out (or x rotated in place) whose indices share elements, as after expand, would have its
    results overwrite each other (the native kernel wrote wrong values into the base): every
    path refuses it alike, before running, with a ValueError naming out, its shape and strides;
    the base is untouched. An as_strided view that folds onto itself is refused too."""
    cos, sin = pc.rope_cos_sin(torch.arange(6), 8)
    row = randn(8, seed=40)
    base = row.clone()
    x = base.expand(6, 8)
    with pytest.raises(
        ValueError,
        match=r"^out=x \(x, rotated in place\) has elements that overlap: its shape \(6, 8\) "
        r"and strides \(0, 1\).*\.clone\(\) it first",
    ):
        pc.apply_rope(x, cos, sin, fused=fused, out=x)
    assert bits_equal(base, row)
    y = randn(6, 8, seed=41)
    buf = torch.zeros(8)
    with pytest.raises(ValueError, match=r"^out has elements that overlap.*\(6, 8\).*\(0, 1\)"):
        pc.apply_rope(y, cos, sin, fused=fused, out=buf.expand(6, 8))
    assert not buf.any()
    folded = torch.zeros(32).as_strided((6, 8), (4, 1))  # rows 4 apart, 8 wide: they share
    with pytest.raises(ValueError, match=r"^out has elements that overlap.*\(6, 8\).*\(4, 1\)"):
        pc.apply_rope(y, cos, sin, fused=fused, out=folded)


@pytest.mark.parametrize("fused", [None, True, False])
def test_views_that_do_not_overlap_themselves_are_still_accepted(fused):
    """KV-cache slices, transposed and strided views, and an as_strided layout whose strides
    interleave without sharing an element all rotate as before, in place and into out=."""
    b, h, s, d = 2, 3, 5, 8
    cos, sin = pc.rope_cos_sin(torch.arange(s), d)
    x = randn(b, s, h, d, seed=42).transpose(1, 2)  # (b, h, s, d), not contiguous
    expected = plain(x.contiguous(), cos, sin, "half")
    cache = torch.zeros(b, h, 9, d)
    pc.apply_rope(x, cos, sin, fused=fused, out=cache[:, :, 2:7])
    assert bits_equal(cache[:, :, 2:7], expected)
    y = x.clone().transpose(1, 2).transpose(1, 2)  # in place on a transposed view
    pc.apply_rope(y, cos, sin, fused=fused, out=y)
    assert bits_equal(y, expected)
    wide = randn(b, h, s, 2 * d, seed=43)
    strided = wide[..., ::2]  # last dimension of stride 2
    want = plain(strided.contiguous(), cos, sin, "half")
    pc.apply_rope(strided, cos, sin, fused=fused, out=strided)
    assert bits_equal(strided.contiguous(), want)
    # offsets 2i + 3j (i < 3, j < 2): 0, 3, 2, 5, 4, 7, all distinct although stride 3 < the
    # extent 4 of stride 2 (decided exactly)
    storage = torch.zeros(8, dtype=F64)
    odd = storage.as_strided((3, 2), (2, 3))
    z = randn(3, 2, seed=44, dtype=F64)
    c2, s2 = pc.rope_cos_sin(torch.arange(3), 2, dtype=F64)
    pc.apply_rope(z, c2, s2, fused=fused, out=odd)
    assert bits_equal(odd.contiguous(), plain(z, c2, s2, "half"))


# --------------------------------------------------------------------------- NaN, wide rows


def test_nan_results_are_nan_at_the_same_positions_and_every_other_bit_equal():
    """On every path the non-NaN results agree bit for bit (signed zeros and infinities
    included) and the NaN results sit at the same positions; their payloads may differ
    (bfloat16: 0x7FC0 or 0xFFC0 natively, 0xFFFF on the eager path), which is what the
    docstrings say "bit for bit" covers."""
    g = torch.Generator().manual_seed(45)
    for dtype in LOW:
        x = torch.randn(2, 64, 64, generator=g, dtype=F64).to(dtype)
        x[0, 3, 5], x[1, 2, 7], x[1, 2, 39], x[0, 9, 1] = float("nan"), INF, INF, -INF
        x[1, 5, 3] = -0.0
        for table in (dtype, torch.float32, F64):
            cos, sin = pc.rope_cos_sin(torch.arange(64), 64, dtype=table)
            sin[0] = 0  # inf * 0: NaN
            for layout in LAYOUTS:
                native_out = pc.apply_rope(x, cos, sin, layout=layout, fused=True)
                eager = pc.apply_rope(x, cos, sin, layout=layout, fused=False)
                nan = native_out.isnan()
                assert bool(nan.any()) and bool(native_out.isinf().any())
                assert torch.equal(nan, eager.isnan())
                assert bits_equal(native_out[~nan], eager[~nan])


def test_the_docstrings_say_what_bit_for_bit_covers():
    """native.py, kernels.py and apply_rope's Returns state the NaN rule: no claim of equal
    NaN bits, which the paths do not give."""
    for doc in (native.__doc__, kernels.__doc__, pc.apply_rope.__doc__):
        text = " ".join(doc.split())
        assert "NaN at the same positions on every path" in text
        assert "payload" in text and "canonical" not in text


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_row_as_wide_as_the_eager_path_takes_runs_on_the_exact_path(layout):
    """bfloat16 with tables of its dtype, r = 2**19, rows that force the exact float64 path
    (|x| >= 2**100, and < 2**-63): equal bit for bit to the eager path (its per-thread buffers
    are on the heap; a stack array of that width crashed). In a subprocess, so a crash fails
    this test instead of ending pytest."""
    code = f"""
import torch, posenc_core as pc
from posenc_core.rope import native
r = 2**19
g = torch.Generator().manual_seed(46)
x = torch.randn(2, 2, r, generator=g, dtype=torch.float64).to(torch.bfloat16)
x[0, 0, 5], x[1, 1, r - 1] = 2.0**100, -(2.0**-70)
cos, sin = pc.rope_cos_sin(torch.arange(2) * 7, r, layout={layout!r}, dtype=torch.bfloat16)
out = torch.empty_like(x)
assert native.kernel.rotate(x, cos, sin, {layout!r}, out) == 2
eager = pc.apply_rope(x, cos, sin, layout={layout!r}, fused=False)
print(torch.equal(out.view(torch.int16), eager.view(torch.int16)))
"""
    done = run_python(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True"]


# --------------------------------------------------------------------------- POSENC_NATIVE


def test_posenc_native_0_turns_the_kernel_off_for_the_process(monkeypatch, tmp_path):
    """POSENC_NATIVE=0: the compiler is never called, fused=None (apply_rope and
    RotaryEmbedding) takes the eager path with the same values, fused=True raises saying why,
    and status() reports it."""
    cc, log = counting_compiler(tmp_path)
    monkeypatch.setenv("POSENC_NATIVE", "0")
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    off = spy_on(monkeypatch, native.NativeKernel(compiler=str(cc)))
    x = randn(2, 3, 5, 8, seed=47)
    cos, sin = pc.rope_cos_sin(torch.arange(5), 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bits_equal(pc.apply_rope(x, cos, sin), plain(x, cos, sin, "half"))
        q, k = pc.RotaryEmbedding(8)(x, x.flip(0))
    assert bits_equal(q, plain(x, cos, sin, "half")) and bits_equal(
        k, plain(x.flip(0), cos, sin, "half")
    )
    with pytest.raises(RuntimeError, match=r"unavailable: disabled by POSENC_NATIVE=0"):
        pc.apply_rope(x, cos, sin, fused=True)
    assert off.calls == [] and not log.exists()
    st = native.status()
    assert not st.available and st.reason == "disabled by POSENC_NATIVE=0" and st.mode == "0"
    assert st.library is None


def test_posenc_native_1_makes_a_failed_build_an_error(monkeypatch, tmp_path, built):
    """POSENC_NATIVE=1: a kernel that cannot be built is a RuntimeError naming the reason for
    fused=None too (apply_rope and RotaryEmbedding); one that builds is used as usual."""
    monkeypatch.setenv("POSENC_NATIVE", "1")
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    spy_on(monkeypatch, native.NativeKernel(compiler="no-such-c-compiler-posenc"))
    x = randn(2, 5, 8, seed=48)
    cos, sin = pc.rope_cos_sin(torch.arange(5), 8)
    message = r"POSENC_NATIVE=1 requires .*native kernel.*no C compiler 'no-such-c-compiler-posenc'"
    with pytest.raises(RuntimeError, match=message):
        pc.apply_rope(x, cos, sin)
    with pytest.raises(RuntimeError, match=message):
        pc.RotaryEmbedding(8)(x, x)
    assert pc.apply_rope(x, cos, sin, fused=False) is not None  # the eager path: never native
    st = native.status()
    assert not st.available and st.mode == "1" and "no C compiler" in st.reason
    monkeypatch.setenv("POSENC_CACHE_DIR", str(copy_cache(built, tmp_path / "good")))
    working = spy_on(monkeypatch, native.NativeKernel())
    assert bits_equal(pc.RotaryEmbedding(8)(x, x)[0], pc.RotaryEmbedding(8)(x, x)[1])
    assert len(working.calls) == 4 and native.status().available


@pytest.mark.parametrize("value", ["yes", "2", "1 1", "true"])
def test_an_invalid_posenc_native_is_a_value_error(monkeypatch, value):
    """Any value but unset, "", "0" and "1" (whitespace around them ignored) is refused when the
    kernel is first needed, naming the variable, the value and the allowed values; status()
    reports it."""
    monkeypatch.setenv("POSENC_NATIVE", value)
    spy_on(monkeypatch, native.NativeKernel())
    x = randn(2, 5, 8, seed=49)
    cos, sin = pc.rope_cos_sin(torch.arange(5), 8)
    message = rf"POSENC_NATIVE must be unset or one of '': .*'0': .*'1': .*; got {value!r}"
    with pytest.raises(ValueError, match=message):
        pc.apply_rope(x, cos, sin)
    st = native.status()
    assert not st.available and st.mode == value and re.search(message, st.reason)


def test_an_empty_posenc_native_is_the_default(monkeypatch, tmp_path, built):
    """POSENC_NATIVE="" (as unset): the kernel is used when it builds."""
    monkeypatch.setenv("POSENC_NATIVE", "")
    monkeypatch.setenv("POSENC_CACHE_DIR", str(copy_cache(built, tmp_path / "cache")))
    default = spy_on(monkeypatch, native.NativeKernel())
    x = randn(2, 5, 8, seed=50)
    cos, sin = pc.rope_cos_sin(torch.arange(5), 8)
    assert bits_equal(pc.apply_rope(x, cos, sin), plain(x, cos, sin, "half"))
    assert default.calls == ["out"] and native.status().mode == ""


# --------------------------------------------------------------------------- building


def test_the_library_is_cached_by_source_and_compiler(monkeypatch, built):
    """A fresh kernel with the same cache folder loads the library built before (same file,
    same modification time, no compiler run but ``--version``); the folder holds the library,
    its SHA-256 record and the lock file, nothing else."""
    before = sorted(p.name for p in built.iterdir())
    library = next(built.glob("*.so"))
    assert before == sorted([library.name, library.name + ".sha256", "rope_native.lock"])
    assert hashlib.sha256(library.read_bytes()).hexdigest() == sha256_record(library)
    stamp = library.stat().st_mtime_ns
    monkeypatch.setenv("POSENC_CACHE_DIR", str(built))
    again = native.NativeKernel()
    assert again.library() is not None, again.error
    assert again.status().library == library and again.status().cache_folder == built
    assert sorted(p.name for p in built.iterdir()) == before
    assert library.stat().st_mtime_ns == stamp


def test_cache_folders_are_created_private_whatever_the_umask(built):
    """Built under umask 000 into a cache folder whose parents were missing: every folder this
    module created has mode 0700, and the library and its record are writable by this user
    only (the lock file is 0600)."""
    for folder in (built, built.parent, built.parent.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    for path in built.iterdir():
        mode = stat.S_IMODE(path.stat().st_mode)
        assert not mode & 0o022, (path.name, oct(mode))
    assert stat.S_IMODE((built / "rope_native.lock").stat().st_mode) == 0o600


def untrusted_cases():
    cases = ["writable by others", "a symbolic link", "cannot be created"]
    if os.getuid() == 0:  # only root can give a folder to another user
        cases.append("owned by another user")
    return cases


@pytest.mark.parametrize("case", untrusted_cases())
def test_an_untrusted_cache_folder_is_not_used(monkeypatch, tmp_path, built, case):
    """A cache folder that others can write, that is a symbolic link, that belongs to someone
    else or that cannot be created is not used: the library would be built in this process's
    private temporary folder (mode 0700), and the note says why."""
    target = tmp_path / "cache"
    if case == "writable by others":
        target.mkdir()
        target.chmod(0o777)
    elif case == "a symbolic link":
        target.symlink_to(copy_cache(built, tmp_path / "real"), target_is_directory=True)
    elif case == "cannot be created":
        (tmp_path / "file").write_text("")
        target = tmp_path / "file" / "cache"
    else:
        target.mkdir(mode=0o700)
        os.chown(target, 54321, 54321)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(target))
    folder = native.cache_dir()
    assert folder != target and not str(folder).startswith(str(target))
    assert folder.name.startswith("posenc_core_") and Path(tempfile.gettempdir()) in folder.parents
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and folder.stat().st_uid == os.getuid()
    chosen, note = native._cache_folder()
    chosen.close()
    assert chosen.path == folder and note.startswith(f"cache folder {target} ")
    assert note.endswith("built in a private temporary folder")


def test_a_planted_library_in_a_folder_others_can_write_is_never_loaded(tmp_path, built):
    """A world-writable $POSENC_CACHE_DIR holding a library under the expected name, with a
    matching SHA-256 record, that would return 777 and write nothing: a fresh process never
    loads it (nor writes into that folder), builds in its private temporary folder instead,
    rotates correctly, reports why in status(), and removes that folder when it exits."""
    planted = tmp_path / "planted"
    planted.mkdir()
    for library in built.glob("*.so"):
        fake = planted / library.name
        compile_fake(fake)
        write_record(fake)
    planted.chmod(0o777)
    listing = sorted((p.name, p.stat().st_mtime_ns) for p in planted.iterdir())
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = """
import json, os, torch, posenc_core as pc
from posenc_core.rope import native
x = torch.randn(2, 3, 64, 64)
cos, sin = pc.rope_cos_sin(torch.arange(64), 64)
out = torch.empty_like(x)
rows = native.kernel.rotate(x, cos, sin, "half", out)
right = torch.equal(out, pc.apply_rope(x, cos, sin, fused=False))
print(json.dumps({"rows": rows, "right": right}), flush=True)
maps = open("/proc/self/maps").read() if os.path.exists("/proc/self/maps") else ""
st = native.status()
print(json.dumps({
    "available": st.available, "folder": str(st.cache_folder), "library": str(st.library),
    "reason": st.reason, "planted_mapped": os.environ["POSENC_CACHE_DIR"] in maps,
}))
"""
    done = run_python(code, POSENC_CACHE_DIR=str(planted), TMPDIR=str(tmp))
    lines = done.stdout.splitlines()
    assert lines and json.loads(lines[0]) == {"rows": 0, "right": True}, done.stderr[-2000:]
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(lines[1])
    assert report["available"] and not report["planted_mapped"]
    assert Path(report["folder"]).parent == tmp and Path(report["library"]).parent.parent == tmp
    assert report["reason"] == (
        f"cache folder {planted} is writable by others (mode 777): built in a private "
        "temporary folder"
    )
    assert list(tmp.iterdir()) == []  # the private folder is gone with the process
    assert sorted((p.name, p.stat().st_mtime_ns) for p in planted.iterdir()) == listing


def test_a_library_file_others_can_write_is_rebuilt_not_loaded(monkeypatch, tmp_path, built):
    """In a trusted cache folder, a library file that group members can write (with a matching
    record), here one that would return 777, is not loaded: it is rebuilt in place, privately."""
    cache = copy_cache(built, tmp_path / "cache")
    library = next(cache.glob("*.so"))
    compile_fake(library)
    write_record(library)
    library.chmod(0o775)
    fake = library.read_bytes()
    monkeypatch.setenv("POSENC_CACHE_DIR", str(cache))
    fresh = native.NativeKernel()
    assert fresh.library() is not None, fresh.error
    x = randn(2, 4, 8, seed=51)
    cos, sin = pc.rope_cos_sin(torch.arange(4), 8)
    out = torch.empty_like(x)
    assert fresh.rotate(x, cos, sin, "half", out) == 0
    assert bits_equal(out, plain(x, cos, sin, "half"))
    assert fresh.status().library == library
    assert not library.stat().st_mode & 0o022
    assert library.read_bytes() != fake
    assert hashlib.sha256(library.read_bytes()).hexdigest() == sha256_record(library)


def file_cases():
    cases = ["valid", "symbolic link", "writable by group", "writable by others", "bad record"]
    cases += ["no record"] + (["owned by another user"] if os.getuid() == 0 else [])
    return cases


@pytest.mark.parametrize("case", file_cases())
def test_only_a_trusted_file_whose_hash_matches_its_record_is_accepted(tmp_path, built, case):
    """The checks on a cached library, before anything is loaded: a regular file (a symbolic
    link is refused, even to a valid library with a matching record), owned by this user,
    writable by nobody else, whose SHA-256 (read from the descriptor that would be loaded)
    matches a trusted record beside it."""
    cache = copy_cache(built, tmp_path / "cache")
    library = next(cache.glob("*.so"))
    if case == "symbolic link":
        elsewhere = copy_cache(built, tmp_path / "elsewhere") / library.name
        library.unlink()
        library.symlink_to(elsewhere)
    elif case.startswith("writable by"):
        library.chmod(0o775 if case.endswith("group") else 0o757)
    elif case == "bad record":
        Path(str(library) + ".sha256").write_text("0" * 64 + "\n")
    elif case == "no record":
        Path(str(library) + ".sha256").unlink()
    elif case == "owned by another user":
        os.chown(library, 54321, 54321)
    folder, problem = native._open_folder(cache)
    assert problem is None
    try:
        fd = native._verified(folder, library.name)
        assert (fd is not None) == (case == "valid")
        if fd is not None:
            assert native._sha256(fd) == sha256_record(library)
            os.close(fd)
    finally:
        folder.close()


@pytest.mark.parametrize("damage", ["truncated", "overwritten", "record missing"])
def test_a_corrupt_cached_library_is_rebuilt_in_a_fresh_process(tmp_path, built, damage):
    """A cached library truncated to 20000 bytes, with 4 KB in its middle overwritten, or
    without its SHA-256 record, crashed every later process (or went unchecked): now a fresh
    process finds the mismatch before loading it, rebuilds it and rotates correctly."""
    cache = copy_cache(built, tmp_path / "cache")
    library = next(cache.glob("*.so"))
    data = bytearray(library.read_bytes())
    if damage == "truncated":
        library.write_bytes(data[:20000])
    elif damage == "overwritten":
        middle = len(data) // 2
        data[middle : middle + 4096] = random.Random(52).randbytes(4096)
        library.write_bytes(bytes(data))
    else:
        Path(str(library) + ".sha256").unlink()
    damaged = library.read_bytes()
    code = """
import torch, posenc_core as pc
from posenc_core.rope import native
x = torch.randn(2, 3, 64, 64).to(torch.bfloat16)
cos, sin = pc.rope_cos_sin(torch.arange(64), 64, dtype=torch.bfloat16)
got = pc.apply_rope(x, cos, sin, fused=True)
print(torch.equal(got.view(torch.int16), pc.apply_rope(x, cos, sin, fused=False).view(torch.int16)))
"""
    done = run_python(code, POSENC_CACHE_DIR=str(cache))
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.split() == ["True"]
    rebuilt = library.read_bytes()
    assert rebuilt != damaged or damage == "record missing"
    assert hashlib.sha256(rebuilt).hexdigest() == sha256_record(library)


@contextlib.contextmanager
def read_only(folder):
    """folder made read-only: mode 0500, and immutable too where this runs as root (whom modes
    do not stop) and chattr works."""
    folder.chmod(0o500)
    immutable = os.getuid() == 0 and shutil.which("chattr") is not None
    if immutable:
        immutable = (
            subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
        )
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o700)


def test_a_read_only_cache_holding_a_valid_library_is_used_without_compiling(
    monkeypatch, tmp_path, built
):
    """A cache folder that cannot be written (mode 0500), holding a valid library and its
    record: loaded as it is, with no compile and nothing written (no lock file either)."""
    cache = copy_cache(built, tmp_path / "cache")
    (cache / "rope_native.lock").unlink(missing_ok=True)
    cc, log = counting_compiler(tmp_path)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(cache))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no other cache to fall back on
    kernel = native.NativeKernel(compiler=str(cc))
    rename_for(cache, kernel)
    listing = sorted(p.name for p in cache.iterdir())
    with read_only(cache):
        assert kernel.library() is not None, kernel.error
        assert compiles(log) == 0
        assert sorted(p.name for p in cache.iterdir()) == listing
        st = kernel.status()
        assert st.cache_folder == cache and st.library.parent == cache and st.reason is None


def test_threads_on_first_use_compile_once(monkeypatch, tmp_path):
    """Eight threads needing the library at once, four on one kernel and four on kernels of
    their own, over one empty cache folder: the source is compiled once (a lock in the process,
    flock across kernels and processes, and a second look once the lock is held)."""
    cc, log = counting_compiler(tmp_path)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    shared = native.NativeKernel(compiler=str(cc))
    kernels_ = [shared] * 4 + [native.NativeKernel(compiler=str(cc)) for _ in range(4)]
    start = threading.Barrier(len(kernels_))
    results = [None] * len(kernels_)

    def first_use(i):
        start.wait()
        results[i] = kernels_[i].library()

    threads = [threading.Thread(target=first_use, args=(i,)) for i in range(len(kernels_))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(lib is not None for lib in results), [k.error for k in kernels_]
    assert compiles(log) == 1
    assert len({k.status().library for k in kernels_}) == 1


def test_a_compile_error_is_reported_by_its_first_line(monkeypatch, tmp_path):
    """A compiler that rejects the build leaves the reason (the line naming the error) in
    ``error`` and status(), tries only once, and fused=None uses the eager path silently, with
    no warning; fused=True raises naming it."""
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(native, "FLAGS", (*native.FLAGS, "-fno-such-flag-posenc"))
    broken = native.NativeKernel()
    assert broken.library() is None
    assert "failed" in broken.error and "no-such-flag-posenc" in broken.error
    assert "\n" not in broken.error and not list(tmp_path.glob("*.so"))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no build left over
    monkeypatch.setattr(native, "kernel", broken)
    st = native.status()
    assert not st.available and st.reason == broken.error and st.library is None
    assert st.cache_folder == tmp_path and st.compiler == broken.compiler
    x = randn(2, 5, 8, seed=5)
    cos, sin = pc.rope_cos_sin(torch.arange(5), 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bits_equal(pc.apply_rope(x, cos, sin), plain(x, cos, sin, "half"))
        assert bits_equal(pc.RotaryEmbedding(8)(x, x)[0], pc.apply_rope(x, cos, sin))
    with pytest.raises(RuntimeError, match=r"unavailable: .*no-such-flag-posenc"):
        pc.apply_rope(x, cos, sin, fused=True)


def test_status_reports_the_kernel_in_use():
    """status(): available, no reason, the loaded library in its cache folder, the compiler,
    whether OpenMP is in, the POSENC_NATIVE setting; a frozen dataclass."""
    st = native.status()
    assert st.available and st.library.is_file() and st.library.parent == st.cache_folder
    assert st.compiler == native.kernel.compiler and isinstance(st.openmp, bool)
    assert st.mode in ("", "1")  # as the process had it when the kernel was first needed
    with pytest.raises(dataclasses.FrozenInstanceError):
        st.available = False


# --------------------------------------------------------------------------- portability


def test_the_source_compiles_without_warnings_in_every_configuration(tmp_path):
    """native.c with the real flags and -Wall -Wextra -Werror -Wvla: with and without OpenMP,
    with the AVX-512 intrinsics, without any (POSENC_NO_INTRINSICS), with tiny tiles
    (POSENC_TILE_ELEMENTS, POSENC_SMALL_TILE_ELEMENTS) and, on x86, with AVX2 only
    (-mno-avx512f); all at once, in parallel."""
    cc = shutil.which(os.environ.get("CC") or "cc")
    if cc is None:
        pytest.skip("no C compiler")
    src = Path(native.__file__).with_name("native.c")
    runs = {}
    variants = {
        "intrinsics": [],
        "portable": ["-DPOSENC_NO_INTRINSICS"],
        "tiny-tiles": ["-DPOSENC_TILE_ELEMENTS=48", "-DPOSENC_SMALL_TILE_ELEMENTS=48"],
    }
    if native._X86:  # the 256-bit streamed stores of a machine without AVX-512
        variants["avx2"] = ["-mno-avx512f"]
    for omp in (True, False):
        for variant, extra in variants.items():
            name = f"{'openmp' if omp else 'plain'}-{variant}"
            flags = [*native.compile_flags(omp), "-Wall", "-Wextra", "-Werror", "-Wvla", *extra]
            out = tmp_path / f"{name}.so"
            runs[name] = subprocess.Popen(
                [cc, *flags, "-o", str(out), str(src)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
    failed = {}
    for name, proc in runs.items():
        output, _ = proc.communicate(timeout=300)
        if proc.returncode != 0:
            failed[name] = output[-3000:]
    assert not failed, failed


def test_the_source_is_package_data():
    """native.c is read at run time from the package, so a non-editable install must hold it."""
    import tomllib

    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    data = tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["package-data"]
    assert "rope/native.c" in data["posenc_core"]
    assert native.source() == Path(native.__file__).with_name("native.c").read_bytes()


def test_a_compiler_without_openmp_still_gets_a_single_threaded_kernel(monkeypatch, tmp_path):
    """A compiler that rejects -fopenmp (as Apple's clang does) builds the library without it:
    status().openmp is False, and the bits equal the OpenMP build's for any thread count."""
    cc, log = counting_compiler(tmp_path, refuse="-fopenmp")
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    single = native.NativeKernel(compiler=str(cc))
    assert single.library() is not None, single.error
    st = single.status()
    assert st.available and not st.openmp and st.compiler == str(cc)
    assert compiles(log) == 1 and "-fopenmp" not in kernel_compile_lines(log)[0]
    for dtype in (torch.float32, torch.bfloat16):
        x = randn(2, 4, 64, 128, seed=53, dtype=dtype)
        cos, sin = pc.rope_cos_sin(torch.arange(64), 128, dtype=dtype)
        a, b = torch.empty_like(x), torch.empty_like(x)
        native.kernel.rotate(x, cos, sin, "half", a, threads=3)
        single.rotate(x, cos, sin, "half", b, threads=3)
        assert bits_equal(a, b)


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
