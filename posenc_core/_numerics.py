"""Correct rounding from float64 to bfloat16/float16, and the trig warm-up (see numerics.md)."""

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

    torch converts float64 to bfloat16/float16 through float32, rounding twice; rounding to
    float32 *to odd* first makes the second rounding the correct one (Boldo and Melquiond 2008,
    "Emulation of FMA and correctly rounded sums"). The gradient is that of ``.to(dtype)``. See
    the Numerics page (``numerics.md``); tested in ``tests/core/test_rope.py`` and
    ``test_sinusoidal.py``.

    Args:
        t: any tensor; only float64 input to a low-precision ``dtype`` takes the careful path.
        dtype: target dtype.

    Returns:
        ``t`` converted to ``dtype``, of its shape.
    """
    if dtype not in LOW_PRECISION or t.dtype != torch.float64:
        return t.to(dtype)
    if t.requires_grad and torch.is_grad_enabled():
        return _RoundOnce.apply(t, dtype)
    return _round_once(t, dtype)


_BELOW_FLOAT32 = (1 << 29) - 1  # the float64 significand bits that float32 does not keep


def round_once_into(y: torch.Tensor, out: torch.Tensor, scratch: torch.Tensor) -> None:
    """``out.copy_(round_once(y, out.dtype))`` in place, without temporaries, for float64 ``y``
    (overwritten; ``scratch`` is int64 like it) where float32 is normal: every nonzero
    ``abs(y) >= 2**-126`` (the caller checks it).

    Rounds ``y`` to float32 precision to odd on its bits (drop the low 29 significand bits, set
    the last kept one if any was nonzero), so torch's float64 -> float32 step is exact and the
    float32 -> ``out.dtype`` step the only rounding; infinities and NaNs stay. Same values as
    :func:`round_once` (tested in ``tests/core/test_rope.py``).
    """
    y_bits = y.view(torch.int64)
    torch.bitwise_and(y_bits, _BELOW_FLOAT32, out=scratch)  # the bits to drop (sign excluded)
    scratch.add_(_BELOW_FLOAT32)  # carries into bit 29, the last kept bit, iff one was set
    y_bits.bitwise_or_(scratch).bitwise_and_(~_BELOW_FLOAT32)  # truncate, last kept bit |= sticky
    out.copy_(y)


def round_sum_once(s: torch.Tensor, e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The exact sum ``s + e`` of a TwoSum pair (``s = fl(a + b)``, ``e`` its exact error), rounded
    once to a bfloat16/float16 ``dtype``.

    Rounds ``s + e`` to float32 to odd, taking ``e`` into account where ``s`` alone looks exact,
    then lets torch's float32 -> ``dtype`` conversion round (Boldo and Melquiond 2008). Differs
    from ``round_once(s)`` only where ``s`` is a midpoint of ``dtype`` and ``e`` breaks the tie.
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
    """round_once with the gradient of a plain ``.to(dtype)`` (the bit manipulation has none)."""

    @staticmethod
    def forward(ctx, t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:  # type: ignore[override]
        ctx.source_dtype = t.dtype
        return _round_once(t, dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return grad.to(ctx.source_dtype), None
