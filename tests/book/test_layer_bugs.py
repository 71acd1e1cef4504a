"""posenc_core.book.instruments.layer_bugs: each shipped per-layer bug against Hugging Face.

For every bug of LAYER_BUGS, a tiny random model of its architecture runs in Hugging Face's
own class, once as shipped and once with the bug's function put in place of what the model
computes (each layer's rotation, through the modeling module's ``apply_rotary_pos_emb``; the
score scale, through each attention's ``scaling``; the attention itself, through a registered
attention function). The correct function must give the shipped logits (relative 1e-4), the
broken one must differ (relative > 1e-3). Gemma 4, whose layers share keys, is checked on its
rotary embedding and ``apply_rotary_pos_emb`` instead. The models are tests/tiny_hf.py's,
with weights of a larger spread (INIT) so that attention depends on the positions; GPT-OSS
(its own YaRN parameters, where truncation shows) and a Llama with YaRN in
``rope_parameters`` are built here.
"""

import contextlib
import re
import types

import pytest
import tiny_hf
import torch

from posenc_core.book.instruments.layer_bugs import KINDS, LAYER_BUGS

VOCAB = 97
S = 40  # tokens per row
INIT = 0.2  # initializer_range: scores of order 1, so positions change the logits


def _seeded(cls, config):
    torch.manual_seed(0)
    config.initializer_range = INIT
    return cls(config).eval()


def tiny_gpt_oss():
    from transformers import GptOssConfig, GptOssForCausalLM

    config = GptOssConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=8,
        layer_types=["sliding_attention", "full_attention"], num_local_experts=4,
        num_experts_per_tok=2, max_position_embeddings=131072,
        rope_parameters={"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
                         "beta_slow": 1.0, "truncate": False, "rope_theta": 150000.0,
                         "original_max_position_embeddings": 4096},
    )  # fmt: skip
    model = _seeded(GptOssForCausalLM, config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.sinks.normal_(0.0, 2.0)
    return model


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        rope_parameters={"rope_type": "yarn", "factor": 8.0, "rope_theta": 10000.0,
                         "original_max_position_embeddings": 16},
    )  # fmt: skip
    return _seeded(LlamaForCausalLM, config)


def tiny_gemma4_config():
    from transformers import Gemma4TextConfig

    return Gemma4TextConfig(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=64,
        sliding_window=8, layer_types=["sliding_attention", "full_attention"],
        vocab_size_per_layer_input=VOCAB, hidden_size_per_layer_input=16,
        rope_parameters={
            "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                               "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    )  # fmt: skip


def _shared(name):
    """tests/tiny_hf.py's builder, with weights of spread INIT."""

    def build():
        return getattr(tiny_hf, f"tiny_{name}")(initializer_range=INIT)

    return build


BUILDERS = {
    **{name: _shared(name) for name in
       ("smollm3", "gemma3", "olmo3", "modernbert", "qwen3_next", "deepseek_v3")},
    "gpt_oss": tiny_gpt_oss,  # GPT-OSS's own YaRN (factor 32, L0 4096), where truncation shows
    "llama": tiny_llama,
}  # fmt: skip

_MODELS: dict[str, torch.nn.Module] = {}


def model_of(arch):
    if arch not in _MODELS:
        _MODELS[arch] = BUILDERS[arch]()
    return _MODELS[arch]


def tokens():
    g = torch.Generator().manual_seed(7)
    return torch.randint(3, VOCAB, (2, S), generator=g)


def layers_of(model):
    inner = model.model if hasattr(model, "model") else model
    return inner.layers


def attention_of(layer):
    return getattr(layer, "self_attn", None) or getattr(layer, "attn", None)


def run(model, input_ids):
    with torch.no_grad():
        out = model(input_ids=input_ids, position_ids=torch.arange(S)[None].expand(2, S))
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


@contextlib.contextmanager
def patched_rotations(model, ropes):
    """The model's layers rotate with ``ropes`` (one per layer, None: no rotation)."""
    module = __import__(type(model).__module__, fromlist=["apply_rotary_pos_emb"])
    original = module.apply_rotary_pos_emb
    current = {}
    handles, saved = [], []
    for i, layer in enumerate(layers_of(model)):
        attn = attention_of(layer)
        if attn is None:
            continue

        def hook(mod, args, kwargs, i=i):
            current["layer"] = i

        handles.append(attn.register_forward_pre_hook(hook, with_kwargs=True))
        if hasattr(attn, "use_rope"):  # SmolLM3: let every layer reach the rotation
            saved.append((attn, attn.use_rope))
            attn.use_rope = True

    def apply(q, k, cos, sin, unsqueeze_dim=1):
        rope = ropes[current["layer"]]
        if rope is None:
            return q, k
        positions = torch.arange(q.shape[-2])
        return rope(q, k, positions=positions)

    module.apply_rotary_pos_emb = apply
    try:
        yield
    finally:
        module.apply_rotary_pos_emb = original
        for h in handles:
            h.remove()
        for attn, value in saved:
            attn.use_rope = value


@contextlib.contextmanager
def patched_scale(model, factor):
    saved = []
    for layer in layers_of(model):
        attn = attention_of(layer)
        saved.append((attn, attn.scaling))
        attn.scaling = attn.qk_head_dim**-0.5 * factor
    try:
        yield
    finally:
        for attn, value in saved:
            attn.scaling = value


@contextlib.contextmanager
def patched_attention(model, attends):
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    def fn(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
        groups = query.shape[1] // key.shape[1]
        key = key.repeat_interleave(groups, dim=1)
        value = value.repeat_interleave(groups, dim=1)
        bias = attention_mask
        if bias is not None and bias.dtype == torch.bool:
            bias = torch.zeros(bias.shape, dtype=query.dtype).masked_fill(~bias, float("-inf"))
        if bias is not None:
            bias = bias[..., : key.shape[-2]]
        out = attends[module.layer_idx](query, key, value, bias, module.sinks)
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register("posenc_layer_bug", fn)
    AttentionMaskInterface.register("posenc_layer_bug", eager_mask)  # additive, never skipped
    previous = model.config._attn_implementation
    model.set_attn_implementation("posenc_layer_bug")
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


def patched(bug, model, result):
    if bug.kind == "rotations":
        return patched_rotations(model, result)
    if bug.kind == "softmax_scale":
        return patched_scale(model, result)
    return patched_attention(model, result)


def config_of(model):
    return model.config


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


def gemma4_gap(ropes):
    """Largest relative gap, over the layers, between ``ropes`` and Gemma 4's own rotation of a
    random query (Gemma4TextRotaryEmbedding's cos/sin through its apply_rotary_pos_emb)."""
    from transformers.models.gemma4 import modeling_gemma4 as m

    config = tiny_gemma4_config()
    rotary = m.Gemma4TextRotaryEmbedding(config)
    position_ids = torch.arange(S)[None]
    g = torch.Generator().manual_seed(3)
    worst = 0.0
    for i, layer_type in enumerate(config.layer_types):
        d = 2 * getattr(rotary, f"{layer_type}_inv_freq").numel()  # the layer's head_dim
        x = torch.randn(1, S, 4, d, generator=g)  # (b, s, h, d) as Gemma 4 rotates it
        cos, sin = rotary(x, position_ids, layer_type)
        ref = m.apply_rotary_pos_emb(x, cos, sin, unsqueeze_dim=2)
        ours, _ = ropes[i](x.transpose(1, 2), x.transpose(1, 2), positions=position_ids[0])
        worst = max(worst, rel(ours.transpose(1, 2), ref))
    return worst


def gaps(bug):
    """(correct vs shipped, broken vs shipped), relative to the shipped output."""
    if bug.model == "gemma4":
        config = tiny_gemma4_config()
        return gemma4_gap(bug.correct(config)), gemma4_gap(bug.broken(config))
    model = model_of(bug.model)
    ids = tokens()
    shipped = run(model, ids)
    out = []
    for fn in (bug.correct, bug.broken):
        with patched(bug, model, fn(config_of(model))):
            out.append(rel(run(model, ids), shipped))
    return tuple(out)


@pytest.mark.parametrize("name", list(LAYER_BUGS))
def test_broken_differs_from_hugging_face_and_correct_matches(name):
    bug = LAYER_BUGS[name]
    correct, broken = gaps(bug)
    assert correct < 1e-4, f"{name}: the correct function is off Hugging Face by {correct:.2e}"
    assert broken > 1e-3, f"{name}: the broken function matches Hugging Face ({broken:.2e})"


def test_the_harness_is_the_identity_with_hugging_faces_own_rotation():
    """Sanity of the instrument: patching in nothing but a pass-through of Hugging Face's own
    apply_rotary_pos_emb leaves the logits bit for bit."""
    model = model_of("gemma3")
    ids = tokens()
    shipped = run(model, ids)
    module = __import__(type(model).__module__, fromlist=["apply_rotary_pos_emb"])
    original = module.apply_rotary_pos_emb
    module.apply_rotary_pos_emb = lambda *a, **k: original(*a, **k)
    try:
        assert torch.equal(run(model, ids), shipped)
    finally:
        module.apply_rotary_pos_emb = original


def test_mla_scale_is_hugging_faces():
    """The correct factor times 1 / sqrt(d_qk) is DeepseekV3Attention.scaling."""
    model = model_of("deepseek_v3")
    factor = LAYER_BUGS["mla-mscale-missing"].correct(model.config)
    attn = attention_of(layers_of(model)[0])
    assert abs(attn.qk_head_dim**-0.5 * factor - attn.scaling) < 1e-12
    assert factor > 1.1


@pytest.mark.parametrize("name", list(LAYER_BUGS))
def test_every_bug_is_reported_and_well_formed(name):
    bug = LAYER_BUGS[name]
    assert bug.name == name
    assert bug.kind in KINDS
    assert bug.model in BUILDERS or bug.model == "gemma4"
    assert bug.reports, f"{name} cites no report"
    for report in bug.reports:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+#\d+", report), report
    assert isinstance(bug.broken, types.FunctionType)
    assert isinstance(bug.correct, types.FunctionType)
