"""The RoPE formula, and the cos/sin tables it takes.

Every pair (x1, x2) of a query or key at position m turns by the angle m * theta_i::

    rope(x) = x * cos + rotate_pairs(x) * sin,      rotate_pairs: (x1, x2) -> (-x2, x1)

that is (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin): Su et al. 2021 ("RoFormer"), Eq. 34,
and Hugging Face's ``q * cos + rotate_half(q) * sin`` (``apply_rotary_pos_emb``). Pair i is
(x[i], x[i + d/2]) in the ``"half"`` layout (tables ``cat(c, c)``) and (x[2i], x[2i+1]) in the
``"interleaved"`` one (each c_i on dims 2i, 2i+1; RoFormer, Meta's Llama code, torchtune).

``rope_formula`` is used with autograd and is the reference of the fast paths in
``kernels.py``; :func:`~posenc_core.rope.apply_rope` is the checked entry point. Tables come
from :func:`rope_cos_sin`: angles in float64, rounded once (see :doc:`/numerics`).

Notation for tensor shapes: d = head_dim, s = sequence, P = any shape of positions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from .. import _validation as check
from .._numerics import round_once, warm_up_trigonometry
from .scaling import RopeScaling, _inv_freq, parse_scaling

LAYOUTS = check.LAYOUTS  # ("half", "interleaved"): one vocabulary with the sinusoidal table
"""The two pairings of a head's dims, "half" (dims i and i + d/2, Hugging Face's
``rotate_half``) and "interleaved" (dims 2i and 2i + 1, Meta's Llama and RoFormer)."""


def rope_formula(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> torch.Tensor:
    """``x * cos + rotate_pairs(x) * sin`` in the dtype of ``cos`` (the working dtype).

    Written pair by pair, (x1 c1 - x2 s1, x2 c2 + x1 s2), with the same bits as the formula and
    without building the rotated copy. Trusts its arguments.

    Args:
        x: ``(..., s, d)`` tensor.
        cos, sin: tables in the working dtype that broadcast to ``x``.
        layout: ``"half"`` or ``"interleaved"``.

    Returns:
        tensor of the broadcast shape, in the dtype of ``cos``.
    """
    xw = x.to(cos.dtype)
    x1, x2 = _halves(xw, layout)  # (..., s, d/2) each
    c1, c2 = _halves(cos, layout)
    s1, s2 = _halves(sin, layout)
    first, second = x1 * c1 - x2 * s1, x2 * c2 + x1 * s2
    if layout == "half":
        return torch.cat((first, second), -1)  # (..., s, d)
    return torch.stack((first, second), -1).flatten(-2)  # (..., s, d/2, 2) -> (..., s, d)


def _halves(t: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the first and of the second element of every pair: (..., d) -> 2 x (..., d/2)."""
    if layout == "half":
        h = t.shape[-1] // 2
        return t[..., :h], t[..., h:]
    return t[..., 0::2], t[..., 1::2]


def rotate_pairs(x: torch.Tensor, *, layout: str = "half") -> torch.Tensor:
    """The 90-degree turn of every pair: (a, b) -> (-b, a).

    For ``layout="half"`` this is Hugging Face's ``rotate_half`` (checked bit for bit in
    ``tests/core/test_rope_reference.py``); for ``"interleaved"`` it acts on (x[2i], x[2i+1]).
    ``apply_rope(x) == x * cos + rotate_pairs(x) * sin``.

    Args:
        x: ``(..., d)`` tensor with an even last dimension d.
        layout: ``"half"`` (pairs (i, i + d/2)) or ``"interleaved"`` (pairs (2i, 2i + 1)).

    Returns:
        tensor of the shape and dtype of ``x``.
    """
    check.tensor("x", x, min_dim=1)
    check.layout("layout", layout)
    check.even_int("x.shape[-1]", x.shape[-1])
    half = x.shape[-1] // 2
    if layout == "half":
        return torch.cat((-x[..., half:], x[..., :half]), -1)
    pairs = x.unflatten(-1, (half, 2))  # (..., d/2, 2)
    return torch.stack((-pairs[..., 1], pairs[..., 0]), -1).flatten(-2)  # (..., d)


# --------------------------------------------------------------------------- tables


def rope_angles(
    positions: torch.Tensor | int | float | list,
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: RopeScaling | Mapping[str, Any] | None = None,
    seq_len: int | None = None,
) -> torch.Tensor:
    """Rotation angles m * theta_i in float64.

    Args:
        positions: finite real positions, any shape ``P`` (integers are exact up to 2**53).
        head_dim, base, scaling: as in :func:`~posenc_core.rope.rope_frequencies`; the float64
            angles may take at most ``MAX_RESULT_BYTES``.
        seq_len: for ``dynamic`` scaling, at most 2**53; defaults to max(positions) + 1, as
            Hugging Face does.

    Returns:
        float64 tensor of shape ``P + (head_dim // 2,)``, on the device of ``positions``.
    """
    pos, head_dim, base, scaling, seq_len = _check_table_args(
        positions, head_dim, base, scaling, seq_len, "rope_angles"
    )
    check.result_size(
        "rope_angles",
        "the angles",
        {"positions.shape": tuple(pos.shape), "head_dim": head_dim},
        pos.numel() * (head_dim // 2),
        advice="compute them for chunks of positions",
    )
    return _angles(pos, head_dim, base, scaling, seq_len)


def _check_table_args(
    positions: object,
    head_dim: object,
    base: object,
    scaling: object,
    seq_len: object,
    where: str,
) -> tuple[torch.Tensor, int, float, RopeScaling, int | None]:
    """The checks :func:`rope_angles` and :func:`rope_cos_sin` (``where``) share: float64
    positions of shape P, an even head_dim up to ``MAX_WIDTH``, a base > 1, the parsed
    scaling and an optional seq_len up to 2**53."""
    pos = check.as_positions("positions", positions)  # P, float64
    head_dim = check.width("head_dim", head_dim, where=where)
    base = check.base_value("base", base)
    scaling = parse_scaling(scaling, base=base)
    if seq_len is not None:
        seq_len = check.position_count("seq_len", seq_len, where=where)
    return pos, head_dim, base, scaling, seq_len


def _angles(
    pos: torch.Tensor, head_dim: int, base: float, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """:func:`rope_angles` for checked arguments and float64 positions ``pos`` of shape P."""
    if scaling.depends_on_seq_len and seq_len is None and pos.numel():
        seq_len = max(int(math.floor(pos.max().item())) + 1, 1)
    inv_freq = _inv_freq(base, head_dim, scaling, seq_len)  # (d/2,)
    return pos.unsqueeze(-1) * inv_freq.to(pos.device)  # P + (d/2,)


def rope_cos_sin(
    positions: torch.Tensor | int | float | list,
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: RopeScaling | Mapping[str, Any] | None = None,
    layout: str = "half",
    dtype: torch.dtype = torch.float32,
    seq_len: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables for :func:`~posenc_core.rope.apply_rope`, rounded once from float64.

    ``layout="half"`` gives Hugging Face's ``cat(freqs, freqs)`` tables; ``"interleaved"``
    repeats each frequency on dims (2i, 2i+1). With YaRN both are multiplied by
    :attr:`RopeScaling.attention_scaling`, as Hugging Face does. Tested in
    ``tests/core/test_rope_reference.py`` against ``LlamaRotaryEmbedding`` and numpy's float64
    cos/sin (see :doc:`/numerics`).

    Args:
        positions: any shape ``P``; a 1-D ``arange(s)`` is the usual case.
        head_dim, base, scaling, seq_len: as in :func:`rope_angles`; the two tables, counted in
            float64, may take at most ``MAX_RESULT_BYTES``.
        layout: ``"half"`` or ``"interleaved"``.
        dtype: floating dtype of the tables.

    Returns:
        ``(cos, sin)``, each of shape ``P + (head_dim,)``, on the device of ``positions``.
    """
    check.layout("layout", layout)
    dtype = check.float_dtype("dtype", dtype)
    device = positions.device if isinstance(positions, torch.Tensor) else None
    pos, head_dim, base, scaling, seq_len = _check_table_args(
        positions, head_dim, base, scaling, seq_len, "rope_cos_sin"
    )
    check.result_size(
        "rope_cos_sin",
        "the cos and sin tables",
        {"positions.shape": tuple(pos.shape), "head_dim": head_dim},
        2 * pos.numel() * head_dim,
        advice="build them for chunks of positions",
    )
    cos, sin = _cos_sin(pos, head_dim, base, scaling, layout, dtype, seq_len)
    return cos.to(device=device), sin.to(device=device)


def _cos_sin(
    pos: torch.Tensor,
    head_dim: int,
    base: float,
    scaling: RopeScaling,
    layout: str,
    dtype: torch.dtype,
    seq_len: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`rope_cos_sin` for checked arguments and float64 positions ``pos`` of shape P;
    the tables are on the device of ``pos``."""
    angles = _angles(pos, head_dim, base, scaling, seq_len)  # P + (d/2,)
    scale = scaling.attention_scaling
    warm_up_trigonometry()  # once per process: see the Numerics page
    cos, sin = torch.cos(angles) * scale, torch.sin(angles) * scale
    cos, sin = round_once(cos, dtype), round_once(sin, dtype)
    if layout == "half":
        return torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)  # P + (d,)
    return cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)  # P + (d,)


def _float64_positions(positions: torch.Tensor) -> torch.Tensor:
    """Checked positions as float64 (on the CPU for Apple GPUs, which have no float64), as
    ``check.as_positions`` converts them."""
    pos = positions.detach()
    if pos.device.type == "mps":
        pos = pos.cpu()
    return pos.to(torch.float64)
