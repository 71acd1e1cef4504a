"""Sizes and devices the core refuses at the call site, before allocating anything.

Every size argument of the public API (head counts, sequence lengths, widths, grid sizes,
bucket counts, positions) is bounded: a width by ``MAX_WIDTH``, a head count by
``MAX_HEADS``, a number of positions by 2**53, and the memory of a result, estimated from
the arguments, by ``MAX_RESULT_BYTES``. A request beyond a bound raises a ValueError naming
the function, the argument, its value and what is allowed, without the large allocation
(the peak resident memory of this process barely moves). A device whose backend is
unavailable is refused the same way, naming the devices that are available.
"""

import resource
import sys

import pytest
import torch

import posenc_core as pc
import posenc_core._validation as check
from posenc_core import analysis, multi_axis, positions, t5_bias
from posenc_core.rope import (
    RopeConfig,
    RopeScaling,
    half_to_interleaved,
    interleaved_to_half,
    parse_scaling,
    rope_angles,
    rope_config_from_hf,
)
from posenc_core.rope import xpos as xp

BIG = 2**31  # 2147483648
HUGE = 2**40  # 1099511627776
FAR = 2**70  # beyond int64, let alone the 2**53 positions float64 holds exactly
L0 = "original_max_position_embeddings"


def _wide(n: int) -> torch.Tensor:
    """A (n, 1) table of ones that costs 8 bytes however large n is (an expanded view)."""
    return torch.ones(1, 1, dtype=torch.float64).expand(n, 1)


def _long_qkv(s: int, d: int = 8) -> torch.Tensor:
    """(1, 1, s, d) zeros that cost d * 4 bytes (an expanded view)."""
    return torch.zeros(1, 1, 1, d).expand(1, 1, s, d)


# (call, substrings its ValueError must contain: the function, the argument and its value)
OVERSIZED = [
    # ------------------------------------------------------------------ sinusoidal
    (lambda: pc.sinusoidal_frequencies(HUGE), ["sinusoidal_frequencies", f"d_model={HUGE}"]),
    (lambda: pc.sinusoidal_wavelengths(HUGE), ["sinusoidal_wavelengths", f"d_model={HUGE}"]),
    (lambda: pc.sinusoidal_encoding(0, HUGE), ["sinusoidal_encoding", f"d_model={HUGE}"]),
    (
        lambda: pc.sinusoidal_encoding(torch.zeros(2**16), 2**16),
        ["sinusoidal_encoding", "positions.shape=(65536,)", "d_model=65536"],
    ),
    (lambda: pc.sinusoidal_table(BIG, 512), ["sinusoidal_table", f"n_positions={BIG}", "TiB"]),
    (lambda: pc.sinusoidal_table(4, HUGE), ["sinusoidal_table", f"d_model={HUGE}"]),
    (
        lambda: pc.SinusoidalPositionalEncoding(512, BIG),
        ["SinusoidalPositionalEncoding", f"max_len={BIG}"],
    ),
    (
        lambda: pc.SinusoidalPositionalEncoding(HUGE, 8),
        ["SinusoidalPositionalEncoding", f"d_model={HUGE}"],
    ),
    (
        lambda: pc.SinusoidalPositionalEncoding(8, 8)(torch.zeros(2, 8), offset=2**60),
        ["offset", str(2**60)],
    ),
    # ------------------------------------------------------------------ rotation
    (lambda: pc.shift_matrix(1, 2**20), ["shift_matrix", "d_model=1048576"]),
    (lambda: pc.shift_matrix(1, HUGE), ["shift_matrix", f"d_model={HUGE}"]),
    # ------------------------------------------------------------------ learned
    (
        lambda: pc.LearnedPositionalEmbedding(BIG, 768),
        ["LearnedPositionalEmbedding", f"max_len={BIG}"],
    ),
    (
        lambda: pc.LearnedPositionalEmbedding(8, HUGE),
        ["LearnedPositionalEmbedding", f"d_model={HUGE}"],
    ),
    # ------------------------------------------------------------------ alibi
    (lambda: pc.alibi_slopes(BIG), ["alibi_slopes", f"n_heads={BIG}", "65536 heads"]),
    (lambda: pc.alibi_slopes(2**24), ["alibi_slopes", "n_heads=16777216"]),
    (lambda: pc.alibi_slopes(2**16 + 1), ["alibi_slopes", "n_heads=65537"]),
    (lambda: pc.alibi_bias(BIG, 1, 1), ["alibi_bias", f"n_heads={BIG}"]),
    (lambda: pc.alibi_bias(8, 2**20, 2**20), ["alibi_bias", "q_len=1048576", "k_len=1048576"]),
    (lambda: pc.alibi_key_bias(BIG, 1), ["alibi_key_bias", f"n_heads={BIG}"]),
    (lambda: pc.alibi_key_bias(8, HUGE), ["alibi_key_bias", f"k_len={HUGE}"]),
    # ------------------------------------------------------------------ attention
    (lambda: pc.MultiHeadSelfAttention(HUGE, 1), ["MultiHeadSelfAttention", f"d_model={HUGE}"]),
    (
        lambda: pc.MultiHeadSelfAttention(2**20, 8),
        ["MultiHeadSelfAttention", "d_model=1048576"],
    ),
    (
        lambda: pc.MultiHeadSelfAttention(2**17, BIG // 2**14),  # 131072 heads of width 1
        ["MultiHeadSelfAttention", "n_heads=131072"],
    ),
    (
        lambda: pc.attention(
            _long_qkv(2**20), _long_qkv(2**20), _long_qkv(2**20), return_weights=True
        ),
        ["attention", "s_q=1048576", "s_k=1048576"],
    ),
    (
        lambda: pc.attention(
            _long_qkv(2**20), _long_qkv(2**20 + 1), _long_qkv(2**20 + 1), causal=True
        ),
        ["attention", "s_q=1048576", "s_k=1048577"],
    ),
    (
        lambda: pc.self_attention(_long_qkv(2**17)[0, 0], *[torch.eye(8)] * 3, return_weights=True),
        ["self_attention", "s_q=131072"],
    ),
    (
        lambda: pc.MultiHeadSelfAttention(16, 8, alibi=True)(
            torch.zeros(1, 1, 16).expand(1, 2**16, 16)
        ),
        ["MultiHeadSelfAttention", "s=65536", "n_heads=8"],
    ),
    # ------------------------------------------------------------------ T5's bias
    (
        lambda: t5_bias.T5RelativePositionBias(BIG),
        ["T5RelativePositionBias", f"num_heads={BIG}"],
    ),
    (
        lambda: t5_bias.T5RelativePositionBias(8, num_buckets=BIG),
        ["T5RelativePositionBias", f"num_buckets={BIG}"],
    ),
    (
        lambda: t5_bias.T5RelativePositionBias(2**16, num_buckets=2**16, max_distance=2**20),
        ["T5RelativePositionBias", "num_buckets=65536", "num_heads=65536"],
    ),
    (
        lambda: t5_bias.T5RelativePositionBias(8, max_distance=FAR),
        ["T5RelativePositionBias", f"max_distance={FAR}"],
    ),
    (
        lambda: t5_bias.relative_position_bucket(torch.tensor([1]), num_buckets=HUGE),
        ["relative_position_bucket", f"num_buckets={HUGE}"],
    ),
    (
        lambda: t5_bias.relative_position_bucket(torch.tensor([1]), max_distance=FAR),
        ["relative_position_bucket", f"max_distance={FAR}"],
    ),
    (
        lambda: t5_bias.T5RelativePositionBias(8)(2**20, 2**20),
        ["T5RelativePositionBias", "query_length=1048576", "key_length=1048576"],
    ),
    (lambda: t5_bias.T5RelativePositionBias(8)(2, 2, offset=FAR), ["offset", str(FAR)]),
    # ------------------------------------------------------------------ positions
    (
        lambda: positions.document_ids_from_lengths([HUGE]),
        ["document_ids_from_lengths", f"sum(document_lengths)={HUGE}"],
    ),
    (
        lambda: positions.packed_causal_mask(torch.zeros(2**20, dtype=torch.long)),
        ["packed_causal_mask", "s=1048576"],
    ),
    # ------------------------------------------------------------------ several axes
    (
        lambda: multi_axis.axial_rope_cos_sin(0, 0, HUGE),
        ["axial_rope_cos_sin", f"head_dim={HUGE}"],
    ),
    (
        lambda: multi_axis.axial_rope_cos_sin(torch.zeros(2**16), torch.zeros(2**16), 2**16),
        ["axial_rope_cos_sin", "rows.shape=(65536,)", "head_dim=65536"],
    ),
    (
        lambda: multi_axis.vision_patch_positions(2**20, 2**20, 2**20),
        ["vision_patch_positions", "t=1048576", "h=1048576", "w=1048576"],
    ),
    (
        lambda: multi_axis.mrope_cos_sin(torch.zeros(3, 1), HUGE, (HUGE // 2, 0, 0)),
        ["mrope_cos_sin", f"head_dim={HUGE}"],
    ),
    (
        lambda: multi_axis.mrope_cos_sin(torch.zeros(3, 2**16), 2**16, (2**15, 0, 0)),
        ["mrope_cos_sin", "position_ids.shape=(3, 65536)", "head_dim=65536"],
    ),
    (
        lambda: multi_axis.mrope_position_ids([("text", HUGE)]),
        ["mrope_position_ids", f"s={HUGE}"],
    ),
    (
        lambda: multi_axis.mrope_position_ids([("text", 1), ("image", (2**20, 2**20, 2**20))]),
        ["mrope_position_ids", f"s={2**60 + 1}"],
    ),
    (lambda: multi_axis.pair_axes(HUGE), ["pair_axes", f"head_dim={HUGE}"]),
    (
        lambda: multi_axis.pair_axes(HUGE, (HUGE // 2, 0, 0)),
        ["pair_axes", f"head_dim={HUGE}"],
    ),
    (
        lambda: multi_axis.axial_score_grid(2**20, 2**20, 0, 0, 8),
        ["axial_score_grid", "grid_h=1048576", "grid_w=1048576"],
    ),
    (
        lambda: multi_axis.axial_score_grid(2, 2, 0, 0, HUGE),
        ["axial_score_grid", f"head_dim={HUGE}"],
    ),
    (
        lambda: multi_axis.raster_score_grid(2**20, 2**20, 0, 0, 8),
        ["raster_score_grid", "grid_h=1048576", "grid_w=1048576"],
    ),
    (
        lambda: multi_axis.raster_score_grid(2, 2, 0, 0, HUGE),
        ["raster_score_grid", f"head_dim={HUGE}"],
    ),
    # ------------------------------------------------------------------ analysis
    (
        lambda: pc.cosine_similarity_matrix(_wide(2**20)),
        ["cosine_similarity_matrix", "n=1048576"],
    ),
    (
        lambda: analysis.similarity_by_offset(_wide(2**20)),
        ["similarity_by_offset", "n=1048576"],
    ),
    (
        lambda: pc.nearest_neighbour_margin(_wide(2**20)),
        ["nearest_neighbour_margin", "n=1048576"],
    ),
    (lambda: pc.sinusoidal_similarity(0, HUGE), ["sinusoidal_similarity", f"d_model={HUGE}"]),
    (
        lambda: pc.sinusoidal_similarity(torch.zeros(2**16), 2**18),
        ["sinusoidal_similarity", "offsets.shape=(65536,)", "d_model=262144"],
    ),
    (lambda: analysis.neighbour_distance(HUGE), ["neighbour_distance", f"d_model={HUGE}"]),
    (lambda: pc.count_pairs(HUGE, 10), ["count_pairs", f"head_or_model_dim={HUGE}"]),
    (lambda: pc.count_pairs(8, FAR), ["count_pairs", f"length={FAR}"]),
    (
        lambda: pc.rope_score_vs_distance(0, HUGE),
        ["rope_score_vs_distance", f"head_dim={HUGE}"],
    ),
    (
        lambda: pc.rope_score_vs_distance(torch.zeros(2**16), 2**16),
        ["rope_score_vs_distance", "distances.shape=(65536,)", "head_dim=65536"],
    ),
    (lambda: pc.rope_decay_bound(0, HUGE), ["rope_decay_bound", f"head_dim={HUGE}"]),
    (
        lambda: pc.rope_decay_bound(torch.zeros(2**16), 2**16),
        ["rope_decay_bound", "distances.shape=(65536,)", "head_dim=65536"],
    ),
    (
        lambda: analysis.rope_bound_curve(HUGE, 128),
        ["rope_bound_curve", f"context_length={HUGE}"],
    ),
    (lambda: analysis.rope_bound_curve(4, HUGE), ["rope_bound_curve", f"head_dim={HUGE}"]),
    (
        lambda: analysis.rope_base_meets_bound(HUGE, 128, base=1e4),
        ["rope_base_meets_bound", f"context_length={HUGE}"],
    ),
    (
        lambda: analysis.rope_base_meets_bound(10, HUGE, base=1e4),
        ["rope_base_meets_bound", f"head_dim={HUGE}"],
    ),
    (
        lambda: analysis.rope_base_lower_bound(1024, HUGE),
        ["rope_base_lower_bound", f"head_dim={HUGE}"],
    ),
    (
        lambda: analysis.rope_base_lower_bound(2**18, 256),
        ["rope_base_lower_bound", "context_length=262144", "head_dim=256"],
    ),
    (
        lambda: pc.score_decomposition(
            _wide(2**20), _wide(2**20), torch.ones(1, 1), torch.ones(1, 1)
        ),
        ["score_decomposition", "s=1048576"],
    ),
    # ------------------------------------------------------------------ RoPE
    (lambda: pc.rope_frequencies(HUGE), ["rope_frequencies", f"head_dim={HUGE}"]),
    (lambda: pc.rope_frequencies(8, seq_len=FAR), ["rope_frequencies", f"seq_len={FAR}"]),
    (lambda: rope_angles(0, HUGE), ["rope_angles", f"head_dim={HUGE}"]),
    (
        lambda: rope_angles(torch.zeros(2**16), 2**16),
        ["rope_angles", "positions.shape=(65536,)", "head_dim=65536"],
    ),
    (lambda: rope_angles(0, 8, seq_len=FAR), ["rope_angles", f"seq_len={FAR}"]),
    (lambda: pc.rope_cos_sin(0, HUGE), ["rope_cos_sin", f"head_dim={HUGE}"]),
    (
        lambda: pc.rope_cos_sin(torch.arange(2**16), 2**16),
        ["rope_cos_sin", "positions.shape=(65536,)", "head_dim=65536"],
    ),
    (lambda: pc.RotaryEmbedding(HUGE), ["RotaryEmbedding", f"head_dim={HUGE}"]),
    (
        lambda: pc.RotaryEmbedding(8, scaling={"rope_type": "dynamic", "factor": 2.0, L0: FAR}),
        ["RopeScaling", f"{L0}']={FAR}"],
    ),
    (
        lambda: RopeScaling("yarn", factor=2.0, original_max_position_embeddings=10**400),
        ["RopeScaling", L0],
    ),
    (
        lambda: parse_scaling(
            {
                "rope_type": "llama3",
                "factor": 8.0,
                L0: FAR,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
            }
        ),
        ["RopeScaling", f"{L0}']={FAR}"],
    ),
    (lambda: RopeConfig(HUGE, 2), ["RopeConfig", f"head_dim={HUGE}"]),
    (
        lambda: RopeConfig(8, 8, max_position_embeddings=FAR),
        ["RopeConfig", f"max_position_embeddings={FAR}"],
    ),
    (
        lambda: rope_config_from_hf({"head_dim": HUGE, "max_position_embeddings": 4096}),
        ["rope_config_from_hf", f"head_dim={HUGE}"],
    ),
    (
        lambda: rope_config_from_hf(
            {"hidden_size": 64, "num_attention_heads": 8, "max_position_embeddings": FAR}
        ),
        ["rope_config_from_hf", f"max_position_embeddings={FAR}"],
    ),
    (lambda: interleaved_to_half(HUGE), ["interleaved_to_half", f"head_dim={HUGE}"]),
    (lambda: half_to_interleaved(HUGE), ["half_to_interleaved", f"head_dim={HUGE}"]),
    # ------------------------------------------------------------------ xPos
    (lambda: xp.xpos_zeta(HUGE), ["xpos_zeta", f"head_dim={HUGE}"]),
    (lambda: xp.xpos_scales(0, HUGE), ["xpos_scales", f"head_dim={HUGE}"]),
    (
        lambda: xp.xpos_scales(torch.zeros(2**16), 2**16),
        ["xpos_scales", "positions.shape=(65536,)", "head_dim=65536"],
    ),
    (
        lambda: xp.xpos_overflow_position(HUGE, torch.float32),
        ["xpos_overflow_position", f"head_dim={HUGE}"],
    ),
    (lambda: xp.XPosEmbedding(HUGE), ["XPosEmbedding", f"head_dim={HUGE}"]),
    (
        lambda: xp.XPosEmbedding(8)(torch.zeros(2, 8), torch.zeros(2, 8), FAR),
        ["offset", str(FAR)],
    ),
    (
        lambda: xp.xpos_score_vs_distance(0, HUGE),
        ["xpos_score_vs_distance", f"head_dim={HUGE}"],
    ),
    (
        lambda: xp.xpos_score_vs_distance(torch.zeros(2**16), 2**16),
        ["xpos_score_vs_distance", "distances.shape=(65536,)", "head_dim=65536"],
    ),
]


def _case_id(case) -> str:
    return "-".join(s.split("=")[0].strip("'][").replace(" ", "") for s in case[1][:2])


def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


@pytest.mark.parametrize(("call", "named"), OVERSIZED, ids=[_case_id(c) for c in OVERSIZED])
def test_an_oversized_request_is_refused_before_allocating(call, named):
    """The call raises a ValueError that names the function, the argument and its value, and
    the process's peak memory grows by less than 64 MiB: nothing of the requested size was
    allocated (each request is for gigabytes to exabytes)."""
    before = _peak_rss_bytes()
    with pytest.raises(ValueError) as err:
        call()
    message = str(err.value)
    for part in named:
        assert part in message, f"{part!r} not in {message!r}"
    assert _peak_rss_bytes() - before < 64 * 2**20


def test_every_public_callable_with_a_size_argument_is_swept():
    """Every public function and class whose signature has a size argument (a width, a count,
    a length, a position bound) appears in OVERSIZED: a new one must be added there."""
    size_words = (
        "d_model", "head_dim", "head_or_model_dim", "max_len", "n_positions", "n_heads",
        "num_heads", "q_len", "k_len", "num_buckets", "max_distance", "context_length",
        "grid_h", "seq_len", "length", "t", "max_position_embeddings", L0,
    )  # fmt: skip
    # n_heads of permute_qk_weight must divide the rows of the weight it is given: bounded by it
    exempt = {"permute_qk_weight"}
    import inspect

    modules = [pc, analysis, multi_axis, positions, t5_bias, xp, pc.rope]
    swept = {part.split(":")[0].split(".")[0] for _, named in OVERSIZED for part in named}
    missing = []
    for module in modules:
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if not callable(obj):
                continue
            try:
                params = inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue
            if any(p in size_words for p in params) and name not in swept | exempt:
                missing.append(f"{module.__name__}.{name}")
    assert missing == []


# --------------------------------------------------------------------------- the bounds themselves


def test_result_size_allows_exactly_the_limit_and_refuses_one_byte_more():
    limit = check.MAX_RESULT_BYTES
    assert check.result_size("f", "the table", {"n": limit}, limit, 1) == limit
    with pytest.raises(ValueError, match=r"^f: the table for n=4294967297 would need 4\.0 GiB"):
        check.result_size("f", "the table", {"n": limit + 1}, limit + 1, 1)


def test_the_limit_admits_long_context_tables():
    """MAX_RESULT_BYTES admits a float64 table of 2**20 positions x 128 dims (1 GiB) and its
    cos and sin pair (2 GiB), and a 2**18 x 2048 float64 sinusoidal table (4 GiB)."""
    assert check.result_size("t", "table", {}, 2**20 * 128) == 2**30
    assert check.result_size("t", "cos and sin", {}, 2 * 2**20 * 128) == 2**31
    assert check.result_size("t", "table", {}, 2**18 * 2048) == 2**32


class _Estimated(Exception):
    """Raised by the spy in place of the allocation that would follow a passing estimate."""


@pytest.fixture
def estimates(monkeypatch):
    """Record each (where, bytes) that check.result_size is asked about, and stop the call
    right after a passing estimate (so nothing is allocated); a failing one raises as usual."""
    seen = []
    real = check.result_size

    def spy(where, what, sizes, n_elements, element_bytes=8, **kw):
        need = real(where, what, sizes, n_elements, element_bytes, **kw)
        seen.append((where, need))
        raise _Estimated

    monkeypatch.setattr(check, "result_size", spy)
    return seen


@pytest.mark.parametrize(
    ("call", "where", "need"),
    [
        (lambda: pc.sinusoidal_table(2**20, 128), "sinusoidal_table", 2**30),
        (lambda: pc.sinusoidal_table(2**18, 2048), "sinusoidal_table", 2**32),
        (lambda: pc.rope_cos_sin(torch.arange(2**20), 128), "rope_cos_sin", 2**31),
        (
            lambda: pc.rope_cos_sin(torch.arange(2**20), 128, dtype=torch.bfloat16),
            "rope_cos_sin",
            2**31,
        ),
        (lambda: rope_angles(torch.arange(2**20), 128), "rope_angles", 2**29),
        (lambda: pc.sinusoidal_encoding(torch.arange(2**20), 128), "sinusoidal_encoding", 2**30),
        (lambda: pc.alibi_bias(8, 2**13, 2**13), "alibi_bias", 2**32),
        (
            lambda: pc.SinusoidalPositionalEncoding(4096, 2**17),
            "SinusoidalPositionalEncoding",
            2**32,
        ),
        (lambda: pc.LearnedPositionalEmbedding(2**17, 8192), "LearnedPositionalEmbedding", 2**32),
    ],
)
def test_the_largest_documented_requests_pass_the_estimate(estimates, call, where, need):
    """Long-context tables (2**20 positions x 128 dims, cos and sin in float64) and the other
    sizes the docstrings name pass the memory estimate; the spy stops them before allocating."""
    with pytest.raises(_Estimated):
        call()
    assert estimates[-1] == (where, need)


def test_a_lowered_limit_is_read_at_every_call(monkeypatch):
    """MAX_RESULT_BYTES is read when a call is made: a table of exactly the limit is built, one
    row more is refused. (A 64 KiB limit stands in for the 4 GiB one.)"""
    monkeypatch.setattr(check, "MAX_RESULT_BYTES", 64 * 2**10)
    assert pc.sinusoidal_table(64, 128).shape == (64, 128)  # 64 * 128 * 8 bytes = 64 KiB
    with pytest.raises(ValueError, match="n_positions=65 x d_model=128 would need 65.0 KiB"):
        pc.sinusoidal_table(65, 128)
    cos, _ = pc.rope_cos_sin(torch.arange(32), 128)  # cos and sin: 2 * 32 * 128 * 8 = 64 KiB
    assert cos.shape == (32, 128)
    with pytest.raises(ValueError, match="positions.shape=\\(33,\\) x head_dim=128"):
        pc.rope_cos_sin(torch.arange(33), 128)


def test_the_largest_allowed_counts_are_accepted():
    """The bounds themselves are allowed: 2**16 ALiBi heads (equal to the formula's slopes),
    widths of 2**20, positions up to 2**53."""
    slopes = pc.alibi_slopes(2**16, dtype=torch.float64)
    assert slopes.shape == (2**16,) and slopes[-1].item() == 2.0**-8
    assert pc.sinusoidal_frequencies(2**20).shape == (2**19,)
    assert len(multi_axis.pair_axes(2**20)) == 2**19
    assert pc.RotaryEmbedding(2**20).head_dim == 2**20
    assert pc.count_pairs(128, 2**53)["full_turn"] == 64
    assert pc.rope_frequencies(8, seq_len=2**53).shape == (4,)
    table = pc.SinusoidalPositionalEncoding(8, 4)(torch.zeros(2, 8), offset=2**53 - 1)
    assert table.shape == (2, 8)


def test_the_bound_search_work_limits():
    """rope_base_meets_bound takes up to MAX_BOUND_EVALUATIONS cosines (context_length + 1
    times head_dim / 2); rope_base_lower_bound up to 2**24 per step (2**18 x 128)."""
    assert analysis.MAX_BOUND_EVALUATIONS == 2**32
    assert analysis.rope_base_meets_bound(0, 2**20, base=1e4)  # 1 x 2**19 cosines: B(0) > 0
    with pytest.raises(ValueError, match="context_length=8192 x head_dim=1048576"):
        analysis.rope_base_meets_bound(2**13, 2**20, base=1e4)
    with pytest.raises(ValueError, match="context_length=262144 x head_dim=130"):
        analysis.rope_base_lower_bound(2**18, 130)


# --------------------------------------------------------------------------- devices


def _unavailable_devices() -> list[str]:
    found = [f"cuda:{torch.cuda.device_count()}", "cuda:99"]
    if not torch.cuda.is_available():
        found += ["cuda", "cuda:0", "cuda:3"]
    if not torch.backends.mps.is_available():
        found.append("mps")
    found.append("mps:1")
    return list(dict.fromkeys(found))


@pytest.mark.parametrize("device", _unavailable_devices())
def test_an_unavailable_device_is_refused_by_name(device):
    """A device whose backend is missing (or an index past the devices there are) raises a
    ValueError naming ``device``, the value and the available devices, where torch would
    raise an AssertionError or RuntimeError from deep inside."""
    for value in (device, torch.device(device)):
        with pytest.raises(
            ValueError, match=r"device=.*is not available.*available devices: 'cpu'"
        ):
            check.device_value("device", value)
    for call in (
        lambda: pc.alibi_slopes(4, device=device),
        lambda: pc.alibi_bias(4, 2, 2, device=device),
        lambda: pc.alibi_key_bias(4, 2, device=device),
        lambda: pc.sinusoidal_table(4, 8, device=device),
        lambda: pc.sinusoidal_encoding([0, 1], 8, device=device),
    ):
        with pytest.raises(ValueError, match=rf"device='{device}' is not available"):
            call()


def test_available_devices_are_accepted():
    """cpu and meta (shapes without data) are always available, and so is every device listed."""
    assert check.available_devices()[0] == "cpu" and "meta" in check.available_devices()
    for device in check.available_devices():
        assert check.device_value("device", device) == torch.device(device)
    assert pc.sinusoidal_table(4, 8, device="meta").device.type == "meta"
    assert pc.alibi_slopes(4, device="meta").shape == (4,)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_present_cuda_device_is_accepted():
    assert pc.alibi_slopes(4, device="cuda").device.type == "cuda"
    last = f"cuda:{torch.cuda.device_count() - 1}"
    assert pc.sinusoidal_table(4, 8, device=last).device == torch.device(last)
