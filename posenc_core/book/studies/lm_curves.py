"""Reading the language-model study's curves: held-out loss by position, per seed.

Each ``*_curves`` function takes the dict of
:func:`~posenc_core.book.studies.lm_study.load_results` and gives an ``(S, P)`` array, one row
per seed, of the loss at every position of the study's 8L windows; :func:`bucket_means` and
:func:`first_loss_rise` summarise a curve, :func:`attention_by_distance` and
:func:`attention_beyond` read where each run's attention went.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from posenc_core import _validation as check

__all__ = [
    "bucket_edges",
    "bucket_means",
    "first_loss_rise",
    "scheme_curves",
    "partial_curves",
    "base_curves",
    "xpos_sweep_curves",
    "attention_by_distance",
    "attention_beyond",
    "method_curves",
    "finetune_curves",
]


def bucket_edges(train_len: int, eval_len: int, *, kind: str = "coarse") -> list[int]:
    """Position buckets for summaries; inside-L and beyond-L positions never share one.

    Args:
        train_len: L.
        eval_len: P, the last edge.
        kind: ``"coarse"``: [0, L), [L, 2L), [2L, 4L), ... doubling up to P; ``"log"``:
            [0, 1), [1, 2), [2, 4), ... powers of two (L must be one), up to P.

    Returns:
        increasing edges ``[0, ..., P]``; bucket k is [edges[k], edges[k+1]).
    """
    train_len, eval_len = (
        check.positive_int("train_len", train_len),
        check.positive_int("eval_len", eval_len),
    )
    check.choice("kind", kind, ("coarse", "log"))
    if eval_len < train_len:
        raise ValueError(f"eval_len={eval_len} must be >= train_len={train_len}")
    if kind == "log" and train_len & (train_len - 1):
        raise ValueError(f"kind='log' needs train_len a power of two, got {train_len}")
    edges, e = [0], train_len if kind == "coarse" else 1
    while e < eval_len:
        edges.append(e)
        e *= 2
    return edges + [eval_len]


def bucket_means(curve: np.ndarray | Sequence[float], edges: Sequence[int]) -> np.ndarray:
    """Mean of a per-position curve (or of each row of a stack of them) over each bucket.

    Args:
        curve: ``(P,)`` or ``(S, P)`` per-position values.
        edges: increasing bucket edges within 0 .. P (see :func:`bucket_edges`).

    Returns:
        ``(B,)`` or ``(S, B)``: the mean over positions edges[k] .. edges[k+1] - 1.
    """
    a = np.asarray(curve, dtype=float)
    edges = [int(e) for e in edges]
    if a.ndim not in (1, 2) or a.shape[-1] < 1:
        raise ValueError(f"curve must have shape (P,) or (S, P), got {a.shape}")
    if edges != sorted(set(edges)) or edges[0] < 0 or edges[-1] > a.shape[-1] or len(edges) < 2:
        raise ValueError(
            f"edges must be at least two strictly increasing positions in 0 .. {a.shape[-1]}, "
            f"got {edges}"
        )
    return np.stack([a[..., lo:hi].mean(-1) for lo, hi in zip(edges[:-1], edges[1:])], -1)


def first_loss_rise(
    curve: np.ndarray | Sequence[float],
    train_len: int,
    *,
    rise: float = 0.10,
    window: int | None = None,
) -> int | None:
    """The first position where the loss rises ``rise`` (10%) above its in-range value.

    The in-range value is the mean over [L/2, L) (the first positions lack context); the result
    is the first p >= L/2 with mean(curve[p : p + window]) > (1 + rise) * that value.

    Args:
        curve: ``(P,)`` per-position loss (P >= L); train_len: L.
        rise: relative rise, > 0; window: positions averaged per test (None: max(1, L // 8)).

    Returns:
        that position, or None if the curve never rises that far (within P - window).
    """
    a = np.asarray(curve, dtype=float)
    train_len = check.positive_int("train_len", train_len)
    rise = check.real_number("rise", rise)
    if a.ndim != 1 or a.shape[0] < train_len:
        raise ValueError(f"curve must have shape (P,) with P >= L={train_len}, got {a.shape}")
    if not rise > 0:
        raise ValueError(f"rise must be > 0, got {rise}")
    w = max(1, train_len // 8) if window is None else check.positive_int("window", window)
    lo = train_len // 2
    level = (1 + rise) * a[lo:train_len].mean()
    means = np.convolve(a, np.ones(w) / w, mode="valid")  # means[p] = mean(a[p : p + w])
    above = np.nonzero(means[lo:] > level)[0]
    return None if above.size == 0 else int(lo + above[0])


def _stack(entries: Sequence[Mapping[str, Any]], what: str) -> np.ndarray:
    if not entries:
        raise KeyError(f"the results hold no {what}")
    return np.array([e["loss"] for e in sorted(entries, key=lambda e: e["seed"])], dtype=float)


def scheme_curves(results: Mapping[str, Any], scheme: str) -> np.ndarray:
    """Per-position held-out loss of one scheme, one row per seed (sorted by seed).

    Returns:
        ``(S, P)`` float64 array.
    """
    runs = [r for r in results["runs"].values() if r["scheme"] == scheme]
    return _stack(runs, f"run of scheme {scheme!r}")


def partial_curves(results: Mapping[str, Any], rotary_dim: int) -> np.ndarray:
    """Per-position loss of the partial-rotary RoPE runs rotating ``rotary_dim`` dims per head.

    Returns:
        ``(S, P)`` float64 array (one row per seed).
    """
    runs = [r for r in results.get("partial", {}).values() if r["rotary_dim"] == rotary_dim]
    return _stack(runs, f"partial-rotary run with rotary_dim={rotary_dim}")


def base_curves(results: Mapping[str, Any], base: float) -> np.ndarray:
    """Per-position loss of the RoPE runs trained at another ``base`` (the study's
    ``rope_bases``).

    Returns:
        ``(S, P)`` float64 array (one row per seed).
    """
    b = check.real_number("base", base)
    runs = [r for r in results.get("bases", {}).values() if r["base"] == b]
    return _stack(runs, f"RoPE run trained at base={b:g}")


def _sweep_runs(results: Mapping[str, Any], scale_base: float) -> list[Mapping[str, Any]]:
    b = check.real_number("scale_base", scale_base)
    runs = [r for r in results.get("xpos_sweep", {}).values() if r["scale_base"] == b]
    if not runs:
        there = sorted({r["scale_base"] for r in results.get("xpos_sweep", {}).values()})
        raise KeyError(f"the results hold no xPos run with scale_base={b}; there are {there}")
    return runs


def xpos_sweep_curves(results: Mapping[str, Any], scale_base: float) -> np.ndarray:
    """Per-position loss of the xPos runs of ``xpos_sweep`` with B = ``scale_base`` (the main
    xPos runs, B = L/2, are :func:`scheme_curves` of ``"xpos"``).

    Returns:
        ``(S, P)`` float64 array (one row per seed).
    """
    return _stack(_sweep_runs(results, scale_base), f"xPos run with scale_base={scale_base}")


def attention_by_distance(
    results: Mapping[str, Any],
    scheme: str,
    *,
    scale_base: float | None = None,
    queries: str = "far",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the attention of one scheme's runs went, seed by seed (see
    :func:`~posenc_core.book.studies.heldout.attention_by_distance`).

    Args:
        results: the study's results.
        scheme: a scheme of the runs; with ``scale_base``, ``"xpos"`` of the sweep.
        scale_base: read the ``xpos_sweep`` runs with this B instead of the scheme's runs.
        queries: ``"in"`` (queries in [L/2, L)) or ``"far"`` ([4L, 8L)).

    Returns:
        ``(edges, share, mean)``: int ``(K + 1,)`` distance edges; float64 ``(S, layers, K)``, the
        share of attention weight at distances ``edges[k] <= i - j < edges[k + 1]``; float64
        ``(S, layers)``, the mean distance.
    """
    check.choice("queries", queries, ("in", "far"))
    if scale_base is None:
        runs = [r for r in results["runs"].values() if r["scheme"] == scheme]
    else:
        check.choice("scheme", scheme, ("xpos",))
        runs = _sweep_runs(results, scale_base)
    runs = sorted(runs, key=lambda r: r["seed"])
    if not runs or any("attention" not in r for r in runs):
        raise KeyError(f"the results hold no attention record for scheme {scheme!r}")
    edges = np.array(runs[0]["attention"]["edges"])
    share = np.array([r["attention"][queries]["mass"] for r in runs], dtype=float)
    mean = np.array([r["attention"][queries]["mean"] for r in runs], dtype=float)
    return edges, share, mean


def attention_beyond(
    results: Mapping[str, Any],
    scheme: str,
    *,
    scale_base: float | None = None,
    queries: str = "far",
) -> tuple[np.ndarray, np.ndarray]:
    """The share of attention at distance d or more, for every distance edge d, seed by seed
    (the mean over layers of :func:`attention_by_distance`'s shares, summed from the far end).

    Args:
        results, scheme, scale_base, queries: as in :func:`attention_by_distance`.

    Returns:
        ``(d, share)``: int ``(K,)`` distances (the lower edges, from 0) and float64 ``(S, K)``;
        ``share[:, 0]`` is 1 up to the stored rounding.
    """
    edges, share, _ = attention_by_distance(results, scheme, scale_base=scale_base, queries=queries)
    return edges[:-1], share.mean(1)[:, ::-1].cumsum(1)[:, ::-1]


def method_curves(results: Mapping[str, Any], method: str, factor: int) -> np.ndarray:
    """Per-position loss of the trained RoPE models under one method and factor, no training.

    Returns:
        ``(S, P)`` float64 array (one row per seed).
    """
    runs = [
        r for r in results["scaling"].values() if r["method"] == method and r["factor"] == factor
    ]
    return _stack(runs, f"scaling run of method {method!r} at factor {factor}")


def finetune_curves(results: Mapping[str, Any], method: str, steps: int) -> np.ndarray:
    """Per-position loss after ``steps`` fine-tune steps with ``method``.

    Returns:
        ``(S, P)`` float64 array (one row per seed).
    """
    runs = [
        {"seed": r["seed"], "loss": r["loss_by_step"][str(steps)]}
        for r in results["finetune"].values()
        if r["method"] == method and str(steps) in r["loss_by_step"]
    ]
    return _stack(runs, f"fine-tune of method {method!r} after {steps} steps")
