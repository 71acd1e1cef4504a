"""Tiny Hugging Face models and the batch they are compared on, shared by the tests that check
posenc_core's rotation against the models' own (tests/core/test_rope_models.py) and the book's
cross-check instrument (tests/book/test_hf_check.py).

The batch has per-row positions that are not a uniform shift (a plain row, a left-padded row, a
row of two packed documents), since RoPE scores ignore a common shift.
"""

import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, Phi3Config, Phi3ForCausalLM

from posenc_core.positions import (
    document_ids_from_lengths,
    packed_positions,
    positions_from_attention_mask,
)

VOCAB = 97


def batch(s, pad=5, first_document=None):
    """input_ids, attention_mask and position_ids (3, s): plain, left-padded by ``pad``, packed
    (documents of ``first_document``, default s // 3, and the rest)."""
    g = torch.Generator().manual_seed(s)
    input_ids = torch.randint(3, VOCAB, (3, s), generator=g)
    mask = torch.ones(3, s, dtype=torch.long)
    mask[1, :pad] = 0
    positions = positions_from_attention_mask(mask)
    first = first_document or s // 3
    positions[2] = packed_positions(document_ids_from_lengths([first, s - first]))
    return input_ids, mask, positions


def tiny_neox(hidden_size=64):
    """GPT-NeoX (Pythia's layout) with rotary_pct 0.25: 4 heads of hidden_size / 4."""
    torch.manual_seed(0)
    config = GPTNeoXConfig(
        hidden_size=hidden_size,
        num_attention_heads=4,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        rotary_pct=0.25,
        rotary_emb_base=10000,
    )
    return GPTNeoXForCausalLM(config).eval()


def tiny_phi3(partial_rotary_factor=1.0):
    """Phi-3 with LongRoPE: head_dim 16, L0 = 16 at the top level of the config (as Phi-3
    keeps it), max_position_embeddings 256, seeded short and long factors."""
    torch.manual_seed(0)
    rotary = int(16 * partial_rotary_factor)
    g = torch.Generator().manual_seed(1)
    config = Phi3Config(
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        num_hidden_layers=2,
        vocab_size=VOCAB,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        max_position_embeddings=256,
        original_max_position_embeddings=16,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "partial_rotary_factor": partial_rotary_factor,
            "short_factor": (1 + torch.rand(rotary // 2, generator=g)).tolist(),
            "long_factor": (1 + 20 * torch.rand(rotary // 2, generator=g)).tolist(),
        },
    )
    return Phi3ForCausalLM(config).eval()


def tiny_qwen2vl_text(seed=0):
    """Qwen2-VL's text model: 4 heads of 16, M-RoPE sections (2, 3, 3) pairs for (t, h, w)."""
    from transformers import Qwen2VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLTextModel

    torch.manual_seed(seed)
    config = Qwen2VLTextConfig(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=16,
        num_hidden_layers=2,
        intermediate_size=128,
        vocab_size=VOCAB,
        bos_token_id=None,
        eos_token_id=None,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
    )
    return Qwen2VLTextModel(config).eval()


# Tiny models of architectures whose layers differ (issue 36): every layer type present, eager
# attention, float32, small windows / chunks / original_max_position_embeddings so that a
# sequence of 40-48 tokens crosses them. Each takes keyword overrides of its config.


def _tiny(model_class, config):
    torch.manual_seed(0)
    return model_class(config).eval()


def _llama_like(**kw):
    """Keys every decoder-only tiny model shares: 4 heads of 16 over 2 kv heads, vocab VOCAB;
    initializer_range 0.2, so attention is far from uniform and a wrong rotation moves the
    logits (a base 1.5 times too large: by 1e-2 relative and more, where the default 0.02
    moves some of these models' logits by less than 1e-5)."""
    return {
        "initializer_range": 0.2,
        "hidden_size": 64,
        "intermediate_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": VOCAB,
        "max_position_embeddings": 256,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "attn_implementation": "eager",
        **kw,
    }


def tiny_llama4(**overrides):
    """Llama 4 text model: layers 0, 1, 3 chunked (attention_chunk_size 16) with interleaved
    llama3-scaled RoPE and qk-norm, layer 2 NoPE full attention with temperature tuning
    (floor_scale 4, attn_scale 0.5: the factor changes every 4 positions); MoE (2 experts of
    width 64) in layers 1 and 3."""
    from transformers import Llama4ForCausalLM, Llama4TextConfig

    kw = _llama_like(
        intermediate_size_mlp=128,
        num_hidden_layers=4,
        num_local_experts=2,
        num_experts_per_tok=1,
        interleave_moe_layer_step=2,
        no_rope_layers=[1, 1, 0, 1],
        attention_chunk_size=16,
        attn_temperature_tuning=True,
        floor_scale=4,
        attn_scale=0.5,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 16,
        },
    )
    kw.update(overrides)
    config = Llama4TextConfig(**kw)
    return _tiny(Llama4ForCausalLM, config)


def tiny_smollm3(**overrides):
    """SmolLM3: no_rope_layers [1, 1, 0, 1] (1 = RoPE), base 5e6; use_sliding_window with
    sliding_window 8, which SmolLM3Config gives the NoPE layer (layer 2)."""
    from transformers import SmolLM3Config, SmolLM3ForCausalLM

    kw = _llama_like(
        num_hidden_layers=4,
        no_rope_layers=[1, 1, 0, 1],
        use_sliding_window=True,
        sliding_window=8,
        rope_parameters={"rope_type": "default", "rope_theta": 5e6},
    )
    kw.update(overrides)
    return _tiny(SmolLM3ForCausalLM, SmolLM3Config(**kw))


def tiny_cohere2(**overrides):
    """Cohere2 (Command R7B): layers 0-2 sliding (window 8) with interleaved RoPE, layer 3 full
    attention without RoPE; base 50000."""
    from transformers import Cohere2Config, Cohere2ForCausalLM

    kw = _llama_like(
        num_hidden_layers=4,
        sliding_window=8,
        layer_types=["sliding_attention"] * 3 + ["full_attention"],
        rope_parameters={"rope_type": "default", "rope_theta": 50000.0},
    )
    kw.update(overrides)
    kw.pop("head_dim")  # Cohere2Config sets hidden_size // num_attention_heads
    return _tiny(Cohere2ForCausalLM, Cohere2Config(**kw))


def tiny_qwen3_next(**overrides):
    """Qwen3-Next: layers 0-2 gated DeltaNet (linear attention, no RoPE), layer 3 full
    attention with output gate, head_dim 32 and partial_rotary_factor 0.25 (8 rotated dims);
    MoE with 4 experts of width 16 (2 per token) and a shared expert."""
    from transformers import Qwen3NextConfig, Qwen3NextForCausalLM

    kw = _llama_like(
        head_dim=32,
        num_hidden_layers=4,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        linear_conv_kernel_dim=4,
        linear_key_head_dim=8,
        linear_value_head_dim=8,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        shared_expert_intermediate_size=16,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
        },
    )
    kw.update(overrides)
    config = Qwen3NextConfig(**kw)
    return _tiny(Qwen3NextForCausalLM, config)


GEMMA3_ROPE = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
}

# The same settings in the older config.json spelling (Gemma 3's checkpoints on the Hub).
GEMMA3_OLD_ROPE = {
    "rope_theta": 1e6,
    "rope_local_base_freq": 10000.0,
    "rope_scaling": {"rope_type": "linear", "factor": 8.0},
}


def tiny_gemma3(old_spelling=False, **overrides):
    """Gemma 3 text model: layers [sliding, sliding, full, sliding, sliding, full] (window 8),
    local base 10000, global base 1e6 with linear scaling factor 8 (``rope_parameters`` keyed
    by layer type, or with ``old_spelling`` the older rope_theta + rope_local_base_freq +
    rope_scaling keys, GEMMA3_OLD_ROPE)."""
    import copy  # Gemma3TextConfig updates the rope dicts it is given in place

    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    rope = copy.deepcopy(GEMMA3_OLD_ROPE if old_spelling else {"rope_parameters": GEMMA3_ROPE})
    kw = _llama_like(
        num_hidden_layers=6,
        query_pre_attn_scalar=16,
        sliding_window=8,
        layer_types=(["sliding_attention"] * 2 + ["full_attention"]) * 2,
        **rope,
    )
    kw.update(overrides)
    config = Gemma3TextConfig(**kw)
    return _tiny(Gemma3ForCausalLM, config)


def tiny_modernbert(**overrides):
    """ModernBERT (encoder, bidirectional): layers [full, sliding, sliding, full]
    (global_attn_every_n_layers 3), local_attention 16 (HF: |i - j| <= 8), global base 160000,
    local base 10000 (the older global_rope_theta / local_rope_theta keys)."""
    from transformers import ModernBertConfig, ModernBertModel

    kw = {
        "hidden_size": 64,
        "intermediate_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 4,
        "vocab_size": VOCAB,
        "max_position_embeddings": 256,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "cls_token_id": 1,
        "sep_token_id": 2,
        "initializer_range": 0.2,
        "global_attn_every_n_layers": 3,
        "local_attention": 16,
        "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0,
        "attn_implementation": "eager",
        **overrides,
    }
    return _tiny(ModernBertModel, ModernBertConfig(**kw))


def tiny_olmo3(**overrides):
    """OLMo 3: layers 0-2 sliding (window 8) with plain RoPE, layer 3 full attention with YaRN
    (factor 8, L0 16, attention_factor 1.2), base 500000 on both."""
    from transformers import Olmo3Config, Olmo3ForCausalLM

    kw = _llama_like(
        num_hidden_layers=4,
        sliding_window=8,
        max_position_embeddings=128,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0},
            "full_attention": {
                "rope_type": "yarn",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "original_max_position_embeddings": 16,
                "attention_factor": 1.2,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
            },
        },
    )
    kw.update(overrides)
    kw.pop("head_dim")
    return _tiny(Olmo3ForCausalLM, Olmo3Config(**kw))


def tiny_gpt_oss(**overrides):
    """GPT-OSS: layers [sliding, full] * 2 (window 8), learned sinks, YaRN factor 32 on L0 16
    with truncate False, base 150000; MoE with 4 experts of width 32 (2 per token)."""
    from transformers import GptOssConfig, GptOssForCausalLM

    kw = _llama_like(
        intermediate_size=32,
        num_hidden_layers=4,
        sliding_window=8,
        max_position_embeddings=512,
        num_local_experts=4,
        num_experts_per_tok=2,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 150000.0,
            "factor": 32.0,
            "original_max_position_embeddings": 16,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "truncate": False,
        },
    )
    kw.update(overrides)
    config = GptOssConfig(**kw)
    return _tiny(GptOssForCausalLM, config)


def tiny_gemma4(**overrides):
    """Gemma 4 text model: layers [sliding, sliding, full, sliding, full] (window 8); sliding:
    head_dim 16, base 10000; full: global_head_dim 32 with proportional RoPE (partial 0.25:
    the 4 highest of 16 frequencies over 32 dims), base 1e6; per-layer inputs of width 8."""
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    kw = _llama_like(
        num_hidden_layers=5,
        sliding_window=8,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"] * 1
        + ["sliding_attention", "full_attention"],
        global_head_dim=32,
        vocab_size_per_layer_input=VOCAB,
        hidden_size_per_layer_input=8,
        rope_parameters={
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {
                "rope_type": "proportional",
                "partial_rotary_factor": 0.25,
                "rope_theta": 1e6,
            },
        },
    )
    kw.update(overrides)
    config = Gemma4TextConfig(**kw)
    return _tiny(Gemma4ForCausalLM, config)


def tiny_deepseek_v3(rope_interleave=True, **overrides):
    """DeepSeek-V3 (MLA): 4 heads with qk_nope_head_dim 16 + qk_rope_head_dim 8 (one shared
    rope key head), q_lora_rank 32, kv_lora_rank 16; YaRN factor 40 on L0 16 with mscale 1.0
    and mscale_all_dim 0.707 (cos/sin scaled by mscale(1.0) / mscale(0.707), the softmax scale
    by mscale(0.707)**2); layer 0 dense, layers 1-2 MoE with 4 routed experts of width 16."""
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    kw = _llama_like(
        num_hidden_layers=3,
        num_key_value_heads=4,
        max_position_embeddings=640,
        q_lora_rank=32,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=16,
        n_routed_experts=4,
        n_shared_experts=1,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        first_k_dense_replace=1,
        moe_intermediate_size=16,
        rope_interleave=rope_interleave,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 40.0,
            "original_max_position_embeddings": 16,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 0.707,
        },
    )
    kw.update(overrides)
    kw.pop("head_dim")
    return _tiny(DeepseekV3ForCausalLM, DeepseekV3Config(**kw))


def tiny_phi4_mini(**overrides):
    """Phi-4-mini's layout: Phi3ForCausalLM, 4 heads of 16 over 2 kv heads, partial_rotary_factor
    0.75 (12 rotated dims, 6 LongRoPE factors each), L0 16 at the top level,
    max_position_embeddings 256."""
    from transformers import Phi3Config, Phi3ForCausalLM

    g = torch.Generator().manual_seed(1)
    kw = _llama_like(
        num_hidden_layers=2,
        original_max_position_embeddings=16,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.75,
            "short_factor": (1 + torch.rand(6, generator=g)).tolist(),
            "long_factor": (1 + 20 * torch.rand(6, generator=g)).tolist(),
        },
        tie_word_embeddings=True,
    )
    kw.update(overrides)
    kw.pop("head_dim")
    return _tiny(Phi3ForCausalLM, Phi3Config(**kw))


def tiny_ministral3(**overrides):
    """Ministral 3 text model: YaRN factor 16 on L0 16 (mscale 1, mscale_all_dim 1), base 1e6,
    llama_4_scaling_beta 0.1: queries scaled by 1 + 0.1 * log(1 + floor(position / 16))."""
    from transformers import Ministral3Config, Ministral3ForCausalLM

    kw = _llama_like(
        num_hidden_layers=2,
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 1e6,
            "factor": 16.0,
            "original_max_position_embeddings": 16,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
            "llama_4_scaling_beta": 0.1,
        },
    )
    kw.update(overrides)
    config = Ministral3Config(**kw)
    return _tiny(Ministral3ForCausalLM, config)
