"""Loss against retrieval: one point per seed for each method, the mean marked (chapter 7c).

:func:`loss_retrieval_figure` draws, panel by panel (a factor each), every method's mean loss
beyond the training length on x against its retrieval (the probe's control - copy) on y: small
points for the seeds, a large marker for their mean. Lower is better on x, higher on y, so a
method up and to the left of another is better both ways, and two methods whose order on x and
on y differ are ranked differently by the two measures.

Book layer: imports matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from posenc_core.book.figures.style import OKABE_ITO, legend_below, panel_grid

__all__ = ["loss_retrieval_figure"]

_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "<")
_Points = tuple[Sequence[float], Sequence[float]]


def loss_retrieval_figure(
    panels: Mapping[str, Mapping[str, _Points]],
    *,
    reference: Mapping[str, _Points] | None = None,
    tuned: Mapping[str, str] | None = None,
    xlabel: str = "loss beyond L (nats per byte; lower is better)",
    ylabel: str = "retrieval, control − copy (nats per byte)",
    height: float = 3.4,
) -> Figure:
    """Each method's per-seed (loss, retrieval) points and their mean, in side-by-side panels.

    Args:
        panels: panel title -> (method label -> ``(losses, retrievals)``, one value per seed).
        reference: label -> ``(losses, retrievals)`` drawn in every panel in black (e.g. the
            model with no scaling).
        tuned: label -> the label whose colour it takes, drawn hollow (a fine-tuned method
            beside the same method untuned).
        xlabel, ylabel: axis labels; height: inches per row of panels.

    Returns:
        the figure (a label has the same colour and marker in every panel; one legend below).

    Raises:
        ValueError: no panels, or a label's losses and retrievals differ in length or are empty.
    """
    if not isinstance(panels, Mapping) or not panels:
        raise ValueError(f"panels must be a non-empty mapping of title -> points, got {panels!r}")
    tuned = dict(tuned or {})
    labels = [k for points in panels.values() for k in points if k not in tuned]
    colours = {k: OKABE_ITO[i % 6] for i, k in enumerate(dict.fromkeys(labels))}
    markers = {k: _MARKERS[i % len(_MARKERS)] for i, k in enumerate(dict.fromkeys(labels))}
    fig, axes = panel_grid(len(panels), height, max_cols=2, extra=0.9, sharex=True, sharey=True)
    handles: dict[str, Line2D] = {}
    for ax, (title, points) in zip(axes, panels.items()):
        entries = [(k, v, "black", "*", True) for k, v in (reference or {}).items()]
        for k, v in points.items():
            base = tuned.get(k, k)
            entries.append((k, v, colours.get(base, "0.4"), markers.get(base, "o"), k not in tuned))
        for label, (xs, ys), colour, marker, filled in entries:
            x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
            if x.shape != y.shape or x.ndim != 1 or x.size == 0:
                raise ValueError(
                    f"{title!r}/{label!r}: losses and retrievals must be two equal, non-empty "
                    f"lists, got shapes {x.shape} and {y.shape}"
                )
            face = colour if filled else "white"
            ax.scatter(x, y, s=14, facecolors=face if filled else "none", edgecolors=colour,
                       lw=0 if filled else 0.9, alpha=0.6, zorder=3)  # fmt: skip
            handles[label] = ax.plot(
                [x.mean()], [y.mean()], ls="none", marker=marker, ms=8, mfc=face, mec=colour,
                mew=1.6, zorder=4, label=label,
            )[0]  # fmt: skip
        ax.axhline(0, color="0.6", lw=0.8, zorder=1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel, fontsize=8)
    legend_below(fig, list(handles.values()), list(handles), ncol=4)
    return fig
