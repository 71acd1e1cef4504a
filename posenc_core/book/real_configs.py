"""Real configurations of 2025-26 models: the config.json keys that place positions, as dicts.

:data:`REAL_CONFIGS` maps a display name to the keys of one published model's config.json
(its ``text_config`` for a multimodal model) that :func:`~posenc_core.rope.layer_plan` reads:
the layer count and head width, the layer types or the keys that make their pattern, the
rope settings (in the spelling the Hub file uses), windows, chunks, which layers rotate,
temperatures. Nothing is fetched: the values are written here, each entry with its Hugging
Face model id. Where the Hub file leaves a key out, the value is the config class's default
(transformers 5.23), said in a comment; a value that could not be checked against a copy of
the published file is marked "not verified". Checked model by model in
``tests/book/test_real_configs.py``.

Book layer: plain data, imports nothing.
"""

from __future__ import annotations

__all__ = ["REAL_CONFIGS"]

_GEMMA4_31B_TYPES = (["sliding_attention"] * 5 + ["full_attention"]) * 10

REAL_CONFIGS: dict[str, dict] = {
    # meta-llama/Llama-4-Scout-17B-16E-Instruct (text_config); as tests/core/test_rope_layers.py
    "Llama 4 Scout": {
        "model_type": "llama4_text",
        "num_hidden_layers": 48,
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "head_dim": 128,
        "attention_chunk_size": 8192,
        "no_rope_layers": [],  # empty: one NoPE layer every no_rope_layer_interval (4)
        "attn_temperature_tuning": 4,  # truthy: the NoPE layers scale their queries
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
    },
    # google/gemma-3-27b-it (text_config)
    "Gemma 3 27B": {
        "model_type": "gemma3_text",
        "num_hidden_layers": 62,
        "hidden_size": 5376,
        "num_attention_heads": 32,
        "head_dim": 128,
        "sliding_window": 1024,
        "rope_scaling": {"factor": 8.0, "rope_type": "linear"},  # global layers only
        # the Hub file leaves these three out; Gemma3TextConfig's defaults
        "sliding_window_pattern": 6,
        "rope_theta": 1_000_000.0,
        "rope_local_base_freq": 10_000.0,
        "max_position_embeddings": 131072,
    },
    # google/gemma-4-31B-it (text_config), the largest dense Gemma 4
    "Gemma 4 31B": {
        "model_type": "gemma4_text",
        "num_hidden_layers": 60,
        "hidden_size": 5376,
        "num_attention_heads": 32,
        "head_dim": 256,
        "global_head_dim": 512,  # the global layers' wider heads
        "sliding_window": 1024,
        "layer_types": _GEMMA4_31B_TYPES,
        "rope_parameters": {
            "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": 0.25,
                "rope_theta": 1_000_000.0,
            },
        },
        # max_position_embeddings left out: copies of the file disagree (131072, 262144);
        # the plan does not read it
    },
    # openai/gpt-oss-120b
    "GPT-OSS 120b": {
        "model_type": "gpt_oss",
        "num_hidden_layers": 36,
        "hidden_size": 2880,
        "num_attention_heads": 64,
        "head_dim": 64,
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 18,
        "max_position_embeddings": 131072,
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
    # HuggingFaceTB/SmolLM3-3B
    "SmolLM3 3B": {
        "model_type": "smollm3",
        "num_hidden_layers": 36,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "no_rope_layers": [0 if (i + 1) % 4 == 0 else 1 for i in range(36)],  # 1: uses RoPE
        "use_sliding_window": False,
        "sliding_window": None,
        "rope_theta": 5_000_000.0,
        "rope_scaling": None,
        "max_position_embeddings": 65536,
    },
    # CohereLabs/c4ai-command-a-03-2025 (Cohere2, as Command R7B with 64 layers)
    "Command A": {
        "model_type": "cohere2",
        "num_hidden_layers": 64,
        "hidden_size": 12288,
        "num_attention_heads": 96,  # head_dim 12288 / 96 = 128
        "sliding_window": 4096,
        "sliding_window_pattern": 4,  # every 4th layer full, without rotation
        "rope_theta": 50000.0,
        # max_position_embeddings left out (not verified); the plan does not read it
    },
    # deepseek-ai/DeepSeek-V3 (MLA: rotation on qk_rope_head_dim of each head)
    "DeepSeek-V3": {
        "model_type": "deepseek_v3",
        "num_hidden_layers": 61,
        "hidden_size": 7168,
        "num_attention_heads": 128,
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_nope_head_dim": 128,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "max_position_embeddings": 163840,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "type": "yarn",
            "factor": 40.0,
            "beta_fast": 32,
            "beta_slow": 1,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "original_max_position_embeddings": 4096,
        },
    },
    # Qwen/Qwen3-Next-80B-A3B-Instruct (revision 9c7f2fbe; the file gives no layer_types)
    "Qwen3-Next 80B-A3B": {
        "model_type": "qwen3_next",
        "num_hidden_layers": 48,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "head_dim": 256,
        "full_attention_interval": 4,  # 3 linear (Gated DeltaNet) layers, then 1 full
        "partial_rotary_factor": 0.25,
        "rope_theta": 10_000_000.0,
        "max_position_embeddings": 262144,
    },
    # allenai/Olmo-3-1025-7B
    "OLMo 3 7B": {
        "model_type": "olmo3",
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "sliding_window": 4096,
        "layer_types": (["sliding_attention"] * 3 + ["full_attention"]) * 8,
        "max_position_embeddings": 65536,  # not verified
        "rope_theta": 500000.0,
        "rope_scaling": {  # on the full layers only
            "rope_type": "yarn",
            "factor": 8.0,
            "original_max_position_embeddings": 8192,
            "attention_factor": 1.2079441541679836,  # 0.1 ln 8 + 1
            "beta_fast": 32.0,
            "beta_slow": 1.0,
        },
    },
}
"""Display name -> the config.json keys of that model that place positions, as a plain dict
for :func:`~posenc_core.rope.layer_plan` (no network). Llama 4 Scout, Gemma 3 27B, Gemma 4
31B, GPT-OSS 120b, SmolLM3 3B, Command A (Cohere2), DeepSeek-V3, Qwen3-Next 80B-A3B and
OLMo 3 7B; each entry's Hugging Face id is a comment in the source. Treat as read-only:
copy an entry (``dict(REAL_CONFIGS[name])``) before changing it."""
