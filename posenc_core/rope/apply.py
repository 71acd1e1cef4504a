"""Applying RoPE: :func:`apply_rope`, the checked entry point.

:func:`apply_rope` and :class:`~posenc_core.rope.RotaryEmbedding` check their arguments once
and call ``_apply``, which trusts them: with autograd (or under the caller's
``torch.compile``) it evaluates :func:`~posenc_core.rope.formula.rope_formula`, otherwise one
of the fast paths in ``kernels.py``, each bit-identical to it (see :doc:`/numerics`).

Notation for tensor shapes: b = batch, h = heads, s = sequence, d = head_dim, r = rotary
width (the tables' last dimension, r <= d).
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
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rotate every pair of ``x[..., :r]`` by its angle: ``x * cos + rotate_pairs(x) * sin``.

    Su et al. 2021, Eq. 34. r is the tables' width; ``x[..., r:]`` passes through unchanged
    (partial rotary: GPT-NeoX and Phi with ``"half"``, GPT-J with ``"interleaved"``). Every
    ``fused`` choice gives the formula's bits; bfloat16/float16 results are correctly rounded.
    Bit for bit covers every non-NaN result; NaN results are NaN at the same positions on every
    path, with signs and payloads that may differ (see :doc:`/numerics`). Tested in
    ``tests/core/test_rope_reference.py`` against Hugging Face's ``apply_rotary_pos_emb``
    (``"half"``), Meta's Llama ``apply_rotary_emb`` and RoFormer's matrix (``"interleaved"``).

    Args:
        x: ``(..., s, d)`` strided floating tensor, e.g. ``(b, h, s, d)``.
        cos, sin: tables from :func:`~posenc_core.rope.rope_cos_sin` with the same ``layout``,
            ``(s, r)`` or broadcasting to ``x[..., :r]`` (e.g. ``(b, 1, s, r)``), on x's
            device; r even, 2 <= r <= d.
        layout: ``"half"`` (pairs (i, i + r/2)) or ``"interleaved"`` (pairs (2i, 2i + 1)).
        fused: None (the native C kernel for CPU tensors when it is available, else the eager
            path; ``native.status()`` says which), True (the native kernel) or False (eager).
            With autograd or under ``torch.compile`` the plain formula runs.
        out: optional tensor of x's shape, dtype and device to write into (``out=x``: in
            place; a KV-cache slice works); it must not partly overlap ``x``, overlap the
            tables or itself, and no input may require grad.

    Returns:
        ``out``, or a new tensor of the shape, dtype and device of ``x``.

    Raises:
        TypeError: a non-tensor, non-floating or sparse argument, or a ``fused`` not a bool.
        ValueError: shapes, devices or an ``out`` that do not fit, or an invalid ``POSENC_NATIVE``.
        RuntimeError: ``fused=True`` (or ``POSENC_NATIVE=1``) and the native kernel is unavailable.
    """
    _check_apply_args(x, cos, sin, layout, fused, out)
    return _apply(x, cos, sin, layout, fused, out)


def _apply(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    fused: bool | None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """:func:`apply_rope` for checked arguments (r = cos.shape[-1] <= d = x.shape[-1])."""
    if out is not None and out is not x and _same_view(out, x):
        out = x  # another view of the same elements: rotate in place
    if _needs_grad(x, cos, sin) or torch.compiler.is_compiling():
        work = torch.float64 if x.dtype in LOW_PRECISION else x.dtype
        cos, sin, r = cos.to(work), sin.to(work), cos.shape[-1]
        y = round_once(rope_formula(x[..., :r], cos, sin, layout), x.dtype)  # (..., s, r)
        if r < x.shape[-1]:
            y = torch.cat((y, x[..., r:]), -1)  # (..., s, d)
        return y if out is None else out.copy_(y)
    work = kernels.working_dtype(x.dtype, cos.dtype)
    cos, sin = cos.to(work), sin.to(work)
    return kernels.rotate(x, cos, sin, layout, fused, out)


def _needs_grad(*tensors: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _check_apply_args(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    layout: str,
    fused: bool | None,
    out: torch.Tensor | None,
) -> None:
    for name, t, min_dim in (("x", x, 2), ("cos", cos, 1), ("sin", sin, 1)):
        check.tensor(name, t, min_dim=min_dim, floating=True)
        _check_strided(name, t)
    check.layout("layout", layout)
    d = x.shape[-1]
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    r = cos.shape[-1]
    if r % 2 or r < 2 or r > d:
        raise ValueError(
            f"cos and sin must have an even last dimension r (the rotary width) with "
            f"2 <= r <= head_dim={d} (the last dimension of x), got shape {tuple(cos.shape)}"
        )
    rotated = (*x.shape[:-1], r)
    if _broadcast_shape(rotated, cos.shape) != rotated:
        raise ValueError(
            f"cos and sin of shape {tuple(cos.shape)} must broadcast to x of shape "
            f"{tuple(x.shape)} (..., seq, head_dim; the first {r} dims are rotated); for "
            f"per-batch positions give them shape (b, 1, s, {r})"
        )
    if cos.device != x.device or sin.device != x.device:
        raise ValueError(
            f"cos, sin and x must be on one device, got {cos.device}, {sin.device} and {x.device}"
        )
    if fused is not None and not isinstance(fused, bool):
        raise TypeError(
            f"fused must be None, True or False, got {fused!r} of type {type(fused).__name__}"
        )
    if out is not None:
        _check_out(x, cos, sin, out)
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


def _check_out(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, out: object) -> None:
    """``out`` is a strided tensor of x's shape, dtype and device, is x itself or shares no
    memory with it, shares none with cos or sin (rotating in place too), and no input requires
    grad. Checked here, before a path is chosen, so that every path refuses the same calls."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"out must be None or a torch.Tensor, got {type(out).__name__}")
    _check_strided("out", out)
    if out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError(
            f"out must have the shape, dtype and device of x ({tuple(x.shape)}, {x.dtype}, "
            f"{x.device}), got {tuple(out.shape)}, {out.dtype}, {out.device}"
        )
    if torch.is_grad_enabled() and any(t.requires_grad for t in (x, cos, sin, out)):
        raise ValueError(
            "out= does not support autograd (as torch's own out= functions), but an input "
            "or out requires grad; call apply_rope without out, or under torch.no_grad()"
        )
    if _overlaps_itself(out):  # checked here so that every path refuses it alike
        what = "out=x (x, rotated in place)" if out is x else "out"
        raise ValueError(
            f"{what} has elements that overlap: its shape {tuple(out.shape)} and strides "
            f"{tuple(out.stride())} address one memory location by several indices (e.g. a "
            f"stride 0 from expand), so the results would overwrite each other; .clone() it "
            f"first (a tensor that owns its elements)"
        )
    in_place = _same_view(out, x)
    tables = [name for name, t in (("cos", cos), ("sin", sin)) if _may_overlap(out, t)]
    if in_place and tables:  # every path alike: the tables would change while they are read
        raise ValueError(
            f"out=x (x, rotated in place) must share no memory with cos or sin, but it "
            f"overlaps {' and '.join(tables)}: the tables would be overwritten while they are "
            f"read; pass tables that own their elements (.clone() them) or an out of its own"
        )
    if not in_place and (tables or _may_overlap(out, x)):
        raise ValueError(
            "out must be x itself (same storage offset and strides, to rotate in place) or "
            "share no memory with x, cos or sin; got an out that partly overlaps them"
        )


def _check_strided(name: str, t: torch.Tensor) -> None:
    """``t`` is a strided (dense) tensor: the paths index its elements through strides."""
    if t.layout != torch.strided:
        raise TypeError(
            f"{name} must be a strided (dense) tensor, got layout {t.layout}; "
            f"convert it with .to_dense() first"
        )


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        and a.storage_offset() == b.storage_offset()
        and a.stride() == b.stride()
    )


def _overlaps_itself(t: torch.Tensor) -> bool:
    """Whether two indices of ``t`` address one element (torch's "internal overlap").

    Sorted by stride, a dimension whose stride exceeds the largest offset the smaller strides
    reach cannot land on their elements (every slice, transpose or permutation of a tensor that
    owns its elements passes); a stride 0 is an overlap; anything else is decided exactly.
    """
    if t.is_contiguous():  # the common case, at C speed
        return False
    extent = 0  # the largest offset the dimensions of smaller stride reach
    for st, n in sorted((st, n) for n, st in zip(t.shape, t.stride()) if n > 1):
        if st == 0:
            return True
        if st <= extent:
            offsets = torch.zeros((), dtype=torch.int64)
            for size, stride in zip(t.shape, t.stride()):
                offsets = offsets[..., None] + torch.arange(size) * stride
            return bool(offsets.unique().numel() < offsets.numel())
        extent += (n - 1) * st
    return False


def _may_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the memory spans of a and b (first to last byte addressed) intersect: torch's
    own test for ``out=`` arguments (``at::get_overlap_status``), conservative for views
    that interleave without sharing an element."""
    if a.numel() == 0 or b.numel() == 0:
        return False
    if a.untyped_storage().data_ptr() != b.untyped_storage().data_ptr():
        return False

    def span(t: torch.Tensor) -> tuple[int, int]:  # strides are never negative in torch
        extent = sum((n - 1) * st for n, st in zip(t.shape, t.stride())) + 1
        return t.data_ptr(), t.data_ptr() + extent * t.element_size()

    (a0, a1), (b0, b1) = span(a), span(b)
    return a0 < b1 and b0 < a1


def _broadcast_shape(*shapes: torch.Size | tuple[int, ...]) -> torch.Size | None:
    """torch.broadcast_shapes, or None where the shapes do not broadcast."""
    try:
        return torch.broadcast_shapes(*shapes)
    except RuntimeError:
        return None
