"""Scaled dot-product self-attention (Vaswani et al. 2017, Eq. 1), single- and multi-head.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + B) V

with an optional causal mask and an optional additive bias B (ALiBi's, for example).
Nothing here knows about positions: without a positional scheme and without a causal mask
the map from a set of tokens to outputs is permutation-equivariant (chapter 1).

Built on ``torch.nn.functional.scaled_dot_product_attention`` when the weights are not
requested; the explicit path (``return_weights=True``) is checked against it in the tests.

Notation for tensor shapes: b = batch, h = heads, s = sequence, d = d_model, d_h = head width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import _validation as v
from .alibi import alibi_bias
from .rope import RotaryEmbedding


def _combined_mask(bias: torch.Tensor | None, q_len: int, k_len: int, causal: bool, like: torch.Tensor) -> torch.Tensor | None:
    """Additive mask (q_len, k_len) or broadcastable bias with the causal part folded in."""
    if not causal:
        return bias
    keep = torch.ones(q_len, k_len, dtype=torch.bool, device=like.device).tril(k_len - q_len)  # (q, k)
    causal_mask = torch.zeros(q_len, k_len, dtype=like.dtype, device=like.device).masked_fill(~keep, float("-inf"))
    return causal_mask if bias is None else bias + causal_mask


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v_: torch.Tensor,
    *,
    causal: bool = False,
    bias: torch.Tensor | None = None,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_h) + bias) v, with an optional causal mask.

    Args:
        q: ``(..., s_q, d_h)``.
        k: ``(..., s_k, d_h)``.
        v_: ``(..., s_k, d_v)``.
        causal: mask keys after each query. With s_q < s_k the queries are the last s_q
            positions (decoding with a KV cache).
        bias: additive scores broadcastable to ``(..., s_q, s_k)`` (e.g. ``(h, s_q, s_k)``).
        return_weights: also return the attention weights.

    Returns:
        ``(..., s_q, d_v)``, and the weights ``(..., s_q, s_k)`` if requested.
    """
    for name, t in (("q", q), ("k", k), ("v", v_)):
        v.tensor(name, t, min_dim=2, floating=True)
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension, got {tuple(q.shape)} and {tuple(k.shape)}")
    if k.shape[-2] != v_.shape[-2]:
        raise ValueError(f"k and v must have the same sequence length, got {tuple(k.shape)} and {tuple(v_.shape)}")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {type(causal).__name__} {causal!r}")
    s_q, s_k = q.shape[-2], k.shape[-2]
    if causal and s_q > s_k:
        raise ValueError(f"with causal=True, q may not be longer than k, got s_q={s_q}, s_k={s_k}")
    if bias is not None:
        v.tensor("bias", bias, floating=True)
        try:
            torch.broadcast_shapes(bias.shape, q.shape[:-2] + (s_q, s_k))
        except RuntimeError:
            raise ValueError(
                f"bias of shape {tuple(bias.shape)} must broadcast to the scores (..., s_q, s_k) = "
                f"{tuple(q.shape[:-2]) + (s_q, s_k)}"
            ) from None
        bias = bias.to(q.dtype)
    if not return_weights:
        if bias is None and (not causal or s_q == s_k):
            return F.scaled_dot_product_attention(q, k, v_, is_causal=causal)
        return F.scaled_dot_product_attention(q, k, v_, attn_mask=_combined_mask(bias, s_q, s_k, causal, q))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., s_q, s_k)
    mask = _combined_mask(bias, s_q, s_k, causal, q)
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)  # (..., s_q, s_k)
    return weights @ v_, weights


def self_attention(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    *,
    causal: bool = False,
    bias: torch.Tensor | None = None,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Single-head self-attention of ``x`` with projection matrices (no positions added here).

    Args:
        x: ``(..., s, d)``.
        w_q, w_k: ``(d, d_h)``; w_v: ``(d, d_v)``.
        causal, bias, return_weights: as in :func:`attention`.

    Returns:
        ``(..., s, d_v)`` (and weights ``(..., s, s)`` if requested).
    """
    v.tensor("x", x, min_dim=2, floating=True)
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        v.tensor(name, w, min_dim=2, floating=True)
        if w.dim() != 2 or w.shape[0] != x.shape[-1]:
            raise ValueError(f"{name} must have shape (d_model={x.shape[-1]}, d_head), got {tuple(w.shape)}")
    return attention(x @ w_q, x @ w_k, x @ w_v, causal=causal, bias=bias, return_weights=return_weights)


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention whose positional scheme is chosen at construction.

    Args:
        d_model: model width.
        n_heads: number of heads; must divide d_model.
        rope: None, or a :class:`~posenc_core.rope.RotaryEmbedding` (its head_dim must be d_model // n_heads)
            applied to queries and keys.
        alibi: add ALiBi biases (causal or bidirectional to match ``causal`` in forward).
        bias: use biases in the linear projections.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        rope: RotaryEmbedding | None = None,
        alibi: bool = False,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.d_model = v.positive_int("d_model", d_model)
        self.n_heads = v.positive_int("n_heads", n_heads)
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        self.head_dim = d_model // n_heads
        if rope is not None:
            if not isinstance(rope, RotaryEmbedding):
                raise TypeError(f"rope must be None or a RotaryEmbedding, got {type(rope).__name__}")
            if rope.head_dim != self.head_dim:
                raise ValueError(f"rope.head_dim={rope.head_dim} must equal d_model // n_heads = {self.head_dim}")
        self.rope = rope
        self.alibi = bool(alibi)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        x: torch.Tensor,
        *,
        causal: bool = False,
        bias: torch.Tensor | None = None,
        positions: torch.Tensor | int | None = None,
        return_weights: bool = False,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attend over ``x``.

        Args:
            x: ``(b, s, d)``.
            causal: mask future keys.
            bias: extra additive bias broadcastable to ``(b, h, s, s)``.
            positions: passed to the rotary embedding (offset or position ids).
            return_weights: also return weights ``(b, h, s, s)``.

        Returns:
            ``(b, s, d)`` (and the weights if requested).
        """
        v.tensor("x", x, min_dim=3, floating=True)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must have shape (b, s, d_model={self.d_model}), got {tuple(x.shape)}")
        b, s, _ = x.shape
        qkv = self.qkv(x).view(b, s, 3, self.n_heads, self.head_dim)  # (b, s, 3, h, d_h)
        q, k, val = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (b, h, s, d_h)
        if self.rope is not None:
            q, k = self.rope(q, k, positions)
        if self.alibi:
            ab = alibi_bias(self.n_heads, s, s, causal=causal, dtype=x.dtype, device=x.device)  # (h, s, s)
            bias = ab if bias is None else bias + ab
        result = attention(q, k, val, causal=causal, bias=bias, return_weights=return_weights)
        ctx, weights = result if return_weights else (result, None)
        y = self.out(ctx.transpose(1, 2).reshape(b, s, self.d_model))  # (b, s, d)
        return (y, weights) if return_weights else y
