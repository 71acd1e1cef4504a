"""RoPE settings read from a Hugging Face model configuration (``config.json``).

:func:`rope_config_from_hf` reads the keys transformers 5.23 reads (its ``RopeParameters``,
``standardize_rope_params`` and the config classes of Llama, Qwen2, GPT-NeoX, GPT-J, Phi and
Phi-3) into one frozen :class:`RopeConfig`, checked once in its ``__post_init__``;
:meth:`~posenc_core.rope.RotaryEmbedding.from_config` builds the module from it. Duck typed:
a ``PretrainedConfig`` is read through its ``to_dict()``, so this module never imports
transformers.

Which key gives what (the first one present wins; two that disagree are an error):

* base: ``rope_parameters["rope_theta"]``, the older top-level ``rope_theta``, GPT-NeoX's
  ``rotary_emb_base``; default 10000 (transformers' ``default_theta``; GPT-J's fixed base).
* scaling: ``rope_parameters`` (transformers 5) or ``rope_scaling`` (older configs), with
  ``rope_type`` or the legacy ``type``; the type's keys as in
  :func:`~posenc_core.rope.parse_scaling`.
* head_dim: ``head_dim``, else ``hidden_size // num_attention_heads`` (GPT-J and CodeGen:
  ``n_embd // n_head``).
* rotary_dim: ``int(head_dim * partial_rotary_factor)`` (inside ``rope_parameters`` or top
  level), GPT-NeoX's ``rotary_pct`` (default 0.25, as ``GPTNeoXConfig``), Phi's default 0.5
  (``PhiConfig``), GPT-J's ``rotary_dim`` (default 64, None: the whole head).
* max_position_embeddings: ``max_position_embeddings`` (GPT-J: ``n_positions``).
* L0, ``original_max_position_embeddings``, for yarn, llama3 and longrope: the top-level key
  (Phi-3 keeps it there), else the one in the scaling dict, else max_position_embeddings
  (``standardize_rope_params``). Dynamic NTK uses max_position_embeddings as L0, as Hugging
  Face's ``_compute_dynamic_ntk_parameters`` does. For yarn and longrope a missing
  ``factor`` is max_position_embeddings / L0 (``_compute_yarn_parameters``,
  ``_compute_longrope_parameters``).
* layout: ``"interleaved"`` for ``model_type`` ``"gptj"`` and ``"codegen"``
  (``rotate_every_two``), ``"half"`` otherwise (``rotate_half``).
* Phi-3 (``model_type`` ``"phi3"``): rope types ``"su"`` and ``"yarn"`` mean ``"longrope"``,
  as ``Phi3Config.convert_rope_params_to_dict`` renames them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import _validation as check
from .scaling import L0, ROPE_TYPES, VARIANTS, RopeScaling, _inv_freq, parse_scaling

__all__ = ["RopeConfig", "rope_config_from_hf"]

DEFAULT_THETA = 10000.0  # transformers' RotaryEmbeddingConfigMixin.default_theta

# model_type -> layout, for architectures that pair dims (2i, 2i+1): GPT-J and CodeGen
# (``rotate_every_two``), Cohere (a ``rotate_half`` over even and odd dims), Llama 4 (complex
# numbers over consecutive pairs); DeepSeek-V3 when ``rope_interleave`` is true (default)
INTERLEAVED_MODEL_TYPES = ("gptj", "codegen", "cohere", "cohere2", "llama4_text")

# model_types of multi-head latent attention: RoPE acts on qk_rope_head_dim dims of each head
MLA_MODEL_TYPES = ("deepseek_v3",)

# model_type -> the partial_rotary_factor its config class assumes when the key is absent
DEFAULT_PARTIAL_ROTARY_FACTOR = {"gpt_neox": 0.25, "phi": 0.5, "qwen3_next": 0.25}

# model_type -> the rotary_dim its config class assumes when the key is absent (GPTJConfig)
DEFAULT_ROTARY_DIM = {"gptj": 64, "codegen": 64}

# model_type -> old rope-type names its config class renames (Phi3Config)
RENAMED_ROPE_TYPES = {"phi3": {"su": "longrope", "yarn": "longrope"}}

# rope types whose L0 Hugging Face fills in from the config (standardize_rope_params)
_NEEDS_L0 = ("yarn", "llama3", "longrope")
# rope types whose missing factor is max_position_embeddings / L0
_FACTOR_FROM_LENGTHS = ("yarn", "longrope")


@dataclass(frozen=True)
class RopeConfig:
    """The RoPE settings of one model: what :class:`~posenc_core.rope.RotaryEmbedding` takes.

    Args:
        head_dim: per-head width d, positive and even, at most 2**20 (``MAX_WIDTH``).
        rotary_dim: rotated width r, even, 2 <= r <= head_dim.
        base: rope_theta, > 1.
        scaling: the parsed :class:`~posenc_core.rope.RopeScaling` (``rope_type="default"``
            for none).
        layout: ``"half"`` or ``"interleaved"``.
        max_position_embeddings: the model's context length (at most 2**53), or None where
            the config gives none.
    """

    head_dim: int
    rotary_dim: int
    base: float = DEFAULT_THETA
    scaling: RopeScaling = RopeScaling()
    layout: str = "half"
    max_position_embeddings: int | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("head_dim", check.width("head_dim", self.head_dim, where="RopeConfig"))
        rotary_dim = check.int_in_range("rotary_dim", self.rotary_dim, 2, self.head_dim)
        put("rotary_dim", check.even_int("rotary_dim", rotary_dim))
        put("base", check.base_value("base", self.base))
        if not isinstance(self.scaling, RopeScaling):
            raise TypeError(
                f"scaling must be a RopeScaling (see parse_scaling), got "
                f"{type(self.scaling).__name__} {self.scaling!r}"
            )
        put("layout", check.layout("layout", self.layout))
        if self.max_position_embeddings is not None:
            put(
                "max_position_embeddings",
                check.position_count(
                    "max_position_embeddings", self.max_position_embeddings, where="RopeConfig"
                ),
            )
        _inv_freq(self.base, self.rotary_dim, self.scaling, None)  # e.g. LongRoPE list lengths

    @classmethod
    def from_hf(cls, config: Any) -> RopeConfig:
        """:func:`rope_config_from_hf`."""
        return rope_config_from_hf(config)


def rope_config_from_hf(config: Any) -> RopeConfig:
    """Read the RoPE settings of a Hugging Face model configuration.

    The keys and defaults are listed in this module's docstring; the rules are transformers
    5.23's (``standardize_rope_params`` and the config classes), except that two keys giving one
    setting with different values, or an odd or zero rotary width, are refused where transformers
    lets one win silently. Tested in ``tests/core/test_rope_config.py`` against ``LlamaConfig``,
    ``Qwen2Config``, ``GPTNeoXConfig``, ``GPTJConfig``, ``PhiConfig`` and ``Phi3Config`` and
    older config.json dicts, and in ``tests/core/test_rope_models.py`` by running the models.

    Args:
        config: a ``PretrainedConfig`` (anything with a ``to_dict()`` method) or a mapping (the
            dict of a ``config.json``).

    Returns:
        a :class:`RopeConfig`.

    Raises:
        TypeError: config is neither, or a key holds the wrong kind of value.
        ValueError: a key is missing, unknown, out of range or contradicts another (named).
    """
    cfg = _as_dict(config)
    model_type = cfg.get("model_type")
    params = _rope_parameters(cfg)
    base = _one_value(
        "rope_theta",
        [
            ("rope_parameters['rope_theta']", params.get("rope_theta")),
            ("rope_theta", cfg.get("rope_theta")),
            ("rotary_emb_base", cfg.get("rotary_emb_base")),
        ],
        DEFAULT_THETA,
    )
    base = check.base_value("rope_theta", base)
    head_dim = _head_dim(cfg)
    rotary_dim = _rotary_dim(cfg, params, head_dim, model_type)
    max_pos = _one_value(
        "max_position_embeddings",
        [
            ("max_position_embeddings", cfg.get("max_position_embeddings")),
            ("n_positions", cfg.get("n_positions")),
        ],
        None,
    )
    if max_pos is not None:
        max_pos = check.position_count(
            "max_position_embeddings", max_pos, where="rope_config_from_hf"
        )
    scaling = _scaling(cfg, params, model_type, max_pos)
    layout = "interleaved" if model_type in INTERLEAVED_MODEL_TYPES else "half"
    if model_type in MLA_MODEL_TYPES:
        interleave = check.boolean("rope_interleave", cfg.get("rope_interleave", True))
        layout = "interleaved" if interleave else "half"
    if scaling.rope_type == "proportional":  # p-RoPE: zero frequencies over the whole head
        rotary_dim = head_dim
    return RopeConfig(head_dim, rotary_dim, base, scaling, layout, max_pos)


def _as_dict(config: Any) -> Mapping[str, Any]:
    """The config as a mapping: ``config.to_dict()`` for a PretrainedConfig, or the mapping."""
    if not isinstance(config, Mapping) and callable(getattr(config, "to_dict", None)):
        config = config.to_dict()
        if not isinstance(config, Mapping):
            raise TypeError(f"config.to_dict() must return a dict, got {type(config).__name__}")
    if not isinstance(config, Mapping):
        raise TypeError(
            "config must be a Hugging Face PretrainedConfig (with to_dict()) or the dict of a "
            f"config.json, got {type(config).__name__}"
        )
    return config


def _rope_parameters(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``rope_parameters`` and ``rope_scaling`` merged (either may be absent or None); the
    legacy ``type`` is read as ``rope_type``. A key both give with different values is an
    error."""
    merged: dict[str, Any] = {}
    for name in ("rope_parameters", "rope_scaling"):
        part = cfg.get(name)
        if part is None:
            continue
        if not isinstance(part, Mapping):
            raise TypeError(f"{name} must be a dict or None, got {type(part).__name__} {part!r}")
        if any(key in part for key in ("full_attention", "sliding_attention")):
            raise ValueError(
                f"{name} holds one dict per layer type ({sorted(part)}); rope_config_from_hf "
                "reads one rope setting: use RotaryEmbedding.from_config(config, layer=i) or "
                "posenc_core.rope.layer_plan(config), which read it per layer"
            )
        for key, value in part.items():
            key = "rope_type" if key == "type" else key
            if key in merged and merged[key] != value:
                raise ValueError(
                    f"{name}[{key!r}]={value!r} contradicts {merged[key]!r} given for the same "
                    "key (rope_parameters / rope_scaling, rope_type / type); give one value"
                )
            merged[key] = value
    return merged


def _one_value(setting: str, sources: list[tuple[str, Any]], default: Any) -> Any:
    """The value of the first source that is not None; every other given source must agree."""
    given = [(name, value) for name, value in sources if value is not None]
    for name, value in given[1:]:
        if value != given[0][1]:
            raise ValueError(
                f"config gives {setting} twice with different values: {given[0][0]}="
                f"{given[0][1]!r} and {name}={value!r}; keep one"
            )
    return given[0][1] if given else default


def _head_dim(cfg: Mapping[str, Any]) -> int:
    """``head_dim``, else ``hidden_size // num_attention_heads`` (``n_embd // n_head``);
    for multi-head latent attention ``qk_rope_head_dim`` (default 64), the rotated part."""
    if cfg.get("model_type") in MLA_MODEL_TYPES:
        return check.width(
            "qk_rope_head_dim", cfg.get("qk_rope_head_dim") or 64, where="rope_config_from_hf"
        )
    hidden = _one_value(
        "hidden_size",
        [("hidden_size", cfg.get("hidden_size")), ("n_embd", cfg.get("n_embd"))],
        None,
    )
    heads = _one_value(
        "num_attention_heads",
        [("num_attention_heads", cfg.get("num_attention_heads")), ("n_head", cfg.get("n_head"))],
        None,
    )
    if cfg.get("head_dim") is not None:
        return check.width("head_dim", cfg["head_dim"], where="rope_config_from_hf")
    if hidden is None or heads is None:
        missing = "hidden_size (or n_embd)" if hidden is None else "num_attention_heads (or n_head)"
        raise ValueError(
            f"config needs head_dim, or hidden_size and num_attention_heads; {missing} is "
            f"missing (keys given: {sorted(cfg)})"
        )
    hidden = check.positive_int("hidden_size", hidden)
    heads = check.positive_int("num_attention_heads", heads)
    if hidden % heads:
        raise ValueError(
            f"hidden_size={hidden} must be divisible by num_attention_heads={heads} when the "
            "config gives no head_dim"
        )
    return check.width(
        "head_dim (hidden_size // num_attention_heads)",
        hidden // heads,
        where="rope_config_from_hf",
    )


def _rotary_dim(
    cfg: Mapping[str, Any], params: Mapping[str, Any], head_dim: int, model_type: Any
) -> int:
    """The rotated width: int(head_dim * partial_rotary_factor) from whichever key gives it."""
    factor = _one_value(
        "partial_rotary_factor",
        [
            ("rope_parameters['partial_rotary_factor']", params.get("partial_rotary_factor")),
            ("partial_rotary_factor", cfg.get("partial_rotary_factor")),
            ("rotary_pct", cfg.get("rotary_pct")),
        ],
        None,
    )
    width = None
    if factor is not None:
        factor = check.real_number("partial_rotary_factor", factor)
        if not 0 < factor <= 1:
            raise ValueError(
                f"partial_rotary_factor (or rotary_pct) must be in (0, 1], got {factor}"
            )
        width = int(head_dim * factor)  # Hugging Face truncates: dim = int(head_dim * factor)
        if width < 2 or width % 2:
            raise ValueError(
                f"partial_rotary_factor={factor} gives rotary_dim = int({head_dim} * {factor}) "
                f"= {width}; it must be even and >= 2 (dims are rotated in pairs)"
            )
    if "rotary_dim" in cfg or model_type in DEFAULT_ROTARY_DIM:  # GPT-J's absolute width
        dim = cfg.get("rotary_dim", DEFAULT_ROTARY_DIM.get(model_type))
        dim = head_dim if dim is None else check.int_in_range("rotary_dim", dim, 2, head_dim)
        if dim % 2:
            raise ValueError(f"rotary_dim must be even (dims are rotated in pairs), got {dim}")
        if width is not None and width != dim:
            raise ValueError(
                f"config gives rotary_dim={dim} and partial_rotary_factor={factor} (rotary_dim "
                f"{width} of head_dim {head_dim}); keep one"
            )
        return dim
    if width is None:
        width = int(head_dim * DEFAULT_PARTIAL_ROTARY_FACTOR.get(model_type, 1.0))
    return width


def _scaling(
    cfg: Mapping[str, Any], params: Mapping[str, Any], model_type: Any, max_pos: int | None
) -> RopeScaling:
    """The parsed scaling, with L0 and factor filled in as Hugging Face does."""
    rope_type = params.get("rope_type", "default")
    rope_type = RENAMED_ROPE_TYPES.get(model_type, {}).get(rope_type, rope_type)
    if rope_type not in VARIANTS:
        raise ValueError(
            f"rope_parameters['rope_type'] (or rope_scaling['type']) must be one of "
            f"{', '.join(repr(t) for t in ROPE_TYPES)}, got {rope_type!r}"
        )
    dropped = (
        ("rope_theta",) if rope_type == "proportional" else ("rope_theta", "partial_rotary_factor")
    )
    scaling = {k: v for k, v in params.items() if k not in dropped}
    scaling["rope_type"] = rope_type
    if rope_type == "dynamic":  # Hugging Face's dynamic NTK divides by max_position_embeddings
        scaling[L0] = _required(max_pos, "max_position_embeddings", rope_type)
    elif rope_type in _NEEDS_L0:
        l0 = _one_value(
            L0,
            [(L0, cfg.get(L0)), (f"rope_parameters[{L0!r}]", params.get(L0))],
            max_pos,
        )
        scaling[L0] = _required(l0, f"{L0} (or max_position_embeddings)", rope_type)
    if rope_type in _FACTOR_FROM_LENGTHS and scaling.get("factor") is None:
        length = _required(max_pos, "factor (or max_position_embeddings)", rope_type)
        l0 = check.position_count(L0, scaling[L0], where="rope_config_from_hf")
        if length < l0:
            raise ValueError(
                f"rope_type {rope_type!r} without a factor takes factor = "
                f"max_position_embeddings / {L0} = {length} / {l0} < 1; a context extension "
                "needs max_position_embeddings >= original_max_position_embeddings"
            )
        scaling["factor"] = length / l0
    return parse_scaling(scaling)  # rope_theta was read above, not left in the dict


def _required(value: Any, key: str, rope_type: str) -> Any:
    if value is None:
        raise ValueError(f"config with rope_type {rope_type!r} needs {key}, which it does not give")
    return value
