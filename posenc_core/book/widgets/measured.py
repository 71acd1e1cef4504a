"""The explorer of measured curves: the trained models' loss by position, from the study's
committed results (chapters 5, 7, 8 and 8b). The curves travel with the page as numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from posenc_core import _validation as check
from posenc_core.book.chapter_helpers import in_range
from posenc_core.book.widgets.explorer import Data, Explorer, Param

__all__ = ["DEFAULT_HINT", "position_loss_explorer", "resolve_curve"]

DEFAULT_HINT = (
    "Try: press “compare: keep this curve”, then choose another; look at where each curve leaves "
    "the shaded training range."
)
"""The line on what to try that :func:`position_loss_explorer` shows unless given another."""


def resolve_curve(keys: Sequence[tuple], start: tuple, wanted: tuple, default: tuple) -> tuple:
    """The key of the curve shown for the controls' values ``wanted``.

    A key matches when each entry is None (does not apply) or equals the wanted value; the
    first match in ``keys`` wins. Without one, the controls after the first are reset to
    ``start``, the last control first, until a key matches; ``default`` if none does.
    ``explorer.js`` does the same in the browser (``keyOf``).
    """

    def match(v: tuple) -> tuple | None:
        for k in keys:
            if all(a is None or a == b for a, b in zip(k, v)):
                return k
        return None

    v = list(wanted)
    found = match(tuple(v))
    for i in reversed(range(1, len(v))):
        if found is not None:
            break
        v[i] = start[i]
        found = match(tuple(v))
    return default if found is None else found


def _control_name(description: str) -> str:
    """The keyword for Explorer.set of a control described as ``description``."""
    name = re.sub(r"\W+", "_", description).strip("_")
    if not name.isidentifier():
        raise ValueError(
            f"controls must be descriptions with a letter or digit, such as 'method', got "
            f"{description!r}"
        )
    return name


def position_loss_explorer(
    curves: Mapping[Any, Any],
    *,
    train_len: int,
    controls: Sequence[str] = ("scheme",),
    reference: tuple[str, Any] | None = None,
    references: Mapping[Any, tuple[str, Any]] | None = None,
    default: Any = None,
    bucket: int = 8,
    ylim: tuple[float, float] | None = None,
    ylabel: str = "held-out loss (nats per byte)",
    name: str = "position-loss",
    hint: str = DEFAULT_HINT,
) -> Explorer:
    """Per-position curves over seeds, one chosen with one to three rows of buttons, beside a
    reference: e.g. loss by position of each scheme (chapter 5) or of each long-context method,
    factor and fine-tune (chapter 7).

    Each curve is drawn as :func:`~posenc_core.book.figures.seed_band` gives it (mean over seeds,
    min-max band); [0, L) is shaded and the y limits are fixed. A key of ``curves`` gives one
    value per control (a tuple when there are several); ``None`` means "any value" (the control
    is greyed out). Missing combinations fall back as :func:`resolve_curve` says. A control's
    keyword is its description with other characters than letters, digits and ``_`` replaced
    (``"fine-tune steps"`` -> ``fine_tune_steps``). Readers can keep curves for comparison.
    In the browser an option with no curve for the controls before it is disabled, and after a
    fallback the controls show the curve drawn.

    Data: ``shown`` (the key drawn), ``x``, ``mean``, ``low``, ``high`` ``(B,)``, and
    ``in_range``, ``beyond`` ``(S,)``: each seed's mean over [L/2, L) and over [L, P).

    Args:
        curves: key -> ``(S, P)`` array-like (``(P,)``: one seed), one P > L, finite.
        train_len: L.
        controls: 1 to 3 descriptions, e.g. ``("method", "factor", "fine-tune steps")``.
        reference: optional ``(label, (S, P) curves)`` drawn in every frame, black dashed.
        references: optional key -> ``(label, (S, P) curves)``, a reference of that curve's own.
        default: the key shown first (None: the first key).
        bucket: positions per bucket; ylim: y limits (default: every band's range).
        ylabel: the y axis label; name: the explorer's name (CSS class).
        hint: the line above the controls on what to try (default :data:`DEFAULT_HINT`).

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer`.
    """
    from posenc_core.book import figures

    L = check.positive_int("train_len", train_len)
    bucket = check.positive_int("bucket", bucket)
    if (
        isinstance(controls, str)
        or not isinstance(controls, Sequence)
        or not 1 <= len(controls) <= 3
    ):
        raise ValueError(f"controls must be 1 to 3 descriptions, got {controls!r}")
    descriptions = tuple(str(c) for c in controls)
    names = tuple(_control_name(c) for c in descriptions)
    if len(set(names)) != len(names):
        raise ValueError(f"controls must have distinct names, got {descriptions}")
    n = len(names)
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError(
            f"curves must be a non-empty mapping of key -> (S, P) curves, got {curves!r}"
        )

    def as_key(key: Any) -> tuple:
        t = key if isinstance(key, tuple) else (key,)
        if len(t) != n:
            raise ValueError(
                f"curves key {key!r} must give one value per control {descriptions} "
                f"({n} value{'s' if n > 1 else ''})"
            )
        return t

    def as_curve(label: str, value: Any) -> np.ndarray:
        a = np.asarray(value, dtype=float)
        a = a[None] if a.ndim == 1 else a
        if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] <= L:
            raise ValueError(
                f"{label} must have shape (S, P) with P > train_len = {L}, got {np.shape(value)}"
            )
        if not np.isfinite(a).all():
            raise ValueError(f"{label} must be finite")
        return a

    table = {as_key(k): as_curve(f"curves[{k!r}]", v) for k, v in curves.items()}
    lengths = {a.shape[1] for a in table.values()}
    ref = None
    if reference is not None:
        if not isinstance(reference, tuple) or len(reference) != 2:
            raise ValueError(f"reference must be a (label, curves) pair, got {reference!r}")
        ref = (str(reference[0]), as_curve("reference curves", reference[1]))
        lengths.add(ref[1].shape[1])
    own_refs: dict[tuple, tuple[str, np.ndarray]] = {}
    if references is not None:
        if not isinstance(references, Mapping):
            raise ValueError(f"references must map keys of curves to (label, curves) pairs, "
                             f"got {references!r}")  # fmt: skip
        for k, pair in references.items():
            if as_key(k) not in table:
                raise ValueError(f"references key {k!r} is not a key of curves")
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValueError(f"references[{k!r}] must be a (label, curves) pair, got {pair!r}")
            own_refs[as_key(k)] = (str(pair[0]), as_curve(f"references[{k!r}]", pair[1]))
            lengths.add(own_refs[as_key(k)][1].shape[1])
    if len(lengths) != 1:
        raise ValueError(
            f"every curve must have the same number of positions, got {sorted(lengths)}"
        )
    (P,) = lengths
    keys = list(table)
    grids = []
    for i, desc in enumerate(descriptions):
        values = list(dict.fromkeys(k[i] for k in keys if k[i] is not None))
        if not values:
            raise ValueError(f"no key of curves gives a value for the control {desc!r}")
        grids.append(tuple(values))
    default_key = keys[0] if default is None else as_key(default)
    if default_key not in table:
        raise ValueError(f"default {default!r} is not a key of curves")
    start = tuple(g[0] if v is None else v for v, g in zip(default_key, grids))

    def resolve(vals: dict) -> tuple:
        return resolve_curve(keys, start, tuple(vals[nm] for nm in names), default_key)

    def describe(key: tuple) -> str:
        return " · ".join(f"{d} = {v}" for d, v in zip(descriptions, key) if v is not None)

    bands = {k: figures.seed_band(a, bucket=bucket) for k, a in table.items()}
    ref_band = None if ref is None else figures.seed_band(ref[1], bucket=bucket)
    ref_bands = {k: (lab, figures.seed_band(a, bucket=bucket)) for k, (lab, a) in own_refs.items()}
    all_refs = [b for _, b in ref_bands.values()] + ([ref_band] if ref else [])
    if ylim is None:
        lows = [b[2].min() for b in bands.values()] + [b[2].min() for b in all_refs]
        highs = [b[3].max() for b in bands.values()] + [b[3].max() for b in all_refs]
        lo, hi = float(min(lows)), float(max(highs))
        ylim = (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    params = [
        Param(nm, desc, "choice", s, options=grid)
        for nm, desc, grid, s in zip(names, descriptions, grids, start)
    ]
    seeds = {a.shape[0] for a in table.values()}
    n_seeds = seeds.pop() if len(seeds) == 1 else None

    def compute(v: dict) -> Data:
        key = resolve(v)
        x, mean, low, high = bands[key]
        a = table[key]
        return {
            "shown": list(key),
            "x": x,
            "mean": mean,
            "low": low,
            "high": high,
            "in_range": in_range(a, L, per_seed=True),
            "beyond": a[:, L:].mean(1),
        }

    def reference_of(key: tuple) -> tuple[str, Any, np.ndarray] | None:
        if key in ref_bands:
            return (*ref_bands[key], own_refs[key][1])
        return None if ref is None else (ref[0], ref_band, ref[1])

    # the page's copy: every curve's band and per-seed means, every reference once
    references: list[dict] = []
    ref_index: dict[int, int] = {}

    def ref_entry(r: tuple[str, Any, np.ndarray] | None) -> int | None:
        if r is None:
            return None
        label, band, raw = r
        if id(raw) not in ref_index:
            ref_index[id(raw)] = len(references)
            x, mean, low, high = band
            references.append(
                {
                    "label": label,
                    "x": x,
                    "mean": mean,
                    "low": low,
                    "high": high,
                    "in_range_mean": float(in_range(raw, L)),
                    "beyond_mean": float(raw[:, L:].mean()),
                }
            )
        return ref_index[id(raw)]

    entries = []
    for k in keys:
        d = compute(dict(zip(names, (start[i] if v is None else v for i, v in enumerate(k)))))
        d["shown"] = list(k)
        d["reference"] = ref_entry(reference_of(k))
        entries.append({"key": d.pop("shown"), **d})
    consts = {
        "controls": [p.spec() for p in params],
        "curves": entries,
        "references": references,
        "start": list(start),
        "default": keys.index(default_key),
        "train_len": L,
        "positions": P,
        "n_seeds": n_seeds,
        "ylim": list(ylim),
        "ylabel": ylabel,
    }

    def figure(data: Data, v: dict) -> Any:
        key = tuple(data["shown"])
        r = reference_of(key)
        return figures.position_loss_figure(
            {describe(key): {"selected": table[key]}},
            train_len=L,
            reference=None if r is None else {r[0]: r[2]},
            bucket=bucket,
            ylim=ylim,
            ylabel=ylabel,
        )

    def alt(v: dict, data: Data) -> str:
        r = reference_of(tuple(data["shown"]))
        return (
            f"Line plot of {ylabel} against position 0 to {P}, the training length {L} shaded: "
            f"{describe(tuple(data['shown']))}, mean over seeds with a min-max band"
            + (f", beside {r[0]} dashed in black" if r else "")
        )

    title = f"{ylabel.capitalize()} by position, chosen by {', '.join(descriptions)}"
    return Explorer("position-loss", name, title, params, consts, compute, figure, alt, hint)
