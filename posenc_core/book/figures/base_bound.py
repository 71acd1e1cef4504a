"""The lower bound of the RoPE base (Men et al. 2024): the smallest base that keeps
``B(m) = sum_i cos(m theta_i) >= 0`` over a context, against context length, with published
values of the bound and the bases of real models set beside it.

Book layer: imports numpy and matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

from posenc_core.book.figures.style import OKABE_ITO, as_numpy, legend_below, panel_grid

__all__ = [
    "base_bound_figure",
]


def _checked(name: str, values, n: int) -> np.ndarray:
    """``values`` as a float array of ``n`` positive, finite numbers."""
    array = as_numpy(values).ravel()
    if array.shape != (n,):
        raise ValueError(f"{name} must hold one value per context length ({n}), got {len(array)}")
    if not (np.isfinite(array).all() and (array > 0).all()):
        raise ValueError(f"{name} must be positive and finite, got {array.tolist()}")
    return array


def base_bound_figure(
    contexts: Sequence[int],
    bound: Sequence[float],
    published: Mapping[str, Sequence[float]] | None = None,
    fails: Mapping[str, Sequence[bool]] | None = None,
    models: Mapping[str, tuple[float, float]] | None = None,
    *,
    head_dim: int = 128,
    row_height: float = 2.5,
) -> Figure:
    """The smallest RoPE base against context length (top) and each published value of it
    divided by the computed one (bottom).

    Top, log-log: the computed bound as a line through its points, each source's published
    values as markers, and each model as a star at (its context, its base). Bottom: published
    over computed, with a dotted line at 1. A marker is filled where the published base, taken
    as printed, meets the bound (``B(m) >= 0`` over the context), hollow where it does not.

    Args:
        contexts: the context lengths L (positive).
        bound: the computed smallest base for each L.
        published: source name -> its published base for each L.
        fails: source name -> for each L, whether its published base fails the test (default:
            none fails).
        models: model name -> (context length, base).
        head_dim: the head width the bound was computed for (shown in the title).
        row_height: height of each panel in inches.

    Returns:
        The figure, with the computed bound as the first line of the first axes.
    """
    n = len(contexts)
    if n == 0:
        raise ValueError("contexts must hold at least one context length, got none")
    x = _checked("contexts", contexts, n)
    y = _checked("bound", bound, n)
    published = dict(published or {})
    rows = {name: _checked(f"published[{name!r}]", v, n) for name, v in published.items()}
    failing = {}
    for name in rows:
        flags = np.asarray((fails or {}).get(name, [False] * n), dtype=bool).ravel()
        if flags.shape != (n,):
            raise ValueError(f"fails[{name!r}] must hold one flag per context length ({n})")
        failing[name] = flags
    unknown = set(fails or {}) - set(rows)
    if unknown:
        raise ValueError(f"fails names sources not in published: {sorted(unknown)}")

    fig, (top, bottom) = panel_grid(2, row_height, max_cols=1, extra=0.5)
    top.plot(x, y, color="0.15", lw=1.5, marker="o", ms=3.5, label="computed bound", zorder=3)
    marks = ("s", "^", "D", "v")
    for k, (name, values) in enumerate(rows.items()):
        colour, mark = OKABE_ITO[k % len(OKABE_ITO)], marks[k % len(marks)]
        for ax, ys in ((top, values), (bottom, values / y)):
            for hollow in (False, True):
                keep = failing[name] == hollow
                if not keep.any():
                    continue
                ax.scatter(
                    x[keep],
                    ys[keep],
                    s=36 - 8 * k,
                    marker=mark,
                    facecolors="none" if hollow else colour,
                    edgecolors=colour,
                    linewidths=1.3,
                    zorder=4 + k,
                    label=f"{name}{', fails the test' if hollow else ''}" if ax is top else None,
                )
    for name, (context, base) in (models or {}).items():
        top.scatter([context], [base], marker="*", s=90, color=OKABE_ITO[2], zorder=6,
                    label="a model's base" if name == next(iter(models)) else None)  # fmt: skip
        # a star in the last column is labelled well below it, clear of the line, with a tick
        last = context >= x.max()
        tick = {"arrowstyle": "-", "lw": 0.6, "color": "0.45"} if last else None
        top.annotate(name, (context, base), xytext=(2, -36) if last else (5, 4),
                     textcoords="offset points", ha="right" if last else "left",
                     va="top" if last else "bottom", fontsize=8, color="0.15",
                     arrowprops=tick)  # fmt: skip
    for ax in (top, bottom):
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [f"{int(c) // 1024}K" if c % 1024 == 0 else f"{int(c)}" for c in x])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    top.set_yscale("log")
    top.set(ylabel="smallest base b", title=f"Lower bound of the RoPE base, head_dim {head_dim}")
    bottom.axhline(1.0, color="0.35", ls=":", lw=1, zorder=1)
    bottom.set(xlabel="context length L", ylabel="published ÷ computed")
    legend_below(fig, ax=top, ncol=2)
    return fig
