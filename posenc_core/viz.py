"""Figures for the book, drawn from posenc_core's numbers.

This module imports matplotlib; the numerical modules never import it. Every function
returns a :class:`matplotlib.figure.Figure` (chapters glue or display it) and uses
colour-blind-safe colours: ColorBrewer's RdBu for signed values in [-1, 1], viridis for
sequential ones, and the Okabe-Ito palette for lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from .sinusoidal import sinusoidal_table, wavelengths

OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
"""Okabe and Ito's palette, distinguishable under the common colour-vision deficiencies."""

DIVERGING = "RdBu_r"
SEQUENTIAL = "viridis"


def _np(t: torch.Tensor | np.ndarray) -> np.ndarray:
    return t.detach().cpu().double().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=float)


def _figure(width: float = 7.0, height: float = 3.6, ncols: int = 1, nrows: int = 1, **kw):
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kw)
    plt.close(fig)  # keep pyplot from showing it a second time; callers display or glue it
    return fig, axes


def heatmap_figure(
    table: torch.Tensor | np.ndarray,
    *,
    highlight: int | None = None,
    title: str = "",
    xlabel: str = "dimension",
    ylabel: str = "position",
    signed: bool = True,
    width: float = 7.0,
    height: float = 3.8,
) -> Figure:
    """An (n, d) table as an image, rows = positions, with an optional highlighted row.

    Args:
        table: ``(n, d)`` values.
        highlight: a row to outline and plot underneath as a profile (its "fingerprint").
        signed: diverging colours on [-1, 1] (else viridis on the data range).
    """
    data = _np(table)
    if highlight is None:
        fig, ax = _figure(width, height)
        axes = [ax]
    else:
        fig, axes = _figure(width, height + 1.6, nrows=2, gridspec_kw={"height_ratios": [3, 1]})
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
        prof.set(xlim=(-0.5, data.shape[1] - 0.5), ylim=(-1.1, 1.1) if signed else None,
                 xlabel=xlabel, ylabel=f"row {highlight}")
        prof.grid(alpha=0.3)
    return fig


def sinusoidal_heatmap(
    n_positions: int = 100, d_model: int = 128, *, base: float = 10000.0, highlight: int | None = None
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
    fig, axes = _figure(width or 3.3 * n + 0.6, height, ncols=n)
    axes = np.atleast_1d(axes)
    datas = [_np(m) for m in matrices.values()]
    if signed:
        lim = vlim if vlim is not None else max(float(np.abs(d).max()) for d in datas)
        kw = {"cmap": DIVERGING, "vmin": -lim, "vmax": lim}
    else:
        kw = {"cmap": SEQUENTIAL, "vmin": min(float(d.min()) for d in datas), "vmax": max(float(d.max()) for d in datas)}
    im = None
    for ax, (name, data) in zip(axes, zip(matrices, datas)):
        im = ax.imshow(data, interpolation="nearest", aspect="auto", **kw)
        ax.set(title=name, xlabel=xlabel)
    axes[0].set_ylabel(ylabel)
    fig.colorbar(im, ax=list(axes), fraction=0.03, pad=0.01)
    return fig


def curves_figure(
    x: Sequence[float] | torch.Tensor | np.ndarray | Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    curves: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    hlines: Mapping[str, float] | None = None,
    width: float = 7.0,
    height: float = 3.6,
    markers: bool = False,
) -> Figure:
    """Line plot of several named curves (shared x, or one x per curve when ``x`` is a dict)."""
    fig, ax = _figure(width, height)
    styles = ("-", "--", "-.", ":")
    for k, (name, y) in enumerate(curves.items()):
        xs = _np(x[name]) if isinstance(x, Mapping) else _np(x)
        ax.plot(xs, _np(y), label=name, color=OKABE_ITO[k % len(OKABE_ITO)],
                ls=styles[(k // len(OKABE_ITO)) % len(styles)], lw=1.5, marker="o" if markers else None, ms=3)
    for k, (name, value) in enumerate((hlines or {}).items()):
        ax.axhline(value, color="0.35", ls=":", lw=1)
        ax.annotate(name, (0.01, value), xycoords=("axes fraction", "data"), va="bottom", fontsize=8, color="0.25")
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    if len(curves) > 1:
        ax.legend(fontsize=8, frameon=False)
    return fig


def wavelength_figure(
    d_model: int, bases: Sequence[float], *, lengths: Mapping[str, float] | None = None, height: float = 3.6
) -> Figure:
    """Wavelength 2*pi/omega_i of every (sin, cos) pair, one curve per base, log scale."""
    curves = {f"base {b:,.0f}": wavelengths(d_model, base=b) for b in bases}
    x = np.arange(d_model // 2)
    return curves_figure(
        x, curves, xlabel="pair index i (dimensions 2i, 2i+1)", ylabel="wavelength (positions)",
        title=f"Wavelengths for d_model = {d_model}", logy=True, hlines=lengths, height=height,
    )


def rows_figure(
    rows: Mapping[str, torch.Tensor | np.ndarray], *, labels: Sequence[str] | None = None, dims: int = 48,
    title: str = "", width: float | None = None, height: float = 2.6,
) -> Figure:
    """Several small (tokens x dims) matrices side by side, rows labelled by token."""
    n = len(rows)
    fig, axes = _figure(width or 3.4 * n + 0.6, height, ncols=n)
    axes = np.atleast_1d(axes)
    datas = [_np(r)[:, :dims] for r in rows.values()]
    lim = max(float(np.abs(d).max()) for d in datas)
    im = None
    for ax, (name, data) in zip(axes, zip(rows, datas)):
        im = ax.imshow(data, aspect="auto", interpolation="nearest", cmap=DIVERGING, vmin=-lim, vmax=lim)
        ax.set(title=name, xlabel=f"output dimension (first {data.shape[1]})")
        tick_labels = name.split() if labels is None else labels
        if len(tick_labels) == data.shape[0]:
            ax.set_yticks(range(data.shape[0]), tick_labels)
    if title:
        fig.suptitle(title)
    fig.colorbar(im, ax=list(axes), fraction=0.03, pad=0.01)
    return fig


def unit_circle_figure(
    omegas: Sequence[float],
    n_positions: int,
    *,
    shift: int | None = None,
    starts: Sequence[int] = (),
    labels: Sequence[int] = (0,),
    width: float | None = None,
    height: float = 3.5,
) -> Figure:
    """One (sin, cos) pair of the sinusoidal encoding as points on the unit circle, one panel per frequency.

    Position p is drawn at angle omega * p: x = cos(omega p) (dimension 2i+1), y = sin(omega p)
    (dimension 2i), so p = 0 sits at (1, 0) and increasing p turns counter-clockwise. With
    ``shift`` = k, an arrow joins each start p to p + k: the same turn omega * k whatever p is.

    Args:
        omegas: angular frequencies in radians per position, one panel each.
        n_positions: positions 0 .. n_positions - 1 are drawn, coloured by position.
        shift: the step k drawn from each start (needs ``starts``).
        starts: start positions p of the arrows p -> p + k.
        labels: positions to label with their number.
    """
    n = len(omegas)
    fig, axes = _figure(width or 3.1 * n + 0.8, height, ncols=n)
    axes = np.atleast_1d(axes)
    p = np.arange(n_positions)
    t = np.linspace(0, 2 * np.pi, 361)
    sc = None
    for ax, w in zip(axes, omegas):
        ax.plot(np.cos(t), np.sin(t), color="0.8", lw=1, zorder=1)
        sc = ax.scatter(np.cos(w * p), np.sin(w * p), c=p, cmap=SEQUENTIAL, s=16, zorder=3,
                        vmin=0, vmax=n_positions - 1)
        for q in labels:
            ax.annotate(str(q), (1.2 * np.cos(w * q), 1.2 * np.sin(w * q)), ha="center", va="center", fontsize=8)
        if shift is not None:
            for k, s in enumerate(starts):
                a, b = w * s, w * (s + shift)
                ax.annotate("", xy=(np.cos(b), np.sin(b)), xytext=(np.cos(a), np.sin(a)), zorder=4,
                            arrowprops={"arrowstyle": "->", "color": OKABE_ITO[(k + 3) % len(OKABE_ITO)], "lw": 1.6})
                for q in (s, s + shift):
                    ax.annotate(str(q), (1.2 * np.cos(w * q), 1.2 * np.sin(w * q)), ha="center", va="center",
                                fontsize=8, color=OKABE_ITO[(k + 3) % len(OKABE_ITO)])
        ax.set_aspect("equal")
        ax.set(xlim=(-1.4, 1.4), ylim=(-1.4, 1.4), xlabel="cos(ωp)  (dim 2i+1)",
               title=f"ω = {w:.3g} rad/position")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("sin(ωp)  (dim 2i)")
    fig.colorbar(sc, ax=list(axes), fraction=0.03, pad=0.01, label="position p")
    return fig


def paired_curves_figure(
    x: Sequence[float] | torch.Tensor | np.ndarray,
    solid: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    dashed: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    solid_label: str,
    dashed_label: str,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    width: float = 7.0,
    height: float = 3.6,
) -> Figure:
    """Two families of curves over a shared x that share colours: the k-th solid and the k-th
    dashed curve belong together (e.g. the same sequence length), the line style tells the
    families apart. Legend entries read "<solid_label>, <key>" and "<dashed_label>, <key>"."""
    fig, ax = _figure(width, height)
    xs = _np(x)
    for style, label, family in (("-", solid_label, solid), ("--", dashed_label, dashed)):
        for k, (name, y) in enumerate(family.items()):
            ax.plot(xs, _np(y), ls=style, lw=1.6, color=OKABE_ITO[k % len(OKABE_ITO)], label=f"{label}, {name}")
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, ncol=2)
    return fig
