"""Per-layer positions read from configs: p-RoPE, YaRN's truncate, MLA's decoupled rotation,
query temperatures, layer plans from config objects and config.json dicts, and the errors.

References, each named in its test: transformers 5.23's ``modeling_rope_utils``
(``_compute_proportional_rope_parameters``, ``_compute_yarn_parameters``), the config classes
(their ``layer_types``, ``no_rope_layers`` and per-type ``rope_parameters``), DeepSeek-V3's
``apply_rotary_pos_emb_interleave``, ``apply_rotary_pos_emb`` and ``yarn_get_mscale``, and
Ministral 3's ``get_llama_4_attn_scale``. The whole models run in
``tests/core/test_rope_layer_models.py``.
"""

import math

import pytest
import torch
from transformers import (
    Cohere2Config,
    DeepseekV3Config,
    Gemma3TextConfig,
    GptOssConfig,
    Llama4TextConfig,
    LlamaConfig,
    ModernBertConfig,
    Olmo3Config,
    Qwen3NextConfig,
    SmolLM3Config,
)
from transformers.modeling_rope_utils import (
    _compute_proportional_rope_parameters,
    _compute_yarn_parameters,
)
from transformers.models.deepseek_v3 import modeling_deepseek_v3
from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig
from transformers.models.ministral3.configuration_ministral3 import Ministral3Config
from transformers.models.ministral3.modeling_ministral3 import get_llama_4_attn_scale

import posenc_core as pc
from posenc_core.rope import (
    QueryTemperature,
    RotaryEmbedding,
    apply_decoupled_rope,
    layer_facts,
    layer_plan,
    rope_frequencies,
)

# --------------------------------------------------------------------------- p-RoPE


@pytest.mark.parametrize(
    "head_dim, p, base, factor",
    [(512, 0.25, 1e6, 1.0), (64, 0.25, 1e4, 1.0), (16, 0.5, 1e4, 2.0), (20, 0.3, 500.0, 1.0)],
)
def test_proportional_matches_hf(head_dim, p, base, factor):
    """``_compute_proportional_rope_parameters`` (Gemma 4's global layers): the
    int(p * head_dim // 2) highest frequencies over the whole head, zeros after, / factor."""
    config = LlamaConfig(
        hidden_size=head_dim * 2,
        num_attention_heads=2,
        head_dim=head_dim,
        rope_parameters={
            "rope_type": "proportional",
            "rope_theta": base,
            "partial_rotary_factor": p,
            "factor": factor,
        },
    )
    hf, attention_factor = _compute_proportional_rope_parameters(config)
    ours = rope_frequencies(
        head_dim,
        base=base,
        scaling={"rope_type": "proportional", "partial_rotary_factor": p, "factor": factor},
    )
    assert attention_factor == 1.0
    assert ours.shape == hf.shape == (head_dim // 2,)
    rotating = int(p * head_dim // 2)
    assert (ours[rotating:] == 0).all() and (hf[rotating:] == 0).all()
    # HF: float32 powers, within a few float32 ulps of the float64 value
    torch.testing.assert_close(ours.float(), hf, rtol=4e-7 * math.log2(base), atol=0)
    assert ours[0] == 1.0 / factor


def test_proportional_pairs_zeros_across_the_whole_head():
    """Gemma 4's global layer (head 512, p 0.25): 64 pairs rotate, and in the half layout pair i
    is (x[i], x[i + 256]): dims 64..255 and 320..511 pass through at every position."""
    config = Gemma4TextConfig(
        num_hidden_layers=6, hidden_size=64, num_attention_heads=2, head_dim=16
    ).to_dict()
    rope = RotaryEmbedding.from_config(config, layer=5)
    assert (rope.head_dim, rope.rotary_dim, rope.scaling.rope_type) == (512, 512, "proportional")
    x = torch.randn(1, 1, 9, 512, dtype=torch.float64)
    out, _ = rope(x, x, positions=torch.arange(100, 109))
    still = torch.cat([torch.arange(64, 256), torch.arange(320, 512)])
    assert torch.equal(out[..., still], x[..., still])
    moved = torch.cat([torch.arange(0, 64), torch.arange(256, 320)])
    assert (out[..., moved] - x[..., moved]).abs().amax() > 0.1


def test_proportional_is_refused_where_it_makes_no_sense():
    with pytest.raises(ValueError, match=r"partial_rotary_factor.*\(0, 1\]"):
        rope_frequencies(8, scaling={"rope_type": "proportional", "partial_rotary_factor": 1.5})
    with pytest.raises(ValueError, match="partial_rotary_factor"):
        rope_frequencies(
            8, scaling={"rope_type": "linear", "factor": 2, "partial_rotary_factor": 0.5}
        )


# --------------------------------------------------------------------------- YaRN truncate


@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_truncate_matches_hf(truncate):
    """GPT-OSS's YaRN (factor 32, L0 4096, truncate False): ``_compute_yarn_parameters``."""
    params = {
        "rope_type": "yarn",
        "rope_theta": 150000.0,
        "factor": 32.0,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "truncate": truncate,
        "original_max_position_embeddings": 4096,
    }
    config = GptOssConfig(num_hidden_layers=2, head_dim=64, rope_parameters=params)
    hf, hf_attention = _compute_yarn_parameters(config)
    rope = RotaryEmbedding.from_config(config.to_dict(), layer=0)
    assert rope.scaling.truncate is truncate
    ours = rope_frequencies(64, base=150000.0, scaling=rope.scaling)
    torch.testing.assert_close(ours.float(), hf, rtol=2e-6, atol=0)
    assert rope.scaling.attention_scaling == pytest.approx(hf_attention, rel=1e-12)


def test_yarn_truncate_changes_the_frequencies():
    """The check above can fail: with GPT-OSS's settings, truncating the ramp moves frequencies
    by more than float32 rounding (what vllm#27722 and sglang#14270 missed)."""
    common = {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096}
    kept = rope_frequencies(64, base=150000.0, scaling={**common, "truncate": False})
    cut = rope_frequencies(64, base=150000.0, scaling={**common, "truncate": True})
    assert ((kept - cut).abs() / cut).amax() > 1e-2


# --------------------------------------------------------------------------- unknown keys


def test_a_typo_inside_rope_parameters_is_refused():
    """Hugging Face warns and uses beta_fast's default; posenc_core names the key."""
    config = {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fst": 16},
        "max_position_embeddings": 4096,
    }
    with pytest.raises(ValueError, match=r"'beta_fst'.*no rope type reads"):
        RotaryEmbedding.from_config(config)
    with pytest.raises(ValueError, match="'beta_fst'"):
        pc.rope.parse_scaling(
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "beta_fst": 16,
                "original_max_position_embeddings": 64,
            }
        )


# --------------------------------------------------------------------------- MLA


def _mla_tables(rope_dim, positions, base=10000.0):
    inv = 1.0 / base ** (torch.arange(0, rope_dim, 2, dtype=torch.float32) / rope_dim)
    freqs = positions[..., None].float() * inv
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


@pytest.mark.parametrize("interleave", [True, False])
def test_decoupled_rope_scores_match_deepseek(interleave):
    """``apply_decoupled_rope`` against DeepSeek-V3's ``apply_rotary_pos_emb_interleave`` /
    ``apply_rotary_pos_emb`` on the rope part: scores q k^T of (nope, rope) queries against a
    shared rotated key head equal to float32 rounding; the nope dims pass unchanged."""
    config = DeepseekV3Config(
        num_hidden_layers=1, qk_rope_head_dim=16, qk_nope_head_dim=8, rope_interleave=interleave
    )
    rope = RotaryEmbedding.from_config(config)
    assert (rope.head_dim, rope.layout) == (16, "interleaved" if interleave else "half")
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 11, 24, generator=g)
    k_pe = torch.randn(2, 1, 11, 16, generator=g)
    k_nope = torch.randn(2, 3, 11, 8, generator=g)
    positions = torch.arange(11).expand(2, 11) + torch.tensor([[0], [5]])
    q_out, k_out = apply_decoupled_rope(rope, q, k_pe, positions)
    assert torch.equal(q_out[..., :8], q[..., :8])
    cos, sin = _mla_tables(16, positions)
    apply = (
        modeling_deepseek_v3.apply_rotary_pos_emb_interleave
        if interleave
        else modeling_deepseek_v3.apply_rotary_pos_emb
    )
    q_hf, k_hf = apply(q[..., 8:], k_pe, cos, sin)
    ours = torch.cat([q_out, torch.cat([k_nope, k_out.expand(-1, 3, -1, -1)], -1)], -1)
    del ours
    key_ours = torch.cat([k_nope, k_out.expand(-1, 3, -1, -1)], dim=-1)
    key_hf = torch.cat([k_nope, k_hf.expand(-1, 3, -1, -1)], dim=-1)
    query_hf = torch.cat([q[..., :8], q_hf], dim=-1)
    torch.testing.assert_close(
        q_out @ key_ours.transpose(-1, -2),
        query_hf @ key_hf.transpose(-1, -2),
        rtol=1e-5,
        atol=1e-5,
    )


def test_decoupled_rope_checks_its_inputs():
    rope = RotaryEmbedding(16)
    with pytest.raises(ValueError, match="k_rope"):
        apply_decoupled_rope(rope, torch.randn(1, 2, 3, 24), torch.randn(1, 1, 3, 8))
    with pytest.raises(ValueError, match="at least rope.head_dim"):
        apply_decoupled_rope(rope, torch.randn(1, 2, 3, 8), torch.randn(1, 1, 3, 16))
    with pytest.raises(TypeError, match="rope must be a RotaryEmbedding"):
        apply_decoupled_rope("rope", torch.randn(1, 2, 3, 24), torch.randn(1, 1, 3, 16))


def test_mla_softmax_scale_is_mscale_squared():
    """``yarn_get_mscale(factor, mscale_all_dim) ** 2``, as DeepseekV3Attention's scaling."""
    params = {
        "rope_type": "yarn",
        "factor": 40.0,
        "mscale": 1.0,
        "mscale_all_dim": 0.707,
        "original_max_position_embeddings": 4096,
        "beta_fast": 32,
        "beta_slow": 1,
        "rope_theta": 10000.0,
    }
    config = DeepseekV3Config(num_hidden_layers=2, rope_parameters=params)
    mscale = modeling_deepseek_v3.yarn_get_mscale(40.0, 0.707)
    for plan in layer_plan(config):
        assert plan.softmax_scale == pytest.approx(mscale**2, rel=1e-12)
    plain = DeepseekV3Config(num_hidden_layers=2)
    assert [p.softmax_scale for p in layer_plan(plain)] == [1.0, 1.0]


# --------------------------------------------------------------------------- temperatures


def test_ministral3_temperature_matches_hf():
    """``get_llama_4_attn_scale`` (Ministral 3): 1 + beta ln(1 + floor(pos / L0))."""
    positions = torch.tensor([[0, 1, 15, 16, 17, 31, 32, 100, 4095, 4096]])
    hf = get_llama_4_attn_scale(positions, 0.1, 16)[:, 0, :, 0]
    ours = QueryTemperature("ministral3", 0.1, 16)(positions)
    torch.testing.assert_close(ours, hf, rtol=2e-7, atol=0)


def test_llama4_temperature_steps_at_the_floor_scale():
    """Llama 4's rule 1 + attn_scale * log1p(floor((pos + 1) / floor_scale)), from the
    config: 1 up to position floor_scale - 2, 1 + 0.1 ln 2 from floor_scale - 1."""
    plans = layer_plan(Llama4TextConfig(num_hidden_layers=4, floor_scale=8, attn_scale=0.1))
    temperature = plans[3].temperature
    assert [p.temperature is None for p in plans] == [True, True, True, False]
    scales = temperature(torch.arange(20))
    assert (scales[:7] == 1).all()
    expected = torch.tensor([1 + 0.1 * math.log(2)] * 8 + [1 + 0.1 * math.log(3)] * 5)
    torch.testing.assert_close(scales[7:], expected.float(), rtol=0, atol=0)
    assert temperature.positions == "cache"
    off = layer_plan(Llama4TextConfig(num_hidden_layers=4, attn_temperature_tuning=False))
    assert all(p.temperature is None for p in off)


def test_temperature_checks_positions():
    t = QueryTemperature("ministral3", 0.1, 16)
    with pytest.raises(TypeError, match="integer tensor"):
        t(torch.tensor([1.5]))
    with pytest.raises(ValueError, match=">= 0"):
        t(torch.tensor([-1]))


# --------------------------------------------------------------------------- plans from configs


def _configs():
    """Tiny config objects of every architecture with per-layer positions."""
    return {
        "llama4": Llama4TextConfig(num_hidden_layers=8, attention_chunk_size=16),
        "smollm3": SmolLM3Config(num_hidden_layers=8),
        "cohere2": Cohere2Config(num_hidden_layers=8, sliding_window=8),
        "qwen3_next": Qwen3NextConfig(num_hidden_layers=8),
        "gemma3": Gemma3TextConfig(
            num_hidden_layers=12,
            sliding_window=8,
            rope_scaling={"rope_type": "linear", "factor": 8.0},
        ),
        "gemma4": Gemma4TextConfig(num_hidden_layers=6, head_dim=16, global_head_dim=32),
        "modernbert": ModernBertConfig(num_hidden_layers=6, local_attention=16),
        "olmo3": Olmo3Config(
            num_hidden_layers=8,
            max_position_embeddings=65536,
            rope_scaling={
                "rope_type": "yarn",
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
            },
        ),
        "gpt_oss": GptOssConfig(num_hidden_layers=4),
        "deepseek_v3": DeepseekV3Config(num_hidden_layers=2),
        "ministral3": Ministral3Config(num_hidden_layers=2),
    }


def _summary(plans):
    return [
        (
            p.attention,
            p.window,
            None
            if p.rope is None
            else (p.rope.head_dim, p.rope.rotary_dim, p.rope.base, p.rope.layout, p.rope.scaling),
            None if p.temperature is None else p.temperature,
            p.sinks,
            p.causal,
            p.softmax_scale,
        )
        for p in plans
    ]


@pytest.mark.parametrize("name", list(_configs()))
def test_plan_agrees_with_the_config_class(name):
    """Layer types and which layers rotate, as each config class derives them; the same plan
    from the config object and from its ``to_dict()`` (a config.json)."""
    config = _configs()[name]
    plans = layer_plan(config)
    assert len(plans) == config.num_hidden_layers
    kinds = {
        "full_attention": "full",
        "sliding_attention": "sliding",
        "chunked_attention": "chunked",
        "linear_attention": "linear",
    }
    types = getattr(config, "layer_types", None) or ["full_attention"] * len(plans)
    assert [p.attention for p in plans] == [kinds[t] for t in types]
    if hasattr(config, "no_rope_layers"):
        assert [p.rope is not None for p in plans] == [bool(f) for f in config.no_rope_layers]
    assert _summary(layer_plan(config.to_dict())) == _summary(plans)
    for p in plans:
        if p.attention == "sliding":
            assert p.window == config.sliding_window
    text = repr(plans)
    assert text.splitlines()[0].split() == list(pc.rope.LayerPlans.HEADER)
    assert len(text.splitlines()) == len(plans) + 1


def test_which_layers_rotate_per_architecture():
    """Cohere2 rotates its sliding layers only; Qwen3-Next its full layers only, 25% of each
    head; SmolLM3's no_rope_layers 1 means 'uses RoPE'; ModernBERT and Gemma 3 take a base per
    layer type; OLMo 3 and Gemma 3 scale their full layers only; GPT-OSS keeps YaRN's ramp
    untruncated and has sinks everywhere; Gemma 4's global layers are p-RoPE on wider heads."""
    c = _configs()
    rotating = lambda plans: [p.rope is not None for p in plans]  # noqa: E731
    assert rotating(layer_plan(c["cohere2"])) == [True, True, True, False] * 2
    qwen = layer_plan(c["qwen3_next"])
    assert rotating(qwen) == [False, False, False, True] * 2
    assert (qwen[3].rope.rotary_dim, qwen[3].rope.head_dim) == (64, 256)
    assert rotating(layer_plan(c["smollm3"])) == [True, True, True, False] * 2
    bert = layer_plan(c["modernbert"])
    assert [p.rope.base for p in bert] == [160000.0, 1e4, 1e4, 160000.0, 1e4, 1e4]
    assert not any(p.causal for p in bert) and bert[1].window == 8
    gemma3 = layer_plan(c["gemma3"])
    assert [(p.rope.base, p.rope.scaling.rope_type) for p in gemma3[4:6]] == [
        (1e4, "default"),
        (1e6, "linear"),
    ]
    olmo = layer_plan(c["olmo3"])
    assert [p.rope.scaling.rope_type for p in olmo[:4]] == ["default"] * 3 + ["yarn"]
    oss = layer_plan(c["gpt_oss"])
    assert all(p.sinks and p.rope.scaling.truncate is False for p in oss)
    gemma4 = layer_plan(c["gemma4"])
    assert (gemma4[5].rope.head_dim, gemma4[5].rope.scaling.rope_type) == (32, "proportional")
    assert gemma4[0].rope.head_dim == 16
    llama4 = layer_plan(c["llama4"])
    assert [p.attention for p in llama4[:4]] == ["chunked"] * 3 + ["full"]
    assert llama4[0].window == 16 and llama4[0].rope.layout == "interleaved"


GEMMA3_OLD_JSON = {
    "model_type": "gemma3_text",
    "hidden_size": 64,
    "num_attention_heads": 2,
    "head_dim": 32,
    "num_hidden_layers": 6,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "rope_theta": 1000000.0,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
    "max_position_embeddings": 131072,
}


def test_older_spelling_reads_as_the_new_one():
    """A Hub config.json with rope_theta + rope_local_base_freq + rope_scaling (Gemma 3) gives
    the plan of the transformers 5 object built from it (rope_parameters keyed by type)."""
    old = layer_plan(GEMMA3_OLD_JSON)
    new = layer_plan(
        Gemma3TextConfig(**{k: v for k, v in GEMMA3_OLD_JSON.items() if k != "model_type"})
    )
    assert _summary(old) == _summary(new)
    assert [p.rope.base for p in old] == [1e4] * 5 + [1e6]
    assert old[5].rope.scaling.factor == 8.0 and old[0].rope.scaling.rope_type == "default"
    multimodal = {"model_type": "gemma3", "text_config": GEMMA3_OLD_JSON}
    assert _summary(layer_plan(multimodal)) == _summary(old)


def test_layers_that_rotate_alike_share_one_module():
    """One RotaryEmbedding (and table cache) per distinct rotation, as Hugging Face keeps one
    rotary module per layer type: Gemma 3's five sliding layers share one, its global another."""
    plans = layer_plan(_configs()["gemma3"])
    assert len({id(p.rope) for p in plans}) == 2
    assert plans[0].rope is plans[4].rope and plans[5].rope is plans[11].rope
    assert plans[0].rope is not plans[5].rope


def test_from_config_needs_layer_when_layers_differ():
    with pytest.raises(ValueError, match=r"pass layer=i"):
        RotaryEmbedding.from_config(_configs()["gemma3"])
    with pytest.raises(ValueError, match=r"layers 3, 7: no rotation"):
        RotaryEmbedding.from_config(_configs()["smollm3"])
    uniform = LlamaConfig(num_hidden_layers=3, hidden_size=64, num_attention_heads=4)
    a, b = RotaryEmbedding.from_config(uniform), RotaryEmbedding.from_config(uniform, layer=2)
    assert (a.head_dim, a.base, a.scaling) == (b.head_dim, b.base, b.scaling)
    assert RotaryEmbedding.from_config(_configs()["smollm3"], layer=3) is None


def test_layer_facts_refuse_bad_configs():
    base = {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "num_attention_heads": 2,
        "num_hidden_layers": 3,
    }
    with pytest.raises(ValueError, match="layer_types has 2 entries but num_hidden_layers=3"):
        layer_facts({**base, "layer_types": ["full_attention"] * 2})
    with pytest.raises(ValueError, match=r"layer_types\[0\]=\['full_attention'\]"):
        layer_facts({**base, "layer_types": [["full_attention"]] * 3})
    with pytest.raises(ValueError, match=r"layer_types\[1\]='global'"):
        layer_facts({**base, "layer_types": ["full_attention", "global", "full_attention"]})
    with pytest.raises(ValueError, match="layer must be"):
        RotaryEmbedding.from_config(base, layer=3)
    keyed = {
        **base,
        "layer_types": ["sliding_attention"] * 2 + ["full_attention"],
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6}},
    }
    with pytest.raises(ValueError, match="no entry for sliding_attention"):
        layer_facts(keyed)
    with pytest.raises(ValueError, match="no_rope_layers"):
        layer_facts(
            {
                "model_type": "smollm3",
                "hidden_size": 64,
                "num_attention_heads": 2,
                "num_hidden_layers": 3,
                "no_rope_layers": [1, 0],
            }
        )


# --------------------------------------------------------------------------- Llama 4 Scout

LLAMA4_SCOUT = {  # the keys of Llama 4 Scout's text_config that place positions
    "model_type": "llama4_text",
    "num_hidden_layers": 48,
    "hidden_size": 5120,
    "num_attention_heads": 40,
    "head_dim": 128,
    "attention_chunk_size": 8192,
    "no_rope_layers": [],
    "attn_temperature_tuning": 4,
    "floor_scale": 8192,
    "attn_scale": 0.1,
    "max_position_embeddings": 10485760,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "rope_type": "llama3",
        "factor": 16.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 1.0,
        "original_max_position_embeddings": 8192,
    },
}


def test_llama4_scout_bands_match_hf():
    """Scout's llama3 scaling has low_freq_factor == high_freq_factor == 1: no band between the
    kept and the divided wavelengths. ``_compute_llama3_parameters`` on the transformers config
    built from the same keys gives the same frequencies (the check refused it before: it
    required high > low)."""
    from transformers.modeling_rope_utils import _compute_llama3_parameters

    plan = layer_plan(LLAMA4_SCOUT)
    rope = plan[0].rope
    config = Llama4TextConfig(
        **{
            k: v
            for k, v in LLAMA4_SCOUT.items()
            if k not in ("model_type", "rope_scaling", "attn_temperature_tuning")
        },
        rope_parameters={**LLAMA4_SCOUT["rope_scaling"], "rope_theta": 500000.0},
    )
    hf, _ = _compute_llama3_parameters(config)
    ours = rope_frequencies(128, base=500000.0, scaling=rope.scaling)
    torch.testing.assert_close(ours.float(), hf, rtol=4e-7 * math.log2(500000.0), atol=0)
    kept = ours == rope_frequencies(128, base=500000.0)
    assert 0 < int(kept.sum()) < 64  # some wavelengths kept, the rest divided by 16
    assert [p.rope is None for p in plan[:8]] == [False, False, False, True] * 2
    assert [p.attention for p in plan[:4]] == ["chunked"] * 3 + ["full"]
    assert plan[3].temperature is not None and plan[0].temperature is None


def test_docstring_plan_is_what_layer_plan_prints():
    """The table in layer_plan's docstring (and the README) is this config's printed plan."""
    doc = pc.rope.layer_plan.__doc__
    printed = str(layer_plan(LLAMA4_SCOUT)[:5])
    assert printed in "\n".join(line.strip() for line in doc.splitlines())


def test_readme_plan_is_what_layer_plan_prints():
    """The README shows the same table."""
    import pathlib

    readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    assert str(layer_plan(LLAMA4_SCOUT)[:5]) in readme


OLD_SPELLINGS = {
    # config.json dicts as the Hub holds them (rope_theta + rope_scaling at the top level),
    # beside the transformers 5 object built from the same keys
    "olmo3": (
        {
            "rope_theta": 500000.0,
            "max_position_embeddings": 65536,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
                "attention_factor": 1.2,
                "beta_fast": 32,
                "beta_slow": 1,
            },
        },
        lambda kw: Olmo3Config(num_hidden_layers=8, **kw),
    ),
    "gpt_oss": (
        {
            "rope_theta": 150000.0,
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": 4096,
            },
        },
        lambda kw: GptOssConfig(num_hidden_layers=4, **kw),
    ),
    "modernbert": (
        {"global_rope_theta": 80000.0, "local_rope_theta": 5000.0},
        lambda kw: ModernBertConfig(num_hidden_layers=6, **kw),
    ),
    "deepseek_v3": (
        {
            "rope_theta": 10000.0,
            "rope_scaling": {
                "type": "yarn",
                "factor": 40.0,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "original_max_position_embeddings": 4096,
                "beta_fast": 32,
                "beta_slow": 1,
            },
        },
        lambda kw: DeepseekV3Config(num_hidden_layers=2, **kw),
    ),
}


@pytest.mark.parametrize("name", list(OLD_SPELLINGS))
def test_hub_spelling_reads_as_transformers_5(name):
    """The keys a Hub config.json holds give the plan of the transformers 5 config object
    built from them (which moves them into rope_parameters, keyed by layer type where the
    architecture's config class does: OLMo 3 scales its full layers only)."""
    keys, build = OLD_SPELLINGS[name]
    config = build(keys)
    as_json = {**config.to_dict(), **keys}
    as_json.pop("rope_parameters")
    assert _summary(layer_plan(as_json)) == _summary(layer_plan(config))
    assert _summary(layer_plan(config.to_dict())) == _summary(layer_plan(config))
