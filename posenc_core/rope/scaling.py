"""Context-extension scaling of RoPE's frequencies: one small function per ``rope_type``.

A Hugging Face config's ``rope_scaling`` / ``rope_parameters`` dict is parsed once, by
:func:`parse_scaling`, into a frozen :class:`RopeScaling`, checked once in its
``__post_init__``. Each ``rope_type`` is then one pure function from
``(base, head_dim, scaling, seq_len)`` to the inverse frequencies theta_i, registered with the
dict keys it reads in the one table ``VARIANTS``, as Hugging Face registers its
``_compute_*_parameters`` functions in ``ROPE_INIT_FUNCTIONS``
(``transformers/modeling_rope_utils.py``).

Adding a type is one function and one ``VARIANTS`` entry (plus a :class:`RopeScaling` field
for a parameter no existing type has); nothing else branches on ``rope_type``.

Every type is checked against ``transformers.modeling_rope_utils`` (and Llama 3.1 against
Meta's ``apply_scaling``) in ``tests/core/test_rope_reference.py``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import torch

from .. import _validation as check
from ..sinusoidal import sinusoidal_frequencies

L0 = "original_max_position_embeddings"


def _divisors(name: str, value: object) -> tuple[float, ...]:
    """LongRoPE's per-frequency factors as a non-empty tuple of finite floats > 0."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(
            f"{name} must be a list or tuple of positive numbers (one per frequency), "
            f"got {type(value).__name__} {value!r}"
        )
    if not value:
        raise ValueError(f"{name} must hold one positive number per frequency, got {value!r}")
    out = tuple(check.real_number(f"{name}[{i}]", v) for i, v in enumerate(value))
    bad = [i for i, v in enumerate(out) if v <= 0]
    if bad:
        raise ValueError(
            f"{name} must hold numbers > 0 (each divides a frequency), got {name}[{bad[0]}]="
            f"{out[bad[0]]}"
        )
    return out


@dataclass(frozen=True)
class RopeScaling:
    """A parsed, checked context-extension scaling: the ``rope_type`` and its parameters.

    The fields are Hugging Face's key names; a type reads only the ones listed for it in
    ``VARIANTS``, and every other field must keep its default. Build one with
    :func:`parse_scaling` from a config dict, or directly, e.g.
    ``RopeScaling("linear", factor=4.0)``.

    Args:
        rope_type: one of ``ROPE_TYPES``.
        factor: context-extension factor s >= 1 (every type but ``default``).
        original_max_position_embeddings: L0, the context length the model was trained on
            (``dynamic``, ``yarn``, ``llama3``, ``longrope``), a positive integer at most 2**53.
        beta_fast, beta_slow: YaRN's rotation counts that bound the ramp (defaults 32 and 1;
            0 or None means the default, as in Hugging Face).
        truncate: YaRN: round the ramp's ends to whole dimensions (default True).
        attention_factor: YaRN, LongRoPE: the factor cos and sin are multiplied by; None
            derives it (see :attr:`attention_scaling`).
        mscale, mscale_all_dim: YaRN (DeepSeek): derive the attention factor as
            mscale(s, mscale) / mscale(s, mscale_all_dim); 0 or None: not used.
        low_freq_factor, high_freq_factor: Llama 3.1's wavelength bounds L0 / factor,
            high >= low > 0 (equal: no band between, as Llama 4 Scout's 1 and 1).
        short_factor, long_factor: LongRoPE (Phi-3): one positive divisor per frequency
            (``rotary_dim // 2`` of them, checked where the rotary width is known), used for
            sequences of length <= L0 and > L0 respectively; kept as tuples of floats.
        partial_rotary_factor: ``proportional`` (Gemma 4): the share p in (0, 1] of the
            head's frequency pairs that rotate; the others get frequency 0 (default 1).
    """

    rope_type: str = "default"
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    beta_fast: float | None = 32.0
    beta_slow: float | None = 1.0
    truncate: bool = True
    attention_factor: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    short_factor: tuple[float, ...] | None = None
    long_factor: tuple[float, ...] | None = None
    partial_rotary_factor: float | None = None

    def __post_init__(self) -> None:
        check.choice("scaling['rope_type']", self.rope_type, VARIANTS)
        variant = VARIANTS[self.rope_type]
        uses = variant.required + variant.optional
        for field in fields(self)[1:]:
            value = getattr(self, field.name)
            if field.name not in uses and value != field.default:
                raise ValueError(
                    f"scaling of rope_type {self.rope_type!r} does not use {field.name}, got "
                    f"{field.name}={value!r}; it uses {', '.join(uses) or 'no parameters'}"
                )
            if field.name in variant.required and value is None:
                raise ValueError(
                    f"scaling of rope_type {self.rope_type!r} needs {field.name}, got None"
                )

        def put(name: str, value: Any) -> None:  # frozen: normalise through object.__setattr__
            object.__setattr__(self, name, value)

        for name in ("short_factor", "long_factor"):
            if getattr(self, name) is not None:
                put(name, _divisors(f"scaling['{name}']", getattr(self, name)))

        if self.factor is not None:
            put("factor", check.factor_value("scaling['factor']", self.factor))
        if self.original_max_position_embeddings is not None:
            put(
                L0,
                check.position_count(
                    f"scaling['{L0}']", self.original_max_position_embeddings, where="RopeScaling"
                ),
            )
        beta_fast = check.real_number("scaling['beta_fast']", self.beta_fast or 32.0)
        beta_slow = check.real_number("scaling['beta_slow']", self.beta_slow or 1.0)
        if not beta_fast > beta_slow > 0:
            raise ValueError(
                f"scaling needs beta_fast > beta_slow > 0, got beta_fast={beta_fast}, "
                f"beta_slow={beta_slow}"
            )
        put("beta_fast", beta_fast)
        put("beta_slow", beta_slow)
        put("truncate", check.boolean("scaling['truncate']", self.truncate))
        for name in ("mscale", "mscale_all_dim"):
            value = getattr(self, name)
            if value is not None and check.real_number(f"scaling['{name}']", value) < 0:
                raise ValueError(
                    f"scaling['{name}'] must be >= 0 (0 or absent: not used), got {value}"
                )
        if self.attention_factor is not None:
            value = check.real_number("scaling['attention_factor']", self.attention_factor)
            if value <= 0:
                raise ValueError(
                    "scaling['attention_factor'] must be > 0 (it multiplies cos and sin), "
                    f"got {self.attention_factor}"
                )
            put("attention_factor", value)
        if self.partial_rotary_factor is not None:
            value = check.real_number(
                "scaling['partial_rotary_factor']", self.partial_rotary_factor
            )
            if not 0 < value <= 1:
                raise ValueError(f"scaling['partial_rotary_factor'] must be in (0, 1], got {value}")
            put("partial_rotary_factor", value)
        if self.low_freq_factor is not None or self.high_freq_factor is not None:
            low = check.real_number("scaling['low_freq_factor']", self.low_freq_factor)
            high = check.real_number("scaling['high_freq_factor']", self.high_freq_factor)
            if not high >= low > 0:  # equal: a hard cut at L0 / low (Llama 4 Scout: 1 and 1)
                raise ValueError(
                    "scaling needs high_freq_factor >= low_freq_factor > 0, "
                    f"got low={low}, high={high}"
                )
            put("low_freq_factor", low)
            put("high_freq_factor", high)
        if variant.validate is not None:
            variant.validate(self)

    @property
    def attention_scaling(self) -> float:
        """The factor cos and sin are multiplied by (Hugging Face's ``attention_scaling``), so
        scores scale by its square: ``attention_factor`` if given, else the type's default
        (YaRN: 0.1 ln(s) + 1, Peng et al. 2023, Eq. 22; LongRoPE:
        sqrt(1 + ln(s) / ln(L0)); every other type: 1)."""
        if self.attention_factor is not None:
            return self.attention_factor
        default = VARIANTS[self.rope_type].attention_scaling
        return 1.0 if default is None else default(self)

    @property
    def depends_on_seq_len(self) -> bool:
        """Whether the frequencies change with the sequence length (then never cached)."""
        return VARIANTS[self.rope_type].depends_on_seq_len

    def to_dict(self) -> dict[str, Any]:
        """The Hugging Face-style dict of this scaling: rope_type and the parameters it gives."""
        variant = VARIANTS[self.rope_type]
        keys = variant.required + variant.optional
        given = {key: getattr(self, key) for key in keys if getattr(self, key) is not None}
        for key in ("short_factor", "long_factor"):  # lists, as in a config.json
            if key in given:
                given[key] = list(given[key])
        return {"rope_type": self.rope_type, **given}

    def __repr__(self) -> str:
        return "RopeScaling(" + ", ".join(f"{k}={v!r}" for k, v in self.to_dict().items()) + ")"


# --------------------------------------------------------------------------- one function per type
# Each maps (base, head_dim, scaling, seq_len) to float64 theta_i of shape (head_dim // 2,). They
# trust their arguments: rope_frequencies and RotaryEmbedding check them first.


def default_inv_freq(
    base: float, head_dim: int, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """theta_i = base**(-2i/d) (Su et al. 2021, Eq. 15; the sinusoidal frequencies of Vaswani
    et al. 2017, Sec. 3.5): :func:`posenc_core.sinusoidal.sinusoidal_frequencies`. Hugging Face:
    ``_compute_default_rope_parameters``."""
    return sinusoidal_frequencies(head_dim, base=base)


def linear_inv_freq(
    base: float, head_dim: int, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """theta_i / s: position interpolation (Chen et al. 2023, "Extending context window of
    large language models via positional interpolation", Eq. 4). Hugging Face:
    ``_compute_linear_scaling_rope_parameters``."""
    return sinusoidal_frequencies(head_dim, base=base) / scaling.factor


def _ntk_base(base: float, head_dim: int, ratio: float, rope_type: str, factor: float) -> float:
    """base * ratio**(d/(d-2)): the base for which the lowest frequency is divided by ratio
    while theta_0 = 1 stays (NTK-aware scaling, "bloc97" 2023). ``factor`` is the configured
    factor the ratio came from, named in the error when the new base overflows float64."""
    if head_dim == 2:
        raise ValueError(
            f"head_dim must be > 2 for {rope_type} scaling (the exponent is d/(d-2)), got 2"
        )
    try:
        new_base = base * ratio ** (head_dim / (head_dim - 2))
    except OverflowError:
        new_base = math.inf
    if not math.isfinite(new_base):
        raise ValueError(
            f"scaling['factor'] = {factor!r} is too large for {rope_type} scaling with "
            f"base {base!r} and head_dim {head_dim}: the scaled base "
            f"base * {ratio!r}**({head_dim}/{head_dim - 2}) overflows float64 (at most "
            f"{sys.float_info.max:.3g})"
        )
    return new_base


def ntk_inv_freq(
    base: float, head_dim: int, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """theta_i with base replaced by base * s**(d/(d-2)): NTK-aware scaling ("bloc97", 2023,
    reddit.com/r/LocalLLaMA "NTK-Aware Scaled RoPE"); interpolates the slow dimensions and
    keeps the fast ones. Hugging Face's ``dynamic`` type applies it at the current length."""
    s = scaling.factor
    return sinusoidal_frequencies(head_dim, base=_ntk_base(base, head_dim, s, "ntk", s))


def dynamic_inv_freq(
    base: float, head_dim: int, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """NTK-aware scaling with ratio s * L / L0 - (s - 1), L = max(seq_len, L0) (no change up to
    L0; seq_len None means L0): dynamic NTK, Hugging Face's
    ``_compute_dynamic_ntk_parameters``.

    The ratio is evaluated as 1 + s * (L - L0) / L0, the same number without the cancellation
    of s * L / L0 - (s - 1): for s = 1e16 and L = L0 that difference is 0 in float64 (s - 1
    rounds to s), which would give base 0, where the ratio is exactly 1."""
    l0, s = scaling.original_max_position_embeddings, scaling.factor
    length = l0 if seq_len is None else max(seq_len, l0)
    ratio = 1.0 + s * (length - l0) / l0
    return sinusoidal_frequencies(head_dim, base=_ntk_base(base, head_dim, ratio, "dynamic", s))


def yarn_inv_freq(
    base: float, head_dim: int, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """Per frequency a blend of theta_i (extrapolate) and theta_i / s (interpolate), with a
    linear ramp between the dimensions that make beta_fast and beta_slow turns over L0
    (Peng et al. 2023, "YaRN", Eq. 18-20). Hugging Face: ``_compute_yarn_parameters``."""
    d, l0, factor = head_dim, scaling.original_max_position_embeddings, scaling.factor
    inv_freq = sinusoidal_frequencies(d, base=base)  # (d/2,)

    def correction_dim(n_rotations: float) -> float:
        # the (fractional) dimension index whose wavelength makes n_rotations turns over l0
        return d * math.log(l0 / (n_rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(scaling.beta_fast), correction_dim(scaling.beta_slow)
    if scaling.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = ((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp  # 1: extrapolate (keep theta_i), 0: interpolate (theta_i / factor)
    return inv_freq / factor * (1 - keep) + inv_freq * keep


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature sqrt(1/t) = 0.1 * ln(s) + 1 (Peng et al. 2023, Eq. 22)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def yarn_attention_scaling(scaling: RopeScaling) -> float:
    """YaRN's default attention factor: mscale(s) = 0.1 ln(s) + 1 (Peng et al. 2023, Eq. 22),
    or mscale(s, mscale) / mscale(s, mscale_all_dim) when both are given (DeepSeek-V2), as
    Hugging Face's ``_compute_yarn_parameters``. At least 1, since mscale >= 0 and s >= 1."""
    if scaling.mscale and scaling.mscale_all_dim:
        return _yarn_mscale(scaling.factor, scaling.mscale) / _yarn_mscale(
            scaling.factor, scaling.mscale_all_dim
        )
    return _yarn_mscale(scaling.factor)


def llama3_inv_freq(
    base: float, head_dim: int, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """Wavelengths below L0 / high_freq_factor kept, above L0 / low_freq_factor divided by s,
    smoothly interpolated between: Llama 3.1's ``apply_scaling`` (meta-llama/llama-models,
    models/llama3/reference_impl/model.py). Hugging Face: ``_compute_llama3_parameters``."""
    inv_freq = sinusoidal_frequencies(head_dim, base=base)  # (d/2,)
    l0, factor = scaling.original_max_position_embeddings, scaling.factor
    low_freq_factor, high_freq_factor = scaling.low_freq_factor, scaling.high_freq_factor
    low_wavelen = l0 / low_freq_factor
    high_wavelen = l0 / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    if high_freq_factor == low_freq_factor:  # no band to blend in (0 / 0 in the formula below)
        return torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (l0 / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    return torch.where(
        wavelen < high_wavelen,
        inv_freq,
        torch.where(wavelen > low_wavelen, inv_freq / factor, smoothed),
    )


def longrope_inv_freq(
    base: float, head_dim: int, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """theta_i / lambda_i with one factor lambda_i per frequency: ``long_factor`` when the
    sequence is longer than L0 (seq_len > L0), ``short_factor`` otherwise (seq_len None: short).
    LongRoPE (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million
    Tokens"; Phi-3's ``su`` scaling). Hugging Face: ``_compute_longrope_parameters``, with the
    choice made by ``longrope_frequency_update`` (``dynamic_rope_update``). ``head_dim`` is the
    rotary width here, so the factors must number ``head_dim // 2``: checked here, where the
    width is known (a length comparison)."""
    long = seq_len is not None and seq_len > scaling.original_max_position_embeddings
    name = "long_factor" if long else "short_factor"
    for key in ("short_factor", "long_factor"):
        if len(getattr(scaling, key)) != head_dim // 2:
            raise ValueError(
                f"scaling['{key}'] must hold rotary_dim // 2 = {head_dim // 2} factors (one per "
                f"frequency), got {len(getattr(scaling, key))}"
            )
    divisors = torch.tensor(getattr(scaling, name), dtype=torch.float64)  # (d/2,)
    return sinusoidal_frequencies(head_dim, base=base) / divisors


def longrope_attention_scaling(scaling: RopeScaling) -> float:
    """LongRoPE's default attention factor sqrt(1 + ln(s) / ln(L0)) for s > 1, else 1, as Hugging
    Face's ``_compute_longrope_parameters`` (Phi-3's ``scaling_factor``). Hugging Face takes s
    from ``factor`` or, when that is absent, max_position_embeddings / L0 of the model config;
    :func:`~posenc_core.rope.rope_config_from_hf` does the same, so here ``factor`` is given
    (or ``attention_factor``, which then wins)."""
    s, l0 = scaling.factor, scaling.original_max_position_embeddings
    return 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(l0))


def _check_longrope(scaling: RopeScaling) -> None:
    """LongRoPE needs s (``factor``) or the factor itself for its attention factor, and two
    factor lists of one length."""
    if scaling.factor is None and scaling.attention_factor is None:
        raise ValueError(
            "scaling of rope_type 'longrope' needs 'factor' or 'attention_factor' (Hugging Face "
            "takes factor = max_position_embeddings / original_max_position_embeddings from the "
            "model config; RotaryEmbedding.from_config does the same), got neither"
        )
    if len(scaling.short_factor) != len(scaling.long_factor):
        raise ValueError(
            "scaling['short_factor'] and scaling['long_factor'] must have one length (rotary_dim "
            f"// 2), got {len(scaling.short_factor)} and {len(scaling.long_factor)}"
        )


def proportional_inv_freq(
    base: float, head_dim: int, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """p-RoPE: the n = int(p * head_dim // 2) highest frequencies base**(-2i/head_dim),
    i < n, then head_dim // 2 - n zeros (pairs that do not rotate), all divided by ``factor``
    (default 1). The exponent keeps the whole head width, so the rotating pairs are exactly
    those of plain RoPE over the head and the zeros stay paired across it (Barbero et al.
    2025, "Round and Round We Go! What makes Rotary Positional Encodings useful?", Sec. 6;
    Gemma 4's global layers). Hugging Face: ``_compute_proportional_rope_parameters``
    (``tests/core/test_rope_layers.py``)."""
    p = 1.0 if scaling.partial_rotary_factor is None else scaling.partial_rotary_factor
    rotating = int(p * head_dim // 2)  # Hugging Face: int(rope_proportion * head_dim // 2)
    inv_freq = sinusoidal_frequencies(head_dim, base=base)  # (d/2,)
    inv_freq[rotating:] = 0.0
    return inv_freq / (1.0 if scaling.factor is None else scaling.factor)


# --------------------------------------------------------------------------- the table


class Variant(NamedTuple):
    """One ``rope_type``: its inverse frequencies and the dict keys it reads."""

    inv_freq: Callable[[float, int, RopeScaling, int | None], torch.Tensor]
    required: tuple[str, ...] = ()  # keys its dict must give
    optional: tuple[str, ...] = ()  # keys it may give (RopeScaling's defaults otherwise)
    attention_scaling: Callable[[RopeScaling], float] | None = None  # None: 1
    depends_on_seq_len: bool = False  # recomputed from the sequence length on every call
    validate: Callable[[RopeScaling], None] | None = None  # its own check, end of __post_init__


_YARN_OPTIONAL = (
    "beta_fast",
    "beta_slow",
    "truncate",
    "attention_factor",
    "mscale",
    "mscale_all_dim",
)
VARIANTS: dict[str, Variant] = {
    "default": Variant(default_inv_freq),
    "linear": Variant(linear_inv_freq, ("factor",)),
    "ntk": Variant(ntk_inv_freq, ("factor",)),
    "dynamic": Variant(dynamic_inv_freq, ("factor", L0), depends_on_seq_len=True),
    "yarn": Variant(yarn_inv_freq, ("factor", L0), _YARN_OPTIONAL, yarn_attention_scaling),
    "llama3": Variant(llama3_inv_freq, ("factor", L0, "low_freq_factor", "high_freq_factor")),
    "longrope": Variant(
        longrope_inv_freq,
        ("short_factor", "long_factor", L0),
        ("factor", "attention_factor"),
        longrope_attention_scaling,
        depends_on_seq_len=True,
        validate=_check_longrope,
    ),
    "proportional": Variant(proportional_inv_freq, (), ("factor", "partial_rotary_factor")),
}
"""Every scaling type by name, each a ``Variant`` (its inverse-frequency function, the keys
it needs and reads, its attention factor); one entry per type, as Hugging Face's
``ROPE_INIT_FUNCTIONS``. Tested in tests/core/test_rope_config.py against transformers."""
ROPE_TYPES = tuple(VARIANTS)
"""The names of :data:`VARIANTS`, in order: what ``rope_type`` may be."""

# Keys a scaling dict may hold besides its type's own: the type and base, the rotated share
# (read from the whole config by rope_config_from_hf), and keys that Hugging Face's config
# classes keep there for other code (``ignore_keys_at_rope_validation``: Qwen2-VL's M-RoPE
# sections, Ministral 3's query temperature). A key outside KNOWN_KEYS is refused by
# parse_scaling.
GENERAL_KEYS = ("rope_type", "type", "rope_theta", "partial_rotary_factor")
OTHER_KEYS = (
    "mrope_section",
    "mrope_interleaved",
    "llama_4_scaling_beta",
    "max_position_embeddings",
)
KNOWN_KEYS = frozenset(
    GENERAL_KEYS + OTHER_KEYS + tuple(k for v in VARIANTS.values() for k in v.required + v.optional)
)


# --------------------------------------------------------------------------- entry points


def parse_scaling(
    scaling: RopeScaling | Mapping[str, Any] | None, *, base: float = 10000.0
) -> RopeScaling:
    """Parse a Hugging Face scaling dict once into a checked :class:`RopeScaling`.

    Accepts ``rope_type`` (or the legacy ``type``) and the keys ``VARIANTS`` lists for it, besides
    ``rope_theta``, ``partial_rotary_factor`` and ``OTHER_KEYS``. Keys only other types read are
    ignored; a key no type reads is refused (Hugging Face warns), so a typo such as ``beta_fst``
    cannot leave YaRN at its default. ``"su"`` is refused with its new name, ``"longrope"``. A
    ``rope_theta`` must agree with ``base`` and a ``partial_rotary_factor`` must be 1 (the rotary
    width is the module's). Tested in ``tests/core/test_rope_reference.py`` against
    ``transformers.modeling_rope_utils``.

    Args:
        scaling: None, a :class:`RopeScaling` (returned as it is) or a mapping as found in a
            Hugging Face config's ``rope_scaling`` / ``rope_parameters``.
        base: rope_theta of the model, for the ``rope_theta`` consistency check.

    Returns:
        a :class:`RopeScaling`.
    """
    if scaling is None:
        return RopeScaling()
    if isinstance(scaling, RopeScaling):
        return scaling
    if not isinstance(scaling, Mapping):
        raise TypeError(
            "scaling must be None, a RopeScaling or a dict like a Hugging Face rope_scaling, "
            f"got {type(scaling).__name__}"
        )
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "su":
        raise ValueError(
            f"scaling['rope_type'] must be one of {', '.join(repr(t) for t in VARIANTS)}; got "
            "'su', Phi-3's old name for 'longrope' (Hugging Face's Phi3Config renames it): pass "
            "rope_type='longrope'"
        )
    check.choice("scaling['rope_type']", rope_type, VARIANTS)
    if "rope_theta" in scaling:
        theta = check.base_value("scaling['rope_theta']", scaling["rope_theta"])
        if theta != base:
            raise ValueError(
                f"scaling['rope_theta']={theta:g} disagrees with base={base:g}; pass base={theta:g}"
            )
    variant = VARIANTS[rope_type]
    unknown = sorted(str(key) for key in scaling if key not in KNOWN_KEYS)
    if unknown:
        reads = ", ".join(variant.required + variant.optional) or "no parameters"
        raise ValueError(
            f"scaling has key(s) {', '.join(map(repr, unknown))} that no rope type reads; "
            f"rope_type {rope_type!r} reads {reads} (besides {', '.join(GENERAL_KEYS)}): fix "
            "the name or drop the key"
        )
    prf = scaling.get("partial_rotary_factor")
    if rope_type == "proportional":
        prf = None  # the rotating share is this type's own parameter
    if prf is not None and check.real_number("scaling['partial_rotary_factor']", prf) != 1.0:
        raise ValueError(
            f"scaling['partial_rotary_factor'] must be 1.0 here, got {prf}: the rotated width is "
            "not a scaling parameter; pass rotary_dim=int(head_dim * partial_rotary_factor) to "
            "RotaryEmbedding, or build it from the whole config with RotaryEmbedding.from_config"
        )
    for key in variant.required:
        if scaling.get(key) is None:
            raise ValueError(
                f"scaling of rope_type {rope_type!r} needs the key {key!r}; "
                f"got keys {sorted(scaling)}"
            )
    given = {key: scaling[key] for key in variant.required + variant.optional if key in scaling}
    return RopeScaling(rope_type, **given)


def _base_of(scaling: RopeScaling | Mapping[str, Any] | None) -> float:
    if isinstance(scaling, Mapping) and "rope_theta" in scaling:
        return check.base_value("scaling['rope_theta']", scaling["rope_theta"])
    return 10000.0


def rope_attention_factor(scaling: RopeScaling | Mapping[str, Any] | None) -> float:
    """The factor by which a scaling method multiplies cos and sin (so scores scale by its square).

    Args:
        scaling: None, a :class:`RopeScaling` or a scaling dict (see :func:`parse_scaling`).

    Returns:
        1.0 for every method except YaRN, where it is ``0.1 * ln(factor) + 1`` unless the
        dictionary gives ``attention_factor`` (or ``mscale`` / ``mscale_all_dim``):
        :attr:`RopeScaling.attention_scaling`.
    """
    return float(parse_scaling(scaling, base=_base_of(scaling)).attention_scaling)


def _inv_freq(
    base: float, head_dim: int, scaling: RopeScaling, seq_len: int | None
) -> torch.Tensor:
    """theta_i for checked arguments: the function ``VARIANTS`` holds for the type."""
    return VARIANTS[scaling.rope_type].inv_freq(base, head_dim, scaling, seq_len)


def rope_frequencies(
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: RopeScaling | Mapping[str, Any] | None = None,
    seq_len: int | None = None,
) -> torch.Tensor:
    """Inverse frequencies theta_i, i = 0 .. head_dim/2 - 1, after optional scaling.

    Default: theta_i = base**(-2i/head_dim) (Su et al. 2021, Eq. 15), the same float64 values as
    :func:`posenc_core.sinusoidal.sinusoidal_frequencies`. With ``scaling``, the function
    ``VARIANTS`` holds for its ``rope_type`` (``linear``, ``ntk``, ``dynamic``, ``yarn``,
    ``llama3``, ``longrope``, ``proportional``; each docstring names its paper). For partial
    rotary pass the rotary width as ``head_dim``, as Hugging Face does. Tested in
    ``tests/core/test_rope_reference.py`` against ``transformers.modeling_rope_utils``.

    Args:
        head_dim: per-head width, positive and even, at most ``MAX_WIDTH``.
        base: rope_theta, finite and > 1.
        scaling: None, a :class:`RopeScaling` or a dict (see :func:`parse_scaling`).
        seq_len: current sequence length, at most 2**53, used only by ``dynamic`` (default: L0,
            no change) and ``longrope`` (default: the short factors).

    Returns:
        float64 tensor of shape ``(head_dim // 2,)``.
    """
    head_dim = check.width("head_dim", head_dim, where="rope_frequencies")
    base = check.base_value("base", base)
    scaling = parse_scaling(scaling, base=base)
    if seq_len is not None:
        seq_len = check.position_count("seq_len", seq_len, where="rope_frequencies")
    return _inv_freq(base, head_dim, scaling, seq_len)
