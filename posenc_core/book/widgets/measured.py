"""The explorer of measured curves: the trained models' loss by position, from the study's
committed results (chapters 7 and 8).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from posenc_core import _validation as check
from posenc_core.book.figures import explorer_frames
from posenc_core.book.widgets.explorer import Data, Explorer, Param

__all__ = ["position_loss_explorer"]


def _control_name(description: str) -> str:
    """The keyword for Explorer.set of a control described as ``description``."""
    name = re.sub(r"\W+", "_", description).strip("_")
    if not name.isidentifier():
        raise ValueError(
            f"controls must be descriptions with a letter or digit, such as 'method', got "
            f"{description!r}"
        )
    return name


def _signed(x: float, digits: int = 3) -> str:
    """``x`` with a sign and ``digits`` decimals, never "-0.000" (a tiny negative is +0)."""
    x = round(float(x), digits)
    return f"{x + 0.0:+.{digits}f}"


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
    mode: str = "auto",
) -> Explorer:
    """A per-position curve over seeds, chosen with one to three categorical controls, beside
    a fixed reference: e.g. loss by position of each positional scheme (chapter 5), or of the
    trained RoPE model under each long-context method, factor and fine-tune (chapter 7).

    Each curve is a ``(S, P)`` stack, one row per seed (such as
    :func:`~posenc_core.book.studies.lm_curves.scheme_curves` returns), drawn as
    :func:`~posenc_core.book.figures.seed_band` gives it: bucketed means, the mean over seeds as a
    line and a min-max band over seeds; [0, L) is shaded, the x ticks are multiples of L and the
    y limits are the same in every frame.

    Controls: one ``ToggleButtons`` per entry of ``controls`` (the description; the keyword for
    :meth:`Explorer.set <posenc_core.book.widgets.explorer.Explorer.set>` is the description with
    every run of other characters than letters, digits and ``_`` replaced by ``_``:
    ``"fine-tune steps"`` -> ``fine_tune_steps``). A key of ``curves`` gives one value per control
    (a plain value when there is one control, else a tuple); the grid of a control is the values its
    keys use, in order of first appearance. A key entry ``None`` means "does not apply": the curve
    is shown for every value of that control (``("none", None, None)``: plain RoPE whatever the
    factor and fine-tune). Static and live mode show the same grid.

    Combinations without a curve snap: the controls after the first are reset to their default
    values, the last control first, until a key matches (and to the default key if none does);
    the frame label then says which curve is shown. Grid points that show the same curve
    share one prerendered image (``frame_key``), so the page stores one PNG per curve.

    The frame label gives the controls' values, the mean over seeds of the curve's mean on
    [L/2, L) (in range, past the first positions' short context) and on [L, P) (beyond L).

    Data: ``shown`` (the key of the curve drawn, as a tuple), ``x``, ``mean``, ``low``,
    ``high`` ``(B,)`` from :func:`~posenc_core.book.figures.seed_band`, ``in_range`` and
    ``beyond`` ``(S,)``: each seed's mean over [L/2, L) and over [L, P).

    Args:
        curves: key -> ``(S, P)`` array-like (``(P,)``: one seed); every curve has the same P,
            P > L, finite values.
        train_len: L.
        controls: 1 to 3 descriptions of the controls, e.g. ``("method", "factor",
            "fine-tune steps")``.
        reference: optional ``(label, (S, P) curves)`` drawn in every frame, black dashed.
        references: optional key of ``curves`` -> ``(label, (S, P) curves)``: a reference of
            its own for that curve (e.g. the same batch handled correctly, for each bug of
            chapter 8), drawn instead of ``reference``; the frame label then also gives the
            reference's means and the difference.
        default: the key shown first (None: the first key of ``curves``).
        bucket: positions per bucket (see :func:`~posenc_core.book.figures.seed_band`).
        ylim: y limits (default: the range of every curve's band, with a margin).
        ylabel: the y axis label.
        name: the explorer's name (CSS class ``posenc-explorer-<name>``).
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see
            :func:`~posenc_core.book.widgets.explorer.resolve_mode`).

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

    def match(v: tuple) -> tuple | None:
        for k in keys:
            if all(a is None or a == b for a, b in zip(k, v)):
                return k
        return None

    def resolve(vals: Mapping[str, Any]) -> tuple:
        v = [vals[nm] for nm in names]
        found = match(tuple(v))
        for i in reversed(range(1, n)):
            if found is not None:
                break
            v[i] = start[i]
            found = match(tuple(v))
        return default_key if found is None else found

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
        Param(nm, desc, grid, s, ("buttons", grid), fmt=str)
        for nm, desc, grid, s in zip(names, descriptions, grids, start)
    ]
    seeds = {a.shape[0] for a in table.values()}
    n_seeds = seeds.pop() if len(seeds) == 1 else None

    def compute(v: dict) -> Data:
        key = resolve(v)
        x, mean, low, high = bands[key]
        a = table[key]
        return {
            "shown": key,
            "x": x,
            "mean": mean,
            "low": low,
            "high": high,
            "in_range": a[:, L // 2 : L].mean(1),
            "beyond": a[:, L:].mean(1),
        }

    def reference_of(key: tuple) -> tuple[str, Any] | None:
        if key in ref_bands:
            return ref_bands[key]
        return None if ref is None else (ref[0], ref_band)

    def draw(data: Data, v: dict, fig: Any) -> Any:
        r = reference_of(data["shown"])
        return explorer_frames.position_band_figure(
            data["x"],
            data["mean"],
            data["low"],
            data["high"],
            train_len=L,
            reference=None if r is None else r[1],
            label="selected (mean over seeds)",
            reference_label="reference" if r is None else r[0],
            n_seeds=n_seeds,
            ylim=ylim,
            ylabel=ylabel,
            title=describe(data["shown"]),
            fig=fig,
        )

    def extra(v: dict, data: Data) -> str:
        text = (
            f"mean over [{L // 2}, {L}): {data['in_range'].mean():.3f} · over [{L}, {P}): "
            f"{data['beyond'].mean():.3f}"
        )
        if data["shown"] in own_refs:
            label, a = own_refs[data["shown"]]
            d_in = data["in_range"].mean() - a[:, L // 2 : L].mean()
            d_out = data["beyond"].mean() - a[:, L:].mean()
            text += (
                f" · {label}: {a[:, L // 2 : L].mean():.3f} and {a[:, L:].mean():.3f} "
                f"(difference {_signed(d_in)} and {_signed(d_out)})"
            )
        wanted = tuple(v[nm] for nm in names)
        if match(wanted) is None:
            text += f" · no curve for this combination; shown: {describe(data['shown'])}"
        idle = [d for d, k in zip(descriptions, data["shown"]) if k is None]
        if idle:
            text += f" · {', '.join(idle)}: not applicable"
        return text

    def alt(v: dict, data: Data) -> str:
        r = reference_of(data["shown"])
        return (
            f"Line plot of {ylabel} against position 0 to {P}, the training length {L} shaded: "
            f"{describe(data['shown'])}, mean over seeds with a min-max band"
            + (f", beside {r[0]} dashed in black" if r else "")
        )

    return Explorer(
        name,
        params,
        compute,
        draw,
        alt,
        mode=mode,
        extra_label=extra,
        frame_key=lambda v: resolve(v),
    )
