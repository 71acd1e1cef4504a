"""The real configurations read into the plans their model cards and papers describe.

Every entry of REAL_CONFIGS goes through ``layer_plan``; each model's layout is then checked
against a source other than the dict itself, named beside the check (a model card, a paper, a
technical report, or the layout the architecture's transformers class builds). The expected
layer sets are written as the sources state them ("every 4th layer"), not as read from a plan.
"""

import math

import pytest

from posenc_core.book.real_configs import REAL_CONFIGS
from posenc_core.rope import layer_plan

PLANS = {name: layer_plan(config) for name, config in REAL_CONFIGS.items()}


def every(n: int, period: int) -> set[int]:
    """Layers (0-based) that are the period-th of their group: period - 1, 2 period - 1, ..."""
    return set(range(period - 1, n, period))


def rotating(plan) -> set[int]:
    return {p.layer for p in plan if p.rope is not None}


def of_kind(plan, attention: str) -> set[int]:
    return {p.layer for p in plan if p.attention == attention}


def test_the_nine_models_of_the_chapter_are_there_and_every_config_reads():
    assert set(REAL_CONFIGS) == {
        "Llama 4 Scout",
        "Gemma 3 27B",
        "Gemma 4 31B",
        "GPT-OSS 120b",
        "SmolLM3 3B",
        "Command A",
        "DeepSeek-V3",
        "Qwen3-Next 80B-A3B",
        "OLMo 3 7B",
    }
    for name, plan in PLANS.items():
        assert len(plan) == REAL_CONFIGS[name]["num_hidden_layers"], name
        assert [p.layer for p in plan] == list(range(len(plan))), name


def test_llama4_scout():
    """Meta's Llama 4 model card and "iRoPE": 48 layers; every 4th layer (3, 7, ...) has no
    positional encoding and scales its queries with the attention temperature; the others
    rotate (base 500k, llama3 scaling x16) inside chunks of 8192 tokens."""
    plan = PLANS["Llama 4 Scout"]
    nope = every(48, 4)
    assert len(plan) == 48 and min(nope) == 3 and len(nope) == 12
    assert rotating(plan) == set(range(48)) - nope
    assert {p.layer for p in plan if p.temperature is not None} == nope
    assert of_kind(plan, "chunked") == set(range(48)) - nope
    assert of_kind(plan, "full") == nope
    for p in plan:
        if p.rope is not None:
            assert p.window == 8192 and p.rope.base == 500000.0
            assert (p.rope.scaling.rope_type, p.rope.scaling.factor) == ("llama3", 16.0)
    t = plan[3].temperature  # 1 + 0.1 ln(1 + floor((pos + 1) / 8192)), NOTES.md
    assert (t.scale, t.step, t.offset) == (0.1, 8192, 1)


def test_gemma3_27b():
    """Gemma 3 technical report (arXiv 2503.19786): 5 local layers for every global one,
    starting with a local layer; local window 1024 at base 10k, global base 1M, and the global
    layers' RoPE scaled by 8 (linear) to reach 128K. The 27B has 62 layers."""
    plan = PLANS["Gemma 3 27B"]
    glob = every(62, 6)
    assert len(plan) == 62 and len(glob) == 10 and 0 not in glob
    assert of_kind(plan, "full") == glob
    assert of_kind(plan, "sliding") == set(range(62)) - glob
    assert rotating(plan) == set(range(62))
    for p in plan:
        s = p.rope.scaling
        if p.layer in glob:
            assert p.rope.base == 1e6 and (s.rope_type, s.factor) == ("linear", 8.0)
        else:
            assert p.rope.base == 1e4 and s.rope_type == "default" and p.window == 1024


def test_gemma4_31b():
    """Gemma 4's config class and model card: every 6th layer global, and the last layer
    always global; global layers rotate proportionally (p-RoPE, p = 0.25 of a 512-wide head)
    at base 1M, local ones fully at 10k in windows of 1024."""
    plan = PLANS["Gemma 4 31B"]
    glob = every(60, 6)
    assert len(plan) == 60 and 59 in glob
    assert of_kind(plan, "full") == glob and rotating(plan) == set(range(60))
    for p in plan:
        s = p.rope.scaling
        if p.layer in glob:
            assert p.rope.base == 1e6 and p.rope.head_dim == 512
            assert (s.rope_type, s.partial_rotary_factor) == ("proportional", 0.25)
        else:
            assert (p.rope.base, s.rope_type, p.window) == (1e4, "default", 1024)


def test_gpt_oss_120b():
    """OpenAI's gpt-oss model card: 36 layers alternating banded (128-token) and dense
    attention, a learned sink per head in every layer, YaRN to 131k (factor 32 over 4096) at
    base 150k, its ramp not rounded (truncate false)."""
    plan = PLANS["GPT-OSS 120b"]
    assert len(plan) == 36
    assert of_kind(plan, "sliding") == set(range(0, 36, 2))
    assert of_kind(plan, "full") == set(range(1, 36, 2))
    assert all(p.sinks for p in plan) and rotating(plan) == set(range(36))
    for p in plan:
        s = p.rope.scaling
        assert (s.rope_type, s.factor, s.truncate) == ("yarn", 32.0, False)
        assert p.rope.base == 150000.0
        assert p.window == (128 if p.attention == "sliding" else None)


def test_smollm3_3b():
    """Hugging Face's SmolLM3 blog: 36 layers, RoPE removed from every 4th layer (NoPE), base
    5M, full attention everywhere."""
    plan = PLANS["SmolLM3 3B"]
    assert len(plan) == 36
    assert rotating(plan) == set(range(36)) - every(36, 4)
    assert of_kind(plan, "full") == set(range(36))
    assert {p.rope.base for p in plan if p.rope is not None} == {5e6}


def test_command_a():
    """Cohere's Command A report: three sliding-window layers (4096) with RoPE, then one full
    attention layer without positional embeddings; 64 layers."""
    plan = PLANS["Command A"]
    glob = every(64, 4)
    assert len(plan) == 64
    assert of_kind(plan, "full") == glob
    assert rotating(plan) == set(range(64)) - glob
    assert {p.window for p in plan if p.layer not in glob} == {4096}


def test_deepseek_v3():
    """DeepSeek-V3 technical report (arXiv 2412.19437): 61 layers of MLA, full attention,
    decoupled RoPE on 64 of each query head's dims, YaRN to 128K (s = 40 over 4096)."""
    plan = PLANS["DeepSeek-V3"]
    assert len(plan) == 61 and of_kind(plan, "full") == set(range(61))
    assert rotating(plan) == set(range(61))
    for p in plan:
        s = p.rope.scaling
        assert p.rope.rotary_dim == 64
        assert (s.rope_type, s.factor, s.original_max_position_embeddings) == ("yarn", 40.0, 4096)
        mscale = 0.1 * 1.0 * math.log(40.0) + 1  # yarn_get_mscale(40, mscale_all_dim=1)
        assert p.softmax_scale == pytest.approx(mscale**2)


def test_qwen3_next_80b():
    """Qwen3-Next's model card: 48 layers, 12 x (3 x Gated DeltaNet, then 1 x gated
    attention); the attention layers rotate a quarter of their 256 dims, the linear ones carry
    no position."""
    plan = PLANS["Qwen3-Next 80B-A3B"]
    glob = every(48, 4)
    assert len(plan) == 48
    assert of_kind(plan, "full") == glob
    assert of_kind(plan, "linear") == set(range(48)) - glob
    assert rotating(plan) == glob
    for layer in glob:
        assert plan[layer].rope.rotary_dim == 64 and plan[layer].rope.head_dim == 256


def test_olmo3_7b():
    """Ai2's OLMo 3 report: 3 sliding-window layers (4096) then 1 full layer; YaRN (factor 8
    over 8192) on the full layers only, all at base 500k."""
    plan = PLANS["OLMo 3 7B"]
    glob = every(32, 4)
    assert of_kind(plan, "full") == glob
    assert rotating(plan) == set(range(32))
    for p in plan:
        assert p.rope.base == 500000.0
        scaled = (p.rope.scaling.rope_type, p.rope.scaling.factor)
        assert scaled == (("yarn", 8.0) if p.layer in glob else ("default", None)), p.layer
        assert p.window == (None if p.layer in glob else 4096)
    # YaRN's attention factor, 0.1 ln s + 1 at s = 8 (Peng et al. 2023, eq. 22), as published
    assert plan[3].rope.scaling.attention_factor == pytest.approx(0.1 * math.log(8.0) + 1)
