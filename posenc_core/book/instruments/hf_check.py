"""Run a Hugging Face model as shipped and with posenc_core doing its rotation.

Chapter 6 compares a tiny random ``transformers`` model's logits with those after its rotation
is replaced by :meth:`~posenc_core.rope.RotaryEmbedding.from_config`
(:func:`max_logit_difference`); chapter 8b decodes a tiny Qwen2-VL text model through its KV
cache to show what wrong M-RoPE position ids do after an image (:func:`mrope_decode_gap`).
Duck typed: the caller passes the model, its modeling module or its cache class; transformers
is never imported here. Shapes: b = batch, s = sequence, V = vocabulary size.
"""

from __future__ import annotations

from typing import Any

import torch

from posenc_core.rope.module import RotaryEmbedding

__all__ = ["max_logit_difference", "mrope_decode_gap"]


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

    For the second run ``modeling.apply_rotary_pos_emb`` (through which Llama, Qwen2, GPT-NeoX and
    Phi-3 rotate) is replaced by ``rope(q, k, positions=position_ids)``, with the ids that reach
    ``model.base_model.rotary_emb`` (read by a forward pre-hook); both are restored afterwards,
    also on failure. Checked in ``tests/book/test_hf_check.py``.

    Args:
        model: a ``transformers`` causal LM in eval mode that calls
            ``modeling.apply_rotary_pos_emb`` (not GPT-J or Phi, which slice the rotary dims first).
        modeling: its modeling module, e.g. ``transformers.models.gpt_neox.modeling_gpt_neox``.
        input_ids, attention_mask, position_ids: ``(b, s)`` each (mask 1 for real tokens).
        rope: the rotation to put in; None: ``RotaryEmbedding.from_config(model.config)``.

    Returns:
        the largest absolute logit difference, a float.

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


def mrope_decode_gap(
    model: Any,
    new_cache: Any,
    input_ids: torch.Tensor,
    position_ids: torch.Tensor,
    prompt: int,
    decode_positions: Any,
) -> torch.Tensor:
    """Per decoded token, the largest difference between cached decoding and one full pass.

    The full pass uses the correct ``position_ids``; the cached run prefills ``prompt`` tokens with
    them, then feeds each later token alone with ``decode_positions(cache_length)`` (None lets the
    model choose: the cache's length on every axis). Both compare the last hidden state.

    Args:
        model: a ``transformers`` text model taking ``input_ids``, ``position_ids`` (3, b, s),
            ``past_key_values`` and ``use_cache``, e.g. ``Qwen2VLTextModel``, in eval mode.
        new_cache: called with no argument for an empty cache, e.g.
            ``lambda: DynamicCache(config=model.config)``.
        input_ids: int64 ``(b, s)``; position_ids: int64 ``(3, b, s)``, the correct ids.
        prompt: tokens in the prefill, 1 <= prompt < s.
        decode_positions: ``cache_length -> (3, b, 1) ids or None``, the rule under test.

    Returns:
        float ``(s - prompt,)``: the largest absolute hidden-state difference per decoded token.
    """
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
        raise TypeError(f"input_ids must be a (b, s) tensor, got {type(input_ids).__name__}")
    b, s = input_ids.shape
    if not isinstance(position_ids, torch.Tensor) or position_ids.shape != (3, b, s):
        shape = getattr(position_ids, "shape", None)
        raise ValueError(f"position_ids must have shape (3, {b}, {s}), got {shape}")
    if not isinstance(prompt, int) or not 1 <= prompt < s:
        raise ValueError(f"prompt must be an int with 1 <= prompt < {s}, got {prompt!r}")
    if not callable(decode_positions) or not callable(new_cache):
        raise TypeError("decode_positions and new_cache must be callable")
    with torch.no_grad():
        full = model(input_ids=input_ids, position_ids=position_ids).last_hidden_state
        cache = new_cache()
        model(input_ids=input_ids[:, :prompt], position_ids=position_ids[..., :prompt],
              past_key_values=cache, use_cache=True)  # fmt: skip
        gaps = []
        for t in range(prompt, s):
            ids = decode_positions(cache.get_seq_length())
            out = model(input_ids=input_ids[:, t : t + 1], position_ids=ids,
                        past_key_values=cache, use_cache=True).last_hidden_state  # fmt: skip
            gaps.append((out[:, 0] - full[:, t]).abs().max())
    return torch.stack(gaps)
