"""Multi-head latent attention's decoupled RoPE (DeepSeek-V2/V3): :func:`apply_decoupled_rope`.

MLA compresses keys and values into a latent that cannot carry a rotation, so RoPE acts on a
separate part of each head: every query head has ``qk_nope_head_dim`` dims without position
followed by ``qk_rope_head_dim`` rotated dims, and one rotated key head of
``qk_rope_head_dim`` dims is shared by every query head (DeepSeek-AI 2024, "DeepSeek-V2",
Sec. 2.1.3, Eq. 14-19). With YaRN, the softmax scale is multiplied by
mscale(s, mscale_all_dim)**2 (:attr:`~posenc_core.rope.LayerPlan.softmax_scale`), on top of
the factor YaRN puts on cos and sin. Hugging Face: ``DeepseekV3Attention``,
``apply_rotary_pos_emb_interleave`` and ``yarn_apply_mscale`` (checked in
``tests/core/test_rope_layers.py`` and ``tests/core/test_rope_layer_models.py``).
"""

from __future__ import annotations

import torch

from .. import _validation as check
from .module import RotaryEmbedding

__all__ = ["apply_decoupled_rope"]


def apply_decoupled_rope(
    rope: RotaryEmbedding,
    q: torch.Tensor,
    k_rope: torch.Tensor,
    positions: torch.Tensor | int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate the last ``rope.head_dim`` dims of each query head and the shared key head.

    Args:
        rope: the rotation of the rotated part, e.g. ``RotaryEmbedding.from_config(config)``
            of a DeepSeek-V3 config (head_dim = qk_rope_head_dim; ``"interleaved"`` pairs when
            ``rope_interleave``, else ``"half"``).
        q: ``(b, h, s, n + r)``: n dims without position, then r = ``rope.head_dim`` rotated.
        k_rope: ``(b, 1, s, r)``, the one rotated key head every query head shares (or
            ``(b, h, s, r)``).
        positions: as :meth:`RotaryEmbedding.forward` (None, an offset, (s,) or (b, s)).

    Returns:
        ``(q_out, k_out)``: q with its last r dims rotated (the first n unchanged) and the
        rotated key head, in the shapes and dtypes given. Scores between them equal Hugging
        Face's, whose interleaved path returns the rotated part with its pairs regrouped
        (``apply_rotary_pos_emb_interleave``): the same permutation on both sides.
    """
    if not isinstance(rope, RotaryEmbedding):
        raise TypeError(f"rope must be a RotaryEmbedding, got {type(rope).__name__}")
    check.tensor("q", q, min_dim=2, floating=True)
    check.tensor("k_rope", k_rope, min_dim=2, floating=True)
    r = rope.head_dim
    if q.shape[-1] < r:
        raise ValueError(
            f"q's last dimension ({q.shape[-1]}) must hold at least rope.head_dim={r} rotated "
            "dims after the dims without position"
        )
    if k_rope.shape[-1] != r:
        raise ValueError(
            f"k_rope's last dimension must be rope.head_dim={r} (the rotated key head), got "
            f"shape {tuple(k_rope.shape)}"
        )
    n = q.shape[-1] - r
    q_pass, q_rot = q.split([n, r], dim=-1)
    k_shape = (*q_rot.shape[:-3], 1, *q_rot.shape[-2:]) if q_rot.dim() >= 4 else q_rot.shape
    if k_rope.shape not in (q_rot.shape, torch.Size(k_shape)):
        raise ValueError(
            f"k_rope must have shape {tuple(k_shape)} (one shared head) or "
            f"{tuple(q_rot.shape)}, got {tuple(k_rope.shape)}"
        )
    q_rot, _ = rope(q_rot, q_rot, positions=positions)
    k_out, _ = rope(k_rope, k_rope, positions=positions)
    return torch.cat([q_pass, q_rot], dim=-1), k_out
