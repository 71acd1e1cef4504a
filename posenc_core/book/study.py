"""Learned versus fixed positional encodings, measured: a tiny Transformer on two synthetic tasks.

A small pre-LN, bidirectional (non-causal) Transformer encoder whose positional scheme is a
constructor argument (``"none"``, ``"sinusoidal"``, ``"learned"``, ``"rope"``, ``"alibi"``), all
built from posenc_core's modules, is trained on sequences of length 1 .. L and evaluated at every
length 1 .. 4L on synthetic tasks generated on the fly from a seed. The study's two:

* ``"first"``: every output position must give the first input token (finding "position 0" is
  an absolute-position question);
* ``"lookback"``: output position i must give the input token k steps back, i - k, or a special
  NONE token when i < k (a relative-position question).

Two more are available for experiments: ``"reverse"`` (output i gives token n - 1 - i) and
``"swap"`` (neighbouring pairs 0-1, 2-3, ... trade places, which needs each position's parity).

Without positions a non-causal encoder is permutation-equivariant (chapter 1): the output at a
position depends only on its own token and on the multiset of all tokens, so none of these targets
can be produced above the best position-free guess; the ``"none"`` scheme measures that floor.

:class:`StudyConfig` holds the study's configuration (checked once, when it is made);
:func:`run_study` trains every scheme on every task for several seeds and returns a plain,
JSON-ready dict, and :func:`runs_for` picks one (task, scheme)'s runs out of it;
:func:`save_results` / :func:`load_results` write and read it together with the code version (a
SHA-256 of this module and the modules it builds on), the configuration, the seeds and the
library versions. Run it from a shell with ``python -m posenc_core.book.study --out FILE``.

Book layer: imports the core, torch, numpy and the standard library; figures live in
:mod:`posenc_core.book.viz`. Notation for tensor shapes: b = batch, s = sequence, d = d_model,
V = vocabulary (input tokens), C = V + 1 output classes (the tokens and NONE).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import pathlib
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .. import _validation as check
from ..analysis import cosine_similarity_matrix, similarity_by_offset
from ..attention import MultiHeadSelfAttention
from ..learned import LearnedPositionalEmbedding
from ..rope import RotaryEmbedding
from ..sinusoidal import SinusoidalPositionalEncoding

SCHEMES = ("none", "sinusoidal", "learned", "rope", "alibi")
"""Positional schemes a :class:`TinyTransformer` accepts."""

STUDY_SCHEMES = ("none", "sinusoidal", "learned", "learned_long", "rope", "alibi")
"""The positional schemes the study compares. ``"learned_long"`` is a learned table with
``eval_factor * L`` rows, trained (like every other scheme) on lengths up to L only."""

TASKS = ("reverse", "lookback", "first", "swap")
"""The synthetic tasks :func:`make_batch` can generate (the study uses ``first`` and
``lookback``)."""

CODE_MODULES = (
    "book.study",
    "attention",
    "rope",
    "alibi",
    "sinusoidal",
    "learned",
    "analysis",
    "_numerics",
)
"""posenc_core modules whose source determines the study's numbers (hashed into the code version;
a package, such as ``rope``, counts with every module in its folder)."""


@dataclass(frozen=True)
class StudyConfig:
    """The study's configuration (the defaults are what ``make study`` runs), checked once here.

    Every other function of this module trusts a ``StudyConfig`` it is given. The results file
    stores :meth:`to_dict`; :meth:`from_dict` reads it back (missing keys take the defaults).

    Args:
        tasks: tasks to train on, drawn from :data:`TASKS` (non-empty).
        schemes: positional schemes to compare, drawn from :data:`STUDY_SCHEMES` (non-empty).
        seeds: seeds (non-negative integers, non-empty); each seeds a model's initialisation,
            its training data and its evaluation data.
        train_len: longest training length L (training lengths are drawn from min_len .. L).
        min_len: shortest training length, 1 <= min_len <= train_len.
        eval_factor: evaluation runs at every length 1 .. eval_factor * L.
        vocab: input tokens V >= 2 (the model has V + 1 output classes: the tokens and NONE).
        k: look-back distance of the ``"lookback"`` task.
        d_model: model width (even, divisible by ``n_heads`` into even head widths).
        n_heads: attention heads.
        n_layers: Transformer blocks.
        steps: training steps (one batch each).
        batch: training batch size.
        lr: peak Adam learning rate (> 0), decayed on a cosine to a tenth.
        eval_batch: sequences per evaluation length.
        base: frequency base of the sinusoidal table and of RoPE (> 1).
        log_every: steps between progress lines (loss curves are stored as block means over
            ``log_every // 10`` steps).

    Raises:
        TypeError: a value of the wrong kind (``tasks``, ``schemes`` or ``seeds`` not a
            non-empty list, a non-integer size).
        ValueError: a value out of range (a size below 1, ``min_len > train_len``, ``vocab < 2``,
            ``lr <= 0``, ``base <= 1``, an unknown task or scheme, a negative seed).
    """

    tasks: tuple[str, ...] = ("first", "lookback")
    schemes: tuple[str, ...] = STUDY_SCHEMES
    seeds: tuple[int, ...] = (0, 1, 2)
    train_len: int = 32
    min_len: int = 1
    eval_factor: int = 4
    vocab: int = 16
    k: int = 3
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    steps: int = 300
    batch: int = 32
    lr: float = 3e-3
    eval_batch: int = 16
    base: float = 10000.0
    log_every: int = 50

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:  # a frozen dataclass: normalise in place
            object.__setattr__(self, name, value)

        for name in _POSITIVE_INT_FIELDS:
            put(name, check.positive_int(name, getattr(self, name)))
        if self.min_len > self.train_len:
            raise ValueError(f"min_len={self.min_len} must be <= train_len={self.train_len}")
        if self.vocab < 2:
            raise ValueError(f"vocab must be >= 2, got {self.vocab}")
        put("lr", check.real_number("lr", self.lr))
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        put("base", check.base_value("base", self.base))
        for name, allowed in (("tasks", TASKS), ("schemes", STUDY_SCHEMES)):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Sequence) or not value:
                raise TypeError(
                    f"{name} must be a non-empty list drawn from {allowed}, got {value!r}"
                )
            put(name, tuple(check.choice(name[:-1], x, allowed) for x in value))
        if isinstance(self.seeds, (int, str)) or not self.seeds:
            raise TypeError(f"seeds must be a non-empty list of integers, got {self.seeds!r}")
        put("seeds", tuple(check.non_negative_int("seed", s) for s in self.seeds))

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-ready dict (lists for ``tasks``, ``schemes``, ``seeds``)."""
        return {
            f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
            for f in fields(self)
        }

    @classmethod
    def from_dict(cls, options: Mapping[str, Any]) -> StudyConfig:
        """A configuration from a dict such as :meth:`to_dict` writes (missing keys: defaults).

        Raises:
            TypeError: ``options`` is not a mapping, or names an option that does not exist.
        """
        if not isinstance(options, Mapping):
            raise TypeError(
                f"a study configuration must be a dict of options, got {type(options).__name__}"
            )
        known = [f.name for f in fields(cls)]
        unknown = set(options) - set(known)
        if unknown:
            raise TypeError(f"unknown study option(s) {sorted(unknown)}; known: {sorted(known)}")
        return cls(**options)

    def replace(self, **overrides: Any) -> StudyConfig:
        """A copy with some options changed (checked like any new configuration)."""
        return StudyConfig.from_dict({**self.to_dict(), **overrides})


_POSITIVE_INT_FIELDS = (
    "train_len",
    "min_len",
    "eval_factor",
    "vocab",
    "k",
    "d_model",
    "n_heads",
    "n_layers",
    "steps",
    "batch",
    "eval_batch",
    "log_every",
)


def _config(config: object) -> StudyConfig:
    """``config`` if it is a :class:`StudyConfig` (its values were checked when it was made)."""
    if not isinstance(config, StudyConfig):
        raise TypeError(
            "config must be a StudyConfig (StudyConfig.from_dict reads a dict such as a results "
            f"file's 'config'), got {type(config).__name__}"
        )
    return config


# ----------------------------------------------------------------------------- tasks


def make_batch(
    task: str, batch: int, length: int, vocab: int, generator: torch.Generator, *, k: int = 3
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of a synthetic task, drawn from ``generator``.

    Args:
        task: ``"first"`` (target i = token 0), ``"lookback"`` (target i = token i-k, or the
            NONE class ``vocab`` when i < k), ``"reverse"`` (target i = token n-1-i) or
            ``"swap"`` (target i = token i XOR 1; the last token of an odd length stays put).
        batch: number of sequences b.
        length: sequence length n >= 1.
        vocab: number of input tokens V >= 2 (tokens 0 .. V-1).
        generator: a CPU ``torch.Generator`` (the only source of randomness).
        k: the look-back distance of ``"lookback"``, >= 1.

    Returns:
        ``(x, y)``: input tokens ``(b, n)`` and targets ``(b, n)`` in 0 .. V (int64, CPU).
    """
    check.choice("task", task, TASKS)
    batch, length, k = (
        check.positive_int("batch", batch),
        check.positive_int("length", length),
        check.positive_int("k", k),
    )
    vocab = check.positive_int("vocab", vocab)
    if vocab < 2:
        raise ValueError(f"vocab must be >= 2, got {vocab}")
    x = torch.randint(vocab, (batch, length), generator=generator)  # (b, n)
    if task == "reverse":
        y = x.flip(-1)
    elif task == "first":
        y = x[:, :1].expand(-1, length).clone()
    elif task == "swap":
        idx = torch.arange(length) ^ 1
        idx[idx >= length] = length - 1  # an odd length: the last token stays where it is
        y = x[:, idx]
    else:
        y = torch.full_like(x, vocab)
        y[:, k:] = x[:, : max(length - k, 0)]
    return x, y


# ----------------------------------------------------------------------------- model


class _Block(nn.Module):
    """Pre-LN Transformer block: x + attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(
        self, d_model: int, n_heads: int, rope: RotaryEmbedding | None, alibi: bool
    ) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = MultiHeadSelfAttention(d_model, n_heads, rope=rope, alibi=alibi)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), causal=causal)
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    """A small pre-LN Transformer encoder that predicts a class at every position.

    Args:
        vocab: number of input tokens V; the output has V + 1 classes (the tokens and NONE).
        d_model: width (even; divisible by ``n_heads``).
        n_heads: attention heads.
        n_layers: blocks.
        scheme: one of :data:`SCHEMES`. ``"sinusoidal"`` and ``"learned"`` add a table to the
            token embeddings (:class:`~posenc_core.sinusoidal.SinusoidalPositionalEncoding`,
            :class:`~posenc_core.learned.LearnedPositionalEmbedding`); ``"rope"`` rotates queries
            and keys in every layer (:class:`~posenc_core.rope.RotaryEmbedding`); ``"alibi"``
            adds ALiBi biases in every layer (symmetric, ``-m|i-j|``, since the model is
            bidirectional unless ``causal``); ``"none"`` uses no position at all.
        max_len: rows of the learned table (longer inputs raise posenc_core's ``ValueError``);
            rows precomputed by the sinusoidal module (longer ones come from the formula).
        base: frequency base of the sinusoidal table and of RoPE.
        causal: use a causal mask (default False: every position sees the whole sequence).
        learned_init_std: standard deviation of the learned table's initial rows; 1.0 (the
            default) is the scale of the token embeddings (``nn.Embedding`` draws N(0, 1)), so
            position and content start on an equal footing. (BERT draws both at 0.02.)
    """

    def __init__(
        self,
        vocab: int,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        *,
        scheme: str = "sinusoidal",
        max_len: int = 32,
        base: float = 10000.0,
        causal: bool = False,
        learned_init_std: float = 1.0,
    ) -> None:
        super().__init__()
        self.vocab = check.positive_int("vocab", vocab)
        self.d_model = check.even_int("d_model", d_model)
        n_heads, n_layers = (
            check.positive_int("n_heads", n_heads),
            check.positive_int("n_layers", n_layers),
        )
        if d_model % n_heads or (d_model // n_heads) % 2:
            raise ValueError(
                f"n_heads={n_heads} must divide d_model={d_model} into even head widths"
            )
        self.scheme = check.choice("scheme", scheme, SCHEMES)
        self.max_len = check.positive_int("max_len", max_len)
        self.causal = check.boolean("causal", causal)
        self.embed = nn.Embedding(vocab, d_model)
        self.pos: nn.Module | None = None
        if scheme == "sinusoidal":
            self.pos = SinusoidalPositionalEncoding(d_model, max_len, base=base)
        elif scheme == "learned":
            self.pos = LearnedPositionalEmbedding(max_len, d_model, init_std=learned_init_std)
        head_dim = d_model // n_heads
        self.blocks = nn.ModuleList(
            _Block(
                d_model,
                n_heads,
                RotaryEmbedding(head_dim, base=base) if scheme == "rope" else None,
                scheme == "alibi",
            )
            for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab + 1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits for every position.

        Args:
            tokens: ``(b, s)`` integer tokens in 0 .. V-1.

        Returns:
            ``(b, s, V + 1)`` logits.

        Raises:
            ValueError: for a learned table, if s exceeds its ``max_len`` rows.
        """
        check.tensor("tokens", tokens, min_dim=2)
        if tokens.dim() != 2 or tokens.dtype.is_floating_point:
            raise ValueError(
                "tokens must be an integer tensor of shape (b, s), "
                f"got {tokens.dtype} {tuple(tokens.shape)}"
            )
        x = self.embed(tokens)  # (b, s, d)
        if self.pos is not None:
            x = self.pos(x)
        for block in self.blocks:
            x = block(x, self.causal)
        return self.head(self.ln_f(x))  # (b, s, C)

    def position_table(self) -> torch.Tensor | None:
        """The learned position table ``(max_len, d)`` (a detached copy), or None for other
        schemes."""
        return (
            self.pos.weight.detach().clone()
            if isinstance(self.pos, LearnedPositionalEmbedding)
            else None
        )


def parameter_counts(model: TinyTransformer) -> dict[str, int]:
    """Trainable parameters of a model: ``total`` and ``positional`` (the learned table's rows)."""
    total = sum(p.numel() for p in model.parameters() if p.requires_grad)
    table = model.position_table()
    return {"total": int(total), "positional": 0 if table is None else int(table.numel())}


def learned_table_parameters(max_len: int, d_model: int) -> int:
    """Parameters of a learned absolute table: ``max_len * d_model`` (BERT-base: 512 x 768)."""
    return check.positive_int("max_len", max_len) * check.positive_int("d_model", d_model)


# ----------------------------------------------------------------------------- training


def build_model(scheme: str, config: StudyConfig, seed: int) -> TinyTransformer:
    """The study's model for a study scheme, initialised from ``seed`` without touching the
    global random state (``"learned_long"``: a learned table with ``eval_factor * L`` rows).

    Args:
        scheme: one of :data:`STUDY_SCHEMES`.
        config: the study's :class:`StudyConfig` (``vocab``, ``d_model``, ``n_heads``,
            ``n_layers``, ``train_len``, ``eval_factor``, ``base``).
        seed: initialisation seed.

    Returns:
        a :class:`TinyTransformer` in float32 on the CPU.
    """
    c = _config(config)
    check.choice("scheme", scheme, STUDY_SCHEMES)
    max_len = c.train_len * (c.eval_factor if scheme == "learned_long" else 1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(check.non_negative_int("seed", seed))
        return TinyTransformer(
            c.vocab,
            c.d_model,
            c.n_heads,
            c.n_layers,
            scheme="learned" if scheme == "learned_long" else scheme,
            max_len=max_len,
            base=c.base,
        )


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(x)  # (b, s, C)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


def train_model(
    model: TinyTransformer,
    task: str,
    config: StudyConfig,
    seed: int,
    *,
    device: str | torch.device = "cpu",
    on_step: Callable[[int, float], None] | None = None,
) -> list[float]:
    """Train ``model`` in place on random lengths in [min_len, train_len], one length per batch.

    Adam, learning rate ``lr`` with a cosine decay to a tenth, gradients clipped at norm 1. The
    data come from ``torch.Generator().manual_seed(seed)``, so a run is deterministic on the CPU.

    Args:
        model: a :class:`TinyTransformer` (moved to ``device``).
        task: one of :data:`TASKS`.
        config: the study's :class:`StudyConfig` (``steps``, ``batch``, ``lr``, ``train_len``,
            ``min_len``, ``vocab``, ``k``).
        seed: data seed.
        device: where to train.
        on_step: called as ``on_step(step, loss)`` after every step (step counts from 1).

    Returns:
        the training loss at every step, a list of ``steps`` floats.
    """
    c = _config(config)
    check.choice("task", task, TASKS)
    gen = torch.Generator().manual_seed(check.non_negative_int("seed", seed) + 1_000_003)
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=c.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t / c.steps))
    )
    losses = []
    for step in range(1, c.steps + 1):
        n = int(torch.randint(c.min_len, c.train_len + 1, (), generator=gen))
        x, y = make_batch(task, c.batch, n, c.vocab, gen, k=c.k)
        loss = _loss(model, x.to(device), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    return losses


@torch.no_grad()
def evaluate(
    model: TinyTransformer,
    task: str,
    config: StudyConfig,
    seed: int,
    *,
    device: str | torch.device = "cpu",
) -> tuple[list[float | None], str | None]:
    """Token accuracy at every length 1 .. eval_factor * train_len on fresh seeded batches.

    Args:
        model, task, config, device: as in :func:`train_model` (uses ``eval_factor``,
            ``train_len``, ``eval_batch``, ``vocab``, ``k``).
        seed: evaluation seed (the batches differ from the training ones).

    Returns:
        ``(accuracy, error)``: a list with one accuracy per length (None where the model has no
        row for that length: a learned table shorter than the sequence), and the message of the
        first such ``ValueError`` (None if there was none).
    """
    c = _config(config)
    gen = torch.Generator().manual_seed(check.non_negative_int("seed", seed) + 2_000_003)
    model.to(device).eval()
    acc: list[float | None] = []
    error = None
    for n in range(1, c.eval_factor * c.train_len + 1):
        x, y = make_batch(task, c.eval_batch, n, c.vocab, gen, k=c.k)
        try:
            pred = model(x.to(device)).argmax(-1).cpu()  # (b, n)
        except ValueError as err:  # posenc_core's learned table: no row for this position
            error = error or str(err)
            acc.append(None)
            continue
        acc.append(float((pred == y).double().mean()))
    return acc, error


def table_summary(table: torch.Tensor) -> dict[str, Any]:
    """How a learned position table is organised.

    Args:
        table: ``(n, d)`` rows.

    Returns:
        dict with ``neighbour_similarity`` (mean cosine similarity of rows p and p+1),
        ``by_offset`` (mean similarity at offsets 0 .. n-1,
        :func:`~posenc_core.analysis.similarity_by_offset`),
        ``neighbour_is_nearest`` (fraction of rows whose most similar other row is p-1 or p+1)
        and ``norms`` (row norms).
    """
    check.tensor("table", table, min_dim=2, floating=True)
    sim = cosine_similarity_matrix(table)  # (n, n)
    n = sim.shape[0]
    off = sim.clone().fill_diagonal_(-2.0)
    best = off.argmax(dim=1)  # (n,)
    nearest = ((best - torch.arange(n)).abs() == 1).double().mean()
    curve = similarity_by_offset(table)
    return {
        "neighbour_similarity": float(curve[1]) if n > 1 else float("nan"),
        "by_offset": [float(c) for c in curve],
        "neighbour_is_nearest": float(nearest),
        "norms": [float(x) for x in table.detach().double().norm(dim=-1)],
    }


def _progress_printer(every: int) -> Callable[[dict[str, Any]], None]:
    def show(event: dict[str, Any]) -> None:
        if event["event"] == "step" and event["step"] % every and event["step"] != event["steps"]:
            return
        head = (
            f"[{event['run']}/{event['runs']}] {event['task']:8s} {event['scheme']:12s} "
            f"seed {event['seed']}"
        )
        if event["event"] == "step":
            print(
                f"{head}  step {event['step']:4d}/{event['steps']}  loss {event['loss']:.4f}",
                flush=True,
            )
        elif event["event"] == "done":
            print(
                f"{head}  done in {event['seconds']:.1f} s, accuracy at L {event['acc_at_L']:.3f}",
                flush=True,
            )
        elif event["event"] == "skipped":
            print(f"{head}  already done (resumed)", flush=True)

    return show


def run_key(task: str, scheme: str, seed: int) -> str:
    """The key of one run in ``results["runs"]``: ``"task/scheme/seed"``."""
    return f"{task}/{scheme}/{seed}"


def run_study(
    config: StudyConfig | None = None,
    *,
    device: str | torch.device = "cpu",
    threads: int | None = 1,
    on_progress: Callable[[dict[str, Any]], None] | None | str = "print",
    resume: Mapping[str, Any] | None = None,
    keep_tables: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """Train and evaluate every (task, scheme, seed) of the study.

    Progress goes to ``on_progress`` as event dicts (``event`` = ``"step"``, ``"done"`` or
    ``"skipped"``, with ``run``, ``runs``, ``task``, ``scheme``, ``seed`` and, for steps,
    ``step``, ``steps``, ``loss``); the default prints a line every ``log_every`` steps. A
    ``KeyboardInterrupt`` stops the study after the finished runs: the result is returned with
    ``interrupted`` True and can be passed back as ``resume`` to continue.

    Args:
        config: the study's :class:`StudyConfig` (default: ``StudyConfig()``, what
            ``make study`` runs).
        device: torch device for training and evaluation (``"cuda"`` on a GPU).
        threads: CPU threads for the duration of the study (restored afterwards). Models this
            small run fastest on one thread (the default); None keeps torch's setting.
        on_progress: callback, ``"print"`` (default) or None for silence.
        resume: an earlier (possibly interrupted) result with the same configuration; its
            finished runs are kept, not retrained.
        keep_tables: keep learned position tables (as nested lists) in the runs.
        **overrides: options of :class:`StudyConfig` to change (``steps``, ``d_model``,
            ``seeds``, ``schemes``, ...); ``run_study(steps=60)`` is
            ``run_study(StudyConfig(steps=60))``.

    Returns:
        dict with ``config`` (:meth:`StudyConfig.to_dict`), ``runs`` (key :func:`run_key` ->
        ``task``, ``scheme``, ``seed``, ``curve`` (loss per step), ``acc`` (accuracy per length
        1 .. eval_factor*L, None for no row), ``no_row_error``, ``params``, ``seconds``, and for
        learned tables ``table`` / ``table_init`` (if ``keep_tables``) with their
        :func:`table_summary` as ``geometry`` / ``geometry_init``, ``geometry_update`` (of the
        change ``table - table_init`` in rows 0 .. L-1), ``update_ratio`` (norm of that change
        over the norm of those initial rows) and ``geometry_trained_rows`` for rows 0 .. L-1 of
        a longer table), ``interrupted``, ``seconds`` and ``cpu_seconds``.
    """
    c = StudyConfig() if config is None else _config(config)
    if overrides:
        c = c.replace(**overrides)
    if on_progress == "print":
        on_progress = _progress_printer(c.log_every)
    elif on_progress is not None and not callable(on_progress):
        raise TypeError(f"on_progress must be callable, 'print' or None, got {on_progress!r}")
    runs: dict[str, Any] = {}
    if resume is not None:
        if not isinstance(resume, Mapping) or "config" not in resume or "runs" not in resume:
            raise TypeError(
                "resume must be a result of run_study (a dict with 'config' and 'runs')"
            )
        if StudyConfig.from_dict(resume["config"]) != c:
            raise ValueError(
                "resume was produced with a different configuration; pass the same options"
            )
        runs = dict(resume["runs"])
    old_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(check.positive_int("threads", threads))
    plan = [(t, s, seed) for t in c.tasks for s in c.schemes for seed in c.seeds]
    start, cpu_start = time.perf_counter(), time.process_time()
    interrupted = False
    try:
        for i, (task, scheme, seed) in enumerate(plan, start=1):
            info = {"run": i, "runs": len(plan), "task": task, "scheme": scheme, "seed": seed}
            if run_key(task, scheme, seed) in runs:
                if on_progress:
                    on_progress({"event": "skipped", **info})
                continue
            t0 = time.perf_counter()
            model = build_model(scheme, c, seed)
            table_init = model.position_table()

            def step(s: int, loss: float, info: dict = info) -> None:
                if on_progress:
                    on_progress(
                        {"event": "step", "step": s, "steps": c.steps, "loss": loss, **info}
                    )

            curve = train_model(model, task, c, seed, device=device, on_step=step)
            acc, error = evaluate(model, task, c, seed, device=device)
            run: dict[str, Any] = {
                "task": task,
                "scheme": scheme,
                "seed": seed,
                "curve": curve,
                "acc": acc,
                "no_row_error": error,
                "params": parameter_counts(model),
            }
            table = model.position_table()
            if table is not None:
                table = table.cpu()
                run["geometry"], run["geometry_init"] = (
                    table_summary(table),
                    table_summary(table_init),
                )
                update = (table - table_init)[
                    : c.train_len
                ]  # what training wrote (rows past L get none)
                run["geometry_update"] = table_summary(update)
                run["update_ratio"] = float(update.norm() / table_init[: c.train_len].norm())
                if table.shape[0] > c.train_len:  # rows past L were never trained
                    run["geometry_trained_rows"] = table_summary(table[: c.train_len])
                if keep_tables:
                    run["table"], run["table_init"] = table.tolist(), table_init.tolist()
            run["seconds"] = time.perf_counter() - t0
            runs[run_key(task, scheme, seed)] = run
            if on_progress:
                on_progress(
                    {
                        "event": "done",
                        "seconds": run["seconds"],
                        "acc_at_L": acc[c.train_len - 1],
                        **info,
                    }
                )
    except KeyboardInterrupt:
        interrupted = True
        if on_progress:
            print(f"Interrupted: {len(runs)} of {len(plan)} runs finished and kept.", flush=True)
    finally:
        torch.set_num_threads(old_threads)
    prior = resume or {}
    return {
        "config": c.to_dict(),
        "runs": runs,
        "interrupted": interrupted,
        "seconds": time.perf_counter() - start + float(prior.get("seconds", 0.0)),
        "cpu_seconds": time.process_time() - cpu_start + float(prior.get("cpu_seconds", 0.0)),
        "threads": torch.get_num_threads() if threads is None else threads,
    }


# ----------------------------------------------------------------------------- summaries


def runs_for(results: Mapping[str, Any], task: str, scheme: str) -> list[dict[str, Any]]:
    """The finished runs of one (task, scheme), one per seed, sorted by seed.

    Args:
        results: a :func:`run_study` result (or one read by :func:`load_results`).
        task: a task of the study, such as ``"first"``.
        scheme: a scheme of the study, such as ``"learned"``.

    Returns:
        the run dicts (as stored in ``results["runs"]``), in increasing order of ``seed``.

    Raises:
        KeyError: if ``results`` holds no run of that task and scheme; the message lists the
            (task, scheme) pairs it does hold.
    """
    runs = [r for r in results["runs"].values() if r["task"] == task and r["scheme"] == scheme]
    if not runs:
        held = sorted({(r["task"], r["scheme"]) for r in results["runs"].values()})
        raise KeyError(
            f"no finished runs for task={task!r}, scheme={scheme!r}; the results hold "
            + (", ".join(f"{t}/{s}" for t, s in held) or "no runs")
        )
    return sorted(runs, key=lambda r: r["seed"])


def accuracy_summary(results: Mapping[str, Any], task: str, scheme: str) -> dict[str, np.ndarray]:
    """Mean and spread over seeds of the accuracy at every length.

    Args:
        results: a :func:`run_study` result (or one read by :func:`load_results`).
        task, scheme: which runs.

    Returns:
        dict of float64 arrays of shape ``(eval_factor * L,)``: ``lengths`` (1 ..), ``mean``,
        ``std`` (population standard deviation over seeds), ``min``, ``max``; NaN where the
        model had no row for that length.
    """
    runs = runs_for(results, task, scheme)
    a = np.array(
        [[np.nan if x is None else x for x in r["acc"]] for r in runs], dtype=float
    )  # (seeds, lengths)
    with np.errstate(all="ignore"):
        return {
            "lengths": np.arange(1, a.shape[1] + 1, dtype=float),
            "mean": a.mean(0),
            "std": a.std(0),
            "min": a.min(0),
            "max": a.max(0),
        }


def band_accuracy(
    results: Mapping[str, Any], task: str, scheme: str, lo: int, hi: int
) -> tuple[float, float]:
    """Mean over lengths lo .. hi (inclusive) of the accuracy, then mean and std over seeds.

    Returns:
        ``(mean, std)``; NaN if the model has no row for any of those lengths.
    """
    runs = runs_for(results, task, scheme)
    per_seed = []
    for r in runs:
        vals = r["acc"][lo - 1 : hi]
        per_seed.append(np.nan if any(x is None for x in vals) else float(np.mean(vals)))
    return float(np.mean(per_seed)), float(np.std(per_seed))


def loss_blocks(curve: Sequence[float], every: int) -> list[list[float]]:
    """Average a per-step loss curve over consecutive blocks of ``every`` steps.

    Single-step losses are noisy here (each batch has one random length), so curves are stored
    and drawn as block means.

    Returns:
        ``[[last step of the block, mean loss], ...]`` (the last block may be shorter).
    """
    every = check.positive_int("every", every)
    return [
        [min(i + every, len(curve)), float(np.mean(curve[i : i + every]))]
        for i in range(0, len(curve), every)
    ]


def training_curves(
    results: Mapping[str, Any], task: str, scheme: str
) -> tuple[np.ndarray, np.ndarray]:
    """The (block-averaged) loss curves of a (task, scheme)'s seeds.

    Works on a :func:`run_study` result (per-step curves, averaged over blocks of ``log_every``
    / 10 steps, at least 1) and on one read by :func:`load_results` (already stored as blocks).

    Returns:
        ``(steps, losses)``: float64 arrays ``(blocks,)`` and ``(seeds, blocks)``.
    """
    runs = runs_for(results, task, scheme)
    every = max(1, results["config"]["log_every"] // 10)
    blocks = [
        r["curve"] if isinstance(r["curve"][0], list) else loss_blocks(r["curve"], every)
        for r in runs
    ]
    steps = np.array([b[0] for b in blocks[0]], dtype=float)
    return steps, np.array([[b[1] for b in bl] for bl in blocks], dtype=float)


def geometry_summary(
    results: Mapping[str, Any], task: str, scheme: str, which: str = "geometry"
) -> dict[str, float]:
    """Mean and spread over seeds of a learned table's geometry (see :func:`table_summary`).

    Args:
        results: a study result.
        task, scheme: which runs (scheme ``"learned"`` or ``"learned_long"``).
        which: ``"geometry"`` (the trained table), ``"geometry_init"`` (the same table at
            initialisation), ``"geometry_update"`` (the change training made, trained minus
            initial, rows 0 .. L-1) or ``"geometry_trained_rows"`` (rows 0 .. L-1 of a longer
            table).

    Returns:
        dict with ``neighbour_similarity`` and ``neighbour_is_nearest`` (means over seeds) and
        their population standard deviations ``neighbour_similarity_std``,
        ``neighbour_is_nearest_std``.
    """
    runs = runs_for(results, task, scheme)
    if any(which not in r for r in runs):
        raise KeyError(f"no {which!r} for task={task!r}, scheme={scheme!r} (learned tables only)")
    out = {}
    for name in ("neighbour_similarity", "neighbour_is_nearest"):
        vals = [r[which][name] for r in runs]
        out[name], out[name + "_std"] = float(np.mean(vals)), float(np.std(vals))
    return out


# ----------------------------------------------------------------------------- results file


def _module_files(name: str) -> list[pathlib.Path]:
    """Source files of ``posenc_core.<name>``: the module, or every module of a package."""
    root = pathlib.Path(__file__).resolve().parents[1]  # posenc_core/
    path = root.joinpath(*name.split("."))
    if path.is_dir():
        return sorted(path.glob("*.py"))
    return [path.with_suffix(".py")]


def code_hashes() -> dict[str, str]:
    """SHA-256 of the source of every module in :data:`CODE_MODULES` (for a package, of its
    files' names and bytes in order)."""
    hashes = {}
    for name in CODE_MODULES:
        digest = hashlib.sha256()
        for path in _module_files(name):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        hashes[name] = digest.hexdigest()
    return hashes


def code_version() -> str:
    """One SHA-256 over :func:`code_hashes` (changes when any of those modules changes)."""
    joined = "".join(f"{m}:{h}\n" for m, h in sorted(code_hashes().items()))
    return hashlib.sha256(joined.encode()).hexdigest()


def _round(x: Any, digits: int) -> Any:
    if isinstance(x, float):
        return x if math.isnan(x) else round(x, digits)
    if isinstance(x, list):
        return [_round(y, digits) for y in x]
    if isinstance(x, dict):
        return {k: _round(y, digits) for k, y in x.items()}
    return x


def save_results(
    results: Mapping[str, Any], path: str | pathlib.Path, *, table_seeds: Sequence[int] = (0,)
) -> pathlib.Path:
    """Write a study result as compact JSON with its provenance.

    Curves are stored as block means (:func:`loss_blocks`, blocks of ``log_every`` / 10 steps),
    numbers rounded to 4 decimals, and learned tables (rounded to 3) kept only for the seeds in
    ``table_seeds``; initial tables are summarised by their ``geometry_init`` only.
    The file records ``code_version`` and ``code_hashes``, the configuration and seeds, and the
    torch, numpy and Python versions.

    Returns:
        the path written.
    """
    path = pathlib.Path(path)
    every = max(1, results["config"]["log_every"] // 10)
    runs = {}
    for key, r in results["runs"].items():
        r = dict(r)
        r["curve"] = loss_blocks(r["curve"], every)
        r.pop("table_init", None)  # its geometry is kept as geometry_init
        table = r.pop("table", None)
        r = _round(r, 4)
        if table is not None and r["seed"] in table_seeds:
            r["table"] = _round(table, 3)
        runs[key] = r
    out = {
        "code_version": code_version(),
        "code_hashes": code_hashes(),
        "config": dict(results["config"]),
        "seeds": list(results["config"]["seeds"]),
        "versions": {
            "torch": torch.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
        "interrupted": bool(results["interrupted"]),
        "seconds": round(float(results["seconds"]), 1),
        "cpu_seconds": round(float(results["cpu_seconds"]), 1),
        "threads": results.get("threads"),
        "runs": runs,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, separators=(",", ":")) + "\n", encoding="utf-8")
    return path


def load_results(path: str | pathlib.Path) -> dict[str, Any]:
    """Read a file written by :func:`save_results` (curves come back as ``[step, mean loss]``
    blocks)."""
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


def is_stale(results: Mapping[str, Any]) -> list[str]:
    """Why a saved result no longer describes the current code and :class:`StudyConfig`'s
    defaults (empty list: it does)."""
    problems = []
    if results.get("code_version") != code_version():
        changed = [
            m for m, h in code_hashes().items() if results.get("code_hashes", {}).get(m) != h
        ]
        problems.append(
            f"code changed since the study ran (modules: {', '.join(changed) or 'none'})"
        )
    if results.get("config") != StudyConfig().to_dict():
        problems.append("StudyConfig's defaults differ from the recorded configuration")
    if results.get("interrupted"):
        problems.append("the recorded study was interrupted")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run the study with the defaults (or overrides) and write the results file."""
    p = argparse.ArgumentParser(
        prog="python -m posenc_core.book.study", description=__doc__.splitlines()[0]
    )
    p.add_argument("--out", required=True, help="JSON file to write")
    defaults = StudyConfig()
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--d-model", type=int, default=defaults.d_model)
    p.add_argument("--seeds", type=int, nargs="+", default=list(defaults.seeds))
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    results = run_study(
        device=a.device, threads=a.threads, steps=a.steps, d_model=a.d_model, seeds=a.seeds
    )
    path = save_results(results, a.out)
    print(
        f"Wrote {path}: {len(results['runs'])} runs in {results['seconds']:.1f} s wall, "
        f"{results['cpu_seconds']:.1f} s CPU{' (interrupted)' if results['interrupted'] else ''}"
    )
    return 130 if results["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
