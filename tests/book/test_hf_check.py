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


def test_mrope_decoding_needs_the_deltas_and_the_text_model_alone_drops_them():
    """Qwen2-VL after an image: decode ids are cache length + rope_deltas on every axis
    (transformers' compute_3d_position_ids); without the deltas, or with another prompt's,
    the decoded tokens differ from the full pass, and the text model's own default (no ids)
    is the cache length, the deltas dropped."""
    import torch
    from transformers.cache_utils import DynamicCache

    from posenc_core.book.instruments.hf_check import mrope_decode_gap
    from posenc_core.multi_axis import mrope_position_ids

    prompt = [("text", 4), ("image", (1, 4, 6)), ("text", 6)]
    ids = mrope_position_ids([*prompt[:-1], ("text", 16)])[:, None]  # (3, 1, s): 10 decoded
    n = mrope_position_ids(prompt).shape[1]
    delta = int(ids[..., :n].max()) + 1 - n  # Qwen2-VL's rope_deltas: max + 1 - length
    assert delta == -18  # 24 image tokens advance the ids by max(1, 4, 6) = 6
    model = tiny_hf.tiny_qwen2vl_text()
    tokens = torch.randint(
        3, tiny_hf.VOCAB, (1, ids.shape[-1]), generator=torch.Generator().manual_seed(0)
    )

    def gap(rule):
        return mrope_decode_gap(model, lambda: DynamicCache(config=model.config), tokens, ids,
                                n, rule)  # fmt: skip

    right = gap(lambda c: torch.full((3, 1, 1), c + delta))
    dropped = gap(lambda c: torch.full((3, 1, 1), c))
    default = gap(lambda c: None)
    assert right.max() < 1e-5
    assert dropped.min() > 100 * 1e-5 and torch.equal(default, dropped)
    with pytest.raises(ValueError, match="position_ids must have shape"):
        mrope_decode_gap(model, DynamicCache, tokens, ids[0], n, lambda c: None)


def test_phi3_forward_keeps_stale_keys_and_generate_recomputes_them():
    """Past L0 LongRoPE switches to the long factors; a decode loop over forward() keeps keys
    rotated with the short ones, and generate() drops the cache at the crossover (PR 33129)."""
    import torch
    from transformers.cache_utils import DynamicCache

    model, s, prompt = tiny_phi3(), 30, 10  # L0 = 16
    tokens = torch.randint(3, tiny_hf.VOCAB, (1, s), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = torch.stack([model(tokens[:, : t + 1]).logits[0, t] for t in range(s)])
        cache = DynamicCache(config=model.config)
        out = [model(tokens[:, :prompt], past_key_values=cache, use_cache=True).logits[0]]
        for t in range(prompt, s):
            out.append(model(tokens[:, t : t + 1], past_key_values=cache).logits[0])
        gap = (torch.cat(out) - ref).abs().amax(-1)
        assert gap[:16].max() < 1e-5 and gap[16:].min() > 1e-4
        kept = model.generate(tokens[:, :prompt], max_new_tokens=20, do_sample=False)
        fresh = model.generate(tokens[:, :prompt], max_new_tokens=20, do_sample=False,
                               use_cache=False)  # fmt: skip
    assert torch.equal(kept, fresh)
