"""Shipped bugs of per-layer positional mechanisms, each beside its correct counterpart.

Models whose layers differ (sliding and full attention with their own RoPE, NoPE layers,
partial rotation on some layers, learned sinks, a scaled softmax) can apply the right rotation
on the wrong layers. Each :class:`LayerBug` of :data:`LAYER_BUGS` is one that shipped, cited by
its reports, as ``broken(config)`` (the config read as the buggy code read it) and
``correct(config)`` (from :func:`~posenc_core.rope.layer_plan` and
:meth:`~posenc_core.rope.RotaryEmbedding.from_config`), ``config`` a ``transformers`` text
config. By the bug's ``kind`` both return ``"rotations"``: one
:class:`~posenc_core.rope.RotaryEmbedding` or None per decoder layer; ``"softmax_scale"``: the
factor on 1 / sqrt(d_h); ``"attention"``: one ``attend(q, k, v, bias, sinks) -> out`` per layer
(q, k, v, out ``(b, h, s, d_h)``, bias ``(b, 1, s, s)``, sinks ``(h,)``).
``tests/book/test_layer_bugs.py`` runs a tiny random Hugging Face model of ``model`` as shipped
and with each result in place: the correct one reproduces the logits, the broken one does not.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from posenc_core.attention import attention
from posenc_core.rope import RotaryEmbedding

__all__ = ["KINDS", "LayerBug", "LAYER_BUGS", "rotations", "softmax_scale_factor"]

KINDS = ("rotations", "softmax_scale", "attention")
"""What a bug's functions return (see the module docstring)."""

Rotations = tuple[RotaryEmbedding | None, ...]
Attend = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None],
    torch.Tensor,
]


@dataclass(frozen=True)
class LayerBug:
    """One shipped bug of a per-layer positional mechanism and its correct counterpart.

    Attributes:
        name: short name (the test id).
        summary: what the broken code does, in one sentence.
        reports: the public reports of it, ``owner/repo#number``.
        model: the architecture the test runs it on (``"smollm3"``, ``"gemma3"``, ...).
        kind: ``"rotations"``, ``"softmax_scale"`` or ``"attention"`` (see the module
            docstring).
        broken: ``config -> result`` as the buggy code computed it.
        correct: ``config -> result`` from posenc_core's API, what Hugging Face's model does.
    """

    name: str
    summary: str
    reports: tuple[str, ...]
    model: str
    kind: str
    broken: Callable[[Any], Any]
    correct: Callable[[Any], Any]


# ----------------------------------------------------------------------------- correct


def rotations(config: Any) -> Rotations:
    """The rotation of every decoder layer, from :func:`~posenc_core.rope.layer_plan`.

    Args:
        config: a ``transformers`` text config.

    Returns:
        one :class:`~posenc_core.rope.RotaryEmbedding` per layer, None where the layer does
        not rotate.
    """
    from posenc_core.rope import layer_plan

    return tuple(plan.rope for plan in layer_plan(config))


def softmax_scale_factor(config: Any) -> float:
    """The factor positional scaling puts on 1 / sqrt(d_h) (DeepSeek's YaRN mscale squared).

    Args:
        config: a ``transformers`` text config.

    Returns:
        ``layer_plan(config)[0].softmax_scale``.
    """
    from posenc_core.rope import layer_plan

    return float(layer_plan(config)[0].softmax_scale)


def _attend_with_sinks(config: Any) -> tuple[Attend, ...]:
    from posenc_core.rope import layer_plan

    def attend(uses_sinks: bool) -> Attend:
        def run(q, k, v, bias, sinks):  # noqa: ANN001, ANN202
            return attention(q, k, v, bias=bias, sinks=sinks if uses_sinks else None)

        return run

    return tuple(attend(plan.sinks) for plan in layer_plan(config))


# ----------------------------------------------------------------------------- helpers


def _types(config: Any) -> list[str]:
    return list(config.layer_types)


def _first(ropes: Rotations, types: list[str], layer_type: str) -> RotaryEmbedding:
    for rope, t in zip(ropes, types, strict=True):
        if t == layer_type and rope is not None:
            return rope
    raise ValueError(f"no rotating layer of type {layer_type!r}")


def _like(
    rope: RotaryEmbedding, *, base: float | None = None, scaling: Any = "same",
    rotary_dim: int | None = None,
) -> RotaryEmbedding:  # fmt: skip
    """A rotation like ``rope`` with some settings replaced."""
    return RotaryEmbedding(
        rope.head_dim,
        base=rope.base if base is None else base,
        scaling=rope.scaling if scaling == "same" else scaling,
        layout=rope.layout,
        rotary_dim=rope.rotary_dim if rotary_dim is None else rotary_dim,
    )


# ----------------------------------------------------------------------------- broken


def smollm3_no_rope_backwards(config: Any) -> Rotations:
    """``no_rope_layers[i] == 1`` read as "layer i is NoPE": in Hugging Face's SmolLM3 config
    1 means the layer uses RoPE (``use_rope = no_rope_layers[i]``), so this rotates the NoPE
    layers (every 4th) and leaves the other three quarters unrotated (onnxruntime/mobius#233;
    the same misreading is reported against transformers in huggingface/transformers#43756)."""
    ropes = rotations(config)
    rope = next(r for r in ropes if r is not None)
    return tuple(None if flag else rope for flag in config.no_rope_layers)


def gemma3_scaling_on_sliding(config: Any) -> Rotations:
    """The global layers' linear scaling also applied to the sliding layers (at their local
    base): the scale kept global while the base is per layer (antonellof/ferrox#39; vLLM's
    regression fixed in vllm-project/vllm#29111 gave the sliding layers scaled RoPE too)."""
    ropes, types = rotations(config), _types(config)
    full = _first(ropes, types, "full_attention")
    return tuple(
        _like(r, scaling=full.scaling) if t == "sliding_attention" and r is not None else r
        for r, t in zip(ropes, types, strict=True)
    )


def gemma3_scaling_dropped(config: Any) -> Rotations:
    """``rope_scaling`` parsed and never used: the global layers rotate unscaled, positions 8x
    too large for Gemma 3 4B+ (Blaizzy/mlx-vlm#1709, lablup/mlxcel#1340)."""
    ropes, types = rotations(config), _types(config)
    return tuple(
        _like(r, scaling=None) if t == "full_attention" and r is not None else r
        for r, t in zip(ropes, types, strict=True)
    )


def olmo3_yarn_everywhere(config: Any) -> Rotations:
    """One configured (YaRN) rotary embedding passed to every layer, the sliding ones
    included, where OLMo 3 scales only its full-attention layers
    (huggingface/transformers#45945; vllm-project/vllm#43419 proposes the same)."""
    ropes, types = rotations(config), _types(config)
    full = _first(ropes, types, "full_attention")
    return tuple(full for _ in types)


def modernbert_global_base_everywhere(config: Any) -> Rotations:
    """The legacy ``global_rope_theta`` / ``local_rope_theta`` fields not read, so every layer
    rotates at the global base (160000) where the local layers use 10000
    (NVIDIA/TensorRT-Model-Connect#692)."""
    ropes, types = rotations(config), _types(config)
    full = _first(ropes, types, "full_attention")
    return tuple(full for _ in types)


def qwen3_next_partial_ignored(config: Any) -> Rotations:
    """``partial_rotary_factor`` (0.25) dropped: the full-attention layers rotate the whole
    head, frequencies over head_dim, instead of its first quarter
    (AI-Hypercomputer/maxtext#4616, the Qwen3.5 configs that share Qwen3-Next's attention)."""
    return tuple(
        None if r is None else RotaryEmbedding(r.head_dim, base=r.base, layout=r.layout)
        for r in rotations(config)
    )


def gpt_oss_yarn_truncated(config: Any) -> Rotations:
    """YaRN with the ramp's ends rounded to whole dimensions, ignoring the config's
    ``truncate: false`` (vllm-project/vllm#27722, fixed in sgl-project/sglang#14270)."""
    return tuple(
        None if r is None else _like(r, scaling=dataclasses.replace(r.scaling, truncate=True))
        for r in rotations(config)
    )


def rope_parameters_unread(config: Any) -> Rotations:
    """The scaling read from ``rope_scaling`` only, where transformers v5 configs keep it in
    ``rope_parameters``: YaRN silently dropped, plain RoPE at the base
    (sgl-project/sglang#26187, NVIDIA-NeMo/Automodel#1400)."""
    legacy = config.to_dict().get("rope_scaling")  # absent from a v5 config
    return tuple(None if r is None else _like(r, scaling=legacy) for r in rotations(config))


def gemma4_proportional_narrow(config: Any) -> Rotations:
    """Gemma 4's proportional RoPE built at the rotated width: the right frequencies
    base**(-2i/head_dim), but only ``partial_rotary_factor * head_dim`` dims with pairs
    (i, i + r/2) inside them, where Hugging Face keeps head_dim/2 frequencies (the rest 0) and
    pairs (i, i + head_dim/2) across the whole head (NVIDIA-NeMo/Megatron-Bridge#4195, fixed
    for the MoE model in NVIDIA-NeMo/Megatron-Bridge#4916)."""
    out: list[RotaryEmbedding | None] = []
    for r in rotations(config):
        if r is None or r.scaling.rope_type != "proportional":
            out.append(r)
            continue
        p = r.scaling.partial_rotary_factor or 1.0
        width = 2 * int(p * r.head_dim // 2)
        # base' ** (-2i / width) == base ** (-2i / head_dim): the values stay right.
        out.append(
            RotaryEmbedding(
                r.head_dim,
                base=r.base ** (width / r.head_dim),
                scaling=None
                if (r.scaling.factor or 1.0) == 1.0
                else {"rope_type": "linear", "factor": r.scaling.factor},
                layout=r.layout,
                rotary_dim=width,
            )
        )
    return tuple(out)


def mla_mscale_missing(config: Any) -> float:
    """MLA's softmax scale left at 1 / sqrt(d_qk): YaRN's mscale(factor, mscale_all_dim)**2
    never applied to it (huggingface/transformers#47435 for DeepSeek-V2 and Mistral 4,
    onnxruntime/mobius#548)."""
    return 1.0


def _attend_without_sinks(config: Any) -> tuple[Attend, ...]:
    """GPT-OSS's learned sink logits never bound to the attention kernel: a plain softmax
    over the keys (vllm-project/vllm-metal#550)."""
    n = int(config.num_hidden_layers)

    def run(q, k, v, bias, sinks):  # noqa: ANN001, ANN202
        return attention(q, k, v, bias=bias)

    return tuple(run for _ in range(n))


def _bugs() -> dict[str, LayerBug]:
    rows = [
        ("smollm3-no-rope-backwards", "SmolLM3's no_rope_layers read as 1 = NoPE",
         ("onnxruntime/mobius#233", "huggingface/transformers#43756"), "smollm3", "rotations",
         smollm3_no_rope_backwards, rotations),
        ("gemma3-scaling-on-sliding", "Gemma 3's linear scaling applied to sliding layers too",
         ("antonellof/ferrox#39", "vllm-project/vllm#29111"), "gemma3", "rotations",
         gemma3_scaling_on_sliding, rotations),
        ("gemma3-scaling-dropped", "Gemma 3's linear scaling never applied",
         ("Blaizzy/mlx-vlm#1709", "lablup/mlxcel#1340"), "gemma3", "rotations",
         gemma3_scaling_dropped, rotations),
        ("olmo3-yarn-everywhere", "OLMo 3's YaRN applied to its sliding layers too",
         ("huggingface/transformers#45945", "vllm-project/vllm#43419"), "olmo3", "rotations",
         olmo3_yarn_everywhere, rotations),
        ("modernbert-global-base-everywhere", "ModernBERT's local layers at the global base",
         ("NVIDIA/TensorRT-Model-Connect#692",), "modernbert", "rotations",
         modernbert_global_base_everywhere, rotations),
        ("qwen3-next-partial-ignored", "Qwen3-Next's partial_rotary_factor ignored",
         ("AI-Hypercomputer/maxtext#4616",), "qwen3_next", "rotations",
         qwen3_next_partial_ignored, rotations),
        ("gpt-oss-yarn-truncated", "GPT-OSS's YaRN without truncate: false",
         ("vllm-project/vllm#27722", "sgl-project/sglang#14270"), "gpt_oss", "rotations",
         gpt_oss_yarn_truncated, rotations),
        ("rope-parameters-unread", "YaRN in rope_parameters read from rope_scaling: dropped",
         ("sgl-project/sglang#26187", "NVIDIA-NeMo/Automodel#1400"), "llama", "rotations",
         rope_parameters_unread, rotations),
        ("gemma4-proportional-narrow", "Gemma 4's proportional RoPE at the rotated width",
         ("NVIDIA-NeMo/Megatron-Bridge#4195", "NVIDIA-NeMo/Megatron-Bridge#4916"), "gemma4",
         "rotations", gemma4_proportional_narrow, rotations),
        ("mla-mscale-missing", "MLA's softmax scale without YaRN's mscale squared",
         ("huggingface/transformers#47435", "onnxruntime/mobius#548"), "deepseek_v3",
         "softmax_scale", mla_mscale_missing, softmax_scale_factor),
        ("gpt-oss-sinks-dropped", "GPT-OSS's attention sinks never applied",
         ("vllm-project/vllm-metal#550",), "gpt_oss", "attention",
         _attend_without_sinks, _attend_with_sinks),
    ]  # fmt: skip
    return {
        name: LayerBug(name, summary, reports, model, kind, broken, correct)
        for name, summary, reports, model, kind, broken, correct in rows
    }


LAYER_BUGS: dict[str, LayerBug] = _bugs()
"""The bugs, by name (see :class:`LayerBug`)."""
