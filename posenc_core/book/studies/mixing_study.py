"""Mixed layer layouts on the book's byte model: trained, measured by loss and by retrieval.

The 2025-26 open models place positions per layer. Each layout of :data:`LAYOUTS` is a small
Hugging Face-style config of the architecture that uses it (its ``model_type`` and layer types,
scaled to the book's model: 4 layers, heads of 16, sliding windows of L/4), read by
:func:`~posenc_core.rope.layer_plan` into the plan that builds a
:class:`~posenc_core.book.models.layered_lm.LayeredLM`. Every layout is trained as the
language-model study trains (:mod:`~posenc_core.book.studies.lm_study`: same data, L, steps,
schedule and seeds) and measured two ways: the held-out loss per position to 8L, and the
retrieval probe of :mod:`~posenc_core.book.studies.retrieval` at distances from L/2 to nearly
8L. On the trained models the study also measures the bugs of :data:`BUGS`, scaling on the
global layers only against every layer (:data:`SCALING`), and the retrieval probe on the
long-context methods of chapter 7c (the language-model study's RoPE checkpoints, with and
without its fine-tuning).

:func:`run_mixing_study` writes ``mixing_study.json`` (source keys of :data:`CODE_MODULES`,
SHA-256 of each checkpoint) and the first seed's checkpoint of every layout. Command line:
``python -m posenc_core.book.studies.mixing_study --out posenc_core/book/data/mixing_study.json``.
Shapes: P = 8L evaluation positions, V = 256.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import pathlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from posenc_core import _validation as check
from posenc_core.book import DATA, data_entry
from posenc_core.book.models.layered_lm import LayeredLM
from posenc_core.book.studies import (
    corpus,
    heldout,
    lm_study,
    options,
    provenance,
    retrieval,
    training,
)
from posenc_core.book.studies.encoder_study import loss_blocks
from posenc_core.rope import LayerPlans, layer_plan

__all__ = [
    "BUGS",
    "CODE_MODULES",
    "LAYOUTS",
    "SCALING",
    "Layout",
    "MixBug",
    "MixingConfig",
    "is_stale",
    "layout_config",
    "layout_plan",
    "load_layered",
    "load_results",
    "main",
    "run_mixing_study",
    "train_layout",
]

RESULTS_FILE = DATA / "mixing_study.json"
"""Where ``make study`` writes the results (checkpoints beside it)."""

CODE_MODULES = (
    "book.studies.mixing_study",
    "book.studies.retrieval",
    "book.studies.training",
    "book.studies.encoder_study",
    "book.models.layered_lm",
    *lm_study.CODE_MODULES,
)
"""posenc_core modules whose source determines the study's numbers."""


@dataclass(frozen=True)
class MixingConfig(options.Options):
    """The mixing study's configuration; the training options are the language-model study's.

    Args:
        layouts: names in :data:`LAYOUTS` (the first is the reference of paired differences).
        seeds, train_len, eval_factor, d_model, n_heads, steps, batch, lr, warmup, log_every:
            as :class:`~posenc_core.book.studies.lm_study.LMStudyConfig`.
        n_layers: decoder layers (the layouts are written for 4).
        window: the sliding window of the local layers; None: L // 4.
        base: the RoPE base of every rotating layer but the large-base global ones.
        global_base: the base of Gemma 3's and Gemma 4's global layers.
        p_rope: the fraction of Gemma 4's global frequencies kept (partial_rotary_factor).
        temperature_scale: Llama 4's attn_scale (its floor_scale is L, as Llama 4's 8192 is its
            original context).
        probe_span, probe_samples, probe_distances: the retrieval probe's m, n and values of d.
        secondary_windows, secondary_samples: the held-out windows of the loss and the probe's
            samples for the bugs, the scaling and chapter 7c's methods (the trained layouts use
            every window and ``probe_samples``), so the study fits its time.
        scaling_layouts, scaling_methods, factors: :data:`SCALING`'s runs.
        bugs: names in :data:`BUGS`.
        method_factors: factors of chapter 7c's methods probed on the 2-layer RoPE models.
        eval_batch, device: windows per evaluation pass; ``"cpu"`` for the book's numbers.
    """

    layouts: tuple[str, ...] = (
        "rope", "olmo3", "cohere2", "llama4", "gemma3", "gemma4", "gpt_oss", "smollm3",
    )  # fmt: skip
    seeds: tuple[int, ...] = (0, 1, 2)
    train_len: int = 64
    eval_factor: int = 8
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    steps: int = 1000
    batch: int = 32
    lr: float = 3e-3
    warmup: int = 50
    log_every: int = 25
    window: int | None = None
    base: float = 10000.0
    global_base: float = 1_000_000.0
    p_rope: float = 0.25
    temperature_scale: float = 0.1
    probe_span: int = 32
    probe_samples: int = 32
    probe_distances: tuple[int, ...] = (32, 64, 128, 256, 384, 480)
    secondary_windows: int = 64
    secondary_samples: int = 16
    scaling_layouts: tuple[str, ...] = ("olmo3", "gemma3")
    scaling_methods: tuple[str, ...] = ("pi", "yarn")
    factors: tuple[int, ...] = (4, 8)
    bugs: tuple[str, ...] = (
        "global-rotated", "local-base-global", "window-dropped", "temperature-everywhere",
        "no-rope-inverted",
    )  # fmt: skip
    method_factors: tuple[int, ...] = (4, 8)
    eval_batch: int = 32
    device: str = "cpu"

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            options.normalise(self, name, value)

        for name in ("train_len", "eval_factor", "d_model", "n_layers", "n_heads", "steps",
                     "batch", "log_every", "probe_span", "probe_samples", "eval_batch",
                     "secondary_windows", "secondary_samples"):  # fmt: skip
            put(name, check.positive_int(name, getattr(self, name)))
        put("warmup", check.non_negative_int("warmup", self.warmup))
        put("lr", check.real_number("lr", self.lr))
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        options.even_head_widths(self.d_model, self.n_heads)
        if self.window is not None:
            put("window", check.positive_int("window", self.window))
        for name in ("base", "global_base"):
            put(name, check.base_value(name, getattr(self, name)))
        for name in ("p_rope", "temperature_scale"):
            put(name, check.real_number(name, getattr(self, name)))
        if not 0 < self.p_rope <= 1:
            raise ValueError(f"p_rope must be in (0, 1], got {self.p_rope}")
        for name, allowed in (
            ("layouts", tuple(LAYOUTS)),
            ("scaling_layouts", tuple(LAYOUTS)),
            ("scaling_methods", tuple(lm_study.METHODS)),
            ("bugs", tuple(BUGS)),
        ):
            value = options.listed(name, getattr(self, name), may_be_empty=name != "layouts")
            put(name, tuple(check.choice(name[:-1], x, allowed) for x in value))
        for name in ("seeds", "probe_distances", "factors", "method_factors"):
            value = options.listed(name, getattr(self, name), may_be_empty=name != "seeds")
            put(name, tuple(check.non_negative_int(name[:-1], x) for x in value))
        if self.window_len >= self.train_len:
            raise ValueError(f"window must be under train_len={self.train_len}, got {self.window}")
        longest = self.eval_len - self.probe_span
        if any(not self.probe_span <= d <= longest for d in self.probe_distances):
            raise ValueError(
                f"probe_distances must lie in [probe_span, 8L - probe_span] = "
                f"[{self.probe_span}, {longest}], got {self.probe_distances}"
            )

    @property
    def eval_len(self) -> int:
        """The length of the evaluation windows, 8L."""
        return self.eval_factor * self.train_len

    @property
    def window_len(self) -> int:
        """The local layers' window (``window``, or L // 4)."""
        return self.window or max(1, self.train_len // 4)


# ----------------------------------------------------------------------------- layouts


class Layout(NamedTuple):
    """One trained layout: its label, the models that use it, and its config for a study config."""

    label: str
    models: str
    config: Callable[[MixingConfig], dict[str, Any]]


_LOCAL_THREE = ["sliding_attention"] * 3 + ["full_attention"]


def _per_type(c: MixingConfig, full: Mapping[str, Any], local: Mapping[str, Any] | None = None):
    return {
        "sliding_attention": {"rope_type": "default", "rope_theta": c.base, **(local or {})},
        "full_attention": {"rope_type": "default", "rope_theta": c.base, **full},
    }


def _local_global(model_type: str, **extra: Any) -> Callable[[MixingConfig], dict[str, Any]]:
    def config(c: MixingConfig) -> dict[str, Any]:
        return {"model_type": model_type, "layer_types": list(_LOCAL_THREE),
                "sliding_window": c.window_len, "rope_parameters": _per_type(c, {}),
                **{k: v(c) if callable(v) else v for k, v in extra.items()}}  # fmt: skip

    return config


LAYOUTS: dict[str, Layout] = {
    "rope": Layout(
        "RoPE in every layer", "Llama 2, Qwen 2.5",
        lambda c: {"model_type": "llama", "rope_theta": c.base},
    ),
    "olmo3": Layout("3 local RoPE + 1 global RoPE", "OLMo 3", _local_global("olmo3")),
    "cohere2": Layout(
        "3 local RoPE + 1 global without position", "Cohere2 (Command R7B)",
        _local_global("cohere2"),
    ),
    "llama4": Layout(
        "3 local RoPE + 1 global without position, query temperature", "Llama 4",
        _local_global(
            "llama4_text", no_rope_layers=[1, 1, 1, 0], attn_temperature_tuning=True,
            attn_scale=lambda c: c.temperature_scale, floor_scale=lambda c: c.train_len,
        ),
    ),
    "gemma3": Layout(
        "3 local RoPE (base 10,000) + 1 global RoPE (large base)", "Gemma 3",
        _local_global(
            "gemma3_text", rope_parameters=lambda c: _per_type(c, {"rope_theta": c.global_base})
        ),
    ),
    "gemma4": Layout(
        "3 local RoPE + 1 global p-RoPE", "Gemma 4",
        _local_global(
            "gemma4_text", global_head_dim=lambda c: c.d_model // c.n_heads,
            rope_parameters=lambda c: _per_type(c, {
                "rope_type": "proportional", "partial_rotary_factor": c.p_rope,
                "rope_theta": c.global_base}),
        ),
    ),
    "gpt_oss": Layout(
        "local and global RoPE in turn, sink logits", "GPT-OSS",
        lambda c: {"model_type": "gpt_oss", "layer_types": ["sliding_attention",
                                                            "full_attention"] * 2,
                   "sliding_window": c.window_len, "rope_parameters": _per_type(c, {})},
    ),
    "smollm3": Layout(
        "full attention, every 4th layer without position", "SmolLM3",
        lambda c: {"model_type": "smollm3", "no_rope_layers": [1, 1, 1, 0],
                   "use_sliding_window": False, "rope_theta": c.base},
    ),
}  # fmt: skip
"""The trained layouts, name -> :class:`Layout`. Llama 4 itself attends in chunks of 8192 in its
RoPE layers; the book's ``"llama4"`` keeps ``"cohere2"``'s sliding windows so that the query
temperature is the only difference between the two."""


def layout_config(
    name: str, config: MixingConfig | None = None, *, scaling: Mapping[str, Any] | None = None,
    where: str = "global",
) -> dict[str, Any]:  # fmt: skip
    """The Hugging Face-style config of layout ``name`` for the study config (None: defaults).

    Args:
        scaling: a scaling dict (as :data:`~posenc_core.book.studies.lm_study.METHODS` gives)
            put into the rope settings of the global layers (``where="global"``) or of every
            layer type (``"all"``); None: the layout as trained.

    Raises:
        ValueError: an unknown layout or ``where``, or scaling on a layout without per-type
            rope settings.
    """
    c = MixingConfig() if config is None else config
    layout = LAYOUTS[check.choice("name", name, tuple(LAYOUTS))]
    check.choice("where", where, ("global", "all"))
    head_dim = c.d_model // c.n_heads
    cfg = {"num_hidden_layers": c.n_layers, "hidden_size": c.d_model, "head_dim": head_dim,
           "num_attention_heads": c.n_heads, "max_position_embeddings": c.train_len,
           **layout.config(c)}  # fmt: skip
    if scaling is not None:
        per_type = cfg.get("rope_parameters")
        if not isinstance(per_type, Mapping) or "full_attention" not in per_type:
            raise ValueError(f"layout {name!r} has no per-layer-type rope settings to scale")
        types = ("full_attention",) if where == "global" else tuple(per_type)
        cfg["rope_parameters"] = {t: {**p, **(scaling if t in types else {})}
                                  for t, p in per_type.items()}  # fmt: skip
    return cfg


def layout_plan(name: str, config: MixingConfig | None = None, **scaling: Any) -> LayerPlans:
    """:func:`~posenc_core.rope.layer_plan` of :func:`layout_config` (same arguments)."""
    return layer_plan(layout_config(name, config, **scaling))


# ----------------------------------------------------------------------------- bugs


class MixBug(NamedTuple):
    """A bug of mixed layouts on a trained layout: ``plan(c)`` is the plan the buggy code runs."""

    layout: str
    summary: str
    plan: Callable[[MixingConfig], LayerPlans]


def _replace_layers(name: str, change: Callable[[Any, LayerPlans], Any]):
    def plan(c: MixingConfig) -> LayerPlans:
        plans = layout_plan(name, c)
        return LayerPlans(change(p, plans) for p in plans)

    return plan


def _local_rope(plans: LayerPlans):
    return next(p.rope for p in plans if p.attention == "sliding")


BUGS: dict[str, MixBug] = {
    "global-rotated": MixBug(
        "cohere2", "the global layer rotated like the local ones (no_rope_layers or the "
        "layer-type test ignored)",
        _replace_layers("cohere2", lambda p, ps: dataclasses.replace(p, rope=_local_rope(ps))),
    ),
    "local-base-global": MixBug(
        "gemma3", "the global layer rotated at the local base (one rope_theta read for all)",
        _replace_layers("gemma3", lambda p, ps: dataclasses.replace(p, rope=_local_rope(ps))),
    ),
    "window-dropped": MixBug(
        "cohere2", "the sliding window never applied: the local layers attend to every key",
        _replace_layers("cohere2", lambda p, ps: dataclasses.replace(p, window=None)
                        if p.attention == "sliding" else p),
    ),
    "temperature-everywhere": MixBug(
        "llama4", "the query temperature applied in every layer, not only the global one",
        _replace_layers("llama4", lambda p, ps: dataclasses.replace(
            p, temperature=next(q.temperature for q in ps if q.temperature))),
    ),
    "no-rope-inverted": MixBug(
        "smollm3", "no_rope_layers read with 1 meaning no rotation: only the 4th layer rotates",
        lambda c: layer_plan({**layout_config("smollm3", c), "no_rope_layers": [0, 0, 0, 1]}),
    ),
}  # fmt: skip
"""The bugs measured, name -> :class:`MixBug`; each is a shipped bug of
:data:`~posenc_core.book.instruments.layer_bugs.LAYER_BUGS` or of chapter 8's list, acting on a
trained layout."""

SCALING = ("global", "all")
"""The two placements of a scaling method, the global layers only (as OLMo 3 and Gemma 3 place
it) or every layer."""


# ----------------------------------------------------------------------------- training


def build_layered(name: str, c: MixingConfig, seed: int) -> LayeredLM:
    """The untrained model of layout ``name`` built after ``torch.manual_seed(seed)``."""
    torch.manual_seed(check.non_negative_int("seed", seed))
    return LayeredLM(layout_plan(name, c), d_model=c.d_model, n_heads=c.n_heads,
                     max_len=c.eval_len)  # fmt: skip


def train_layout(
    name: str, config: MixingConfig, seed: int, *, train_data: torch.Tensor | None = None
) -> tuple[LayeredLM, list[list[float]]]:
    """Train layout ``name`` for one seed as the language-model study trains a scheme (AdamW,
    warm-up and cosine schedule, clipping, windows drawn with ``seed + 1000``).

    Returns:
        ``(model, curve)``: the trained model in eval mode and ``[[step, mean loss], ...]``.
    """
    data = corpus.corpus_split("train") if train_data is None else train_data
    model = build_layered(name, config, seed).to(config.device)
    g = torch.Generator().manual_seed(seed + 1000)
    losses = training.train_steps(
        model,
        data,
        config.steps,
        config.batch,
        config.train_len,
        lambda s: training.warmup_cosine(s, config),
        g,
        config.device,
    )
    return model, loss_blocks(losses, config.log_every)


# ----------------------------------------------------------------------------- the study


def run_mixing_study(
    config: MixingConfig | None = None,
    *,
    out: str | pathlib.Path | None = None,
    on_progress: Callable[[str], None] | None = print,
    train_data: torch.Tensor | None = None,
    eval_data: torch.Tensor | None = None,
    lm_results: str | pathlib.Path | None = None,
    threads: int | None = 2,
) -> dict[str, Any]:
    """Train every layout and seed; measure loss and retrieval, the bugs, the scaling and the
    retrieval of chapter 7c's methods.

    Args:
        config: a :class:`MixingConfig` (None: the book's run).
        out: the results JSON (the first seed's checkpoints beside it); None: write nothing.
        on_progress: called with one line per finished step; None: silent.
        train_data, eval_data: byte tensors instead of the training split and held-out excerpt.
        lm_results: the language-model study's results (its RoPE checkpoints are probed); None:
            the committed one; ``"skip"``: no probe of chapter 7c's methods.
        threads: torch threads during the study (restored after); None: leave as is.
    """
    c = MixingConfig() if config is None else config
    if not isinstance(c, MixingConfig):
        raise TypeError(f"config must be a MixingConfig, got {type(c).__name__}")
    old = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(check.positive_int("threads", threads))
    try:
        return _run(c, out, on_progress or (lambda line: None), train_data, eval_data, lm_results)
    finally:
        torch.set_num_threads(old)


def _run(c, out, say, train_data, eval_data, lm_results) -> dict[str, Any]:
    start, cpu_start = time.perf_counter(), time.process_time()
    keys = provenance.source_keys(CODE_MODULES)  # the code that runs, read before it runs
    train = corpus.corpus_split("train") if train_data is None else train_data
    held = corpus.heldout_excerpt() if eval_data is None else eval_data

    def measure(model: torch.nn.Module, main: bool = False, loss: bool = True) -> dict[str, Any]:
        def logits(x: torch.Tensor) -> torch.Tensor:
            return model(x.to(c.device))

        out = {}
        with torch.no_grad():
            if loss:
                out["loss"] = heldout.position_loss(
                    logits, held, c.eval_len, batch=c.eval_batch,
                    max_windows=None if main else c.secondary_windows,
                ).tolist()  # fmt: skip
            out["probe"] = retrieval.repeat_probe(
                logits, held, length=c.eval_len, distances=c.probe_distances,
                span=c.probe_span, samples=c.probe_samples if main else c.secondary_samples,
                batch=c.eval_batch,
            )  # fmt: skip
        return out

    def log(line: str) -> None:
        say(f"[{time.perf_counter() - start:7.1f} s] {line}")

    runs, models = {}, {}
    for name in c.layouts:
        for seed in c.seeds:
            t0 = time.perf_counter()
            model, curve = train_layout(name, c, seed, train_data=train)
            runs[f"{name}/{seed}"] = {
                "layout": name,
                "seed": seed,
                "curve": curve,
                **measure(model, main=True),
                "secondary": measure(model),
                "seconds": time.perf_counter() - t0,
            }
            models[name, seed] = model
            log(f"trained {name} seed {seed}")  # fmt: skip
    bugs = {}
    for bug in c.bugs:
        spec = BUGS[bug]
        for seed in c.seeds:
            if (spec.layout, seed) in models:
                broken = models[spec.layout, seed].with_plan(spec.plan(c))
                bugs[f"{bug}/{seed}"] = {"bug": bug, "layout": spec.layout, "seed": seed,
                                         **measure(broken)}  # fmt: skip
        log(f"bug {bug}")
    scaling = {}
    for name in c.scaling_layouts:
        for method in c.scaling_methods:
            for s in c.factors:
                params = lm_study.METHODS[method](c, float(s))
                for where in SCALING:
                    plan = layout_plan(name, c, scaling=params, where=where)
                    for seed in c.seeds:
                        if (name, seed) in models:
                            scaled = models[name, seed].with_plan(plan)
                            scaling[f"{name}/{method}/{s}/{where}/{seed}"] = {
                                "layout": name, "method": method, "factor": s, "where": where,
                                "seed": seed, "scaling": params, **measure(scaled)}  # fmt: skip
                log(f"scaling {name} {method} x{s}")
    methods = {} if lm_results == "skip" else _method_probes(c, train, measure, lm_results, log)
    results = {
        "config": c.to_dict(),
        "layouts": {n: {"label": LAYOUTS[n].label, "models": LAYOUTS[n].models,
                        "config": layout_config(n, c),
                        "plan": [list(p.row()) for p in layout_plan(n, c)]} for n in c.layouts},
        "bug_summaries": {b: {"layout": BUGS[b].layout, "summary": BUGS[b].summary,
                              "plan": [list(p.row()) for p in BUGS[b].plan(c)]} for b in c.bugs},
        "runs": runs, "bugs": bugs, "scaling": scaling, "methods": methods,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu_start,
        "threads": torch.get_num_threads(),
        "source_keys": keys,
    }  # fmt: skip
    if out is not None:
        results = _save(results, models, c, pathlib.Path(out))
    return results


def _method_probes(c, train, measure, lm_results, log) -> dict[str, Any]:
    """The retrieval probe (and loss) of chapter 7c's methods on the 2-layer RoPE checkpoints of
    the language-model study, plain, scaled, and fine-tuned as that study fine-tunes."""
    res = lm_study.load_results(lm_results)
    lc = lm_study.LMStudyConfig.from_dict(res["config"])
    out = {}
    for seed in lc.seeds:
        model = lm_study.load_lm("rope", seed, results=lm_results)
        out[f"none/1/{seed}"] = {
            "method": "none",
            "factor": 1,
            "seed": seed,
            **measure(model, loss=False),
        }
        for method in lc.methods:
            for s in c.method_factors:
                model.set_rope_scaling(lm_study.METHODS[method](lc, float(s)))
                out[f"{method}/{s}/{seed}"] = {"method": method, "factor": s, "seed": seed,
                                               **measure(model, loss=False)}  # fmt: skip
        model.set_rope_scaling(None)
        for method in lc.finetune_methods:
            tuned = _finetuned(model, method, seed, lc, train)
            out[f"finetuned-{method}/{lc.finetune_factor}/{seed}"] = {
                "method": f"finetuned-{method}", "factor": lc.finetune_factor, "seed": seed,
                "steps": lc.finetune_steps[-1], **measure(tuned, loss=False)}  # fmt: skip
        log(f"chapter 7c's methods, seed {seed}")
    return out


def _finetuned(model, method, seed, lc, train):
    """The language-model study's fine-tune of ``model`` (same windows, steps and optimiser
    restarts), without its intermediate evaluations."""
    m = copy.deepcopy(model)
    m.set_rope_scaling(lm_study.METHODS[method](lc, float(lc.finetune_factor)))
    g = torch.Generator().manual_seed(seed + 2000)
    done = 0
    for stop in lc.finetune_steps:
        training.train_steps(m, train, stop - done, lc.ft_batch, lc.finetune_factor * lc.train_len,
                        lambda s: lc.finetune_lr, g, lc.device)  # fmt: skip
        done = stop
    return m


# ----------------------------------------------------------------------------- files


def _save(results, models, c, out: pathlib.Path) -> dict[str, Any]:
    out.parent.mkdir(parents=True, exist_ok=True)
    checkpoints = {}
    for name in c.layouts:
        seed = c.seeds[0]
        file = f"mix_{name}_seed{seed}.safetensors"
        sha = lm_study.save_checkpoint(models[name, seed], out.parent / file)
        checkpoints[f"{name}/{seed}"] = {"file": file, "sha256": sha}
    saved = {
        "versions": provenance.library_versions(pygments=corpus.installed_pygments_version()),
        "checkpoints": checkpoints,
        **{k: provenance.round_floats(v, 4) if k in _CURVES else v for k, v in results.items()},
        "seconds": round(results["seconds"], 1),
        "cpu_seconds": round(results["cpu_seconds"], 1),
    }
    out.write_text(json.dumps(saved, separators=(",", ":")) + "\n", encoding="utf-8")
    return saved


_CURVES = ("runs", "bugs", "scaling", "methods")


def load_results(path: str | pathlib.Path | None = None) -> dict[str, Any]:
    """Read a results file (None: the committed one, in ``posenc_core/book/data/``)."""
    return json.loads(pathlib.Path(RESULTS_FILE if path is None else path).read_text("utf-8"))


def is_stale(results: Mapping[str, Any]) -> list[str]:
    """Why a results file no longer describes the code and the defaults (empty: it does)."""
    problems = []
    changed = provenance.changed_modules(results.get("source_keys", {}), CODE_MODULES)
    if changed:
        problems.append(f"code changed since the study ran (modules: {', '.join(changed)})")
    if results.get("config") != MixingConfig().to_dict():
        problems.append("MixingConfig's defaults differ from the recorded configuration")
    return problems


def load_layered(
    name: str, seed: int = 0, *, results: str | pathlib.Path | Mapping[str, Any] | None = None
) -> LayeredLM:
    """A trained layout of the study, SHA-256 checked before it is read.

    Args:
        name: a layout with a checkpoint (the first seed of each); seed: the run's seed.
        results: the results file (path or loaded dict; None: the committed one).

    Returns:
        the :class:`~posenc_core.book.models.layered_lm.LayeredLM` in eval mode on the CPU.

    Raises:
        KeyError: no checkpoint for (name, seed); the message lists those there are.
        ValueError: a SHA-256 mismatch or a bad entry.
    """
    from safetensors.torch import load

    path = pathlib.Path(RESULTS_FILE if not isinstance(results, (str, pathlib.Path)) else results)
    res = results if isinstance(results, Mapping) else load_results(path)
    key = f"{name}/{seed}"
    if key not in res.get("checkpoints", {}):
        raise KeyError(
            f"no checkpoint for layout {name!r}, seed {seed!r}; there are: "
            f"{', '.join(sorted(res.get('checkpoints', {}))) or 'none'}"
        )
    file, sha = data_entry(res["checkpoints"][key], where=f"{path.name} checkpoints[{key!r}]",
                           folder=path.parent)  # fmt: skip
    data = file.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha:
        raise ValueError(f"refusing {file}: its SHA-256 is {actual}, the results record {sha}")
    c = MixingConfig.from_dict(res["config"])
    model = LayeredLM(layout_plan(name, c), d_model=c.d_model, n_heads=c.n_heads,
                      max_len=c.eval_len)  # fmt: skip
    model.load_state_dict(load(data))
    return model.eval()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the study and write results and checkpoints."""
    p = argparse.ArgumentParser(
        prog="python -m posenc_core.book.studies.mixing_study", description=__doc__.splitlines()[0]
    )
    d = MixingConfig()
    p.add_argument("--out", required=True, help="results JSON (checkpoints go beside it)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seeds", type=int, nargs="+", default=list(d.seeds))
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--layouts", nargs="+", default=list(d.layouts))
    a = p.parse_args(argv)
    c = MixingConfig.from_dict({"seeds": a.seeds, "steps": a.steps, "layouts": a.layouts})
    res = run_mixing_study(c, out=a.out, threads=a.threads)
    print(f"Wrote {a.out}: {len(res['runs'])} runs in {res['seconds']:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
