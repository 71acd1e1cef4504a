"""Figures of curves: named curves with markers, wavelengths by base, similarity profiles,
mean curves with a band, accuracy by position band, and the language model's loss by position
with its seed band.

Book layer: imports the core, torch, numpy and matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from posenc_core import _validation as check
from posenc_core.book.figures.style import (
    BELOW_ON_PHONE,
    COLUMN_WIDTH,
    KEEP_COLUMNS,
    OKABE_ITO,
    SEQUENTIAL,
    TRAINING_TINT,
    as_numpy,
    first_column,
    legend_below,
    length_ticks,
    new_figure,
    panel_grid,
)
from posenc_core.sinusoidal import sinusoidal_wavelengths

__all__ = [
    "marked_curves_figure",
    "wavelength_figure",
    "paired_curves_figure",
    "offset_profiles_figure",
    "mean_band_figure",
    "band_panels_figure",
    "seed_band",
    "position_loss_figure",
]


def marked_curves_figure(
    x: Sequence[float]
    | torch.Tensor
    | np.ndarray
    | Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    curves: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    logx: bool = False,
    logy: bool = False,
    hlines: Mapping[str, float] | None = None,
    vlines: Mapping[str, float] | None = None,
    shade: tuple[float, float, str] | None = None,
    markers: bool = False,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
    legend_loc: str = "below",
    vline_label_at: float = 0.02,
    width: float = COLUMN_WIDTH,
    height: float = 3.8,
) -> Figure:
    """Named curves with named reference lines and an optional shaded range of x.

    Curves differ in colour (Okabe-Ito), line style and, with ``markers``, marker shape.

    Args:
        x: shared x values, or name -> x values per curve.
        curves: name -> y values.
        hlines: name -> y of a dotted horizontal reference line, labelled at the left.
        vlines: name -> x of a dotted vertical reference line, labelled along it.
        shade: ``(x0, x1, label)``: a grey band over that range of x (e.g. the training length).
        markers: draw a marker at every point.
        xlim, ylim: axis limits (default: matplotlib's).
        legend_loc: where the legend goes: ``"below"`` (default) under the plot, outside the
            axes, so that it never covers a curve; or a matplotlib location inside the axes.
        vline_label_at: height of the vertical lines' labels, as a fraction of the axes
            (0 = bottom).
        xlabel, ylabel, title, logx, logy, width, height: as in :func:`marked_curves_figure`.
    """
    fig, ax = new_figure(width, height)
    styles = ("-", "--", "-.", ":")
    marks = ("o", "s", "^", "v", "D", "P", "X", "*")
    if shade is not None:
        ax.axvspan(shade[0], shade[1], color="0.92", zorder=0, label=shade[2])
    for k, (name, y) in enumerate(curves.items()):
        xs = as_numpy(x[name]) if isinstance(x, Mapping) else as_numpy(x)
        ax.plot(
            xs,
            as_numpy(y),
            label=name,
            color=OKABE_ITO[k % len(OKABE_ITO)],
            ls=styles[k % len(styles)],
            lw=1.5,
            marker=marks[k % len(marks)] if markers else None,
            ms=3.5,
            zorder=2 + k,
        )
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    for name, value in (hlines or {}).items():
        _labelled_hline(ax, name, value, zorder=1)
    for name, value in (vlines or {}).items():
        ax.axvline(value, color="0.35", ls=":", lw=1, zorder=1)
        ax.annotate(
            name,
            (value, vline_label_at),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="bottom",
            ha="right",
            fontsize=8,
            color="0.25",
            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
        )
    if xlim is not None:
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    if legend_loc == "below":
        legend_below(fig)
    else:
        legend = ax.legend(fontsize=8, frameon=False, loc=legend_loc)
        setattr(legend, BELOW_ON_PHONE, True)  # a phone's narrower plot has no free corner
    return fig


def _labelled_hline(ax, name: str, value: float, **line) -> None:
    """A dotted horizontal line at ``value``, labelled ``name`` at the left."""
    ax.axhline(value, color="0.35", ls=":", lw=1, **line)
    ax.annotate(name, (0.01, value), xycoords=("axes fraction", "data"), va="bottom", fontsize=8,
                color="0.25")  # fmt: skip


def wavelength_figure(
    d_model: int,
    bases: Sequence[float],
    *,
    lengths: Mapping[str, float] | None = None,
    height: float = 3.6,
) -> Figure:
    """Wavelength 2*pi/omega_i of every (sin, cos) pair, one curve per base, log scale."""
    curves = {f"base {b:,.0f}": sinusoidal_wavelengths(d_model, base=b) for b in bases}
    x = np.arange(d_model // 2)
    return marked_curves_figure(
        x,
        curves,
        xlabel="pair index i (dimensions 2i, 2i+1)",
        ylabel="wavelength (positions)",
        title=f"Wavelengths for d_model = {d_model}",
        logy=True,
        hlines=lengths,
        height=height,
    )


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
    width: float = COLUMN_WIDTH,
    height: float = 3.6,
) -> Figure:
    """Two families of curves over a shared x that share colours: the k-th solid and the k-th
    dashed curve belong together (e.g. the same sequence length), the line style tells the
    families apart. Legend entries read "<solid_label>, <key>" and "<dashed_label>, <key>"."""
    fig, ax = new_figure(width, height)
    xs = as_numpy(x)
    for style, label, family in (("-", solid_label, solid), ("--", dashed_label, dashed)):
        for k, (name, y) in enumerate(family.items()):
            ax.plot(
                xs,
                as_numpy(y),
                ls=style,
                lw=1.6,
                color=OKABE_ITO[k % len(OKABE_ITO)],
                label=f"{label}, {name}",
            )
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    legend_below(fig, ncol=2)
    return fig


def offset_profiles_figure(
    offsets: Sequence[float] | torch.Tensor | np.ndarray,
    profiles: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    xlabel: str = "offset",
    strength_label: str = "range (max − min)",
    title: str = "",
    width: float = COLUMN_WIDTH,
    height: float | None = None,
) -> Figure:
    """Several curves over a shared offset axis, one row each: their shape and their size.

    Left: the curves as rows of an image, each rescaled to run from 0 (its minimum) to 1 (its
    maximum), so that a weak curve's shape is as visible as a strong one's (viridis). Right:
    each row's range (max - min) as a horizontal bar on a log scale, the size that the
    rescaling on the left hides.

    Args:
        offsets: ``(K,)`` evenly spaced x values (e.g. key position minus query position).
        profiles: name -> ``(K,)`` values, one row each, drawn top to bottom.
        xlabel, strength_label, title: axis labels and title.
        width, height: figure size in inches (height defaults to fit the rows).
    """
    names = list(profiles)
    data = np.stack([as_numpy(v) for v in profiles.values()])  # (R, K)
    x = as_numpy(offsets)
    if data.shape[1] != x.shape[0]:
        raise ValueError(
            f"each profile must have {x.shape[0]} values (one per offset), got {data.shape[1]}"
        )
    low, spread = data.min(axis=1, keepdims=True), np.ptp(data, axis=1, keepdims=True)
    scaled = (data - low) / np.where(spread == 0, 1.0, spread)
    rows = len(names)
    fig, (ax, bar) = new_figure(
        width, height or 0.3 * rows + 2.0, ncols=2, gridspec_kw={"width_ratios": [3.2, 1]}
    )
    half = (x[1] - x[0]) / 2 if x.shape[0] > 1 else 0.5
    im = ax.imshow(
        scaled,
        aspect="auto",
        interpolation="nearest",
        cmap=SEQUENTIAL,
        vmin=0,
        vmax=1,
        extent=(x[0] - half, x[-1] + half, rows - 0.5, -0.5),
    )
    ax.set_yticks(range(rows), names)
    ax.set(xlabel=xlabel, title=title)
    fig.colorbar(
        im,
        ax=ax,
        location="bottom",
        fraction=0.05,
        pad=0.02,
        aspect=40,
        label="each row rescaled: 0 = its minimum, 1 = its maximum",
    )
    bar.barh(range(rows), spread[:, 0], color=OKABE_ITO[0])
    bar.set_xscale("log")
    bar.set_ylim(rows - 0.5, -0.5)
    bar.set_yticks(range(rows), [])
    bar.set(xlabel=strength_label)
    bar.grid(alpha=0.3, axis="x")
    setattr(fig, KEEP_COLUMNS, True)  # the bars name no rows: they stay beside the table
    return fig


def mean_band_figure(
    x: Sequence[float] | torch.Tensor | np.ndarray,
    means: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    spreads: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray],
    *,
    reference: Mapping[str, Sequence[float] | torch.Tensor | np.ndarray] | None = None,
    xlabel: str = "",
    ylabel: str = "",
    title: str = "",
    logx: bool = False,
    width: float = COLUMN_WIDTH,
    height: float = 3.6,
) -> Figure:
    """Averages over random draws as lines, each with a shaded band of plus or minus its spread.

    Args:
        x: shared x values.
        means: name -> mean curve.
        spreads: name -> half-width of the band (e.g. one standard deviation), same keys as
            ``means``.
        reference: optional name -> curve drawn dashed in black (e.g. a closed form the means
            should follow).
        xlabel, ylabel, title, logx: as in :func:`marked_curves_figure`.
    """
    if set(spreads) != set(means):
        raise ValueError(
            f"spreads must have the keys of means, got {sorted(spreads)} and {sorted(means)}"
        )
    fig, ax = new_figure(width, height)
    xs = as_numpy(x)
    for k, (name, mean) in enumerate(means.items()):
        m, s = as_numpy(mean), as_numpy(spreads[name])
        colour = OKABE_ITO[k % len(OKABE_ITO)]
        ax.fill_between(xs, m - s, m + s, color=colour, alpha=0.18, lw=0)
        ax.plot(xs, m, color=colour, lw=1.6, label=f"{name} (mean ± 1 s.d.)")
    for name, curve in (reference or {}).items():
        ax.plot(xs, as_numpy(curve), color="black", ls="--", lw=1.0, label=name)
    ax.axhline(0, color="0.35", lw=0.8)
    if logx:
        ax.set_xscale("log")
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.grid(alpha=0.3)
    legend_below(fig)
    return fig


def band_panels_figure(
    panels: Mapping[str, Mapping[str, tuple]],
    *,
    xlabel: str = "",
    ylabel: str = "",
    vline: tuple[float, str] | None = None,
    hlines: Mapping[str, float] | None = None,
    logy: bool = False,
    logx: bool = False,
    ylim: tuple[float, float] | None = None,
    width: float | None = None,
    height: float = 3.6,
) -> Figure:
    """Side-by-side panels of mean curves with shaded spreads (e.g. over seeds), sharing y.

    Curves are told apart by colour (Okabe-Ito) and line style; NaN values leave gaps (for
    example lengths a model could not be run at).

    Args:
        panels: panel title -> (curve name -> ``(x, mean, spread)``); the band is mean ± spread.
        vline: ``(x, label)`` for a dotted vertical line in every panel (e.g. the training length).
        hlines: name -> y of a dotted horizontal reference line, labelled at the left.
        logy: logarithmic y axis.
        logx: logarithmic x axis, base 2 (for distances 1, 2, 4, ...; x must be > 0).
        ylim: y limits.
        xlabel, ylabel, width, height: as in :func:`marked_curves_figure`.
    """
    n = len(panels)
    fig, axes = panel_grid(n, height, max_cols=2, extra=0.4, sharey=True)
    styles = ("-", "--", "-.", ":")
    for ax, (title, curves) in zip(axes, panels.items()):
        for k, (name, (x, mean, spread)) in enumerate(curves.items()):
            xs, m, s = as_numpy(x), as_numpy(mean), as_numpy(spread)
            colour = OKABE_ITO[k % len(OKABE_ITO)]
            ax.fill_between(xs, m - s, m + s, color=colour, alpha=0.18, lw=0)
            ax.plot(xs, m, color=colour, ls=styles[k % len(styles)], lw=1.5, label=name)
        if vline is not None:
            # named in the legend below the plot: a label written along the line ran through
            # the curves it crosses
            ax.axvline(vline[0], color="0.35", ls=":", lw=1.2, label=vline[1])
        for name, value in (hlines or {}).items():
            _labelled_hline(ax, name, value)
        if logy:
            ax.set_yscale("log")
        if logx:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set(title=title, xlabel=xlabel)
        ax.grid(alpha=0.3)
    for ax in first_column(axes, 2):
        ax.set_ylabel(ylabel)
    legend_below(fig)
    return fig


def seed_band(
    curves: Sequence[Sequence[float]] | torch.Tensor | np.ndarray, *, bucket: int = 8
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per-position curves of several seeds, bucketed: the mean and the min-max band.

    Positions are grouped into consecutive buckets of ``bucket`` positions ([0, bucket),
    [bucket, 2 bucket), ...; a shorter last bucket if ``bucket`` does not divide P). Each seed's
    curve is averaged over each bucket first; the band is the smallest and largest of those
    seed means, the line their mean over seeds.

    Args:
        curves: ``(S, P)`` values, one row per seed (``(P,)``: one seed).
        bucket: positions per bucket, a positive integer (1: no bucketing).

    Returns:
        ``(x, mean, low, high)``, each ``(B,)``: the centre of each bucket (the mean of its
        positions) and the statistics over seeds.
    """
    a = as_numpy(curves)
    a = a[None] if a.ndim == 1 else a
    if a.ndim != 2 or a.shape[1] < 1 or a.shape[0] < 1:
        raise ValueError(f"curves must have shape (S, P) or (P,), got {tuple(np.shape(curves))}")
    w = check.positive_int("bucket", bucket)
    edges = list(range(0, a.shape[1], w)) + [a.shape[1]]
    per_seed = np.stack([a[:, lo:hi].mean(1) for lo, hi in zip(edges[:-1], edges[1:])], 1)
    x = np.array([(lo + hi - 1) / 2 for lo, hi in zip(edges[:-1], edges[1:])])
    return x, per_seed.mean(0), per_seed.min(0), per_seed.max(0)


def position_loss_figure(
    panels: Mapping[str, Mapping[str, Sequence[Sequence[float]] | np.ndarray]],
    *,
    train_len: int,
    reference: Mapping[str, Sequence[Sequence[float]] | np.ndarray] | None = None,
    targets: Mapping[str, float] | None = None,
    bucket: int = 8,
    ylim: tuple[float, float] | None = None,
    xlabel: str | None = None,
    ylabel: str = "held-out loss (nats per byte)",
    width: float | None = None,
    height: float = 3.8,
) -> Figure:
    """Loss by position over several seeds, in side-by-side panels that share y.

    Each ``(S, P)`` curve (one row per seed) is drawn as :func:`seed_band` gives it, a mean line
    and a min-max band; [0, L) is shaded and the x ticks are multiples of L.

    Args:
        panels: panel title -> (curve name -> ``(S, P)`` curves).
        train_len: L, in positions.
        reference: optional name -> ``(S, P)`` curves drawn in every panel in black, dashed,
            with a grey band (e.g. the unscaled model).
        targets: optional panel title -> x of a dotted vertical line in that panel (e.g. the
            length s L that a factor s targets).
        bucket: positions per bucket (see :func:`seed_band`).
        ylim: y limits (default: matplotlib's).
        xlabel: default ``"position (L = <train_len>)"``.
        ylabel, width, height: axis label and figure size (width default 4.2 per panel).

    Returns:
        the figure.
    """
    train_len = check.positive_int("train_len", train_len)
    if not isinstance(panels, Mapping) or not panels:
        raise ValueError(f"panels must be a non-empty mapping of title -> curves, got {panels!r}")
    n = len(panels)
    fig, axes = panel_grid(n, height, max_cols=2, extra=0.5, sharey=True)
    styles = ("-", "--", "-.", ":")
    n_pos = 0
    for ax, (title, curves) in zip(axes, panels.items()):
        ax.axvspan(
            0, train_len, color=TRAINING_TINT, zorder=0, label=f"training length L = {train_len}"
        )
        for name, c in (reference or {}).items():
            x, m, lo, hi = seed_band(c, bucket=bucket)
            ax.fill_between(x, lo, hi, color="0.6", alpha=0.3, lw=0, zorder=1)
            ax.plot(x, m, color="black", ls="--", lw=1.2, label=name, zorder=2)
            n_pos = max(n_pos, as_numpy(c).shape[-1])
        for k, (name, c) in enumerate(curves.items()):
            x, m, lo, hi = seed_band(c, bucket=bucket)
            colour = OKABE_ITO[k % len(OKABE_ITO)]
            ax.fill_between(x, lo, hi, color=colour, alpha=0.2, lw=0, zorder=3)
            ax.plot(x, m, color=colour, ls=styles[k % len(styles)], lw=1.5, label=name, zorder=4)
            n_pos = max(n_pos, as_numpy(c).shape[-1])
        if targets and title in targets:
            ax.axvline(targets[title], color="0.35", ls=":", lw=1.2, zorder=1)
        length_ticks(ax, train_len, n_pos)
        ax.set_xlim(0, n_pos)
        if ylim is not None:
            ax.set_ylim(*ylim)
        ax.set(title=title, xlabel=xlabel or f"position (L = {train_len})")
        ax.grid(alpha=0.3)
    for ax in first_column(axes, 2):
        ax.set_ylabel(ylabel)
    legend_below(fig)
    return fig
