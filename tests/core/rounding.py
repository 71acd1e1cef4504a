"""Shared checks for the low-precision tests (a test helper, not a reference implementation)."""

import math

import torch


def is_nearest(got, ref, slack):
    """Every element of ``got`` (a low-precision tensor) is a nearest representable value to
    ``ref`` (float64): no neighbour (torch.nextafter in got's dtype) is closer by more than
    ``slack``."""
    g = got.double()
    up = torch.nextafter(got, torch.full_like(got, math.inf)).double()
    down = torch.nextafter(got, torch.full_like(got, -math.inf)).double()
    err = (g - ref).abs()
    return (err <= (up - ref).abs() + slack) & (err <= (down - ref).abs() + slack)
