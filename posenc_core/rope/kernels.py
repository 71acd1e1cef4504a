"""Fast paths for :func:`~posenc_core.rope.apply_rope` without autograd, each bit-identical to
:func:`~posenc_core.rope.formula.rope_formula`.

Every product and sum of ``x * cos + rotate_pairs(x) * sin`` is its own operation, rounded once
as the formula rounds it; no fused multiply-add (it rounds once where the formula rounds twice).
``tests/core/test_rope.py`` asserts the equality bit for bit for each path, every table shape
and both layouts:

* :func:`rotate` picks a path for a call and falls back from a failed compile;
* :class:`FusedKernel`: the formula compiled by ``torch.compile`` into one pass that reads x
  once and writes the result once (float32/float64 CPU tensors);
* :func:`apply_eager`: cache-sized chunks with ``out=`` arithmetic; for bfloat16/float16 inputs
  each chunk is rotated in float64 and rounded once, on the bits, in place
  (``_numerics.round_once_into``), with a guard for results below float32's normal range.

They trust their arguments: ``apply_rope`` and ``RotaryEmbedding.forward`` check them, convert
the tables to the working dtype (float64 for bfloat16/float16 inputs, else the input's) and
route autograd and ``torch.compile`` callers to the plain formula. Timings and the measurements
behind the constants below are in ``benchmarks/README.md``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch

from .._numerics import round_once, round_once_into
from .formula import _halves, rope_formula

# Target number of elements per chunk of the eager path: small enough that the intermediate
# reads and writes of one chunk stay in cache, large enough that the Python loop costs little.
CHUNK_ELEMENTS = 1 << 20
CHUNK_ELEMENTS_LOW = 1 << 18  # for bfloat16/float16 inputs (float64 work): best of 2**16..2**20

# fused=None runs the compiled kernel for float32/float64 CPU inputs of at least this many
# elements (16 MB of float32: beyond that, one pass over memory instead of the eager path's
# cache-resident passes pays for itself; smaller calls never wait for a compile).
FUSED_MIN_ELEMENTS = 1 << 22
FUSED_DTYPES = (torch.float32, torch.float64)
FUSED_RECOMPILE_LIMIT = 64

# If every nonzero |x| and every nonzero table entry is at least 2**-33, a nonzero exact
# x1*c - x2*s is at least 2**-125: x has an 8-bit and a float32 table a 24-bit significand, so
# each product is a multiple of 2**(e_x + e_c - 30) >= 2**-96; with float64 tables (53 bits) a
# multiple of 2**(-66 - 59) = 2**-125, and the float64 products and sum then differ from zero by
# at least one float64 ulp of numbers >= 2**-66, about 2**-118. So results stay where float32
# is normal, which round_once_into needs.
LOW_MIN_INPUT = 2.0**-33


def rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, fused: bool | None
) -> torch.Tensor:
    """apply_rope without autograd: the fused kernel or the eager path.

    Args:
        x: ``(..., s, d)`` floating tensor, not requiring grad.
        cos, sin: tables in the working dtype, broadcasting to ``x``.
        layout: ``"half"`` or ``"interleaved"``.
        fused: None (the fused kernel for float32/float64 CPU inputs of at least
            ``FUSED_MIN_ELEMENTS`` with one shared table, unless compiling failed before), True
            (the fused kernel; a compile error is raised) or False (the eager path).

    Returns:
        tensor of the shape, dtype and device of ``x``.
    """
    s, d = x.shape[-2], x.shape[-1]
    table_is_shared = cos.dim() <= 2 or all(n == 1 for n in cos.shape[:-2])
    if x.numel() == 0:  # e.g. an empty sequence: nothing to rotate, and reshape(-1, 0, d) fails
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)
    required = bool(fused)
    if fused is None:
        fused = (
            fused_kernel.error is None
            and x.device.type == "cpu"
            and x.dtype in FUSED_DTYPES
            and table_is_shared
            and x.numel() >= FUSED_MIN_ELEMENTS
        )
    if fused:
        x3 = x.reshape(-1, s, d)  # (n, s, d)
        if table_is_shared:
            cos2 = cos.reshape(cos.shape[-2:]) if cos.dim() >= 2 else cos.reshape(1, d)
            cos3, sin3 = cos2.contiguous(), sin.reshape(cos2.shape).contiguous()  # (s or 1, d)
        else:  # per-batch tables: broadcast them to x's shape in memory first
            cos3 = cos.expand(x.shape).reshape(-1, s, d)  # (n, s, d)
            sin3 = sin.expand(x.shape).reshape(-1, s, d)
        try:
            return fused_kernel(x3, cos3, sin3, layout).view(x.shape)
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
    return apply_eager(x, cos, sin, layout, table_is_shared)


class FusedKernel:
    """The formula compiled by torch.compile into one loop: read x, write the result.

    Compiled on first use (a few seconds; Inductor keeps its own on-disk cache), with the
    leading and sequence dimensions dynamic so a new batch size or sequence length does not
    compile again; head_dim, dtype and layout are specialised (one compile each). Inductor
    compiles C++ with ``-ffp-contract=off`` by default, so every product and sum is rounded as
    in the formula and the result equals it bit for bit (tested). If compiling fails (no C++
    compiler, say), :func:`rotate` keeps the reason in ``error`` and auto mode stops trying.
    """

    def __init__(self) -> None:
        self.fn: Any = None
        self.error: str | None = None

    def __call__(
        self, x3: torch.Tensor, cos2: torch.Tensor, sin2: torch.Tensor, layout: str
    ) -> torch.Tensor:
        """Rotate ``x3`` of shape (n, s, d) by tables of shape (s or 1, d) or (n, s, d)."""
        if self.fn is None:
            self.fn = torch.compile(rope_formula, dynamic=False, fullgraph=True)
        # fresh views, so marking dimensions dynamic leaves the caller's tensors untouched
        x3, cos2, sin2 = x3.view(x3.shape), cos2.view(cos2.shape), sin2.view(sin2.shape)
        for t, dims in ((x3, (0, 1)), (cos2, (0,)), (sin2, (0,))):
            for dim in dims:
                torch._dynamo.maybe_mark_dynamic(t, dim)
        # one compile per head_dim, dtype and layout (and per size-1 dimension, which dynamo
        # specialises): allow more of them than dynamo's default of 8 per function
        with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=FUSED_RECOMPILE_LIMIT):
            return self.fn(x3, cos2, sin2, layout)


fused_kernel = FusedKernel()


def apply_eager(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, table_is_shared: bool
) -> torch.Tensor:
    """The eager path: chunks of ``CHUNK_ELEMENTS`` (``CHUNK_ELEMENTS_LOW`` for bfloat16/float16,
    whose chunks are rotated in float64 and rounded once) with ``out=`` arithmetic.

    Args:
        x: ``(..., s, d)`` floating tensor, with at least one element.
        cos, sin: tables in the working dtype, broadcasting to ``x``.
        layout: ``"half"`` or ``"interleaved"``.
        table_is_shared: whether every leading dimension of the tables is 1 (one (s, d) table).

    Returns:
        tensor of the shape, dtype and device of ``x``.
    """
    work = cos.dtype
    s, d = x.shape[-2], x.shape[-1]
    sin_sw = _swap_sin(sin, layout)  # rotate_pairs(x) * sin == x * sin_sw with each pair exchanged
    if not table_is_shared:
        out = torch.empty(x.shape, dtype=work, device=x.device)
        _rotate_into(x.to(work), cos, sin_sw, out, torch.empty_like(out), layout)
        return round_once(out, x.dtype)
    cos2 = cos.reshape(cos.shape[-2:]) if cos.dim() >= 2 else cos.reshape(1, d)  # (s or 1, d)
    sin2 = sin_sw.reshape(cos2.shape)
    xs = x.reshape(-1, s, d)  # (n, s, d); a view when x is contiguous
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    outs = out.view(-1, s, d)  # (n, s, d)
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
    return out


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
