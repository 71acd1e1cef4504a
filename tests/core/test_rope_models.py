"""Hugging Face's own model classes, run as shipped and with posenc_core doing the rotation.

Each test builds a tiny random model of a transformers 5.23 class (Llama with every rope type
it supports, Qwen2, GPT-NeoX with rotary_pct 0.25, GPT-J with rotary_dim < head_dim and its
interleaved pairs, Phi with partial_rotary_factor 0.4, Phi-3 with LongRoPE on both sides of
original_max_position_embeddings), runs it once, then patches the model so that
``RotaryEmbedding.from_config(model.config)`` rotates the queries and keys (with the
model's own position_ids) and runs it again; the logits must agree to float32 rounding.

The batch has per-row positions that are not a uniform shift of each other (RoPE scores
ignore a constant offset, so a shift alone would not test anything): row 0 plain, row 1
left-padded (positions from its attention mask), row 2 two packed documents (positions
restarting mid-row). ``test_positions_matter`` shows the comparison would notice wrong
positions.
"""

import pytest
import torch
from tiny_hf import VOCAB, batch, tiny_neox, tiny_phi3
from transformers import (
    GPTJConfig,
    GPTJForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    PhiConfig,
    PhiForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)
from transformers.models.gpt_neox import modeling_gpt_neox
from transformers.models.gptj import modeling_gptj
from transformers.models.llama import modeling_llama
from transformers.models.phi import modeling_phi
from transformers.models.phi3 import modeling_phi3
from transformers.models.qwen2 import modeling_qwen2

import posenc_core as pc

# float32 logits of O(1): both runs compute the same rotation up to the order of a few float32
# operations and HF's float32 angles (error < 64 * 3 * 2**-24 rad at these positions). Measured
# here in one run: at most 5.4e-7 over all these tests.
ATOL = 1e-5


def run(model, s, **kw):
    input_ids, mask, positions = batch(s, **kw)
    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=mask, position_ids=positions).logits


def rotate_in_apply(monkeypatch, model, modeling):
    """posenc_core rotates where the model calls modeling.apply_rotary_pos_emb(q, k, cos, sin)
    on whole heads (Llama, Qwen2, GPT-NeoX, Phi-3); positions: the position_ids given to the
    model's rotary embedding module."""
    rope = pc.RotaryEmbedding.from_config(model.config)
    seen = {}

    def keep_positions(module, args, kwargs):
        seen["positions"] = args[1] if len(args) > 1 else kwargs["position_ids"]

    model.base_model.rotary_emb.register_forward_pre_hook(keep_positions, with_kwargs=True)

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):  # q, k: (b, h, s, d)
        return rope(q, k, positions=seen["positions"])

    monkeypatch.setattr(modeling, "apply_rotary_pos_emb", apply_rotary_pos_emb)
    return rope


def rotate_projections(monkeypatch, model, modeling, attention_modules, head_dim, identity):
    """posenc_core rotates the outputs of q_proj and k_proj (whole heads, so its partial rotary
    is what runs), and the model's own apply_rotary_pos_emb becomes the identity (GPT-J and Phi
    slice the rotary dims before calling it)."""
    rope = pc.RotaryEmbedding.from_config(model.config)
    seen = {}

    def keep_positions(module, args, kwargs):
        seen["positions"] = kwargs["position_ids"] if "position_ids" in kwargs else args[1]

    def rotate(module, args, out):  # out: (b, s, h * d)
        b, s, _ = out.shape
        heads = out.view(b, s, -1, head_dim).transpose(1, 2)  # (b, h, s, d)
        rotated, _ = rope(heads, heads, positions=seen["positions"])
        return rotated.transpose(1, 2).reshape(b, s, -1)

    for source, attention in attention_modules:
        source.register_forward_pre_hook(keep_positions, with_kwargs=True)
        attention.q_proj.register_forward_hook(rotate)
        attention.k_proj.register_forward_hook(rotate)
    monkeypatch.setattr(modeling, "apply_rotary_pos_emb", identity)
    return rope


def tiny_llama(rope_parameters, max_position_embeddings=32):
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=256,
        num_hidden_layers=2,
        vocab_size=VOCAB,
        max_position_embeddings=max_position_embeddings,
        rope_parameters={"rope_theta": 10000.0, **rope_parameters},
    )
    return LlamaForCausalLM(config).eval()


LLAMA_ROPE = {
    "default": {"rope_type": "default"},
    "theta5e5": {"rope_type": "default", "rope_theta": 500000.0},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 2.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16,
    },
}


@pytest.mark.parametrize("name", list(LLAMA_ROPE))
def test_llama(monkeypatch, name):
    """LlamaForCausalLM with every rope type; s = 48 > max_position_embeddings = 32, so dynamic
    NTK rescales (from max(position_ids) + 1 = 48) and yarn/llama3 work beyond their L0."""
    model = tiny_llama(LLAMA_ROPE[name])
    expected = run(model, 48)
    rope = rotate_in_apply(monkeypatch, model, modeling_llama)
    assert rope.scaling.rope_type == LLAMA_ROPE[name]["rope_type"]
    torch.testing.assert_close(run(model, 48), expected, rtol=0, atol=ATOL)


def test_positions_matter(monkeypatch):
    """The comparison can fail: rotating every row by 0 .. s-1 (ignoring the position_ids) gives
    logits far from the model's own."""
    model = tiny_llama(LLAMA_ROPE["default"])
    expected = run(model, 48)
    rope = pc.RotaryEmbedding.from_config(model.config)
    monkeypatch.setattr(
        modeling_llama, "apply_rotary_pos_emb", lambda q, k, cos, sin, unsqueeze_dim=1: rope(q, k)
    )
    assert (run(model, 48) - expected).abs().max() > 1e-2


def test_qwen2(monkeypatch):
    torch.manual_seed(0)
    config = Qwen2Config(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        num_hidden_layers=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6},
    )
    model = Qwen2ForCausalLM(config).eval()
    expected = run(model, 40)
    rotate_in_apply(monkeypatch, model, modeling_qwen2)
    torch.testing.assert_close(run(model, 40), expected, rtol=0, atol=ATOL)


def test_gpt_neox_rotary_pct(monkeypatch):
    """GPT-NeoX (Pythia): rotary_pct 0.25 of head_dim 32 rotates 8 dims, frequencies over 8."""
    model = tiny_neox(hidden_size=128)
    expected = run(model, 40)
    rope = rotate_in_apply(monkeypatch, model, modeling_gpt_neox)
    assert (rope.head_dim, rope.rotary_dim) == (32, 8)
    torch.testing.assert_close(run(model, 40), expected, rtol=0, atol=ATOL)


def test_gptj_interleaved_partial(monkeypatch):
    """GPT-J: rotary_dim 8 of head_dim 32, pairs (2i, 2i+1) (rotate_every_two)."""
    torch.manual_seed(0)
    config = GPTJConfig(
        n_embd=64, n_head=2, n_layer=2, rotary_dim=8, vocab_size=VOCAB, n_positions=64
    )
    model = GPTJForCausalLM(config).eval()
    expected = run(model, 40)
    attention = [(block.attn, block.attn) for block in model.transformer.h]
    rope = rotate_projections(
        monkeypatch, model, modeling_gptj, attention, 32, lambda tensor, sin, cos: tensor
    )
    assert (rope.head_dim, rope.rotary_dim, rope.layout) == (32, 8, "interleaved")
    torch.testing.assert_close(run(model, 40), expected, rtol=0, atol=ATOL)


def test_phi_partial_rotary_factor(monkeypatch):
    """Phi: partial_rotary_factor 0.4 of head_dim 20 rotates int(20 * 0.4) = 8 dims."""
    torch.manual_seed(0)
    config = PhiConfig(
        hidden_size=80,
        num_attention_heads=4,
        intermediate_size=160,
        num_hidden_layers=2,
        vocab_size=VOCAB,
        max_position_embeddings=64,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        partial_rotary_factor=0.4,
    )
    model = PhiForCausalLM(config).eval()
    expected = run(model, 40)
    rotary = model.base_model.rotary_emb
    attention = [(rotary, layer.self_attn) for layer in model.base_model.layers]
    rope = rotate_projections(
        monkeypatch, model, modeling_phi, attention, 20, lambda q, k, cos, sin, **kw: (q, k)
    )
    assert (rope.head_dim, rope.rotary_dim) == (20, 8)
    torch.testing.assert_close(run(model, 40), expected, rtol=0, atol=ATOL)


@pytest.mark.parametrize(
    "s, partial", [(12, 1.0), (40, 1.0), (40, 0.5)], ids=["short", "long", "long-partial"]
)
def test_phi3_longrope(monkeypatch, s, partial):
    """Phi-3 LongRoPE with L0 = 16 at the top level of the config (as Phi-3 keeps it) and factor
    from max_position_embeddings / L0 = 16: s = 12 uses short_factor, s = 40 (max(position_ids)
    + 1 = 40 > 16) long_factor; the attention factor sqrt(1 + ln 16 / ln 16) scales cos/sin."""
    model = tiny_phi3(partial)
    expected = run(model, s, pad=3, first_document=5)
    rope = rotate_in_apply(monkeypatch, model, modeling_phi3)
    assert rope.scaling.attention_scaling == pytest.approx(2**0.5, rel=1e-15)
    torch.testing.assert_close(run(model, s, pad=3, first_document=5), expected, rtol=0, atol=ATOL)


def test_phi3_long_and_short_factors_differ(monkeypatch):
    """The two LongRoPE branches give different logits here, so test_phi3_longrope's two cases
    check different tables: swapping the factor lists changes the output at s = 40."""
    model = tiny_phi3()
    expected = run(model, 40, pad=3, first_document=5)
    params = dict(model.config.rope_parameters)
    params["short_factor"], params["long_factor"] = params["long_factor"], params["short_factor"]
    swapped = pc.RotaryEmbedding.from_config({**model.config.to_dict(), "rope_parameters": params})
    rope = rotate_in_apply(monkeypatch, model, modeling_phi3)
    monkeypatch.setattr(rope, "forward", swapped.forward)
    assert (run(model, 40, pad=3, first_document=5) - expected).abs().max() > 1e-3
