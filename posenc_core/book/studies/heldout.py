"""Held-out loss by position: the windows every measurement of the byte models cuts from the
text, and the mean loss at each position of them.

:func:`~posenc_core.book.studies.lm_study.per_position_loss` (a trained
:class:`~posenc_core.book.models.byte_lm.ByteLM`) and the instruments of chapters 8 and 9
(any function from tokens to logits: a model with a bug, a model with pairs ablated) measure
through :func:`position_loss`, so that their curves are comparable position by position.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from posenc_core import _validation as check

__all__ = ["position_loss", "windows"]

VOCAB = 256  # bytes


def windows(data: torch.Tensor, length: int, *, max_windows: int | None = None) -> torch.Tensor:
    """Consecutive non-overlapping windows of ``length + 1`` bytes of ``data``:
    ``(n, length + 1)``.

    The last byte of a window is only a target, so position t of a window is the model with
    t + 1 bytes of context at absolute position t.

    Args:
        data: int64 ``(n,)`` bytes, e.g. :func:`~posenc_core.book.studies.corpus.heldout_excerpt`.
        length: window length P.
        max_windows: keep only the first ones (None: every whole window).

    Raises:
        ValueError: ``data`` holds no whole window.
    """
    check.tensor("data", data, min_dim=1)
    length = check.positive_int("length", length)
    n = (len(data) - 1) // length
    if max_windows is not None:
        n = min(n, check.positive_int("max_windows", max_windows))
    if n < 1:
        raise ValueError(
            f"data of {len(data)} bytes holds no window of length + 1 = {length + 1} bytes"
        )
    return data[(torch.arange(n) * length)[:, None] + torch.arange(length + 1)]


def position_loss(
    logits_of: Callable[[torch.Tensor], torch.Tensor],
    data: torch.Tensor,
    length: int,
    *,
    batch: int = 64,
    max_windows: int | None = None,
) -> np.ndarray:
    """Mean next-byte cross-entropy at every position of the :func:`windows` of ``data``.

    Args:
        logits_of: ``(b, s)`` int64 tokens (on the CPU) -> ``(b, s, 256)`` logits on any device
            (called under ``torch.no_grad()``).
        data: int64 ``(n,)`` bytes.
        length: window length P.
        batch: windows per call.
        max_windows: use only the first ones (None: every whole window).

    Returns:
        float64 ``(P,)``, nats, the mean over windows.
    """
    if not callable(logits_of):
        raise TypeError(f"logits_of must be callable, got {logits_of!r}")
    w = windows(data, length, max_windows=max_windows)  # (n, P + 1)
    batch = check.positive_int("batch", batch)
    total = torch.zeros(length, dtype=torch.float64)
    with torch.no_grad():
        for i in range(0, len(w), batch):
            chunk = w[i : i + batch]
            logits = logits_of(chunk[:, :-1])  # (b, P, V)
            if logits.shape != (*chunk[:, :-1].shape, VOCAB):
                raise ValueError(
                    f"logits_of must return (b, s, {VOCAB}), got {tuple(logits.shape)} for "
                    f"tokens of shape {tuple(chunk[:, :-1].shape)}"
                )
            target = chunk[:, 1:].to(logits.device)
            nll = F.cross_entropy(logits.transpose(1, 2), target, reduction="none")  # (b, P)
            total += nll.double().sum(0).cpu()
    return (total / len(w)).numpy()
