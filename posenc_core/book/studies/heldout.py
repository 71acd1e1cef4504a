"""Held-out loss by position: the windows every measurement of the byte models cuts from the
text, the mean loss at each of their positions (:func:`position_loss`, shared by the study and
the instruments so their curves compare position by position) and how far back a model attends
(:func:`attention_by_distance`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from posenc_core import _validation as check

__all__ = [
    "ATTENTION_WINDOWS",
    "attention_by_distance",
    "attention_record",
    "position_loss",
    "windows",
]

VOCAB = 256  # bytes
ATTENTION_WINDOWS = 16
"""Held-out windows on which :func:`attention_record` measures a model's attention."""


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


def attention_by_distance(
    weights_of: Callable[[torch.Tensor], list[torch.Tensor]],
    data: torch.Tensor,
    length: int,
    queries: tuple[int, int],
    edges: list[int] | tuple[int, ...],
    *,
    batch: int = 4,
    max_windows: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """How far back a model attends: the share of attention weight at each band of distance i - j.

    On the :func:`windows` of ``data``, each layer's weights are averaged over windows, heads and
    the query positions ``lo .. hi - 1``.

    Args:
        weights_of: ``(b, s)`` int64 tokens -> one ``(b, h, s, s)`` tensor of causal attention
            weights per layer, e.g. :meth:`ByteLM.attention_weights
            <posenc_core.book.models.byte_lm.ByteLM.attention_weights>`.
        data: int64 ``(n,)`` bytes; length: window length P.
        queries: ``(lo, hi)`` with 0 <= lo < hi <= P.
        edges: increasing distances from 0 to ``hi`` or beyond; band k is
            ``edges[k] <= i - j < edges[k + 1]``.
        batch: windows per call; max_windows: use only the first ones (None: all).

    Returns:
        ``(mass, mean)``: float64 ``(layers, len(edges) - 1)``, the mean share of weight in each
        band (rows sum to 1), and ``(layers,)``, the mean distance sum_j w_ij (i - j).
    """
    if not callable(weights_of):
        raise TypeError(f"weights_of must be callable, got {weights_of!r}")
    length = check.positive_int("length", length)
    if (
        not isinstance(queries, (tuple, list))
        or len(queries) != 2
        or not all(isinstance(q, int) and not isinstance(q, bool) for q in queries)
        or not 0 <= queries[0] < queries[1] <= length
    ):
        raise ValueError(f"queries must be (lo, hi) with 0 <= lo < hi <= {length}, got {queries!r}")
    lo, hi = queries
    e = [check.non_negative_int("edges", x) for x in edges]
    if len(e) < 2 or e[0] != 0 or any(b <= a for a, b in zip(e, e[1:])) or e[-1] < hi:
        raise ValueError(f"edges must increase from 0 to at least hi = {hi}, got {list(edges)!r}")
    w = windows(data, length, max_windows=max_windows)[:, :-1]  # (n, P)
    batch = check.positive_int("batch", batch)
    i = torch.arange(lo, hi, dtype=torch.float64)[:, None]  # (q, 1)
    dist = i - torch.arange(length, dtype=torch.float64)[None, :]  # (q, P)
    band = torch.bucketize(dist.clamp_min(0), torch.tensor(e[1:], dtype=torch.float64), right=True)
    onehot = F.one_hot(band, len(e) - 1).double() * (dist >= 0)[..., None]  # (q, P, bands)
    mass, mean = None, None
    with torch.no_grad():
        for start in range(0, len(w), batch):
            layers = weights_of(w[start : start + batch])
            rows = torch.stack([x[..., lo:hi, :].double().cpu() for x in layers])  # (l,b,h,q,P)
            m = torch.einsum("lbhqp,qpk->lk", rows, onehot)
            d = torch.einsum("lbhqp,qp->l", rows, dist.clamp_min(0))
            mass, mean = (m, d) if mass is None else (mass + m, mean + d)
    count = len(w) * rows.shape[2] * (hi - lo)
    return (mass / count).numpy(), (mean / count).numpy()


def attention_record(
    weights_of: Callable[[torch.Tensor], list[torch.Tensor]],
    data: torch.Tensor,
    length: int,
    bands: dict[str, tuple[int, int]],
) -> dict[str, object]:
    """What the language-model study stores of a model's attention: on the first
    :data:`ATTENTION_WINDOWS` windows of ``length`` P, at the distance edges 0, 1, 2, 4, ..., P,
    for each named band of query positions, :func:`attention_by_distance`'s shares per band
    and mean distances, per layer (lists, for JSON)."""
    length = check.positive_int("length", length)
    edges = sorted({0, *(2**i for i in range(length.bit_length())), length})
    record: dict[str, object] = {"edges": edges, "windows": ATTENTION_WINDOWS}
    for name, queries in bands.items():
        mass, mean = attention_by_distance(
            weights_of, data, length, queries, edges, max_windows=ATTENTION_WINDOWS
        )
        record[name] = {"queries": list(queries), "mass": mass.tolist(), "mean": mean.tolist()}
    return record
