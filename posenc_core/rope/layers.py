"""What each decoder layer of a Hugging Face model does with positions, read from its config.

The open models of 2025-26 place positions per layer: rotation in some layers and none in
others (Llama 4, SmolLM3, Cohere2, Qwen3-Next), a base per layer type (Gemma 3, ModernBERT),
scaling on some layers only (OLMo 3, Gemma 3), a rope type per layer type (Gemma 4's
``proportional`` global layers, with a wider head), a query temperature (Llama 4's NoPE
layers, Ministral 3), sink logits (GPT-OSS). :func:`~posenc_core.rope.layer_facts` reads all
of it into one :class:`~posenc_core.rope.LayerFacts` per layer;
:func:`~posenc_core.rope.layer_plan` adds the modules, and
:meth:`~posenc_core.rope.RotaryEmbedding.from_config` takes one layer's rotation.

Where each rule lives: the layer types (``layer_types``, or the architecture's default
pattern when a config.json gives none), the rope settings per layer type
(``rope_parameters`` keyed by layer type, or the older keys) and the rest are read by the
functions below; what differs between architectures is one
:class:`~posenc_core.rope.layers.ModelRule` per ``model_type`` in ``RULES``. A new
architecture with per-layer positions is one entry there (and a test in
``tests/core/test_rope_layer_models.py`` running its Hugging Face class). Duck typed, as
``posenc_core.rope.config``: transformers is never imported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from .. import _validation as check
from .config import MLA_MODEL_TYPES, RopeConfig, _as_dict, rope_config_from_hf

__all__ = ["ATTENTION_KINDS", "RULES", "LayerFacts", "ModelRule", "QueryTemperature", "layer_facts"]

ATTENTION_KINDS = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
}
"""Hugging Face's layer type -> the attention kind of :class:`~posenc_core.rope.LayerFacts`."""


@dataclass(frozen=True)
class QueryTemperature:
    """A per-position factor on the queries: 1 + scale * ln(1 + floor((pos + offset) / step)).

    Llama 4's ``attn_temperature_tuning`` in its NoPE layers (``scale`` = attn_scale,
    ``step`` = floor_scale, ``offset`` 1; pos is the cache position, the index in the
    sequence counting past tokens, not position_ids; Nakanishi 2025, "Scalable-Softmax Is
    Superior for Attention"); Ministral 3's ``llama_4_scaling_beta`` (``scale`` = beta,
    ``step`` = original_max_position_embeddings, ``offset`` 0; pos = position_ids). Hugging
    Face computes it in float32 in ``Llama4TextAttention.forward`` and
    ``get_llama_4_attn_scale``; here in float64 and rounded once. Checked on both models in
    ``tests/core/test_rope_layer_models.py``.

    Args:
        rule: ``"llama4"`` or ``"ministral3"``, the name printed in a plan.
        scale: the slope (> 0).
        step: the number of positions per step of the floor (a positive integer).
        offset: added to the position before dividing (0 or 1).
        positions: ``"cache"`` or ``"position_ids"``: which positions the model feeds it.
    """

    rule: str
    scale: float
    step: int
    offset: int = 0
    positions: str = "position_ids"

    def __post_init__(self) -> None:
        check.real_number("scale", self.scale)
        check.positive_int("step", self.step)
        check.choice("positions", self.positions, ("cache", "position_ids"))

    def __call__(self, positions: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The factor for each position: a tensor of ``positions``' shape in ``dtype``.

        Args:
            positions: integer tensor of positions >= 0, any shape.
            dtype: floating dtype of the result (default float32, the queries' usual dtype).
        """
        check.tensor("positions", positions)
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"positions must be an integer tensor, got dtype {positions.dtype}")
        if positions.numel() and int(positions.min()) < 0:
            raise ValueError(f"positions must be >= 0, got {int(positions.min())}")
        steps = torch.div(positions.to(torch.int64) + self.offset, self.step, rounding_mode="floor")
        return (1.0 + self.scale * torch.log1p(steps.to(torch.float64))).to(dtype)

    def __str__(self) -> str:
        start = f"(pos + {self.offset})" if self.offset else "pos"
        return f"{self.rule}: 1 + {self.scale:g} ln(1 + floor({start} / {self.step}))"


@dataclass(frozen=True)
class LayerFacts:
    """What one layer does with positions, as its config says (see the module docstring).

    Args:
        layer: the layer's index.
        layer_type: the config's name for it (``"full_attention"``, ``"sliding_attention"``,
            ``"chunked_attention"``, ``"linear_attention"``).
        attention: ``"full"``, ``"sliding"``, ``"chunked"`` or ``"linear"``.
        window: what :func:`~posenc_core.attention.attention` takes as ``window`` (sliding)
            or ``chunk`` (chunked) to mask as Hugging Face does: causal sliding, key j visible
            from query i iff i - w < j <= i (``sliding_window`` of the config); bidirectional
            sliding, iff abs(i - j) <= w (ModernBERT: local_attention // 2; Gemma 3 and 4 with
            bidirectional attention: sliding_window // 2, as their strict abs(i - j) <
            sliding_window // 2 + 1); chunked, iff i // w == j // w and j <= i
            (``attention_chunk_size``); None otherwise.
        rope: the layer's :class:`~posenc_core.rope.RopeConfig`, or None if it does not rotate.
        temperature: the :class:`~posenc_core.rope.QueryTemperature` on its queries, or None.
        sinks: whether the layer has learned per-head sink logits (GPT-OSS).
        causal: False for an encoder (ModernBERT).
        softmax_scale: the factor positional scaling puts on the softmax scale 1/sqrt(d)
            (DeepSeek-V3 with YaRN: mscale(s, mscale_all_dim)**2); 1.0 otherwise.
    """

    layer: int
    layer_type: str
    attention: str
    window: int | None
    rope: RopeConfig | None
    temperature: QueryTemperature | None = None
    sinks: bool = False
    causal: bool = True
    softmax_scale: float = 1.0


# --------------------------------------------------------------------------- per architecture


def _pattern(
    key: str | None, default: int, other: str, every: str = "full_attention", first: int = 1
) -> Callable[[Mapping[str, Any], int], list[str]]:
    """Layer types from a period (read at ``key`` when the config has it, else ``default``):
    layer i is ``every`` when (i + first) is a multiple of the period, ``other`` otherwise
    (the config classes' default patterns)."""

    def types(cfg: Mapping[str, Any], n: int) -> list[str]:
        period = check.positive_int(key or "period", (cfg.get(key) if key else None) or default)
        return [every if (i + first) % period == 0 else other for i in range(n)]

    return types


def _use_rope(cfg: Mapping[str, Any], n: int) -> list[bool]:
    """``no_rope_layers`` (1: the layer rotates, as Hugging Face reads it), else one NoPE layer
    every ``no_rope_layer_interval`` (4) layers (Llama 4, SmolLM3)."""
    flags = cfg.get("no_rope_layers")
    if not flags:
        interval = check.positive_int(
            "no_rope_layer_interval", cfg.get("no_rope_layer_interval") or 4
        )
        return [(i + 1) % interval != 0 for i in range(n)]
    if not isinstance(flags, Sequence) or len(flags) != n:
        raise ValueError(
            f"no_rope_layers must be a list of num_hidden_layers={n} flags (1: the layer uses "
            f"RoPE), got {flags!r}"
        )
    out = []
    for i, flag in enumerate(flags):
        if flag not in (0, 1) or isinstance(flag, float):
            raise ValueError(f"no_rope_layers[{i}] must be 0 or 1 (1: uses RoPE), got {flag!r}")
        out.append(bool(flag))
    return out


def _llama4_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    return ["chunked_attention" if rope else "full_attention" for rope in _use_rope(cfg, n)]


def _smollm3_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    sliding = bool(cfg.get("use_sliding_window")) and cfg.get("sliding_window") is not None
    return [
        "sliding_attention" if sliding and not rope else "full_attention"
        for rope in _use_rope(cfg, n)
    ]


def _gemma4_types(cfg: Mapping[str, Any], n: int) -> list[str]:
    types = _pattern("sliding_window_pattern", 6, "sliding_attention")(cfg, n)
    return types[:-1] + ["full_attention"]  # Gemma4TextConfig forces the last layer global


def _no_rope_layers_rotate(cfg: Mapping[str, Any], i: int, layer_type: str) -> bool:
    return _use_rope(cfg, _layer_count(cfg, len(cfg.get("no_rope_layers") or []) or i + 1))[i]


def _llama4_temperature(cfg: Mapping[str, Any], i: int, rotates: bool) -> QueryTemperature | None:
    if rotates or not cfg.get("attn_temperature_tuning", True):
        return None
    return QueryTemperature(
        "llama4",
        check.real_number("attn_scale", cfg.get("attn_scale", 0.1)),
        check.positive_int("floor_scale", cfg.get("floor_scale", 8192)),
        offset=1,
        positions="cache",
    )


def _ministral3_temperature(
    cfg: Mapping[str, Any], i: int, rotates: bool
) -> QueryTemperature | None:
    params = cfg.get("rope_parameters") or {}
    beta = params.get("llama_4_scaling_beta")
    if beta is None:
        return None
    step = params.get("original_max_position_embeddings")
    if step is None:
        raise ValueError(
            "rope_parameters['llama_4_scaling_beta'] needs rope_parameters"
            "['original_max_position_embeddings'], the length of each temperature step"
        )
    return QueryTemperature("ministral3", check.real_number("llama_4_scaling_beta", beta), step)


def _older_rope_dicts(
    cfg: Mapping[str, Any],
    theta_keys: Mapping[str, tuple[str, float]],
    scaled: tuple[str, ...],
) -> dict[str, dict[str, Any]]:
    """rope settings per layer type from the keys before transformers 5: ``theta_keys`` maps
    a layer type to (key, default) of its base; ``rope_scaling`` (or a flat
    ``rope_parameters``) applies to the layer types in ``scaled`` only."""
    scaling = {}
    for name in ("rope_scaling", "rope_parameters"):
        part = cfg.get(name)
        if isinstance(part, Mapping):
            scaling.update({k: v for k, v in part.items() if k != "rope_theta"})
    out = {}
    for layer_type, (key, default) in theta_keys.items():
        theta = cfg.get(key)
        out[layer_type] = {
            "rope_type": "default",
            "rope_theta": default if theta is None else theta,
            **(scaling if layer_type in scaled else {}),
        }
    return out


class ModelRule(NamedTuple):
    """How one ``model_type`` places positions per layer (the defaults: every layer full,
    rotating alike, no temperature, no sinks, causal)."""

    layer_types: Callable[[Mapping[str, Any], int], list[str]] | None = None
    """Layer types when the config gives no ``layer_types`` (its config class's pattern)."""
    rotates: Callable[[Mapping[str, Any], int, str], bool] | None = None
    """Whether a layer rotates, called as ``rotates(cfg, i, layer_type)``; None means every
    layer but the linear ones."""
    temperature: Callable[[Mapping[str, Any], int, bool], QueryTemperature | None] | None = None
    """The query temperature of a layer, called as ``temperature(cfg, i, rotates)``."""
    older_keys: Callable[[Mapping[str, Any]], dict[str, dict[str, Any]]] | None = None
    """rope settings per layer type from pre-transformers-5 keys (when rope_parameters is
    not keyed by layer type)."""
    sinks: bool = False
    causal: bool = True
    default_theta: float | None = None
    """The config class's ``default_theta`` where a config.json gives no base."""


RULES: dict[str, ModelRule] = {
    "llama4_text": ModelRule(
        _llama4_types, _no_rope_layers_rotate, _llama4_temperature, default_theta=500000.0
    ),
    "smollm3": ModelRule(_smollm3_types, _no_rope_layers_rotate, default_theta=2000000.0),
    "cohere2": ModelRule(
        _pattern("sliding_window_pattern", 4, "sliding_attention"),
        lambda cfg, i, layer_type: layer_type == "sliding_attention",
    ),
    "qwen3_next": ModelRule(_pattern("full_attention_interval", 4, "linear_attention")),
    "gemma3_text": ModelRule(
        _pattern("sliding_window_pattern", 6, "sliding_attention"),
        older_keys=lambda cfg: _older_rope_dicts(
            cfg,
            {
                "full_attention": ("rope_theta", 1_000_000.0),
                "sliding_attention": ("rope_local_base_freq", 10_000.0),
            },
            ("full_attention",),
        ),
    ),
    "gemma4_text": ModelRule(_gemma4_types),
    "modernbert": ModelRule(
        _pattern("global_attn_every_n_layers", 3, "sliding_attention", first=0),
        older_keys=lambda cfg: _older_rope_dicts(
            cfg,
            {
                "full_attention": ("global_rope_theta", 160_000.0),
                "sliding_attention": ("local_rope_theta", 10_000.0),
            },
            ("full_attention", "sliding_attention"),
        ),
        causal=False,
    ),
    "olmo3": ModelRule(
        _pattern(None, 4, "sliding_attention"),
        older_keys=lambda cfg: _older_rope_dicts(
            cfg,
            {
                "full_attention": ("rope_theta", 500_000.0),
                "sliding_attention": ("rope_theta", 500_000.0),
            },
            ("full_attention",),
        ),
    ),
    "gpt_oss": ModelRule(
        _pattern(None, 2, "sliding_attention"), sinks=True, default_theta=150000.0
    ),
    "ministral3": ModelRule(temperature=_ministral3_temperature),
}
"""``model_type`` -> its :class:`~posenc_core.rope.layers.ModelRule`; any other model type:
every layer alike."""

# Gemma 4's default for its global layers, when a config.json gives none (Gemma4TextConfig)
GEMMA4_DEFAULT_ROPE = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    "full_attention": {
        "rope_type": "proportional",
        "partial_rotary_factor": 0.25,
        "rope_theta": 1_000_000.0,
    },
}


# --------------------------------------------------------------------------- reading


def _text_config(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """A multimodal config's ``text_config`` (Llama 4, Gemma 3/4, Mistral 3), else cfg."""
    text = cfg.get("text_config")
    if text is not None and cfg.get("num_hidden_layers") is None:
        return _as_dict(text)
    return cfg


def _layer_count(cfg: Mapping[str, Any], default: int | None = None) -> int:
    """num_hidden_layers (n_layer); ``default`` where the config gives no count."""
    n = cfg.get("num_hidden_layers", cfg.get("n_layer"))
    if n is None:
        if default is not None:
            return default
        raise ValueError(f"config needs num_hidden_layers (keys given: {sorted(cfg)})")
    return check.positive_int("num_hidden_layers", n)


def _layer_types(cfg: Mapping[str, Any], rule: ModelRule, n: int) -> list[str]:
    types = cfg.get("layer_types")
    if types is None:
        return rule.layer_types(cfg, n) if rule.layer_types else ["full_attention"] * n
    if isinstance(types, (str, bytes)) or not isinstance(types, Sequence):
        raise TypeError(f"layer_types must be a list of strings, got {type(types).__name__}")
    if len(types) != n:
        raise ValueError(
            f"layer_types has {len(types)} entries but num_hidden_layers={n}; give one layer "
            "type per layer"
        )
    for i, name in enumerate(types):
        if not isinstance(name, str) or name not in ATTENTION_KINDS:
            raise ValueError(
                f"layer_types[{i}]={name!r} is not a layer type this library knows; known: "
                f"{', '.join(ATTENTION_KINDS)}"
            )
    return list(types)


def _rope_dicts(
    cfg: Mapping[str, Any], model_type: Any, rule: ModelRule, types: Sequence[str]
) -> dict[str, dict[str, Any]] | None:
    """The rope settings per layer type when the config gives them per type (keyed
    ``rope_parameters``, or an architecture's older keys); None when one setting serves all."""
    params = cfg.get("rope_parameters")
    if isinstance(params, Mapping) and params and set(params) <= set(ATTENTION_KINDS):
        missing = sorted(set(types) - set(params) - {"linear_attention"})
        if missing:
            raise ValueError(
                f"rope_parameters is keyed by layer type ({sorted(params)}) but has no entry "
                f"for {', '.join(missing)}, a type of layer_types"
            )
        for name, part in params.items():
            if not isinstance(part, Mapping):
                raise TypeError(
                    f"rope_parameters[{name!r}] must be a dict, got {type(part).__name__}"
                )
        if cfg.get("rope_scaling") is not None:
            raise ValueError(
                "config gives rope_parameters keyed by layer type and also rope_scaling; it is "
                "unclear which layers rope_scaling scales: move it into rope_parameters"
            )
        return {name: dict(part) for name, part in params.items()}
    if model_type == "gemma4_text" and params is None:
        return {k: dict(v) for k, v in GEMMA4_DEFAULT_ROPE.items()}
    if rule.older_keys is not None:
        return rule.older_keys(cfg)
    return None


_PER_TYPE_KEYS = (
    "rope_parameters",
    "rope_scaling",
    "rope_theta",
    "rope_local_base_freq",
    "global_rope_theta",
    "local_rope_theta",
    "partial_rotary_factor",
)


def _head_dim_override(
    cfg: Mapping[str, Any], model_type: Any, i: int, layer_type: str
) -> int | None:
    """Gemma 4's wider global heads (``per_layer_config``, or ``global_head_dim``, default
    512)."""
    if model_type == "gemma4_text" and layer_type == "full_attention":
        per_layer = cfg.get("per_layer_config") or {}
        override = (
            per_layer.get(str(i), per_layer.get(i)) if isinstance(per_layer, Mapping) else None
        )
        if isinstance(override, Mapping) and "head_dim" in override:
            return override["head_dim"]
        return cfg.get("global_head_dim") or 512
    return None


def _layer_rope(
    cfg: Mapping[str, Any],
    model_type: Any,
    rule: ModelRule,
    layer_type: str,
    head_dim: int | None,
    per_type: Mapping[str, Mapping[str, Any]] | None,
) -> RopeConfig:
    """The RopeConfig of a layer of ``layer_type`` (with ``head_dim`` if not None): the whole
    config read by rope_config_from_hf, with the layer type's rope settings and head width in
    place of the per-type keys."""
    flat = dict(cfg)
    if per_type is not None:
        for key in _PER_TYPE_KEYS:
            flat.pop(key, None)
        flat["rope_parameters"] = dict(per_type[layer_type])
        prf = cfg.get("partial_rotary_factor")
        if prf is not None and "partial_rotary_factor" not in flat["rope_parameters"]:
            flat["rope_parameters"]["partial_rotary_factor"] = prf
    if head_dim is not None:
        flat["head_dim"] = head_dim
    if rule.default_theta is not None and not _has_theta(flat):
        flat["rope_theta"] = rule.default_theta
    return rope_config_from_hf(flat)


def _has_theta(cfg: Mapping[str, Any]) -> bool:
    params = cfg.get("rope_parameters")
    in_params = isinstance(params, Mapping) and params.get("rope_theta") is not None
    return in_params or cfg.get("rope_theta") is not None or cfg.get("rotary_emb_base") is not None


def _window(cfg: Mapping[str, Any], model_type: Any, attention: str) -> int | None:
    if attention == "chunked":
        chunk = cfg.get("attention_chunk_size")
        return None if chunk is None else check.positive_int("attention_chunk_size", chunk)
    if attention != "sliding":
        return None
    if model_type == "modernbert":  # ModernBertConfig.sliding_window = local_attention // 2
        window = cfg.get("sliding_window") or (cfg.get("local_attention") or 128) // 2
    elif model_type == "smollm3" and not cfg.get("use_sliding_window"):
        return None
    else:
        window = cfg.get("sliding_window")
    if window is None:
        return None
    window = check.positive_int("sliding_window", window)
    if model_type in ("gemma3_text", "gemma4_text") and _bidirectional(cfg, model_type):
        window = window // 2  # HF: abs(i - j) < window // 2 + 1 (_bidirectional_window_overlay)
    return window


def _bidirectional(cfg: Mapping[str, Any], model_type: Any) -> bool:
    flag = cfg.get("use_bidirectional_attention")
    return flag == "all" if model_type == "gemma4_text" else bool(flag)


def _softmax_scale(cfg: Mapping[str, Any], rope: RopeConfig | None, model_type: Any) -> float:
    """DeepSeek's MLA multiplies the softmax scale by mscale(s, mscale_all_dim)**2 for any
    scaled rope type (``yarn_apply_mscale`` in Hugging Face's modeling_deepseek_v3)."""
    if model_type not in MLA_MODEL_TYPES or rope is None:
        return 1.0
    scaling = rope.scaling
    if scaling.rope_type == "default" or not scaling.mscale_all_dim or scaling.factor is None:
        return 1.0
    mscale = (
        1.0 if scaling.factor <= 1 else 0.1 * scaling.mscale_all_dim * math.log(scaling.factor) + 1
    )
    return mscale * mscale


def layer_facts(config: Any, *, _count: int | None = None) -> tuple[LayerFacts, ...]:
    """One :class:`~posenc_core.rope.LayerFacts` per decoder layer of a Hugging Face config.

    Args:
        config: a ``PretrainedConfig`` (anything with ``to_dict()``) or a config.json dict;
            a multimodal config is read through its ``text_config``.

    Returns:
        a tuple of ``num_hidden_layers`` :class:`~posenc_core.rope.LayerFacts`.

    Raises:
        TypeError, ValueError: layer types that disagree with the layer count, an unknown
            layer type, rope settings keyed by layer type that miss a type, and everything
            :func:`~posenc_core.rope.rope_config_from_hf` refuses; the message names the key.
    """
    cfg = _text_config(_as_dict(config))
    model_type = cfg.get("model_type")
    rule = RULES.get(model_type, ModelRule())
    n = _layer_count(cfg, _count if cfg.get("layer_types") is None else len(cfg["layer_types"]))
    types = _layer_types(cfg, rule, n)
    per_type = _rope_dicts(cfg, model_type, rule, types)
    facts = []
    ropes: dict[tuple[str, int | None], RopeConfig] = {}  # read once per layer type and width
    for i, layer_type in enumerate(types):
        attention = ATTENTION_KINDS[layer_type]
        if rule.rotates is not None:
            rotates = rule.rotates(cfg, i, layer_type)
        else:
            rotates = attention != "linear"
        rope = None
        if rotates:
            key = (layer_type, _head_dim_override(cfg, model_type, i, layer_type))
            if key not in ropes:
                ropes[key] = _layer_rope(cfg, model_type, rule, *key, per_type)
            rope = ropes[key]
        window = _window(cfg, model_type, attention)
        facts.append(
            LayerFacts(
                layer=i,
                layer_type=layer_type,
                attention="full" if attention == "chunked" and window is None else attention,
                window=window,
                rope=rope,
                temperature=rule.temperature(cfg, i, rotates) if rule.temperature else None,
                sinks=rule.sinks,
                causal=rule.causal and not _bidirectional(cfg, model_type),
                softmax_scale=_softmax_scale(cfg, rope, model_type),
            )
        )
    return tuple(facts)


def layer_rope(config: Any, layer: int | None) -> RopeConfig | None:
    """The RopeConfig of one layer (``layer``), or of every layer when they agree (None).

    Raises:
        ValueError: ``layer`` out of range, or None for a model whose layers differ (the
            message lists which rotate how and says to pass ``layer``).
    """
    facts = layer_facts(config, _count=1)  # no layer count: one layer stands for all
    if layer is not None:
        layer = check.int_in_range("layer", layer, 0, len(facts) - 1)
        return facts[layer].rope
    kinds = {f.rope for f in facts}
    if len(kinds) == 1:
        return facts[0].rope
    groups: dict[RopeConfig | None, list[int]] = {}
    for f in facts:
        groups.setdefault(f.rope, []).append(f.layer)
    described = "; ".join(
        f"layers {_ranges(layers)}: "
        + (
            "no rotation"
            if rope is None
            else f"base {rope.base:g}, rotary_dim {rope.rotary_dim}"
            f"/{rope.head_dim}, {rope.scaling.rope_type}"
        )
        for rope, layers in groups.items()
    )
    raise ValueError(
        f"the layers of this model do not all rotate alike ({described}); pass layer=i for "
        "the rotation of decoder layer i (None for a layer without one), or use "
        "posenc_core.rope.layer_plan(config) for all of them"
    )


def _ranges(layers: Sequence[int]) -> str:
    """[0, 1, 2, 4] -> '0-2, 4'."""
    out, start = [], layers[0]
    for a, b in zip(layers, [*layers[1:], None]):
        if b != a + 1:
            out.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return ", ".join(out)
