"""The unit circle: each (sin, cos) pair of the sinusoidal table as a point that a shift of
position turns by a fixed angle.

Book layer: imports the core, torch, numpy and matplotlib.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.figure import Figure

from posenc_core.book.figures.style import (
    OKABE_ITO,
    SEQUENTIAL,
    first_column,
    panel_grid,
)

__all__ = [
    "unit_circle_figure",
]


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
    """One (sin, cos) pair of the sinusoidal encoding as points on the unit circle, one panel
    per frequency.

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
    cols = min(n, 3)
    fig, axes = panel_grid(n, min(height, 2.9), max_cols=cols)
    p = np.arange(n_positions)
    t = np.linspace(0, 2 * np.pi, 361)
    sc = None
    for ax, w in zip(axes, omegas):
        ax.plot(np.cos(t), np.sin(t), color="0.8", lw=1, zorder=1)
        sc = ax.scatter(
            np.cos(w * p),
            np.sin(w * p),
            c=p,
            cmap=SEQUENTIAL,
            s=16,
            zorder=3,
            vmin=0,
            vmax=n_positions - 1,
        )
        for q in labels:
            _position_label(ax, w, q)
        if shift is not None:
            for k, s in enumerate(starts):
                a, b = w * s, w * (s + shift)
                ax.annotate(
                    "",
                    xy=(np.cos(b), np.sin(b)),
                    xytext=(np.cos(a), np.sin(a)),
                    zorder=4,
                    arrowprops={
                        "arrowstyle": "->",
                        "color": OKABE_ITO[(k + 3) % len(OKABE_ITO)],
                        "lw": 1.6,
                    },
                )
                for q in (s, s + shift):
                    _position_label(ax, w, q, color=OKABE_ITO[(k + 3) % len(OKABE_ITO)])
        ax.set_aspect("equal")
        ax.set(
            xlim=(-1.4, 1.4),
            ylim=(-1.4, 1.4),
            xlabel="cos(ωp)  (dim 2i+1)",
        )
        ax.set_title(f"ω = {w:.3g} rad/position", fontsize=9)
        ax.grid(alpha=0.3)
    for ax in first_column(axes, cols):
        ax.set_ylabel("sin(ωp)  (dim 2i)")
    fig.colorbar(sc, ax=list(axes), location="bottom", fraction=0.04, aspect=50, label="position p")
    return fig


def _position_label(ax, omega: float, q: int, **kw) -> None:
    """Position ``q``'s number just outside the unit circle, at angle omega * q."""
    xy = (1.2 * np.cos(omega * q), 1.2 * np.sin(omega * q))
    ax.annotate(str(q), xy, ha="center", va="center", fontsize=8, **kw)
