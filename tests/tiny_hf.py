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
