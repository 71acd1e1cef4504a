"""The positional plans of several models drawn layer by layer: one strip per model.

:func:`layer_strips_figure` draws what :func:`~posenc_core.rope.layer_plan` reads from each
config: one cell per decoder layer, coloured by its attention kind, hollow and hatched where
the layer does not rotate, with small marks above the cells for a base unlike the model's
other rotating layers, scaling, partial rotation (or p-RoPE), a query temperature and sink
logits; under each strip the one-line summary of :func:`plan_summary`.

Book layer: imports matplotlib and the plans of the core.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from posenc_core.book.figures.style import (
    COLUMN_WIDTH,
    OKABE_ITO,
    PHONE_DRAWING,
    PHONE_WIDTH,
    legend_below,
    new_figure,
)
from posenc_core.rope import LayerPlan

__all__ = [
    "plan_summary",
    "layer_strips_figure",
]

ATTENTION_COLOURS = {
    "full": OKABE_ITO[0],
    "sliding": OKABE_ITO[1],
    "chunked": OKABE_ITO[2],
    "linear": OKABE_ITO[4],
}
"""The colour of a cell by the layer's attention kind (Okabe and Ito's palette)."""

_ATTENTION_NAMES = {
    "full": "full attention",
    "sliding": "sliding window",
    "chunked": "chunked",
    "linear": "linear attention",
}
_NO_ROTATION_HATCH = "////"
_UNIT = 0.28  # inches of strip per unit of y (a cell is 1 tall, a lane of marks 0.5)
# mark kind -> (marker, colour, legend text); drawn in this order, one lane each above a strip
_MARKS = {
    "base": ("v", "0.1", "base unlike the other rotating layers"),
    "scaling": ("D", OKABE_ITO[3], "scaled rotation (rope_type)"),
    "partial": ("o", OKABE_ITO[5], "partial rotation or p-RoPE"),
    "temperature": ("^", OKABE_ITO[4], "query temperature"),
    "sinks": ("s", "0.45", "sink logits"),
}


def _layers(what: str, plan: object) -> list[LayerPlan]:
    """``plan`` as a list of at least one LayerPlan; ``what`` names it in the message."""
    layers = list(plan) if isinstance(plan, Sequence) and not isinstance(plan, str) else None
    if not layers or not all(isinstance(p, LayerPlan) for p in layers):
        raise TypeError(
            f"{what} must be what posenc_core.rope.layer_plan returns (one LayerPlan per "
            f"layer, at least one), got {type(plan).__name__}"
        )
    return layers


def _checked(plans: Mapping[str, Sequence[LayerPlan]]) -> dict[str, list[LayerPlan]]:
    if not isinstance(plans, Mapping) or not plans:
        raise TypeError(
            "plans must be a non-empty mapping of model name -> layer_plan(config), got "
            f"{type(plans).__name__}{' (empty)' if isinstance(plans, Mapping) else ''}"
        )
    return {str(name): _layers(f"plans[{name!r}]", plan) for name, plan in plans.items()}


def _rotated_share(plan: LayerPlan) -> float:
    """The share of the head that rotates: rotary_dim / head_dim, less p-RoPE's zero pairs."""
    rope = plan.rope
    s = rope.scaling
    dims = rope.rotary_dim
    if s.rope_type == "proportional" and s.partial_rotary_factor is not None:
        dims = 2 * int(s.partial_rotary_factor * rope.rotary_dim // 2)
    return dims / rope.head_dim


def _common_base(layers: Sequence[LayerPlan]) -> float | None:
    """The base most of the rotating layers use, or None when they all use one (or none
    rotates): layers with another base get the "base" mark."""
    bases = Counter(p.rope.base for p in layers if p.rope is not None)
    return bases.most_common(1)[0][0] if len(bases) > 1 else None


def _marks(plan: LayerPlan, common_base: float | None) -> list[str]:
    """The mark kinds of one layer, in ``_MARKS``' order."""
    rope = plan.rope
    found = []
    if rope is not None:
        if common_base is not None and rope.base != common_base:
            found.append("base")
        if rope.scaling.rope_type not in ("default", "proportional"):
            found.append("scaling")
        if _rotated_share(plan) < 1:
            found.append("partial")
    if plan.temperature is not None:
        found.append("temperature")
    if plan.sinks:
        found.append("sinks")
    return found


def _short(base: float) -> str:
    """10000 -> '10k', 1e6 -> '1M', 150000 -> '150k'."""
    for size, unit in ((1e6, "M"), (1e3, "k")):
        if base >= size and base % (size / 10) == 0:
            return f"{base / size:g}{unit}"
    return f"{base:g}"


def _extras(plan: LayerPlan, several_bases: bool) -> list[str]:
    """What a layer group adds to its kind in the summary: base, scaling, share, temperature."""
    rope, out = plan.rope, []
    if rope is not None:
        out.append(f"base {_short(rope.base)}")
        s = rope.scaling
        if s.rope_type == "proportional":
            out.append(f"p-RoPE {s.partial_rotary_factor:g}")
        elif s.rope_type != "default":
            out.append(s.rope_type + ("" if s.factor is None else f" x{s.factor:g}"))
        share = _rotated_share(plan)
        if share < 1 and s.rope_type != "proportional":
            out.append(f"partial {share:g}")
    if plan.temperature is not None:
        out.append("temperature")
    if plan.sinks:
        out.append("sinks")
    return out


def plan_summary(plans: Sequence[LayerPlan]) -> str:
    """One line that says what a model's layers do with positions, group by group.

    Layers are grouped by attention kind, window, whether they rotate and what they add
    (base, scaling, share rotated, temperature, sinks), in the order their first layer comes;
    what every group shares is said once at the end, after a semicolon.

    Args:
        plans: the model's :func:`~posenc_core.rope.layer_plan` (one ``LayerPlan`` a layer).

    Returns:
        The summary, as for Llama 4 Scout (``tests/book/test_layer_strips.py``)
        ``48 layers: 36 chunked (8192) RoPE, base 500k, llama3 x16 + 12 full NoPE, temperature``.
    """
    layers = _layers("plans", plans)
    several = _common_base(layers) is not None
    groups: dict[tuple, int] = {}
    for p in layers:
        kind = (p.attention, p.window, p.rope is not None, tuple(_extras(p, several)))
        groups[kind] = groups.get(kind, 0) + 1
    shared = set.intersection(*(set(extras) for _, _, _, extras in groups))
    if len(groups) == 1:
        shared = set()
    parts = []
    for (attention, window, rotates, extras), count in groups.items():
        text = f"{count} {attention}" + ("" if window is None else f" ({window})")
        text += " RoPE" if rotates else (" NoPE" if attention != "linear" else "")
        own = [e for e in extras if e not in shared]
        parts.append(", ".join([text, *own]))
    first = next(iter(groups))[3]
    tail = [e for e in first if e in shared]
    return f"{len(layers)} layers: " + " + ".join(parts) + ("; " + ", ".join(tail) if tail else "")


def layer_strips_figure(
    plans: Mapping[str, Sequence[LayerPlan]],
    *,
    same_scale: bool = True,
    width: float = COLUMN_WIDTH,
) -> Figure:
    """The plans of several models, one strip each, one cell per decoder layer.

    A cell's colour is the layer's attention kind (``ATTENTION_COLOURS``); a layer that
    does not rotate (NoPE, or linear attention) is a white cell hatched and bordered in that
    colour. Above the cells, one lane per mark the model uses: a base unlike the one most of
    its rotating layers use (Gemma 3's global 1M among local 10k), scaling (a ``rope_type``
    other than default), partial rotation or p-RoPE, a query temperature (Llama 4's NoPE
    layers), sink logits (GPT-OSS). Under each strip, :func:`plan_summary`. The legend lists
    the kinds and marks drawn, and only those.

    Args:
        plans: model name -> its :func:`~posenc_core.rope.layer_plan` (as for
            :data:`~posenc_core.book.real_configs.REAL_CONFIGS`), drawn top to bottom.
        same_scale: one cell width for every strip (a deeper model's strip is longer); False
            stretches each strip over the width.
        width: the figure's width in inches (at most the column's).

    Returns:
        A figure with one axes per model in ``plans``' order, each holding one ``Rectangle``
        per layer in ``ax.patches`` (layer order) and one scatter per mark kind drawn.
    """
    models = _checked(plans)
    if isinstance(width, bool) or not isinstance(width, (int, float)) or not 2 <= width:
        raise ValueError(f"width must be a number of inches >= 2, got {width!r}")
    width = min(float(width), COLUMN_WIDTH)
    phone = width <= PHONE_WIDTH
    wrap = 42 if phone else 95  # characters a summary line holds at 8 pt
    lanes = {}
    for name, layers in models.items():
        common = _common_base(layers)
        lanes[name] = [k for k in _MARKS if any(k in _marks(p, common) for p in layers)]
    lines = {  # no break inside "base 10k" or "yarn x32" (no-break spaces)
        name: textwrap.wrap(plan_summary(layers).replace("base ", "base\u00a0")
                            .replace(" x", "\u00a0x"), wrap)
        for name, layers in models.items()
    }  # fmt: skip
    # one inch of axes holds 1 / _UNIT of its y range: every cell is as tall, marks or not
    heights = [_UNIT * (1.1 + 0.5 * len(lanes[n])) + 0.3 + 0.14 * len(lines[n]) for n in models]
    fig, _ = new_figure(width, sum(heights) + 0.9)
    fig.clear()
    grid = GridSpec(len(models), 1, figure=fig, height_ratios=heights)
    longest = max(len(layers) for layers in models.values())
    kinds, marks = set(), set()
    for row, (name, layers) in enumerate(models.items()):
        ax = fig.add_subplot(grid[row])
        common = _common_base(layers)
        for p in layers:
            colour = ATTENTION_COLOURS[p.attention]
            kinds.add(p.attention)
            if p.rope is None:
                cell = Rectangle((p.layer - 0.5, 0), 1, 1, facecolor="white", edgecolor=colour,
                                 hatch=_NO_ROTATION_HATCH, linewidth=0.6)  # fmt: skip
            else:
                cell = Rectangle((p.layer - 0.5, 0), 1, 1, facecolor=colour, edgecolor="white",
                                 linewidth=0.4)  # fmt: skip
            ax.add_patch(cell)
        for lane, kind in enumerate(lanes[name]):
            xs = [p.layer for p in layers if kind in _marks(p, common)]
            marker, colour, label = _MARKS[kind]
            ax.scatter(xs, [1.35 + 0.5 * lane] * len(xs), marker=marker, s=9, color=colour,
                       linewidths=0, label=label, clip_on=False)  # fmt: skip
            marks.add(kind)
        n = longest if same_scale else len(layers)
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_ylim(0, 1.1 + 0.5 * len(lanes[name]))
        ax.set_title(name, loc="left", fontsize=9, pad=2)
        ax.set_xlabel("\n".join(lines[name]), fontsize=8, loc="left", labelpad=2)
        ax.set_xticks([])
        ax.set_yticks([])
        for side in ax.spines.values():
            side.set_visible(False)
    handles = [Patch(facecolor=ATTENTION_COLOURS[k], label=_ATTENTION_NAMES[k])
               for k in ATTENTION_COLOURS if k in kinds]  # fmt: skip
    handles.append(Patch(facecolor="white", edgecolor="0.3", hatch=_NO_ROTATION_HATCH,
                         label="no rotation (NoPE, linear)"))  # fmt: skip
    handles += [Line2D([], [], marker=_MARKS[k][0], color=_MARKS[k][1], linestyle="none",
                       markersize=4, label=_MARKS[k][2]) for k in _MARKS if k in marks]  # fmt: skip
    legend_below(fig, handles, [h.get_label() for h in handles], ncol=1 if phone else 2)
    if not phone:
        setattr(fig, PHONE_DRAWING, lambda: layer_strips_figure(plans, same_scale=same_scale,
                                                         width=PHONE_WIDTH))  # fmt: skip
    return fig
