"""The explorer of the mixing-layers chapter: each trained layout's loss by position and its
retrieval by distance, from the mixing study's results
(:mod:`~posenc_core.book.studies.mixing_study`), with the bugs of mixed layouts beside the
layouts they break. The curves travel with the page as numbers; the drawing is
:func:`~posenc_core.book.widgets.measured.position_loss_explorer`'s, one axis per measure.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from posenc_core import _validation as check
from posenc_core.book.widgets.explorer import Explorer
from posenc_core.book.widgets.measured import CurveAxis, position_loss_explorer

__all__ = [
    "BUG_LABELS",
    "LOSS",
    "MODEL_LABELS",
    "RETRIEVAL",
    "mixing_curves",
    "mixing_explorer",
]

LOSS = "loss by position"
"""The measure of held-out loss at each position 0 .. 8L - 1 (nats per byte)."""

RETRIEVAL = "retrieval by distance"
"""The measure of the retrieval probe, control minus copy at each distance d (nats per byte)."""

MODEL_LABELS = {
    "rope": "RoPE everywhere",
    "olmo3": "OLMo 3",
    "cohere2": "Cohere2",
    "llama4": "Llama 4",
    "gemma3": "Gemma 3",
    "gemma4": "Gemma 4",
    "gpt_oss": "GPT-OSS",
    "smollm3": "SmolLM3",
}
"""The model buttons' labels, by layout of the study (another layout shows its name)."""

BUG_LABELS = {
    "global-rotated": "global layer rotated",
    "local-base-global": "global at the local base",
    "window-dropped": "window dropped",
    "temperature-everywhere": "temperature everywhere",
    "no-rope-inverted": "no_rope_layers inverted",
}
"""The bug buttons' labels, by bug of the study (another bug shows its name)."""

NO_BUG = "none"
HINT = (
    "Try: choose a layout, then the other measure: does a layout that keeps its loss flat past "
    "the shaded range also find the first copy there? “Compare: keep this curve” keeps one "
    "while you choose another; a bug is drawn against its own layout on the same text."
)


def _load(results: Any) -> Mapping[str, Any]:
    from posenc_core.book.studies import mixing_study

    if results is None or isinstance(results, (str, os.PathLike)):
        return mixing_study.load_results(results)
    if not isinstance(results, Mapping):
        raise TypeError(
            f"results must be a results dict, a path to mixing_study.json or None (the "
            f"committed file), got {type(results).__name__}"
        )
    return results


def _entry(results: Mapping[str, Any], part: str, key: str) -> Mapping[str, Any]:
    try:
        return results[part][key]
    except (KeyError, TypeError):
        raise ValueError(f"results[{part!r}] has no entry {key!r}; the explorer needs every "
                         "layout and bug of config at every seed") from None  # fmt: skip


def _saved(probe: Mapping[str, Any], distances: list[int]) -> list[float]:
    """control - copy at each distance: what the first copy is worth, in nats per byte."""
    return [probe[str(d)]["control"] - probe[str(d)]["copy"] for d in distances]


def mixing_curves(
    results: str | os.PathLike | Mapping[str, Any] | None = None, *, bugs: bool = True
) -> tuple[dict[tuple, np.ndarray], dict[tuple, tuple[str, np.ndarray]]]:
    """The curves the mixing explorer draws and the reference of each, per seed.

    Keys are ``(measure, model, bug)``: measure :data:`LOSS` (the held-out loss at each
    position) or :data:`RETRIEVAL` (control minus copy at each probe distance, the nats per byte
    that the first copy saves); model a label of :data:`MODEL_LABELS`; bug ``"none"`` (the
    layout as trained) or a label of :data:`BUG_LABELS` (keys ``(measure, model)`` when
    ``bugs`` is False). A layout is measured over every held-out
    window (its reference the first layout, RoPE in every layer); a bug over the study's
    secondary windows and samples, its reference its own layout on the same ones (paired).

    Args:
        results: the results dict, a path to one, or None (the committed file).
        bugs: whether the bugs are choices.

    Returns:
        ``(curves, references)``: key -> ``(S, n)`` float64 (n = 8L positions or the number of
        probe distances), and key -> ``(label, (S, n) curves)`` (the reference's key has none).

    Raises:
        TypeError: ``results`` of another type, or ``bugs`` not a bool.
        ValueError: a layout or bug of its config without an entry for every seed.
    """
    r = _load(results)
    if not isinstance(bugs, bool):
        raise TypeError(f"bugs must be True or False, got {bugs!r}")
    cfg = r.get("config") if isinstance(r.get("config"), Mapping) else None
    need = ("layouts", "seeds", "probe_distances")
    if cfg is None or any(k not in cfg for k in need):
        raise ValueError(f"results['config'] must give {', '.join(need)}: is this a mixing "
                         "study's results file?")  # fmt: skip
    layouts, seeds, dist = list(cfg["layouts"]), list(cfg["seeds"]), list(cfg["probe_distances"])
    buggy = {}  # layout -> its bugs, in the study's order
    if bugs:
        for b in cfg.get("bugs", []):
            layout = _entry(r, "bugs", f"{b}/{seeds[0]}")["layout"]
            buggy.setdefault(layout, []).append(b)

    def label(name: str) -> str:
        return MODEL_LABELS.get(name, name)

    def per_seed(part: str, key: str, pick, within: str | None = None) -> np.ndarray:
        """(S, n): pick(entry) of each seed's entry (of its part ``within``, e.g. secondary)."""
        rows = [_entry(r, part, f"{key}/{s}") for s in seeds]
        return np.array([pick(e if within is None else e[within]) for e in rows], dtype=float)

    measures = {
        LOSS: lambda run: run["loss"],
        RETRIEVAL: lambda run: _saved(run["probe"], dist),
    }
    curves: dict[tuple, np.ndarray] = {}
    refs: dict[tuple, tuple[str, np.ndarray]] = {}
    for measure, pick in measures.items():
        reference = per_seed("runs", layouts[0], pick)
        for name in layouts:
            tail = (NO_BUG,) if bugs else ()
            key = (measure, label(name), *tail)
            curves[key] = reference if name == layouts[0] else per_seed("runs", name, pick)
            if name != layouts[0]:
                refs[key] = (label(layouts[0]), reference)
            own = None
            for b in buggy.get(name, []):
                if own is None:
                    own = per_seed("runs", name, pick, within="secondary")
                bug_key = (measure, label(name), BUG_LABELS.get(b, b))
                curves[bug_key] = per_seed("bugs", b, pick)
                refs[bug_key] = (f"{label(name)} without the bug, same text", own)
    return curves, refs


def mixing_explorer(
    results: str | os.PathLike | Mapping[str, Any] | None = None,
    *,
    measure: str = LOSS,
    model: str | None = None,
    bugs: bool = True,
) -> Explorer:
    """The mixing-layers chapter's explorer: measure (loss by position or retrieval by
    distance), model (the trained layouts) and bug (those measured on that layout), each
    curve the mean over seeds with its min-max band, beside RoPE in every layer (a bug: beside
    its layout on the same text), with "compare: keep this curve".

    The retrieval measure draws control minus copy, the nats per byte that the first copy of a
    span saves on its second copy d bytes later: 0 where the model does not find it, and each
    seed's difference is paired (same spans, same model). The curves are
    :func:`mixing_curves`'s.

    Args:
        results: the results dict, a path to one, or None (the committed file).
        measure: shown first, :data:`LOSS` or :data:`RETRIEVAL`.
        model: shown first, a label of :data:`MODEL_LABELS`; None: the first layout after the
            reference.
        bugs: whether the bugs are choices (a third row of buttons).

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer`.
    """
    r = _load(results)
    curves, refs = mixing_curves(r, bugs=bugs)
    check.choice("measure", measure, (LOSS, RETRIEVAL))
    models = list(dict.fromkeys(k[1] for k in curves))
    if model is None:
        model = models[1] if len(models) > 1 else models[0]
    check.choice("model", model, tuple(models))
    L = int(r["config"]["train_len"])
    saved = [a for k, a in curves.items() if k[0] == RETRIEVAL]
    saved += [a for k, (_, a) in refs.items() if k[0] == RETRIEVAL]
    lo = min(0.0, min(float(a.min()) for a in saved))
    hi = max(0.0, max(float(a.max()) for a in saved))
    pad = 0.05 * (hi - lo or 1.0)
    axes = {
        LOSS: CurveAxis(shade="trained\non 0..{L}"),
        RETRIEVAL: CurveAxis(
            x=tuple(float(d) for d in r["config"]["probe_distances"]),
            xlabel="distance d from the first copy to the second",
            ylabel="nats per byte saved by the first copy",
            ylim=(lo - pad, hi + pad),
            shade="trained\non d < {L}",
            symbol="d",
        ),
    }
    default = next(k for k in curves if k[0] == measure and k[1] == model)
    return position_loss_explorer(
        curves,
        train_len=L,
        controls=("measure", "model", "bug") if bugs else ("measure", "model"),
        references=refs,
        default=default,
        axes=axes,
        name="mixing",
        hint=HINT,
        title="Loss by position and retrieval by distance of the mixed layouts, by measure, "
        "model and bug",
    )
