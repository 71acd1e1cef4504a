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
``llama3``, ``longrope``, ``proportional`` (p-RoPE). A whole model configuration (a
``PretrainedConfig`` or the dict of a ``config.json``) gives a ready module:
``RotaryEmbedding.from_config(config)``, or ``from_config(config, layer=i)`` for a model whose
layers differ, and :func:`layer_plan` gives every layer's.

Where each part lives:

* ``formula.py``: the formula (``rope_formula``),
  :func:`rotate_pairs` and the tables (:func:`rope_angles`, :func:`rope_cos_sin`);
* ``apply.py``: :func:`apply_rope`, the checked entry point that applies it;
* ``module.py``: :class:`RotaryEmbedding` (cached tables for queries and keys; partial
  rotary; ``from_config``);
* ``config.py``: :class:`RopeConfig` and :func:`rope_config_from_hf`, the RoPE settings of a
  Hugging Face config (head_dim, rotary_dim, base, scaling, layout);
* ``kernels.py``: picks a fast path for a call (the native kernel, else the eager chunks and
  the exact bfloat16/float16 path), each bit-identical to the formula;
* ``native.py``: the native C kernel (``native.c``, compiled on first use with the system C
  compiler into a folder only this user can write, verified by SHA-256 before it is loaded,
  and called through ctypes): one pass per pair, in place without a temporary,
  bfloat16/float16 correctly rounded; ``native.status()`` says whether it is in use and why
  not, ``POSENC_NATIVE=0`` / ``1`` turns it off / requires it;
* ``scaling.py``: :class:`RopeScaling`, :func:`parse_scaling` and one inverse-frequency
  function per ``rope_type``, registered in ``VARIANTS``; :func:`rope_frequencies`;
* ``layouts.py``: :func:`interleaved_to_half`, :func:`half_to_interleaved`,
  :func:`permute_qk_weight`.
* ``layers.py``: what each decoder layer does with positions, read from a config
  (:func:`layer_facts`, :class:`LayerFacts`, :class:`QueryTemperature`; one ``ModelRule`` per
  architecture in ``RULES``); ``plan.py``: :func:`layer_plan`, the per-layer plan with the
  modules built, printed as a table; ``RotaryEmbedding.from_config(config, layer=i)`` is one
  row of it; ``mla.py``: :func:`apply_decoupled_rope`, DeepSeek's multi-head latent
  attention.
* ``xpos.py``: xPos (Sun et al. 2022), RoPE with a per-pair scale that grows for queries and
  shrinks for keys with the position (:class:`~posenc_core.rope.xpos.XPosEmbedding`); reached
  as ``pc.xpos``.

Precision: frequencies and angles are computed in float64 and rounded once, so tables stay
within float32 rounding of the exact value at any position up to 2**20 and beyond, and
bfloat16/float16 requests get the correctly rounded value. (Building positions or angles in
bf16 makes cos/sin wrong by O(1) past a few thousand positions; in all-fp32 arithmetic the
error reaches about 1e-2 at position 131072.) Tests: ``tests/core/test_rope.py`` (properties,
bit-exactness of every path), ``tests/core/test_rope_reference.py`` (Hugging Face, Meta,
RoFormer's matrix), ``test_rope_module.py`` (the module: partial rotary, positions per row,
dynamic NTK and LongRoPE per call), ``test_rope_config.py`` (configs) and
``test_rope_models.py`` and ``test_rope_layer_models.py`` (Hugging Face's own models, run
with posenc_core's rotation), ``test_rope_layers.py`` (per-layer plans, p-RoPE, MLA,
temperatures).
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
