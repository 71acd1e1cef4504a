"""The byte-level causal language model (posenc_core.book.models.byte_lm)."""

import pytest
import torch

from posenc_core.book.models.byte_lm import SCHEMES, ByteLM
from posenc_core.rope import RopeScaling, RotaryEmbedding


def _model(scheme, **kw):
    torch.manual_seed(0)
    return ByteLM(scheme, d_model=32, n_layers=2, n_heads=4, max_len=64, **kw).eval()


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_changing_byte_t_changes_no_logit_before_t(scheme):
    m = _model(scheme, t5_num_buckets=8, t5_max_distance=16)
    x = torch.randint(256, (2, 40), generator=torch.Generator().manual_seed(1))
    y = x.clone()
    y[:, 25] = (y[:, 25] + 7) % 256
    with torch.no_grad():
        a, b = m(x), m(y)
    torch.testing.assert_close(a[:, :25], b[:, :25], rtol=0, atol=1e-5)
    assert (a[:, 25:] - b[:, 25:]).abs().max() > 1e-3  # and it does change the later ones


def test_rope_scaling_switch():
    m = _model("rope")
    with torch.no_grad():
        for b in m.blocks:  # sharpen attention, so that positions visibly matter
            b.attn.qkv.weight.mul_(30)
    x = torch.randint(256, (2, 48), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        plain = m(x)
        m.set_rope_scaling({"rope_type": "linear", "factor": 1.0})  # PI with factor 1: no change
        torch.testing.assert_close(m(x), plain, rtol=0, atol=1e-5)
        # dynamic NTK leaves a call no longer than original_max_position_embeddings alone
        m.set_rope_scaling(
            {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 48}
        )
        torch.testing.assert_close(m(x), plain, rtol=0, atol=1e-5)
        m.set_rope_scaling(RopeScaling("linear", factor=4.0))
        scaled = m(x)
        # position 0 attends only to itself (no angle difference), every later one changes
        torch.testing.assert_close(scaled[:, 0], plain[:, 0], rtol=0, atol=1e-5)
        change = (scaled[:, 1:] - plain[:, 1:]).abs().amax(-1)  # (b, s - 1)
        assert change.min() > 1e-4 and change.max() > 1e-2
        m.set_rope_scaling(None)
        torch.testing.assert_close(m(x), plain, rtol=0, atol=1e-5)  # back, no trace left


def test_yarn_attention_factor_is_applied_once_through_the_tables():
    # YaRN = its frequencies, with cos and sin times mscale = 0.1 ln(4) + 1 (Peng et al., Eq. 22):
    # the model's rotation of a query equals the factor times the same rotation without it.
    m = _model("rope")
    yarn = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16}
    m.set_rope_scaling(yarn)
    q = torch.randn(1, 4, 20, 8, generator=torch.Generator().manual_seed(3))
    scaled, _ = m.rope(q, q)
    no_factor = RotaryEmbedding(8, scaling={**yarn, "attention_factor": 1.0})
    unscaled, _ = no_factor(q, q)
    torch.testing.assert_close(scaled, (0.1 * torch.log(torch.tensor(4.0)) + 1) * unscaled)
    assert all(b.attn.rope is m.rope for b in m.blocks)  # one module, so set once for all


def test_learned_table_starts_at_gpt2_scale_and_has_eval_rows():
    m = _model("learned")
    w = m.pos.weight
    assert w.shape == (64, 32)
    assert 0.015 < float(w.detach().std()) < 0.025  # N(0, 0.02), as GPT-2 and BERT
    assert m.embed.weight is not None and sum(p is m.embed.weight for p in m.parameters()) == 1


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="scheme"):
        ByteLM("relative")
    with pytest.raises(ValueError, match="n_heads"):
        ByteLM("rope", d_model=32, n_heads=3)
    with pytest.raises(ValueError, match="rope_scaling applies to scheme 'rope' only"):
        ByteLM("alibi", rope_scaling={"rope_type": "linear", "factor": 2.0})
    with pytest.raises(ValueError, match="set_rope_scaling needs a model with scheme 'rope'"):
        _model("none").set_rope_scaling(None)
    with pytest.raises(ValueError, match="tokens must be byte values"):
        _model("none")(torch.tensor([[0, 256]]))
    with pytest.raises(ValueError, match="int64"):
        _model("none")(torch.zeros(2, 3))


def test_xpos_scheme_is_the_core_xpos_to_float32_rounding():
    """ByteLM's xPos path (cached float32 rotation times the scale tables) computes what
    posenc_core.rope.xpos.XPosEmbedding, the float64 reference, computes."""
    from posenc_core.rope.xpos import XPosEmbedding

    torch.manual_seed(0)
    m = ByteLM("xpos", xpos_scale_base=32.0)
    q, k = torch.randn(2, 4, 300, 16), torch.randn(2, 4, 300, 16)
    for got, want in zip(m.rope(q, k), XPosEmbedding(16, scale_base=32.0)(q, k)):
        rel = (got - want).abs().amax(-1) / want.abs().amax(-1)
        assert rel.max() < 1e-6
    with pytest.raises(ValueError, match="scheme 'rope'"):
        m.set_rope_scaling({"rope_type": "linear", "factor": 2.0})
    with pytest.raises(ValueError, match="rotary_dim applies to scheme 'rope'"):
        ByteLM("xpos", rotary_dim=8)
    tokens = torch.randint(0, 256, (2, 40))
    assert m(tokens).shape == (2, 40, 256)


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_attention_weights_are_what_the_layers_attend_with(scheme):
    """Weights causal and normalised; and a pass that attends with exactly these weights (the
    spy's output, w @ v) reproduces the model's own logits, so they are the model's weights."""
    m = _model(scheme, t5_num_buckets=8, t5_max_distance=16)
    x = torch.randint(256, (2, 24), generator=torch.Generator().manual_seed(2))
    weights = m.attention_weights(x)
    assert len(weights) == 2 and weights[0].shape == (2, 4, 24, 24)
    for w in weights:
        assert torch.count_nonzero(w.triu(1)) == 0
        torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 24))
    with torch.no_grad():
        plain = m(x)
        spy = m(x, attend=lambda layer, q, k, v: weights[layer] @ v)
    torch.testing.assert_close(spy, plain, rtol=1e-4, atol=1e-4)


def test_attention_weights_of_alibi_follow_its_slopes():
    """ALiBi with every query and key zeroed: the scores are the bias alone, so each row is the
    softmax of -m_h (i - j) over j <= i, computed here from the slopes."""
    from posenc_core.alibi import alibi_slopes

    m = _model("alibi")
    with torch.no_grad():
        for b in m.blocks:
            b.attn.qkv.weight[: 2 * 32].zero_()
            b.attn.qkv.bias[: 2 * 32].zero_()
    w = m.attention_weights(torch.randint(256, (1, 10)))[0][0]  # (h, s, s)
    slopes = alibi_slopes(4).double()
    i = torch.arange(10.0, dtype=torch.float64)
    d = (i[:, None] - i[None, :]).clamp_min(0)
    expected = (-slopes[:, None, None] * d).masked_fill(d.new_ones(10, 10).triu(1).bool(), -1e300)
    torch.testing.assert_close(w.double(), expected.softmax(-1), rtol=1e-5, atol=1e-6)


def test_matched_sinusoidal_scheme_has_the_others_embeddings_and_a_table_at_002():
    import math

    from posenc_core import sinusoidal_table

    m = _model("sinusoidal-matched")
    ref = _model("none")
    assert m.embed_scale == 1.0
    torch.testing.assert_close(m.embed.weight, ref.embed.weight)  # same draw, same N(0, 0.02)
    rows = m.pos(torch.zeros(1, 64, 32))[0]  # (s, d): the table alone
    expected = sinusoidal_table(64, 32).float() * (0.02 * math.sqrt(2.0))
    torch.testing.assert_close(rows, expected)
    rms = float(rows.double().pow(2).mean().sqrt())
    assert abs(rms - 0.02) < 1e-6  # sin^2 + cos^2 = 1 per pair: mean square 1/2 before scaling
    assert sum(p.numel() for p in m.parameters()) == sum(p.numel() for p in ref.parameters())
