"""RotaryEmbedding: partial rotary, positions of every form, and the length-dependent types
(dynamic NTK, LongRoPE) stated per call, against Hugging Face's LlamaRotaryEmbedding and
apply_rotary_pos_emb (transformers 5.23) and against the module's own full-width rotation.
"""

import math

import pytest
import torch
from transformers import LlamaConfig, Phi3Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_apply
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

import posenc_core as pc

F64 = torch.float64


def randn(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=F64).to(dtype)


# --------------------------------------------------------------------------- partial rotary


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("rotary_dim", [2, 8, 16])
def test_partial_rotates_the_first_dims_with_their_own_frequencies(layout, rotary_dim):
    """rotary_dim r: dims r.. pass through bit for bit, and dims ..r are what a full-width
    RotaryEmbedding(r) gives (frequencies base**(-2i/r), pairs by layout within them)."""
    q, k = randn(2, 3, 7, 16, seed=1), randn(2, 3, 7, 16, seed=2)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5, 6], [9, 3, 0, 1, 2, 40, 41]])
    rq, rk = pc.RotaryEmbedding(16, rotary_dim=rotary_dim, layout=layout)(q, k, positions)
    fq, fk = pc.RotaryEmbedding(rotary_dim, layout=layout)(
        q[..., :rotary_dim], k[..., :rotary_dim], positions
    )
    assert torch.equal(rq[..., rotary_dim:], q[..., rotary_dim:])
    assert torch.equal(rk[..., rotary_dim:], k[..., rotary_dim:])
    assert torch.equal(rq[..., :rotary_dim], fq) and torch.equal(rk[..., :rotary_dim], fk)


def test_partial_matches_hf_gpt_neox_apply_rotary_pos_emb():
    """Tables of width r from ROPE_INIT_FUNCTIONS' partial_rotary_factor frequencies, applied
    by GPT-NeoX's apply_rotary_pos_emb (which rotates the first cos.shape[-1] dims)."""
    config = LlamaConfig(
        hidden_size=128,
        num_attention_heads=4,
        head_dim=32,
        rope_parameters={
            "rope_type": "linear",
            "factor": 2.0,
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
        },
    )
    inv_freq, _ = ROPE_INIT_FUNCTIONS["linear"](config, "cpu")
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [7, 8, 0, 1, 2, 3]])
    freqs = positions[..., None].float() * inv_freq  # (b, s, r/2)
    cos, sin = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
    q, k = randn(2, 4, 6, 32, seed=3), randn(2, 4, 6, 32, seed=4)
    hq, hk = neox_apply(q, k, cos, sin)
    rope = pc.RotaryEmbedding.from_config(config)
    assert rope.rotary_dim == 8
    rq, rk = rope(q, k, positions)
    torch.testing.assert_close(rq, hq, rtol=0, atol=1e-6)
    torch.testing.assert_close(rk, hk, rtol=0, atol=1e-6)


def test_repr_shows_rotary_dim():
    text = repr(pc.RotaryEmbedding(64, rotary_dim=16))
    assert "head_dim=64" in text and "rotary_dim=16" in text


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"rotary_dim": 5}, ValueError, r"rotary_dim.*even.*5"),
        ({"rotary_dim": 0}, ValueError, r"rotary_dim.*2\.\.16.*0"),
        ({"rotary_dim": 18}, ValueError, r"rotary_dim.*2\.\.16.*18"),
        ({"rotary_dim": 8.0}, TypeError, r"rotary_dim.*float"),
        ({"rotary_dim": True}, TypeError, r"rotary_dim.*bool"),
    ],
)
def test_bad_rotary_dim(kwargs, error, match):
    with pytest.raises(error, match=match):
        pc.RotaryEmbedding(16, **kwargs)


# --------------------------------------------------------------------------- positions


def test_every_positions_form_is_the_same_rotation():
    """None, an int offset, (s,) and (b, s) give the rotation of the positions they name."""
    rope = pc.RotaryEmbedding(8)
    q = randn(2, 3, 5, 8, seed=5)
    by_table = {}
    for name, positions in {
        "none": None,
        "offset": 4,
        "vector": torch.tensor([4, 5, 6, 7, 8]),
        "float vector": torch.tensor([4.0, 5.0, 6.0, 7.0, 8.0]),
        "rows": torch.tensor([[0, 1, 2, 3, 4], [4, 5, 6, 7, 8]]),
    }.items():
        by_table[name] = rope(q, q, positions)[0]
    cos, sin = pc.rope_cos_sin(torch.arange(9), 8)
    assert torch.equal(by_table["none"], pc.apply_rope(q, cos[:5], sin[:5]))
    assert torch.equal(by_table["offset"], pc.apply_rope(q, cos[4:], sin[4:]))
    assert torch.equal(by_table["vector"], by_table["offset"])
    torch.testing.assert_close(by_table["float vector"], by_table["offset"], rtol=0, atol=1e-6)
    assert torch.equal(by_table["rows"][0], by_table["none"][0])
    assert torch.equal(by_table["rows"][1], by_table["offset"][1])


def test_rows_positions_with_three_dim_inputs():
    """(b, s) positions with q of shape (b, s, d): one row of positions per batch element."""
    rope = pc.RotaryEmbedding(8)
    q = randn(2, 4, 8, seed=6)
    positions = torch.tensor([[0, 1, 2, 3], [3, 0, 1, 2]])
    got, _ = rope(q, q, positions)
    for row in range(2):
        expected, _ = rope(q[row], q[row], positions[row])
        assert torch.equal(got[row], expected)


_Q = torch.zeros(2, 3, 4, 8)


@pytest.mark.parametrize(
    "positions, error, match",
    [
        (torch.tensor([True, False, True, True]), TypeError, r"positions.*torch\.bool"),
        (torch.zeros(4, dtype=torch.complex64), TypeError, r"positions.*complex64"),
        (torch.tensor([0.0, float("nan"), 1.0, 2.0]), ValueError, r"positions.*finite.*nan"),
        (torch.arange(5), ValueError, r"positions.*\(s,\) or \(b, s\).*s=4.*\(5,\)"),
        (torch.zeros(2, 2, 4), ValueError, r"positions.*\(2, 2, 4\)"),
        (torch.zeros(3, 4), ValueError, r"3 sequences.*batch size 2"),
        (-1, ValueError, r"offset.*non-negative.*-1"),
        # arange(offset, offset + s) would overflow int64 inside torch
        (2**63 - 1, ValueError, r"offset.*offset \+ s - 1 <= 2\*\*53.*9223372036854775807.*s = 4"),
        (2**53 - 2, ValueError, r"offset.*2\*\*53.*9007199254740990"),
        (torch.tensor([0, 1, 2**53 + 1, 3]), ValueError, r"positions.*2\*\*53.*9007199254740993"),
        (1.5, TypeError, r"positions must be a torch.Tensor"),
        ([0, 1, 2, 3], TypeError, r"positions must be a torch.Tensor"),
    ],
    ids=[
        "bool", "complex", "nan", "length", "3-d", "batch", "negative", "int64-max",
        "past-2**53", "tensor-past-2**53", "float", "list",
    ],
)  # fmt: skip
def test_bad_positions(positions, error, match):
    with pytest.raises(error, match=match):
        pc.RotaryEmbedding(8)(_Q, _Q, positions)


def test_the_largest_exact_offset_is_accepted_and_exact():
    """The last position offset + s - 1 = 2**53 is still an exact float64 integer: accepted, and
    its rows equal those of rope_cos_sin at the same positions."""
    q = torch.randn(1, 1, 4, 8, dtype=torch.float64)
    offset = 2**53 - 3
    got, _ = pc.RotaryEmbedding(8)(q, q, offset)
    cos, sin = pc.rope_cos_sin(torch.arange(offset, offset + 4), 8, dtype=torch.float64)
    assert torch.equal(got, pc.apply_rope(q, cos, sin))


# --------------------------------------------------------------------------- dynamic NTK per call


def llama_config(rope_parameters, max_position_embeddings):
    return LlamaConfig(
        hidden_size=64,
        num_attention_heads=2,
        head_dim=32,
        max_position_embeddings=max_position_embeddings,
        rope_parameters={"rope_theta": 10000.0, **rope_parameters},
    )


def hf_tables(module, positions):
    cos, sin = module(torch.zeros(1), positions[None])
    return cos[0].double(), sin[0].double()


DYNAMIC = {"rope_type": "dynamic", "factor": 4.0}


def test_dynamic_uses_max_position_plus_one_of_the_call():
    """A call's length is max(positions) + 1 (at least L0): positions 0..9 and [0, 1, 2999]
    with L0 = 512 give plain RoPE and the base for length 3000, as HF's module does for that
    one call."""
    config = llama_config(DYNAMIC, 512)
    rope = pc.RotaryEmbedding.from_config(config)
    q = torch.ones(1, 1, 3, 32, dtype=F64)
    for positions, length in ((torch.tensor([0, 1, 9]), 512), (torch.tensor([0, 1, 2999]), 3000)):
        got, _ = rope(q, q, positions)
        scaling = {**DYNAMIC, "original_max_position_embeddings": 512}
        cos, sin = pc.rope_cos_sin(positions, 32, scaling=scaling, seq_len=length, dtype=F64)
        assert torch.equal(got, pc.apply_rope(q, cos, sin))
        hcos, _ = hf_tables(LlamaRotaryEmbedding(config), positions)
        torch.testing.assert_close(cos, hcos, rtol=0, atol=1e-3)  # HF: float32 angles < 3000


def test_hf_issue_25306_a_long_prompt_changes_a_later_shorter_one():
    """transformers issue 25306, as it stands in 5.23: LlamaRotaryEmbedding keeps the
    frequencies of the longest call so far (``dynamic_frequency_update`` grows them when
    max(position_ids) + 1 exceeds max_seq_len_cached, and resets them only when a call is
    shorter than max_position_embeddings). So a prompt of length 1000 (>= L0 = 512) after
    one of 3000 gets the base for 3000; after a reset (a call shorter than 512) or on a
    fresh module it gets the base for 1000. posenc_core's module gives the same tables for
    the same call whatever came before."""
    config = llama_config(DYNAMIC, 512)
    short = torch.arange(1000)
    fresh_cos, _ = hf_tables(LlamaRotaryEmbedding(config), short)
    hf = LlamaRotaryEmbedding(config)
    hf_tables(hf, torch.arange(3000))  # a long prompt first
    after_long, _ = hf_tables(hf, short)
    assert (after_long - fresh_cos).abs().max() > 0.1  # the pitfall: history changed it
    hf_tables(hf, torch.arange(100))  # shorter than L0: HF resets to the original frequencies
    after_reset, _ = hf_tables(hf, short)
    torch.testing.assert_close(after_reset, fresh_cos, rtol=0, atol=0)

    rope = pc.RotaryEmbedding.from_config(config)
    q = randn(1, 1, 1000, 32, seed=7, dtype=F64)
    fresh, _ = rope(q, q, short)
    rope(randn(1, 1, 3000, 32, dtype=F64), randn(1, 1, 3000, 32, dtype=F64))  # long first
    again, _ = rope(q, q, short)
    assert torch.equal(again, fresh)
    cos, sin = pc.rope_cos_sin(
        short, 32, scaling={**DYNAMIC, "original_max_position_embeddings": 512}, dtype=F64
    )
    torch.testing.assert_close(cos, fresh_cos, rtol=0, atol=1e-3)  # both: the base for 1000


def test_cached_keys_keep_the_base_they_were_rotated_with():
    """Decoding past L0 one token at a time: each step's key uses the base of its own call, so
    a key cached at step m differs from the same key rotated in one call over the whole
    sequence (the KV-cache pitfall, issue 25104); positions <= L0 are unaffected."""
    l0 = 8
    rope = pc.RotaryEmbedding(16, scaling={**DYNAMIC, "original_max_position_embeddings": l0})
    k = randn(1, 1, 20, 16, seed=8, dtype=F64)
    _, whole = rope(k, k)  # one call: base for length 20
    steps = torch.cat(
        [rope(k[..., m : m + 1, :], k[..., m : m + 1, :], m)[1] for m in range(20)], -2
    )
    plain, _ = pc.RotaryEmbedding(16)(k, k)
    assert torch.equal(steps[..., :l0, :], plain[..., :l0, :])  # <= L0: plain RoPE
    assert (steps[..., l0:-1, :] - whole[..., l0:-1, :]).abs().max() > 1e-3
    assert torch.equal(steps[..., -1, :], whole[..., -1, :])  # the last step has length 20


# --------------------------------------------------------------------------- LongRoPE per call


def phi3_config():
    g = torch.Generator().manual_seed(9)
    return Phi3Config(
        hidden_size=64,
        num_attention_heads=4,
        max_position_embeddings=256,
        original_max_position_embeddings=16,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 10000.0,
            "short_factor": (1 + torch.rand(8, generator=g)).tolist(),
            "long_factor": (1 + 10 * torch.rand(8, generator=g)).tolist(),
        },
    )


@pytest.mark.parametrize("last", [15, 16, 17, 40])
def test_longrope_picks_long_factor_when_max_position_plus_one_exceeds_l0(last):
    """L = max(positions) + 1: short_factor for L <= L0 = 16, long_factor for L > 16; HF's
    frequencies for that length (``_compute_longrope_parameters`` with seq_len = L)."""
    config = phi3_config()
    rope = pc.RotaryEmbedding.from_config(config)
    positions = torch.tensor([0, 3, last])
    q = torch.ones(1, 1, 3, 16, dtype=F64)
    got, _ = rope(q, q, positions)
    inv_freq, attention = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu", seq_len=last + 1)
    angles = positions[:, None].double() * inv_freq.double()
    cos = torch.cat((angles.cos(), angles.cos()), -1) * attention
    sin = torch.cat((angles.sin(), angles.sin()), -1) * attention
    torch.testing.assert_close(got, pc.apply_rope(q, cos, sin), rtol=1e-6, atol=1e-6)
    name = "long_factor" if last + 1 > 16 else "short_factor"
    expected = pc.rope_frequencies(16) / torch.tensor(config.rope_parameters[name], dtype=F64)
    seq_len = last + 1
    torch.testing.assert_close(
        pc.rope_frequencies(16, scaling=rope.scaling, seq_len=seq_len), expected, rtol=1e-15, atol=0
    )


def test_longrope_attention_factor():
    """sqrt(1 + ln(s) / ln(L0)) with s = max_position_embeddings / L0 when factor is absent (Phi-3)
    or the given factor; 1 for s = 1; an explicit attention_factor wins. Evaluated with math and
    against HF's _compute_longrope_parameters."""
    config = phi3_config()
    _, hf_attention = ROPE_INIT_FUNCTIONS["longrope"](config, "cpu")
    rope = pc.RotaryEmbedding.from_config(config)
    expected = math.sqrt(1 + math.log(256 / 16) / math.log(16))
    assert rope.scaling.attention_scaling == pytest.approx(expected, rel=1e-15)
    assert hf_attention == pytest.approx(expected, rel=1e-15)
    lists = {"short_factor": [1.0] * 4, "long_factor": [2.0] * 4}
    base = {"rope_type": "longrope", "original_max_position_embeddings": 4096, **lists}
    assert pc.rope.rope_attention_factor({**base, "factor": 32.0}) == pytest.approx(
        math.sqrt(1 + math.log(32) / math.log(4096)), rel=1e-15
    )
    assert pc.rope.rope_attention_factor({**base, "factor": 1.0}) == 1.0
    assert pc.rope.rope_attention_factor({**base, "factor": 32.0, "attention_factor": 1.5}) == 1.5


LONG = {
    "rope_type": "longrope",
    "original_max_position_embeddings": 16,
    "factor": 4.0,
    "short_factor": [1.0, 1.0],
    "long_factor": [2.0, 3.0],
}


@pytest.mark.parametrize(
    "scaling, error, match",
    [
        (
            {**LONG, "short_factor": [1.0, 1.0, 1.0]},
            ValueError,
            r"short_factor.*long_factor.*3 and 2",
        ),
        ({**LONG, "long_factor": [2.0, 0.0]}, ValueError, r"long_factor.*> 0.*\[1\]=0\.0"),
        ({**LONG, "long_factor": "2, 3"}, TypeError, r"long_factor.*list or tuple.*str"),
        ({**LONG, "long_factor": [2.0, "3"]}, TypeError, r"long_factor'\]\[1\].*real number"),
        ({**LONG, "short_factor": []}, ValueError, r"short_factor.*one positive number"),
        ({k: v for k, v in LONG.items() if k != "factor"}, ValueError, r"'factor' or 'attention"),
        (
            {k: v for k, v in LONG.items() if k != "long_factor"},
            ValueError,
            r"needs the key 'long_",
        ),
        ({**LONG, "rope_type": "su"}, ValueError, r"'su'.*old name.*'longrope'"),
    ],
    ids=["lengths", "zero", "string", "element", "empty", "no factor", "no long", "su"],
)
def test_bad_longrope(scaling, error, match):
    with pytest.raises(error, match=match):
        pc.RotaryEmbedding(4, scaling=scaling)


def test_longrope_factor_count_must_be_rotary_dim_over_two():
    with pytest.raises(ValueError, match=r"short_factor.*rotary_dim // 2 = 4.*got 2"):
        pc.RotaryEmbedding(16, rotary_dim=8, scaling=LONG)
    assert pc.RotaryEmbedding(16, rotary_dim=4, scaling=LONG).rotary_dim == 4
