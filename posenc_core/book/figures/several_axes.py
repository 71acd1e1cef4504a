"""RoPE over several axes (chapter 9): which axis each pair carries and how much a trained
model uses each pair.

Book layer: imports the core, torch, numpy and matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from posenc_core import _validation as check
from posenc_core.book.figures.style import (
    BELOW_ON_PHONE,
    COLUMN_WIDTH,
    OKABE_ITO,
    REMAKE_LEGEND,
    SEQUENTIAL,
    as_numpy,
    new_figure,
)
from posenc_core.multi_axis import pair_axes

__all__ = [
    "AXIS_COLOURS",
    "pair_axis_figure",
    "pair_usage_figure",
]


AXIS_COLOURS = {
    "row": OKABE_ITO[0],
    "col": OKABE_ITO[1],
    "t": OKABE_ITO[2],
    "h": OKABE_ITO[3],
    "w": OKABE_ITO[4],
}
"""The Okabe-Ito colour of each axis in :func:`pair_axis_figure` (other names get the rest of
the palette, in order of appearance)."""


_AXIS_NAMES = {"row": "row", "col": "column", "t": "temporal", "h": "height", "w": "width"}


def pair_axis_figure(
    head_dim: int = 128,
    mrope_section: Sequence[int] | None = None,
    *,
    schemes: Mapping[str, Sequence[str]] | None = None,
    width: float = COLUMN_WIDTH,
    height: float | None = None,
) -> Figure:
    """Which axis each frequency pair of a head turns with: a strip of head_dim/2 cells per
    scheme, coloured by axis (Okabe-Ito, ``AXIS_COLOURS``), pair indices on the x axis.

    One strip from :func:`~posenc_core.multi_axis.pair_axes` (M-RoPE's sections, or axial
    2-D's halves when ``mrope_section`` is None), or one per entry of ``schemes``.

    Args:
        head_dim: per-head width for the single strip (ignored with ``schemes``).
        mrope_section: three pair counts summing to head_dim/2, or None (axial 2-D).
        schemes: optional scheme name -> list of axis names, one per pair, all of one length
            (e.g. ``{"axial 2-D": pair_axes(128), "M-RoPE": pair_axes(128, (16, 24, 24))}``).
        width: figure width in inches; height default 1.0 + 0.6 per strip.

    Returns:
        the figure (one row of cells per scheme, one column per pair, and a legend).
    """
    if schemes is None:
        name = "axial 2-D" if mrope_section is None else f"M-RoPE {list(mrope_section)}"
        schemes = {name: pair_axes(head_dim, mrope_section)}
    if not isinstance(schemes, Mapping) or not schemes:
        raise ValueError(f"schemes must be a non-empty mapping of name -> axes, got {schemes!r}")
    rows = [list(axes) for axes in schemes.values()]
    n_pairs = len(rows[0])
    if n_pairs == 0 or any(len(r) != n_pairs for r in rows):
        raise ValueError(
            f"schemes must give every scheme the same positive number of pairs, got lengths "
            f"{[len(r) for r in rows]}"
        )
    names = list(dict.fromkeys(a for r in rows for a in r))  # axes in order of appearance
    spare = iter(c for c in OKABE_ITO if c not in AXIS_COLOURS.values())
    colours = [AXIS_COLOURS.get(a) or next(spare) for a in names]
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    index = np.array([[names.index(a) for a in r] for r in rows], dtype=float)  # (n, d/2)
    fig, ax = new_figure(width, height or 1.0 + 0.6 * len(rows))
    ax.imshow(
        index,
        cmap=ListedColormap(colours),
        vmin=-0.5,
        vmax=len(names) - 0.5,
        aspect="auto",
        interpolation="nearest",
    )
    ax.set_yticks(range(len(rows)), list(schemes))
    step = max(1, n_pairs // 16)
    ax.set_xticks(range(0, n_pairs, step))
    ax.set_xticks(np.arange(-0.5, n_pairs, 1), minor=True)
    ax.tick_params(axis="x", which="minor", length=0)
    ax.grid(which="minor", axis="x", color="white", lw=0.4)
    ax.set_xlabel("pair index i (within each axis's run of pairs, frequency falls left to right)")
    handles = [Patch(color=c, label=_AXIS_NAMES.get(a, a)) for a, c in zip(names, colours)]

    def legend(ncol: int):
        made = ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0),
                         ncol=ncol, fontsize=8, frameon=False)  # fmt: skip
        setattr(made, REMAKE_LEGEND, legend)  # fewer columns in the phone rendition
        return made

    legend(len(names))
    return fig


def pair_usage_figure(
    shares: np.ndarray | torch.Tensor,
    wavelengths_: np.ndarray | torch.Tensor | Sequence[float],
    *,
    train_len: int,
    seed: int = 0,
    width: float = COLUMN_WIDTH,
    height: float = 3.4,
) -> Figure:
    """Where a trained RoPE model puts its query/key norm, pair by pair (chapter 9).

    Left: the share of each pair in sum_i abs(q_i) abs(k_i), the mean over layers, heads and seeds
    as bars with a min-max range over seeds, and a dotted line at the uniform share 1/n; pairs
    that make at most an eighth of a turn within the training length are hatched. Right: the
    same shares for one seed, one row per layer and head.

    Args:
        shares: ``(S, l, h, n)`` shares (each (seed, layer, head) row sums to 1), e.g. from
            :func:`~posenc_core.book.instruments.frequency_use.pair_norms` of queries and keys.
        wavelengths_: ``(n,)`` wavelength of each pair, in positions.
        train_len: L, for the hatching and the tick labels (wavelength in units of L).
        seed: the seed shown on the right.

    Returns:
        the figure.
    """
    a = as_numpy(shares).astype(float)
    if a.ndim != 4:
        raise ValueError(f"shares must have shape (S, l, h, n), got {a.shape}")
    lam = np.asarray(as_numpy(torch.as_tensor(wavelengths_)), dtype=float)
    n = a.shape[-1]
    if lam.shape != (n,):
        raise ValueError(f"wavelengths_ must have shape ({n},), got {lam.shape}")
    L = check.positive_int("train_len", train_len)
    seed = check.int_in_range("seed", seed, 0, a.shape[0] - 1)
    per_seed = a.mean((1, 2))  # (S, n)
    mean, lo, hi = per_seed.mean(0), per_seed.min(0), per_seed.max(0)
    fig, (left, right) = new_figure(width, height, ncols=2, gridspec_kw={"width_ratios": [1.3, 1]})
    x = np.arange(n)
    slow = L / lam <= 0.125
    bars = left.bar(x, mean, color=OKABE_ITO[0], yerr=[mean - lo, hi - mean], capsize=3)
    for bar, s in zip(bars, slow):
        if s:
            bar.set_hatch("//")
            bar.set_facecolor("white")
            bar.set_edgecolor(OKABE_ITO[0])
    left.axhline(1 / n, color="0.3", ls=":", lw=1.2, label=f"uniform, 1/{n}")
    left.set_xticks(x, [f"{i}\n{w / L:.3g}L" for i, w in enumerate(lam)], fontsize=7)
    left.set(xlabel="pair (top) and its wavelength (bottom)", ylabel="share of |q| |k|")
    handles, _ = left.get_legend_handles_labels()
    hatched = Patch(facecolor="white", edgecolor=OKABE_ITO[0], hatch="//")
    legend = left.legend([*handles, hatched], [f"uniform, 1/{n}", "at most 1/8 turn within L"],
                         fontsize=7.5, frameon=False)  # fmt: skip
    setattr(legend, BELOW_ON_PHONE, True)
    left.grid(alpha=0.3, axis="y")
    rows = a[seed].reshape(-1, n)
    im = right.imshow(rows, cmap=SEQUENTIAL, aspect="auto", vmin=0)
    right.set_yticks(
        range(rows.shape[0]), [f"{y}.{h}" for y in range(a.shape[1]) for h in range(a.shape[2])]
    )
    right.set_xticks(x)
    right.set(xlabel="pair (0 = fastest)", ylabel="layer.head", title=f"seed {seed}")
    fig.colorbar(im, ax=right, fraction=0.05, pad=0.03, label="share")
    return fig
