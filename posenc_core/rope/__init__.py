"""Rotary position embedding, RoPE (Su et al. 2021, "RoFormer", Eq. 13-16 and 34).

Query and key vectors are split into head_dim/2 pairs; pair i at position m is rotated by the
angle m * theta_i with theta_i = base ** (-2i / head_dim):
``rope(x) = x * cos + rotate_pairs(x) * sin``. Because rotations compose, the score
<R_m q, R_n k> = <q, R_{n-m} k> depends on the positions only through n - m. Partial rotary
(GPT-NeoX, GPT-J, Phi) rotates only the first ``rotary_dim`` dims of each head, with
theta_i = base ** (-2i / rotary_dim), and passes the rest through.

Two layouts say which elements form a pair: ``"half"`` (x[i], x[i + d/2]), Hugging Face's
``rotate_half``; and ``"interleaved"`` (x[2i], x[2i+1]), RoFormer's, Meta's Llama code's and
torchtune's. Context-extension ``scaling`` takes the dicts of Hugging Face configs
(``rope_scaling`` / ``rope_parameters``): ``linear``, ``ntk``, ``dynamic``, ``yarn``,
``llama3``, ``longrope``, ``proportional`` (p-RoPE). ``RotaryEmbedding.from_config(config)``
(or ``layer=i``) builds the module a Hugging Face model applies; :func:`layer_plan` gives
every layer's.

Where each part lives:

* ``formula.py``: the formula, :func:`rotate_pairs`, :func:`rope_angles`, :func:`rope_cos_sin`;
* ``apply.py``: :func:`apply_rope`, the checked entry point;
* ``module.py``: :class:`RotaryEmbedding` (cached tables, partial rotary, ``from_config``);
* ``config.py``: :class:`RopeConfig` and :func:`rope_config_from_hf`;
* ``kernels.py`` and ``native.py``: the fast paths (a native C kernel compiled on first use,
  else eager chunks), each bit-identical to the formula;
* ``scaling.py``: :class:`RopeScaling`, :func:`parse_scaling`, :func:`rope_frequencies` and
  one inverse-frequency function per ``rope_type``, registered in ``VARIANTS``;
* ``layouts.py``: :func:`interleaved_to_half`, :func:`half_to_interleaved`,
  :func:`permute_qk_weight`;
* ``layers.py``, ``plan.py``, ``mla.py``: what each decoder layer does with positions
  (:func:`layer_facts`, :func:`layer_plan`) and DeepSeek's decoupled RoPE
  (:func:`apply_decoupled_rope`);
* ``xpos.py``: xPos (Sun et al. 2022), reached as ``pc.xpos``.

Frequencies and angles are computed in float64 and rounded once, so tables are correctly
rounded at any position (see :doc:`/numerics`). Tests: ``tests/core/test_rope*.py`` (properties
and every path bit for bit; Hugging Face, Meta and RoFormer in ``test_rope_reference.py``;
Hugging Face's own models in ``test_rope_models.py`` and ``test_rope_layer_models.py``).
"""

from .apply import apply_rope
from .config import RopeConfig, rope_config_from_hf
from .formula import LAYOUTS, rope_angles, rope_cos_sin, rope_formula, rotate_pairs
from .layers import LayerFacts, QueryTemperature, layer_facts
from .layouts import half_to_interleaved, interleaved_to_half, permute_qk_weight
from .mla import apply_decoupled_rope
from .module import RotaryEmbedding
from .plan import LayerPlan, LayerPlans, layer_plan
from .scaling import (
    ROPE_TYPES,
    VARIANTS,
    RopeScaling,
    parse_scaling,
    rope_attention_factor,
    rope_frequencies,
)

__all__ = [
    "LAYOUTS",
    "LayerFacts",
    "LayerPlan",
    "LayerPlans",
    "QueryTemperature",
    "ROPE_TYPES",
    "VARIANTS",
    "RopeConfig",
    "RopeScaling",
    "RotaryEmbedding",
    "apply_decoupled_rope",
    "apply_rope",
    "half_to_interleaved",
    "interleaved_to_half",
    "layer_facts",
    "layer_plan",
    "parse_scaling",
    "permute_qk_weight",
    "rope_angles",
    "rope_attention_factor",
    "rope_config_from_hf",
    "rope_cos_sin",
    "rope_formula",
    "rope_frequencies",
    "rotate_pairs",
]
