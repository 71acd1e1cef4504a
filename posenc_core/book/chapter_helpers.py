"""Small computations that more than one chapter makes: a float64 reference RoPE, the split of
a scaled RoPE's frequencies, the in-range loss of a study's curves, and the transformers config
of the byte model's attention. Each chapter used to carry its own copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import posenc_core as pc

__all__ = [
    "rope",
    "frequency_split",
    "in_range",
    "byte_llama_config",
]


def rope(
    x: torch.Tensor,
    positions: Any,
    layout: str = "interleaved",
    base: float = 10000.0,
) -> torch.Tensor:
    """Rotate ``x`` at ``positions`` with cos/sin tables computed in float64.

    The chapters' reference RoPE: :func:`posenc_core.rope.rope_cos_sin` in float64, then
    :func:`posenc_core.rope.apply_rope`. Tested against a hand-written rotation of pairs.

    Args:
        x: ``(..., s, d)`` with d even.
        positions: ``(s,)`` positions, anything ``torch.as_tensor`` reads.
        layout: ``"interleaved"`` (pairs (2i, 2i+1)) or ``"half"`` (pairs (i, i + d/2)).
        base: the frequency base, omega_i = base ** (-2i / d).

    Returns:
        ``(..., s, d)``, rotated, in the promoted dtype of ``x`` and float64.
    """
    cos, sin = pc.rope_cos_sin(
        torch.as_tensor(positions),
        x.shape[-1],
        base=base,
        layout=layout,
        dtype=torch.float64,
    )
    return pc.apply_rope(x, cos, sin, layout=layout)


def frequency_split(ratio: torch.Tensor, factor: float) -> tuple[int, int, int]:
    """Count a scaled RoPE's frequencies that are kept, blended, or divided by the factor.

    ``ratio`` is scaled over original frequency per pair; a pair is kept where the ratio is 1
    and divided where it is ``1 / factor`` (both to a relative 1e-12), blended otherwise
    (YaRN's ramp, Llama 3's smooth band).

    Args:
        ratio: ``(d/2,)`` scaled / original frequencies.
        factor: the scaling factor s.

    Returns:
        ``(kept, blended, divided)``, summing to ``ratio.numel()``.
    """
    kept = int(torch.isclose(ratio, torch.ones_like(ratio), rtol=1e-12, atol=0).sum())
    divided = int(
        torch.isclose(ratio, torch.full_like(ratio, 1 / factor), rtol=1e-12, atol=0).sum()
    )
    return kept, ratio.numel() - kept - divided, divided


def in_range(curves: Any, train_len: int, per_seed: bool = False) -> Any:
    """Mean loss over the second half of the training window, positions [L/2, L).

    Args:
        curves: ``(S, P)`` loss by position for S seeds (a numpy array or tensor), P >= L.
        train_len: L.
        per_seed: return each seed's mean, ``(S,)``, instead of the mean over all of them.

    Returns:
        ``curves[:, L // 2 : L].mean(1)`` if ``per_seed``, else ``curves[:, L // 2 : L].mean()``.
    """
    if isinstance(train_len, bool) or not isinstance(train_len, (int, np.integer)):
        raise TypeError(f"train_len must be an int, got {train_len!r}")
    if train_len < 2 or train_len > curves.shape[1]:
        raise ValueError(
            f"train_len must be in [2, {curves.shape[1]}] (the curves' length), got {train_len}"
        )
    window = curves[:, train_len // 2 : train_len]
    return window.mean(1) if per_seed else window.mean()


def byte_llama_config(rope_parameters: dict, max_position_embeddings: int | None = None) -> Any:
    """The byte model's attention as a ``transformers.LlamaConfig``: 4 heads of 16, width 64.

    For comparing this package's RoPE with transformers' ``LlamaRotaryEmbedding``, which reads
    only these fields. Needs transformers (an optional reference: guard the call).

    Args:
        rope_parameters: transformers' ``rope_parameters``, e.g.
            ``{"rope_type": "default", "rope_theta": 10000.0}``.
        max_position_embeddings: the training length, where the RoPE type reads it (dynamic
            scaling); transformers' default when None.

    Returns:
        the ``LlamaConfig``.
    """
    from transformers import LlamaConfig

    extra = (
        {}
        if max_position_embeddings is None
        else {"max_position_embeddings": max_position_embeddings}
    )
    return LlamaConfig(
        hidden_size=64,
        num_attention_heads=4,
        head_dim=16,
        rope_parameters=rope_parameters,
        **extra,
    )
