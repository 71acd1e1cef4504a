"""Per-layer positions (``layer_plan``, ``RotaryEmbedding.from_config(config, layer=i)``)
against Hugging Face's own model classes, for the architectures whose layers differ.

Each test builds a tiny random model of a transformers 5.23 class (tests/tiny_hf.py: Llama 4,
SmolLM3, Cohere2, Qwen3-Next, Gemma 3, ModernBERT, OLMo 3, GPT-OSS, Gemma 4, DeepSeek-V3,
Phi-4-mini, Ministral 3), eager attention, float32, every layer type present, windows, chunks
and original_max_position_embeddings small enough for s = 40-48 to cross them. It runs the
model as shipped, then patches the module-level function the model rotates with
(``apply_rotary_pos_emb``, Llama 4's ``apply_rotary_emb``, DeepSeek's
``apply_rotary_pos_emb_interleave``) so that in layer i ``layer_plan(config)[i].rope`` rotates
the queries and keys with the model's own position_ids and the model's rotation does not
run, and runs it again: the outputs (logits; ModernBERT's last hidden state) must agree to
1e-4 relative. Which layer is calling is set by a forward pre-hook on each decoder layer, the
positions by one on the model's rotary embedding module. The batch (tests/tiny_hf.batch) has a
plain row, a left-padded row and a row of two packed documents.

Also checked, per architecture: the layers where the shipped model calls its rotation
(recorded by a wrapper around the original function) are exactly those whose plan has a
rope; the plan's attention kind matches ``config.layer_types``, its window and causality the
mask Hugging Face builds for the layer (read from the attention modules' ``attention_mask``
on the unpadded row), its sinks the attention module's ``sinks`` parameter, its
softmax_scale the attention module's ``scaling`` (DeepSeek-V3's mscale**2; 1 elsewhere);
the temperatures of Llama 4's NoPE layers and of Ministral 3 reproduce the shipped logits
when the model's own temperature is switched off and the plan's is applied to the queries
by a hook; ``from_config`` without ``layer=`` refuses a model whose layers differ. The
``*_can_fail`` tests show that the comparisons notice a NoPE layer rotated, a wrong base on
the sliding layers, or a missing temperature.

Qwen3-Next's gated DeltaNet layers run on CPU with transformers' PyTorch fallback
(``torch_chunk_gated_delta_rule``), so the whole model is compared.
"""

import pytest
import tiny_hf
import torch
from tiny_hf import batch
from torch import nn
from transformers.models.cohere2 import modeling_cohere2
from transformers.models.deepseek_v3 import modeling_deepseek_v3
from transformers.models.gemma3 import modeling_gemma3
from transformers.models.gemma4 import modeling_gemma4
from transformers.models.gpt_oss import modeling_gpt_oss
from transformers.models.llama4 import modeling_llama4
from transformers.models.ministral3 import modeling_ministral3
from transformers.models.modernbert import modeling_modernbert
from transformers.models.olmo3 import modeling_olmo3
from transformers.models.phi3 import modeling_phi3
from transformers.models.qwen3_next import modeling_qwen3_next
from transformers.models.smollm3 import modeling_smollm3

import posenc_core as pc
from posenc_core.attention import chunked_mask, sliding_window_mask
from posenc_core.rope import layer_plan

S = 44  # crosses the windows (8), chunks (16) and L0 (16) of every tiny model

KIND = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
}


def core(model):
    """The decoder stack (``model.model``), or the model itself for ModernBertModel."""
    return getattr(model, "model", model)


def attention_of(layer):
    for name in ("self_attn", "attn", "linear_attn"):
        if hasattr(layer, name):
            return getattr(layer, name)
    raise AssertionError(f"no attention module in {type(layer).__name__}")


def output(model, s=S, **kw):
    input_ids, mask, positions = batch(s, **kw)
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def assert_same(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4 * expected.abs().max())


def max_difference(actual, expected):
    return (actual - expected).abs().max().item()


class Tracker:
    """Which decoder layer is running (a forward pre-hook on each) and the position_ids the
    model gives its rotary embedding module."""

    def __init__(self, model):
        self.layer = None
        self.positions = None
        stack = core(model)
        for i, layer in enumerate(stack.layers):
            layer.register_forward_pre_hook(self._enter(i))
        stack.rotary_emb.register_forward_pre_hook(self._keep_positions, with_kwargs=True)

    def _enter(self, i):
        def hook(module, args):
            self.layer = i

        return hook

    def _keep_positions(self, module, args, kwargs):
        self.positions = args[1] if len(args) > 1 else kwargs["position_ids"]


# How each architecture calls its rotation: the module, the functions, and an adapter that
# makes posenc_core's module take the function's place.


def qk_heads_first(rope, positions, q, k, *args, **kwargs):
    """apply_rotary_pos_emb(q, k, cos, sin[, unsqueeze_dim=1]) on (b, h, s, d)."""
    assert kwargs.get("unsqueeze_dim", 1) == 1
    return rope(q, k, positions=positions)


def qk_sequence_first(rope, positions, xq, xk, freqs_cis):
    """Llama 4's apply_rotary_emb(xq, xk, freqs_cis) on (b, s, h, d), interleaved pairs."""
    q, k = rope(xq.transpose(1, 2), xk.transpose(1, 2), positions=positions)
    return q.transpose(1, 2), k.transpose(1, 2)


def one_sequence_first(rope, positions, x, cos, sin, unsqueeze_dim=1):
    """Gemma 4's apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=2): one tensor (b, s, h, d)."""
    assert unsqueeze_dim == 2
    heads = x.transpose(1, 2)
    rotated, _ = rope(heads, heads, positions=positions)
    return rotated.transpose(1, 2)


ARCHS = {
    "llama4": (tiny_hf.tiny_llama4, modeling_llama4, ["apply_rotary_emb"], qk_sequence_first),
    "smollm3": (tiny_hf.tiny_smollm3, modeling_smollm3, ["apply_rotary_pos_emb"], qk_heads_first),
    "cohere2": (tiny_hf.tiny_cohere2, modeling_cohere2, ["apply_rotary_pos_emb"], qk_heads_first),
    "qwen3_next": (
        tiny_hf.tiny_qwen3_next,
        modeling_qwen3_next,
        ["apply_rotary_pos_emb"],
        qk_heads_first,
    ),
    "gemma3": (tiny_hf.tiny_gemma3, modeling_gemma3, ["apply_rotary_pos_emb"], qk_heads_first),
    "modernbert": (
        tiny_hf.tiny_modernbert,
        modeling_modernbert,
        ["apply_rotary_pos_emb"],
        qk_heads_first,
    ),
    "olmo3": (tiny_hf.tiny_olmo3, modeling_olmo3, ["apply_rotary_pos_emb"], qk_heads_first),
    "gpt_oss": (tiny_hf.tiny_gpt_oss, modeling_gpt_oss, ["apply_rotary_pos_emb"], qk_heads_first),
    "gemma4": (tiny_hf.tiny_gemma4, modeling_gemma4, ["apply_rotary_pos_emb"], one_sequence_first),
    "deepseek_v3": (
        tiny_hf.tiny_deepseek_v3,
        modeling_deepseek_v3,
        ["apply_rotary_pos_emb", "apply_rotary_pos_emb_interleave"],
        qk_heads_first,
    ),
    "phi4_mini": (tiny_hf.tiny_phi4_mini, modeling_phi3, ["apply_rotary_pos_emb"], qk_heads_first),
    "ministral3": (
        tiny_hf.tiny_ministral3,
        modeling_ministral3,
        ["apply_rotary_pos_emb"],
        qk_heads_first,
    ),
}


def record_rotating_layers(monkeypatch, tracker, modeling, names):
    """Wrap the model's own rotation functions; returns the set of layers that call them."""
    calls = set()
    for name in names:
        original = getattr(modeling, name)

        def wrapped(*args, _original=original, **kwargs):
            calls.add(tracker.layer)
            return _original(*args, **kwargs)

        monkeypatch.setattr(modeling, name, wrapped)
    return calls


def rotate_with_plan(monkeypatch, tracker, modeling, names, adapter, ropes):
    """Replace the model's rotation functions: in layer i, ``ropes[i]`` rotates (with the
    position_ids the model gave its rotary embedding module)."""

    def apply(*args, **kwargs):
        rope = ropes[tracker.layer]
        assert rope is not None, f"layer {tracker.layer} rotates, its plan has no rope"
        return adapter(rope, tracker.positions, *args, **kwargs)

    for name in names:
        monkeypatch.setattr(modeling, name, apply)


def compare(monkeypatch, arch, model=None, plan=None, s=S, **batch_kw):
    """Run the model as shipped and with the plan's rotations; returns (expected, actual,
    layers the shipped model rotates in, plan)."""
    build, modeling, names, adapter = ARCHS[arch]
    model = build() if model is None else model
    plan = layer_plan(model.config) if plan is None else plan
    tracker = Tracker(model)
    with monkeypatch.context() as patch:
        rotating = record_rotating_layers(patch, tracker, modeling, names)
        expected = output(model, s, **batch_kw)
    with monkeypatch.context() as patch:
        rotate_with_plan(patch, tracker, modeling, names, adapter, [p.rope for p in plan])
        actual = output(model, s, **batch_kw)
    return expected, actual, rotating, plan


def hf_masks(model, s=S):
    """The attention mask Hugging Face gives each attention layer, on the unpadded row 0:
    {layer: (s, s) bool, True where key j is visible from query i}."""
    masks = {}
    handles = []
    for i, layer in enumerate(core(model).layers):
        attention = attention_of(layer)
        if not hasattr(attention, "is_causal"):  # linear attention: no mask of keys
            continue

        def keep(module, args, kwargs, i=i):
            mask = kwargs["attention_mask"]
            masks[i] = mask[0, 0] == 0 if mask.dtype != torch.bool else mask[0, 0]

        handles.append(attention.register_forward_pre_hook(keep, with_kwargs=True))
    output(model, s)
    for handle in handles:
        handle.remove()
    return masks


def plan_mask(p, s=S):
    """Key j visible from query i as posenc_core's attention masks it for the plan's kind,
    window and causality (``sliding_window_mask`` / ``chunked_mask``): the plan's window is
    what ``pc.attention(window=..., causal=...)`` takes."""
    if p.attention == "sliding":
        return sliding_window_mask(s, window=p.window, causal=p.causal)
    if p.attention == "chunked":
        return chunked_mask(s, chunk=p.window, causal=p.causal)
    assert p.attention == "full" and p.window is None, p
    i = torch.arange(s)[:, None]
    j = torch.arange(s)[None, :]
    return j <= i if p.causal else torch.ones(s, s, dtype=torch.bool)


def check_plan(model, plan, rotating, config=None):
    """The plan against the model: rotating layers, kinds, windows (the masks), causality,
    sinks, softmax scale, temperatures."""
    config = model.config if config is None else config
    layers = core(model).layers
    assert [p.layer for p in plan] == list(range(len(layers)))
    assert {p.layer for p in plan if p.rope is not None} == rotating
    types = getattr(model.config, "layer_types", None) or ["full_attention"] * len(layers)
    assert [p.layer_type for p in plan] == types
    assert [p.attention for p in plan] == [KIND[t] for t in types]
    masks = hf_masks(model)
    for p, layer in zip(plan, layers):
        attention = attention_of(layer)
        assert p.causal == getattr(attention, "is_causal", True), p.layer
        sinks = isinstance(getattr(attention, "sinks", None), nn.Parameter)
        assert p.sinks == sinks, p.layer
        if p.attention == "linear":
            assert p.window is None and p.layer not in masks
        else:
            same = torch.equal(plan_mask(p), masks[p.layer])
            seen = masks[p.layer][20].nonzero().flatten().tolist()
            assert same, (
                f"layer {p.layer} ({p.layer_type}): the plan's window {p.window} (causal "
                f"{p.causal}) is not Hugging Face's mask, whose query 20 sees keys {seen}"
            )
        if p.rope is not None:
            assert pc.RotaryEmbedding.from_config(config, layer=p.layer) is not None


def rope_settings(rope):
    if rope is None:
        return None
    return (rope.head_dim, rope.rotary_dim, rope.base, rope.layout, rope.scaling)


def check_from_config(config, plan):
    """from_config(config, layer=i) is the plan's rope; without layer= it is the common rope
    of a model whose layers rotate alike, and a ValueError naming ``layer`` otherwise."""
    settings = [rope_settings(p.rope) for p in plan]
    for p in plan:
        assert (
            rope_settings(pc.RotaryEmbedding.from_config(config, layer=p.layer))
            == (settings[p.layer])
        )
    if len(set(settings)) > 1:
        with pytest.raises(ValueError, match="layer"):
            pc.RotaryEmbedding.from_config(config)
    else:
        assert rope_settings(pc.RotaryEmbedding.from_config(config)) == settings[0]


# ---------------------------------------------------------------------------- the comparisons

ROTATING = {  # the layers each tiny model rotates in, as its builder sets it up
    "llama4": {0, 1, 3},
    "smollm3": {0, 1, 3},
    "cohere2": {0, 1, 2},
    "qwen3_next": {3},
    "gemma3": {0, 1, 2, 3, 4, 5},
    "modernbert": {0, 1, 2, 3},
    "olmo3": {0, 1, 2, 3},
    "gpt_oss": {0, 1, 2, 3},
    "gemma4": {0, 1, 2, 3, 4},
    "deepseek_v3": {0, 1, 2},
    "phi4_mini": {0, 1},
    "ministral3": {0, 1},
}


@pytest.mark.parametrize("arch", list(ARCHS))
def test_model(monkeypatch, arch):
    """The model with the plan's rotations gives the shipped outputs; the plan agrees with
    the model layer by layer."""
    expected, actual, rotating, plan = compare(monkeypatch, arch)
    assert rotating == ROTATING[arch]
    model = ARCHS[arch][0]()
    check_plan(model, plan, rotating)
    check_from_config(model.config, plan)
    temperatures = {p.layer for p in plan if p.temperature is not None}
    assert temperatures == {"llama4": {2}, "ministral3": {0, 1}}.get(arch, set())
    if arch != "deepseek_v3":
        assert all(p.softmax_scale == 1.0 for p in plan)
    assert_same(actual, expected)


def test_plan_table_prints():
    """The plan prints as a table, one row per layer."""
    text = repr(layer_plan(tiny_hf.tiny_gemma3().config))
    assert len(text.splitlines()) == 1 + 6


# ------------------------------------------------------------------ architecture-specific cases


def test_gemma3_old_spelling(monkeypatch):
    """Gemma 3 in the older config.json spelling (rope_theta 1e6 + rope_local_base_freq 1e4 +
    rope_scaling linear x8, tiny_hf.GEMMA3_OLD_ROPE): the plan read from that dict rotates
    as the model built from it."""
    model = tiny_hf.tiny_gemma3(old_spelling=True)
    config = model.config.to_dict()
    del config["rope_parameters"]
    config.update(tiny_hf.GEMMA3_OLD_ROPE)
    plan = layer_plan(config)
    assert [p.rope.base for p in plan] == [1e4, 1e4, 1e6] * 2
    assert [p.rope.scaling.rope_type for p in plan] == ["default", "default", "linear"] * 2
    expected, actual, rotating, _ = compare(monkeypatch, "gemma3", model, plan)
    assert rotating == set(range(6))
    assert_same(actual, expected)


def test_gemma3_bidirectional_window():
    """Gemma 3 with use_bidirectional_attention (EmbeddingGemma): Gemma3TextConfig keeps
    sliding_window // 2 + 1 and to_dict() gives back the value it was built with; the plan's
    window and causality match the mask Hugging Face builds (|i - j| < 8 // 2 + 1)."""
    model = tiny_hf.tiny_gemma3(use_bidirectional_attention=True)
    assert model.config.sliding_window == 5 and model.config.to_dict()["sliding_window"] == 8
    check_plan(model, layer_plan(model.config), set(range(6)))


def test_modernbert_old_spelling(monkeypatch):
    """ModernBERT's config.json spelling, global_rope_theta / local_rope_theta."""
    model = tiny_hf.tiny_modernbert()
    config = model.config.to_dict()
    del config["rope_parameters"]
    config.update(global_rope_theta=160000.0, local_rope_theta=10000.0)
    plan = layer_plan(config)
    assert [p.rope.base for p in plan] == [160000.0, 1e4, 1e4, 160000.0]
    expected, actual, _, _ = compare(monkeypatch, "modernbert", model, plan)
    assert_same(actual, expected)


def test_olmo3_yarn_on_full_layers_only():
    """OLMo 3: YaRN on the full layer only, plain RoPE on the sliding layers."""
    plan = layer_plan(tiny_hf.tiny_olmo3().config)
    assert [p.rope.scaling.rope_type for p in plan] == ["default"] * 3 + ["yarn"]


def test_gpt_oss_yarn_not_truncated():
    plan = layer_plan(tiny_hf.tiny_gpt_oss().config)
    assert all(p.rope.scaling.rope_type == "yarn" and not p.rope.scaling.truncate for p in plan)
    assert all(p.sinks for p in plan)


def test_gemma4_proportional_full_layers():
    """Gemma 4's full layers: head_dim = global_head_dim 32, proportional rope."""
    plan = layer_plan(tiny_hf.tiny_gemma4().config)
    assert [p.rope.head_dim for p in plan] == [16, 16, 32, 16, 32]
    assert [p.rope.scaling.rope_type for p in plan] == ["default"] * 2 + ["proportional"] + [
        "default",
        "proportional",
    ]


@pytest.mark.parametrize("interleave", [True, False], ids=["interleaved", "half"])
def test_deepseek_v3_mla(monkeypatch, interleave):
    """DeepSeek-V3's MLA: the plan's rope is over the qk_rope_head_dim dims (layout from
    rope_interleave), applied to q[..., qk_nope_head_dim:] and the shared k_pe head; its
    softmax_scale is the ratio of the attention module's scaling to qk_head_dim**-0.5
    (mscale(40, 0.707)**2)."""
    model = tiny_hf.tiny_deepseek_v3(rope_interleave=interleave)
    expected, actual, rotating, plan = compare(monkeypatch, "deepseek_v3", model)
    assert rotating == {0, 1, 2}
    for p, layer in zip(plan, core(model).layers):
        assert (p.rope.head_dim, p.rope.rotary_dim) == (8, 8)
        assert p.rope.layout == ("interleaved" if interleave else "half")
        attention = layer.self_attn
        assert p.softmax_scale == pytest.approx(
            attention.scaling / attention.qk_head_dim**-0.5, rel=1e-12
        )
    assert plan[0].softmax_scale == pytest.approx(
        (0.1 * 0.707 * torch.tensor(40.0).log().item() + 1) ** 2
    )
    assert_same(actual, expected)


@pytest.mark.parametrize("s", [12, 40], ids=["short", "long"])
def test_phi4_mini_longrope(monkeypatch, s):
    """Phi-4-mini: partial_rotary_factor 0.75 (12 of 16 dims) with LongRoPE on both sides of
    L0 = 16 (s = 12: short_factor; s = 40: long_factor)."""
    expected, actual, rotating, plan = compare(
        monkeypatch, "phi4_mini", s=s, pad=3, first_document=5
    )
    assert rotating == {0, 1}
    assert (plan[0].rope.head_dim, plan[0].rope.rotary_dim) == (16, 12)
    assert_same(actual, expected)


# ------------------------------------------------------------------------------ temperatures


def scale_queries(model, plan, positions_of):
    """Multiply the output of q_proj in each layer with a temperature by
    ``plan[i].temperature(positions_of(s))`` (a per-position scalar commutes with the
    rotation and the head split)."""
    for p, layer in zip(plan, core(model).layers):
        if p.temperature is None:
            continue

        def hook(module, args, out, p=p):
            factor = p.temperature(positions_of(out.shape[1]))
            factor = factor.expand(out.shape[:2]) if factor.dim() == 1 else factor
            return out * factor[..., None].to(out.dtype)

        layer.self_attn.q_proj.register_forward_hook(hook)


def llama4_without_temperature(model):
    for layer in core(model).layers:
        layer.self_attn.attn_temperature_tuning = False


def test_llama4_temperature():
    """Llama 4's NoPE layer: with attn_temperature_tuning off and the plan's temperature put
    on the queries (positions: the index in the sequence, 0 .. s-1), the logits are the
    shipped ones."""
    model = tiny_hf.tiny_llama4()
    plan = layer_plan(model.config)
    expected = output(model)
    llama4_without_temperature(model)
    scale_queries(model, plan, lambda s: torch.arange(s))
    assert_same(output(model), expected)


def test_llama4_temperature_can_fail():
    """Without the temperature the logits differ: the check above notices it."""
    model = tiny_hf.tiny_llama4()
    expected = output(model)
    llama4_without_temperature(model)
    assert max_difference(output(model), expected) > 1e-3


def test_ministral3_temperature(monkeypatch):
    """Ministral 3: with get_llama_4_attn_scale switched off and the plan's temperature put on
    the queries (positions: position_ids), the logits are the shipped ones."""
    model = tiny_hf.tiny_ministral3()
    plan = layer_plan(model.config)
    expected = output(model)
    tracker = Tracker(model)
    monkeypatch.setattr(
        modeling_ministral3,
        "get_llama_4_attn_scale",
        lambda positions, beta, length: torch.ones(()),
    )
    assert max_difference(output(model), expected) > 1e-3  # the temperature matters here
    scale_queries(model, plan, lambda s: tracker.positions)
    assert_same(output(model), expected)


# ------------------------------------------------------------------------ the checks can fail


def test_nope_layer_rotated_can_fail(monkeypatch):
    """SmolLM3 with its NoPE layer 2 rotated as layer 0: the logits differ."""
    build, modeling, names, adapter = ARCHS["smollm3"]
    model = build()
    plan = layer_plan(model.config)
    expected = output(model)
    tracker = Tracker(model)
    monkeypatch.setattr(model.model.layers[2].self_attn, "use_rope", True)
    rotate_with_plan(monkeypatch, tracker, modeling, names, adapter, [plan[0].rope] * 4)
    assert max_difference(output(model), expected) > 1e-3


def test_wrong_base_on_sliding_layers_can_fail(monkeypatch):
    """Gemma 3 with the global rotation (base 1e6, linear x8) on the sliding layers too."""
    build, modeling, names, adapter = ARCHS["gemma3"]
    model = build()
    plan = layer_plan(model.config)
    expected = output(model)
    tracker = Tracker(model)
    rotate_with_plan(monkeypatch, tracker, modeling, names, adapter, [plan[2].rope] * 6)
    assert max_difference(output(model), expected) > 1e-3
