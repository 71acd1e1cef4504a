"""Chapter 7c's long-context methods judged twice: by loss beyond L and by the retrieval probe.

The language-model study (:mod:`~posenc_core.book.studies.lm_study`) measured the held-out loss
per position of its 2-layer RoPE byte models under PI, NTK-aware, dynamic NTK, YaRN and Llama
3.1 at factors 4 and 8 (and PI and YaRN fine-tuned for 200 steps at 4); the mixing study
(:mod:`~posenc_core.book.studies.mixing_study`, its ``"methods"`` entries) ran the retrieval
probe of :mod:`~posenc_core.book.studies.retrieval` on the same models. This module sets the two
side by side, one row per method, factor and seed (:func:`method_table`), and ranks the methods
both ways (:func:`rankings`): where the rankings disagree, loss alone would have picked another
method. Plain Python on the two results dicts; no model runs here.

- loss beyond L: the mean of the held-out loss per position over positions L .. P - 1 (P = 8L),
  every window of the study;
- retrieval at distance d: control - copy, in nats per byte (what finding the first copy of a
  span d bytes back is worth); its summary, the mean over the probe's distances d >= L.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["MethodRow", "Ranking", "method_table", "seed_means", "points", "rankings", "seed_swaps"]

_TIE = 1e-9  # nats per byte: closer than this is a tie (the results are rounded to 1e-4)


@dataclass(frozen=True)
class MethodRow:
    """One method at one factor on one seed's model, measured both ways.

    Attributes:
        method: ``"none"`` (factor 1), a method of ``lm_study.METHODS``, ``"finetuned-pi"``
            or ``"finetuned-yarn"`` (200 steps at factor 4).
        factor: the factor s.
        seed: the seed of the trained model.
        loss_beyond: mean held-out loss (nats per byte) over positions L .. 8L - 1.
        gain: ``{d: control - copy}`` at each probe distance d (nats per byte).
        copy: ``{d: loss on the second copy}``.
        retrieval: mean of ``gain`` over the distances d >= L.
    """

    method: str
    factor: int
    seed: int
    loss_beyond: float
    gain: dict[int, float]
    copy: dict[int, float]
    retrieval: float


@dataclass(frozen=True)
class Ranking:
    """The methods of one factor ranked by loss beyond L and by retrieval (best first).

    Attributes:
        by_loss: method names, lowest loss beyond L first.
        by_retrieval: method names, largest retrieval (control - copy over d >= L) first.
        tau: Kendall's tau-a of the two orders, from -1 (reversed) to 1 (the same): pairs in
            the same order minus pairs swapped, over all pairs (a tie counts as neither).
        swaps: the pairs the two orders put the other way round, each ``(a, b, dloss,
            dretrieval)`` with ``a`` before ``b`` by loss: dloss = loss(b) - loss(a) > 0 and
            dretrieval = retrieval(b) - retrieval(a) > 0.
    """

    by_loss: list[str]
    by_retrieval: list[str]
    tau: float
    swaps: list[tuple[str, str, float, float]]


def _loss(lm: Mapping[str, Any], method: str, factor: int, seed: int, steps: Any) -> list:
    if method == "none":
        return lm["runs"][f"rope/{seed}"]["loss"]
    if method.startswith("finetuned-"):
        base = method.removeprefix("finetuned-")
        return lm["finetune"][f"{base}/{factor}/{seed}"]["loss_by_step"][str(steps)]
    return lm["scaling"][f"{method}/{factor}/{seed}"]["loss"]


def method_table(
    mixing_results: Mapping[str, Any] | None = None, lm_results: Mapping[str, Any] | None = None
) -> list[MethodRow]:
    """Every entry of the mixing study's ``"methods"`` with its loss from the language-model study.

    Args:
        mixing_results: :func:`~posenc_core.book.studies.mixing_study.load_results`'s dict
            (None: the committed file).
        lm_results: :func:`~posenc_core.book.studies.lm_study.load_results`'s dict (None: the
            committed file). Its ``config["train_len"]`` is L.

    Returns:
        one :class:`MethodRow` per entry, sorted by method, factor and seed.

    Raises:
        ValueError: the mixing results hold no ``"methods"`` entries.
        KeyError: an entry whose loss the language-model results lack.
    """
    if mixing_results is None:
        from posenc_core.book.studies import mixing_study

        mixing_results = mixing_study.load_results()
    if lm_results is None:
        from posenc_core.book.studies import lm_study

        lm_results = lm_study.load_results()
    entries = mixing_results.get("methods") or {}
    if not entries:
        raise ValueError("mixing_results holds no 'methods' entries (run with lm_results)")
    L = int(lm_results["config"]["train_len"])
    rows = []
    for e in entries.values():
        loss = _loss(lm_results, e["method"], e["factor"], e["seed"], e.get("steps"))
        probe = {int(d): v for d, v in e["probe"].items()}
        gain = {d: v["control"] - v["copy"] for d, v in sorted(probe.items())}
        far = [g for d, g in gain.items() if d >= L]
        if not far:
            raise ValueError(f"the probe has no distance d >= L={L}: {sorted(gain)}")
        rows.append(MethodRow(
            method=e["method"], factor=int(e["factor"]), seed=int(e["seed"]),
            loss_beyond=sum(loss[L:]) / len(loss[L:]), gain=gain,
            copy={d: v["copy"] for d, v in sorted(probe.items())},
            retrieval=sum(far) / len(far),
        ))  # fmt: skip
    return sorted(rows, key=lambda r: (r.method, r.factor, r.seed))


def seed_means(rows: Sequence[MethodRow]) -> dict[tuple[str, int], tuple[float, float]]:
    """``{(method, factor): (loss beyond L, retrieval)}``, each the mean over seeds."""
    groups: dict[tuple[str, int], list[MethodRow]] = {}
    for r in rows:
        groups.setdefault((r.method, r.factor), []).append(r)
    return {
        k: (sum(r.loss_beyond for r in g) / len(g), sum(r.retrieval for r in g) / len(g))
        for k, g in groups.items()
    }


def points(rows: Sequence[MethodRow], factor: int) -> dict[str, tuple[list[float], list[float]]]:
    """``{method: (losses beyond L, retrievals)}`` at ``factor``, one value per seed (by seed),
    as :func:`~posenc_core.book.figures.loss_retrieval_figure` draws them."""
    out: dict[str, tuple[list[float], list[float]]] = {}
    for r in sorted(rows, key=lambda r: r.seed):
        if r.factor == factor:
            xs, ys = out.setdefault(r.method, ([], []))
            xs.append(r.loss_beyond)
            ys.append(r.retrieval)
    return out


def rankings(
    rows: Sequence[MethodRow], factor: int, *, seed: int | None = None, reference: bool = True
) -> Ranking:
    """The methods at ``factor`` ranked by loss beyond L and by retrieval, and where they differ.

    Args:
        rows: :func:`method_table`'s rows.
        factor: s; the methods measured at it take part (fine-tuned ones included).
        seed: one seed's model; None: the means over seeds (:func:`seed_means`).
        reference: include ``"none"`` (plain RoPE, factor 1) in the ranking.

    Returns:
        a :class:`Ranking`.

    Raises:
        ValueError: no method was measured at ``factor`` (for ``seed``).
    """
    if seed is not None:
        rows = [r for r in rows if r.seed == seed]
    means = seed_means(rows)
    pick = {m: v for (m, s), v in means.items() if s == factor or (reference and m == "none")}
    if not any(s == factor and m != "none" for m, s in means):
        raise ValueError(
            f"factor={factor} (seed={seed}): no methods to rank; the rows hold factors "
            f"{sorted({s for _, s in means})} and seeds {sorted({r.seed for r in rows})}"
        )
    by_loss = sorted(pick, key=lambda m: pick[m][0])
    by_retrieval = sorted(pick, key=lambda m: -pick[m][1])
    agree, swaps = 0, []
    for a, b in itertools.combinations(by_loss, 2):  # a before b by loss
        dloss, dret = pick[b][0] - pick[a][0], pick[b][1] - pick[a][1]
        if abs(dloss) < _TIE or abs(dret) < _TIE:
            continue  # a tie in either order: neither agrees nor swaps
        if dret > 0:
            swaps.append((a, b, dloss, dret))
        else:
            agree += 1
    pairs = len(by_loss) * (len(by_loss) - 1) // 2
    return Ranking(by_loss, by_retrieval, (agree - len(swaps)) / pairs, swaps)


def seed_swaps(rows: Sequence[MethodRow], factor: int, *, reference: bool = True) -> dict:
    """On how many seeds each pair at ``factor`` is swapped: ``{(a, b): n}`` for every pair that
    :func:`rankings` of some seed lists as ``(a, b, ...)`` (a before b by loss, behind it by
    retrieval on that seed's model)."""
    counts: dict[tuple[str, str], int] = {}
    for seed in sorted({r.seed for r in rows}):
        for a, b, *_ in rankings(rows, factor, seed=seed, reference=reference).swaps:
            counts[a, b] = counts.get((a, b), 0) + 1
    return counts
