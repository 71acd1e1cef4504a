"""Positions in a KV cache that evicts keys: sliding windows and attention sinks.

A decoder that keeps at most ``size`` keys per layer, the first ``sinks`` tokens of the text and
the ``size - sinks`` most recent ones, must decide which position each cached key and the new
query carry. Two rules are in use (:data:`RULES`):

* ``"text"``: every key keeps the rotation of its position in the text and the query is rotated
  at its own position (a plain sliding window, as in Mistral's cache). Offsets are the true ones,
  so the recent keys sit at offsets below ``size``, but a sink token's offset grows with the
  text, past anything training produced.
* ``"cache"``: positions within the cache (StreamingLLM, Xiao et al. 2024; mit-han-lab/
  streaming-llm#53, and Hugging Face's ``SinkCache``, huggingface/transformers#31581): the key
  in slot c is at position c and the query takes the last slot, so every offset, the sinks'
  included, stays below ``size``. For the recent keys the offsets equal the text's (the slots
  are contiguous); only the sinks' change.

:func:`window_forward` computes the logits of teacher-forced decoding under either rule in one
pass: each query attends to exactly the keys the cache would hold when it is decoded, rotated as
the rule says. :func:`rolling_decode` does the same the slow way, one token at a time through an
explicit cache that evicts (it stores keys before rotation, as StreamingLLM's implementation
does, and rotates the whole cache again at every step); the tests check that the two agree, and
that with ``size`` at least the text's length both equal the model's own pass.

Book layer: imports the core, torch and the book's byte model. Shapes: b = batch, h = heads,
s = sequence, d_h = head width, V = 256.
"""

from __future__ import annotations

import torch

from posenc_core import _validation as check
from posenc_core.attention import attention
from posenc_core.book.models.byte_lm import ByteLM

__all__ = ["RULES", "visible_keys", "window_forward", "rolling_decode"]

RULES = ("text", "cache")
"""The two ways in use to position the keys of a cache that evicts, ``"text"`` (positions in the
text) and ``"cache"`` (positions within the cache, StreamingLLM's rule)."""


def _check(model: object, tokens: object, size: object, sinks: object, rule: object):
    if not isinstance(model, ByteLM) or model.scheme != "rope":
        raise TypeError(
            f"model must be a RoPE ByteLM, got {getattr(model, 'scheme', type(model).__name__)!r}"
        )
    check.tensor("tokens", tokens, min_dim=2)
    assert isinstance(tokens, torch.Tensor)
    if tokens.dim() != 2 or tokens.dtype != torch.long:
        raise ValueError(
            f"tokens must be int64 of shape (b, s), got {tokens.dtype} {tuple(tokens.shape)}"
        )
    size = check.positive_int("size", size)
    sinks = check.non_negative_int("sinks", sinks)
    if sinks >= size:
        raise ValueError(f"sinks must be smaller than size, got sinks={sinks}, size={size}")
    check.choice("rule", rule, RULES)
    return model, tokens, size, sinks


def visible_keys(s: int, size: int, sinks: int) -> torch.Tensor:
    """Which keys the cache holds when each query is decoded: bool ``(s, s)``, row i true at
    j <= i that is a sink (j < sinks) or among the ``size - sinks`` most recent (i - j <
    size - sinks); while i < size nothing has been evicted yet."""
    s = check.positive_int("s", s)
    size = check.positive_int("size", size)
    sinks = check.non_negative_int("sinks", sinks)
    i = torch.arange(s)
    back = i[:, None] - i[None, :]  # (s, s): i - j
    return (back >= 0) & ((back < size - sinks) | (i[None, :] < sinks))


def window_forward(
    model: ByteLM, tokens: torch.Tensor, *, size: int, sinks: int = 0, rule: str = "text"
) -> torch.Tensor:
    """Logits of teacher-forced decoding through a cache of ``size`` keys, in one pass.

    Args:
        model: a RoPE :class:`~posenc_core.book.models.byte_lm.ByteLM`.
        tokens: int64 ``(b, s)``.
        size: keys the cache holds per layer (the new token's own key included).
        sinks: how many of the first tokens it never evicts (0: a plain sliding window).
        rule: ``"text"`` or ``"cache"`` (:data:`RULES`).

    Returns:
        logits ``(b, s, 256)``; with ``size >= s`` (nothing evicted) the model's own pass.
    """
    model, tokens, size, sinks = _check(model, tokens, size, sinks, rule)
    s = tokens.shape[1]
    keep = visible_keys(s, size, sinks)
    mask = torch.zeros(s, s).masked_fill(~keep, float("-inf"))  # (s, s)
    sink_col = (torch.arange(s)[None, :] < sinks) & keep  # (s, s): keys scored as sinks
    slot = torch.arange(s).clamp_max(size - 1)  # the query's slot under "cache"
    scale = (model.d_model // model.n_heads) ** -0.5

    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        qr, kr = model.rope(q, k)  # positions in the text
        scores = qr @ kr.transpose(-1, -2) * scale  # (b, h, s, s)
        if rule == "cache" and sinks:
            qs, _ = model.rope(q, q, slot)  # each query at its slot, sinks at their own index
            scores = torch.where(sink_col, qs @ kr.transpose(-1, -2) * scale, scores)
        return (scores + mask).softmax(-1) @ v

    with torch.no_grad():
        return model(tokens, attend=attend)


def rolling_decode(
    model: ByteLM, tokens: torch.Tensor, *, size: int, sinks: int = 0, rule: str = "text"
) -> torch.Tensor:
    """The same logits as :func:`window_forward`, through an explicit cache, one token at a time.

    Each layer's cache holds the keys (before rotation) and values of at most ``size`` tokens
    with their positions in the text; before the new token attends, the oldest non-sink entry
    is evicted if the cache is full, and the kept keys are rotated at their positions under
    ``rule``. Slow (one pass per token); the reference :func:`window_forward` is checked
    against.

    Args:
        model, tokens, size, sinks, rule: as in :func:`window_forward`.

    Returns:
        logits ``(b, s, 256)``.
    """
    model, tokens, size, sinks = _check(model, tokens, size, sinks, rule)
    caches: list[dict[str, torch.Tensor]] = [{} for _ in model.blocks]
    out = []

    def step(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cache = caches[layer]
        t = int(cache["pos"][-1]) + 1 if cache else 0  # this token's position in the text
        if cache and cache["k"].shape[-2] == size:  # full: evict the oldest non-sink entry
            keep = [c for c in range(size) if c != sinks]
            cache.update({name: x[..., keep, :] if name != "pos" else x[keep]
                          for name, x in cache.items()})  # fmt: skip
        pos = torch.tensor([t])
        if cache:
            cache["k"], cache["v"] = torch.cat([cache["k"], k], -2), torch.cat([cache["v"], v], -2)
            cache["pos"] = torch.cat([cache["pos"], pos])
        else:
            cache.update(k=k, v=v, pos=pos)
        n = cache["k"].shape[-2]
        key_pos = cache["pos"] if rule == "text" else torch.arange(n)
        _, k_rot = model.rope(cache["k"], cache["k"], key_pos)
        q_rot, _ = model.rope(q, q, key_pos[-1:])
        return attention(q_rot, k_rot, cache["v"])

    with torch.no_grad():
        for t in range(tokens.shape[1]):
            out.append(model(tokens[:, t : t + 1], attend=step))
    return torch.cat(out, dim=1)
