"""ALiBi: attention with linear biases (Press, Smith and Lewis 2022, "Train Short, Test Long").

Head h adds ``-m_h * (i - j)`` to the score of query i and key j. The slopes m_h are the
geometric sequence 2**(-8/n), 2**(-16/n), ..., 2**(-8) for n heads when n is a power of
two; otherwise the slopes of the nearest lower power of two c, followed by every other
slope of 2c (the reference ``get_slopes`` in the authors' repository,
ofirpress/attention_with_linear_biases).

Notation for tensor shapes: h = heads, q = query length, k = key length.
"""

from __future__ import annotations

import math

import torch

from . import _validation as check
from ._numerics import round_once


def _power_of_two_exponents(n: int) -> list[float]:
    # slope_i = 2 ** (-8 (i + 1) / n), i = 0 .. n-1
    return [-8.0 * (i + 1) / n for i in range(n)]


def alibi_slopes(
    n_heads: int, *, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
) -> torch.Tensor:
    """Per-head slopes m_h, equal to the reference ``get_slopes(n_heads)`` for any head count.

    Checked in ``tests/core/test_alibi.py`` against an independent transcription of the reference
    ``get_slopes`` (Press et al. 2022, Sec. 3, and ofirpress/attention_with_linear_biases).

    Args:
        n_heads: number of attention heads, a positive integer at most 2**16 (``MAX_HEADS``:
            the slopes are built in a Python loop over the heads, as the reference does).
        dtype: real floating dtype of the result (exponents are exact; each slope is 2**e
            computed in float64 and rounded once to ``dtype``).
        device: device of the result (a torch.device, a string such as ``"cpu"``, or None
            for the default device).

    Returns:
        tensor of shape ``(n_heads,)``, all in (0, 1): decreasing for a power of two; otherwise
        the slopes of the power of two c are followed by the interleaved ones, which are larger
        than the last of the first c.
    """
    n_heads = _heads(n_heads, "alibi_slopes")
    dtype = check.float_dtype("dtype", dtype)
    device = check.device_value("device", device)
    return round_once(alibi_slopes_formula(n_heads), dtype).to(device=device)


def _heads(n_heads: object, where: str) -> int:
    """A checked head count: a positive integer at most ``MAX_HEADS`` (the slopes loop in
    Python over the heads)."""
    return check.size(
        "n_heads",
        n_heads,
        check.MAX_HEADS,
        "heads",
        where=where,
        why="MAX_HEADS; the slopes are built in a Python loop over the heads",
    )


def alibi_slopes_formula(n_heads: int) -> torch.Tensor:
    """The slopes in float64: 2 ** (-8 (i + 1) / n) for the power of two n <= n_heads, then
    every other slope of 2n for the heads beyond it.

    The reference ``get_slopes`` (ofirpress/attention_with_linear_biases) in exponents, which
    are exact binary fractions for a power of two; :func:`alibi_slopes` checks ``n_heads``
    and rounds once to the requested dtype.

    Args:
        n_heads: number of heads, a positive integer (trusted).

    Returns:
        float64 tensor of shape ``(n_heads,)`` on the CPU.
    """
    closest = 2 ** int(math.floor(math.log2(n_heads)))
    exponents = _power_of_two_exponents(closest)
    if closest != n_heads:
        exponents += _power_of_two_exponents(2 * closest)[0::2][: n_heads - closest]
    return torch.exp2(torch.tensor(exponents, dtype=torch.float64))  # (h,)


def alibi_bias(
    n_heads: int,
    q_len: int,
    k_len: int,
    *,
    causal: bool = True,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The additive attention bias of ALiBi (Press et al. 2022, Sec. 3, Fig. 3).

    Queries are the last ``q_len`` of the ``k_len`` positions (decoding with a KV cache): query
    row r sits at i = r + k_len - q_len, key column j at j. Tested in ``tests/core/test_alibi.py``
    against the formula with independently transcribed slopes.

    Args:
        n_heads: number of heads, a positive integer at most ``MAX_HEADS``.
        q_len: number of queries, a positive integer <= k_len.
        k_len: number of keys, a positive integer; the float64 bias may take at most
            ``MAX_RESULT_BYTES`` (beyond, :func:`alibi_key_bias` or chunks of queries).
        causal: True: ``-m_h * (i - j)`` for j <= i and ``-inf`` after (the bias carries the
            causal mask); False: ``-m_h * abs(i - j)``.
        dtype: real floating dtype of the result (computed in float64, rounded once).
        device: device of the result (a torch.device, a string such as ``"cpu"``, or None).

    Returns:
        tensor of shape ``(n_heads, q_len, k_len)``, added to scores before the softmax.
    """
    n_heads = _heads(n_heads, "alibi_bias")
    q_len = check.positive_int("q_len", q_len)
    k_len = check.positive_int("k_len", k_len)
    if q_len > k_len:
        raise ValueError(
            f"q_len must be <= k_len (queries are the last q_len keys), got q_len={q_len}, "
            f"k_len={k_len}"
        )
    check.result_size(
        "alibi_bias",
        "the bias",
        {"n_heads": n_heads, "q_len": q_len, "k_len": k_len},
        n_heads * q_len * k_len,
        advice="under a causal mask alibi_key_bias (n_heads, 1, k_len) gives the same "
        "attention; or build the bias for chunks of queries",
    )
    causal = check.boolean("causal", causal)
    dtype = check.float_dtype("dtype", dtype)
    device = check.device_value("device", device)
    return _alibi_bias(n_heads, q_len, k_len, causal, dtype, device)


def _alibi_bias(
    n_heads: int,
    q_len: int,
    k_len: int,
    causal: bool,
    dtype: torch.dtype,
    device: torch.device | None,
) -> torch.Tensor:
    """:func:`alibi_bias` for checked arguments -> ``(h, q, k)``."""
    slopes = alibi_slopes_formula(n_heads).to(device=device)  # (h,), float64
    i = torch.arange(k_len - q_len, k_len, dtype=torch.float64, device=device)  # (q,)
    j = torch.arange(k_len, dtype=torch.float64, device=device)  # (k,)
    distance = i[:, None] - j[None, :]  # (q, k), i - j
    if causal:
        bias = -slopes[:, None, None] * distance  # (h, q, k)
        bias = bias.masked_fill(distance < 0, float("-inf"))
    else:
        bias = -slopes[:, None, None] * distance.abs()
    return round_once(bias, dtype)


def alibi_key_bias(
    n_heads: int,
    k_len: int,
    *,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The reference implementation's shortcut: a bias ``m_h * j`` that depends only on the key.

    Under a causal mask, ``m_h * j`` and ``-m_h * (i - j)`` differ by ``m_h * i``, a constant
    along each softmax row, so both give the same attention weights. Without a causal mask
    they do not (chapter 7 shows the difference). This is the form of the ALiBi reference
    code (ofirpress/attention_with_linear_biases, ``slopes * arange(k_len)``), checked in
    ``tests/core/test_alibi.py`` against softmax rows of :func:`alibi_bias`.

    Args:
        n_heads: number of heads, a positive integer at most 2**16 (``MAX_HEADS``).
        k_len: number of keys, a positive integer; the bias, counted in float64
            (n_heads x k_len x 8 bytes), may take at most ``MAX_RESULT_BYTES`` (4 GiB).
        dtype: real floating dtype of the result (computed in float64, rounded once).
        device: device of the result (a torch.device, a string such as ``"cpu"``, or None).

    Returns:
        tensor of shape ``(n_heads, 1, k_len)``: entry (h, 0, j) is ``m_h * j``; it broadcasts
        over the query dimension.
    """
    n_heads = _heads(n_heads, "alibi_key_bias")
    k_len = check.positive_int("k_len", k_len)
    check.result_size(
        "alibi_key_bias", "the bias", {"n_heads": n_heads, "k_len": k_len}, n_heads * k_len
    )
    dtype = check.float_dtype("dtype", dtype)
    device = check.device_value("device", device)
    slopes = alibi_slopes_formula(n_heads).to(device=device)  # (h,), float64
    j = torch.arange(k_len, dtype=torch.float64, device=device)  # (k,)
    return round_once(slopes[:, None, None] * j[None, None, :], dtype)  # (h, 1, k)
