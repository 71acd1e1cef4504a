"""The byte models' training loop, public for the studies that train them.

:func:`train_steps` is AdamW on next-byte cross-entropy over random windows (betas 0.9, 0.95, no
weight decay, gradients clipped to norm 1) and :func:`warmup_cosine` GPT-2 / nanoGPT's schedule:
the loop and schedule of :mod:`~posenc_core.book.studies.lm_study`, which keeps a private copy
until its results are next regenerated (its source key would change).
``tests/book/test_mixing_study.py`` checks that both train a model to the same weights.
Shapes: b = batch, s = window length, V = 256.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["train_steps", "warmup_cosine"]


def warmup_cosine(step: int, config: Any) -> float:
    """The learning rate at ``step``: linear warm-up over ``config.warmup`` steps to
    ``config.lr``, then a cosine to ``config.lr / 10`` at ``config.steps``."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    t = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def train_steps(
    model: torch.nn.Module,
    data: torch.Tensor,
    steps: int,
    batch: int,
    length: int,
    lr: Callable[[int], float],
    g: torch.Generator,
    device: str,
) -> list[float]:
    """Train ``model`` for ``steps`` steps on random windows of ``data``; return each step's loss.

    Args:
        model: int64 ``(b, s)`` -> logits ``(b, s, V)``; left in eval mode.
        data: int64 ``(n,)`` bytes; each step draws ``batch`` windows of ``length + 1`` bytes
            with ``g``.
        lr: step -> learning rate; device: where the windows go.
    """
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr(0), betas=(0.9, 0.95), weight_decay=0.0)
    losses = []
    for step in range(steps):
        start = torch.randint(len(data) - length - 1, (batch,), generator=g)
        w = data[start[:, None] + torch.arange(length + 1)].to(device)  # (b, s + 1)
        logits = model(w[:, :-1])  # (b, s, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1))
        for group in opt.param_groups:
            group["lr"] = lr(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    model.eval()
    return losses
