"""Figures of matrices and tables: heatmaps of encodings and scores, the sinusoidal table,
masked attention matrices, the two RoPE pair layouts, T5's buckets.

Book layer: imports the core, torch, numpy and matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from posenc_core import _validation as check
from posenc_core.book.figures.style import (
    COLUMN_WIDTH,
    DIVERGING,
    MIN_TEXT_PT,
    OKABE_ITO,
    PHONE_DRAWING,
    PHONE_WIDTH,
    SEQUENTIAL,
    as_numpy,
    first_column,
    new_figure,
    panel_grid,
)
from posenc_core.sinusoidal import sinusoidal_table
from posenc_core.t5_bias import relative_position_bucket

__all__ = [
    "heatmap_figure",
    "sinusoidal_heatmap",
    "matrices_figure",
    "rows_figure",
    "masked_matrices_figure",
    "pair_layout_figure",
    "t5_bucket_figure",
]


def heatmap_figure(
    table: torch.Tensor | np.ndarray,
    *,
    highlight: int | None = None,
    title: str = "",
    xlabel: str = "dimension",
    ylabel: str = "position",
    signed: bool = True,
    width: float = COLUMN_WIDTH,
    height: float = 3.8,
) -> Figure:
    """An (n, d) table as an image, rows = positions, with an optional highlighted row.

    Args:
        table: ``(n, d)`` values.
        highlight: a row to outline and plot underneath as a profile (its "fingerprint").
        signed: diverging colours on [-1, 1] (else viridis on the data range).
    """
    data = as_numpy(table)
    if highlight is None:
        fig, ax = new_figure(width, height)
        axes = [ax]
    else:
        fig, axes = new_figure(width, height + 1.6, nrows=2, gridspec_kw={"height_ratios": [3, 1]})
    ax = axes[0]
    kw = {"cmap": DIVERGING, "vmin": -1, "vmax": 1} if signed else {"cmap": SEQUENTIAL}
    im = ax.imshow(data, aspect="auto", interpolation="nearest", **kw)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.01)
    if highlight is not None:
        ax.axhline(highlight - 0.5, color="black", lw=1.2)
        ax.axhline(highlight + 0.5, color="black", lw=1.2)
        prof = axes[1]
        prof.plot(np.arange(data.shape[1]), data[highlight], color=OKABE_ITO[0], lw=1.2)
        prof.set(
            xlim=(-0.5, data.shape[1] - 0.5),
            ylim=(-1.1, 1.1) if signed else None,
            xlabel=xlabel,
            ylabel=f"row {highlight}",
        )
        prof.grid(alpha=0.3)
    return fig


def sinusoidal_heatmap(
    n_positions: int = 100,
    d_model: int = 128,
    *,
    base: float = 10000.0,
    highlight: int | None = None,
) -> Figure:
    """Heatmap of :func:`~posenc_core.sinusoidal.sinusoidal_table` (positions x dimensions)."""
    table = sinusoidal_table(n_positions, d_model, base=base, dtype=torch.float64)
    title = f"Sinusoidal encoding, {n_positions} positions x {d_model} dims, base {base:g}"
    return heatmap_figure(table, highlight=highlight, title=title)


def matrices_figure(
    matrices: Mapping[str, torch.Tensor | np.ndarray],
    *,
    signed: bool = True,
    xlabel: str = "position",
    ylabel: str = "position",
    width: float | None = None,
    height: float = 3.4,
    vlim: float | None = None,
) -> Figure:
    """Several square matrices side by side with a shared colour scale (e.g. similarities)."""
    n = len(matrices)
    cols = 3 if n == 3 else 2
    fig, axes = panel_grid(n, height * 0.8 if n > 2 else height, max_cols=cols)
    datas = [as_numpy(m) for m in matrices.values()]
    if signed:
        lim = vlim if vlim is not None else max(float(np.abs(d).max()) for d in datas)
        kw = {"cmap": DIVERGING, "vmin": -lim, "vmax": lim}
    else:
        kw = {
            "cmap": SEQUENTIAL,
            "vmin": min(float(d.min()) for d in datas),
            "vmax": max(float(d.max()) for d in datas),
        }
    im = None
    for ax, (name, data) in zip(axes, zip(matrices, datas)):
        im = ax.imshow(data, interpolation="nearest", aspect="auto", **kw)
        ax.set(title=name, xlabel=xlabel)
    for ax in first_column(axes, cols):
        ax.set_ylabel(ylabel)
    fig.colorbar(im, ax=list(axes), fraction=0.03, pad=0.01)
    return fig


def rows_figure(
    rows: Mapping[str, torch.Tensor | np.ndarray],
    *,
    labels: Sequence[str] | None = None,
    dims: int = 48,
    title: str = "",
    width: float | None = None,
    height: float = 2.6,
) -> Figure:
    """Several small (tokens x dims) matrices side by side, rows labelled by token."""
    n = len(rows)
    fig, axes = panel_grid(n, height, max_cols=2)
    datas = [as_numpy(r)[:, :dims] for r in rows.values()]
    lim = max(float(np.abs(d).max()) for d in datas)
    im = None
    for ax, (name, data) in zip(axes, zip(rows, datas)):
        im = ax.imshow(
            data, aspect="auto", interpolation="nearest", cmap=DIVERGING, vmin=-lim, vmax=lim
        )
        ax.set(title=name, xlabel=f"output dimension (first {data.shape[1]})")
        tick_labels = name.split() if labels is None else labels
        if len(tick_labels) == data.shape[0]:
            ax.set_yticks(range(data.shape[0]), tick_labels)
    if title:
        fig.suptitle(title)
    fig.colorbar(im, ax=list(axes), fraction=0.03, pad=0.01)
    return fig


def masked_matrices_figure(
    matrices: Mapping[str, torch.Tensor | np.ndarray],
    *,
    annotate: bool = False,
    mask_label: str = "masked (−∞)",
    colorbar_label: str = "",
    xlabel: str = "key position j",
    ylabel: str = "query position i",
    width: float | None = None,
    height: float = 3.4,
) -> Figure:
    """Several square matrices side by side whose ``-inf`` entries are masked (e.g. ALiBi biases
    under a causal mask).

    Finite entries share one sequential colour scale (viridis, from the smallest finite value to
    the largest); ``-inf`` entries are drawn in light grey and named in a legend.

    Args:
        matrices: name -> ``(n, n)`` values, finite or ``-inf``.
        annotate: write each finite value in its cell (for small matrices, n <= 12).
        mask_label: legend text for the grey cells.
        colorbar_label: label of the colour bar.
        xlabel, ylabel: axis labels.
        width, height: figure size in inches.
    """

    datas = [as_numpy(m) for m in matrices.values()]
    finite = np.concatenate([d[np.isfinite(d)] for d in datas])
    if finite.size == 0:
        raise ValueError("matrices must have at least one finite entry")
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    cmap = plt.get_cmap(SEQUENTIAL).with_extremes(bad="0.86")
    n = len(datas)
    cols = 3 if n == 3 else 2
    fig, axes = panel_grid(n, height * 0.85 if n > 2 else height, max_cols=cols)
    im = None
    for ax, name, data in zip(axes, matrices, datas):
        shown = np.ma.masked_invalid(np.where(np.isneginf(data), np.nan, data))
        im = ax.imshow(shown, interpolation="nearest", aspect="equal", cmap=cmap, vmin=lo, vmax=hi)
        ax.set(title=name, xlabel=xlabel)
        if annotate and max(data.shape) <= 12:
            for (i, j), value in np.ndenumerate(data):
                if np.isfinite(value):
                    dark = (value - lo) / (hi - lo) < 0.55
                    ax.text(
                        j,
                        i,
                        f"{value + 0.0:.2g}",
                        ha="center",
                        va="center",
                        fontsize=MIN_TEXT_PT,
                        color="white" if dark else "black",
                    )
    axes[0].set_ylabel(ylabel)
    fig.colorbar(im, ax=list(axes), fraction=0.03, pad=0.01, label=colorbar_label)
    axes[-1].legend(
        handles=[Patch(facecolor="0.86", edgecolor="0.6", label=mask_label)],
        loc="upper right",
        fontsize=8,
        frameon=True,
        framealpha=0.9,
    )
    return fig


def pair_layout_figure(
    head_dim: int = 8,
    *,
    width: float = COLUMN_WIDTH,
    height: float = 2.3,
    labels_above: bool = False,
) -> Figure:
    """Which dimensions of a head RoPE rotates together, in the two layouts in use.

    Top row: the interleaved layout (RoFormer, Meta's Llama code), pair i = dims (2i, 2i+1).
    Bottom row: the half-split layout (Hugging Face's ``rotate_half``), pair i = dims
    (i, i + head_dim/2). Each box is one dimension, coloured by the pair it belongs to (the
    pair rotates at frequency theta_i); an arc joins the two members of every pair.

    Args:
        head_dim: even number of dimensions to draw, 2 to 32.
        width, height: figure size in inches.
        labels_above: name each row above it instead of on its left (a narrow column: the
            phone rendition draws it so).
    """
    head_dim = check.int_in_range("head_dim", head_dim, 2, 32)
    if head_dim % 2:
        raise ValueError(f"head_dim must be an even integer in 2..32, got {head_dim}")
    from matplotlib.patches import Arc, Rectangle

    half = head_dim // 2
    fig, ax = new_figure(width, height)
    cmap = plt.get_cmap(SEQUENTIAL)
    colour = [cmap(0.1 + 0.8 * i / max(half - 1, 1)) for i in range(half)]
    rows = {
        "interleaved: pair i = (2i, 2i+1)": (1.6, [j // 2 for j in range(head_dim)]),
        "half-split: pair i = (i, i + d/2)": (0.0, [j % half for j in range(head_dim)]),
    }
    if labels_above:  # more room between the rows, for the names
        rows = {k: (2.9 * (y > 0), pair_of) for k, (y, pair_of) in rows.items()}
    for label, (y, pair_of) in rows.items():
        for j, i in enumerate(pair_of):
            ax.add_patch(
                Rectangle((j, y), 0.9, 0.6, facecolor=colour[i], edgecolor="black", lw=0.6)
            )
            text_colour = "white" if i < half / 2 else "black"
            ax.text(
                j + 0.45,
                y + 0.3,
                rf"$\theta_{{{i}}}$",
                ha="center",
                va="center",
                fontsize=8,
                color=text_colour,
            )
            ax.text(j + 0.45, y - 0.12, str(j), ha="center", va="top", fontsize=7, color="0.3")
        for i in range(half):
            a, b = [j for j, p in enumerate(pair_of) if p == i]
            ax.add_patch(
                Arc(
                    ((a + b) / 2 + 0.45, y + 0.6),
                    b - a,
                    0.5 + 0.12 * (b - a),
                    theta1=0,
                    theta2=180,
                    color=colour[i],
                    lw=1.3,
                )
            )
        if labels_above:
            arcs = 0.6 + (0.5 + 0.12 * max(b - a for a, b in _pairs(pair_of))) / 2
            ax.text(-0.1, y + arcs + 0.15, label, ha="left", va="bottom", fontsize=9)
        else:
            ax.text(-0.3, y + 0.3, label, ha="right", va="center", fontsize=9)
    if labels_above:
        ax.set(xlim=(-0.2, head_dim + 0.1), ylim=(-0.55, 5.3))
    else:
        ax.set(xlim=(-0.2 - 0.35 * head_dim, head_dim + 0.1), ylim=(-0.55, 2.7))
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(
        f"Which dimensions rotate together (head_dim = {head_dim}; small numbers: dimension index)",
        fontsize=9,
    )
    if not labels_above:
        setattr(fig, PHONE_DRAWING, lambda: pair_layout_figure(
            head_dim, width=PHONE_WIDTH, height=height * 1.6, labels_above=True))  # fmt: skip
    return fig


def _pairs(pair_of: list[int]) -> list[tuple[int, int]]:
    """The two dimensions of each pair, from each dimension's pair index."""
    return [tuple(j for j, p in enumerate(pair_of) if p == i) for i in sorted(set(pair_of))]


def t5_bucket_figure(
    *,
    num_buckets: int = 32,
    max_distance: int = 128,
    span: int | None = None,
    grid: int | None = None,
    width: float = COLUMN_WIDTH,
    height: float = 6.4,
) -> Figure:
    """T5's bucket ids (:func:`~posenc_core.t5_bias.relative_position_bucket`), bidirectional
    (an encoder) beside causal (a decoder).

    Top row: the bucket id against ``r = j - i``, the exact region, the last bucket's start
    and ``max_distance`` marked. Bottom row: the ids on a grid of queries i and keys j.

    Args:
        num_buckets, max_distance: as in :func:`~posenc_core.t5_bias.relative_position_bucket`
            (T5's 32 and 128 by default).
        span: the top row shows ``r`` in ``-span .. span``, a positive integer (default
            ``max_distance + max_distance // 4``).
        grid: the bottom row shows ``grid`` queries and keys, a positive integer (default
            ``span``).
        width, height: figure size in inches.
    """
    for bidirectional in (True, False):  # both panels need valid arguments: check them now
        relative_position_bucket(
            torch.zeros(1, dtype=torch.long),
            bidirectional=bidirectional,
            num_buckets=num_buckets,
            max_distance=max_distance,
        )
    span = max_distance + max_distance // 4 if span is None else check.positive_int("span", span)
    grid = span if grid is None else check.positive_int("grid", grid)
    r = torch.arange(-span, span + 1)  # (2 span + 1,)
    pos = torch.arange(grid)
    rel = pos[None, :] - pos[:, None]  # (grid, grid), j - i
    fig, axes = new_figure(
        width, height, ncols=2, nrows=2, gridspec_kw={"height_ratios": [1, 1.25]}
    )
    images = []
    for col, bidirectional in enumerate((True, False)):
        kw = {
            "bidirectional": bidirectional,
            "num_buckets": num_buckets,
            "max_distance": max_distance,
        }
        ids = relative_position_bucket(r, **kw)  # (2 span + 1,)
        half = num_buckets // 2 if bidirectional else num_buckets
        exact = half // 2
        back = relative_position_bucket(-torch.arange(max_distance + 1), **kw)
        last = int((back == half - 1).nonzero()[0])  # the last bucket starts here
        name = "bidirectional (encoder)" if bidirectional else "causal (decoder)"
        ax = axes[0, col]
        lo = -exact + 0.5
        hi = exact - 0.5 if bidirectional else 0.5
        ax.axvspan(lo, hi, color="0.88", zorder=0, label=f"exact: |r| < {exact}")
        ax.plot(as_numpy(r), as_numpy(ids), color=OKABE_ITO[col], lw=1.4, drawstyle="steps-mid")
        marks = [(-last, f"last bucket: |r| ≥ {last}", "--")]
        marks.append((-max_distance, f"max_distance {max_distance}", ":"))
        if bidirectional:
            marks += [(last, None, "--"), (max_distance, None, ":")]
        for x, label, ls in marks:
            ax.axvline(x, color="0.35", ls=ls, lw=1, zorder=1, label=label)
        ax.set(
            title=name,
            xlabel="relative position r = j − i",
            ylabel="bucket id" if col == 0 else "",
            ylim=(-0.5, num_buckets - 0.5),
        )
        ax.grid(alpha=0.3)
        ax.legend(
            fontsize=7,
            framealpha=0.9,
            edgecolor="none",
            loc="upper left" if bidirectional else "upper right",
        )
        ax = axes[1, col]
        image = relative_position_bucket(rel, **kw)  # (grid, grid)
        images.append(
            ax.imshow(
                as_numpy(image),
                cmap=SEQUENTIAL,
                vmin=0,
                vmax=num_buckets - 1,
                interpolation="nearest",
                aspect="equal",
            )
        )
        ax.set(
            xlabel="key position j",
            ylabel="query position i" if col == 0 else "",
            title=f"bucket ids, {grid} × {grid}",
        )
    fig.colorbar(images[-1], ax=list(axes[1]), fraction=0.04, pad=0.02, label="bucket id")
    return fig
