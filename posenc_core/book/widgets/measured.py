"""The explorer of measured curves: the trained models' loss by position, from the study's
committed results (chapters 5, 7, 8 and 8b), and other measures on an x axis of their own (the
mixing-layers chapter's retrieval by distance, :mod:`~posenc_core.book.widgets.mixing`). The
curves travel with the page as numbers.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from posenc_core import _validation as check
from posenc_core.book.chapter_helpers import in_range
from posenc_core.book.widgets.explorer import Data, Explorer, Param

__all__ = ["CurveAxis", "DEFAULT_HINT", "position_loss_explorer", "resolve_curve"]

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


@dataclass(frozen=True)
class CurveAxis:
    """How :func:`position_loss_explorer` draws the curves of one measure (one value of its
    first control): their x values, the axis labels, the y limits and the label of the shaded
    range [0, L).

    ``x`` None: the curves are per position, ``(S, P)``, bucketed as
    :func:`~posenc_core.book.figures.seed_band` buckets them and labelled with their means over
    [L/2, L) and [L, P). Otherwise each curve holds ``(S, len(x))`` values at ``x`` (e.g. the
    distances of a probe, increasing, in [0, P]), drawn with a dot at each and labelled with
    their means over the x in [L/2, L) and over x >= L, so ``x`` needs a value in each.
    ``shade`` may hold ``{L}`` (replaced by L) and one ``"\\n"``, where the label breaks when
    the shaded range is narrower than its line.
    """

    x: tuple[float, ...] | None = None  # None: the positions 0 .. P - 1
    xlabel: str = "position"
    ylabel: str | None = None  # None: position_loss_explorer's ylabel
    ylim: tuple[float, float] | None = None  # None: position_loss_explorer's, else the bands'
    shade: str = "trained\non 0..{L}"  # the label of the shaded [0, L)
    symbol: str = ""  # the name of x in the label's means (e.g. "d"); "": positions


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
    axes: Mapping[Any, CurveAxis] | None = None,
    name: str = "position-loss",
    hint: str = DEFAULT_HINT,
    title: str | None = None,
) -> Explorer:
    """Per-position curves over seeds, one chosen with one to three rows of buttons, beside a
    reference: e.g. loss by position of each scheme (chapter 5) or of each long-context method,
    factor and fine-tune (chapter 7); with ``axes``, other measures on x axes of their own.

    Each curve is drawn as :func:`~posenc_core.book.figures.seed_band` gives it (mean over seeds,
    min-max band); [0, L) is shaded and the y limits are fixed. A key of ``curves`` gives one
    value per control (a tuple when there are several); ``None`` means "any value" (the control
    is greyed out). Missing combinations fall back as :func:`resolve_curve` says. A control's
    keyword is its description with other characters than letters, digits and ``_`` replaced
    (``"fine-tune steps"`` -> ``fine_tune_steps``). Readers can keep curves for comparison (a
    kept curve is drawn where the curve shown shares its axis). In the browser an option with no
    curve for the controls before it is disabled, and after a fallback the controls show the
    curve drawn.

    Data: ``shown`` (the key drawn), ``x``, ``mean``, ``low``, ``high`` ``(B,)``, and
    ``in_range``, ``beyond`` ``(S,)``: each seed's mean over [L/2, L) and over [L, P) (x in
    [L/2, L) and x >= L on an axis with its own x).

    Args:
        curves: key -> ``(S, P)`` array-like (``(P,)``: one seed), one P > L, finite; on an
            axis with its own x, ``(S, len(x))``.
        train_len: L.
        controls: 1 to 3 descriptions, e.g. ``("method", "factor", "fine-tune steps")``.
        reference: optional ``(label, (S, P) curves)`` drawn in every frame, black dashed.
        references: optional key -> ``(label, (S, P) curves)``, a reference of that curve's own.
        default: the key shown first (None: the first key).
        bucket: positions per bucket; ylim: y limits (default: every band's range).
        ylabel: the y axis label.
        axes: optional value of the first control -> :class:`CurveAxis` of the curves with
            that value (every key then names one); None: positions, with ``ylabel``, ``ylim``.
        name: the explorer's name (CSS class).
        hint: the line above the controls on what to try (default :data:`DEFAULT_HINT`).
        title: what it shows, for screen readers and the stand-in's caption (None: its y
            label by its x label, chosen by the controls).

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
    if axes is not None and (
        not isinstance(axes, Mapping)
        or not axes
        or not all(isinstance(a, CurveAxis) for a in axes.values())
    ):
        raise TypeError(f"axes must map values of {descriptions[0]!r} to CurveAxis, got {axes!r}")
    axis_list = [CurveAxis()] if axes is None else list(dict.fromkeys(axes.values()))

    def as_key(key: Any) -> tuple:
        t = key if isinstance(key, tuple) else (key,)
        if len(t) != n:
            raise ValueError(
                f"curves key {key!r} must give one value per control {descriptions} "
                f"({n} value{'s' if n > 1 else ''})"
            )
        if axes is not None and t[0] not in axes:
            raise ValueError(f"curves key {key!r}: axes has no axis for {descriptions[0]} = "
                             f"{t[0]!r}; it has {list(axes)}")  # fmt: skip
        return t

    def axis_of(key: tuple) -> int:
        return 0 if axes is None else axis_list.index(axes[key[0]])

    xs: list[np.ndarray | None] = []
    for i, ax in enumerate(axis_list):
        if ax.x is None:
            xs.append(None)
            continue
        x = np.asarray(ax.x, dtype=float)
        if x.ndim != 1 or not len(x) or not np.isfinite(x).all() or (np.diff(x) <= 0).any():
            raise ValueError(f"axes[{i}].x must be increasing finite numbers, got {ax.x!r}")
        if not ((x >= L // 2) & (x < L)).any() or not (x >= L).any():
            raise ValueError(f"axes[{i}].x must have a value in [{L // 2}, {L}) and one >= {L} "
                             f"(train_len = {L}), got {ax.x!r}")  # fmt: skip
        xs.append(x)

    def as_curve(label: str, value: Any, axis: int) -> np.ndarray:
        a = np.asarray(value, dtype=float)
        a = a[None] if a.ndim == 1 else a
        x = xs[axis]
        if x is None and (a.ndim != 2 or a.shape[0] < 1 or a.shape[1] <= L):
            raise ValueError(
                f"{label} must have shape (S, P) with P > train_len = {L}, got {np.shape(value)}"
            )
        if x is not None and (a.ndim != 2 or a.shape[0] < 1 or a.shape[1] != len(x)):
            raise ValueError(f"{label} must have shape (S, {len(x)}), one value per x of its "
                             f"axis, got {np.shape(value)}")  # fmt: skip
        if not np.isfinite(a).all():
            raise ValueError(f"{label} must be finite")
        return a

    table = {}
    for k, v in curves.items():
        key = as_key(k)
        table[key] = as_curve(f"curves[{k!r}]", v, axis_of(key))
    lengths = {a.shape[1] for k, a in table.items() if xs[axis_of(k)] is None}
    ref = None
    if reference is not None:
        if not isinstance(reference, tuple) or len(reference) != 2:
            raise ValueError(f"reference must be a (label, curves) pair, got {reference!r}")
        ref_axes = {axis_of(k) for k in table}
        if len(ref_axes) != 1:
            raise ValueError("reference is drawn with every curve, which needs one axis; "
                             "with several axes give references per key")  # fmt: skip
        ref = (str(reference[0]), as_curve("reference curves", reference[1], ref_axes.pop()))
        if xs[axis_of(next(iter(table)))] is None:
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
            axis = axis_of(as_key(k))
            own_refs[as_key(k)] = (str(pair[0]), as_curve(f"references[{k!r}]", pair[1], axis))
            if xs[axis] is None:
                lengths.add(own_refs[as_key(k)][1].shape[1])
    if len(lengths) > 1:
        raise ValueError(
            f"every curve must have the same number of positions, got {sorted(lengths)}"
        )
    if lengths:
        (P,) = lengths
    else:  # no curve per position: the x range ends at a multiple of L past every x
        P = max(2 * L, L * int(np.ceil(max(x[-1] for x in xs if x is not None) / L)))
    for i, x in enumerate(xs):
        if x is not None and (x[0] < 0 or x[-1] > P):
            raise ValueError(f"axes[{i}].x must lie in [0, {P}] (the positions), got {x.tolist()}")
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

    def band(a: np.ndarray, axis: int) -> tuple:
        x = xs[axis]
        if x is None:
            return figures.seed_band(a, bucket=bucket)
        return x, a.mean(0), a.min(0), a.max(0)

    def summaries(a: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
        """Each seed's mean over [L/2, L) and over [L, P) (x in them on an axis with x)."""
        x = xs[axis]
        if x is None:
            return in_range(a, L, per_seed=True), a[:, L:].mean(1)
        return a[:, (x >= L // 2) & (x < L)].mean(1), a[:, x >= L].mean(1)

    bands = {k: band(a, axis_of(k)) for k, a in table.items()}
    ref_band = None if ref is None else band(ref[1], axis_of(keys[0]))
    ref_bands = {k: (lab, band(a, axis_of(k))) for k, (lab, a) in own_refs.items()}
    axis_specs = []
    for i, ax in enumerate(axis_list):
        lim = ax.ylim if ax.ylim is not None else ylim
        if lim is None:
            mine = [b for k, b in bands.items() if axis_of(k) == i]
            mine += [b for k, (_, b) in ref_bands.items() if axis_of(k) == i]
            mine += [ref_band] if ref is not None and axis_of(keys[0]) == i else []
            lo = float(min(b[2].min() for b in mine))
            hi = float(max(b[3].max() for b in mine))
            lim = (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
        axis_specs.append(
            {
                "xlabel": ax.xlabel,
                "ylabel": ylabel if ax.ylabel is None else ax.ylabel,
                "ylim": [float(lim[0]), float(lim[1])],
                "shade": ax.shade.replace("{L}", str(L)),
                "symbol": ax.symbol,
                "points": xs[i] is not None,
            }
        )
    params = [
        Param(nm, desc, "choice", s, options=grid)
        for nm, desc, grid, s in zip(names, descriptions, grids, start)
    ]
    seeds = {a.shape[0] for a in table.values()}
    n_seeds = seeds.pop() if len(seeds) == 1 else None

    def compute(v: dict) -> Data:
        key = resolve(v)
        x, mean, low, high = bands[key]
        within, beyond = summaries(table[key], axis_of(key))
        return {
            "shown": list(key),
            "x": x,
            "mean": mean,
            "low": low,
            "high": high,
            "in_range": within,
            "beyond": beyond,
        }

    def reference_of(key: tuple) -> tuple[str, Any, np.ndarray] | None:
        if key in ref_bands:
            return (*ref_bands[key], own_refs[key][1])
        return None if ref is None else (ref[0], ref_band, ref[1])

    # the page's copy: every curve's band and per-seed means, every reference once
    references: list[dict] = []
    ref_index: dict[int, int] = {}

    def ref_entry(r: tuple[str, Any, np.ndarray] | None, axis: int) -> int | None:
        if r is None:
            return None
        label, band_, raw = r
        if id(raw) not in ref_index:
            ref_index[id(raw)] = len(references)
            x, mean, low, high = band_
            within, beyond = summaries(raw, axis)
            references.append(
                {
                    "label": label,
                    "x": x,
                    "mean": mean,
                    "low": low,
                    "high": high,
                    "in_range_mean": float(within.mean() if xs[axis] is not None
                                           else in_range(raw, L)),
                    "beyond_mean": float(raw[:, L:].mean() if xs[axis] is None
                                         else raw[:, xs[axis] >= L].mean()),
                }
            )  # fmt: skip
        return ref_index[id(raw)]

    entries = []
    for k in keys:
        d = compute(dict(zip(names, (start[i] if v is None else v for i, v in enumerate(k)))))
        d["shown"] = list(k)
        d["reference"] = ref_entry(reference_of(k), axis_of(k))
        d["axis"] = axis_of(k)
        entries.append({"key": d.pop("shown"), **d})
    consts = {
        "controls": [p.spec() for p in params],
        "curves": entries,
        "references": references,
        "axes": axis_specs,
        "start": list(start),
        "default": keys.index(default_key),
        "train_len": L,
        "positions": P,
        "n_seeds": n_seeds,
    }

    def figure(data: Data, v: dict) -> Any:
        key = tuple(data["shown"])
        r = reference_of(key)
        axis = axis_specs[axis_of(key)]
        if xs[axis_of(key)] is None:
            return figures.position_loss_figure(
                {describe(key): {"selected": table[key]}},
                train_len=L,
                reference=None if r is None else {r[0]: r[2]},
                bucket=bucket,
                ylim=tuple(axis["ylim"]),
                ylabel=axis["ylabel"],
            )
        return _points_figure(
            describe(key), bands[key], None if r is None else (r[0], r[1]), L, P, axis
        )

    def alt(v: dict, data: Data) -> str:
        key = tuple(data["shown"])
        r = reference_of(key)
        axis = axis_specs[axis_of(key)]
        if xs[axis_of(key)] is None:
            against = f"position 0 to {P}, the training length {L} shaded"
        else:
            against = f"{axis['xlabel']} at {', '.join(f'{x:g}' for x in xs[axis_of(key)])}"
        return (
            f"Line plot of {axis['ylabel']} against {against}: "
            f"{describe(key)}, mean over seeds with a min-max band"
            + (f", beside {r[0]} dashed in black" if r else "")
        )

    if title is None:
        title = " or ".join(f"{a['ylabel']} by {a['xlabel']}" for a in axis_specs).capitalize()
        title += f", chosen by {', '.join(descriptions)}"
    return Explorer("position-loss", name, title, params, consts, compute, figure, alt, hint)


def _points_figure(title: str, band: tuple, reference: tuple | None, L: int, P: int,
                   axis: dict) -> Any:  # fmt: skip
    """The stand-in of a curve on an axis with its own x: the mean with dots and the min-max
    band over seeds, a reference dashed in black, [0, L) shaded."""
    from posenc_core.book.figures import style

    fig, ax = style.new_figure(style.COLUMN_WIDTH, 3.8)
    ax.axvspan(0, L, color=style.TRAINING_TINT, zorder=0, label=axis["shade"].replace("\n", " "))
    if reference is not None:
        x, m, lo, hi = reference[1]
        ax.fill_between(x, lo, hi, color="0.6", alpha=0.3, lw=0, zorder=1)
        ax.plot(x, m, color="black", ls="--", lw=1.2, marker="o", ms=3, label=reference[0])
    x, m, lo, hi = band
    colour = style.OKABE_ITO[0]
    ax.fill_between(x, lo, hi, color=colour, alpha=0.2, lw=0, zorder=3)
    ax.plot(x, m, color=colour, lw=1.5, marker="o", ms=4, label="mean over seeds", zorder=4)
    lo_y, hi_y = axis["ylim"]
    if lo_y < 0 < hi_y:
        ax.axhline(0, color="0.35", lw=0.8, zorder=2)
    style.length_ticks(ax, L, P)
    title = textwrap.fill(title, 56)  # the column's width at the title's size
    ax.set(xlim=(0, P), ylim=(lo_y, hi_y), title=title, xlabel=axis["xlabel"],
           ylabel=axis["ylabel"])  # fmt: skip
    ax.grid(alpha=0.3)
    style.legend_below(fig)
    return fig
