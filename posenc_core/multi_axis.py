"""RoPE over more than one axis: axial 2-D RoPE for image patches and multimodal RoPE (M-RoPE).

With several axes (a patch's row and column; a token's time, height and width) each pair still
turns by one angle, but the pairs are shared out among the axes: a pair assigned to axis a
turns by p_a * theta. A score then depends on the positions only through the offsets on every
axis (Su et al. 2021, Eq. 16, applied per pair). Two schemes from Qwen2-VL (Wang et al. 2024,
Sec. 2.1), as transformers 5.23.0 implements them:

* **Axial 2-D RoPE** (the vision tower, ``Qwen2VLVisionRotaryEmbedding``): the first
  head_dim/4 pairs turn with the patch's row, the last head_dim/4 with its column, with
  theta_k = base**(-4k/head_dim): :func:`axial_rope_cos_sin`, :func:`vision_patch_positions`.
* **M-RoPE** (the language model, ``Qwen2VLRotaryEmbedding``): the 1-D frequencies, with the
  pairs cut into three sections (``mrope_section``) that turn with the temporal, height and
  width position ids: :func:`mrope_cos_sin`, :func:`mrope_position_ids`.

Both give half-layout tables for :func:`posenc_core.rope.apply_rope`, from float64 angles
rounded once (see :doc:`/numerics`). :func:`pair_axes` names the axis of every pair;
:func:`axial_score_grid` and :func:`raster_score_grid` give one query patch's scores against a
grid under axial 2-D RoPE and under 1-D RoPE on the raster index. Tested in
``tests/core/test_multi_axis.py`` against ``Qwen2VLVisionRotaryEmbedding``,
``get_vision_position_ids``, ``Qwen2VLRotaryEmbedding`` and ``Qwen2VLModel.get_rope_index``.

Notation for tensor shapes: d = head_dim, s = sequence, P = any shape of positions, n = t*h*w
patches of one image.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch

from . import _validation as check
from ._numerics import round_once, warm_up_trigonometry
from .rope import apply_rope, rope_cos_sin, rope_frequencies

__all__ = [
    "MROPE_AXES",
    "AXIAL_AXES",
    "QWEN2_VL_MROPE_SECTION",
    "axial_rope_cos_sin",
    "axial_score_grid",
    "mrope_cos_sin",
    "mrope_position_ids",
    "pair_axes",
    "raster_score_grid",
    "vision_patch_positions",
]

MROPE_AXES = ("t", "h", "w")
"""M-RoPE's three axes, in the order of ``position_ids[0..2]`` and of ``mrope_section``:
temporal, height, width."""

AXIAL_AXES = ("row", "col")
"""The two axes of axial 2-D RoPE in the order of the pairs (row, or height, first, then
column)."""

QWEN2_VL_MROPE_SECTION = (16, 24, 24)
"""Qwen2-VL's ``mrope_section`` for head_dim 128: pairs 0-15 temporal, 16-39 height, 40-63
width (``Qwen2VLRotaryEmbedding``'s default and the released configs)."""

_SEGMENT_KINDS = ("text", "image", "video")


# --------------------------------------------------------------------------- checks


def _axial_head_dim(head_dim: object, where: str) -> int:
    """head_dim for axial 2-D RoPE: a positive multiple of 4 (head_dim/4 pairs per axis), at
    most ``MAX_WIDTH``."""
    head_dim = check.width("head_dim", head_dim, where=where)
    if head_dim % 4:
        raise ValueError(
            f"head_dim must be a positive multiple of 4 for axial 2-D RoPE (head_dim/4 pairs "
            f"turn with the row and head_dim/4 with the column), got {head_dim}"
        )
    return head_dim


def _mrope_section(mrope_section: object, head_dim: int) -> tuple[int, int, int]:
    """Checked ``mrope_section``: three non-negative pair counts summing to head_dim/2."""
    if isinstance(mrope_section, (str, bytes)) or not isinstance(mrope_section, Sequence):
        raise TypeError(
            f"mrope_section must be a sequence of three non-negative integers (pairs for the "
            f"temporal, height and width axes), got {type(mrope_section).__name__} "
            f"{mrope_section!r}"
        )
    if len(mrope_section) != 3:
        raise ValueError(
            f"mrope_section must hold exactly three pair counts (temporal, height, width), got "
            f"{len(mrope_section)}: {list(mrope_section)!r}"
        )
    section = tuple(
        check.non_negative_int(f"mrope_section[{i}]", n) for i, n in enumerate(mrope_section)
    )
    if sum(section) != head_dim // 2:
        raise ValueError(
            f"mrope_section must sum to head_dim/2 = {head_dim // 2} (one axis per pair), got "
            f"{list(section)} summing to {sum(section)}"
        )
    return section


def _check_tables(where: str, name: str, positions: torch.Tensor, rows: int, d: int) -> None:
    """Refuse cos and sin tables of ``rows`` rows of width ``d`` above ``MAX_RESULT_BYTES``
    (counted in float64), naming the shape of the ``positions`` they come from."""
    check.result_size(
        where,
        "the cos and sin tables",
        {f"{name}.shape": tuple(positions.shape), "head_dim": d},
        2 * rows * d,
        advice="build them for chunks of positions",
    )


def _check_grid(where: str, grid_h: int, grid_w: int, head_dim: int) -> None:
    """Refuse the float64 cos and sin tables and rotated keys of a grid above the limit."""
    check.result_size(
        where,
        "the cos and sin tables and the rotated keys",
        {"grid_h": grid_h, "grid_w": grid_w, "head_dim": head_dim},
        3 * grid_h * grid_w * head_dim,
    )


def _content(name: str, value: object, head_dim: int) -> torch.Tensor:
    """A content vector of shape (head_dim,) as float64 (all ones when None)."""
    if value is None:
        return torch.ones(head_dim, dtype=torch.float64)
    check.tensor(name, value, floating=True)
    if tuple(value.shape) != (head_dim,):
        raise ValueError(
            f"{name} must have shape (head_dim,) = ({head_dim},), got {tuple(value.shape)}"
        )
    check.finite(name, value)
    return value.detach().cpu().to(torch.float64)


# --------------------------------------------------------------------------- axial 2-D


def axial_rope_cos_sin(
    rows: torch.Tensor | Sequence | int,
    cols: torch.Tensor | Sequence | int,
    head_dim: int,
    *,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables of axial 2-D RoPE for patches at (row, col), as Qwen2-VL's vision tower.

    Pairs k < d/4 turn by ``row * theta_k`` and pairs d/4 + k by ``col * theta_k``, with
    theta_k = base**(-4k/d); in the half layout the tables are ``cat(c_row, c_col, c_row, c_col)``.
    Tested in ``tests/core/test_multi_axis.py`` against ``Qwen2VLVisionRotaryEmbedding`` with
    ``apply_rotary_pos_emb_vision``, to float32 rounding (its angles are float32, these float64).

    Args:
        rows, cols: the patches' row and column indices (finite reals), one shape ``P``;
            :func:`vision_patch_positions` gives them in the vision tower's order.
        head_dim: a positive multiple of 4, at most ``MAX_WIDTH``; the tables may take at most
            ``MAX_RESULT_BYTES``.
        base: rope_theta, finite and > 1.
        dtype: floating dtype of the tables.

    Returns:
        ``(cos, sin)``, each ``P + (head_dim,)`` on the device of ``rows``, for
        :func:`~posenc_core.rope.apply_rope` with ``layout="half"``.
    """
    dtype = check.float_dtype("dtype", dtype)
    device = rows.device if isinstance(rows, torch.Tensor) else None
    row = check.as_positions("rows", rows)  # P, float64
    col = check.as_positions("cols", cols)
    if row.shape != col.shape:
        raise ValueError(
            f"rows and cols must have one shape (one (row, col) per patch), got "
            f"{tuple(row.shape)} and {tuple(col.shape)}"
        )
    head_dim = _axial_head_dim(head_dim, "axial_rope_cos_sin")
    _check_tables("axial_rope_cos_sin", "rows", row, row.numel(), head_dim)
    base = check.base_value("base", base)
    theta = rope_frequencies(head_dim // 2, base=base).to(row.device)  # (d/4,) float64
    col = col.to(row.device)
    angles = torch.cat((row[..., None] * theta, col[..., None] * theta), -1)  # P + (d/2,)
    return _half_tables(angles, dtype, device)


def _half_tables(
    angles: torch.Tensor, dtype: torch.dtype, device: torch.device | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Half-layout tables from float64 angles P + (d/2,): cat(c, c), rounded once -> P + (d,)."""
    warm_up_trigonometry()  # once per process: see the Numerics page
    cos, sin = round_once(torch.cos(angles), dtype), round_once(torch.sin(angles), dtype)
    cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)  # P + (d,)
    return cos.to(device=device), sin.to(device=device)


def vision_patch_positions(
    t: int, h: int, w: int, *, spatial_merge_size: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, col) of every patch of an image or video, in the order of Qwen2-VL's vision tower.

    Blocks of ``spatial_merge_size`` x ``spatial_merge_size`` neighbours (the merger's tokens) in
    raster order, patches within a block in raster order, the frame repeated t times. Tested in
    ``tests/core/test_multi_axis.py`` against ``transformers.vision_utils.get_vision_position_ids``.

    Args:
        t, h, w: positive grid sizes in patches (Hugging Face's ``grid_thw``); h and w multiples
            of ``spatial_merge_size``; the ids may take at most ``MAX_RESULT_BYTES``.
        spatial_merge_size: the merger's block side, a positive integer (Qwen2-VL: 2).

    Returns:
        ``(rows, cols)``, int64 tensors of shape ``(n,)``, for :func:`axial_rope_cos_sin`.
    """
    t, h, w = (check.positive_int(name, v) for name, v in (("t", t), ("h", h), ("w", w)))
    m = check.positive_int("spatial_merge_size", spatial_merge_size)
    check.result_size(
        "vision_patch_positions",
        "the rows and columns",
        {"t": t, "h": h, "w": w},
        2 * t * h * w,
        precision="int64",
    )
    for name, v in (("h", h), ("w", w)):
        if v % m:
            raise ValueError(
                f"{name} must be a multiple of spatial_merge_size={m} (the merger joins "
                f"{m} x {m} blocks of patches), got {v}"
            )
    block = (h // m, m, w // m, m)  # (block row, row in block, block col, col in block)
    rows = torch.arange(h).view(h // m, m, 1, 1).expand(block)
    cols = torch.arange(w).view(1, 1, w // m, m).expand(block)
    rows = rows.permute(0, 2, 1, 3).reshape(-1)  # (h*w,): blocks first, then inside a block
    cols = cols.permute(0, 2, 1, 3).reshape(-1)
    return rows.repeat(t), cols.repeat(t)  # (n,) each


# --------------------------------------------------------------------------- M-RoPE


def mrope_cos_sin(
    position_ids: torch.Tensor | Sequence,
    head_dim: int,
    mrope_section: Sequence[int],
    *,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables of Qwen2-VL's multimodal RoPE (M-RoPE).

    Pair i has theta_i = base**(-2i/d) and turns by ``position_ids[a] * theta_i``, a the axis
    whose section holds i (temporal, then height, then width); half layout, ``cat(c, c)``. With
    three equal rows (text) this is 1-D RoPE. Tested in ``tests/core/test_multi_axis.py`` against
    ``Qwen2VLRotaryEmbedding.forward``, to float32 rounding (its angles are float32).

    Args:
        position_ids: temporal, height and width positions, shape ``(3,) + P`` (e.g.
            ``(3, b, s)`` from ``get_rope_index``, or ``(3, s)`` from :func:`mrope_position_ids`).
        head_dim: per-head width, positive and even; the tables may take at most
            ``MAX_RESULT_BYTES``.
        mrope_section: three non-negative pair counts summing to head_dim/2
            (``QWEN2_VL_MROPE_SECTION`` for head_dim 128).
        base: rope_theta, finite and > 1.
        dtype: floating dtype of the tables.

    Returns:
        ``(cos, sin)``, each ``P + (head_dim,)`` on the device of ``position_ids``, for
        :func:`~posenc_core.rope.apply_rope` with ``layout="half"``.
    """
    dtype = check.float_dtype("dtype", dtype)
    device = position_ids.device if isinstance(position_ids, torch.Tensor) else None
    pos = check.as_positions("position_ids", position_ids)  # (3,) + P, float64
    if pos.dim() < 1 or pos.shape[0] != 3:
        raise ValueError(
            f"position_ids must have shape (3, ...) (temporal, height and width positions), "
            f"got {tuple(pos.shape)}"
        )
    head_dim = check.width("head_dim", head_dim, where="mrope_cos_sin")
    section = _mrope_section(mrope_section, head_dim)
    _check_tables("mrope_cos_sin", "position_ids", pos, pos[0].numel(), head_dim)
    base = check.base_value("base", base)
    theta = rope_frequencies(head_dim, base=base).to(pos.device)  # (d/2,) float64
    pieces, start = [], 0
    for axis, n in enumerate(section):
        pieces.append(pos[axis][..., None] * theta[start : start + n])  # P + (n,)
        start += n
    angles = torch.cat(pieces, -1)  # P + (d/2,)
    return _half_tables(angles, dtype, device)


def mrope_position_ids(segments: Sequence[tuple[str, object]]) -> torch.Tensor:
    """Qwen2-VL's (temporal, height, width) position ids for one sequence of text and images.

    Text tokens count up by one, the same id on all three axes. An image's tokens (grid (t, h, w),
    raster order) get ``(start + frame, start + row, start + col)``, start being the next text
    id; the next segment starts at ``start + max(t, h, w)`` (Qwen2-VL, Sec. 2.1). Special tokens
    are text. Tested in ``tests/core/test_multi_axis.py`` against ``Qwen2VLModel.get_rope_index``
    whenever t <= max(h, w) (every image); for longer videos transformers 5.23.0 moves on by
    max(h, w) only, and this follows the paper. Qwen2.5-VL's absolute-time spacing is not
    implemented.

    Args:
        segments: a non-empty sequence of ``("text", n)`` (n > 0 tokens) and ``("image", (t, h,
            w))`` or ``("video", (t, h, w))``: the grid in language-model tokens, after the
            spatial merge. The ids may take at most ``MAX_RESULT_BYTES``.

    Returns:
        int64 tensor of shape ``(3, s)``, s the total number of tokens, for :func:`mrope_cos_sin`.
    """
    parts = _check_segments(segments)
    total = sum(size if kind == "text" else math.prod(size) for kind, size in parts)
    check.result_size(
        "mrope_position_ids", "the (3, s) ids", {"s": total}, 3 * total, precision="int64"
    )
    columns, start = [], 0
    for kind, size in parts:
        if kind == "text":
            ids = (start + torch.arange(size)).expand(3, size)  # (3, n)
            start += size
        else:
            t, h, w = size
            grid = torch.meshgrid(torch.arange(t), torch.arange(h), torch.arange(w), indexing="ij")
            ids = start + torch.stack(grid).reshape(3, t * h * w)  # (3, t*h*w), raster order
            start += max(t, h, w)
        columns.append(ids)
    return torch.cat(columns, 1)  # (3, s)


def _check_segments(segments: object) -> list[tuple[str, object]]:
    """Checked segments: ("text", n) or ("image" | "video", (t, h, w)), positive integers."""
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence) or not segments:
        raise TypeError(
            f"segments must be a non-empty list of ('text', n) and ('image', (t, h, w)) pairs, "
            f"got {segments!r}"
        )
    parts = []
    for i, seg in enumerate(segments):
        name = f"segments[{i}]"
        if not isinstance(seg, Sequence) or isinstance(seg, (str, bytes)) or len(seg) != 2:
            raise TypeError(
                f"{name} must be a pair ('text', n), ('image', (t, h, w)) or "
                f"('video', (t, h, w)), got {seg!r}"
            )
        kind, size = seg
        kind = check.choice(f"{name}[0]", kind, _SEGMENT_KINDS)
        if kind == "text":
            parts.append((kind, check.positive_int(f"{name}[1]", size)))
            continue
        if (
            isinstance(size, (str, bytes))
            or not isinstance(size, Sequence)
            or len(size) != 3
            or not all(isinstance(v, numbers.Number) for v in size)
        ):
            raise TypeError(
                f"{name}[1] must be a grid (t, h, w) of three positive integers, got {size!r}"
            )
        grid = tuple(check.positive_int(f"{name}[1][{j}]", v) for j, v in enumerate(size))
        parts.append((kind, grid))
    return parts


# --------------------------------------------------------------------------- pairs and scores


def pair_axes(head_dim: int, mrope_section: Sequence[int] | None = None) -> list[str]:
    """The axis each pair 0 .. head_dim/2 - 1 turns with.

    With ``mrope_section``: ``"t"``, ``"h"``, ``"w"`` in sections of those sizes (M-RoPE).
    Without: ``"row"`` for the first head_dim/4 pairs, ``"col"`` for the rest (axial 2-D). Tested
    in ``tests/core/test_multi_axis.py``: moving a token along one axis changes exactly the pairs
    named for it.

    Args:
        head_dim: positive and even with ``mrope_section``, a positive multiple of 4 without.
        mrope_section: three pair counts summing to head_dim/2, or None for axial 2-D.

    Returns:
        list of head_dim/2 axis names.
    """
    if mrope_section is None:
        quarter = _axial_head_dim(head_dim, "pair_axes") // 4
        return [AXIAL_AXES[0]] * quarter + [AXIAL_AXES[1]] * quarter
    section = _mrope_section(mrope_section, check.width("head_dim", head_dim, where="pair_axes"))
    return [axis for axis, n in zip(MROPE_AXES, section) for _ in range(n)]


def _grid_args(grid_h, grid_w, query_row, query_col) -> tuple[int, int, int, int]:
    grid_h = check.positive_int("grid_h", grid_h)
    grid_w = check.positive_int("grid_w", grid_w)
    query_row = check.int_in_range("query_row", query_row, 0, grid_h - 1)
    query_col = check.int_in_range("query_col", query_col, 0, grid_w - 1)
    return grid_h, grid_w, query_row, query_col


def axial_score_grid(
    grid_h: int,
    grid_w: int,
    query_row: int,
    query_col: int,
    head_dim: int,
    *,
    base: float = 10000.0,
    q: torch.Tensor | None = None,
    k: torch.Tensor | None = None,
) -> torch.Tensor:
    """Scores of one query patch against every patch of a grid under axial 2-D RoPE.

    ``scores[r, c] = <R(query_row, query_col) q, R(r, c) k>`` (:func:`axial_rope_cos_sin`),
    float64, unscaled; it depends only on the 2-D offset. Tested in
    ``tests/core/test_multi_axis.py`` against the sum of two 1-D RoPE scores, one per axis.

    Args:
        grid_h, grid_w: positive grid height and width in patches; the tables and rotated keys
            may take at most ``MAX_RESULT_BYTES``.
        query_row, query_col: the query patch, ``0 <= query_row < grid_h``,
            ``0 <= query_col < grid_w``.
        head_dim: a positive multiple of 4, at most ``MAX_WIDTH``.
        base: rope_theta, finite and > 1.
        q, k: finite floating content vectors ``(head_dim,)``; default all ones.

    Returns:
        float64 tensor of shape ``(grid_h, grid_w)``.
    """
    grid_h, grid_w, query_row, query_col = _grid_args(grid_h, grid_w, query_row, query_col)
    head_dim = _axial_head_dim(head_dim, "axial_score_grid")
    _check_grid("axial_score_grid", grid_h, grid_w, head_dim)
    base = check.base_value("base", base)
    q, k = _content("q", q, head_dim), _content("k", k, head_dim)
    rows = torch.arange(grid_h).repeat_interleave(grid_w)  # (h*w,), raster order
    cols = torch.arange(grid_w).repeat(grid_h)
    cos, sin = axial_rope_cos_sin(rows, cols, head_dim, base=base, dtype=torch.float64)
    keys = apply_rope(k.expand(grid_h * grid_w, head_dim), cos, sin)  # (h*w, d)
    at = query_row * grid_w + query_col
    query = apply_rope(q[None], cos[at : at + 1], sin[at : at + 1])  # (1, d)
    return (keys @ query[0]).view(grid_h, grid_w)


def raster_score_grid(
    grid_h: int,
    grid_w: int,
    query_row: int,
    query_col: int,
    head_dim: int,
    *,
    base: float = 10000.0,
    q: torch.Tensor | None = None,
    k: torch.Tensor | None = None,
) -> torch.Tensor:
    """Scores of one query patch against every patch under 1-D RoPE on the raster index.

    Patch (r, c) is position r * grid_w + c (a flattened image), so the patch below the query is
    grid_w positions away; compare :func:`axial_score_grid`. Float64, unscaled; tested in
    ``tests/core/test_multi_axis.py`` against the 1-D RoPE score at distance grid_w.

    Args:
        grid_h, grid_w, query_row, query_col, head_dim, base, q, k: as in
            :func:`axial_score_grid` (head_dim need only be positive and even).

    Returns:
        float64 tensor of shape ``(grid_h, grid_w)``.
    """
    grid_h, grid_w, query_row, query_col = _grid_args(grid_h, grid_w, query_row, query_col)
    head_dim = check.width("head_dim", head_dim, where="raster_score_grid")
    _check_grid("raster_score_grid", grid_h, grid_w, head_dim)
    base = check.base_value("base", base)
    q, k = _content("q", q, head_dim), _content("k", k, head_dim)
    cos, sin = rope_cos_sin(torch.arange(grid_h * grid_w), head_dim, base=base, dtype=torch.float64)
    keys = apply_rope(k.expand(grid_h * grid_w, head_dim), cos, sin)  # (h*w, d)
    at = query_row * grid_w + query_col
    query = apply_rope(q[None], cos[at : at + 1], sin[at : at + 1])  # (1, d)
    return (keys @ query[0]).view(grid_h, grid_w)
