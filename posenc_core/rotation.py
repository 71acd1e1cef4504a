"""Rotations and the relative-position identity PE(p + k) = M_k PE(p).

For one frequency omega, the pair (sin(omega p), cos(omega p)) is a point on the unit
circle. By the angle-addition formulas

    sin(omega (p+k)) =  cos(omega k) sin(omega p) + sin(omega k) cos(omega p)
    cos(omega (p+k)) = -sin(omega k) sin(omega p) + cos(omega k) cos(omega p)

so moving k positions multiplies the pair by a 2x2 matrix that depends on k, not on p.
Stacking one block per frequency gives the block-diagonal ``M_k`` (the property Vaswani et
al. 2017, Sec. 3.5, cite as the reason for choosing sinusoids; derived in chapter 4).

Notation for tensor shapes: d = d_model, ``T`` = any shape of angles.
"""

from __future__ import annotations

import torch

from . import _validation as check
from ._numerics import warm_up_trigonometry
from .sinusoidal import _frequencies


def rotation_matrix(theta: torch.Tensor | float) -> torch.Tensor:
    """Counter-clockwise rotation [[cos t, -sin t], [sin t, cos t]] for each angle.

    Checked in ``tests/core/test_rotation.py``: determinant 1, R(a) R(b) = R(a + b), and a
    quarter turn maps (1, 0) to (0, 1).

    Args:
        theta: angle(s) in radians, any shape ``T``.

    Returns:
        float64 tensor of shape ``T + (2, 2)``.
    """
    t = check.as_positions("theta", theta)
    warm_up_trigonometry()  # once per process: see the Numerics page
    c, s = torch.cos(t), torch.sin(t)
    return torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)


def shift_matrix(
    k: int | float,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """The matrix M_k with ``PE(p + k) = M_k @ PE(p)`` for every position p.

    Interleaved layout: block diagonal, blocks ``[[cos(omega_i k), sin(omega_i k)],
    [-sin(omega_i k), cos(omega_i k)]]`` on (sin, cos) pairs (``rotation_matrix(-omega_i * k)``);
    half layout: the same coefficients on the diagonals of four (d/2 x d/2) blocks. From the
    angle-addition formulas (Vaswani et al. 2017, Sec. 3.5); tested in
    ``tests/core/test_rotation.py`` by moving every row of the table by k, in both layouts.

    Args:
        k: the shift in positions (any finite real number).
        d_model: positive even width; the float64 matrix may take at most ``MAX_RESULT_BYTES``.
        base: frequency base, finite and > 1.
        layout: ``"interleaved"`` or ``"half"``, matching the table it acts on.
        dtype: dtype of the result (built in float64, rounded once).

    Returns:
        tensor of shape ``(d_model, d_model)``.
    """
    k = check.real_number("k", k)
    d_model = check.width("d_model", d_model, where="shift_matrix")
    check.result_size(
        "shift_matrix",
        "the (d_model, d_model) matrix",
        {"d_model": d_model},
        d_model * d_model,
        advice="it is block diagonal: rotation_matrix gives its 2 x 2 blocks",
    )
    base = check.base_value("base", base)
    layout = check.layout("layout", layout)
    dtype = check.float_dtype("dtype", dtype)
    omega = _frequencies(d_model, base)  # (d/2,)
    warm_up_trigonometry()  # once per process: see the Numerics page
    c, s = torch.cos(omega * k), torch.sin(omega * k)  # (d/2,)
    half = d_model // 2
    m = torch.zeros(d_model, d_model, dtype=torch.float64)  # (d, d)
    if layout == "interleaved":
        idx = torch.arange(half) * 2  # rows of the sin entries
        m[idx, idx], m[idx, idx + 1] = c, s
        m[idx + 1, idx], m[idx + 1, idx + 1] = -s, c
    else:  # "half"
        idx = torch.arange(half)
        m[idx, idx], m[idx, idx + half] = c, s
        m[idx + half, idx], m[idx + half, idx + half] = -s, c
    return m.to(dtype)
