"""Fast paths for :func:`~posenc_core.rope.apply_rope` without autograd, each bit-identical to
:func:`~posenc_core.rope.formula.rope_formula`.

Every product and sum of ``x * cos + rotate_pairs(x) * sin`` is its own operation, rounded once
as the formula rounds it; no fused multiply-add (it rounds once where the formula rounds twice).
``tests/core/test_rope.py`` asserts the equality bit for bit for each path, every table shape,
both layouts, partial rotary and ``out=``:

* :func:`rotate` picks a path for a call and falls back from a failed compile;
* :class:`FusedKernel`: the formula compiled by ``torch.compile`` into one pass that reads x
  once and writes the result once, straight into the output buffer (float32/float64 CPU
  tensors; :func:`_rotated`);
* the same for bfloat16/float16 x with tables of its dtype (:func:`_rotated_low`): exact
  float32 products, TwoSum and a midpoint fix-up, so every element is the correctly rounded
  value of the formula, with a redo by :func:`exact_low` for rows whose |x| could make a
  product underflow (bfloat16 only);
* :func:`apply_eager`: cache-sized chunks with ``out=`` arithmetic; for bfloat16/float16 inputs
  with wider tables each chunk is rotated in float64 and rounded once, on the bits, in place
  (``_numerics.round_once_into``), with a guard for results below float32's normal range;
* :func:`exact_low`: bfloat16/float16 x with tables of its dtype off the compiled kernel
  (small inputs, ``fused=False``): float64 products (exact), TwoSum and one rounding of the
  exact sum (``_numerics.round_sum_once``).

Partial rotary (tables of width r < d): the paths rotate ``x[..., :r]`` into ``out[..., :r]``
and copy ``x[..., r:]`` into ``out[..., r:]`` (nothing to copy when rotating in place).

They trust their arguments: ``apply_rope`` and ``RotaryEmbedding.forward`` check them, convert
the tables to the working dtype (:func:`working_dtype`) and route autograd and
``torch.compile`` callers to the plain formula. Timings and the measurements behind the
constants below are in ``benchmarks/README.md``.

Notation for tensor shapes: n = the leading dimensions of x flattened, s = sequence,
d = head_dim, r = rotary width (r <= d).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from .._numerics import LOW_PRECISION, round_once, round_once_into, round_sum_once
from .formula import _halves

# Target number of elements per chunk of the eager path: small enough that the intermediate
# reads and writes of one chunk stay in cache, large enough that the Python loop costs little.
CHUNK_ELEMENTS = 1 << 20
CHUNK_ELEMENTS_LOW = 1 << 18  # for bfloat16/float16 inputs (float64 work): best of 2**16..2**20

# fused=None runs the compiled kernel for CPU inputs of at least this many elements (16 MB of
# float32: beyond that, one pass over memory instead of the eager path's cache-resident passes
# pays for itself; smaller calls never wait for a compile).
FUSED_MIN_ELEMENTS = 1 << 22
FUSED_DTYPES = (torch.float32, torch.float64)
# bfloat16/float16 x with tables of its dtype: the exact float64 eager path (exact_low) costs
# about 100 ns per element, so the compiled kernel pays for itself much earlier
FUSED_MIN_ELEMENTS_LOW = 1 << 16
FUSED_RECOMPILE_LIMIT = 64

# If every nonzero |x| and every nonzero table entry is at least 2**-33, a nonzero exact
# x1*c - x2*s is at least 2**-125: x has an 8-bit and a float32 table a 24-bit significand, so
# each product is a multiple of 2**(e_x + e_c - 30) >= 2**-96; with float64 tables (53 bits) a
# multiple of 2**(-66 - 59) = 2**-125, and the float64 products and sum then differ from zero by
# at least one float64 ulp of numbers >= 2**-66, about 2**-118. So results stay where float32
# is normal, which round_once_into needs.
LOW_MIN_INPUT = 2.0**-33

# The exact float32 kernel for bfloat16 x and tables (_rotated_low) needs every product of an
# x and a table entry to be exact in float32 and its sums far from overflow: nonzero finite
# table entries within [LOW_TABLE_MIN, LOW_TABLE_MAX] (checked on the small tables once per
# call) and nonzero finite |x| within [LOW_X_MIN, LOW_X_MAX) (checked by the kernel, per row;
# rows outside go to the float64 eager path). Then every nonzero product is at least 2**-126
# (a normal float32, exact: 8 + 8 significant bits) and every sum below 2**109, where the
# Veltkamp split used for the tie test cannot overflow. float16 needs no such check: its
# products lie between 2**-48 and 2**32.
LOW_TABLE_MIN, LOW_TABLE_MAX = 2.0**-63, 2.0**8
LOW_X_MIN, LOW_X_MAX = 2.0**-63, 2.0**100


def working_dtype(x_dtype: torch.dtype, table_dtype: torch.dtype) -> torch.dtype:
    """The dtype the formula is evaluated in: x's own for float32/float64; for bfloat16/float16
    x, the tables' dtype when it is x's (the fused kernel's exact float32 arithmetic, or float64
    on the other paths), float64 otherwise."""
    if x_dtype in LOW_PRECISION:
        return x_dtype if table_dtype == x_dtype else torch.float64
    return x_dtype


def can_fuse(x_dtype: torch.dtype, cos_dtype: torch.dtype, sin_dtype: torch.dtype) -> bool:
    """Whether a compiled kernel exists for these dtypes: float32/float64 x (tables of any
    floating dtype, converted to x's), or bfloat16/float16 x with tables of the same dtype
    (:func:`_rotated_low`)."""
    if x_dtype in LOW_PRECISION:
        return cos_dtype == sin_dtype == x_dtype
    return x_dtype in FUSED_DTYPES


def rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    fused: bool | None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """apply_rope without autograd: the fused kernel or the eager path.

    Args:
        x: ``(..., s, d)`` floating tensor, not requiring grad.
        cos, sin: ``(..., s or 1, r)`` tables in the working dtype, broadcasting to
            ``x[..., :r]``.
        layout: ``"half"`` or ``"interleaved"``.
        fused: None (the fused kernel for float32/float64 CPU inputs of at least
            ``FUSED_MIN_ELEMENTS`` with one shared table, unless compiling failed before), True
            (the fused kernel; a compile error is raised) or False (the eager path).
        out: None, x itself (in place) or a tensor of x's shape, dtype and device that shares
            no memory with x.

    Returns:
        ``out``, or a new contiguous tensor of the shape, dtype and device of ``x``.
    """
    d, r = x.shape[-1], cos.shape[-1]
    in_place = out is x
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:  # e.g. an empty sequence: nothing to rotate, and reshape(-1, 0, d) fails
        return out
    table_is_shared = cos.dim() <= 2 or all(n == 1 for n in cos.shape[:-2])
    required = bool(fused)
    if fused is None:
        fused = (
            fused_kernel.error is None
            and x.device.type == "cpu"
            and can_fuse(x.dtype, cos.dtype, sin.dtype)
            and table_is_shared
            and x.numel()
            >= (FUSED_MIN_ELEMENTS_LOW if x.dtype in LOW_PRECISION else FUSED_MIN_ELEMENTS)
        )
    if fused and x.dtype in LOW_PRECISION and not _low_tables_ok(cos, sin):
        fused = False  # tables too small or large for exact float32 products: float64 below
    if fused:
        try:
            _rotate_fused(x, cos, sin, layout, out, in_place, table_is_shared)
            return out
        except Exception as exc:  # noqa: BLE001 - any failure to compile means: use the eager path
            if required:
                raise RuntimeError(f"apply_rope(fused=True): torch.compile failed: {exc}") from exc
            fused_kernel.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            warnings.warn(
                f"apply_rope: the fused kernel could not be compiled ({fused_kernel.error}); "
                "using the eager path from now on (same values, slower)",
                RuntimeWarning,
                stacklevel=4,  # the caller of apply_rope
            )
    if r < d and not in_place:
        out[..., r:].copy_(x[..., r:])  # partial rotary: the rest passes through
    if x.dtype in LOW_PRECISION and cos.dtype == x.dtype:
        exact_low(x[..., :r], cos, sin, layout, out[..., :r])
    else:
        apply_eager(x[..., :r], cos, sin, layout, table_is_shared, out[..., :r])
    return out


def _rows(t: torch.Tensor, s: int, width: int) -> torch.Tensor | None:
    """``t`` as an ``(n, s, width)`` view, or None where its strides do not allow one."""
    try:
        return t.view(-1, s, width)
    except RuntimeError:
        return None


def _rotate_fused(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    out: torch.Tensor,
    in_place: bool,
    table_is_shared: bool,
) -> None:
    """The fused kernel on ``(n, s, r)`` views of x and out (copies where no view exists)."""
    s, d, r = x.shape[-2], x.shape[-1], cos.shape[-1]
    if table_is_shared:
        cos3 = cos.reshape(cos.shape[-2:]) if cos.dim() >= 2 else cos.reshape(1, r)  # (s|1, r)
        sin3 = sin.reshape(cos3.shape)
    else:  # per-batch tables: broadcast them to x's shape in memory first
        cos3 = cos.expand(*x.shape[:-1], r).reshape(-1, s, r)  # (n, s, r)
        sin3 = sin.expand(*x.shape[:-1], r).reshape(-1, s, r)
    cos3, sw3 = cos3.contiguous(), _signed_sin(sin3, layout)
    x3 = _rows(x, s, d)
    o3 = x3 if in_place else _rows(out, s, d)
    if x3 is None or o3 is None:  # strides that no (n, s, d) view has: go through a copy
        buf = x.contiguous() if in_place else torch.empty(x.shape, dtype=x.dtype)
        _rotate_fused(
            buf if in_place else x.contiguous(), cos, sin, layout, buf, in_place, table_is_shared
        )
        out.copy_(buf)
        return
    if x.dtype in LOW_PRECISION:  # tables of x's dtype: the exact float32 kernel
        src = x3[..., :r].clone() if in_place else x3[..., :r]  # in place: keep x for a redo
        if not fused_kernel.low_into(src, cos3, sw3, o3[..., :r], layout):
            # some |x| so small (or large) that a product could leave float32's normal range
            exact_low(src, cos3, sin3, layout, o3[..., :r])
    elif in_place:
        fused_kernel.in_place(x3[..., :r], cos3, sw3, layout)
        return
    else:
        fused_kernel.into(x3[..., :r], cos3, sw3, o3[..., :r], layout)
    if r < d and not in_place:
        o3[..., r:].copy_(x3[..., r:])  # partial rotary: the rest passes through


def _rotated(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor, layout: str):
    """``x * cos + partner(x) * sin_signed`` as one pointwise expression (the compiled body).

    ``partner`` exchanges the two elements of every pair, written as a flip of a size-2
    dimension so that Inductor emits straight vector loads and one store per element, into
    whatever buffer receives the result. ``sin_signed`` (:func:`_signed_sin`: -sin on the
    first element of every pair) makes it the formula bit for bit: (x1 c1 - x2 s1,
    x2 c2 + x1 s2), since (-a) * b == -(a * b) and u + (-w) == u - w exactly.
    """
    r = cos.shape[-1]
    shape = (2, r // 2) if layout == "half" else (r // 2, 2)
    pair_dim = -2 if layout == "half" else -1
    xv = x.unflatten(-1, shape).to(cos.dtype)  # (n, s, 2, r/2) or (n, s, r/2, 2)
    cv, sv = cos.unflatten(-1, shape), sin_signed.unflatten(-1, shape)
    return (xv * cv + xv.flip(pair_dim) * sv).flatten(-2)  # (n, s, r)


def _into_body(
    x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor, out: torch.Tensor, layout: str
) -> None:
    out.copy_(_rotated(x, cos, sin_signed, layout))


def _in_place_body(
    x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor, layout: str
) -> None:
    x.copy_(_rotated(x, cos, sin_signed, layout))  # Inductor sees the aliasing: a temporary


def _rotated_low(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor, layout: str):
    """The correctly rounded rotation of bfloat16/float16 ``x`` by tables of its own dtype,
    in float32 arithmetic (the compiled body for such inputs).

    Per element, z = x_a c + x_b s' (the formula's x1 c1 - x2 s1 or x2 c2 + x1 s2) is
    rounded once, to nearest with ties to even, to the dtype of ``x``:

    1. Both products are exact in float32: 8 x 8 (bfloat16) or 11 x 11 (float16) significant
       bits fit in 24, and the ranges are kept normal (``LOW_X_MIN`` .. ``LOW_TABLE_MAX``).
    2. s = fl(p + q) and its exact error e = (p + q) - s, by Knuth's TwoSum (six operations,
       exact in round-to-nearest without reassociation; Inductor compiles with
       ``-fno-unsafe-math-optimizations`` and no contraction).
    3. Converting s to the dtype rounds z correctly unless s is exactly a midpoint between
       two neighbours of the dtype and e != 0 (rounding to nearest is monotone, and every
       midpoint is a float32). A midpoint is a float32 that fits in p + 1 but not in p
       significant bits (p = 8 or 11), found with two Veltkamp splits (s * (2**k + 1); Dekker
       1971); below 2**-14, float16's fixed grid of 2**-24 is used instead. There the result
       is the neighbour on e's side: hi (the split's rounding of s) or s + (s - hi).
    4. Infinities and NaN in x or the tables give what the formula gives (s is then inf or
       NaN and no midpoint), and signed zeros follow IEEE's rules as in float64.

    Returns ``(y, bad)``: y ``(..., r)`` in x's dtype and, for bfloat16, ``bad`` ``(...)``
    marking the rows with an |x| outside [LOW_X_MIN, LOW_X_MAX) (zero, inf and NaN are fine),
    whose products could underflow; those rows must be recomputed (None for float16).
    """
    dtype = x.dtype
    r = cos.shape[-1]
    shape = (2, r // 2) if layout == "half" else (r // 2, 2)
    pair_dim = -2 if layout == "half" else -1
    xv = x.unflatten(-1, shape).float()  # (n, s, 2, r/2) or (n, s, r/2, 2)
    p = xv * cos.unflatten(-1, shape).float()  # exact
    q = xv.flip(pair_dim) * sin_signed.unflatten(-1, shape).float()  # exact
    s = p + q
    back = s - p
    e = (p - (s - back)) + (q - back)  # TwoSum: s + e == p + q exactly
    bits = 8 if dtype == torch.bfloat16 else 11
    split = s * float(2 ** (24 - bits) + 1)  # Veltkamp: hi = s rounded to `bits` bits
    hi = split - (split - s)
    lo = s - hi
    split1 = s * float(2 ** (23 - bits) + 1)  # and to bits + 1: is s a midpoint?
    lo1 = s - (split1 - (split1 - s))
    if dtype == torch.float16:  # float16 subnormals: one grid of 2**-24 below 2**-14
        grid = (s + 0.75) - 0.75  # s rounded to a multiple of 2**-24 (ulp of 0.75)
        sub = s.abs() < 2.0**-14
        hi = torch.where(sub, grid, hi)
        lo = torch.where(sub, s - grid, lo)
        lo1 = torch.where(sub & ((s - grid).abs() == 2.0**-25), 0.0, torch.where(sub, 1.0, lo1))
    tie = (lo1 == 0) & (lo != 0) & (e != 0)
    toward_e = torch.where((e > 0) == (lo > 0), s + lo, hi)  # exact: both are in the dtype
    y = torch.where(tie, toward_e, s).to(dtype).flatten(-2)  # (n, s, r)
    if dtype != torch.bfloat16:
        return y, None
    a = x.abs()
    bad = ((a < LOW_X_MIN) & (a > 0)) | ((a >= LOW_X_MAX) & (a < math.inf))
    return y, bad.any(-1)


def _low_into_body(
    x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor, out: torch.Tensor, layout: str
) -> torch.Tensor | None:
    y, bad = _rotated_low(x, cos, sin_signed, layout)
    out.copy_(y)
    return bad


def _low_tables_ok(cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """Whether bfloat16 tables keep every product exact in _rotated_low: nonzero finite
    entries within [LOW_TABLE_MIN, LOW_TABLE_MAX] (float16 tables always do)."""
    if cos.dtype != torch.bfloat16:
        return True
    for t in (cos, sin):
        a = t.float().abs()
        finite = a[(a > 0) & (a < math.inf)]
        if finite.numel() and (finite.min() < LOW_TABLE_MIN or finite.max() > LOW_TABLE_MAX):
            return False
    return True


class FusedKernel:
    """The formula compiled by torch.compile into one loop: read x, write the result.

    Compiled on first use (a few seconds; Inductor keeps its own on-disk cache), with the
    leading and sequence dimensions dynamic so a new batch size or sequence length does not
    compile again; head_dim, dtype, layout and the strides' pattern are specialised (one
    compile each). The result is written by the compiled loop straight into the output
    buffer (``out=``, a slice of a KV cache, or a fresh tensor). Inductor compiles C++ with
    ``-ffp-contract=off`` and ``-fno-unsafe-math-optimizations`` (set explicitly below, in
    case the environment says otherwise), so every product and sum is rounded as in the
    formula and the result equals it bit for bit (tested). If compiling fails (no C++
    compiler, say), :func:`rotate` keeps the reason in ``error`` and auto mode stops trying.
    """

    OPTIONS = {
        "cpp.enable_floating_point_contract_flag": "off",
        "cpp.enable_unsafe_math_opt_flag": False,
    }

    def __init__(self) -> None:
        self.fns: dict[str, Any] = {}
        self.error: str | None = None

    def _compiled(self, name: str, body: Any) -> Any:
        if name not in self.fns:
            self.fns[name] = torch.compile(
                body, dynamic=False, fullgraph=True, options=self.OPTIONS
            )
        return self.fns[name]

    def into(
        self,
        x3: torch.Tensor,
        cos: torch.Tensor,
        sin_signed: torch.Tensor,
        out3: torch.Tensor,
        layout: str,
    ) -> None:
        """Write the rotation of ``x3`` (n, s, r) into ``out3`` (n, s, r), tables (s|1, r) or
        (n, s, r)."""
        self._call(self._compiled("into", _into_body), (x3, cos, sin_signed, out3), layout)

    def low_into(
        self,
        x3: torch.Tensor,
        cos: torch.Tensor,
        sin_signed: torch.Tensor,
        out3: torch.Tensor,
        layout: str,
    ) -> bool:
        """Write the correctly rounded rotation of bfloat16/float16 ``x3`` (n, s, r), tables of
        its dtype, into ``out3``; False where some row needs the float64 path instead."""
        bad = self._call(
            self._compiled("low_into", _low_into_body), (x3, cos, sin_signed, out3), layout
        )
        return bad is None or not bool(bad.any())

    def in_place(
        self, x3: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor, layout: str
    ) -> None:
        """Rotate ``x3`` (n, s, r) in place."""
        self._call(self._compiled("in_place", _in_place_body), (x3, cos, sin_signed), layout)

    @staticmethod
    def _call(fn: Any, tensors: tuple[torch.Tensor, ...], layout: str) -> Any:
        # fresh views, so marking dimensions dynamic leaves the caller's tensors untouched
        views = [t.view(t.shape) for t in tensors]
        for t in views:
            dims = (0, 1) if t.dim() == 3 else (0,)
            for dim in dims:
                torch._dynamo.maybe_mark_dynamic(t, dim)
        # one compile per head_dim, dtype and layout (and per size-1 dimension, which dynamo
        # specialises): allow more of them than dynamo's default of 8 per function
        with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=FUSED_RECOMPILE_LIMIT):
            return fn(*views, layout)


fused_kernel = FusedKernel()


def apply_eager(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    table_is_shared: bool,
    out: torch.Tensor,
) -> None:
    """The eager path: chunks of ``CHUNK_ELEMENTS`` (``CHUNK_ELEMENTS_LOW`` for bfloat16/float16,
    whose chunks are rotated in float64 and rounded once) with ``out=`` arithmetic.

    Args:
        x: ``(..., s, r)`` floating tensor (all of x, or its first r dims), at least one
            element.
        cos, sin: tables in the working dtype (float64 for bfloat16/float16 x), broadcasting
            to ``x``.
        layout: ``"half"`` or ``"interleaved"``.
        table_is_shared: whether every leading dimension of the tables is 1 (one (s, r) table).
        out: ``(..., s, r)`` tensor of x's dtype to write into: x itself (in place), or
            sharing no memory with it.
    """
    work = cos.dtype
    s, d = x.shape[-2], x.shape[-1]
    sin_sw = _swap_sin(sin, layout)  # rotate_pairs(x) * sin == x * sin_sw with each pair exchanged
    if not table_is_shared:
        res = torch.empty(x.shape, dtype=work, device=x.device)
        _rotate_into(x.to(work), cos, sin_sw, res, torch.empty_like(res), layout)
        out.copy_(round_once(res, x.dtype))
        return
    outs = _rows(out, s, d)  # (n, s, d)
    if outs is None:  # strides that no (n, s, d) view has: rotate into a buffer, then copy
        buf = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        apply_eager(x, cos, sin, layout, table_is_shared, buf)
        out.copy_(buf)
        return
    cos2 = cos.reshape(cos.shape[-2:]) if cos.dim() >= 2 else cos.reshape(1, d)  # (s or 1, d)
    sin2 = sin_sw.reshape(cos2.shape)
    xs = x.reshape(-1, s, d)  # (n, s, d); a view when x's strides allow it (always in place)
    n = xs.shape[0]
    # chunk over the leading rows, and over the sequence too when one sequence is large
    low = work != x.dtype
    chunk = CHUNK_ELEMENTS_LOW if low else CHUNK_ELEMENTS  # float64 work, int64 scratch: smaller
    rows_per_chunk = max(1, chunk // max(1, s * d))
    seq_per_chunk = s if s * d <= chunk else max(1, chunk // d)
    # scratch shared by all chunks: a fresh allocation per chunk would page-fault every time
    chunk_shape = (min(n, rows_per_chunk), min(s, seq_per_chunk), d)
    tmp = torch.empty(chunk_shape, dtype=work, device=x.device)
    xwork = torch.empty(chunk_shape, dtype=work, device=x.device) if low else None
    bits = torch.empty(chunk_shape, dtype=torch.int64, device=x.device) if low else None
    # bfloat16 results below 2**-126 need round_once (see round_once_into); they cannot
    # occur unless some nonzero input or table entry is below LOW_MIN_INPUT
    check_inputs = x.dtype == torch.bfloat16
    careful = check_inputs and (_has_tiny(cos2, LOW_MIN_INPUT) or _has_tiny(sin2, LOW_MIN_INPUT))
    for r0 in range(0, n, rows_per_chunk):
        for p0 in range(0, s, seq_per_chunk):
            xb = xs[r0 : r0 + rows_per_chunk, p0 : p0 + seq_per_chunk]
            ob = outs[r0 : r0 + rows_per_chunk, p0 : p0 + seq_per_chunk]
            cb = cos2 if cos2.shape[0] == 1 else cos2[p0 : p0 + seq_per_chunk]
            sb = sin2 if sin2.shape[0] == 1 else sin2[p0 : p0 + seq_per_chunk]
            tb = tmp[: xb.shape[0], : xb.shape[1]]
            if xwork is not None:  # low precision: rotate a float64 copy in place, round once
                xw = xwork[: xb.shape[0], : xb.shape[1]]
                xw.copy_(xb)
                _rotate_into(xw, cb, sb, xw, tb, layout)
                if careful or check_inputs and _has_tiny(xb, LOW_MIN_INPUT):
                    ob.copy_(round_once(xw, x.dtype))
                else:
                    round_once_into(xw, ob, bits[: xb.shape[0], : xb.shape[1]])
            else:
                _rotate_into(xb, cb, sb, ob, tb, layout)


def exact_low(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, out: torch.Tensor
) -> None:
    """The correctly rounded rotation of bfloat16/float16 ``x`` by tables of its own dtype,
    always: the eager path for such inputs and the fused kernel's fallback.

    In float64 every product of two bfloat16 (or float16) numbers is exact, whatever their
    exponents; TwoSum gives the exact error of each sum and :func:`round_sum_once` rounds
    the exact value once. Chunks of ``CHUNK_ELEMENTS_LOW`` rows bound the float64
    temporaries.

    Args:
        x: ``(..., s, r)`` bfloat16/float16 tensor.
        cos, sin: tables of x's dtype broadcasting to ``x``.
        layout: ``"half"`` or ``"interleaved"``.
        out: ``(..., s, r)`` tensor of x's dtype: x itself, or sharing no memory with it.
    """
    s, r = x.shape[-2], x.shape[-1]
    lead = torch.broadcast_shapes(x.shape[:-2], cos.shape[:-2])
    xs = x.expand(*lead, s, r).reshape(-1, s, r)  # (n, s, r)
    cs = cos.expand(*lead, *cos.shape[-2:]).reshape(xs.shape[0], -1, r).double()  # (n, s|1, r)
    ss = _signed_sin(sin.expand(*lead, *sin.shape[-2:]).reshape(cs.shape), layout).double()
    rows = max(1, CHUNK_ELEMENTS_LOW // max(1, s * r))
    results = []
    for r0 in range(0, xs.shape[0], rows):
        xd = xs[r0 : r0 + rows].double()
        cd = cs if cs.shape[0] == 1 else cs[r0 : r0 + rows]
        sd = ss if ss.shape[0] == 1 else ss[r0 : r0 + rows]
        p = xd * cd  # exact
        q = _partner(xd, layout) * sd  # exact
        total = p + q
        back = total - p
        err = (p - (total - back)) + (q - back)  # TwoSum
        results.append(round_sum_once(total, err, x.dtype))
    out.copy_(torch.cat(results).view(x.shape) if len(results) > 1 else results[0].view(x.shape))


def _partner(t: torch.Tensor, layout: str) -> torch.Tensor:
    """Every pair's elements exchanged: (a, b) -> (b, a)."""
    shape = (2, t.shape[-1] // 2) if layout == "half" else (t.shape[-1] // 2, 2)
    return t.unflatten(-1, shape).flip(-2 if layout == "half" else -1).flatten(-2)


def _signed_sin(sin: torch.Tensor, layout: str) -> torch.Tensor:
    """The table (-sin of the first, sin of the second element of every pair), contiguous:
    ``partner(x) * sin_signed`` is ``rotate_pairs(x) * sin``."""
    signed = sin.clone(memory_format=torch.contiguous_format)
    first, _ = _halves(signed, layout)
    first.neg_()
    return signed


def _swap_sin(sin: torch.Tensor, layout: str) -> torch.Tensor:
    """The table ``sin_swapped`` for which ``x * sin_swapped`` is ``rotate_pairs(x) * sin`` with
    the two elements of every pair exchanged: (sin of the second, -sin of the first)."""
    swapped = torch.empty(sin.shape, dtype=sin.dtype, device=sin.device)
    w1, w2 = _halves(swapped, layout)
    s1, s2 = _halves(sin, layout)
    w1.copy_(s2)
    torch.neg(s1, out=w2)
    return swapped


def _rotate_into(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin_swapped: torch.Tensor,
    out: torch.Tensor,
    tmp: torch.Tensor,
    layout: str,
) -> None:
    """out = x * cos + rotate_pairs(x) * sin, with the roundings of that formula bit for bit.

    ``sin_swapped`` comes from :func:`_swap_sin`; ``tmp`` is scratch of the shape of ``x``, and
    ``out`` may be ``x`` itself. Every product and sum is its own operation, rounded once as in
    the formula ((-a) * b == -(a * b) exactly); ``addcmul`` is avoided because it may use a
    fused multiply-add, which rounds differently.
    """
    torch.mul(x, sin_swapped, out=tmp)  # pairs (x1 sin2, -x2 sin1): rotate_pairs(x) * sin, swapped
    torch.mul(x, cos, out=out)
    o1, o2 = _halves(out, layout)
    t1, t2 = _halves(tmp, layout)
    o1.add_(t2)  # first of pair:  x1 cos - x2 sin
    o2.add_(t1)  # second of pair: x2 cos + x1 sin


def _has_tiny(t: torch.Tensor, threshold: float) -> bool:
    """Whether some element satisfies 0 < |t| < threshold (a power of two, for bfloat16)."""
    if t.dtype == torch.bfloat16:  # on the bits, several times faster than bfloat16 arithmetic
        below = (127 + int(math.log2(threshold))) << 7  # bits of |threshold|
        # |t|'s bits minus one: zero becomes -1, masked to 0x7fff, and 0 < |t| < threshold
        # gives 0 .. below - 2
        magnitude = (t.view(torch.int16) & 0x7FFF).sub_(1).bitwise_and_(0x7FFF)
        return t.numel() > 0 and int(magnitude.min()) < below - 1
    a = t.abs()
    return bool(((a < threshold) & (a > 0)).any())
