"""max_logit_difference: Hugging Face's own models, as shipped and with posenc_core's rotation.

The reference is transformers 5.23's GPTNeoXForCausalLM and Phi3ForCausalLM; the batch has
per-row positions that are not a uniform shift (a plain row, a left-padded row, a row of two
packed documents), since RoPE scores ignore a common shift.
"""

import pytest
import torch
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM, Phi3Config, Phi3ForCausalLM
from transformers.models.gpt_neox import modeling_gpt_neox
from transformers.models.phi3 import modeling_phi3

import posenc_core as pc
from posenc_core.book.instruments.hf_check import max_logit_difference
from posenc_core.positions import (
    document_ids_from_lengths,
    packed_positions,
    positions_from_attention_mask,
)

VOCAB = 97
ATOL = 1e-5  # float32 logits; HF's float32 angles versus our float64 ones at positions < 40


def batch(s):
    g = torch.Generator().manual_seed(s)
    input_ids = torch.randint(3, VOCAB, (3, s), generator=g)
    mask = torch.ones(3, s, dtype=torch.long)
    mask[1, :3] = 0
    positions = positions_from_attention_mask(mask)
    positions[2] = packed_positions(document_ids_from_lengths([5, s - 5]))
    return input_ids, mask, positions


def tiny_neox():
    torch.manual_seed(0)
    config = GPTNeoXConfig(
        hidden_size=64,
        num_attention_heads=4,
        intermediate_size=128,
        num_hidden_layers=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        rotary_pct=0.25,
        rotary_emb_base=10000,
    )
    return GPTNeoXForCausalLM(config).eval()


def test_gpt_neox_partial_rotary_agrees_and_is_restored():
    model = tiny_neox()
    shipped = modeling_gpt_neox.apply_rotary_pos_emb
    assert max_logit_difference(model, modeling_gpt_neox, *batch(24)) < ATOL
    assert modeling_gpt_neox.apply_rotary_pos_emb is shipped
    assert not model.base_model.rotary_emb._forward_pre_hooks


@pytest.mark.parametrize("s", [12, 40], ids=["short-factors", "long-factors"])
def test_phi3_longrope_agrees_on_both_sides_of_l0(s):
    torch.manual_seed(0)
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
            "factor": 16.0,
            "short_factor": (1 + torch.rand(8, generator=g)).tolist(),
            "long_factor": (1 + 20 * torch.rand(8, generator=g)).tolist(),
        },
    )
    model = Phi3ForCausalLM(config).eval()
    assert max_logit_difference(model, modeling_phi3, *batch(s)) < ATOL


def test_a_wrong_rotation_is_noticed():
    """The comparison can fail: rotating the whole head (rotary_dim 16 instead of 4) or
    ignoring the config's layout gives logits far from the model's own."""
    model = tiny_neox()
    for wrong in (
        pc.RotaryEmbedding(16),
        pc.RotaryEmbedding(16, rotary_dim=4, layout="interleaved"),
    ):
        assert max_logit_difference(model, modeling_gpt_neox, *batch(24), rope=wrong) > 100 * ATOL


def test_bad_arguments_name_the_argument():
    model = tiny_neox()
    with pytest.raises(TypeError, match="model must be"):
        max_logit_difference(object(), modeling_gpt_neox, *batch(12))
    with pytest.raises(TypeError, match="modeling must be"):
        max_logit_difference(model, object(), *batch(12))
    with pytest.raises(TypeError, match="rope must be"):
        max_logit_difference(model, modeling_gpt_neox, *batch(12), rope={"head_dim": 16})
