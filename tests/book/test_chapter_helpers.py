"""The helpers several chapters share, each against a computation written out here."""

import math

import numpy as np
import pytest
import torch

from posenc_core.book import chapter_helpers as ch


def rotate_pairs(x, positions, pairs, base):
    """Rotate each pair (a, b) of the last axis by angle p * base ** (-2i / d), a loop."""
    out = x.clone().double()
    d = x.shape[-1]
    for s, p in enumerate(positions):
        for i, (a, b) in enumerate(pairs):
            angle = p * base ** (-2 * i / d)
            c, sn = math.cos(angle), math.sin(angle)
            xa, xb = x[..., s, a].double(), x[..., s, b].double()
            out[..., s, a] = xa * c - xb * sn
            out[..., s, b] = xa * sn + xb * c
    return out


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_rope_rotates_each_pair_by_its_angle(layout, base):
    d = 8
    pairs = (
        [(2 * i, 2 * i + 1) for i in range(d // 2)]
        if layout == "interleaved"
        else [(i, i + d // 2) for i in range(d // 2)]
    )
    x = torch.randn(2, 5, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    positions = [0, 1, 7, 30, 1000]
    got = ch.rope(x, positions, layout=layout, base=base)
    torch.testing.assert_close(got, rotate_pairs(x, positions, pairs, base), rtol=0, atol=1e-12)


def test_frequency_split_counts_kept_blended_and_divided():
    s = 4.0
    ratio = torch.tensor([1.0, 1.0, 1.0, 0.7, 0.3, 0.25, 0.25], dtype=torch.float64)
    assert ch.frequency_split(ratio, s) == (3, 2, 2)
    # a relative 1e-12: a ratio off by 1e-9 is blended, not kept
    near = torch.tensor([1 + 1e-9, 0.25 * (1 + 1e-14)], dtype=torch.float64)
    assert ch.frequency_split(near, s) == (0, 1, 1)


def test_frequency_split_of_yarn_matches_the_papers_ramp():
    d, L0, s = 64, 4096, 8.0
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    r = L0 / (2 * math.pi / theta)  # turns over the training window
    gamma = ((r - 1) / (32 - 1)).clamp(0, 1)  # YaRN's ramp, alpha = 1, beta = 32
    ratio = ((1 - gamma) / s + gamma).double()
    expected = (int((gamma == 1).sum()), int(((gamma > 0) & (gamma < 1)).sum()))
    kept, blended, divided = ch.frequency_split(ratio, s)
    assert (kept, blended) == expected
    assert divided == int((gamma == 0).sum())


@pytest.mark.parametrize("make", [np.asarray, torch.as_tensor])
def test_in_range_averages_positions_half_l_to_l(make):
    L = 8
    curves = make(np.arange(3 * 20, dtype=float).reshape(3, 20))
    # row k holds 20k, 20k + 1, ...: positions 4..7 average to 20k + 5.5
    per_seed = ch.in_range(curves, L, per_seed=True)
    assert [float(v) for v in per_seed] == [5.5, 25.5, 45.5]
    assert float(ch.in_range(curves, L)) == 25.5


@pytest.mark.parametrize("train_len, error", [(1, ValueError), (21, ValueError), (8.0, TypeError)])
def test_in_range_refuses_a_bad_length(train_len, error):
    with pytest.raises(error, match="train_len"):
        ch.in_range(np.zeros((2, 20)), train_len)


def test_byte_llama_config_rotates_as_this_package_does():
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama import modeling_llama

    config = ch.byte_llama_config({"rope_type": "default", "rope_theta": 10000.0})
    assert (config.hidden_size, config.num_attention_heads, config.head_dim) == (64, 4, 16)
    assert isinstance(config, transformers.LlamaConfig)
    positions = torch.arange(40)
    cos, _ = modeling_llama.LlamaRotaryEmbedding(config)(torch.zeros(1, 40, 16), positions[None])
    omega = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    expected = torch.cos(positions[:, None].double() * omega).repeat(1, 2)
    torch.testing.assert_close(cos[0].double(), expected, rtol=0, atol=1e-5)


def test_byte_llama_config_passes_the_training_length_only_when_given():
    pytest.importorskip("transformers")
    from transformers import LlamaConfig

    dynamic = {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 8.0}
    assert ch.byte_llama_config(dynamic, max_position_embeddings=64).max_position_embeddings == 64
    default = LlamaConfig().max_position_embeddings
    assert ch.byte_llama_config(dynamic).max_position_embeddings == default
