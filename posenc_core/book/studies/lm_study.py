"""A causal byte-level language model on real text, measured position by position.

Every scheme of :class:`~posenc_core.book.models.byte_lm.ByteLM` is trained on windows of L
bytes of Pygments' source (:mod:`~posenc_core.book.studies.corpus`) for several seeds, then
evaluated on the held-out excerpt in windows of 8L bytes, keeping the loss **per position**
(one curve per seed) so that inside and beyond the training length are never averaged
together. On the trained RoPE models the long-context methods of :data:`METHODS` are switched
in at inference (factors 4 and 8, original length L), and PI and YaRN are briefly fine-tuned at
4L; RoPE is also trained with partial rotary and at other bases, and xPos at other values of
its B, for chapters 8 and 9. Every run records where its attention goes
(:func:`~posenc_core.book.studies.heldout.attention_by_distance`).

:func:`run_lm_study` writes ``lm_study.json`` with the source keys of :data:`CODE_MODULES` and
the SHA-256 of each safetensors checkpoint; :func:`load_lm` loads one, checksum first;
:func:`is_stale` says when the file no longer describes the code. Command line:
``python -m posenc_core.book.studies.lm_study --out posenc_core/book/data/lm_study.json``.
Shapes: b = batch, s = sequence, P = 8L evaluation positions, S = seeds, V = 256.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import math
import pathlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from posenc_core import _validation as check
from posenc_core.book import DATA, data_entry
from posenc_core.book.models.byte_lm import SCHEMES, ByteLM
from posenc_core.book.studies import corpus, heldout, options, provenance

__all__ = [
    "METHODS",
    "CODE_MODULES",
    "LMStudyConfig",
    "train_lm",
    "per_position_loss",
    "run_lm_study",
    "save_checkpoint",
    "load_lm",
    "source_keys",
    "is_stale",
    "load_results",
    "main",
]

RESULTS_FILE = DATA / "lm_study.json"
"""Where ``make study`` writes the results (checkpoints go beside it), in the package's data
folder (:data:`posenc_core.book.DATA`), so they are installed with it."""


def _method(rope_type: str, **extra: float) -> Callable[[LMStudyConfig, float], dict[str, Any]]:
    def params(c: LMStudyConfig, s: float) -> dict[str, Any]:
        l0 = {"original_max_position_embeddings": c.train_len}
        return {"rope_type": rope_type, "factor": s, **({} if rope_type in _NO_L0 else l0), **extra}

    return params


_NO_L0 = ("linear", "ntk")  # the methods that take no original_max_position_embeddings

METHODS: dict[str, Callable[[LMStudyConfig, float], dict[str, Any]]] = {
    "pi": _method("linear"),
    "ntk": _method("ntk"),
    "dynamic": _method("dynamic"),
    "yarn": _method("yarn"),
    "llama3": _method("llama3", low_freq_factor=1.0, high_freq_factor=4.0),
}
"""The long-context methods, name -> the Hugging Face-style scaling dict for (config, factor s).

Position interpolation, NTK-aware, dynamic NTK, YaRN (attention factor 0.1 ln(s) + 1) and Llama
3.1's rule with its own low_freq_factor 1 and high_freq_factor 4 (ratios to L, so they carry
over). Each is evaluated in one pass over the 8L window, so dynamic NTK uses the base for length
8L at every position, as Hugging Face computes it for one forward pass of that length."""

CODE_MODULES = (
    "book.studies.lm_study",
    "book.studies.heldout",
    "book.studies.options",
    "book.studies.corpus",
    "book.models.byte_lm",
    "attention",
    "rope",
    "alibi",
    "t5_bias",
    "sinusoidal",
    "learned",
    "_numerics",
)
"""posenc_core modules whose source determines the study's numbers (a package, such as ``rope``,
counts with every module in its folder)."""


@dataclass(frozen=True)
class LMStudyConfig(options.Options):
    """The language-model study's configuration; the defaults are the book's CPU run.

    Args:
        schemes: positional schemes, drawn from :data:`~posenc_core.book.models.byte_lm.SCHEMES`.
        extra_schemes: trained like ``schemes`` (first seed's checkpoint kept), reported only
            where a chapter asks for them; empty: none.
        xpos_scale_base: xPos's B; None: L/2 (Sun et al. use 512 for a training length of 1024).
        xpos_sweep: more values of B, as multiples of L (each > 0, none the B in use), each an
            xPos model trained for every seed, curves and attention kept, no checkpoint.
        seeds: at least one non-negative seed; it fixes the initialisation and all windows.
        train_len: L, the training length in bytes; eval_factor: windows of ``eval_factor * L``.
        d_model, n_layers, n_heads: model size (the default trains in the CPU budget).
        steps, batch: training steps and windows per step.
        lr: peak AdamW learning rate (betas 0.9, 0.95, no weight decay), after ``warmup`` linear
            steps, cosine-decayed to ``lr / 10``; gradients clipped to norm 1.
        log_every: steps per point of the stored training curve (the block's mean loss).
        base: RoPE and sinusoidal base.
        t5_num_buckets, t5_max_distance: T5's causal buckets; max_distance None means L, so every
            bucket is trained and every distance beyond L falls in the last one.
        factors: scaling factors s of the long-context methods; methods: names in :data:`METHODS`.
        finetune_methods, finetune_factor: methods fine-tuned (from ``methods``), at length
            ``finetune_factor * L`` with that factor.
        finetune_steps: increasing step counts after which the fine-tuned model is evaluated.
        finetune_batch: windows per fine-tune step (default: batch / factor, the same bytes a
            step); finetune_lr: its constant AdamW learning rate.
        rotary_dims: partial-rotary RoPE runs, one per r (even, 2 <= r < d_h); needs ``"rope"``.
        rope_bases: RoPE runs at other bases (each > 1, not ``base``), every seed's checkpoint
            kept; needs ``"rope"``.
        eval_batch: windows per evaluation pass; device: ``"cpu"`` (the book's numbers) or another.

    Raises:
        TypeError, ValueError: naming the option, the value and what is allowed.
    """

    schemes: tuple[str, ...] = ("none", "sinusoidal", "learned", "rope", "alibi", "t5")
    extra_schemes: tuple[str, ...] = ("xpos", "sinusoidal-matched")
    xpos_scale_base: float | None = None
    xpos_sweep: tuple[float, ...] = (0.125, 2.0, 8.0)
    seeds: tuple[int, ...] = (0, 1, 2)
    train_len: int = 64
    eval_factor: int = 8
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    steps: int = 1000
    batch: int = 32
    lr: float = 3e-3
    warmup: int = 50
    log_every: int = 25
    base: float = 10000.0
    t5_num_buckets: int = 32
    t5_max_distance: int | None = None
    factors: tuple[int, ...] = (4, 8)
    methods: tuple[str, ...] = tuple(METHODS)
    finetune_methods: tuple[str, ...] = ("pi", "yarn")
    finetune_factor: int = 4
    finetune_steps: tuple[int, ...] = (25, 50, 100, 200)
    finetune_batch: int | None = None
    finetune_lr: float = 1e-3
    rotary_dims: tuple[int, ...] = (8,)
    rope_bases: tuple[float, ...] = (500000.0,)
    eval_batch: int = 32
    device: str = "cpu"

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            options.normalise(self, name, value)

        for name in _POSITIVE:
            put(name, check.positive_int(name, getattr(self, name)))
        put("warmup", check.non_negative_int("warmup", self.warmup))
        for name in ("lr", "finetune_lr"):
            value = check.real_number(name, getattr(self, name))
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
            put(name, value)
        put("base", check.base_value("base", self.base))
        if self.t5_max_distance is not None:
            put("t5_max_distance", check.positive_int("t5_max_distance", self.t5_max_distance))
        if self.finetune_batch is not None:
            put("finetune_batch", check.positive_int("finetune_batch", self.finetune_batch))
        for name, allowed in (
            ("schemes", tuple(SCHEMES)),
            ("extra_schemes", tuple(SCHEMES)),
            ("methods", tuple(METHODS)),
            ("finetune_methods", tuple(METHODS)),
        ):
            put(name, tuple(check.choice(name[:-1], x, allowed) for x in _listed(self, name)))
        for name in ("methods", "finetune_methods", "schemes", "extra_schemes"):
            if len(set(getattr(self, name))) != len(getattr(self, name)):
                raise ValueError(f"{name} must not repeat an entry, got {getattr(self, name)}")
        if set(self.schemes) & set(self.extra_schemes):
            raise ValueError(
                f"extra_schemes {self.extra_schemes} must not repeat schemes {self.schemes}"
            )
        if self.xpos_scale_base is not None:
            value = check.real_number("xpos_scale_base", self.xpos_scale_base)
            if not value > 0:
                raise ValueError(f"xpos_scale_base must be > 0, got {value}")
            put("xpos_scale_base", value)
        sweep = tuple(check.real_number("xpos_sweep", b) for b in _listed(self, "xpos_sweep"))
        if any(not b > 0 for b in sweep) or len(set(sweep)) != len(sweep):
            raise ValueError(f"xpos_sweep must hold distinct values > 0, got {sweep}")
        if self.xpos_base in [b * self.train_len for b in sweep]:
            raise ValueError(
                f"xpos_sweep {sweep} (multiples of L = {self.train_len}) must not repeat the B "
                f"in use, {self.xpos_base}"
            )
        put("xpos_sweep", sweep)
        put("seeds", tuple(check.non_negative_int("seed", s) for s in _listed(self, "seeds")))
        put("factors", tuple(check.positive_int("factor", s) for s in _listed(self, "factors")))
        put(
            "finetune_steps",
            tuple(check.positive_int("finetune_step", s) for s in _listed(self, "finetune_steps")),
        )
        if list(self.finetune_steps) != sorted(set(self.finetune_steps)):
            raise ValueError(
                f"finetune_steps must be strictly increasing, got {self.finetune_steps}"
            )
        if self.finetune_methods and "rope" not in self.schemes:
            raise ValueError("finetune_methods need the 'rope' scheme among schemes")
        if not set(self.finetune_methods) <= set(self.methods):
            raise ValueError(
                f"finetune_methods {self.finetune_methods} must be drawn from methods "
                f"{self.methods}"
            )
        if self.finetune_factor > self.eval_factor or self.eval_factor < 2:
            raise ValueError(
                f"need 2 <= eval_factor and finetune_factor <= eval_factor, got "
                f"eval_factor={self.eval_factor}, finetune_factor={self.finetune_factor}"
            )
        head_dim = options.even_head_widths(self.d_model, self.n_heads)
        dims = tuple(check.even_int("rotary_dim", r) for r in _listed(self, "rotary_dims"))
        for r in dims:
            if not 2 <= r < head_dim:
                raise ValueError(
                    f"rotary_dims entries must be even with 2 <= r < head_dim={head_dim} (a "
                    f"partial rotation), got {r}"
                )
        if len(set(dims)) != len(dims):
            raise ValueError(f"rotary_dims must not repeat an entry, got {dims}")
        bases = tuple(check.base_value("rope_base", b) for b in _listed(self, "rope_bases"))
        if len(set(bases)) != len(bases) or self.base in bases:
            raise ValueError(f"rope_bases must be distinct and not base={self.base}, got {bases}")
        if (dims or bases) and "rope" not in self.schemes:
            raise ValueError("rotary_dims and rope_bases need the 'rope' scheme among schemes")
        put("rotary_dims", dims)
        put("rope_bases", bases)
        if not isinstance(self.device, str) or not self.device:
            raise TypeError(f"device must be a device name such as 'cpu', got {self.device!r}")
        if self.eval_len + 1 > corpus.EXCERPT_BYTES:
            raise ValueError(
                f"eval_factor * train_len = {self.eval_len} needs windows longer than the "
                f"held-out excerpt ({corpus.EXCERPT_BYTES} bytes)"
            )

    @property
    def eval_len(self) -> int:
        """The evaluation window, eval_factor * L bytes."""
        return self.eval_factor * self.train_len

    @property
    def all_schemes(self) -> tuple[str, ...]:
        """``schemes`` then ``extra_schemes``: every scheme the study trains."""
        return self.schemes + self.extra_schemes

    @property
    def xpos_base(self) -> float:
        """xPos's B in use (L/2 when ``xpos_scale_base`` is None)."""
        return self.train_len / 2 if self.xpos_scale_base is None else self.xpos_scale_base

    @property
    def sweep_bases(self) -> tuple[float, ...]:
        """The values of B that ``xpos_sweep`` trains (its multiples of L, in bytes)."""
        return tuple(b * self.train_len for b in self.xpos_sweep)

    @property
    def t5_distance(self) -> int:
        """T5's max_distance in use (L when ``t5_max_distance`` is None)."""
        return self.train_len if self.t5_max_distance is None else self.t5_max_distance

    @property
    def ft_batch(self) -> int:
        """Windows per fine-tune step."""
        if self.finetune_batch is not None:
            return self.finetune_batch
        return max(1, self.batch // self.finetune_factor)


_POSITIVE = (
    "train_len",
    "eval_factor",
    "d_model",
    "n_layers",
    "n_heads",
    "steps",
    "batch",
    "log_every",
    "t5_num_buckets",
    "finetune_factor",
    "eval_batch",
)


def _listed(c: LMStudyConfig, name: str) -> tuple:
    return options.listed(name, getattr(c, name), may_be_empty=name in _MAY_BE_EMPTY)


_MAY_BE_EMPTY = ("finetune_methods", "rotary_dims", "rope_bases", "extra_schemes", "xpos_sweep")


def _config(config: object) -> LMStudyConfig:
    if not isinstance(config, LMStudyConfig):
        raise TypeError(f"config must be an LMStudyConfig, got {type(config).__name__}")
    return config


def build_lm(
    scheme: str,
    config: LMStudyConfig,
    seed: int,
    *,
    rotary_dim: int | None = None,
    xpos_scale_base: float | None = None,
    base: float | None = None,
) -> ByteLM:
    """The untrained model of one run: a :class:`~posenc_core.book.models.byte_lm.ByteLM` built
    after ``torch.manual_seed(seed)`` (``rotary_dim``: partial rotary, ``"rope"`` only;
    ``xpos_scale_base``: xPos's B, None: the config's; ``base``: None, the config's)."""
    c = _config(config)
    torch.manual_seed(seed)
    return ByteLM(
        scheme,
        d_model=c.d_model,
        n_layers=c.n_layers,
        n_heads=c.n_heads,
        max_len=c.eval_len,
        base=c.base if base is None else base,
        t5_num_buckets=c.t5_num_buckets,
        t5_max_distance=c.t5_distance,
        rotary_dim=rotary_dim,
        xpos_scale_base=c.xpos_base if xpos_scale_base is None else xpos_scale_base,
    )


# ----------------------------------------------------------------------------- training


def _windows(data: torch.Tensor, n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """``n`` random windows of ``length + 1`` bytes of ``data`` -> ``(n, length + 1)``."""
    start = torch.randint(len(data) - length - 1, (n,), generator=g)
    return data[start[:, None] + torch.arange(length + 1)]


def _lr_at(step: int, c: LMStudyConfig) -> float:
    """Linear warm-up to lr, then a cosine to lr / 10 (GPT-2 / nanoGPT's schedule)."""
    if step < c.warmup:
        return c.lr * (step + 1) / c.warmup
    t = (step - c.warmup) / max(1, c.steps - c.warmup)
    return c.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def _train(
    model: ByteLM,
    data: torch.Tensor,
    steps: int,
    batch: int,
    length: int,
    lr: Callable[[int], float],
    g: torch.Generator,
    device: str,
    on_block: Callable[[int], None] | None = None,
    block: int = 25,
) -> list[float]:
    """AdamW on next-byte cross-entropy; returns the loss of every step."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr(0), betas=(0.9, 0.95), weight_decay=0.0)
    losses = []
    for step in range(steps):
        w = _windows(data, batch, length, g).to(device)  # (b, s + 1)
        logits = model(w[:, :-1])  # (b, s, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), w[:, 1:].reshape(-1))
        for group in opt.param_groups:
            group["lr"] = lr(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if on_block is not None and (step + 1) % block == 0:
            on_block(step + 1)
    model.eval()
    return losses


def train_lm(
    scheme: str,
    config: LMStudyConfig,
    seed: int,
    *,
    train_data: torch.Tensor | None = None,
    rotary_dim: int | None = None,
    xpos_scale_base: float | None = None,
    base: float | None = None,
) -> tuple[ByteLM, list[list[float]]]:
    """Train one scheme at length L for one seed.

    Args:
        scheme: one of the config's schemes; config: an :class:`LMStudyConfig`.
        seed: the run's seed (initialisation; the training windows use ``seed + 1000``).
        train_data: int64 ``(n,)`` bytes; None: the verified training split
            (:func:`~posenc_core.book.studies.corpus.corpus_split`).
        rotary_dim, xpos_scale_base, base: partial rotary (``"rope"``), xPos's B (``"xpos"``),
            the RoPE or sinusoidal base; None: the whole head, the config's.

    Returns:
        ``(model, curve)``: the trained model (eval mode, on ``config.device``) and
        ``[[step, mean loss of the block ending there], ...]`` every ``log_every`` steps.
    """
    c = _config(config)
    check.choice("scheme", scheme, tuple(SCHEMES))
    seed = check.non_negative_int("seed", seed)
    data = corpus.corpus_split("train") if train_data is None else train_data
    model = build_lm(
        scheme, c, seed, rotary_dim=rotary_dim, xpos_scale_base=xpos_scale_base, base=base
    ).to(c.device)
    g = torch.Generator().manual_seed(seed + 1000)
    losses = _train(model, data, c.steps, c.batch, c.train_len, lambda s: _lr_at(s, c), g, c.device)
    return model, _blocks(losses, c.log_every)


def _blocks(losses: Sequence[float], every: int) -> list[list[float]]:
    return [
        [min(i + every, len(losses)), float(np.mean(losses[i : i + every]))]
        for i in range(0, len(losses), every)
    ]


# ----------------------------------------------------------------------------- evaluation


def per_position_loss(
    model: ByteLM,
    data: torch.Tensor,
    length: int,
    *,
    batch: int = 32,
    max_windows: int | None = None,
) -> np.ndarray:
    """Mean next-byte cross-entropy at every position of windows of ``length`` bytes.

    Position t's loss is that of predicting byte t + 1 from bytes 0 .. t of its window
    (consecutive windows of ``length + 1`` bytes,
    :func:`~posenc_core.book.studies.heldout.position_loss`).

    Args:
        model: a :class:`~posenc_core.book.models.byte_lm.ByteLM` (run under ``torch.no_grad()``,
            its mode left as is).
        data: int64 ``(n,)`` bytes, e.g. :func:`~posenc_core.book.studies.corpus.heldout_excerpt`.
        length: window length P (the study: 8L).
        batch: windows per forward pass; max_windows: use only the first ones (None: all).

    Returns:
        float64 array ``(P,)``, in nats, the mean over windows.

    Raises:
        ValueError: ``data`` holds no whole window.
    """
    if not isinstance(model, ByteLM):
        raise TypeError(f"model must be a ByteLM, got {type(model).__name__}")
    device = next(model.parameters()).device
    return heldout.position_loss(
        lambda tokens: model(tokens.to(device)), data, length, batch=batch, max_windows=max_windows
    )


# ----------------------------------------------------------------------------- the study


def _key(*parts: object) -> str:
    return "/".join(str(p) for p in parts)


def run_lm_study(
    config: LMStudyConfig | None = None,
    *,
    out: str | pathlib.Path | None = None,
    on_progress: Callable[[str], None] | None = print,
    train_data: torch.Tensor | None = None,
    eval_data: torch.Tensor | None = None,
    threads: int | None = 2,
) -> dict[str, Any]:
    """Train every scheme and seed, evaluate per position, apply and fine-tune the methods.

    Args:
        config: an :class:`LMStudyConfig` (None: the defaults, the book's run).
        out: the results JSON to write, checkpoints ``lm_<scheme>_seed<k>.safetensors`` beside it
            (every RoPE seed, the first seed of the others); None: write nothing.
        on_progress: called with one line per finished run; None: silent.
        train_data, eval_data: int64 byte tensors instead of the verified training split and the
            held-out excerpt (for tests).
        threads: torch threads during the study (restored after); None: leave as is.

    Returns:
        the results dict (as written to ``out``, see :func:`load_results`).
    """
    c = LMStudyConfig() if config is None else _config(config)
    if on_progress is not None and not callable(on_progress):
        raise TypeError(f"on_progress must be callable or None, got {on_progress!r}")
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(check.positive_int("threads", threads))
    try:
        return _run(c, out, on_progress, train_data, eval_data)
    finally:
        torch.set_num_threads(old_threads)


def _plan(c: LMStudyConfig) -> list[tuple[str, float]]:
    """(job, relative cost in bytes processed; evaluation counted at a third) per job."""
    ev = (corpus.EXCERPT_BYTES // c.eval_len) * c.eval_len / 3
    jobs = [
        (f"train {s} seed {seed}", c.steps * c.batch * c.train_len + ev)
        for s in c.all_schemes
        for seed in c.seeds
    ]
    jobs += [
        (f"train {label} seed {seed}", c.steps * c.batch * c.train_len + ev)
        for *_, label in _variants(c)
        for seed in c.seeds
    ]
    jobs += [
        (f"train xpos B={b:g} seed {seed}", c.steps * c.batch * c.train_len + ev)
        for b in c.sweep_bases
        for seed in c.seeds
    ]
    if "rope" in c.schemes:
        jobs += [(f"scaling seed {seed}", ev * len(c.methods) * len(c.factors)) for seed in c.seeds]
        ft = c.finetune_steps[-1] * c.ft_batch * c.finetune_factor * c.train_len
        jobs += [(f"fine-tune {m} seed {seed}", ft + ev * len(c.finetune_steps))
                 for m in c.finetune_methods for seed in c.seeds]  # fmt: skip
    return jobs


def _variants(c: LMStudyConfig) -> list[tuple[str, Any, str, Any, str]]:
    """RoPE variants trained for every seed: (results key, run, option, value, model name)."""
    partial = [("partial", r, "rotary_dim", r, f"rope-r{r}") for r in c.rotary_dims]
    return partial + [("bases", f"{b:g}", "base", b, f"rope-b{b:g}") for b in c.rope_bases]


def _run(c, out, on_progress, train_data, eval_data) -> dict[str, Any]:
    start, cpu_start = time.perf_counter(), time.process_time()
    train = corpus.corpus_split("train") if train_data is None else train_data
    held = corpus.heldout_excerpt() if eval_data is None else eval_data
    plan = _plan(c)
    total, done = sum(cost for _, cost in plan), 0.0
    job = iter(plan)

    def finished() -> None:
        nonlocal done
        name, cost = next(job)
        done += cost
        if on_progress is not None:
            elapsed = time.perf_counter() - start
            left = elapsed / done * (total - done)
            on_progress(f"[{elapsed:6.1f} s, about {left:5.0f} s left] {name}")

    def evaluate(model: ByteLM) -> list[float]:
        return per_position_loss(model, held, c.eval_len, batch=c.eval_batch).tolist()

    def attention(model: ByteLM) -> dict[str, Any]:  # queries inside L and in [4L, 8L)
        far, near = (c.eval_len // 2, c.eval_len), (c.train_len // 2, c.train_len)
        bands = {"in": near, "far": far}
        return heldout.attention_record(model.attention_weights, held, c.eval_len, bands)

    runs, models = {}, {}
    for scheme in c.all_schemes:
        for seed in c.seeds:
            t0 = time.perf_counter()
            model, curve = train_lm(scheme, c, seed, train_data=train)
            runs[_key(scheme, seed)] = {
                "scheme": scheme,
                "seed": seed,
                "curve": curve,
                "loss": evaluate(model),
                "attention": attention(model),
                "params": sum(p.numel() for p in model.parameters()),
                "seconds": time.perf_counter() - t0,
            }
            models[scheme, seed] = model
            finished()
    variants: dict[str, dict] = {"partial": {}, "bases": {}}
    for group, name, option, value, label in _variants(c):
        for seed in c.seeds:
            t0 = time.perf_counter()
            model, curve = train_lm("rope", c, seed, train_data=train, **{option: value})
            variants[group][_key(name, seed)] = {option: value, "seed": seed, "curve": curve,
                                                 "loss": evaluate(model),
                                                 "seconds": time.perf_counter() - t0}  # fmt: skip
            models[label, seed] = model
            finished()
    sweep = {}
    for b in c.sweep_bases:
        for seed in c.seeds:
            t0 = time.perf_counter()
            model, curve = train_lm("xpos", c, seed, train_data=train, xpos_scale_base=b)
            sweep[_key(f"{b:g}", seed)] = {
                "scale_base": b,
                "seed": seed,
                "curve": curve,
                "loss": evaluate(model),
                "attention": attention(model),
                "seconds": time.perf_counter() - t0,
            }
            finished()
    scaling, finetune = {}, {}
    if "rope" in c.schemes:
        for seed in c.seeds:
            model = models["rope", seed]
            for method in c.methods:
                for s in c.factors:
                    params = METHODS[method](c, float(s))
                    model.set_rope_scaling(params)
                    scaling[_key(method, s, seed)] = {
                        "method": method,
                        "factor": s,
                        "seed": seed,
                        "scaling": params,
                        "attention_factor": model.rope_scaling.attention_scaling,
                        "loss": evaluate(model),
                    }
            model.set_rope_scaling(None)
            finished()
        for method in c.finetune_methods:
            for seed in c.seeds:
                finetune[_key(method, c.finetune_factor, seed)] = _finetune(
                    models["rope", seed], method, seed, c, train, evaluate
                )
                finished()
    results = {
        "config": c.to_dict(),
        "seeds": list(c.seeds),
        "corpus": corpus.corpus_summary(),
        "runs": runs,
        **variants,
        "xpos_sweep": sweep,
        "scaling": scaling,
        "finetune": finetune,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu_start,
        "threads": torch.get_num_threads(),
    }
    if out is not None:
        results = _save(results, models, c, pathlib.Path(out))
    return results


def _finetune(model, method, seed, c, train, evaluate) -> dict[str, Any]:
    """Fine-tune a copy of a trained RoPE model with ``method`` at its factor and length."""
    m = copy.deepcopy(model)
    params = METHODS[method](c, float(c.finetune_factor))
    m.set_rope_scaling(params)
    g = torch.Generator().manual_seed(seed + 2000)
    length = c.finetune_factor * c.train_len
    losses, by_step, done = [], {}, 0
    for stop in c.finetune_steps:
        losses += _train(
            m, train, stop - done, c.ft_batch, length, lambda s: c.finetune_lr, g, c.device
        )
        done = stop
        by_step[str(stop)] = evaluate(m)
    return {
        "method": method,
        "factor": c.finetune_factor,
        "seed": seed,
        "scaling": params,
        "length": length,
        "batch": c.ft_batch,
        "lr": c.finetune_lr,
        "curve": _blocks(losses, max(1, c.finetune_steps[-1] // 20)),
        "loss_by_step": by_step,
    }


# ----------------------------------------------------------------------------- files


def source_keys(modules: Sequence[str] = CODE_MODULES) -> dict[str, str]:
    """The source key of every module in ``modules``
    (:func:`~posenc_core.book.studies.provenance.source_keys`)."""
    return provenance.source_keys(modules)


def save_checkpoint(model: ByteLM, path: str | pathlib.Path) -> str:
    """Write a model's weights as safetensors; return the file's SHA-256.

    Args:
        model: a :class:`~posenc_core.book.models.byte_lm.ByteLM`.
        path: the ``.safetensors`` file to write.

    Returns:
        the lowercase hex SHA-256 of the file written.
    """
    from safetensors.torch import save

    if not isinstance(model, ByteLM):
        raise TypeError(f"model must be a ByteLM, got {type(model).__name__}")
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    data = save(tensors, metadata={"scheme": model.scheme})
    path = pathlib.Path(path)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


_CURVES = ("runs", "partial", "bases", "xpos_sweep", "scaling", "finetune")


def _save(results, models, c, out: pathlib.Path) -> dict[str, Any]:
    out.parent.mkdir(parents=True, exist_ok=True)
    checkpoints = {}
    for scheme in c.all_schemes:
        for seed in c.seeds if scheme == "rope" else c.seeds[:1]:
            name = f"lm_{scheme.replace('-', '_')}_seed{seed}.safetensors"
            sha = save_checkpoint(models[scheme, seed], out.parent / name)
            checkpoints[_key(scheme, seed)] = {"file": name, "sha256": sha}
    for *_, label in _variants(c):
        for seed in c.seeds:
            name = f"lm_{label.replace('-', '_')}_seed{seed}.safetensors"
            sha = save_checkpoint(models[label, seed], out.parent / name)
            checkpoints[_key(label, seed)] = {"file": name, "sha256": sha}
    saved = {
        "source_keys": source_keys(),
        **{k: v for k, v in results.items() if k not in _CURVES},
        "versions": provenance.library_versions(pygments=corpus.installed_pygments_version()),
        "checkpoints": checkpoints,
        **{k: provenance.round_floats(results[k], 4) for k in _CURVES},
    }
    saved["seconds"], saved["cpu_seconds"] = (
        round(results["seconds"], 1),
        round(results["cpu_seconds"], 1),
    )
    out.write_text(json.dumps(saved, separators=(",", ":")) + "\n", encoding="utf-8")
    return saved


def load_results(path: str | pathlib.Path | None = None) -> dict[str, Any]:
    """Read a results file (None: the committed one, :data:`RESULTS_FILE`)."""
    return json.loads(pathlib.Path(RESULTS_FILE if path is None else path).read_text("utf-8"))


def is_stale(results: Mapping[str, Any]) -> list[str]:
    """Why a results file no longer describes the code and the defaults (empty: it does)."""
    problems = []
    changed = provenance.changed_modules(results.get("source_keys", {}), CODE_MODULES)
    if changed:
        problems.append(f"code changed since the study ran (modules: {', '.join(changed)})")
    if results.get("config") != LMStudyConfig().to_dict():
        problems.append("LMStudyConfig's defaults differ from the recorded configuration")
    return problems


def load_lm(
    scheme: str,
    seed: int = 0,
    *,
    rotary_dim: int | None = None,
    base: float | None = None,
    results: str | pathlib.Path | Mapping[str, Any] | None = None,
) -> ByteLM:
    """A trained model of the study, for a chapter: SHA-256 checked before it is read.

    Args:
        scheme: a scheme with a checkpoint (every RoPE seed; the first seed of the others).
        seed: the run's seed.
        rotary_dim, base: a partial-rotary or other-base RoPE run (every seed has a checkpoint);
            None: the scheme's run.
        results: the results file (path or loaded dict; None: the committed one); checkpoints are
            looked up beside it (beside the committed one for a dict).

    Returns:
        the :class:`~posenc_core.book.models.byte_lm.ByteLM` in eval mode on the CPU, plain RoPE.

    Raises:
        KeyError: no checkpoint for (scheme, seed); the message lists those there are.
        ValueError: a bad entry (:func:`~posenc_core.book.data_entry`) or a SHA-256 mismatch.
    """
    from safetensors.torch import load

    path = pathlib.Path(RESULTS_FILE if not isinstance(results, (str, pathlib.Path)) else results)
    res = results if isinstance(results, Mapping) else load_results(path)
    if rotary_dim is not None and base is not None:
        raise ValueError(f"give rotary_dim or base, not both (got {rotary_dim!r} and {base!r})")
    variant = "" if rotary_dim is None else f"-r{rotary_dim}"
    variant = variant if base is None else f"-b{check.base_value('base', base):g}"
    key = _key(scheme + variant, seed)
    if key not in res.get("checkpoints", {}):
        raise KeyError(
            f"no checkpoint for scheme={scheme!r}, seed={seed!r}, rotary_dim={rotary_dim!r}, "
            f"base={base!r} (keys scheme/seed, scheme-r<rotary_dim>/seed, scheme-b<base>/seed); "
            f"there are: {', '.join(sorted(res.get('checkpoints', {}))) or 'none'}"
        )
    where = f"{path.name} checkpoints[{key!r}]"
    file, sha = data_entry(res["checkpoints"][key], where=where, folder=path.parent)
    data = file.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha:
        raise ValueError(
            f"refusing {file}: its SHA-256 is {actual}, but the results file records "
            f"{sha}; the checkpoint was changed or belongs to another run"
        )
    c = LMStudyConfig.from_dict(res["config"])
    model = build_lm(scheme, c, 0, rotary_dim=rotary_dim, base=base)
    model.load_state_dict(load(data))
    return model.eval()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the study (defaults or overrides) and write results and checkpoints."""
    p = argparse.ArgumentParser(
        prog="python -m posenc_core.book.studies.lm_study", description=__doc__.splitlines()[0]
    )
    d = LMStudyConfig()
    p.add_argument("--out", required=True, help="results JSON (checkpoints go beside it)")
    p.add_argument("--device", default=d.device)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seeds", type=int, nargs="+", default=list(d.seeds))
    for name in ("train_len", "d_model", "n_layers", "n_heads", "steps", "batch"):
        p.add_argument("--" + name.replace("_", "-"), type=int, default=getattr(d, name))
    p.add_argument("--lr", type=float, default=d.lr)
    a = p.parse_args(argv)
    names = ("device", "seeds", "train_len", "d_model", "n_layers", "n_heads", "steps", "batch")
    options = {k: getattr(a, k) for k in names + ("lr",)}
    res = run_lm_study(LMStudyConfig.from_dict(options), out=a.out, threads=a.threads)
    print(f"Wrote {a.out}: {len(res['runs'])} runs in {res['seconds']:.1f} s wall")
    return 0


if __name__ == "__main__":
    sys.exit(main())
