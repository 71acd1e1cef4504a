"""posenc_core.book.instruments.frequency_use: what a trained RoPE model does with its
frequencies."""

import numpy as np
import pytest
import torch

from posenc_core.book.instruments import bugs as dbg
from posenc_core.book.instruments import frequency_use as fu
from posenc_core.book.studies import corpus, heldout
from posenc_core.book.studies import lm_study as ls


@pytest.fixture(scope="module")
def rope():
    return ls.load_lm("rope", 0)


@pytest.fixture(scope="module")
def tokens():
    return heldout.windows(corpus.heldout_excerpt(), 64, max_windows=8)[:, :-1]


@pytest.fixture(scope="module")
def layers(rope, tokens):
    return fu.captured_attention(rope, tokens)


def test_captured_attention_is_what_the_layers_attend_with(rope, tokens, layers):
    assert len(layers) == 2
    w = layers[0]["weights"]
    assert w.shape == (8, 4, 64, 64)
    torch.testing.assert_close(w.sum(-1), torch.ones(8, 4, 64), atol=1e-5, rtol=0)
    assert torch.equal(w.triu(1), torch.zeros_like(w))  # causal
    q_rot, k_rot = rope.rope(layers[1]["q"], layers[1]["k"])
    assert torch.equal(q_rot, layers[1]["q_rot"]) and torch.equal(k_rot, layers[1]["k_rot"])


def test_pair_norms_are_the_norms_of_dims_i_and_i_plus_half(layers):
    q = layers[0]["q"][0, 2, 5].double()  # one head, one position
    one = [{"q": q.view(1, 1, 1, 16), "k": q.view(1, 1, 1, 16)}]
    expect = [float(torch.hypot(q[i], q[i + 8])) for i in range(8)]
    np.testing.assert_allclose(fu.pair_norms(one)[0, 0], expect, rtol=1e-12)
    assert fu.pair_norms(layers, "k").shape == (2, 4, 8)


def fake(weights):
    return [{"weights": weights}]


def test_positional_share_is_one_for_a_fixed_offset_and_small_for_content():
    s = 40
    prev = torch.zeros(3, 1, s, s)
    prev[:, :, torch.arange(1, s), torch.arange(s - 1)] = 1.0  # always the previous token
    prev[:, :, 0, 0] = 1.0
    share = fu.positional_share(fake(prev), range(20, 40), 16)
    assert share[0, 0] == pytest.approx(1.0)
    profile = fu.offset_profile(fake(prev), range(20, 40), 16)
    assert profile[0, 0, 1] == pytest.approx(1.0) and profile[0, 0, 0] == 0
    g = torch.Generator().manual_seed(0)
    content = torch.rand(64, 1, s, s, generator=g).tril()
    content = content / content.sum(-1, keepdim=True)  # weights that ignore the offset
    assert fu.positional_share(fake(content), range(20, 40), 16)[0, 0] < 0.05


def test_without_pairs_leaves_exactly_those_pairs_unrotated(rope, tokens):
    none = fu.without_pairs(rope, [], 64)
    with torch.no_grad():
        a = rope(tokens, rotate=none)
    assert dbg.logit_gap(a, rope(tokens)).max() < 1e-4
    x = torch.randn(1, 1, 6, 16, dtype=torch.float32)
    q, _ = fu.without_pairs(rope, [0, 7], 6)(x, x, torch.arange(6))
    for i in (0, 7):  # dims i and i + 8 untouched
        assert torch.equal(q[..., [i, i + 8]], x[..., [i, i + 8]])
    ref, _ = rope.rope(x, x)
    assert torch.allclose(q[..., 1:7], ref[..., 1:7], atol=1e-6)
    q_all, _ = fu.without_pairs(rope, range(8), 6)(x, x, torch.arange(6))
    assert torch.equal(q_all, x)


def test_bad_input_names_the_argument(rope, layers):
    with pytest.raises(ValueError, match="half-split RoPE"):
        fu.captured_attention(ls.load_lm("learned", 0), torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="got scheme 'xpos'"):  # rotates, but is not RoPE
        fu.without_pairs(ls.load_lm("xpos", 0), [0], 64)
    with pytest.raises(ValueError, match="pairs entry"):
        fu.without_pairs(rope, [8], 64)
    with pytest.raises(ValueError, match="queries must start"):
        fu.positional_share(layers, range(4, 64), 16)
    with pytest.raises(ValueError, match="which"):
        fu.pair_norms(layers, "v")
    with pytest.raises(TypeError, match="ByteLM"):
        fu.without_pairs("model", [0], 8)
