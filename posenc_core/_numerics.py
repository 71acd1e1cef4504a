"""Correct rounding from float64 to the low-precision dtypes."""

from __future__ import annotations

import torch

LOW_PRECISION = (torch.float16, torch.bfloat16)


_trig_warm = False  # True once warm_up_trigonometry has run in this process


def warm_up_trigonometry() -> None:
    """Call torch's sin and cos once on a few elements (one thread), the first time only.

    In a fresh process the first float64 sin/cos call split across threads can be inexact
    (seen with torch 2.13 on CPU); a small call first avoids it. Every core function that
    computes sin or cos calls this just before, so ``import posenc_core`` computes nothing and
    later calls cost one check. See the Numerics page (``numerics.md``).
    """
    global _trig_warm
    if _trig_warm:
        return
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor([0.0, 1.0, 1e3, 1e6], dtype=dtype)  # small and large arguments
        torch.sin(x)
        torch.cos(x)
    _trig_warm = True


def round_once(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Round a float64 tensor to ``dtype`` to nearest (ties to even), as one rounding.

    torch converts float64 to bfloat16/float16 through float32, rounding twice, which misses
    the nearest value for about one element in 2**16 (bfloat16) or 2**14 (float16). Rounding
    to float32 *to odd* first (truncate, then set the last bit if inexact) makes the second
    rounding give the correctly rounded result, since float32 keeps more than two extra bits
    (Boldo and Melquiond 2008, "Emulation of FMA and correctly rounded sums").

    Args:
        t: any tensor; only float64 input to a low-precision ``dtype`` takes the careful path.
        dtype: target dtype.

    Returns:
        ``t`` converted to ``dtype``.
    """
    if dtype not in LOW_PRECISION or t.dtype != torch.float64:
        return t.to(dtype)
    if t.requires_grad and torch.is_grad_enabled():
        return _RoundOnce.apply(t, dtype)
    return _round_once(t, dtype)


_BELOW_FLOAT32 = (1 << 29) - 1  # the float64 significand bits that float32 does not keep


def round_once_into(y: torch.Tensor, out: torch.Tensor, scratch: torch.Tensor) -> None:
    """``out.copy_(round_once(y, out.dtype))`` for float64 ``y`` and a bfloat16/float16 ``out``,
    in place and without temporaries (``y`` is overwritten; ``scratch`` is int64 like ``y``),
    where float32 is normal: every nonzero ``|y| >= 2**-126`` (the caller checks it).

    Rounds ``y`` to float32 precision *to odd* on its bits (drop the 29 low significand bits,
    and set the last kept one if any of them was nonzero), so that torch's float64 -> float32
    step is exact and its float32 -> low-precision step is the only rounding (Boldo and
    Melquiond 2008; float32 keeps more than two bits beyond bfloat16 and float16). Infinities
    stay infinite and NaNs stay NaN. Same values as :func:`round_once` (tested), which is
    written for clarity and allocates several temporaries.
    """
    y_bits = y.view(torch.int64)
    torch.bitwise_and(y_bits, _BELOW_FLOAT32, out=scratch)  # the bits to drop (sign excluded)
    scratch.add_(_BELOW_FLOAT32)  # carries into bit 29, the last kept bit, iff one was set
    y_bits.bitwise_or_(scratch).bitwise_and_(~_BELOW_FLOAT32)  # truncate, last kept bit |= sticky
    out.copy_(y)


def round_sum_once(s: torch.Tensor, e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The exact sum ``s + e`` of two float64 tensors from TwoSum (``s = fl(a + b)``, ``e``
    its exact error, so ``|e| <= ulp(s) / 2``), rounded once to a bfloat16/float16 ``dtype``.

    Rounds ``s + e`` to float32 *to odd* (toward zero, then the last bit set if inexact),
    taking ``e`` into account where ``s`` alone would look exact (Boldo and Melquiond 2008),
    then lets torch's float32 -> ``dtype`` conversion do the only rounding. This is what
    ``round_once(s)`` gives, except where ``s`` is itself a midpoint of ``dtype`` and ``e``
    breaks the tie, which float64 alone cannot see.
    """
    f = s.to(torch.float32)  # to nearest; inf beyond float32's range
    d = f.double() - s  # exact: f is within one float32 ulp of s (inf where f overflowed)
    positive = s > 0
    past = torch.where(positive, d > e, d < e)  # |f| > |s + e|: step toward zero
    f = torch.where(past, torch.nextafter(f, torch.zeros_like(f)), f)
    odd = (f.view(torch.int32) | 1).view(torch.float32)
    rounded = torch.where(d != e, odd, f).to(dtype)  # d == e: f is s + e exactly
    return torch.where(s.isfinite(), rounded, s.to(dtype))  # inf and NaN stay as they are


def _round_once(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    f = t.to(torch.float32)
    f = torch.where(
        f.double().abs() > t.abs(), torch.nextafter(f, torch.zeros_like(f)), f
    )  # toward 0
    odd = (f.view(torch.int32) | 1).view(torch.float32)
    return torch.where(f.double() != t, odd, f).to(dtype)


class _RoundOnce(torch.autograd.Function):
    """round_once with the gradient of a plain ``.to(dtype)``: the incoming gradient, cast back.

    (The bit manipulation above has no derivative of its own: without this, every element
    whose rounding is inexact would get a zero gradient.)
    """

    @staticmethod
    def forward(ctx, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:  # type: ignore[override]
        ctx.source_dtype = t.dtype
        return _round_once(t, dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return grad.to(ctx.source_dtype), None
