"""Positions per row: left-padded batches and packed sequences.

A batch of prompts of different lengths is padded, usually on the left for generation, and
several short documents are often packed into one row for training. In both cases a row's
positions are not 0 .. s-1: each real token's position counts the real tokens before it in
its own sequence. These helpers compute them, and for packing the matching attention mask,
for :class:`~posenc_core.rope.RotaryEmbedding` (``positions=`` of shape (b, s)) and
:func:`~posenc_core.attention.attention` (``bias=``).

Notation for tensor shapes: b = batch, s = sequence.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from . import _validation as check

__all__ = [
    "PAD_POSITION",
    "document_ids_from_lengths",
    "packed_causal_mask",
    "packed_positions",
    "positions_from_attention_mask",
]

PAD_POSITION = 0
"""The position pad slots get from :func:`positions_from_attention_mask`: 0, as
transformers 5.23's ``generate`` gives them (``_prepare_position_ids_for_generation``:
``cumsum - 1``, then ``masked_fill(attention_mask == 0, 0)``; transformers 4.x filled 1). Any
value in range does: a pad slot is masked out as a key, and what a pad query computes is
discarded."""


def positions_from_attention_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions of a padded batch: each real token's index among the real tokens of its row.

    ``cumsum(mask) - 1`` along the row, with pad slots set to :data:`PAD_POSITION` (0), as
    transformers' ``generate`` computes ``position_ids`` (checked against
    ``GenerationMixin._prepare_position_ids_for_generation`` in
    ``tests/core/test_positions.py``). Works for left and right padding (and any mix): only
    the real tokens are counted.

    Args:
        attention_mask: ``(b, s)`` mask, 1 (or True) for real tokens and 0 for padding; bool,
            integer, or floating with only the values 0 and 1.

    Returns:
        ``(b, s)`` int64 positions on the mask's device.
    """
    check.tensor("attention_mask", attention_mask)
    if attention_mask.dim() != 2:
        raise ValueError(
            "attention_mask must have shape (b, s) (1 for real tokens, 0 for padding), got "
            f"shape {tuple(attention_mask.shape)}"
        )
    if attention_mask.is_complex():
        raise TypeError(
            f"attention_mask must be bool, integer or real 0/1, got dtype {attention_mask.dtype}"
        )
    if attention_mask.dtype != torch.bool:
        bad = (attention_mask != 0) & (attention_mask != 1)
        if bool(bad.any()):
            value = attention_mask[bad].flatten()[0].item()
            raise ValueError(
                f"attention_mask must hold only 0 (padding) and 1 (real token), got {value}"
            )
    real = attention_mask != 0  # (b, s) bool
    positions = real.long().cumsum(-1) - 1  # (b, s)
    return positions.masked_fill(~real, PAD_POSITION)


def document_ids_from_lengths(document_lengths: Sequence[int] | torch.Tensor) -> torch.Tensor:
    """Document ids of a packed row from its documents' lengths: ``[3, 2] -> [0, 0, 0, 1, 1]``.

    Args:
        document_lengths: positive integers, the documents in the order they are packed (a
            list, tuple or 1-D integer tensor); the int64 ids (sum x 8 bytes) may take at most
            ``MAX_RESULT_BYTES`` (4 GiB).

    Returns:
        ``(s,)`` int64 ids, s = sum(document_lengths).
    """
    if isinstance(document_lengths, torch.Tensor):
        if document_lengths.dim() != 1 or document_lengths.is_floating_point():
            raise TypeError(
                "document_lengths must be a 1-D integer tensor or a sequence of ints, got a "
                f"tensor of dtype {document_lengths.dtype} and shape "
                f"{tuple(document_lengths.shape)}"
            )
        document_lengths = document_lengths.tolist()
    if isinstance(document_lengths, (str, bytes)) or not isinstance(document_lengths, Sequence):
        raise TypeError(
            "document_lengths must be a sequence of positive ints, got "
            f"{type(document_lengths).__name__} {document_lengths!r}"
        )
    if len(document_lengths) == 0:
        raise ValueError("document_lengths must name at least one document, got []")
    lengths = [
        check.positive_int(f"document_lengths[{i}]", n) for i, n in enumerate(document_lengths)
    ]
    total = sum(lengths)
    check.result_size(
        "document_ids_from_lengths",
        "the ids",
        {"sum(document_lengths)": total},
        total,
        precision="int64",
    )
    return torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))


def _check_document_ids(document_ids: object) -> torch.Tensor:
    check.tensor("document_ids", document_ids)
    if (
        document_ids.dtype == torch.bool
        or document_ids.is_floating_point()
        or (document_ids.is_complex())
    ):
        raise TypeError(
            f"document_ids must be an integer tensor, got dtype {document_ids.dtype}; build one "
            "with document_ids_from_lengths"
        )
    if document_ids.dim() not in (1, 2) or document_ids.shape[-1] == 0:
        raise ValueError(
            "document_ids must have shape (s,) or (b, s) with s >= 1, got shape "
            f"{tuple(document_ids.shape)}"
        )
    return document_ids


def _segments(document_ids: torch.Tensor) -> torch.Tensor:
    """Index of the run of equal ids each token is in: [7, 7, 3, 3, 7] -> [0, 0, 1, 1, 2]."""
    starts = torch.ones_like(document_ids, dtype=torch.bool)
    starts[..., 1:] = document_ids[..., 1:] != document_ids[..., :-1]
    return starts.long().cumsum(-1) - 1  # (..., s)


def packed_positions(document_ids: torch.Tensor) -> torch.Tensor:
    """Positions of packed documents: restarting at 0 where each document starts.

    A document is a run of equal ids (a new one starts wherever the id changes from the
    previous token), so ``[0, 0, 0, 1, 1] -> [0, 1, 2, 0, 1]``. With RoPE, and with the mask
    of :func:`packed_causal_mask`, each document is then attended to exactly as if it were
    alone in its row (``tests/core/test_positions.py``). Padding at the end of a packed row
    can get an id of its own: it is then a document of its own, invisible to the others.

    Args:
        document_ids: ``(s,)`` or ``(b, s)`` integer tensor (see
            :func:`document_ids_from_lengths`).

    Returns:
        int64 positions of the same shape and device.
    """
    ids = _check_document_ids(document_ids)
    segment = _segments(ids)  # (..., s)
    index = torch.arange(ids.shape[-1], device=ids.device).expand_as(ids)  # (..., s)
    starts = torch.zeros_like(index).scatter_reduce(
        -1, segment, index, reduce="amin", include_self=False
    )  # (..., s): first index of each segment (at the segment's own index)
    return index - starts.gather(-1, segment)


def packed_causal_mask(
    document_ids: torch.Tensor, *, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The additive block-diagonal causal mask of packed documents.

    Entry (i, j) is 0 when key j is in the same document as query i and j <= i, and -inf
    otherwise, so every query sees only its own document's past (the diagonal is always
    kept, so no row is all -inf). Pass it as ``bias`` to
    :func:`~posenc_core.attention.attention` with ``causal=False`` (it already holds the
    causal mask).

    Args:
        document_ids: ``(s,)`` or ``(b, s)`` integer tensor, as for :func:`packed_positions`;
            the mask with its boolean temporaries (b x s x s x (dtype's bytes + 2)) may take
            at most ``MAX_RESULT_BYTES`` (4 GiB): s up to 26754 for one float32 row.
        dtype: floating dtype of the mask (default float32).

    Returns:
        ``(s, s)`` for ``(s,)`` ids, ``(b, 1, s, s)`` for ``(b, s)`` ids (broadcasting over
        heads), on the ids' device.
    """
    ids = _check_document_ids(document_ids)
    dtype = check.float_dtype("dtype", dtype)
    s = ids.shape[-1]
    b = ids.shape[0] if ids.dim() == 2 else 1
    check.result_size(
        "packed_causal_mask",
        "the mask",
        [("b", b), ("s", s), ("s", s)],
        b * s * s,
        dtype.itemsize + 2,
        precision=f"{dtype} and two boolean temporaries",
        advice="pack shorter rows",
    )
    segment = _segments(ids)  # (..., s)
    same = segment.unsqueeze(-1) == segment.unsqueeze(-2)  # (..., s, s)
    causal = torch.ones(s, s, dtype=torch.bool, device=ids.device).tril()  # (s, s)
    keep = same & causal
    mask = torch.zeros(keep.shape, dtype=dtype, device=ids.device).masked_fill(~keep, -torch.inf)
    return mask if ids.dim() == 1 else mask.unsqueeze(1)  # (s, s) or (b, 1, s, s)
