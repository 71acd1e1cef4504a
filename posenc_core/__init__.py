"""posenc_core: the positional-encoding implementations behind the book.

Numerical modules (this namespace) import only torch and numpy (and the standard library);
figures (``posenc_core.viz``), notebook helpers (``posenc_core.notebook``) and widgets live in
separate modules that import these, never the reverse. ``posenc_core.exercises`` holds the
checkers the chapters' exercises call.
"""

from ._numerics import warm_up_trigonometry as _warm_up_trigonometry
from .alibi import alibi_bias, alibi_key_bias, alibi_slopes
from .analysis import (
    cosine_similarity_matrix,
    count_pairs,
    first_rise,
    largest_reversal,
    nearest_neighbour_margin,
    neighbour_distance,
    rope_decay_bound,
    rope_score_vs_distance,
    score_decomposition,
    similarity_by_offset,
    sinusoidal_similarity,
)
from .attention import MultiHeadSelfAttention, attention, self_attention
from .learned import LearnedPositionalEmbedding
from .rope import (
    RotaryEmbedding,
    apply_rope,
    half_to_interleaved,
    interleaved_to_half,
    parse_scaling,
    permute_qk_weight,
    rope_angles,
    rope_attention_factor,
    rope_cos_sin,
    rope_frequencies,
    rotate_pairs,
)
from .rotation import rotation_matrix, shift_matrix
from .sinusoidal import (
    SinusoidalPositionalEncoding,
    frequencies,
    sinusoidal_encoding,
    sinusoidal_table,
    wavelengths,
)

__version__ = "0.1.0"

_warm_up_trigonometry()  # the first parallel sin/cos call can be inexact: see its docstring

__all__ = [
    "LearnedPositionalEmbedding",
    "MultiHeadSelfAttention",
    "RotaryEmbedding",
    "SinusoidalPositionalEncoding",
    "alibi_bias",
    "alibi_key_bias",
    "alibi_slopes",
    "apply_rope",
    "attention",
    "cosine_similarity_matrix",
    "count_pairs",
    "first_rise",
    "largest_reversal",
    "frequencies",
    "half_to_interleaved",
    "interleaved_to_half",
    "nearest_neighbour_margin",
    "neighbour_distance",
    "parse_scaling",
    "permute_qk_weight",
    "rope_angles",
    "rope_attention_factor",
    "rope_cos_sin",
    "rope_decay_bound",
    "rope_frequencies",
    "rope_score_vs_distance",
    "rotate_pairs",
    "rotation_matrix",
    "score_decomposition",
    "self_attention",
    "shift_matrix",
    "similarity_by_offset",
    "sinusoidal_encoding",
    "sinusoidal_similarity",
    "sinusoidal_table",
    "wavelengths",
]
