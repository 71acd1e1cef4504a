"""Reading the encoder study's results: runs, accuracy by position and band, training curves,
the learned tables' geometry, from the dict of
:func:`~posenc_core.book.studies.encoder_study.load_results`, so chapter 5 needs no training.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from posenc_core import _validation as check
from posenc_core.book.studies.encoder_study import StudyConfig, loss_blocks

__all__ = [
    "runs_for",
    "position_accuracy",
    "bands",
    "band_accuracy",
    "training_curves",
    "accuracy_curves",
    "geometry_summary",
]


def runs_for(
    results: Mapping[str, Any], setting: str, task: str, scheme: str
) -> list[dict[str, Any]]:
    """The finished runs of one (setting, task, scheme), one per seed, sorted by seed.

    Args:
        results: a :func:`~posenc_core.book.studies.encoder_study.run_encoder_study` result, or
            one read by :func:`~posenc_core.book.studies.encoder_study.load_results`.
        setting, task, scheme: e.g. ``"encoder"``, ``"first"``, ``"learned"``.

    Returns:
        the run dicts of ``results["runs"]``, in increasing order of ``seed``.

    Raises:
        KeyError: no such run; the message lists the (setting, task, scheme) triples there are.
    """
    want = (setting, task, scheme)
    runs = [r for r in results["runs"].values() if (r["setting"], r["task"], r["scheme"]) == want]
    if not runs:
        held = sorted({(r["setting"], r["task"], r["scheme"]) for r in results["runs"].values()})
        raise KeyError(
            f"no finished runs for setting={setting!r}, task={task!r}, scheme={scheme!r}; the "
            "results hold " + (", ".join("/".join(h) for h in held) or "no runs")
        )
    return sorted(runs, key=lambda r: r["seed"])


def position_accuracy(
    results: Mapping[str, Any],
    setting: str,
    task: str,
    scheme: str,
    length: int | None = None,
    *,
    windowed: bool = False,
) -> np.ndarray:
    """Accuracy at every position of sequences of one evaluation length, one row per seed.

    Args:
        results: a study result.
        setting, task, scheme: which runs.
        length: an evaluation length
            (:attr:`~posenc_core.book.studies.encoder_study.StudyConfig.eval_lengths`); None: the
            longest.
        windowed: read the same models on the same sequences with attention limited to
            ``|i - j| < L`` (the runs' ``window_acc``) instead of unbanded (``acc``).

    Returns:
        float64 array ``(S, length)``.
    """
    runs = runs_for(results, setting, task, scheme)
    field = "window_acc" if check.boolean("windowed", windowed) else "acc"
    if any(field not in r for r in runs):
        raise KeyError(f"the runs of {setting}/{task}/{scheme} hold no {field!r}")
    key = str(length) if length is not None else max(runs[0][field], key=int)
    if key not in runs[0][field]:
        raise KeyError(f"no evaluation at length {length}; there are {sorted(runs[0][field])}")
    return np.array([r[field][key] for r in runs], dtype=float)


def bands(config: StudyConfig) -> list[tuple[int, int]]:
    """Position bands for summaries: [0, L), [L, 2L), [2L, 4L), ... (inside L never shares a
    band with beyond L)."""
    if not isinstance(config, StudyConfig):
        raise TypeError(f"config must be a StudyConfig, got {type(config).__name__}")
    edges = [0, *config.eval_lengths]
    return list(zip(edges[:-1], edges[1:]))


def band_accuracy(
    results: Mapping[str, Any],
    setting: str,
    task: str,
    scheme: str,
    lo: int,
    hi: int,
    length: int | None = None,
    *,
    windowed: bool = False,
) -> tuple[float, float]:
    """Mean accuracy over positions lo .. hi - 1 of sequences of ``length`` (None: the
    longest), then mean and population standard deviation over seeds (``windowed``: as in
    :func:`position_accuracy`).

    Returns:
        ``(mean, std)``.
    """
    a = position_accuracy(results, setting, task, scheme, length, windowed=windowed)  # (S, n)
    if not 0 <= lo < hi <= a.shape[1]:
        raise ValueError(f"need 0 <= lo < hi <= {a.shape[1]}, got lo={lo}, hi={hi}")
    per_seed = a[:, lo:hi].mean(1)
    return float(per_seed.mean()), float(per_seed.std())


def training_curves(
    results: Mapping[str, Any], setting: str, task: str, scheme: str
) -> tuple[np.ndarray, np.ndarray]:
    """The (block-averaged) loss curves of one (setting, task, scheme)'s seeds.

    Works on a :func:`~posenc_core.book.studies.encoder_study.run_encoder_study` result (per-step
    curves, averaged over blocks of ``log_every``
    / 10 steps, at least 1) and on one read by
    :func:`~posenc_core.book.studies.encoder_study.load_results` (already stored as blocks).

    Returns:
        ``(steps, losses)``: float64 arrays ``(blocks,)`` and ``(S, blocks)``.
    """
    runs = runs_for(results, setting, task, scheme)
    every = max(1, results["config"]["log_every"] // 10)
    blocks = [
        r["curve"] if isinstance(r["curve"][0], list) else loss_blocks(r["curve"], every)
        for r in runs
    ]
    steps = np.array([b[0] for b in blocks[0]], dtype=float)
    return steps, np.array([[b[1] for b in bl] for bl in blocks], dtype=float)


def accuracy_curves(
    results: Mapping[str, Any], setting: str, task: str, scheme: str
) -> tuple[np.ndarray, np.ndarray]:
    """In-range accuracy (length L) during training, one row per seed.

    Returns:
        ``(steps, accuracy)``: float64 arrays ``(points,)`` and ``(S, points)``.
    """
    runs = runs_for(results, setting, task, scheme)
    steps = np.array([p[0] for p in runs[0]["acc_curve"]], dtype=float)
    return steps, np.array([[p[1] for p in r["acc_curve"]] for r in runs], dtype=float)


def geometry_summary(
    results: Mapping[str, Any], setting: str, task: str, which: str = "geometry"
) -> dict[str, float]:
    """Mean and spread over seeds of the learned table's geometry (see
    :func:`~posenc_core.book.studies.encoder_study.table_summary`).

    Args:
        results: a study result.
        setting, task: which runs (scheme ``"learned"``).
        which: ``"geometry"`` (rows 0 .. L-1 of the trained table), ``"geometry_init"`` (the
            same rows at initialisation) or ``"geometry_update"`` (the change training made,
            trained minus initial, in those rows).

    Returns:
        dict with ``neighbour_similarity`` and ``neighbour_is_nearest`` (means over seeds) and
        their population standard deviations ``neighbour_similarity_std``,
        ``neighbour_is_nearest_std``.
    """
    runs = runs_for(results, setting, task, "learned")
    if any(which not in r for r in runs):
        raise KeyError(f"no {which!r} in the runs of setting={setting!r}, task={task!r}")
    out = {}
    for name in ("neighbour_similarity", "neighbour_is_nearest"):
        vals = [r[which][name] for r in runs]
        out[name], out[name + "_std"] = float(np.mean(vals)), float(np.std(vals))
    return out
