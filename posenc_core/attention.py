"""Scaled dot-product self-attention (Vaswani et al. 2017, Eq. 1), single- and multi-head.

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + B) V

with an optional causal mask and an optional additive bias B (ALiBi's, for example), and the
per-layer terms of recent models: a sliding-window mask (Mistral, Gemma 2-4, GPT-OSS; ModernBERT's
bidirectional one), a chunked mask (Llama 4) and per-head sink logits (GPT-OSS). The masks are
public (:func:`sliding_window_mask`, :func:`chunked_mask`) so that they can be printed.
Nothing here knows about positions: without a positional scheme and without a causal mask
the map from a set of tokens to outputs is permutation-equivariant (chapter 1).

Built on ``torch.nn.functional.scaled_dot_product_attention`` when the weights are not
requested and there are no sinks; both it and the explicit path (``return_weights=True``) are
checked in ``tests/core/test_attention.py`` against the softmax written out with loops in
float64, and the windows, chunks and sinks in ``tests/core/test_attention_layers.py`` against
the Hugging Face functions they mirror.

Notation for tensor shapes: b = batch, h = heads, s = sequence, d = d_model, d_h = head width.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import _validation as check
from .alibi import _alibi_bias
from .rope import RotaryEmbedding


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def _broadcast(*shapes: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast of ``shapes`` (NumPy rules), or None if they do not broadcast.

    Plain Python: ``torch.broadcast_shapes`` costs several microseconds per call."""
    if all(sh == shapes[0] for sh in shapes):
        return tuple(shapes[0])
    out = [1] * max(len(sh) for sh in shapes)
    for sh in shapes:
        for i, n in enumerate(sh, start=len(out) - len(sh)):
            if n != 1:
                if out[i] not in (1, n):
                    return None
                out[i] = n
    return tuple(out)


def _autocast_on(t: torch.Tensor) -> bool:
    """Whether autocast is active for ``t``'s device type (then mixed dtypes are legitimate)."""
    try:
        return torch.is_autocast_enabled(t.device.type)
    except (RuntimeError, TypeError, ValueError):  # a device type autocast does not know
        return False


def _check_bias(bias: object, scores_shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """Check an additive bias against the scores ``(..., s_q, s_k)``: floating point, on
    ``like``'s device, and broadcastable to ``scores_shape`` without enlarging it."""
    if isinstance(bias, torch.Tensor) and bias.dtype == torch.bool:
        raise TypeError(
            "bias is added to the scores, so it must be a floating-point tensor, got dtype "
            "torch.bool; for a boolean keep-mask m pass "
            "torch.zeros(m.shape).masked_fill(~m, float('-inf'))"
        )
    check.tensor("bias", bias, floating=True)
    if _broadcast(_shape(bias), scores_shape) != scores_shape:
        raise ValueError(
            f"bias of shape {_shape(bias)} must broadcast to the scores (..., s_q, s_k) = "
            f"{scores_shape} without enlarging them (each of its trailing dimensions 1 or equal "
            "to the scores')"
        )
    if bias.device != like.device:
        raise ValueError(
            f"bias must be on the same device as the queries ({like.device}), got {bias.device}"
        )
    return bias


def _keep(
    s_q: int,
    s_k: int,
    causal: bool,
    window: int | None,
    chunk: int | None,
    device: torch.device | None = None,
) -> torch.Tensor:
    """Boolean ``(s_q, s_k)``: True where query i sees key j, for checked arguments.

    The queries are the last s_q of the s_k positions (query row r is position
    ``s_k - s_q + r``), as with a KV cache; a window or chunk of at least s_k is the same as
    s_k (clipped, so that no index arithmetic can overflow)."""
    i = torch.arange(s_k - s_q, s_k, device=device)[:, None]  # (s_q, 1) query positions
    j = torch.arange(s_k, device=device)[None, :]  # (1, s_k) key positions
    keep = (j <= i) if causal else None
    local = None
    if window is not None:
        w = min(window, max(s_k, 1))
        local = (j > i - w) if causal else ((i - j).abs() <= w)
    elif chunk is not None:
        c = min(chunk, max(s_k, 1))
        local = (i // c) == (j // c)
    if local is None:
        return keep if keep is not None else torch.ones(s_q, s_k, dtype=torch.bool, device=device)
    return local if keep is None else keep & local


def _mask_lengths(where: str, s_q: object, s_k: object) -> tuple[int, int]:
    """Check the lengths of a public mask function: s_q >= 0, s_k >= s_q (None: s_q), and the
    mask (one boolean per pair, plus int64 indices) within ``MAX_RESULT_BYTES``."""
    s_q = check.non_negative_int("s_q", s_q)
    s_k = s_q if s_k is None else check.non_negative_int("s_k", s_k)
    if s_k < s_q:
        raise ValueError(
            f"s_k must be at least s_q (the s_q queries are the last s_q of the s_k key "
            f"positions), got s_q={s_q}, s_k={s_k}"
        )
    check.result_size(
        where,
        "the mask",
        [("s_q", s_q), ("s_k", s_k)],
        s_q * s_k + 8 * (s_q + s_k),
        1,
        precision="a boolean per pair and int64 indices",
        advice="build it in chunks of queries",
    )
    return s_q, s_k


def sliding_window_mask(
    s_q: int, s_k: int | None = None, *, window: int, causal: bool = True
) -> torch.Tensor:
    """Boolean sliding-window mask: True where query i may attend to key j.

    Causal: ``i - window < j <= i`` (``window`` keys, the query included; Mistral, Gemma 2-4,
    GPT-OSS). Bidirectional: ``abs(i - j) <= window`` (ModernBERT's local layers, with
    ``window = local_attention // 2``). The queries are the last s_q of the s_k positions. Tested
    in ``tests/core/test_attention_layers.py`` against Hugging Face's
    ``sliding_window_causal_mask_function``, ``sliding_window_bidirectional_mask_function`` and
    ``create_sliding_window_causal_mask``.

    Args:
        s_q: number of queries, an integer >= 0.
        s_k: number of keys, an integer >= s_q; None for s_q. The mask may take at most
            ``MAX_RESULT_BYTES``.
        window: a positive integer.
        causal: True or False; also hide the keys after each query.

    Returns:
        ``(s_q, s_k)`` boolean tensor on the CPU, True where the pair is visible.

    Raises:
        TypeError: a length or window that is not an integer (bool included), a causal not a bool.
        ValueError: a negative length, s_k < s_q, a window < 1, or a mask above the limit.
    """
    window = check.positive_int("window", window)
    causal = check.boolean("causal", causal)
    s_q, s_k = _mask_lengths("sliding_window_mask", s_q, s_k)
    return _keep(s_q, s_k, causal, window, None)


def chunked_mask(
    s_q: int, s_k: int | None = None, *, chunk: int, causal: bool = True
) -> torch.Tensor:
    """Boolean chunked mask: True where query i may attend to key j.

    Visible iff ``i // chunk == j // chunk`` (each query sees its own block), and ``j <= i`` when
    causal: Llama 4's chunked layers (``attention_chunk_size``). The queries are the last s_q of
    the s_k positions. Tested in ``tests/core/test_attention_layers.py`` against Hugging Face's
    ``chunked_causal_mask_function`` (without left padding) and ``create_chunked_causal_mask``.

    Args:
        s_q: number of queries, an integer >= 0.
        s_k: number of keys, an integer >= s_q; None for s_q. The mask may take at most
            ``MAX_RESULT_BYTES``.
        chunk: a positive integer, the block length.
        causal: True or False; also hide the keys after each query.

    Returns:
        ``(s_q, s_k)`` boolean tensor on the CPU, True where the pair is visible.

    Raises:
        TypeError: a length or chunk that is not an integer (bool included), a causal not a bool.
        ValueError: a negative length, s_k < s_q, a chunk < 1, or a mask above the limit.
    """
    chunk = check.positive_int("chunk", chunk)
    causal = check.boolean("causal", causal)
    s_q, s_k = _mask_lengths("chunked_mask", s_q, s_k)
    return _keep(s_q, s_k, causal, None, chunk)


def _combined_mask(
    bias: torch.Tensor | None,
    q_len: int,
    k_len: int,
    causal: bool,
    like: torch.Tensor,
    window: int | None = None,
    chunk: int | None = None,
) -> torch.Tensor | None:
    """Additive mask (q_len, k_len) or broadcastable bias with the causal, sliding-window or
    chunked mask folded in (0 where visible, -inf where hidden)."""
    if not causal and window is None and chunk is None:
        return bias
    keep = _keep(q_len, k_len, causal, window, chunk, like.device)  # (q, k)
    mask = torch.zeros(q_len, k_len, dtype=like.dtype, device=like.device).masked_fill(
        ~keep, float("-inf")
    )
    return mask if bias is None else bias + mask


def _check_local(
    window: object, chunk: object, s_q: int, s_k: int
) -> tuple[int | None, int | None]:
    """Check ``window`` and ``chunk`` (each None or a positive integer, not both) for s_q
    queries and s_k keys; return them as ints."""
    if window is not None:
        window = check.positive_int("window", window)
    if chunk is not None:
        chunk = check.positive_int("chunk", chunk)
    if window is not None and chunk is not None:
        raise ValueError(
            "window and chunk are mutually exclusive (a layer uses a sliding window or chunks, "
            f"not both), got window={window}, chunk={chunk}"
        )
    if (window is not None or chunk is not None) and s_q > s_k:
        raise ValueError(
            f"with window or chunk, q may not be longer than k (the queries are the last s_q of "
            f"the s_k positions), got s_q={s_q}, s_k={s_k}"
        )
    return window, chunk


def _check_sinks(sinks: object, scores_shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """Check sink logits: a finite floating-point ``(h,)`` (or ``(1,)``) tensor on ``like``'s
    device, h the head dimension (-3) of the scores ``(..., h, s_q, s_k)``."""
    check.tensor("sinks", sinks, floating=True)
    if len(scores_shape) < 3:
        raise ValueError(
            "sinks need a head dimension: q, k and v of at least 3 dimensions (..., h, s, d_h), "
            f"got scores of shape (s_q, s_k) = {scores_shape} and sinks of shape {_shape(sinks)}"
        )
    h = scores_shape[-3]
    if sinks.dim() != 1 or sinks.shape[0] not in (1, h):
        raise ValueError(
            f"sinks must have shape (h,) = ({h},), one logit per head (dimension -3 of the "
            f"scores (..., h, s_q, s_k) = {scores_shape}), or (1,); got {_shape(sinks)}"
        )
    if sinks.device != like.device:
        raise ValueError(
            f"sinks must be on the same device as the queries ({like.device}), got {sinks.device}"
        )
    return check.finite("sinks", sinks)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    bias: torch.Tensor | None = None,
    return_weights: bool = False,
    window: int | None = None,
    chunk: int | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d_h) + bias) v, with optional causal, sliding-window or chunked masks
    and sink logits (Vaswani et al. 2017, Eq. 1).

    Uses ``torch.nn.functional.scaled_dot_product_attention`` unless the weights are requested or
    there are sinks (then the explicit softmax). Tested in ``tests/core/test_attention.py``
    against the softmax written out with loops in float64 (decoding queries against the last
    rows of the full pass), and the windows, chunks and sinks in
    ``tests/core/test_attention_layers.py`` against Hugging Face's mask functions and GPT-OSS's
    ``eager_attention_forward``.

    Args:
        q: ``(..., s_q, d_h)`` floating tensor, d_h >= 1.
        k: ``(..., s_k, d_h)``, s_k >= 1 (unless s_q = 0).
        v: ``(..., s_k, d_v)``; the leading dims of q, k and v broadcast (e.g. k and v
            ``(b, 1, s_k, d_h)`` shared by all heads); one dtype (unless autocast) and device.
        causal: True or False; mask keys after each query (queries are the last s_q positions).
        bias: additive floating scores broadcasting to ``(..., s_q, s_k)`` without enlarging
            it (0 keeps, -inf hides; not a boolean mask), on q's device.
        return_weights: True or False; also return the weights. Scores, weights and masks
            built may take at most ``MAX_RESULT_BYTES``.
        window: None or a positive integer: a sliding window (:func:`sliding_window_mask`).
        chunk: None or a positive integer: a chunked mask (:func:`chunked_mask`); not with
            ``window``.
        sinks: None or one finite logit per head, ``(h,)`` or ``(1,)`` for scores
            ``(..., h, s_q, s_k)``: an extra softmax column, then dropped, so rows sum to less
            than 1 (GPT-OSS); the softmax runs in the promoted dtype, weights cast to v's.

    Returns:
        ``(..., s_q, d_v)``, and the weights ``(..., s_q, s_k)`` if requested.

    Raises:
        TypeError: a non-tensor or non-floating input, mismatched dtypes, a flag not a bool, or
            a window or chunk not an integer.
        ValueError: shapes, devices, masks or sinks that do not fit (named in the message).
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        check.tensor(name, t, min_dim=2, floating=True)
    causal = check.boolean("causal", causal)
    return_weights = check.boolean("return_weights", return_weights)

    def shapes() -> str:  # for the messages below; built only when one is raised
        return f"q {_shape(q)}, k {_shape(k)}, v {_shape(v)}"

    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must have the same last dimension d_h, got {shapes()}")
    if q.shape[-1] == 0:
        raise ValueError(f"q and k must have a last dimension d_h >= 1, got {shapes()}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same sequence length (number of keys s_k), got {shapes()}"
        )
    if k.shape[-2] == 0 and q.shape[-2] > 0:
        raise ValueError(
            "k and v must hold at least one key (softmax over no keys is undefined), got "
            f"{shapes()}"
        )
    batch = _broadcast(_shape(q)[:-2], _shape(k)[:-2], _shape(v)[:-2])
    if batch is None:
        raise ValueError(
            "the leading (batch/head) dimensions of q, k and v must be equal or broadcastable, "
            f"got {shapes()}"
        )
    if not (q.dtype == k.dtype == v.dtype) and not _autocast_on(q):
        raise TypeError(
            f"q, k and v must have the same dtype, got q {q.dtype}, k {k.dtype}, v {v.dtype}"
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"q, k and v must be on the same device, got q {q.device}, k {k.device}, v {v.device}"
        )
    s_q, s_k = q.shape[-2], k.shape[-2]
    if causal and s_q > s_k:
        raise ValueError(f"with causal=True, q may not be longer than k, got s_q={s_q}, s_k={s_k}")
    if bias is not None:
        bias = _check_bias(bias, batch + (s_q, s_k), q)
    if window is not None or chunk is not None:
        window, chunk = _check_local(window, chunk, s_q, s_k)
    if sinks is not None:
        sinks = _check_sinks(sinks, batch + (s_q, s_k), q)
    return _attention(q, k, v, causal, bias, return_weights, "attention", window, chunk, sinks)


def _attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    bias: torch.Tensor | None,
    return_weights: bool,
    where: str,
    window: int | None = None,
    chunk: int | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """:func:`attention` for checked arguments (the bias and sinks checked against the scores);
    ``where`` names the public caller in the message when the scores or the mask would be too
    large."""
    s_q, s_k = q.shape[-2], k.shape[-2]
    local = window is not None or chunk is not None
    _check_score_size(q, k, v, bias, causal, local, sinks, return_weights, where)
    if bias is not None:
        bias = bias.to(q.dtype)
        if bias.dim() < 2:  # (s_k,) or (): same broadcast, as SDPA wants >= 2 dims on 4-D input
            bias = bias.reshape((1,) * (2 - bias.dim()) + _shape(bias))
    if not return_weights and sinks is None:
        if bias is None and not local and (not causal or s_q == s_k):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=_combined_mask(bias, s_q, s_k, causal, q, window, chunk)
        )
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., s_q, s_k)
    mask = _combined_mask(bias, s_q, s_k, causal, q, window, chunk)
    if mask is not None:
        scores = scores + mask
    if sinks is None:
        weights = torch.softmax(scores, dim=-1)  # (..., s_q, s_k)
        return (weights @ v, weights) if return_weights else weights @ v
    # GPT-OSS: one more column holding the head's sink logit; torch.cat's type promotion
    # (as in Hugging Face's eager_attention_forward) fixes the dtype of the softmax, which
    # subtracts the row maximum, sink included, as Hugging Face does explicitly.
    dtype = torch.promote_types(scores.dtype, sinks.dtype)
    sink = sinks.to(dtype).reshape(-1, 1, 1).expand(*scores.shape[:-1], 1)  # (..., h, s_q, 1)
    logits = torch.cat([scores.to(dtype), sink], dim=-1)  # (..., h, s_q, s_k + 1)
    weights = torch.softmax(logits, dim=-1)[..., :-1].to(v.dtype)  # the sink column dropped
    out = weights @ v
    return (out, weights) if return_weights else out


def _check_score_size(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    bias: torch.Tensor | None,
    causal: bool,
    local: bool,
    sinks: torch.Tensor | None,
    return_weights: bool,
    where: str,
) -> None:
    """Refuse (``check.result_size``) scores and weights ``(..., s_q, s_k)`` that the explicit
    path (``return_weights`` or sinks) would materialise, or a mask ``(s_q, s_k)`` (causal,
    sliding-window or chunked; broadcast with the bias) to be built, above
    ``MAX_RESULT_BYTES``; the fused kernel itself builds neither."""
    s_q, s_k = q.shape[-2], k.shape[-2]
    masked = local or causal
    if return_weights or sinks is not None:
        lead = _broadcast(_shape(q)[:-2], _shape(k)[:-2], _shape(v)[:-2]) or ()  # the bias
        # broadcasts to the scores without enlarging them (checked); a mask is built even
        # for an empty batch, hence at least one score matrix when there is one
        n = max(math.prod(lead), 1 if masked else 0)
        dtype = q.dtype if sinks is None else torch.promote_types(q.dtype, sinks.dtype)
        check.result_size(
            where,
            "the attention scores and weights",
            [("batch", lead), ("s_q", s_q), ("s_k", s_k)],
            2 * n * s_q * (s_k + (sinks is not None)),
            dtype.itemsize,
            precision=str(dtype),
            advice=(
                "return_weights=False does not build them, or attend in chunks of queries"
                if sinks is None
                else "with sinks the explicit path builds them even without return_weights; "
                "attend in chunks of queries"
            ),
        )
    elif local or (causal and (bias is not None or s_q != s_k)):
        sizes = [("s_q", s_q), ("s_k", s_k)]
        mask = (s_q, s_k)
        if bias is not None:  # the mask is added to the bias: their broadcast is built
            sizes.insert(0, ("bias.shape", _shape(bias)))
            mask = _broadcast(_shape(bias), mask)
        check.result_size(
            where,
            "the sliding-window or chunked mask" if local else "the causal mask",
            sizes,
            math.prod(mask),
            q.dtype.itemsize + 1,
            precision=f"{q.dtype} and a boolean",
            advice="attend in chunks of queries",
        )


def self_attention(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    *,
    causal: bool = False,
    bias: torch.Tensor | None = None,
    return_weights: bool = False,
    window: int | None = None,
    chunk: int | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Single-head self-attention ``attention(x @ w_q, x @ w_k, x @ w_v)`` (Vaswani et al. 2017,
    Eq. 1); no positions are added here.

    Tested in ``tests/core/test_attention.py``: without positions and without a causal mask,
    permuting the tokens permutes the outputs (chapter 1).

    Args:
        x: ``(..., s, d)``, floating point.
        w_q, w_k: ``(d, d_h)``; w_v: ``(d, d_v)``; same dtype and device as x.
        causal, bias, return_weights, window, chunk, sinks: as in :func:`attention` (sinks
            need a head dimension in x, ``(..., h, s, d)``).

    Returns:
        ``(..., s, d_v)`` (and weights ``(..., s, s)`` if requested).
    """
    check.tensor("x", x, min_dim=2, floating=True)
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        check.tensor(name, w, min_dim=2, floating=True)
        if w.dim() != 2 or w.shape[0] != x.shape[-1]:
            raise ValueError(
                f"{name} must have shape (d_model={x.shape[-1]}, d_head), got {tuple(w.shape)}"
            )
        if w.dtype != x.dtype and not _autocast_on(x):
            raise TypeError(f"{name} must have the dtype of x ({x.dtype}), got {w.dtype}")
        if w.device != x.device:
            raise ValueError(f"{name} must be on the device of x ({x.device}), got {w.device}")
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(
            f"w_q and w_k must have the same width d_h, got w_q {_shape(w_q)}, w_k {_shape(w_k)}"
        )
    if w_q.shape[1] == 0:
        raise ValueError(
            f"w_q and w_k must have a width d_h >= 1, got w_q {_shape(w_q)}, w_k {_shape(w_k)}"
        )
    causal = check.boolean("causal", causal)
    return_weights = check.boolean("return_weights", return_weights)
    s = x.shape[-2]
    if bias is not None:
        bias = _check_bias(bias, _shape(x)[:-2] + (s, s), x)
    if window is not None or chunk is not None:
        window, chunk = _check_local(window, chunk, s, s)
    if sinks is not None:
        sinks = _check_sinks(sinks, _shape(x)[:-2] + (s, s), x)
    return _attention(
        x @ w_q,
        x @ w_k,
        x @ w_v,
        causal,
        bias,
        return_weights,
        "self_attention",
        window,
        chunk,
        sinks,
    )


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention whose positional scheme is chosen at construction.

    One fused ``nn.Linear`` makes q, k and v (``(b, s, d) -> (b, h, s, d_h)`` each), then
    :func:`attention` (Vaswani et al. 2017, Sec. 3.2.2), then the output projection. Tested in
    ``tests/core/test_attention.py`` (causal weights, both paths, equivariance without positions)
    and ``tests/core/test_attention_layers.py`` (window, chunk and sinks against
    :func:`attention`).

    Args:
        d_model: model width, a positive integer at most ``MAX_WIDTH``; the projections may take
            at most ``MAX_RESULT_BYTES``.
        n_heads: number of heads, dividing d_model, at most ``MAX_HEADS``.
        rope: None, or a :class:`~posenc_core.rope.RotaryEmbedding` of head_dim
            d_model // n_heads, applied to queries and keys.
        alibi: True or False; add ALiBi biases (causal or bidirectional as in forward).
        bias: True or False; use biases in the linear projections.
        sinks: True or False; learn one sink logit per head (GPT-OSS), the parameter ``sinks``
            ``(n_heads,)`` initialised to zeros (None when False).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        rope: RotaryEmbedding | None = None,
        alibi: bool = False,
        bias: bool = True,
        sinks: bool = False,
    ) -> None:
        super().__init__()
        where = "MultiHeadSelfAttention"
        self.d_model = check.width("d_model", d_model, where=where, even=False)
        self.n_heads = check.size("n_heads", n_heads, check.MAX_HEADS, "heads", where=where)
        if d_model % n_heads:
            raise ValueError(f"n_heads={n_heads} must divide d_model={d_model}")
        dtype = torch.get_default_dtype()
        check.result_size(
            where,
            "the projections' parameters",
            {"d_model": self.d_model},
            4 * self.d_model * (self.d_model + 1),
            dtype.itemsize,
            precision=f"{dtype} parameters",
        )
        self.head_dim = d_model // n_heads
        if rope is not None:
            if not isinstance(rope, RotaryEmbedding):
                raise TypeError(
                    f"rope must be None or a RotaryEmbedding, got {type(rope).__name__}"
                )
            if rope.head_dim != self.head_dim:
                raise ValueError(
                    f"rope.head_dim={rope.head_dim} must equal d_model // n_heads = {self.head_dim}"
                )
        self.rope = rope
        self.alibi = check.boolean("alibi", alibi)
        bias = check.boolean("bias", bias)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out = nn.Linear(d_model, d_model, bias=bias)
        self.sinks = nn.Parameter(torch.zeros(n_heads)) if check.boolean("sinks", sinks) else None

    def forward(
        self,
        x: torch.Tensor,
        *,
        causal: bool = False,
        bias: torch.Tensor | None = None,
        positions: torch.Tensor | int | None = None,
        return_weights: bool = False,
        window: int | None = None,
        chunk: int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Attend over ``x``.

        Args:
            x: ``(b, s, d)``, with the dtype and device of the module's parameters.
            causal: True or False; mask future keys.
            bias: extra additive floating bias broadcasting to the scores ``(b, h, s, s)`` without
                enlarging them, as in :func:`attention`; added to ALiBi's when ``alibi``.
            positions: passed to the rotary embedding (offset or position ids).
            return_weights: True or False; also return weights ``(b, h, s, s)`` (they and the ALiBi
                bias may take at most ``MAX_RESULT_BYTES``).
            window, chunk: None or a positive integer (not both), as in :func:`attention`.

        Returns:
            ``(b, s, d)`` (and the weights if requested).
        """
        check.tensor("x", x, min_dim=3, floating=True)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have shape (b, s, d_model={self.d_model}), got {tuple(x.shape)}"
            )
        causal = check.boolean("causal", causal)
        return_weights = check.boolean("return_weights", return_weights)
        w = self.qkv.weight
        if x.dtype != w.dtype and not _autocast_on(x):
            raise TypeError(
                f"x must have the dtype of the module's parameters ({w.dtype}), got {x.dtype}"
            )
        if x.device != w.device:
            raise ValueError(
                f"x must be on the device of the module's parameters ({w.device}), got {x.device}"
            )
        b, s, _ = x.shape
        if bias is not None:
            bias = _check_bias(bias, (b, self.n_heads, s, s), x)
        if window is not None or chunk is not None:
            window, chunk = _check_local(window, chunk, s, s)
        where = "MultiHeadSelfAttention.forward"
        if self.alibi and s > 0:
            ab_shape = (self.n_heads, s, s)
            check.result_size(
                where,
                "the ALiBi bias",
                [("n_heads", self.n_heads), ("s", s), ("s", s)],
                math.prod(ab_shape if bias is None else _broadcast(_shape(bias), ab_shape)),
                advice="attend to shorter sequences",
            )
        qkv = self.qkv(x).view(b, s, 3, self.n_heads, self.head_dim)  # (b, s, 3, h, d_h)
        q, k, val = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # each (b, h, s, d_h)
        if self.rope is not None:
            q, k = self.rope(q, k, positions)
        if self.alibi and s > 0:  # nothing to bias when s = 0
            ab = _alibi_bias(self.n_heads, s, s, causal, x.dtype, x.device)  # (h, s, s)
            bias = ab if bias is None else bias + ab
        result = _attention(
            q, k, val, causal, bias, return_weights, where, window, chunk, self.sinks
        )
        ctx, weights = result if return_weights else (result, None)
        y = self.out(ctx.transpose(1, 2).reshape(b, s, self.d_model))  # (b, s, d)
        return (y, weights) if return_weights else y
