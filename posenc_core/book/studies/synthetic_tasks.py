"""The encoder study's synthetic tasks: which input token each output position must give.

Chapter 5's study trains on ``"first"`` and ``"lookback"``; ``"reverse"`` and ``"swap"`` are
for the encoder only (their answer lies in the future). :func:`reversal_cap` bounds the accuracy
of an encoder equivariant under reversal (symmetric ALiBi, no other positions).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from posenc_core import _validation as check

__all__ = ["TASKS", "CAUSAL_TASKS", "target_index", "make_batch", "reversal_cap"]

TASKS = ("first", "lookback", "reverse", "swap")
"""The synthetic tasks :func:`make_batch` can generate (the study uses ``first`` and
``lookback``)."""

CAUSAL_TASKS = ("first", "lookback")
"""The tasks well posed in a causal decoder, whose target at position i is a token at or before i.
(``reverse`` and ``swap`` ask for a later token, which a causal model never sees.)"""


def target_index(task: str, length: int, k: int = 3) -> list[int | None]:
    """Which input position each output position of a task copies (None: the NONE class).

    Args:
        task: one of :data:`TASKS`.
        length: sequence length n >= 1.
        k: the look-back distance of ``"lookback"``.

    Returns:
        list of n input positions, one per output position i (``first``, 0; ``lookback``,
        i - k, or None for i < k; ``reverse``, n - 1 - i; ``swap``, i XOR 1, and the last
        position of an odd length itself).
    """
    check.choice("task", task, TASKS)
    n, k = check.positive_int("length", length), check.positive_int("k", k)
    rule: dict[str, Callable[[int], int | None]] = {
        "first": lambda i: 0,
        "lookback": lambda i: i - k if i >= k else None,
        "reverse": lambda i: n - 1 - i,
        "swap": lambda i: min(i ^ 1, n - 1),
    }
    return [rule[task](i) for i in range(n)]


def make_batch(
    task: str, batch: int, length: int, vocab: int, generator: torch.Generator, *, k: int = 3
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of a synthetic task, drawn from ``generator``: uniform random tokens and, at
    every position, the token :func:`target_index` names (or NONE, the class ``vocab``).

    Args:
        task: one of :data:`TASKS`.
        batch: number of sequences b.
        length: sequence length n >= 1.
        vocab: number of input tokens V >= 2 (tokens 0 .. V-1).
        generator: a CPU ``torch.Generator`` (the only source of randomness).
        k: the look-back distance of ``"lookback"``, >= 1.

    Returns:
        ``(x, y)``: input tokens ``(b, n)`` and targets ``(b, n)`` in 0 .. V (int64, CPU).
    """
    batch = check.positive_int("batch", batch)
    vocab = check.positive_int("vocab", vocab)
    if vocab < 2:
        raise ValueError(f"vocab must be >= 2, got {vocab}")
    idx = target_index(task, length, k)
    x = torch.randint(vocab, (batch, length), generator=generator)  # (b, n)
    none = torch.tensor([j is None for j in idx])  # (n,)
    gather = torch.tensor([0 if j is None else j for j in idx])  # (n,)
    y = x[:, gather].masked_fill(none, vocab)  # (b, n)
    return x, y


def reversal_cap(task: str, length: int, vocab: int, k: int = 3) -> np.ndarray:
    """The most a reversal-equivariant model can score, position by position, on average with
    the mirror position.

    With only symmetric ALiBi (``-m|i-j|``) an encoder gives at position i of x exactly what it
    gives at n - 1 - i of reversed x, and one prediction must serve both targets; it hits both
    with probability q_i (1 for the same input position or both NONE, 1/V for two random tokens,
    0 for a token against NONE). So ``acc(i) + acc(n - 1 - i) <= 1 + q_i``, and the returned
    ``(1 + q_i) / 2`` bounds the mean accuracy over any mirror-closed set of positions (about
    (1 + 1/V) / 2 for ``first`` and ``lookback`` at n >> k).

    Args:
        task: one of :data:`TASKS`; length: sequence length n; vocab: tokens V; k: look-back.

    Returns:
        float64 array ``(n,)``.
    """
    vocab = check.positive_int("vocab", vocab)
    idx = target_index(task, length, k)
    n = len(idx)
    q = []
    for i in range(n):
        a = idx[i]
        b = None if idx[n - 1 - i] is None else n - 1 - idx[n - 1 - i]  # index into x
        if a is None or b is None:
            q.append(1.0 if a is None and b is None else 0.0)
        else:
            q.append(1.0 if a == b else 1.0 / vocab)
    return (1.0 + np.array(q)) / 2.0
