"""RoPE against named references: Hugging Face transformers (modeling_llama.py and
modeling_rope_utils.py, the version pinned in requirements-test.txt), Meta's Llama code
(complex ``freqs_cis``, and Llama 3.1's ``apply_scaling``) and RoFormer's block-diagonal matrix
(Su et al. 2021, Eq. 15), each rebuilt here from its published description, plus closed-form
formulas evaluated with Python's math / numpy in float64.
"""

import math

import numpy as np
import pytest
import torch
from rounding import is_nearest
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import (
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
    rotate_half,
)

import posenc_core as pc

F64 = torch.float64
LLAMA31 = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def randn(*shape, seed=0, dtype=F64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).to(dtype)


def llama_config(head_dim=64, n_heads=4, max_position_embeddings=2048, **rope_parameters):
    """A tiny LlamaConfig; transformers v5 takes rope_theta and scaling in ``rope_parameters``."""
    rope_parameters.setdefault("rope_type", "default")
    rope_parameters.setdefault("rope_theta", 10000.0)
    return LlamaConfig(
        hidden_size=head_dim * n_heads,
        num_attention_heads=n_heads,
        num_key_value_heads=n_heads,
        head_dim=head_dim,
        intermediate_size=32,
        num_hidden_layers=1,
        vocab_size=16,
        max_position_embeddings=max_position_embeddings,
        rope_parameters=rope_parameters,
    )


def hf_cos_sin(config, positions):
    """cos, sin of shape (s, d) from Hugging Face's LlamaRotaryEmbedding (float32 throughout)."""
    module = LlamaRotaryEmbedding(config)
    cos, sin = module(torch.zeros(1, dtype=torch.float32), positions[None])
    return cos[0], sin[0]


# --------------------------------------------------------------------------- 1. HF modeling_llama


def test_rotate_pairs_is_hf_rotate_half():
    """posenc_core.rotate_pairs(layout="half") is transformers' rotate_half, bit for bit."""
    for dtype in (torch.float32, F64, torch.bfloat16):
        x = randn(2, 3, 5, 64, seed=1, dtype=dtype)
        assert torch.equal(pc.rotate_pairs(x, layout="half"), rotate_half(x))


def test_apply_rope_matches_hf_apply_rotary_pos_emb():
    """apply_rope = transformers' apply_rotary_pos_emb (cos/sin (b, s, d), unsqueeze_dim=1,
    q (b, h, s, d))."""
    b, h, s, d = 2, 4, 9, 64
    q, k = (
        randn(b, h, s, d, seed=2, dtype=torch.float32),
        randn(b, h, s, d, seed=3, dtype=torch.float32),
    )
    positions = torch.tensor(
        [[0, 1, 2, 3, 4, 5, 6, 7, 8], [100, 101, 102, 103, 104, 105, 106, 107, 108]]
    )
    cos, sin = pc.rope_cos_sin(positions, d)  # (b, s, d) float32
    hq, hk = apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)
    # both compute q*cos + rotate_half(q)*sin in float32 on unit-scale data; only the order of the
    # final multiply-add may differ, a few float32 ulps
    torch.testing.assert_close(pc.apply_rope(q, cos[:, None], sin[:, None]), hq, rtol=0, atol=1e-6)
    torch.testing.assert_close(pc.apply_rope(k, cos[:, None], sin[:, None]), hk, rtol=0, atol=1e-6)
    # and with one shared (s, d) table (HF broadcasts a batch of 1)
    c1, s1 = pc.rope_cos_sin(torch.arange(s), d)
    hq1, _ = apply_rotary_pos_emb(q, k, c1[None], s1[None], unsqueeze_dim=1)
    torch.testing.assert_close(pc.apply_rope(q, c1, s1), hq1, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "rope_parameters, scaling, max_position_embeddings",
    [
        ({"rope_theta": 10000.0}, None, 2048),
        ({"rope_theta": 500000.0}, None, 2048),
        (
            {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0},
            {"rope_type": "linear", "factor": 4.0},
            2048,
        ),
        (
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 1024,
                "rope_theta": 10000.0,
            },
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
            4096,
        ),
        ({**LLAMA31, "rope_theta": 500000.0}, LLAMA31, 65536),
    ],
    ids=["default", "theta5e5", "linear", "yarn", "llama3"],
)
def test_cos_sin_match_hf_llama_rotary_embedding(rope_parameters, scaling, max_position_embeddings):
    """rope_cos_sin(layout="half") against LlamaRotaryEmbedding built from a LlamaConfig,
    positions < 4096.

    Hugging Face forms the angle m * theta_i in float32: theta_i carries a few float32 rounding
    errors (pow, reciprocal: |d theta| <= 3 * 2**-24 * theta) and the product is rounded once more
    (<= ulp(4096) / 2 = 2**-12), so |d angle| <= 4096 * 3 * 2**-24 + 2**-12 < 1e-3 rad, and cos, sin
    move by at most that much (times the YaRN attention factor, < 1.2). Our float64 tables are
    within 6e-8 of exact, so the difference is HF's error: atol 1.2e-3. Position 0..15 angles are
    tiny and exact enough in float32 for a much tighter check.
    """
    positions = torch.cat(
        (
            torch.arange(16),
            torch.randint(16, 4096, (300,), generator=torch.Generator().manual_seed(4)),
            torch.tensor([4095]),
        )
    )
    config = llama_config(
        head_dim=128 if scaling is LLAMA31 else 64,
        max_position_embeddings=max_position_embeddings,
        **dict(rope_parameters),
    )
    hcos, hsin = hf_cos_sin(config, positions)
    base = rope_parameters["rope_theta"]
    cos, sin = pc.rope_cos_sin(positions, config.head_dim, base=base, scaling=scaling)
    torch.testing.assert_close(cos, hcos, rtol=0, atol=1.2e-3)
    torch.testing.assert_close(sin, hsin, rtol=0, atol=1.2e-3)
    torch.testing.assert_close(cos[:16], hcos[:16], rtol=0, atol=1e-5)
    torch.testing.assert_close(sin[:16], hsin[:16], rtol=0, atol=1e-5)


def test_dynamic_ntk_matches_hf_module_over_a_long_sequence():
    """Dynamic NTK: a sequence longer than max_position_embeddings rescales the base from its length
    max(position) + 1, in Hugging Face's LlamaRotaryEmbedding (dynamic_rope_update) and here."""
    l0, s = 512, 1500
    config = llama_config(max_position_embeddings=l0, rope_type="dynamic", factor=2.0)
    hcos, hsin = hf_cos_sin(config, torch.arange(s))
    cos, sin = pc.rope_cos_sin(
        torch.arange(s),
        64,
        scaling={"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": l0},
    )
    torch.testing.assert_close(
        cos, hcos, rtol=0, atol=1e-3
    )  # same float32 bound as above, positions < 1500
    torch.testing.assert_close(sin, hsin, rtol=0, atol=1e-3)
    plain, _ = pc.rope_cos_sin(torch.arange(s), 64)
    assert (plain - cos).abs().max() > 0.1  # the rescaling is visible at this length


# --------------------------------------------------------------------------- 2. HF scaling formulas


def hf_inv_freq(config, seq_len=None):
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[config.rope_parameters["rope_type"]](
        config, "cpu", seq_len=seq_len
    )
    return inv_freq.double(), attention_factor


# HF builds inv_freq in float32: theta_i = 1 / base**(2i/d) with a float32 pow (and for YaRN and
# llama3 a float32 blend), a few float32 roundings, each 2**-24 = 6e-8 relative.
HF_RTOL = 2e-6


@pytest.mark.parametrize("head_dim, base", [(64, 10000.0), (128, 500000.0), (96, 1e6)])
@pytest.mark.parametrize("factor", [2.0, 8.0])
def test_linear_matches_hf(head_dim, base, factor):
    config = llama_config(head_dim=head_dim, rope_type="linear", factor=factor, rope_theta=base)
    expected, attention_factor = hf_inv_freq(config)
    got = pc.rope_frequencies(
        head_dim, base=base, scaling={"rope_type": "linear", "factor": factor}
    )
    torch.testing.assert_close(got, expected, rtol=HF_RTOL, atol=0)
    assert (
        pc.rope.rope_attention_factor({"rope_type": "linear", "factor": factor})
        == attention_factor
        == 1.0
    )


@pytest.mark.parametrize("seq_len", [None, 1, 1000, 2048, 2049, 4096, 20517])
@pytest.mark.parametrize("head_dim, base, factor", [(64, 10000.0, 2.0), (128, 500000.0, 4.0)])
def test_dynamic_matches_hf(seq_len, head_dim, base, factor):
    """HF's dynamic NTK uses config.max_position_embeddings as the original length L0."""
    l0 = 2048
    config = llama_config(
        head_dim=head_dim,
        max_position_embeddings=l0,
        rope_type="dynamic",
        factor=factor,
        rope_theta=base,
    )
    expected, attention_factor = hf_inv_freq(config, seq_len)
    scaling = {"rope_type": "dynamic", "factor": factor, "original_max_position_embeddings": l0}
    got = pc.rope_frequencies(head_dim, base=base, scaling=scaling, seq_len=seq_len)
    torch.testing.assert_close(got, expected, rtol=HF_RTOL, atol=0)
    assert pc.rope.rope_attention_factor(scaling) == attention_factor == 1.0


YARN_CASES = [
    {"factor": 4.0},
    {"factor": 16.0},
    {"factor": 40.0, "beta_fast": 16.0, "beta_slow": 2.0},
    {"factor": 8.0, "attention_factor": 1.5},
    {"factor": 40.0, "mscale": 0.707, "mscale_all_dim": 1.0},  # DeepSeek-style
    {"factor": 40.0, "mscale": 1.0, "mscale_all_dim": 1.0},
    {"factor": 4.0, "truncate": False},
    {"factor": 1.0},
]


@pytest.mark.parametrize(
    "case", YARN_CASES, ids=[",".join(f"{k}={v}" for k, v in c.items()) for c in YARN_CASES]
)
@pytest.mark.parametrize("head_dim, base, l0", [(64, 10000.0, 4096), (128, 1e6, 8192)])
def test_yarn_matches_hf(case, head_dim, base, l0):
    """YaRN frequencies (Peng et al. 2023, Eq. 18-20) and attention factor as transformers computes
    them."""
    params = {"rope_type": "yarn", "original_max_position_embeddings": l0, **case}
    config = llama_config(
        head_dim=head_dim,
        max_position_embeddings=int(l0 * case["factor"]),
        rope_theta=base,
        **params,
    )
    expected, attention_factor = hf_inv_freq(config)
    got = pc.rope_frequencies(head_dim, base=base, scaling=params)
    torch.testing.assert_close(got, expected, rtol=HF_RTOL, atol=0)
    assert pc.rope.rope_attention_factor(params) == pytest.approx(attention_factor, rel=1e-12)


def test_yarn_attention_factor_formula():
    """Peng et al. 2023, Eq. 22: sqrt(1/t) = 0.1 ln(s) + 1, evaluated with math; explicit values
    win."""
    for s in (1.0, 2.0, 4.0, 16.0, 40.0):
        expected = 0.1 * math.log(s) + 1.0 if s > 1 else 1.0
        scaling = {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": 4096}
        assert pc.rope.rope_attention_factor(scaling) == pytest.approx(expected, rel=1e-15)
    assert pc.rope.rope_attention_factor({**scaling, "attention_factor": 0.75}) == 0.75
    ds = {**scaling, "mscale": 0.707, "mscale_all_dim": 1.0}
    expected = (0.1 * 0.707 * math.log(40.0) + 1) / (0.1 * math.log(40.0) + 1)
    assert pc.rope.rope_attention_factor(ds) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("head_dim, base", [(128, 500000.0), (64, 10000.0)])
def test_llama3_matches_hf(head_dim, base):
    config = llama_config(
        head_dim=head_dim, max_position_embeddings=131072, rope_theta=base, **LLAMA31
    )
    expected, attention_factor = hf_inv_freq(config)
    got = pc.rope_frequencies(head_dim, base=base, scaling=LLAMA31)
    torch.testing.assert_close(got, expected, rtol=HF_RTOL, atol=0)
    assert pc.rope.rope_attention_factor(LLAMA31) == attention_factor == 1.0


# --------------------------------------------------------------------------- 3. Llama 3.1


def meta_apply_scaling(freqs):
    """Llama 3.1's ``apply_scaling`` as published in meta-llama/llama-models
    (models/llama3/reference_impl/model.py), with its constants, in Python float64."""
    scale_factor, low_freq_factor, high_freq_factor, old_context_len = 8, 1, 4, 8192
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    new_freqs = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            new_freqs.append(freq)
        elif wavelen > low_freq_wavelen:
            new_freqs.append(freq / scale_factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (
                high_freq_factor - low_freq_factor
            )
            new_freqs.append((1 - smooth) * freq / scale_factor + smooth * freq)
    return new_freqs


def test_llama31_kept_smoothed_divided_counts():
    """Llama 3.1 (head_dim 128, theta 500000, factor 8, L0 8192, low 1, high 4): of 64 frequencies,
    those with wavelength < 8192/4 = 2048 are kept (29), those with wavelength > 8192 are divided by
    8 (29) and the 6 between are smoothed. Counts come from Python math here, not from posenc_core.
    """
    d, base = 128, 500000.0
    raw = [base ** (-2 * i / d) for i in range(d // 2)]
    wavelengths = [2 * math.pi / f for f in raw]
    kept = sum(w < 8192 / 4 for w in wavelengths)
    divided = sum(w > 8192 / 1 for w in wavelengths)
    assert (kept, d // 2 - kept - divided, divided) == (29, 6, 29)
    got = pc.rope_frequencies(d, base=base, scaling=LLAMA31).tolist()
    n_same = sum(math.isclose(g, r, rel_tol=1e-13) for g, r in zip(got, raw))
    n_div = sum(math.isclose(g, r / 8, rel_tol=1e-13) for g, r in zip(got, raw))
    n_between = sum(r / 8 * (1 + 1e-9) < g < r * (1 - 1e-9) for g, r in zip(got, raw))
    assert (n_same, n_between, n_div) == (kept, d // 2 - kept - divided, divided)
    # the kept ones are the highest frequencies, the divided ones the lowest
    assert all(math.isclose(g, r, rel_tol=1e-13) for g, r in zip(got[:29], raw[:29]))
    assert all(math.isclose(g, r / 8, rel_tol=1e-13) for g, r in zip(got[35:], raw[35:]))
    # and the whole table is Meta's apply_scaling
    np.testing.assert_allclose(got, meta_apply_scaling(raw), rtol=1e-13, atol=0)


# --------------------------------------------------------------------------- 4. NTK-aware


@pytest.mark.parametrize("head_dim", [4, 64, 128])
@pytest.mark.parametrize("base", [10000.0, 500000.0])
@pytest.mark.parametrize("s", [1.0, 2.0, 8.0, 32.0])
def test_ntk_aware_scaling(head_dim, base, s):
    """NTK-aware scaling (bloc97, 2023): base' = base * s**(d/(d-2)). The highest frequency stays 1
    and the lowest, base**(-(d-2)/d), is divided by exactly s: interpolate the slow dims, keep the
    fast."""
    d = head_dim
    got = pc.rope_frequencies(d, base=base, scaling={"rope_type": "ntk", "factor": s}).tolist()
    new_base = base * s ** (d / (d - 2))
    np.testing.assert_allclose(
        got, [new_base ** (-2 * i / d) for i in range(d // 2)], rtol=1e-13, atol=0
    )
    assert got[0] == 1.0
    assert got[-1] * s == pytest.approx(base ** (-(d - 2) / d), rel=1e-13)


def test_dynamic_is_ntk_at_the_current_length():
    """Dynamic NTK at length L >= L0 is NTK-aware scaling with factor s * L / L0 - (s - 1) (HF's
    formula); at L <= L0 it is plain RoPE."""
    d, l0, s = 64, 1024, 4.0
    dyn = {"rope_type": "dynamic", "factor": s, "original_max_position_embeddings": l0}
    for length in (3000, 4096, 10000):
        ntk = {"rope_type": "ntk", "factor": s * length / l0 - (s - 1)}
        torch.testing.assert_close(
            pc.rope_frequencies(d, scaling=dyn, seq_len=length),
            pc.rope_frequencies(d, scaling=ntk),
            rtol=1e-14,
            atol=0,
        )
    for length in (1, 1000, 1024):
        torch.testing.assert_close(
            pc.rope_frequencies(d, scaling=dyn, seq_len=length),
            pc.rope_frequencies(d),
            rtol=1e-15,
            atol=0,
        )


def test_dynamic_with_a_huge_factor_has_no_cancellation():
    """s * L / L0 - (s - 1) with s = 1e16 and L = L0 is 0 in float64 (s - 1 rounds to s), which
    once gave base 0 and an error about the base. The ratio is 1 there: plain RoPE; at L = 2 L0
    it is 1 + s. Computed in exact rational arithmetic, the ratios are 1 and 1 + 10**16."""
    from fractions import Fraction

    d, l0, s = 64, 2048, 1e16
    exact = [1 + Fraction(s) * (n - l0) / l0 for n in (l0, 2 * l0)]
    assert exact == [1, 1 + Fraction(10**16)]
    dyn = {"rope_type": "dynamic", "factor": s, "original_max_position_embeddings": l0}
    assert torch.equal(pc.rope_frequencies(d, scaling=dyn, seq_len=l0), pc.rope_frequencies(d))
    torch.testing.assert_close(
        pc.rope_frequencies(d, scaling=dyn, seq_len=2 * l0),
        pc.rope_frequencies(d, scaling={"rope_type": "ntk", "factor": float(exact[1])}),
        rtol=1e-14,
        atol=0,
    )
    rope = pc.RotaryEmbedding(d, scaling=dyn)
    q = torch.randn(1, 1, 2 * l0, d)
    assert all(bool(t.isfinite().all()) for t in rope(q, q))


@pytest.mark.parametrize("rope_type", ["ntk", "dynamic"])
def test_a_factor_whose_base_overflows_is_named(rope_type):
    """base * ratio**(d/(d-2)) beyond float64's range: the error names the factor, not the
    infinite base it would produce."""
    scaling = {"rope_type": rope_type, "factor": 1e300, "original_max_position_embeddings": 2048}
    with pytest.raises(ValueError, match=r"scaling\['factor'\] = 1e\+300 is too large"):
        pc.rope_frequencies(64, scaling=scaling, seq_len=4096)


# --------------------------------------------------------------------------- 5. Meta's Llama code


def meta_precompute_freqs_cis(dim, end, theta=10000.0):
    """meta-llama/llama model.py ``precompute_freqs_cis``, in float64 / complex128."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].double() / dim))
    t = torch.arange(end, dtype=F64)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # (end, dim/2) complex


def meta_apply_rotary_emb(x, freqs_cis):
    """meta-llama/llama model.py ``apply_rotary_emb`` for x of shape (b, s, h, d): pairs
    (x[2i], x[2i+1]) as complex numbers x[2i] + 1j x[2i+1], multiplied by freqs_cis."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.view(1, xc.shape[1], 1, xc.shape[-1])
    return torch.view_as_real(xc * freqs_cis).flatten(3)


@pytest.mark.parametrize("theta", [10000.0, 500000.0])
def test_interleaved_matches_meta_llama(theta):
    b, s, h, d = 2, 2048, 2, 16
    x = randn(b, s, h, d, seed=5)
    expected = meta_apply_rotary_emb(x, meta_precompute_freqs_cis(d, s, theta))
    cos, sin = pc.rope_cos_sin(torch.arange(s), d, base=theta, layout="interleaved", dtype=F64)
    got = pc.apply_rope(x.transpose(1, 2), cos, sin, layout="interleaved").transpose(
        1, 2
    )  # ours wants (b, h, s, d)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------- 6. RoFormer's matrix


def roformer_matrix(m, d, base=10000.0):
    """Su et al. 2021, Eq. 15: block-diagonal R^d_{Theta,m} with 2x2 blocks
    [[cos m theta_i, -sin m theta_i], [sin m theta_i, cos m theta_i]],
    theta_i = base**(-2(i-1)/d)."""
    r = [[0.0] * d for _ in range(d)]
    for i in range(d // 2):
        angle = m * base ** (-2 * i / d)
        c, s = math.cos(angle), math.sin(angle)
        r[2 * i][2 * i], r[2 * i][2 * i + 1] = c, -s
        r[2 * i + 1][2 * i], r[2 * i + 1][2 * i + 1] = s, c
    return torch.tensor(r, dtype=F64)


def test_interleaved_matches_roformer_matrix():
    d = 8
    positions = [0, 1, 2, 7, 100, 4097]
    x = randn(len(positions), d, seed=6)
    cos, sin = pc.rope_cos_sin(torch.tensor(positions), d, layout="interleaved", dtype=F64)
    got = pc.apply_rope(x, cos, sin, layout="interleaved")
    expected = torch.stack([roformer_matrix(m, d) @ x[j] for j, m in enumerate(positions)])
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-13)
    # Eq. 16: q^T R_m^T R_n k = q^T R_{n-m} k
    q, k = x[1], x[2]
    lhs = float(got[1] @ got[2])
    rhs = float(q @ roformer_matrix(2 - 1, d) @ k)
    assert lhs == pytest.approx(rhs, abs=1e-13)


# --------------------------------------------------------------------------- 7. precision


def numpy_cos_sin(positions, d, base=10000.0):
    """float64 reference: cos, sin of m * base**(-2i/d), in the half layout, with numpy."""
    angles = np.asarray(positions, dtype=np.float64)[:, None] * base ** (-np.arange(0, d, 2) / d)
    return np.concatenate([np.cos(angles)] * 2, -1), np.concatenate([np.sin(angles)] * 2, -1)


POSITIONS = np.concatenate(
    (
        [0, 1, 2047, 4096, 65535, 131072, 2**20 - 1],
        np.random.default_rng(7).integers(0, 2**20, 1993),
    )
)


def test_float32_tables_within_1e6_at_every_position_up_to_2_20():
    """Computed in float64 and rounded once, float32 tables stay within 1e-6 of the float64 value up
    to 2**20."""
    d = 64
    cos, sin = pc.rope_cos_sin(torch.from_numpy(POSITIONS), d)
    ref_cos, ref_sin = numpy_cos_sin(POSITIONS, d)
    assert cos.dtype == torch.float32
    assert np.abs(cos.double().numpy() - ref_cos).max() < 1e-6
    assert np.abs(sin.double().numpy() - ref_sin).max() < 1e-6


def test_all_float32_angles_are_off_by_more_than_1e3_at_131072():
    """The motivation for float64 angles: with positions and inverse frequencies in float32 (Hugging
    Face's formulation, head_dim 128 as in Llama), cos at position 131072 is wrong by more than
    1e-3."""
    d, m = 128, 131072
    for base in (10000.0, 500000.0):
        inv32 = np.float32(1.0) / (
            np.float32(base) ** (np.arange(0, d, 2, dtype=np.float32) / np.float32(d))
        )
        angle32 = np.float32(m) * inv32  # float32 product
        exact = np.cos(m * base ** (-np.arange(0, d, 2) / d))
        assert np.abs(np.cos(angle32.astype(np.float64)) - exact).max() > 1e-3
        ours, _ = pc.rope_cos_sin(torch.tensor([m]), d, base=base)
        assert np.abs(ours[0, : d // 2].double().numpy() - exact).max() < 1e-7


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_tables_are_correctly_rounded(dtype):
    """rope_cos_sin(dtype=bfloat16/float16) is the float64 value rounded once to nearest.

    The reference is numpy's float64 cos/sin; its angle m * theta_i is itself off by up to about
    m * 2**-53 (an ulp of theta), 1.2e-10 at m < 2**20, hence the slack of 4 * 2**20 * 2**-53.
    Rounding is checked as "no neighbour is closer" rather than against ref.to(dtype), because
    torch converts float64 to bfloat16/float16 through float32 (two roundings), which is not
    always nearest.
    """
    d = 64
    cos, sin = pc.rope_cos_sin(torch.from_numpy(POSITIONS), d, dtype=dtype)
    ref_cos, ref_sin = (torch.from_numpy(r) for r in numpy_cos_sin(POSITIONS, d))
    slack = 4 * 2**20 * 2.0**-53
    assert cos.dtype == sin.dtype == dtype
    assert bool(is_nearest(cos, ref_cos, slack).all())
    assert bool(is_nearest(sin, ref_sin, slack).all())
    # and so equal to torch's conversion wherever that one is nearest by more than 2 slack:
    # there no value within the slack of being nearest can be another one, whatever the last
    # bits of this platform's cos, sin and pow (at the few values within 2 slack of a rounding
    # midpoint either neighbour may be the nearest to posenc_core's own float64 value); and
    # where the reference is 0 (sin at position 0, exactly 0 on every platform)
    for got, ref in ((cos, ref_cos), (sin, ref_sin)):
        torch_rounded = ref.to(dtype)
        agree = is_nearest(torch_rounded, ref, -2 * slack) | (ref == 0)
        assert agree.float().mean() > 0.999
        assert torch.equal(got[agree], torch_rounded[agree])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_low_precision_apply_rope_is_correctly_rounded(dtype, layout):
    """bfloat16/float16 inputs: apply_rope returns the nearest representable value of the formula
    (a single rounding). With float64 tables, and in RotaryEmbedding, that is the nearest value to
    the exact rotation, computed here with numpy in float64 from the paper's angles; with float32
    tables it is the nearest value to x*cos + rot(x)*sin for those tables (products of an 8- or
    11-bit and a 24-bit significand are exact in float64). 4 * 8 * 512 * 64 elements: a float32
    computation rounded again misses the nearest value for dozens of them."""
    b, h, s, d = 4, 8, 512, 64
    positions = np.concatenate(
        ([0, 1, 2, 65535], np.random.default_rng(8).integers(0, 65536, s - 4))
    )
    x = randn(b, h, s, d, seed=9, dtype=dtype) * 3
    xd = x.double().numpy()
    angles = positions.astype(np.float64)[:, None] * 10000.0 ** (-np.arange(0, d, 2) / d)

    def rotate(c, sn):  # float64 rotation of x's pairs by tables c, sn of shape (s, d/2)
        a, bb = (
            (xd[..., : d // 2], xd[..., d // 2 :])
            if layout == "half"
            else (xd[..., 0::2], xd[..., 1::2])
        )
        first, second = a * c - bb * sn, bb * c + a * sn
        out = np.empty_like(xd)
        if layout == "half":
            out[..., : d // 2], out[..., d // 2 :] = first, second
        else:
            out[..., 0::2], out[..., 1::2] = first, second
        return torch.from_numpy(out)

    exact = rotate(np.cos(angles), np.sin(angles))
    # numpy's float64 cos and sin of its own angles differ from posenc_core's float64 tables
    # (torch's pow, cos and sin, whose last bits depend on the platform) by up to about
    # 6 m 2**-53 + 2**-52 (an ulp or two of theta times m < 2**16, the rounding of each angle,
    # an ulp of the value), so the two float64 values of a result differ by up to
    # delta = (|x_a| + |x_b|) times that, and the nearest value to one is within 2 delta of
    # being the nearest to the other: the slack. A result rounded twice (through float32)
    # misses by about 1e-7, far more, and is caught.
    slack = 2 * float(x.abs().max()) * 16 * 2**16 * 2.0**-53
    pos = torch.from_numpy(positions)
    cos64, sin64 = pc.rope_cos_sin(pos, d, layout=layout, dtype=F64)
    for got in (
        pc.apply_rope(x, cos64, sin64, layout=layout),
        pc.RotaryEmbedding(d, layout=layout)(x, x, positions=pos)[0],
    ):
        assert got.dtype == dtype
        assert bool(is_nearest(got, exact, slack).all())
    assert not bool(is_nearest(exact.float().to(dtype), exact, slack).all())
    cos32, sin32 = pc.rope_cos_sin(pos, d, layout=layout)
    got32 = pc.apply_rope(x, cos32, sin32, layout=layout)
    half = (
        (slice(None), slice(None, None, 2))
        if layout == "interleaved"
        else (slice(None), slice(0, d // 2))
    )
    with_tables = rotate(cos32.double().numpy()[half], sin32.double().numpy()[half])
    assert bool(is_nearest(got32, with_tables, 0.0).all())
