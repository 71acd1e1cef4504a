"""Reading the mixing study's results for chapter 10: curves and probe values per seed.

Every function takes the results dict (:func:`~posenc_core.book.studies.mixing_study.load_results`)
and returns arrays with one row per seed, in seed order, so that paired differences (a layout
minus the reference, a bug minus its correct model, with the same seed) are a subtraction.
``tests/book/test_mixing_results.py`` checks them on a hand-made dict.
Shapes: S = seeds, P = 8L positions, D = probe distances.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["GROUPS", "distances", "entries", "gain", "loss", "span_mean"]

GROUPS = ("runs", "bugs", "scaling", "methods")
"""The result groups whose entries carry a loss curve and a probe."""


def entries(results: Mapping[str, Any], group: str, **match: Any) -> list[Mapping[str, Any]]:
    """The entries of ``results[group]`` whose fields equal ``match``, in seed order.

    Raises:
        ValueError: an unknown group, or no entry matches (the message lists the keys there are).
    """
    if group not in GROUPS:
        raise ValueError(f"group must be one of {', '.join(GROUPS)}, got {group!r}")
    found = [e for e in results[group].values() if all(e.get(k) == v for k, v in match.items())]
    if not found:
        raise ValueError(
            f"no entry of {group} has {match}; keys there: {', '.join(sorted(results[group]))}"
        )
    return sorted(found, key=lambda e: e["seed"])


def _part(entry: Mapping[str, Any], secondary: bool) -> Mapping[str, Any]:
    return entry["secondary"] if secondary else entry


def loss(found: list[Mapping[str, Any]], *, secondary: bool = False) -> np.ndarray:
    """``(S, P)`` loss per position (``secondary``: a trained run's measure on the windows the
    bugs and the scaling are measured on)."""
    return np.array([_part(e, secondary)["loss"] for e in found], dtype=np.float64)


def distances(results: Mapping[str, Any]) -> list[int]:
    """The probe's distances d, in bytes, as the study measured them."""
    return [int(d) for d in results["config"]["probe_distances"]]


def gain(
    found: list[Mapping[str, Any]], *, secondary: bool = False, what: str = "gain"
) -> np.ndarray:
    """``(S, D)`` probe values per distance: ``"gain"`` = control - copy (nats per byte saved by
    the first copy), ``"copy"`` or ``"control"``."""
    if what not in ("gain", "copy", "control"):
        raise ValueError(f"what must be 'gain', 'copy' or 'control', got {what!r}")

    def value(p: Mapping[str, float]) -> float:
        return p["control"] - p["copy"] if what == "gain" else p[what]

    rows = []
    for e in found:
        probe = _part(e, secondary)["probe"]
        rows.append([value(probe[d]) for d in sorted(probe, key=int)])
    return np.array(rows, dtype=np.float64)


def span_mean(curves: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``(S,)``: each seed's mean over positions ``lo .. hi - 1``."""
    if not 0 <= lo < hi <= curves.shape[-1]:
        raise ValueError(f"need 0 <= lo < hi <= {curves.shape[-1]}, got lo={lo}, hi={hi}")
    return curves[:, lo:hi].mean(axis=1)
