"""The intro's one-figure overview of the schemes.

Book layer: imports the core, torch, numpy and matplotlib.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from posenc_core import _validation as check
from posenc_core.book.figures.style import (
    DIVERGING,
    OKABE_ITO,
    SEQUENTIAL,
    as_numpy,
    panel_grid,
)
from posenc_core.sinusoidal import sinusoidal_table

__all__ = [
    "schemes_overview_figure",
]


def schemes_overview_figure(
    *, n_positions: int = 64, d_model: int = 64, max_offset: int = 256, n_heads: int = 8
) -> Figure:
    """The book in one figure: four ways of giving attention position, computed by
    posenc_core. (a) the sinusoidal table added to the tokens; (b) the similarity of two of
    its rows, a function of their offset only; (c) RoPE's score for a query and key that
    match (all ones, head_dim 128) as the offset grows, for two bases; (d) ALiBi's bias, a
    straight line per head.

    Args:
        n_positions, d_model: size of the sinusoidal table in (a).
        max_offset: offsets 0 .. max_offset in (b)-(d).
        n_heads: ALiBi heads drawn in (d).
    """
    from posenc_core.alibi import alibi_slopes
    from posenc_core.analysis import rope_score_vs_distance, sinusoidal_similarity

    n_positions = check.positive_int("n_positions", n_positions)
    d_model = check.positive_int("d_model", d_model)
    max_offset = check.positive_int("max_offset", max_offset)
    n_heads = check.positive_int("n_heads", n_heads)
    if d_model % 2:
        raise ValueError(f"d_model must be even, got {d_model}")
    fig, (a, b, c, d) = panel_grid(4, 2.5, max_cols=2)
    im = a.imshow(
        as_numpy(sinusoidal_table(n_positions, d_model, dtype=torch.float64)),
        aspect="auto",
        interpolation="nearest",
        cmap=DIVERGING,
        vmin=-1,
        vmax=1,
    )
    a.set(xlabel="dimension", ylabel="position", title="(a) sinusoidal: add a vector")
    fig.colorbar(im, ax=a, fraction=0.05, pad=0.02)
    k = np.arange(max_offset + 1)
    b.plot(k, as_numpy(sinusoidal_similarity(list(k), d_model)), color=OKABE_ITO[0], lw=1.4)
    b.set(xlabel="offset k", ylabel="cos(PE(p), PE(p+k))", title="(b) rows know their offset")
    far = np.unique(np.geomspace(1, 64 * max_offset, 200).astype(int))
    for j, base in enumerate((10000.0, 500000.0)):
        score = as_numpy(rope_score_vs_distance(list(far), 128, base=base))
        c.plot(far, score, color=OKABE_ITO[1 + j], lw=1.3, label=f"base {base:,.0f}")
    c.set_xscale("log")
    c.set(xlabel="offset n − m", ylabel="score / head_dim", title="(c) RoPE: rotate q and k")
    c.legend(fontsize=8, frameon=False, loc="upper right")
    slopes = as_numpy(alibi_slopes(n_heads, dtype=torch.float64))
    for h, m in enumerate(slopes):
        d.plot(k, -m * k, color=plt.get_cmap(SEQUENTIAL)(h / max(n_heads - 1, 1)), lw=1.2)
    d.set(xlabel="distance to the key", ylabel="bias added to the score")
    d.set_title("(d) ALiBi: a line per head")
    for ax in (b, c, d):
        ax.grid(alpha=0.3)
    return fig
