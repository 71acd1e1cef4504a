"""max_logit_difference: Hugging Face's own models, as shipped and with posenc_core's rotation.

The reference is transformers 5.23's GPTNeoXForCausalLM and Phi3ForCausalLM; the batch has
per-row positions that are not a uniform shift (a plain row, a left-padded row, a row of two
packed documents), since RoPE scores ignore a common shift.
"""

import pytest
import tiny_hf
from tiny_hf import tiny_neox, tiny_phi3
from transformers.models.gpt_neox import modeling_gpt_neox
from transformers.models.phi3 import modeling_phi3

import posenc_core as pc
from posenc_core.book.instruments.hf_check import max_logit_difference

ATOL = 1e-5  # float32 logits; HF's float32 angles versus our float64 ones at positions < 40


def batch(s):
    return tiny_hf.batch(s, pad=3, first_document=5)


def test_gpt_neox_partial_rotary_agrees_and_is_restored():
    model = tiny_neox()
    shipped = modeling_gpt_neox.apply_rotary_pos_emb
    assert max_logit_difference(model, modeling_gpt_neox, *batch(24)) < ATOL
    assert modeling_gpt_neox.apply_rotary_pos_emb is shipped
    assert not model.base_model.rotary_emb._forward_pre_hooks


@pytest.mark.parametrize("s", [12, 40], ids=["short-factors", "long-factors"])
def test_phi3_longrope_agrees_on_both_sides_of_l0(s):
    model = tiny_phi3()
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
