"""rope_config_from_hf / RotaryEmbedding.from_config against transformers 5.23's config classes
(LlamaConfig, Qwen2Config, GPTNeoXConfig, GPTJConfig, PhiConfig, Phi3Config) and against the
frequencies its ROPE_INIT_FUNCTIONS compute from the same config, partial rotary included;
plus config.json dicts in the older format (rope_theta + rope_scaling with ``type``) and the
errors for bad ones.
"""

import pytest
import torch
from transformers import (
    GPTJConfig,
    GPTNeoXConfig,
    LlamaConfig,
    Phi3Config,
    PhiConfig,
    Qwen2Config,
)
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

import posenc_core as pc
from posenc_core.rope import RopeConfig, rope_config_from_hf

HF_RTOL = 2e-6  # HF's float32 inverse frequencies: a few float32 roundings


def hf_inv_freq(config, seq_len=None):
    rope_type = config.rope_parameters["rope_type"]
    if rope_type == "default":  # HF computes it outside the table: base**(-2i/dim), float32
        head_dim = getattr(config, "head_dim", None) or (
            config.hidden_size // config.num_attention_heads
        )
        dim = int(head_dim * config.rope_parameters.get("partial_rotary_factor", 1.0))
        base = config.rope_parameters["rope_theta"]
        return 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim), 1.0
    inv_freq, attention = ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)
    return inv_freq.double(), attention


LONG = {"short_factor": [1.0, 1.5, 2.0, 2.5], "long_factor": [3.0, 4.0, 5.0, 6.0]}
CASES = {
    "llama": lambda: LlamaConfig(hidden_size=256, num_attention_heads=4),
    "llama head_dim": lambda: LlamaConfig(hidden_size=256, num_attention_heads=4, head_dim=32),
    "llama yarn partial": lambda: LlamaConfig(
        hidden_size=256,
        num_attention_heads=4,
        max_position_embeddings=8192,
        rope_parameters={
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 2048,
            "rope_theta": 1e6,
            "partial_rotary_factor": 0.5,
        },
    ),
    "llama dynamic partial": lambda: LlamaConfig(
        hidden_size=256,
        num_attention_heads=4,
        max_position_embeddings=1024,
        rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4},
        partial_rotary_factor=0.75,
    ),
    "llama3": lambda: LlamaConfig(
        hidden_size=512,
        num_attention_heads=4,
        max_position_embeddings=131072,
        rope_parameters={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
            "rope_theta": 500000.0,
        },
    ),
    "qwen2": lambda: Qwen2Config(
        hidden_size=256, num_attention_heads=4, rope_parameters={"rope_theta": 1e6}
    ),
    "gpt_neox": lambda: GPTNeoXConfig(hidden_size=256, num_attention_heads=4),
    "gpt_neox rotary_pct": lambda: GPTNeoXConfig(
        hidden_size=256, num_attention_heads=4, rotary_pct=0.5, rotary_emb_base=20000
    ),
    "phi": lambda: PhiConfig(hidden_size=256, num_attention_heads=4),
    "phi 0.4": lambda: PhiConfig(hidden_size=320, num_attention_heads=4, partial_rotary_factor=0.4),
    "phi3 longrope": lambda: Phi3Config(
        hidden_size=128,
        num_attention_heads=4,
        max_position_embeddings=131072,
        original_max_position_embeddings=4096,
        pad_token_id=0,
        eos_token_id=2,
        rope_parameters={"rope_type": "longrope", "partial_rotary_factor": 0.25, **LONG},
    ),
}
# (head_dim, rotary_dim) each class gives, from its own attention code's formula
WIDTHS = {
    "llama": (64, 64),
    "llama head_dim": (32, 32),
    "llama yarn partial": (64, 32),
    "llama dynamic partial": (64, 48),
    "llama3": (128, 128),
    "qwen2": (64, 64),
    "gpt_neox": (64, 16),  # rotary_pct default 0.25
    "gpt_neox rotary_pct": (64, 32),
    "phi": (64, 32),  # partial_rotary_factor default 0.5
    "phi 0.4": (80, 32),
    "phi3 longrope": (32, 8),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seq_len", [None, 5000])
def test_frequencies_match_hf_for_the_config(name, seq_len):
    """rope_config_from_hf gives the widths of the model's attention and, over rotary_dim, the
    inverse frequencies and attention factor HF computes from the same config object."""
    config = CASES[name]()
    rc = rope_config_from_hf(config)
    assert (rc.head_dim, rc.rotary_dim) == WIDTHS[name]
    assert rc.layout == "half" and rc.max_position_embeddings == config.max_position_embeddings
    expected, attention = hf_inv_freq(config, seq_len)
    got = pc.rope_frequencies(rc.rotary_dim, base=rc.base, scaling=rc.scaling, seq_len=seq_len)
    torch.testing.assert_close(got, expected, rtol=HF_RTOL, atol=0)
    assert rc.scaling.attention_scaling == pytest.approx(attention, rel=1e-12)


def test_gptj_reads_n_embd_n_head_rotary_dim_and_is_interleaved():
    config = GPTJConfig(n_embd=256, n_head=2, rotary_dim=32, n_positions=512)
    rc = rope_config_from_hf(config)
    assert rc == RopeConfig(128, 32, 10000.0, pc.RopeScaling(), "interleaved", 512)
    whole = {"model_type": "gptj", "n_embd": 256, "n_head": 2, "rotary_dim": None}
    assert rope_config_from_hf(whole).rotary_dim == 128  # GPT-J: rotary_dim None rotates all
    rope = pc.RotaryEmbedding.from_config(config, layout="half")  # an explicit layout wins
    assert (rope.layout, rope.rotary_dim) == ("half", 32)


def test_old_config_json_formats():
    """config.json dicts of older checkpoints: top-level rope_theta, rope_scaling with ``type``;
    GPT-NeoX's rotary_pct and rotary_emb_base; Phi-3's top-level original length and 'su'."""
    llama = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "linear", "factor": 2.0},
    }
    rc = rope_config_from_hf(llama)
    assert (rc.head_dim, rc.rotary_dim, rc.base) == (128, 128, 10000.0)
    assert rc.scaling == pc.RopeScaling("linear", factor=2.0)
    pythia = {
        "model_type": "gpt_neox",
        "hidden_size": 512,
        "num_attention_heads": 8,
        "rotary_pct": 0.25,
        "rotary_emb_base": 10000,
        "max_position_embeddings": 2048,
    }
    assert (rope_config_from_hf(pythia).head_dim, rope_config_from_hf(pythia).rotary_dim) == (
        64,
        16,
    )
    phi3 = {
        "model_type": "phi3",
        "hidden_size": 3072,
        "num_attention_heads": 32,
        "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "su", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48},
    }
    scaling = rope_config_from_hf(phi3).scaling
    assert scaling.rope_type == "longrope" and scaling.factor == 32.0
    assert scaling.original_max_position_embeddings == 4096


def test_from_config_is_the_module_of_the_parsed_config():
    config = CASES["gpt_neox rotary_pct"]()
    rope = pc.RotaryEmbedding.from_config(config)
    assert (rope.head_dim, rope.rotary_dim, rope.base, rope.layout) == (64, 32, 20000.0, "half")
    assert repr(rope) == repr(pc.RotaryEmbedding(64, rotary_dim=32, base=20000.0))


BASE = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4}


@pytest.mark.parametrize(
    "config, error, match",
    [
        ("config.json", TypeError, r"config must be.*PretrainedConfig.*got str"),
        ({**BASE, "rope_parameters": [1]}, TypeError, r"rope_parameters must be a dict.*list"),
        (
            {**BASE, "rope_parameters": {"rope_type": "mrope"}},
            ValueError,
            r"rope_type.*'default'.*'longrope'.*got 'mrope'",
        ),
        (
            {**BASE, "rope_parameters": {"rope_type": "linear"}},
            ValueError,
            r"rope_type 'linear' needs the key 'factor'",
        ),
        (
            {**BASE, "rope_theta": 500000.0, "rope_parameters": {"rope_theta": 10000.0}},
            ValueError,
            r"rope_theta twice.*10000\.0.*500000\.0",
        ),
        (
            {**BASE, "rotary_pct": 0.25, "partial_rotary_factor": 0.5},
            ValueError,
            r"partial_rotary_factor twice.*0\.5.*rotary_pct=0\.25",
        ),
        (
            {**BASE, "partial_rotary_factor": 0.3},
            ValueError,
            r"int\(64 \* 0\.3\) = 19; it must be even",
        ),
        ({**BASE, "partial_rotary_factor": 0.01}, ValueError, r"rotary_dim.*= 0.*even and >= 2"),
        ({**BASE, "partial_rotary_factor": 1.5}, ValueError, r"partial_rotary_factor.*\(0, 1\]"),
        ({**BASE, "partial_rotary_factor": "0.5"}, TypeError, r"partial_rotary_factor.*real"),
        ({**BASE, "hidden_size": 250}, ValueError, r"hidden_size=250.*divisible.*4"),
        ({"model_type": "llama", "hidden_size": 256}, ValueError, r"num_attention_heads.*missing"),
        ({**BASE, "n_embd": 128}, ValueError, r"hidden_size twice.*256.*n_embd=128"),
        ({**BASE, "head_dim": 30.0}, TypeError, r"head_dim.*float"),
        (
            {
                **BASE,
                "rope_scaling": {"type": "linear", "factor": 2.0},
                "rope_parameters": {"rope_type": "linear", "factor": 4.0},
            },
            ValueError,
            r"rope_scaling\['factor'\]=2\.0 contradicts 4\.0",
        ),
        (
            {**BASE, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}},
            ValueError,
            r"'dynamic' needs max_position_embeddings",
        ),
        (
            {
                **BASE,
                "max_position_embeddings": 1024,
                "original_max_position_embeddings": 4096,
                "rope_parameters": {"rope_type": "longrope", **LONG},
            },
            ValueError,
            r"1024 / 4096 < 1",
        ),
        (
            {
                **BASE,
                "original_max_position_embeddings": 4096,
                "rope_parameters": {
                    "rope_type": "yarn",
                    "factor": 2.0,
                    "original_max_position_embeddings": 2048,
                },
            },
            ValueError,
            r"original_max_position_embeddings twice.*4096.*2048",
        ),
        (
            {"model_type": "gptj", "n_embd": 256, "n_head": 2, "rotary_dim": 7},
            ValueError,
            r"even.*7",
        ),
        (
            {
                "model_type": "gptj",
                "n_embd": 256,
                "n_head": 2,
                "rotary_dim": 32,
                "partial_rotary_factor": 0.5,
            },
            ValueError,
            r"rotary_dim=32 and partial_rotary_factor=0\.5",
        ),
    ],
    ids=lambda v: None,
)
def test_bad_configs(config, error, match):
    with pytest.raises(error, match=match):
        pc.RotaryEmbedding.from_config(config)


def test_bad_layout_override():
    with pytest.raises(ValueError, match=r"layout.*'half'.*'interleaved'.*'meta'"):
        pc.RotaryEmbedding.from_config(BASE, layout="meta")


def test_rope_config_checks_itself():
    with pytest.raises(ValueError, match=r"rotary_dim.*2\.\.64.*128"):
        RopeConfig(64, 128)
    with pytest.raises(TypeError, match=r"scaling must be a RopeScaling.*dict"):
        RopeConfig(64, 64, scaling={"rope_type": "linear", "factor": 2.0})
    assert RopeConfig.from_hf(BASE) == RopeConfig(64, 64)
