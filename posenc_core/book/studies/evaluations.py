"""Measurements of the trained language models that chapters 8, 8b and 9 report, computed once.

The bugs of chapters 8 and 8b (each against its correct counterpart), chapter 8b's base probe
(the loss inside L with rope_theta set to each of many values at load) and chapter 9's p-RoPE
ablations (frequency pairs left unrotated at inference): held-out losses per position over many
windows, for every seed, too slow for a chapter cell. :func:`run_evaluations` computes them
from the committed checkpoints and writes :data:`RESULTS_FILE` with the source keys of
:data:`CODE_MODULES`, the SHA-256 of each checkpoint and of the excerpt, and the settings;
:func:`is_stale` says when it no longer describes them. ``tests/book/test_evaluations.py``
recomputes a sample of the curves. Command line: ``python -m posenc_core.book.studies.evaluations``.
Shapes: S = seeds, P = positions of a window.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import pathlib
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from posenc_core.book import DATA, data_entry
from posenc_core.book.instruments import bugs as dbg
from posenc_core.book.instruments import frequency_use as fu
from posenc_core.book.studies import corpus, heldout, lm_study, provenance
from posenc_core.rope import RotaryEmbedding

__all__ = [
    "CODE_MODULES",
    "BUG_WINDOWS",
    "CACHE_WINDOWS",
    "ABLATIONS",
    "PROBE_BASES",
    "trained_models",
    "bug_curves",
    "base_probe",
    "ablation_curves",
    "run_evaluations",
    "load_results",
    "load_bug_curves",
    "load_base_probe",
    "load_ablation_curves",
    "is_stale",
    "main",
]

RESULTS_FILE = DATA / "evaluations.json"
"""Where ``make study`` writes the measurements (in :data:`posenc_core.book.DATA`)."""

CODE_MODULES = (
    "book.studies.evaluations",
    "book.instruments.bugs",
    "book.instruments.caches",
    "book.instruments.frequency_use",
    *lm_study.CODE_MODULES,
    "positions",
)
"""Modules whose code determines the measurements (names relative to ``posenc_core``)."""

TRAIN_LEN = 64
"""L, the training length of the committed models (``LMStudyConfig().train_len``)."""

BUG_WINDOWS = 128
"""Windows of the excerpt per bug measurement (chapter 8)."""

CACHE_WINDOWS = 32
"""Windows for the KV-cache bugs, which decode one token at a time."""

ABLATIONS: dict[str, tuple[int, ...]] = {
    "fastest pair": (0,),
    "two fastest": (0, 1),
    "four slowest (p-RoPE, p = 1/2)": (4, 5, 6, 7),
    "five slowest": (3, 4, 5, 6, 7),
}
"""The ablations of chapter 9, each a name and the frequency pairs it leaves unrotated (0 is
the fastest)."""

PROBE_BASES: tuple[float, ...] = tuple(
    sorted({round(10 ** (e / 4), 6) for e in range(8, 29)} | {500000.0})
)
"""The values of rope_theta the base probe reads each model with, 10**2 to 10**7 in quarter
decades and 500000."""

_DIGITS = 6  # losses (nats, about 1 to 6) are stored to 1e-6, far below the 3 decimals shown


def trained_models() -> dict[str, list]:
    """The committed models the bugs run on, by
    :attr:`~posenc_core.book.instruments.bugs.Bug.model`:
    ``"rope"`` (seeds 0, 1, 2), ``"rope-r8"`` (partial rotary, seeds 0, 1, 2),
    ``"rope-b500000"`` (trained at base 500000, seeds 0, 1, 2) and ``"learned"`` (seed 0)."""
    return {
        "rope": [lm_study.load_lm("rope", s) for s in (0, 1, 2)],
        "rope-r8": [lm_study.load_lm("rope", s, rotary_dim=8) for s in (0, 1, 2)],
        "rope-b500000": [lm_study.load_lm("rope", s, base=500000.0) for s in (0, 1, 2)],
        "learned": [lm_study.load_lm("learned", 0)],
    }


def bug_curves(
    models: Mapping[str, Sequence] | None = None, bugs: Sequence[str] | None = None
) -> dict[str, dict[str, np.ndarray]]:
    """Chapter 8's measurement: :func:`~posenc_core.book.instruments.bugs.bug_curves` of ``bugs``
    (default: every one) on the held-out excerpt, :data:`BUG_WINDOWS` windows
    (:data:`CACHE_WINDOWS` for the decoding bugs).

    Args:
        models: as :func:`trained_models` returns (None: load them).
        bugs: keys of :data:`~posenc_core.book.instruments.bugs.BUGS` (None: all, in order).

    Returns:
        key -> ``{"broken": (S, P), "correct": (S, P)}`` float64 arrays, nats.
    """
    models = trained_models() if models is None else models
    return dbg.bug_curves(
        list(dbg.BUGS) if bugs is None else list(bugs),
        models,
        corpus.heldout_excerpt(),
        train_len=TRAIN_LEN,
        max_windows=BUG_WINDOWS,
        cache_windows=CACHE_WINDOWS,
    )


def base_probe(
    models: Mapping[str, Sequence] | None = None, bases: Sequence[float] = PROBE_BASES
) -> dict[str, np.ndarray]:
    """Chapter 8b's probe: each RoPE model read with every base of ``bases`` at load, and its
    held-out loss inside the training length (the mean over positions [L/2, L) of every whole
    window of L bytes of the excerpt).

    Args:
        models: as :func:`trained_models` returns (None: load them); ``"rope"`` and
            ``"rope-b500000"`` are probed.
        bases: the values of rope_theta to try.

    Returns:
        ``"bases"`` -> float64 ``(n,)``, and each model name -> ``(S, n)`` float64, nats.
    """
    models = trained_models() if models is None else models
    text = corpus.heldout_excerpt()
    out = {"bases": np.asarray(bases, dtype=np.float64)}
    for name in ("rope", "rope-b500000"):
        rows = []
        for m in models[name]:
            row = []
            for b in bases:
                run = functools.partial(m, rotate=RotaryEmbedding(m.rope.head_dim, base=float(b)))
                curve = heldout.position_loss(run, text, TRAIN_LEN)  # every whole window
                row.append(curve[TRAIN_LEN // 2 :].mean())
            rows.append(row)
        out[name] = np.asarray(rows, dtype=np.float64)
    return out


def ablation_curves(
    rope: Sequence | None = None, ablations: Mapping[str, Sequence[int]] | None = None
) -> dict[str, np.ndarray]:
    """Chapter 9's ablation: the loss per position of the RoPE models on every whole
    ``8L`` window of the excerpt, with the pairs of each ablation left unrotated
    (:func:`~posenc_core.book.instruments.frequency_use.without_pairs`), and as trained
    (``"none"``).

    Args:
        rope: the RoPE models, one per seed (None: the committed seeds 0, 1, 2).
        ablations: name -> pairs (None: :data:`ABLATIONS`).

    Returns:
        ``"none"`` and each ablation's name -> ``(S, 8L)`` float64 array, nats.
    """
    rope = [lm_study.load_lm("rope", s) for s in (0, 1, 2)] if rope is None else rope
    ablations = ABLATIONS if ablations is None else ablations
    text, length = corpus.heldout_excerpt(), 8 * TRAIN_LEN

    def curves(pairs: Sequence[int]) -> np.ndarray:
        out = []
        for m in rope:
            run = functools.partial(m, rotate=fu.without_pairs(m, pairs, length))
            out.append(heldout.position_loss(run, text, length))  # every whole window
        return np.stack(out)

    return {"none": curves(()), **{name: curves(p) for name, p in ablations.items()}}


def _inputs() -> dict[str, Any]:
    """What the measurements read besides code: the checkpoints and the excerpt, by SHA-256."""
    study, folder = lm_study.load_results(), lm_study.RESULTS_FILE.parent
    where = f"{lm_study.RESULTS_FILE.name} checkpoints"
    return {
        "checkpoints": {
            k: data_entry(v, where=f"{where}[{k!r}]", folder=folder)[1]
            for k, v in sorted(study["checkpoints"].items())
        },
        "excerpt_sha256": hashlib.sha256(corpus.EXCERPT_FILE.read_bytes()).hexdigest(),
    }


def _settings() -> dict[str, Any]:
    return {
        "train_len": TRAIN_LEN,
        "bug_windows": BUG_WINDOWS,
        "cache_windows": CACHE_WINDOWS,
        "bugs": list(dbg.BUGS),
        "probe_bases": list(PROBE_BASES),
        "ablations": {k: list(v) for k, v in ABLATIONS.items()},
    }


def _rows(a: np.ndarray) -> list[list[float]]:
    return [[round(float(x), _DIGITS) for x in row] for row in a]


def run_evaluations(
    out: str | pathlib.Path | None = None, *, threads: int | None = 2
) -> dict[str, Any]:
    """Compute both measurements and write them (with their provenance) to ``out``.

    Args:
        out: the JSON file to write (None: the committed :data:`RESULTS_FILE`).
        threads: torch intra-op threads for the run (None: leave torch's setting), restored
            after.

    Returns:
        the results as written (curves as lists of rows, one per seed).
    """
    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        start = time.perf_counter()
        models = trained_models()
        bugs = bug_curves(models)
        bug_seconds = time.perf_counter() - start
        probe = base_probe(models)
        ablated = ablation_curves(models["rope"])
        seconds = time.perf_counter() - start
    finally:
        torch.set_num_threads(old)
    results = {
        "source_keys": provenance.source_keys(CODE_MODULES),
        "inputs": _inputs(),
        "settings": _settings(),
        "versions": provenance.library_versions(),
        "threads": threads if threads is not None else old,
        "seconds": {"bugs": round(bug_seconds, 1), "all": round(seconds, 1)},
        "bugs": {
            k: {part: _rows(c[part]) for part in ("broken", "correct")} for k, c in bugs.items()
        },
        "base_probe": {k: _rows(v) if v.ndim == 2 else v.tolist() for k, v in probe.items()},
        "ablations": {k: _rows(c) for k, c in ablated.items()},
    }
    out = pathlib.Path(RESULTS_FILE if out is None else out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, separators=(",", ":")) + "\n", encoding="utf-8")
    return results


def load_results(path: str | pathlib.Path | None = None) -> dict[str, Any]:
    """Read a file written by :func:`run_evaluations` (None: the committed
    :data:`RESULTS_FILE`)."""
    return json.loads(pathlib.Path(RESULTS_FILE if path is None else path).read_text("utf-8"))


def load_bug_curves(
    results: Mapping[str, Any] | str | pathlib.Path | None = None, *, part: int | None = None
) -> dict[str, dict[str, np.ndarray]]:
    """The bugs' curves as :func:`bug_curves` returns them, from the committed file.

    Args:
        results: loaded results, a path, or None (the committed :data:`RESULTS_FILE`).
        part: 1 (chapter 8's bugs) or 2 (chapter 8b's), by
            :data:`~posenc_core.book.instruments.bugs.PARTS`; None: every bug.

    Returns:
        key -> ``{"broken": (S, P), "correct": (S, P)}`` float64 arrays, in the order of
        :data:`~posenc_core.book.instruments.bugs.BUGS`.
    """
    if part is not None and part not in (1, 2):
        raise ValueError(f"part must be 1, 2 or None, got {part!r}")
    res = results if isinstance(results, Mapping) else load_results(results)
    return {
        k: {side: np.asarray(c[side], dtype=np.float64) for side in ("broken", "correct")}
        for k, c in res["bugs"].items()
        if part is None or dbg.PARTS.get(k) == part
    }


def load_base_probe(
    results: Mapping[str, Any] | str | pathlib.Path | None = None,
) -> dict[str, np.ndarray]:
    """Chapter 8b's probe as :func:`base_probe` returns it, from the committed file."""
    res = results if isinstance(results, Mapping) else load_results(results)
    return {k: np.asarray(v, dtype=np.float64) for k, v in res["base_probe"].items()}


def load_ablation_curves(
    results: Mapping[str, Any] | str | pathlib.Path | None = None,
) -> dict[str, np.ndarray]:
    """Chapter 9's curves as :func:`ablation_curves` returns them, from the committed file.

    Args:
        results: loaded results, a path, or None (the committed :data:`RESULTS_FILE`).

    Returns:
        ``"none"`` and each ablation's name -> ``(S, 8L)`` float64 array.
    """
    res = results if isinstance(results, Mapping) else load_results(results)
    return {k: np.asarray(c, dtype=np.float64) for k, c in res["ablations"].items()}


def is_stale(results: Mapping[str, Any]) -> list[str]:
    """Why a results file no longer describes the code, the checkpoints, the excerpt or the
    settings (empty list: it does)."""
    problems = []
    changed = provenance.changed_modules(results.get("source_keys", {}), CODE_MODULES)
    if changed:
        problems.append(f"code changed since the measurements ran (modules: {', '.join(changed)})")
    now = _inputs()
    if results.get("inputs", {}).get("checkpoints") != now["checkpoints"]:
        problems.append("the committed checkpoints changed (make study retrained them)")
    if results.get("inputs", {}).get("excerpt_sha256") != now["excerpt_sha256"]:
        problems.append("the held-out excerpt changed")
    if results.get("settings") != _settings():
        problems.append(
            "the settings (windows, bugs, probe bases, ablations) differ from the recorded ones"
        )
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: compute the measurements and write them."""
    p = argparse.ArgumentParser(
        prog="python -m posenc_core.book.studies.evaluations", description=__doc__.splitlines()[0]
    )
    p.add_argument("--out", default=None, help="results JSON to write (default: the committed one)")
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args(argv)
    res = run_evaluations(a.out, threads=a.threads)
    n_bugs, n_ablations = len(res["bugs"]), len(res["ablations"])
    print(
        f"Wrote {a.out or RESULTS_FILE}: {n_bugs} bugs, {n_ablations} ablation curves in "
        f"{res['seconds']['all']:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
