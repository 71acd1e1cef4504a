"""Positions in a KV cache that evicts keys (sliding windows, attention sinks), chunked
prefill and speculative decoding's rejected drafts, for chapter 8b.

A cache holding the first ``sinks`` tokens and the ``size - sinks`` most recent ones must say
which position each cached key and the new query carry (:data:`RULES`). :func:`window_forward`
computes teacher-forced decoding under a rule in one pass; :func:`rolling_decode` does it one
token at a time through an explicit cache that stores keys before rotation and re-rotates them
every step (as StreamingLLM does). The tests check that the two agree, and that with ``size``
at least the text's length both equal the model's own pass.
Shapes: b = batch, h = heads, s = sequence, d_h = head width, V = 256.
"""

from __future__ import annotations

import torch

from posenc_core import _validation as check
from posenc_core.attention import attention
from posenc_core.book.models.byte_lm import ByteLM

__all__ = [
    "RULES",
    "visible_keys",
    "window_forward",
    "rolling_decode",
    "chunked_prefill",
    "with_rejected_drafts",
]

RULES = ("text", "cache", "inserted")
"""How a cache that evicts positions its keys.

``"text"``: each key keeps its position in the text and the query its own (Mistral's sliding
window); recent keys sit at offsets below ``size``, but a sink's offset grows past training.
``"cache"``: the key in slot c is at position c and the query takes the last slot, so every
offset stays below ``size`` (StreamingLLM, Xiao et al. 2024, mit-han-lab/streaming-llm#53;
Hugging Face's ``SinkCache``, huggingface/transformers#31581). ``"inserted"``: the bug, each key
rotated once at the slot it is written to and never re-rotated; once the cache is full every
key written since meets the query at offset 0 (fixed by re-rotating at each eviction,
huggingface/transformers PR 31537)."""


def _check_tokens(tokens: object) -> torch.Tensor:
    check.tensor("tokens", tokens, min_dim=2)
    assert isinstance(tokens, torch.Tensor)
    if tokens.dim() != 2 or tokens.dtype != torch.long:
        raise ValueError(
            f"tokens must be int64 of shape (b, s), got {tokens.dtype} {tuple(tokens.shape)}"
        )
    return tokens


def _check(model: object, tokens: object, size: object, sinks: object, rule: object):
    if not isinstance(model, ByteLM) or model.scheme != "rope":
        raise TypeError(
            f"model must be a RoPE ByteLM, got {getattr(model, 'scheme', type(model).__name__)!r}"
        )
    _check_tokens(tokens)
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
        rule: ``"text"``, ``"cache"`` or ``"inserted"`` (:data:`RULES`).

    Returns:
        logits ``(b, s, 256)``; with ``size >= s`` (nothing evicted) the model's own pass.
    """
    model, tokens, size, sinks = _check(model, tokens, size, sinks, rule)
    s = tokens.shape[1]
    keep = visible_keys(s, size, sinks)
    mask = torch.zeros(s, s).masked_fill(~keep, float("-inf"))  # (s, s)
    j = torch.arange(s)[None, :]
    slot = torch.arange(s).clamp_max(size - 1)  # the query's slot, and where key i is written
    # the keys that meet the query at offset slot(i) - j instead of their text offset i - j
    # ("cache": the sinks; "inserted": keys written before the cache was full), and those at
    # offset 0 ("inserted": keys written to the last slot once it was full)
    at_slot = {"text": j < 0, "cache": j < sinks, "inserted": j < size - 1}[rule] & keep
    at_zero = ~at_slot & keep if rule == "inserted" else None
    scale = (model.d_model // model.n_heads) ** -0.5

    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        qr, kr = model.rope(q, k)  # positions in the text
        scores = qr @ kr.transpose(-1, -2) * scale  # (b, h, s, s)
        if at_slot.any():
            qs, _ = model.rope(q, q, slot)  # each query at its slot, the keys at their index
            scores = torch.where(at_slot, qs @ kr.transpose(-1, -2) * scale, scores)
        if at_zero is not None:  # a query and a key rotated at one position: q . k
            scores = torch.where(at_zero, q @ k.transpose(-1, -2) * scale, scores)
        return (scores + mask).softmax(-1) @ v

    with torch.no_grad():
        return model(tokens, attend=attend)


def rolling_decode(
    model: ByteLM, tokens: torch.Tensor, *, size: int, sinks: int = 0, rule: str = "text"
) -> torch.Tensor:
    """The same logits as :func:`window_forward`, through an explicit cache, one token at a time.

    Each layer's cache holds at most ``size`` unrotated keys and values with their text positions
    and slots; before the new token attends, the oldest non-sink entry is evicted if full and the
    kept keys are rotated under ``rule`` (``"inserted"``: at their slots). Slow: the reference
    :func:`window_forward` is tested against.

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
            cache.update({name: x[..., keep, :] if x.dim() > 1 else x[keep]
                          for name, x in cache.items()})  # fmt: skip
        n = cache["k"].shape[-2] + 1 if cache else 1  # entries once this token is in
        new = {"k": k, "v": v, "pos": torch.tensor([t]), "slot": torch.tensor([n - 1])}
        for name, x in new.items():
            dim = -2 if x.dim() > 1 else 0
            cache[name] = torch.cat([cache[name], x], dim) if name in cache else x
        key_pos = {"text": cache["pos"], "cache": torch.arange(n), "inserted": cache["slot"]}[rule]
        _, k_rot = model.rope(cache["k"], cache["k"], key_pos)
        q_rot, _ = model.rope(q, q, key_pos[-1:])
        return attention(q_rot, k_rot, cache["v"])

    with torch.no_grad():
        for t in range(tokens.shape[1]):
            out.append(model(tokens[:, t : t + 1], attend=step))
    return torch.cat(out, dim=1)


def chunked_prefill(
    model: ByteLM, tokens: torch.Tensor, *, chunk: int, restart: bool = False
) -> torch.Tensor:
    """Logits of a prompt prefilled in chunks of ``chunk`` tokens through a KV cache.

    Each chunk attends to the cached keys before it and causally to itself. Done right it is
    rotated at its positions in the text and the result is the model's own pass; with
    ``restart`` every chunk is rotated at 0 .. chunk - 1 (huggingface/transformers#43082,
    vllm-project/vllm PR 10388).

    Args:
        model: a RoPE :class:`~posenc_core.book.models.byte_lm.ByteLM`.
        tokens: int64 ``(b, s)``; chunk: tokens per chunk (>= 1).
        restart: rotate each chunk from position 0 (the bug).

    Returns:
        logits ``(b, s, 256)``; with ``restart`` equal to
        ``model(tokens, positions=torch.arange(s) % chunk)``, as the tests check.
    """
    chunk = check.positive_int("chunk", chunk)
    model, tokens, chunk, _ = _check(model, tokens, chunk, 0, "text")
    caches: list[dict[str, torch.Tensor]] = [{} for _ in model.blocks]
    offset = 0

    def attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        cache = caches[layer]
        q, k = model.rope(q, k, 0 if restart else offset)
        for name, x in (("k", k), ("v", v)):
            cache[name] = torch.cat([cache[name], x], -2) if name in cache else x
        return attention(q, cache["k"], cache["v"], causal=True)  # the last c of n + c

    out = []
    with torch.no_grad():
        for offset in range(0, tokens.shape[1], chunk):
            out.append(model(tokens[:, offset : offset + chunk], attend=attend))
    return torch.cat(out, dim=1)


def with_rejected_drafts(
    tokens: torch.Tensor, *, accepted: int, rejected: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The text as a speculative decoder's untrimmed cache holds it: after every ``accepted``
    tokens, ``rejected`` refused drafts stay (the text's own bytes from further on, so they look
    like text and are wrong); ``rejected = 0`` gives the text back.

    Args:
        tokens: int64 ``(b, s)``, ``s >= 1``.
        accepted: tokens accepted per round, 1 .. s; rejected: drafts left per round (>= 0).

    Returns:
        ``(cached, real)``: int64 ``(b, s')``, the tokens in cache order, and int64 ``(s,)``, the
        index in it of each token of the text (keep ``model(cached)[:, real]``).

    Raises:
        TypeError, ValueError: naming the argument, the value and what is allowed.
    """
    _check_tokens(tokens)
    s = tokens.shape[1]
    if s == 0:
        raise ValueError(f"tokens must hold at least one token, got shape {tuple(tokens.shape)}")
    accepted = check.positive_int("accepted", accepted)
    if accepted > s:
        raise ValueError(
            f"accepted must be an integer in 1..{s} (at most the s = {s} tokens of tokens), "
            f"got {accepted}"
        )
    rejected = check.non_negative_int("rejected", rejected)
    pieces, real, at = [], [], 0
    for start in range(0, s, accepted):
        block = tokens[:, start : start + accepted]
        pieces.append(block)
        real += range(at, at + block.shape[1])
        at += block.shape[1]
        if start + accepted < s and rejected:
            ahead = torch.arange(start + accepted + 1, start + accepted + 1 + rejected)
            pieces.append(tokens[:, ahead.clamp_max(s - 1)])
            at += rejected
    return torch.cat(pieces, dim=1), torch.tensor(real)
