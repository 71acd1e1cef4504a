"""posenc_core: the positional-encoding implementations behind the book.

Two layers, one folder each:

* the numerical core, ``posenc_core/`` (``sinusoidal``, ``rotation``, ``learned``, ``alibi``,
  ``attention``, ``rope``, ``positions`` (positions per row: padding, packing), ``t5_bias``
  (T5's relative position bias), ``analysis`` and the private ``_validation``, ``_numerics``,
  ``_format``, ``_extras``). It imports only torch, numpy and the standard library, never
  matplotlib, ipywidgets, IPython or anything in ``posenc_core.book``, so
  ``import posenc_core`` stays light (``tests/core/test_package.py`` checks both in a fresh
  process and by reading the source).
* the book layer, ``posenc_core.book`` (``figures``, ``widgets``, ``models``, ``studies``,
  ``instruments``, ``sources``, ``exercises``, ``notebook``): it imports the core, never the
  reverse, and is not imported here.

This namespace holds the 30 names below; everything else stays importable from its module
(``posenc_core.rope.rope_angles``, ``posenc_core.analysis.similarity_by_offset``,
``posenc_core.positions.packed_positions``, ``posenc_core.t5_bias.T5RelativePositionBias``,
``posenc_core.rope.xpos.XPosEmbedding``, ``posenc_core.multi_axis.mrope_cos_sin``, ...), and every
core module is reachable as an attribute (``pc.positions``, ``pc.t5_bias``, ``pc.multi_axis``,
and ``pc.xpos`` for ``posenc_core.rope.xpos``).
"""

from . import multi_axis as multi_axis
from . import positions as positions
from . import t5_bias as t5_bias
from .alibi import alibi_bias, alibi_key_bias, alibi_slopes
from .analysis import (
    cosine_similarity_matrix,
    count_pairs,
    first_rise,
    largest_reversal,
    nearest_neighbour_margin,
    rope_decay_bound,
    rope_score_vs_distance,
    score_decomposition,
    sinusoidal_similarity,
)
from .attention import MultiHeadSelfAttention, attention, self_attention
from .learned import LearnedPositionalEmbedding
from .rope import (
    RopeScaling,
    RotaryEmbedding,
    apply_rope,
    permute_qk_weight,
    rope_cos_sin,
    rope_frequencies,
    rotate_pairs,
)
from .rope import xpos as xpos
from .rotation import rotation_matrix, shift_matrix
from .sinusoidal import (
    SinusoidalPositionalEncoding,
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_table,
    sinusoidal_wavelengths,
)

__version__ = "0.1.0"

__all__ = [
    # sinusoidal (Vaswani et al. 2017, Sec. 3.5) and its rotations
    "SinusoidalPositionalEncoding",
    "sinusoidal_frequencies",
    "sinusoidal_encoding",
    "sinusoidal_table",
    "sinusoidal_wavelengths",
    "rotation_matrix",
    "shift_matrix",
    # learned (BERT, GPT-2)
    "LearnedPositionalEmbedding",
    # attention and ALiBi (Press et al. 2022)
    "MultiHeadSelfAttention",
    "attention",
    "self_attention",
    "alibi_bias",
    "alibi_key_bias",
    "alibi_slopes",
    # RoPE (Su et al. 2021)
    "RotaryEmbedding",
    "RopeScaling",
    "apply_rope",
    "rope_cos_sin",
    "rope_frequencies",
    "rotate_pairs",
    "permute_qk_weight",
    # measurements the chapters make
    "cosine_similarity_matrix",
    "count_pairs",
    "first_rise",
    "largest_reversal",
    "nearest_neighbour_margin",
    "rope_decay_bound",
    "rope_score_vs_distance",
    "score_decomposition",
    "sinusoidal_similarity",
]
