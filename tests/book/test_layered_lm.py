"""The layered byte model: each layout's layers do what its plan says, checked by behaviour against
facts written here (window, rotation, frequencies, query temperature, sinks), and each mixed-layout
bug is named by the layer check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from posenc_core.book.instruments.layer_check import differences, observe
from posenc_core.book.models.byte_lm import ByteLM
from posenc_core.book.models.layered_lm import LayeredLM
from posenc_core.book.studies import mixing_study as ms
from posenc_core.rope import layer_plan

C = ms.MixingConfig()
W, S, D_H = 16, 96, 16  # the window (L / 4), the probed length, the head width


def ones_profile(freqs: list[float], s: int = S) -> np.ndarray:
    """Score of an all-ones query at distance i and key at 0 over the head width: the mean of
    cos(i * theta) over the head's pairs (unrotated pairs count as theta = 0)."""
    i = np.arange(s)[:, None]
    return np.cos(i * np.array(freqs)[None, :]).mean(axis=1)


def freqs(base: float, rotated_pairs: int, pairs: int = D_H // 2, width: int = D_H) -> list[float]:
    return [base ** (-2 * j / width) if j < rotated_pairs else 0.0 for j in range(pairs)]


LOCAL, FULL = W, S
FACTS = {  # layout -> per layer (reach, rotates, frequencies or None), from the configs' meaning
    "rope": [(FULL, True, freqs(1e4, 8))] * 4,
    "olmo3": [(LOCAL, True, freqs(1e4, 8))] * 3 + [(FULL, True, freqs(1e4, 8))],
    "cohere2": [(LOCAL, True, freqs(1e4, 8))] * 3 + [(FULL, False, None)],
    "llama4": [(LOCAL, True, freqs(1e4, 8))] * 3 + [(FULL, False, None)],
    "gemma3": [(LOCAL, True, freqs(1e4, 8))] * 3 + [(FULL, True, freqs(1e6, 8))],
    "gemma4": [(LOCAL, True, freqs(1e4, 8))] * 3 + [(FULL, True, freqs(1e6, 2))],
    "gpt_oss": [(LOCAL, True, freqs(1e4, 8)), (FULL, True, freqs(1e4, 8))] * 2,
    "smollm3": [(FULL, True, freqs(1e4, 8))] * 3 + [(FULL, False, None)],
}


@pytest.fixture(scope="module")
def observed():
    return {name: observe(ms.build_layered(name, C, 0).eval()) for name in ms.LAYOUTS}


@pytest.mark.parametrize("name", list(ms.LAYOUTS))
def test_each_layout_attends_and_rotates_as_its_architecture_does(observed, name):
    for obs, (reach, rotates, theta) in zip(observed[name], FACTS[name], strict=True):
        assert obs.reach == reach, (name, obs.layer)
        assert obs.rotates == rotates, (name, obs.layer)
        expected = np.ones(S) if theta is None else ones_profile(theta)
        np.testing.assert_allclose(obs.profile, expected, atol=1e-5, err_msg=f"{name} {obs.layer}")
        assert obs.sinks == (name == "gpt_oss")


def test_llama4_scales_the_global_queries_by_its_temperature(observed):
    """Llama 4: 1 + attn_scale * ln(1 + floor((i + 1) / floor_scale)), floor_scale = L here."""
    expected = [1 + 0.1 * math.log1p((i + 1) // C.train_len) for i in range(S)]
    *local, last = observed["llama4"]
    np.testing.assert_allclose(last.query_scale, expected, rtol=1e-6)
    assert expected[-1] > 1.05  # the probe reaches past one step of the floor
    for obs in local + observed["cohere2"]:
        np.testing.assert_allclose(obs.query_scale, 1.0, rtol=1e-6)


def test_all_rope_plan_is_the_rope_byte_model():
    torch.manual_seed(0)
    ref = ByteLM("rope", n_layers=4).eval()
    model = LayeredLM(ms.layout_plan("rope")).eval()
    model.load_state_dict(ref.state_dict())
    x = torch.randint(0, 256, (2, 80), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref(x), rtol=0, atol=0)


def test_attention_weights_follow_the_window_and_the_sinks():
    model = ms.build_layered("gpt_oss", C, 0).eval()
    x = torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(2))
    weights = model.attention_weights(x)
    i, j = torch.meshgrid(torch.arange(40), torch.arange(40), indexing="ij")
    outside = (i - j >= W) | (j > i)
    assert weights[0][..., outside].abs().max() == 0  # sliding layer
    assert weights[1][..., j > i].abs().max() == 0  # full layer: causal only
    assert (weights[1][..., i - j >= W] > 0).any()
    assert (weights[1].sum(-1) < 1).all()  # sinks take a share of every row


EXPECTED_FINDINGS = {  # bug -> the lines of the layer check, from what the bug does
    "global-rotated": ["layer 3: rotates (expected: no rotation)"],
    "local-base-global": ["layer 3: rotates at other frequencies than expected"],
    "window-dropped": [f"layer {i}: reaches {S} keys back (expected: {W})" for i in range(3)],
    "temperature-everywhere": [
        f"layer {i}: query scale {1 + 0.1 * math.log1p(S // C.train_len):.3f} at the last "
        "position (expected: 1.000)"
        for i in range(3)
    ],
    "no-rope-inverted": [f"layer {i}: no rotation (expected: rotates)" for i in range(3)]
    + ["layer 3: rotates (expected: no rotation)"],
}


@pytest.mark.parametrize("bug", list(ms.BUGS))
def test_the_layer_check_names_every_mixed_layout_bug(bug):
    spec = ms.BUGS[bug]
    model = ms.build_layered(spec.layout, C, 0).eval()
    broken = model.with_plan(spec.plan(C))
    assert differences(observe(broken), observe(model)) == EXPECTED_FINDINGS[bug]
    assert differences(observe(model), observe(model)) == []


def test_bad_plans_are_refused_with_the_reason():
    plan = ms.layout_plan("cohere2")
    with pytest.raises(TypeError, match="plan must be a non-empty sequence"):
        LayeredLM("cohere2")
    with pytest.raises(TypeError, match=r"plan\[0\] must be a LayerPlan"):
        LayeredLM([1, 2])
    with pytest.raises(ValueError, match="heads of width 16.*width 8"):
        LayeredLM(plan, d_model=64, n_heads=8)
    cfg = {"model_type": "qwen3_next", "num_hidden_layers": 4, "hidden_size": 64,
           "num_attention_heads": 4, "head_dim": 16}  # fmt: skip
    with pytest.raises(ValueError, match="'linear' attention"):
        LayeredLM(layer_plan(cfg))
    model = LayeredLM(plan)
    with pytest.raises(ValueError, match="keep the model's 4 layers"):
        model.with_plan(plan[:3])
    with pytest.raises(ValueError, match="sink logits"):
        model.with_plan(ms.layout_plan("gpt_oss"))
    with pytest.raises(TypeError, match="model must be a LayeredLM"):
        observe(ByteLM("rope"))
    with pytest.raises(ValueError, match="observed has 4 layers, expected 3"):
        differences(observe(model), observe(model)[:3])
