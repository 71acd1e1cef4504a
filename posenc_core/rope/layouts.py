"""Converting between the two pair layouts (see ``formula.py``): index permutations and the
per-head reordering of W_q and W_k that moves a checkpoint from one layout to the other.

Rotating ``x[..., perm]`` with ``layout="half"`` equals rotating ``x`` with
``layout="interleaved"`` and then permuting, bit for bit (``tests/core/test_rope.py``); so
permuting the output rows of W_q and W_k within each head, as Hugging Face's Llama conversion
script does, turns Meta's / RoFormer's convention into Hugging Face's with the same scores.
"""

from __future__ import annotations

import torch

from .. import _validation as check
from .formula import LAYOUTS


def interleaved_to_half(head_dim: int) -> torch.Tensor:
    """Index permutation from the interleaved to the half-split layout.

    ``perm = [0, 2, 4, ..., d-2, 1, 3, ..., d-1]``: rotating ``x[..., perm]`` with
    ``layout="half"`` equals ``(x rotated with layout="interleaved")[..., perm]``. Applied to
    the output rows of W_q and W_k within each head (see :func:`permute_qk_weight`), it moves
    weights from Meta's / RoFormer's convention to Hugging Face's, which is what Hugging
    Face's Llama conversion script does.

    Args:
        head_dim: per-head width, positive and even, at most 2**20 (``MAX_WIDTH``).

    Returns:
        int64 tensor of shape ``(head_dim,)``.
    """
    return _interleaved_to_half(check.width("head_dim", head_dim, where="interleaved_to_half"))


def _interleaved_to_half(d: int) -> torch.Tensor:
    """:func:`interleaved_to_half` for a checked ``d`` -> int64 ``(d,)``."""
    return torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))


def half_to_interleaved(head_dim: int) -> torch.Tensor:
    """The inverse permutation of :func:`interleaved_to_half` (half-split -> interleaved).

    Args:
        head_dim: per-head width, positive and even, at most 2**20 (``MAX_WIDTH``).

    Returns:
        int64 tensor of shape ``(head_dim,)``.
    """
    d = check.width("head_dim", head_dim, where="half_to_interleaved")
    return torch.argsort(_interleaved_to_half(d))


def permute_qk_weight(weight: torch.Tensor, n_heads: int, *, to: str = "half") -> torch.Tensor:
    """Reorder the output rows of a query or key projection so its heads use another layout.

    Permutes the rows of each head by :func:`interleaved_to_half` (or its inverse), as the
    ``permute`` of Hugging Face's ``convert_llama_weights_to_hf.py`` does for Meta's
    checkpoints; ``tests/core/test_rope.py`` checks that the permuted weights give the same
    attention scores in the other layout, and that forgetting the permutation does not.

    Args:
        weight: ``(n_heads * head_dim, d_model)`` as stored by ``nn.Linear``.
        n_heads: number of heads the rows are split into.
        to: ``"half"`` (interleaved -> half) or ``"interleaved"`` (half -> interleaved).

    Returns:
        tensor of the same shape with rows permuted within each head.
    """
    check.tensor("weight", weight, min_dim=1)
    n_heads = check.positive_int("n_heads", n_heads)
    check.choice("to", to, LAYOUTS)
    rows = weight.shape[0]
    if rows % n_heads:
        raise ValueError(f"weight.shape[0]={rows} must be divisible by n_heads={n_heads}")
    head_dim = check.even_int("head_dim (weight.shape[0] // n_heads)", rows // n_heads)
    perm = _interleaved_to_half(head_dim)  # (d,): the weight's own size bounds it
    if to == "interleaved":
        perm = torch.argsort(perm)
    per_head = weight.reshape(n_heads, head_dim, *weight.shape[1:])  # (h, d, ...)
    return per_head[:, perm.to(weight.device)].reshape(weight.shape)
