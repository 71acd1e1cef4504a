"""The positional plan of a Hugging Face model, layer by layer: :func:`layer_plan`.

``layer_plan(config)`` reads the config with :func:`~posenc_core.rope.layer_facts`
and gives one :class:`LayerPlan` per decoder layer, with the layer's
:class:`~posenc_core.rope.RotaryEmbedding` ready to call (or None), its attention kind and
window, its query temperature and whether it has sink logits. Printed, the plan is a table
(an example in :func:`layer_plan`'s docstring).

Checked against Hugging Face's model classes (``tests/core/test_rope_layer_models.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .layers import LayerFacts, QueryTemperature, layer_facts
from .module import RotaryEmbedding

__all__ = ["LayerPlan", "LayerPlans", "layer_plan"]


@dataclass(frozen=True)
class LayerPlan:
    """One layer's positional plan: :class:`~posenc_core.rope.LayerFacts` with the
    rotation built.

    Args:
        layer: the layer's index.
        layer_type: the config's name (``"sliding_attention"``, ...).
        attention: ``"full"``, ``"sliding"``, ``"chunked"`` or ``"linear"``.
        window: the sliding window or chunk size of Hugging Face's mask, or None.
        rope: the layer's :class:`~posenc_core.rope.RotaryEmbedding`, or None (no rotation);
            the module ``RotaryEmbedding.from_config(config, layer=layer)`` returns.
        temperature: None, or the :class:`~posenc_core.rope.QueryTemperature` that maps
            a LongTensor of positions to per-position query scales.
        sinks: whether the layer has learned per-head sink logits.
        causal: False for an encoder.
        softmax_scale: the factor positional scaling puts on 1/sqrt(d) (DeepSeek's mscale**2).
    """

    layer: int
    layer_type: str
    attention: str
    window: int | None
    rope: RotaryEmbedding | None
    temperature: QueryTemperature | None
    sinks: bool
    causal: bool
    softmax_scale: float

    @classmethod
    def from_facts(cls, facts: LayerFacts, *, rope: RotaryEmbedding | None = None) -> LayerPlan:
        """The plan of a layer from its facts: ``rope`` if given, else the facts' RopeConfig
        built into a module."""
        if rope is None and facts.rope is not None:
            rope = RotaryEmbedding.from_rope_config(facts.rope)
        return cls(
            facts.layer,
            facts.layer_type,
            facts.attention,
            facts.window,
            rope,
            facts.temperature,
            facts.sinks,
            facts.causal,
            facts.softmax_scale,
        )

    def row(self) -> tuple[str, ...]:
        """The layer's cells in :class:`LayerPlans`' table."""
        rope = self.rope
        if rope is None:
            base = rotated = scaling = "-"
        else:
            base = f"{rope.base:g}"
            rotated = f"{_rotating_dims(rope)}/{rope.head_dim}"
            scaling = _scaling_cell(rope)
        cells = [
            str(self.layer),
            self.attention + ("" if self.causal else " (bidir)"),
            "-" if self.window is None else str(self.window),
            base,
            rotated,
            scaling,
            "-" if self.temperature is None else self.temperature.rule,
            "yes" if self.sinks else "-",
        ]
        return tuple(cells)


def _rotating_dims(rope: RotaryEmbedding) -> int:
    """The dims that rotate: rotary_dim, less the pairs of zero frequency (p-RoPE)."""
    s = rope.scaling
    if s.rope_type == "proportional" and s.partial_rotary_factor is not None:
        return 2 * int(s.partial_rotary_factor * rope.rotary_dim // 2)
    return rope.rotary_dim


def _scaling_cell(rope: RotaryEmbedding) -> str:
    s = rope.scaling
    if s.rope_type == "default":
        return "-"
    cell = s.rope_type + ("" if s.factor is None else f" x{s.factor:g}")
    if s.rope_type == "proportional" and s.partial_rotary_factor is not None:
        cell += f" p={s.partial_rotary_factor:g}"
    if s.rope_type == "yarn" and not s.truncate:
        cell += " no-truncate"
    return cell


class LayerPlans(tuple):
    """The plans of all layers (a tuple of :class:`LayerPlan`), printed as a table."""

    HEADER = ("layer", "attention", "window", "base", "rotated", "scaling", "temperature", "sinks")

    def __getitem__(self, index: Any) -> Any:
        """A layer's :class:`LayerPlan`, or for a slice the :class:`LayerPlans` of those layers."""
        item = super().__getitem__(index)
        return LayerPlans(item) if isinstance(index, slice) else item

    def __repr__(self) -> str:
        rows = [self.HEADER, *(plan.row() for plan in self)]
        widths = [max(len(row[c]) for row in rows) for c in range(len(self.HEADER))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        return "\n".join(lines)

    __str__ = __repr__


def layer_plan(config: Any) -> LayerPlans:
    """One :class:`LayerPlan` per decoder layer of a Hugging Face model, from its config.

    Reads layer types, per-type rope settings (either spelling), which layers rotate, windows,
    chunks, temperatures and sinks by the rules of :data:`~posenc_core.rope.layers.RULES`. Tested
    in ``tests/core/test_rope_layer_models.py`` against the Hugging Face classes of Llama 4,
    SmolLM3, Cohere2, Qwen3-Next, Gemma 3 and 4, ModernBERT, OLMo 3, GPT-OSS, DeepSeek-V3,
    Phi-4-mini and Ministral 3, and in ``tests/core/test_rope_layers.py`` on config.json dicts.

    Args:
        config: a ``PretrainedConfig`` (anything with ``to_dict()``) or a config.json dict;
            a multimodal config is read through its ``text_config``.

    Returns:
        :class:`LayerPlans`, one :class:`LayerPlan` per layer; ``print`` shows the table. Layers
        that rotate alike share one :class:`~posenc_core.rope.RotaryEmbedding` (one cache).

    Raises:
        TypeError, ValueError: as :func:`~posenc_core.rope.layer_facts`.

    Example: the first five of the 48 layers of Llama 4 Scout (``tests/core/test_rope_layers.py``
    holds the dict and checks this table); every fourth layer is NoPE with a query temperature::

        >>> print(layer_plan(llama4_scout_text_config)[:5])
        layer  attention  window  base    rotated  scaling     temperature  sinks
        0      chunked    8192    500000  128/128  llama3 x16  -            -
        1      chunked    8192    500000  128/128  llama3 x16  -            -
        2      chunked    8192    500000  128/128  llama3 x16  -            -
        3      full       -       -       -        -           llama4       -
        4      chunked    8192    500000  128/128  llama3 x16  -            -
    """
    modules: dict[Any, RotaryEmbedding] = {}  # one module (and table cache) per rotation

    def plan(facts: LayerFacts) -> LayerPlan:
        if facts.rope is not None and facts.rope not in modules:
            modules[facts.rope] = RotaryEmbedding.from_rope_config(facts.rope)
        rope = None if facts.rope is None else modules[facts.rope]
        return LayerPlan.from_facts(facts, rope=rope)

    return LayerPlans(plan(facts) for facts in layer_facts(config))
