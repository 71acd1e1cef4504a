"""Fast paths for :func:`~posenc_core.rope.apply_rope` without autograd, each bit-identical to
:func:`~posenc_core.rope.formula.rope_formula` in the working dtype (:func:`working_dtype`).

* :func:`rotate` picks a path for a call: the native kernel (``native.py``) for CPU tensors
  when it is available (``fused=None``) or required (``fused=True``), else the eager paths;
* :func:`apply_eager`: cache-sized chunks with ``out=`` arithmetic, every product and sum its
  own operation (no fused multiply-add); bfloat16/float16 inputs with wider tables are rotated
  in float64 and rounded once, in place (``_numerics.round_once_into``);
* :func:`exact_low`: bfloat16/float16 x with tables of its dtype off the native kernel: exact
  float64 products, TwoSum and one rounding (``_numerics.round_sum_once``).

Bit for bit covers every non-NaN result; NaN results are NaN at the same positions on every
path, with signs and payloads that may differ. See :doc:`/numerics` for the contract and its
tests (``tests/core/test_rope.py``, ``test_rope_kernels.py``, ``test_rope_native.py``); the
measurements behind the constants below are in ``benchmarks/README.md``. The paths trust their
arguments: ``apply_rope`` and ``RotaryEmbedding.forward`` check them.

Notation for tensor shapes: n = the leading dimensions of x flattened, s = sequence,
d = head_dim, r = rotary width (r <= d).
"""

from __future__ import annotations

import math

import torch

from .._numerics import LOW_PRECISION, round_once, round_once_into, round_sum_once
from . import native
from .formula import _halves

# Target number of elements per chunk of the eager path: small enough that the intermediate
# reads and writes of one chunk stay in cache, large enough that the Python loop costs little.
CHUNK_ELEMENTS = 1 << 20
CHUNK_ELEMENTS_LOW = 1 << 18  # for bfloat16/float16 inputs (float64 work): best of 2**16..2**20

# If every nonzero |x| and every nonzero table entry is at least 2**-33, a nonzero exact
# x1*c - x2*s is at least 2**-125: x has an 8-bit and a float32 table a 24-bit significand, so
# each product is a multiple of 2**(e_x + e_c - 30) >= 2**-96; with float64 tables (53 bits) a
# multiple of 2**(-66 - 59) = 2**-125, and the float64 products and sum then differ from zero by
# at least one float64 ulp of numbers >= 2**-66, about 2**-118. So results stay where float32
# is normal, which round_once_into needs.
LOW_MIN_INPUT = 2.0**-33


def working_dtype(x_dtype: torch.dtype, table_dtype: torch.dtype) -> torch.dtype:
    """The dtype the formula is evaluated in: x's own for float32/float64; for bfloat16/float16
    x, the tables' dtype when it is x's (the exact formula, rounded once: float32 arithmetic
    made exact in the native kernel, float64 in :func:`exact_low`), float64 otherwise."""
    if x_dtype in LOW_PRECISION:
        return x_dtype if table_dtype == x_dtype else torch.float64
    return x_dtype


def rotate(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    fused: bool | None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """apply_rope without autograd: the native kernel or the eager paths.

    Args:
        x: ``(..., s, d)`` floating tensor, not requiring grad.
        cos, sin: ``(..., s or 1, r)`` tables in the working dtype, broadcasting to
            ``x[..., :r]``.
        layout: ``"half"`` or ``"interleaved"``.
        fused: None (the native kernel for CPU tensors when it is available, else eager), True
            (the native kernel; a RuntimeError naming why if it is unavailable) or False.
        out: None, x itself (in place) or a tensor of x's shape, dtype and device that shares
            no memory with x.

    Returns:
        ``out``, or a new contiguous tensor of the shape, dtype and device of ``x``.
    """
    d, r = x.shape[-1], cos.shape[-1]
    in_place = out is x
    if out is None:
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:  # e.g. an empty sequence: nothing to rotate
        return out
    if fused is not False and x.device.type == "cpu" and native.supports(x.dtype, cos.dtype):
        kernel = native.kernel
        if kernel.library() is not None:
            kernel.rotate(x, cos, sin, layout, out)
            return out
        if fused:
            raise RuntimeError(
                f"apply_rope(fused=True): the native kernel is unavailable: {kernel.error}"
            )
        # fused=None: the eager paths, silently (same values); native.status() says why
    if r < d and not in_place:
        out[..., r:].copy_(x[..., r:])  # partial rotary: the rest passes through
    table_is_shared = cos.dim() <= 2 or all(n == 1 for n in cos.shape[:-2])
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
    """The correctly rounded rotation of bfloat16/float16 ``x`` by tables of its own dtype.

    Products of two bfloat16 (or float16) numbers are exact in float64; TwoSum gives each sum's
    exact error and :func:`round_sum_once` rounds the exact value once. Chunks of
    ``CHUNK_ELEMENTS_LOW`` rows bound the float64 temporaries.

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
