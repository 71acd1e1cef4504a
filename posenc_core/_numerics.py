"""Correct rounding from float64 to the low-precision dtypes."""

from __future__ import annotations

import torch

LOW_PRECISION = (torch.float16, torch.bfloat16)


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
    f = t.to(torch.float32)
    f = torch.where(f.double().abs() > t.abs(), torch.nextafter(f, torch.zeros_like(f)), f)  # toward 0
    odd = (f.view(torch.int32) | 1).view(torch.float32)
    return torch.where(f.double() != t, odd, f).to(dtype)
