"""Positional-encoding bugs that ship, reproduced on the book's trained models (chapters 8, 8b).

Each bug of :data:`BUGS` is a :class:`Bug`: the broken computation and its correct counterpart,
both ``(model, tokens) -> logits`` on the same input, expressed through the options of
:meth:`ByteLM.forward <posenc_core.book.models.byte_lm.ByteLM.forward>` (nothing here
re-implements the model), with the public reports that describe it; :func:`bug_curves`
measures both on every seed and :data:`PARTS` says which page reports it.
:func:`cached_forward` decodes with a KV cache one token at a time, its step replaceable by a
:data:`Step`. The core never carries these bugs; ``tests/book/test_bugs.py`` checks each
differs from (or, where RoPE hides it, agrees with) the correct path. Chapter 8's exercise
converters and loaders are here too, their checkers in :mod:`posenc_core.book.exercises`.
Shapes: b = batch, s = sequence, h = heads, d = d_model, d_h = head_dim, r = rotary width,
V = 256.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from posenc_core import _validation as check
from posenc_core.attention import attention
from posenc_core.book.instruments import caches
from posenc_core.book.models.byte_lm import ByteLM, Rotate
from posenc_core.book.studies import heldout
from posenc_core.positions import (
    document_ids_from_lengths,
    packed_causal_mask,
    packed_positions,
    positions_from_attention_mask,
)
from posenc_core.rope import RotaryEmbedding, apply_rope, parse_scaling, permute_qk_weight

__all__ = [
    "Step",
    "cached_forward",
    "correct_step",
    "off_by_one_step",
    "Bug",
    "BUGS",
    "PAD_COUNTS",
    "DOC_LEN",
    "YARN",
    "CONFIG",
    "WINDOW",
    "SINKS",
    "LONGROPE",
    "CHUNK",
    "DRAFTS",
    "PARTS",
    "DECODING",
    "bug_curves",
    "interleaved_checkpoint",
    "convert_checkpoint_broken",
    "rope_scaling_from_config_broken",
    "bf16_angle_tables",
    "StickyDynamicNTK",
    "verdict",
    "logit_gap",
    "rotation_by",
]

Step = Callable[[RotaryEmbedding, dict, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``step(rope, cache, q, k, v) -> q_rotated``: one decoding step of one layer. ``cache`` is
``{"k": (b, h, n, d_h) rotated keys, "v": (b, h, n, d_h) values}`` for the n tokens before this
one (positions 0 .. n-1); q, k, v are the new token's ``(b, h, 1, d_h)``. The step rotates the
new query and key, appends the key and the value to the cache (in place, in the dict) and
returns the rotated query."""


def _check_model(model: object) -> ByteLM:
    if not isinstance(model, ByteLM):
        raise TypeError(f"model must be a ByteLM, got {type(model).__name__}")
    return model


def _check_tokens(tokens: object) -> torch.Tensor:
    check.tensor("tokens", tokens, min_dim=2)
    assert isinstance(tokens, torch.Tensor)
    if tokens.dim() != 2 or tokens.dtype != torch.long:
        raise ValueError(
            f"tokens must be an int64 tensor of shape (b, s), got dtype {tokens.dtype} and "
            f"shape {tuple(tokens.shape)}"
        )
    return tokens


# ----------------------------------------------------------------------------- KV cache


def correct_step(rope: RotaryEmbedding, cache: dict, q: torch.Tensor, k: torch.Tensor,
                 v: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """The decoding step done right: the new token is at position n, the cache's length
    before it is appended (see :data:`Step`)."""
    n = cache["k"].shape[-2]
    q, k = rope(q, k, n)
    cache["k"] = torch.cat([cache["k"], k], dim=-2)
    cache["v"] = torch.cat([cache["v"], v], dim=-2)
    return q


def off_by_one_step(rope: RotaryEmbedding, cache: dict, q: torch.Tensor, k: torch.Tensor,
                    v: torch.Tensor) -> torch.Tensor:  # fmt: skip
    """The bug of onnxruntime-genai PR 2354: the length is read after the new token was
    counted, so the new token is rotated at n + 1 (and keeps that position in the cache)."""
    cache["v"] = torch.cat([cache["v"], v], dim=-2)
    n = cache["v"].shape[-2]  # already counts the new token
    q, k = rope(q, k, n)
    cache["k"] = torch.cat([cache["k"], k], dim=-2)
    return q


def cached_forward(
    model: ByteLM, tokens: torch.Tensor, *, prefill: int = 1, step: Step | None = None
) -> torch.Tensor:
    """Logits of teacher-forced decoding with a KV cache.

    The first ``prefill`` tokens go through one full pass (their rotated keys and values are
    cached, as a model's prefill does); every later token is then fed alone, and each layer
    runs ``step`` on the cache before its query attends to every cached key.

    Args:
        model: a RoPE :class:`~posenc_core.book.models.byte_lm.ByteLM`.
        tokens: int64 ``(b, s)``.
        prefill: tokens in the prefill, 1 <= prefill <= s.
        step: the decoding step (:data:`Step`); None: :func:`correct_step`.

    Returns:
        logits ``(b, s, 256)``; without a bug, equal to ``model(tokens)`` to float rounding.
    """
    model = _check_model(model)
    tokens = _check_tokens(tokens)
    if model.rope is None:
        raise ValueError(f"cached_forward needs a RoPE model, this one is {model.scheme!r}")
    b, s = tokens.shape
    prefill = check.int_in_range("prefill", prefill, 1, s)
    step = correct_step if step is None else step
    if not callable(step):
        raise TypeError(f"step must be callable, got {step!r}")
    caches: list[dict] = [{} for _ in model.blocks]

    def prefill_attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        q, k = model.rope(q, k)
        caches[layer].update(k=k, v=v)
        return attention(q, k, v, causal=True)

    def step_attend(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        cache = caches[layer]
        n = cache["k"].shape[-2]
        q = step(model.rope, cache, q, k, v)
        if cache["k"].shape[-2] != n + 1 or cache["v"].shape[-2] != n + 1:
            raise ValueError(
                f"step must append exactly one key and one value to the cache of {n}; "
                f"after it the cache holds {cache['k'].shape[-2]} keys and "
                f"{cache['v'].shape[-2]} values"
            )
        return attention(q, cache["k"], cache["v"])

    out = [model(tokens[:, :prefill], attend=prefill_attend)]
    for t in range(prefill, s):
        out.append(model(tokens[:, t : t + 1], attend=step_attend))
    return torch.cat(out, dim=1)  # (b, s, V)


# ----------------------------------------------------------------------------- measuring


def logit_gap(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """The largest ``abs(a - b)`` at each position: logits ``(b, s, V)`` -> float64 ``(s,)``."""
    for name, t in (("a", a), ("b", b)):
        check.tensor(name, t, min_dim=3, floating=True)
    if a.shape != b.shape:
        raise ValueError(f"a and b must have one shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    return (a.detach() - b.detach()).abs().amax(dim=(0, 2)).double().numpy()


def verdict(test: Callable[..., Any], *args: Any) -> str:
    """Run a test function: ``"passes"``, or ``"fails: <its assertion message>"``."""
    if not callable(test):
        raise TypeError(f"test must be callable, got {test!r}")
    try:
        test(*args)
    except AssertionError as err:
        return f"fails: {err}"
    return "passes"


# ----------------------------------------------------------------------------- the bugs


def _rotation_tables(
    inv_freq: torch.Tensor, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Half-split cos/sin ``positions.shape + (2 * len(inv_freq),)`` in float32, from float64
    angles (the honest way; the bugs below change the frequencies or the precision)."""
    angles = positions.to(torch.float64)[..., None] * inv_freq.to(torch.float64)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def _rotate_with(cos: torch.Tensor, sin: torch.Tensor, *, first: int = 0) -> Rotate:
    """A rotation by given tables of dims ``first .. first + r`` of each head (half-split)."""
    r = cos.shape[-1]

    def rotate(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor):
        if positions.numel() and int(positions.max()) >= cos.shape[0]:
            raise ValueError(
                f"positions reach {int(positions.max())}, but the tables hold positions "
                f"0 .. {cos.shape[0] - 1}"
            )
        c, s_ = cos[positions], sin[positions]
        if c.dim() == 3:  # (b, s, r) -> (b, 1, s, r)
            c, s_ = c[:, None], s_[:, None]

        def one(x: torch.Tensor) -> torch.Tensor:
            if first == 0:
                return apply_rope(x, c, s_)
            keep, rot = x[..., :first], x[..., first : first + r]
            return torch.cat([keep, apply_rope(rot, c, s_), x[..., first + r :]], dim=-1)

        return one(q), one(k)

    return rotate


def rotation_by(inv_freq: torch.Tensor, n_positions: int, *, first: int = 0) -> Rotate:
    """A :data:`~posenc_core.book.models.byte_lm.Rotate` with given frequencies (half-split pairs,
    angles in float64, tables in
    float32) on dims ``first .. first + 2 len(inv_freq)`` of each head, for positions below
    ``n_positions``: how chapter 8 builds a rotation with the wrong frequencies or dims."""
    check.tensor("inv_freq", inv_freq, min_dim=1, floating=True)
    n_positions = check.positive_int("n_positions", n_positions)
    first = check.non_negative_int("first", first)
    return _rotate_with(*_rotation_tables(inv_freq, torch.arange(n_positions)), first=first)


def bf16_angle_tables(
    head_dim: int, n_positions: int, *, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin as Hugging Face's Llama computed them under bfloat16 autocast before PR 29285:
    ``inv_freq @ positions`` ran in bfloat16 (both operands and the product rounded to
    bfloat16), then cos and sin of those angles. Returned in float32, ``(n, head_dim)``."""
    head_dim = check.even_int("head_dim", head_dim)
    n_positions = check.positive_int("n_positions", n_positions)
    base = check.base_value("base", base)
    inv_freq = base ** -(torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    pos = torch.arange(n_positions, dtype=torch.float32)
    angles = (pos.bfloat16()[:, None] * inv_freq.float().bfloat16()[None]).float()
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


class StickyDynamicNTK:
    """Dynamic NTK scaling with the cache rule of transformers issue 25306: the frequencies of the
    longest call so far are kept for every later call not shorter than L0 (Hugging Face's
    ``dynamic_rope_update`` resets only below L0). :meth:`rotate` is a ``rotate`` for
    :meth:`ByteLM.forward <posenc_core.book.models.byte_lm.ByteLM.forward>`; :meth:`fresh` forgets.

    Args:
        head_dim: d_h (the whole head rotates), a positive even integer.
        factor: dynamic NTK's factor s, a finite number >= 1.
        original_max_position_embeddings: L0, a positive integer.
        base: rope_theta, a finite number > 1.

    Raises:
        TypeError, ValueError: an argument outside the above, named in the message.
    """

    def __init__(
        self,
        head_dim: int,
        *,
        factor: float,
        original_max_position_embeddings: int,
        base: float = 10000.0,
    ) -> None:
        self.head_dim = check.even_int("head_dim", head_dim)
        self.factor = check.factor_value("factor", factor)
        self.l0 = check.positive_int(
            "original_max_position_embeddings", original_max_position_embeddings
        )
        self.base = check.base_value("base", base)
        self.fresh()

    def fresh(self) -> None:
        """Forget every earlier call (a new process, or the fix)."""
        self.longest = self.l0

    def inv_freq(self, seq_len: int) -> torch.Tensor:
        """The frequencies this object uses for a call of ``seq_len`` (and remembers it)."""
        seq_len = check.positive_int("seq_len", seq_len)
        if seq_len < self.l0:
            self.longest = self.l0  # Hugging Face resets below L0
        self.longest = max(self.longest, seq_len)
        d = self.head_dim
        ratio = self.factor * self.longest / self.l0 - (self.factor - 1)
        base = self.base * ratio ** (d / (d - 2)) if self.longest > self.l0 else self.base
        return base ** -(torch.arange(0, d, 2, dtype=torch.float64) / d)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor):
        """A :data:`~posenc_core.book.models.byte_lm.Rotate`: tables for this call's length,
        max(positions) + 1."""
        inv = self.inv_freq(int(positions.max()) + 1)
        cos, sin = _rotation_tables(inv, torch.arange(int(positions.max()) + 1))
        return _rotate_with(cos, sin)(q, k, positions)


def _rope_like(model: ByteLM, scaling: Any = None, **kw: Any) -> RotaryEmbedding:
    """A rotary embedding with the model's head width, rotary width and base (``kw`` may
    override ``layout``), and the given scaling."""
    rope = model.rope
    assert rope is not None
    return RotaryEmbedding(
        rope.head_dim,
        base=rope.base,
        scaling=scaling,
        rotary_dim=rope.rotary_dim,
        layout=kw.get("layout", rope.layout),
    )


def _with_state(model: ByteLM, state: Mapping[str, torch.Tensor]) -> ByteLM:
    """A copy of ``model`` holding ``state`` (strictly: every key, every shape)."""
    m = copy.deepcopy(model)
    m.load_state_dict(dict(state))
    return m.eval()


def _qk_rows(d_model: int) -> tuple[slice, slice]:
    """Rows of a fused ``qkv`` projection that hold the queries and the keys."""
    return slice(0, d_model), slice(d_model, 2 * d_model)


def interleaved_checkpoint(model: ByteLM) -> dict[str, torch.Tensor]:
    """The trained RoPE model's weights as code that pairs dims (2i, 2i+1) would store them.

    Every layer's query and key rows (weights **and** biases) are permuted within each head by
    :func:`~posenc_core.rope.permute_qk_weight` (``to="interleaved"``), so that a model with
    ``layout="interleaved"`` computes exactly what the trained half-split model does: the
    situation of Meta's Llama checkpoints and Hugging Face's ``rotate_half``, which
    ``convert_llama_weights_to_hf.py`` bridges with the inverse permutation.

    Returns:
        a state dict (new tensors; the model is not changed).
    """
    model = _check_model(model)
    if model.rope is None:
        raise ValueError(f"interleaved_checkpoint needs a RoPE model, got {model.scheme!r}")
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for name in [k for k in state if k.endswith(("attn.qkv.weight", "attn.qkv.bias"))]:
        t = state[name]
        for rows in _qk_rows(model.d_model):
            t[rows] = permute_qk_weight(t[rows], model.n_heads, to="interleaved")
    return state


def convert_checkpoint_broken(
    state: Mapping[str, torch.Tensor], n_heads: int
) -> dict[str, torch.Tensor]:
    """Chapter 8's broken converter (interleaved checkpoint -> the book's half-split model):
    it permutes the query and key weights but leaves their biases in interleaved order, the
    slip that only models with q/k biases (Qwen2, GPT-NeoX, the book's) can make."""
    out = dict(state)
    for name, t in state.items():
        if name.endswith("attn.qkv.weight"):
            q, k, v = t.chunk(3)
            q = permute_qk_weight(q, n_heads, to="half")
            k = permute_qk_weight(k, n_heads, to="half")
            out[name] = torch.cat([q, k, v])
    return out


def rope_scaling_from_config_broken(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """Chapter 8's broken config loader: it reads the scaling type only under the old key
    ``type`` and knows only three types; anything else becomes plain RoPE, silently."""
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("type")
    if kind in ("linear", "dynamic", "yarn"):
        return {"rope_type": kind, **{k: v for k, v in scaling.items() if k != "type"}}
    return None


# ----------------------------------------------------------------------------- padding, packing

PAD_COUNTS = (0, 1, 5, 16, 37, 64)
"""Left pads in front of the rows of a padded batch, cycled over the rows (prompts of
different lengths padded to the longest have pads of many counts)."""


def _left_padded(
    model: ByteLM, tokens: torch.Tensor, *, positions_from_mask: bool, mask_pads: bool
) -> torch.Tensor:
    """Row i runs with PAD_COUNTS[i % 6] pad bytes (0) in front; the logits of its real tokens
    come back, ``(b, s, V)``. Rows with one pad count run together (as one padded batch would
    hold them); pad keys are hidden with -inf when ``mask_pads`` (each pad query still sees
    itself, so no row of scores is all -inf)."""
    b, s = tokens.shape
    pads = torch.tensor([PAD_COUNTS[i % len(PAD_COUNTS)] for i in range(b)])
    out = torch.empty(b, s, 256)
    for p in sorted(set(pads.tolist())):
        rows = (pads == p).nonzero().squeeze(1)
        t = torch.cat([torch.zeros(len(rows), p, dtype=torch.long), tokens[rows]], dim=1)
        mask = torch.ones_like(t)
        mask[:, :p] = 0  # (n, p + s): 0 on the pads
        positions = positions_from_attention_mask(mask) if positions_from_mask else None
        bias = None
        if mask_pads:
            width = p + s
            keep = mask.bool()[:, None, :].expand(-1, width, -1) | torch.eye(width, dtype=bool)
            bias = torch.zeros(len(rows), 1, width, width).masked_fill(~keep[:, None], -math.inf)
        out[rows] = model(t, positions=positions, bias=bias)[:, p:]
    return out


DOC_LEN = 64
"""The length of each document packed into a row (64 bytes, the training length L, so every
document is in range)."""


def _packed(model: ByteLM, tokens: torch.Tensor, *, restart: bool, doc_mask: bool) -> torch.Tensor:
    """Each row of ``tokens`` read as documents of DOC_LEN bytes packed end to end."""
    s = tokens.shape[1]
    lengths = [DOC_LEN] * (s // DOC_LEN) + ([s % DOC_LEN] if s % DOC_LEN else [])
    ids = document_ids_from_lengths(lengths)  # (s,)
    positions = packed_positions(ids) if restart else None
    bias = packed_causal_mask(ids) if doc_mask else None  # (s, s)
    return model(tokens, positions=positions, bias=bias)


# ----------------------------------------------------------------------------- the registry

Run = Callable[[ByteLM, torch.Tensor], torch.Tensor]


def _plain(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    return model(tokens)


YARN = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64}
"""The YaRN scaling the scaling bugs use (factor 8 from L0 = L = 64, so it targets 8L), as
chapter 7 evaluates it."""

CONFIG = {"rope_theta": 10000.0, "rope_scaling": dict(YARN)}
"""A config.json fragment written the current way (``rope_type``), for the loader bug."""


def _yarn(factor_override: float | None = None) -> Run:
    def run(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
        scaling = dict(YARN)
        if factor_override is not None:
            scaling["attention_factor"] = factor_override
        return model(tokens, rotate=_rope_like(model, scaling))

    return run


def _yarn_twice(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """HF's attention factor (already the final one) multiplied by the YaRN mscale again, as
    SGLang PR 33558 fixed: cos and sin carry mscale squared, the scores its fourth power."""
    m = parse_scaling(YARN).attention_scaling
    return _yarn(m * m)(model, tokens)


def _loaded(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    scaling = rope_scaling_from_config_broken(CONFIG)
    return model(tokens, rotate=_rope_like(model, scaling))


def _layout_swapped(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """An interleaved checkpoint loaded into the half-split model with no conversion."""
    return _with_state(model, interleaved_checkpoint(model))(tokens)


def _bias_not_permuted(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    state = convert_checkpoint_broken(interleaved_checkpoint(model), model.n_heads)
    return _with_state(model, state)(tokens)


def _partial_denominator(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """Partial rotary with theta_i = base**(-2i / head_dim) for i < r/2 (the frequencies of the
    whole head's first r/2 pairs) instead of base**(-2i / r)."""
    rope = model.rope
    assert rope is not None
    d, r, s = rope.head_dim, rope.rotary_dim, tokens.shape[1]
    inv = rope.base ** -(torch.arange(0, r, 2, dtype=torch.float64) / d)
    return model(tokens, rotate=_rotate_with(*_rotation_tables(inv, torch.arange(s))))


def _partial_slice(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """Partial rotary applied to the last r dims of each head instead of the first r."""
    rope = model.rope
    assert rope is not None
    d, r, s = rope.head_dim, rope.rotary_dim, tokens.shape[1]
    inv = rope.base ** -(torch.arange(0, r, 2, dtype=torch.float64) / r)
    tables = _rotation_tables(inv, torch.arange(s))
    return model(tokens, rotate=_rotate_with(*tables, first=d - r))


def _bf16(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    rope = model.rope
    assert rope is not None
    tables = bf16_angle_tables(rope.head_dim, tokens.shape[1], base=rope.base)
    return model(tokens, rotate=_rotate_with(*tables))


def _shifted(by: int) -> Run:
    def run(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
        return model(tokens, positions=torch.arange(tokens.shape[1]) + by)

    return run


def _cached(step: Step, prefill: int) -> Run:
    def run(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
        return cached_forward(model, tokens, prefill=min(prefill, tokens.shape[1]), step=step)

    return run


def _sticky(after: int) -> Run:
    """Dynamic NTK (factor 8, L0 = 64) with the frequencies of an earlier call of ``after``
    positions kept (issue 25306); ``after=0``: a fresh module."""

    def run(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
        rope = model.rope
        assert rope is not None
        dyn = StickyDynamicNTK(
            rope.head_dim, factor=8.0, original_max_position_embeddings=64, base=rope.base
        )
        if after:
            dyn.inv_freq(after)  # the long prompt served before
        return model(tokens, rotate=dyn.rotate)

    return run


WINDOW = 64
"""Keys a sliding-window or sink cache holds per layer in chapter 8b (L, so every offset the
window keeps was trained)."""

SINKS = 4
"""The first tokens a sink cache never evicts (StreamingLLM keeps 4)."""

LONGROPE = {
    "rope_type": "longrope",
    "short_factor": [1.0] * 8,
    "long_factor": [1.0 + 3.0 * i / 7 for i in range(8)],
    "original_max_position_embeddings": 64,
    "attention_factor": 1.0,
}
"""The LongRoPE scaling of chapter 8b's switch, with short factors 1 (the trained model itself
inside L0 = L), long factors rising from 1 for the fastest pair to 4 for the slowest (a 4L
target), and attention factor 1 so that only the switch of frequencies differs between runs."""

CHUNK = 32
"""Tokens per prefill chunk (L/2) in the chunked-prefill bug."""

DRAFTS = (4, 2)
"""Per round of chapter 8b's speculative decoding, the tokens accepted and the drafts rejected."""


def _window(sinks: int, rule: str) -> Run:
    def run(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
        return caches.window_forward(model, tokens, size=WINDOW, sinks=sinks, rule=rule)

    return run


def _longrope_stale(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """Decoding with LongRoPE chosen per step from the length so far, the cache kept: keys of
    the first L0 tokens stay rotated with the short factors (transformers before PR 33129)."""
    m = copy.deepcopy(model)
    m.set_rope_scaling(LONGROPE)
    return cached_forward(m, tokens, prefill=min(32, tokens.shape[1]))


def _longrope_reprefill(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """Short factors while the text is at most L0 long; at the crossover the cache is dropped
    and everything is recomputed with the long factors (Phi-3 in transformers since PR 33129)."""
    rotate = _rope_like(model, LONGROPE)  # picks by max(position) + 1, as Hugging Face does
    l0 = LONGROPE["original_max_position_embeddings"]
    short = model(tokens[:, :l0], rotate=rotate)
    return torch.cat([short, model(tokens, rotate=rotate)[:, l0:]], dim=1)


def _longrope_long(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """The long factors at every position, chosen once from the longest length served (vLLM
    since PR 27431 when max_model_len > L0; llama.cpp's context size, issue 24823)."""
    m = copy.deepcopy(model)
    m.set_rope_scaling({**LONGROPE, "short_factor": LONGROPE["long_factor"]})
    return m(tokens)


def _based(base: float) -> Run:
    """The model's rotation, read with another rope_theta."""

    def run(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
        rope = model.rope
        assert rope is not None
        return model(tokens, rotate=RotaryEmbedding(rope.head_dim, base=base))

    return run


def _chunks_restart(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """Chunked prefill whose every chunk is rotated from 0; one pass, equal to
    :func:`~posenc_core.book.instruments.caches.chunked_prefill` with ``restart``."""
    return model(tokens, positions=torch.arange(tokens.shape[1]) % CHUNK)


def _drafts_kept(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """Rejected drafts left in the cache: the text attends to them and its positions count them."""
    cached, real = caches.with_rejected_drafts(tokens, accepted=DRAFTS[0], rejected=DRAFTS[1])
    return model(cached)[:, real]


def _position_lag(model: ByteLM, tokens: torch.Tensor) -> torch.Tensor:
    """The position counter advanced by 1 per round instead of by the tokens accepted
    (transformers#30042): round r starts at position r, so positions repeat and run back."""
    t = torch.arange(tokens.shape[1])
    k = DRAFTS[0]
    return model(tokens, positions=t - (t // k) * (k - 1))


DECODING = ("cached", "longrope")
"""Baselines of bugs that decode one token at a time (measured on fewer windows)."""


@dataclass(frozen=True)
class Bug:
    """One bug of chapter 8 and its correct counterpart.

    Attributes:
        key: short name.
        title: what goes wrong, in a few words.
        label: a name of at most 16 characters, for buttons.
        model: the trained model it runs on: ``"rope"``, ``"rope-r8"`` (partial rotary, 8 of 16
            dims), ``"rope-b500000"`` (RoPE trained at base 500000) or ``"learned"``.
        eval_factor: evaluation windows are eval_factor * L positions.
        reports: public reports of it (``owner/repo#number``).
        broken: ``(model, tokens) -> logits`` with the bug.
        correct: the same input handled correctly.
        baseline: a name for ``correct``: bugs with the same baseline (and model and windows)
            share its measurement.
    """

    key: str
    title: str
    label: str
    model: str
    eval_factor: int
    reports: tuple[str, ...]
    broken: Run
    correct: Run
    baseline: str


def _bugs() -> dict[str, Bug]:
    pad_ok = lambda m, t: _left_padded(m, t, positions_from_mask=True, mask_pads=True)  # noqa: E731
    pack_ok = lambda m, t: _packed(m, t, restart=True, doc_mask=True)  # noqa: E731
    cache_ok = _cached(correct_step, 32)
    rows = [
        ("layout", "interleaved checkpoint, half-split rotation", "layout", "rope", 8,
         ("huggingface/transformers#25199", "Dao-AILab/flash-attention#288"),
         _layout_swapped, _plain, "plain"),
        ("layout-bias", "converted, but q/k biases not permuted", "q/k biases", "rope", 8,
         ("huggingface/transformers#25199",), _bias_not_permuted, _plain, "plain"),
        ("partial-denominator", "partial rotary: theta over head_dim", "theta over d_h",
         "rope-r8", 8,
         ("huggingface/transformers#48630", "pie-project/pie#602"),
         _partial_denominator, _plain, "plain"),
        ("partial-slice", "partial rotary: last dims rotated", "partial slice", "rope-r8", 8,
         ("pie-project/pie#602",), _partial_slice, _plain, "plain"),
        ("bf16-angles", "angles computed in bfloat16", "bf16 angles", "rope", 8,
         ("huggingface/transformers#29285",), _bf16, _plain, "plain"),
        ("padding-positions", "left padding, positions 0..S-1", "pad positions", "rope", 8,
         ("huggingface/transformers#22161",),
         lambda m, t: _left_padded(m, t, positions_from_mask=False, mask_pads=True),
         pad_ok, "padded"),
        ("padding-unmasked", "left padding, pads not masked", "pads unmasked", "rope", 8,
         ("huggingface/transformers#22161",),
         lambda m, t: _left_padded(m, t, positions_from_mask=True, mask_pads=False),
         pad_ok, "padded"),
        ("packing-no-restart", "packed, positions not restarted", "pack: no restart", "rope", 8, (),
         lambda m, t: _packed(m, t, restart=False, doc_mask=True), pack_ok, "packed"),
        ("packing-no-mask", "packed, no document mask", "pack: no mask", "rope", 8, (),
         lambda m, t: _packed(m, t, restart=True, doc_mask=False), pack_ok, "packed"),
        ("cache-off-by-one", "KV cache: new token at n + 1", "cache at n + 1", "rope", 8,
         ("microsoft/onnxruntime-genai#2354", "fla-org/flash-linear-attention#766"),
         _cached(off_by_one_step, 32), cache_ok, "cached"),
        ("yarn-dropped", "YaRN's attention factor dropped", "YaRN dropped", "rope", 8,
         ("huggingface/transformers#47435", "turboderp-org/exllamav3#259"),
         _yarn(1.0), _yarn(), "yarn"),
        ("yarn-twice", "YaRN's attention factor applied twice", "YaRN doubled", "rope", 8,
         ("sgl-project/sglang#33558",), _yarn_twice, _yarn(), "yarn"),
        ("config-ignored", "rope_type read as 'type': no scaling", "config ignored", "rope", 8,
         ("vllm-project/vllm#6689", "unslothai/unsloth#6197"), _loaded, _yarn(), "yarn"),
        ("dynamic-sticky", "dynamic NTK keeps a longer call's base", "sticky dynamic", "rope", 4,
         ("huggingface/transformers#25306",), _sticky(512), _sticky(0), "dynamic"),
        ("rope-off-by-one", "RoPE positions 1..S", "RoPE from 1", "rope", 8,
         ("huggingface/transformers#11242",), _shifted(1), _plain, "plain"),
        ("learned-off-by-one", "learned table rows 1..S", "learned from 1", "learned", 1,
         ("huggingface/transformers#11242", "huggingface/transformers#9116"),
         _shifted(1), _plain, "plain"),
        ("learned-padding-positions", "learned, left padding, positions 0..S-1",
         "learned: padding", "learned", 1,
         ("huggingface/transformers#22161",),
         lambda m, t: _left_padded(m, t, positions_from_mask=False, mask_pads=True),
         pad_ok, "padded"),
        ("learned-packing-no-restart", "learned, packed, positions not restarted",
         "learned: packing", "learned", 8, (),
         lambda m, t: _packed(m, t, restart=False, doc_mask=True),
         pack_ok, "packed"),
        # chapter 8b
        ("window-no-sinks", "sliding window, first tokens evicted", "window, no sinks",
         "rope", 8, ("mit-han-lab/streaming-llm#53",),
         _window(0, "text"), _window(SINKS, "cache"), "sinks"),
        ("sinks-text-positions", "sink cache, sinks at text positions", "sinks: text pos",
         "rope", 8, ("mit-han-lab/streaming-llm#53", "huggingface/transformers#31581"),
         _window(SINKS, "text"), _window(SINKS, "cache"), "sinks"),
        ("sinks-not-rerotated", "sink cache, keys never re-rotated", "sinks: stale rot",
         "rope", 8, ("huggingface/transformers#31581", "huggingface/transformers#31537"),
         _window(SINKS, "inserted"), _window(SINKS, "cache"), "sinks"),
        ("longrope-stale-cache", "LongRoPE switch, short keys kept", "LongRoPE: stale",
         "rope", 4, ("huggingface/transformers#33129", "vllm-project/vllm#27414"),
         _longrope_stale, _longrope_reprefill, "longrope"),
        ("longrope-long-always", "LongRoPE long factors from token 0", "LongRoPE: long",
         "rope", 4, ("vllm-project/vllm#27431", "ggml-org/llama.cpp#24823"),
         _longrope_long, _longrope_reprefill, "longrope"),
        ("theta-default", "rope_theta 500000 read as 10000", "theta 10000",
         "rope-b500000", 8,
         ("ollama/ollama#2379", "vllm-project/vllm#9502", "deepspeedai/DeepSpeed#8345",
          "lyogavin/airllm#368"),
         _based(10000.0), _plain, "plain"),
        ("theta-converse", "rope_theta 10000 read as 500000", "theta 500000", "rope", 8, (),
         _based(500000.0), _plain, "plain"),
        ("chunk-restart", "chunked prefill, chunks from position 0", "chunk restart",
         "rope", 8, ("huggingface/transformers#43082", "vllm-project/vllm#10388"),
         _chunks_restart, _plain, "plain"),
        ("drafts-kept", "rejected drafts left in the cache", "drafts kept", "rope", 8,
         ("ml-explore/mlx-lm#1109",), _drafts_kept, _plain, "plain"),
        ("draft-position-lag", "position +1 per round, not +accepted", "draft positions",
         "rope", 8, ("huggingface/transformers#30042", "huggingface/transformers#30068"),
         _position_lag, _plain, "plain"),
    ]  # fmt: skip
    return {r[0]: Bug(*r) for r in rows}


BUGS: dict[str, Bug] = _bugs()
"""The bugs of chapters 8 and 8b by key (see :class:`Bug`), in the chapters' order."""

PARTS: dict[str, int] = {
    k: 1 + (i >= list(BUGS).index("window-no-sinks")) for i, k in enumerate(BUGS)
}
"""Which page reports each bug, 1 for chapter 8 and 2 for chapter 8b (caches, windows, prefill
chunks, drafts, LongRoPE's switch, the base)."""


def bug_curves(
    bugs: Sequence[str],
    models: Mapping[str, Sequence[ByteLM]],
    data: torch.Tensor,
    *,
    train_len: int = 64,
    max_windows: int | None = None,
    cache_windows: int | None = 64,
) -> dict[str, dict[str, np.ndarray]]:
    """Per-position loss of each bug and of its correct counterpart, on every seed.

    Args:
        bugs: keys of :data:`BUGS`.
        models: model name (``Bug.model``) -> the trained models, one per seed.
        data: held-out bytes.
        train_len: L (windows are ``bug.eval_factor * L``).
        max_windows: windows per measurement (None: all).
        cache_windows: windows for the bugs that decode one token at a time (baselines in
            :data:`DECODING`).

    Returns:
        key -> ``{"broken": (S, P), "correct": (S, P)}``; correct counterparts with the same
        ``baseline``, model and windows are measured once.
    """
    done: dict[tuple, np.ndarray] = {}
    out = {}
    for key in bugs:
        bug = check.choice("bug", key, tuple(BUGS)) and BUGS[key]
        if bug.model not in models:
            raise ValueError(f"bug {key!r} runs on model {bug.model!r}; models has {list(models)}")
        length = bug.eval_factor * train_len
        n = cache_windows if bug.baseline in DECODING else max_windows

        def measure(run: Run, ms: Sequence[ByteLM], length: int, n: int | None) -> np.ndarray:
            curves = [
                heldout.position_loss(lambda t, m=m: run(m, t), data, length, max_windows=n)
                for m in ms
            ]
            return np.stack(curves)

        base = (bug.baseline, bug.model, length, n)
        if base not in done:
            done[base] = measure(bug.correct, models[bug.model], length, n)
        out[key] = {
            "broken": measure(bug.broken, models[bug.model], length, n),
            "correct": done[base],
        }
    return out
