"""Applying RoPE: :func:`apply_rope`, the checked entry point (``module.py`` holds
:class:`~posenc_core.rope.RotaryEmbedding`, which calls its unchecked core ``_apply``).

Both check their arguments once and then call ``_apply``, which trusts them: with autograd
(or under the caller's ``torch.compile``) it evaluates the formula
(:func:`~posenc_core.rope.formula.rope_formula`), otherwise one of the fast paths in
``kernels.py``, each bit-identical to it.

Notation for tensor shapes: b = batch, h = heads, s = sequence, d = head_dim, P = any shape
of positions.
"""

from __future__ import annotations

import torch

from .. import _validation as check
from .._numerics import LOW_PRECISION, round_once
from . import kernels
from .formula import rope_formula


def apply_rope(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    layout: str = "half",
    fused: bool | None = None,
) -> torch.Tensor:
    """Rotate every pair of ``x`` by its angle: ``x * cos + rotate_pairs(x) * sin``.

    Su et al. 2021, Eq. 34. Equal bit for bit to that formula evaluated in the working dtype
    (the dtype of ``x``; float64 for bfloat16/float16 inputs, then rounded once to their
    dtype), on every path (``tests/core/test_rope.py``); within float rounding of Hugging
    Face's ``apply_rotary_pos_emb`` for ``layout="half"`` and of Meta's Llama
    ``apply_rotary_emb`` (complex multiplication) and RoFormer's block-diagonal matrix for
    ``"interleaved"`` (``tests/core/test_rope_reference.py``). Out of place; ``x`` is not
    modified.

    Args:
        x: ``(..., s, d)`` floating tensor, e.g. ``(b, h, s, d)``, with an even d.
        cos, sin: floating tables from :func:`~posenc_core.rope.rope_cos_sin` with the same
            ``layout``, of shape ``(s, d)`` or anything that broadcasts to ``x`` (e.g.
            ``(b, 1, s, d)``), on the device of ``x``.
        layout: ``"half"`` or ``"interleaved"``.
        fused: ``None`` (choose: the compiled kernel for float32/float64 CPU tensors of at
            least 2**22 elements with one shared table, else the eager path), ``True`` (the
            compiled kernel: float32/float64 CPU tensors without autograd; compile errors are
            raised) or ``False`` (never compile). With autograd the plain formula runs.

    Returns:
        tensor of the shape, dtype and device of ``x``. Float32/float64: the formula's values
        for the given tables. bfloat16/float16: the formula in float64, rounded once, i.e. the
        correctly rounded value (with float64 tables, as :class:`RotaryEmbedding` uses for
        such inputs, the correctly rounded exact rotation).
    """
    _check_apply_args(x, cos, sin, layout, fused)
    return _apply(x, cos, sin, layout, fused)


def _apply(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, fused: bool | None
) -> torch.Tensor:
    """:func:`apply_rope` for checked arguments."""
    work = torch.float64 if x.dtype in LOW_PRECISION else x.dtype
    cos, sin = cos.to(work), sin.to(work)
    if _needs_grad(x, cos, sin) or torch.compiler.is_compiling():
        return round_once(rope_formula(x, cos, sin, layout), x.dtype)
    return kernels.rotate(x, cos, sin, layout, fused)


def _needs_grad(*tensors: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _check_apply_args(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, fused: bool | None
) -> None:
    check.tensor("x", x, min_dim=2, floating=True)
    check.tensor("cos", cos, min_dim=1, floating=True)
    check.tensor("sin", sin, min_dim=1, floating=True)
    check.layout("layout", layout)
    d = check.even_int("x.shape[-1] (head_dim)", x.shape[-1])
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if cos.shape[-1] != d:
        raise ValueError(
            f"cos and sin must have last dimension head_dim={d} (the last dimension of x), "
            f"got shape {tuple(cos.shape)}"
        )
    if _broadcast_shape(x.shape, cos.shape) != x.shape:
        raise ValueError(
            f"cos and sin of shape {tuple(cos.shape)} must broadcast to x of shape "
            f"{tuple(x.shape)} (..., seq, head_dim); for per-batch positions give them shape "
            "(b, 1, s, d)"
        )
    if cos.device != x.device or sin.device != x.device:
        raise ValueError(
            f"cos, sin and x must be on one device, got {cos.device}, {sin.device} and {x.device}"
        )
    if fused is not None and not isinstance(fused, bool):
        raise TypeError(
            f"fused must be None, True or False, got {fused!r} of type {type(fused).__name__}"
        )
    if not fused:
        return
    if _needs_grad(x, cos, sin):
        raise ValueError(
            "fused=True computes without autograd, but an input requires grad; "
            "use fused=None (the plain formula is used when gradients are needed)"
        )
    if x.device.type != "cpu":
        raise ValueError(
            f"fused=True is for CPU tensors, got x on {x.device}; use fused=None or False"
        )
    if x.dtype not in kernels.FUSED_DTYPES:
        raise ValueError(
            f"fused=True is for float32 and float64 tensors, got x of dtype {x.dtype} "
            "(bfloat16/float16 are rotated in float64 and rounded once by the eager path); "
            "use fused=None or False"
        )


def _broadcast_shape(*shapes: torch.Size | tuple[int, ...]) -> torch.Size | None:
    """torch.broadcast_shapes, or None where the shapes do not broadcast."""
    try:
        return torch.broadcast_shapes(*shapes)
    except RuntimeError:
        return None
