"""Run a Hugging Face model as shipped and with posenc_core doing its rotation.

Chapter 6 compares the logits of a tiny random ``transformers`` model (GPT-NeoX, Phi-3, ...)
with the logits of the same model after its rotation has been replaced by
:meth:`~posenc_core.rope.RotaryEmbedding.from_config`. This module holds the plumbing (a
forward hook and a temporary replacement of the modeling module's ``apply_rotary_pos_emb``)
so that the chapter shows only the lesson. The same patching is done with pytest's
``monkeypatch`` in ``tests/core/test_rope_models.py``.

Duck typed: it never imports transformers; the caller passes the model and its modeling
module.

Notation for tensor shapes: b = batch, s = sequence, V = vocabulary size.
"""

from __future__ import annotations

from typing import Any

import torch

from posenc_core.rope.module import RotaryEmbedding

__all__ = ["max_logit_difference"]


def max_logit_difference(
    model: Any,
    modeling: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor,
    *,
    rope: RotaryEmbedding | None = None,
) -> float:
    """Largest absolute logit difference between a model as shipped and with posenc_core's rotation.

    The model runs once as it is. Then, for a second run, ``modeling.apply_rotary_pos_emb(q,
    k, cos, sin)`` (the module-level function through which Llama, Qwen2, GPT-NeoX and Phi-3
    rotate whole heads, partial rotary included) is replaced by ``rope(q, k,
    positions=position_ids)``, with the position_ids that reach the model's rotary embedding
    module (``model.base_model.rotary_emb``), read by a forward pre-hook. The original function
    and the hook are restored afterwards, also when the run fails. Checked in
    ``tests/book/test_hf_check.py`` (agreement for GPT-NeoX and Phi-3, and a large difference
    when a wrong rotation is passed).

    Args:
        model: a ``transformers`` causal LM in eval mode whose attention calls
            ``modeling.apply_rotary_pos_emb`` (GPT-J and Phi slice the rotary dims first and
            need the hooks of ``tests/core/test_rope_models.py`` instead).
        modeling: the model's modeling module, e.g.
            ``transformers.models.gpt_neox.modeling_gpt_neox``.
        input_ids: ``(b, s)`` token ids.
        attention_mask: ``(b, s)``, 1 for real tokens, 0 for padding.
        position_ids: ``(b, s)`` positions, e.g. from
            :func:`~posenc_core.positions.positions_from_attention_mask`.
        rope: the rotation to put in; None:
            ``RotaryEmbedding.from_config(model.config)``.

    Returns:
        the largest absolute difference between the logits as shipped and with posenc_core's
        rotation, a float.

    Raises:
        TypeError: ``model`` lacks ``config`` or ``base_model.rotary_emb``, ``modeling`` lacks
            ``apply_rotary_pos_emb``, or ``rope`` is not a RotaryEmbedding.
    """
    rotary = getattr(getattr(model, "base_model", None), "rotary_emb", None)
    if not hasattr(model, "config") or not isinstance(rotary, torch.nn.Module):
        raise TypeError(
            "model must be a transformers model with a config and a rotary embedding module "
            f"at model.base_model.rotary_emb, got {type(model).__name__}"
        )
    if not callable(getattr(modeling, "apply_rotary_pos_emb", None)):
        raise TypeError(
            "modeling must be the model's modeling module, with a function "
            f"apply_rotary_pos_emb, got {modeling!r}"
        )
    if rope is None:
        rope = RotaryEmbedding.from_config(model.config)
    elif not isinstance(rope, RotaryEmbedding):
        raise TypeError(f"rope must be a RotaryEmbedding or None, got {type(rope).__name__}")

    def logits() -> torch.Tensor:  # (b, s, V)
        with torch.no_grad():
            return model(
                input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids
            ).logits

    expected = logits()
    seen: dict[str, torch.Tensor] = {}

    def keep_positions(module: Any, args: tuple, kwargs: dict) -> None:
        seen["positions"] = args[1] if len(args) > 1 else kwargs["position_ids"]

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):  # q, k: (b, h, s, d)
        return rope(q, k, positions=seen["positions"])

    shipped = modeling.apply_rotary_pos_emb
    handle = rotary.register_forward_pre_hook(keep_positions, with_kwargs=True)
    modeling.apply_rotary_pos_emb = apply_rotary_pos_emb
    try:
        ours = logits()
    finally:
        modeling.apply_rotary_pos_emb = shipped
        handle.remove()
    return (ours - expected).abs().max().item()
