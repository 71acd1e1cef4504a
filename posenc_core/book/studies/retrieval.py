"""The retrieval probe: the loss on a span of held-out text that already occurred d bytes earlier.

A model that finds the first copy can predict the second almost for free; one that cannot reach
back d bytes, or cannot tell where its keys are, predicts the second copy as ordinary text. The
probe sets the two side by side on the same bytes at the same positions, the measure that PI's
passkey test and RULER's needle tasks make with words (Chen et al. 2023; Hsieh et al. 2024):

- ``copy``: in a window of ``length`` held-out bytes, the last ``span`` bytes are replaced by a
  span cut from elsewhere in the text, and the same span is also written ``distance`` bytes
  earlier (the copies start ``distance`` bytes apart);
- ``control``: the same window with the last span only (no earlier copy).

Both score the span's bytes after its first (``span - 1`` predictions: the first byte of a copy
cannot be told from the text before it), so ``control - copy`` is what finding the first copy is
worth, in nats per byte. ``tests/book/test_retrieval.py`` checks :func:`repeat_probe` against a
direct count with a hand-written copying model.
Shapes: n = samples, P = ``length``, m = ``span``, V = 256.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from posenc_core import _validation as check

__all__ = ["probe_sequences", "repeat_probe"]


def probe_sequences(
    data: torch.Tensor, *, length: int, distance: int, span: int, samples: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The probe's inputs: ``(copy, control)``, each int64 ``(samples, length)``.

    Window j is ``data[j * length : (j + 1) * length]``; its span is the ``span`` bytes that
    start at ``(samples + j) * length`` (text none of the windows holds). ``copy`` holds the span
    at ``length - span - distance`` and at ``length - span``; ``control`` at ``length - span``
    only.

    Args:
        data: int64 ``(N,)`` bytes, at least ``2 * samples * length`` of them.
        length: P, the window length; distance: d >= 1, the bytes between the starts of the
            copies, at most ``length - 2 * span`` ... ``length - span`` (the first copy must fit);
        span: m >= 2; samples: n >= 1 windows.

    Raises:
        ValueError: too little data, or a distance or span the window cannot hold.
    """
    check.tensor("data", data, min_dim=1)
    length = check.positive_int("length", length)
    span = check.positive_int("span", span)
    samples = check.positive_int("samples", samples)
    distance = check.positive_int("distance", distance)
    if span < 2:
        raise ValueError(f"span must be >= 2 (its first byte is not scored), got {span}")
    if distance < span or distance > length - span:
        raise ValueError(
            f"distance must be from span={span} (copies side by side) to length - span = "
            f"{length - span}, got {distance}"
        )
    if len(data) < 2 * samples * length:
        raise ValueError(
            f"data holds {len(data)} bytes; {samples} samples of length {length} need "
            f"{2 * samples * length}"
        )
    rows = torch.arange(samples)[:, None]
    base = data[rows * length + torch.arange(length)]  # (n, P)
    spans = data[(samples + rows) * length + torch.arange(span)]  # (n, m)
    control = base.clone()
    control[:, length - span :] = spans
    copy = control.clone()
    first = length - span - distance
    copy[:, first : first + span] = spans
    return copy, control


def repeat_probe(
    logits_of: Callable[[torch.Tensor], torch.Tensor],
    data: torch.Tensor,
    *,
    length: int,
    distances: Sequence[int],
    span: int,
    samples: int,
    batch: int = 32,
) -> dict[str, dict[str, float]]:
    """Mean loss on the second copy and on the control, for each distance.

    Args:
        logits_of: int64 ``(b, P)`` -> logits ``(b, P, 256)`` (a model under ``no_grad``).
        data, length, span, samples: as :func:`probe_sequences`; distances: the values of d.
        batch: sequences per call of ``logits_of``.

    Returns:
        ``{str(d): {"copy": nats per byte, "control": nats per byte}}``, each the mean over the
        ``samples * (span - 1)`` scored bytes.
    """
    if not callable(logits_of):
        raise TypeError(f"logits_of must be callable, got {logits_of!r}")
    batch = check.positive_int("batch", batch)
    out = {}
    for d in distances:
        copy, control = probe_sequences(data, length=length, distance=d, span=span, samples=samples)
        out[str(int(d))] = {
            "copy": _span_loss(logits_of, copy, span, batch),
            "control": _span_loss(logits_of, control, span, batch),
        }
    return out


def _span_loss(
    logits_of: Callable[[torch.Tensor], torch.Tensor], seqs: torch.Tensor, span: int, batch: int
) -> float:
    """Mean cross-entropy of bytes P - m + 1 .. P - 1 of every sequence."""
    total, count = 0.0, 0
    length = seqs.shape[1]
    for start in range(0, len(seqs), batch):
        x = seqs[start : start + batch]
        with torch.no_grad():
            logits = logits_of(x)[:, length - span : length - 1].float()  # (b, m - 1, V)
        target = x[:, length - span + 1 :].to(logits.device)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                               reduction="sum")  # fmt: skip
        total += float(loss)
        count += target.numel()
    return float(np.float64(total) / count)
