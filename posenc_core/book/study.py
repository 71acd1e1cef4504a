"""Learned versus fixed positional encodings, measured: a tiny Transformer on synthetic tasks,
as an encoder and as a decoder, accuracy reported position by position.

A small pre-LN Transformer whose positional scheme is a constructor argument (``"none"``,
``"sinusoidal"``, ``"learned"``, ``"rope"``, ``"alibi"``), built from posenc_core's modules, is
trained on sequences of length 1 .. L in two **settings**:

* ``"encoder"``: bidirectional (every position sees the whole sequence), as BERT. ALiBi is then
  the symmetric bias ``-m|i-j|``, as MosaicBERT and JinaBERT (jina-embeddings-v2) use it.
* ``"decoder"``: causal (position i sees 0 .. i), as GPT. ALiBi is Press et al.'s ``-m(i-j)``.

and tested on sequences of length L, 2L and 4L, with the accuracy kept **per position**, so that
positions inside the training length (< L) and beyond it are never averaged together. The tasks:

* ``"first"``: every output position gives the first input token (an absolute-position
  question: where is position 0?). Well posed in both settings.
* ``"lookback"``: output i gives the token k steps back, i - k, or a NONE class when i < k. The
  target depends only on the offset k, never on where i is: shift the whole sequence and the
  rule is unchanged. This is the task where relative position is what matters; a scheme that
  encodes offsets (RoPE, ALiBi) can apply the same rule at any position, one that encodes
  absolute positions must learn it separately for each position it sees, and has seen none
  beyond L. Well posed in both settings.
* ``"reverse"`` (output i gives token n - 1 - i) and ``"swap"`` (pairs 0-1, 2-3, ... trade
  places) are available for experiments in the encoder only: their answer lies in the future
  (token n - 1 - i, token i + 1), which a causal decoder cannot see, so the study never trains
  them causally (:data:`CAUSAL_TASKS`).

Initialisation follows the models that use each scheme, as
:class:`~posenc_core.book.lm.ByteLM` does: GPT-2's (linear layers and embeddings N(0, 0.02),
biases 0, the output projections of attention and MLP N(0, 0.02 / sqrt(2 n_layers))), the
learned table N(0, 0.02) (BERT, GPT-2) with ``eval_factor * L`` rows (rows L .. 4L - 1 are never
reached in training, so they keep their initial values), and for the sinusoidal scheme the token
embeddings N(0, 1/d) multiplied by sqrt(d) at the input (Vaswani et al. Sec. 3.4), so that tokens
and the table (entries of size 1) start on one scale.

Without positions an encoder is permutation-equivariant (chapter 1), so neither task can be done
above the best position-free guess. With only the symmetric ALiBi bias an encoder is still
equivariant under **reversal** of the sequence, which caps both tasks near 50%:
:func:`reversal_cap` computes the cap.

:class:`StudyConfig` holds the configuration (checked once, when it is made); :func:`run_study`
trains every (setting, task, scheme, seed) and returns a JSON-ready dict; :func:`runs_for`,
:func:`position_accuracy`, :func:`band_accuracy`, :func:`training_curves` and
:func:`accuracy_curves` read it; :func:`save_results` / :func:`load_results` write and read it
with the code version (a SHA-256 of this module and the modules it builds on), the configuration,
the seeds and the library versions. Run it from a shell with
``python -m posenc_core.book.study --out FILE`` (``make study`` writes :data:`RESULTS_FILE`).

Book layer: imports the core, torch, numpy and the standard library. Notation for tensor shapes:
b = batch, s or n = sequence, d = d_model, V = vocabulary (input tokens), C = V + 1 output classes
(the tokens and NONE), S = seeds.
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
from . import DATA

SCHEMES = ("none", "sinusoidal", "learned", "rope", "alibi")
"""Positional schemes a :class:`TinyTransformer` accepts (and the study compares)."""

SETTINGS = ("encoder", "decoder")
"""``"encoder"``: bidirectional attention; ``"decoder"``: causal attention."""

TASKS = ("first", "lookback", "reverse", "swap")
"""The synthetic tasks :func:`make_batch` can generate (the study uses ``first`` and
``lookback``)."""

CAUSAL_TASKS = ("first", "lookback")
"""The tasks well posed in a causal decoder, whose target at position i is a token at or before i.
(``reverse`` and ``swap`` ask for a later token, which a causal model never sees.)"""

RESULTS_FILE = DATA / "learned_vs_fixed.json"
"""The committed results that chapter 5 reads (``make study`` writes them), in the package's data
folder (:data:`posenc_core.book.DATA`), so they are installed with it."""

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

INIT_STD = 0.02
"""GPT-2's (and BERT's) initial standard deviation of weights, embeddings and the learned
table."""


@dataclass(frozen=True)
class StudyConfig:
    """The study's configuration (the defaults are what ``make study`` runs), checked once here.

    Every other function of this module trusts a ``StudyConfig`` it is given. The results file
    stores :meth:`to_dict`; :meth:`from_dict` reads it back (missing keys take the defaults).

    Args:
        settings: drawn from :data:`SETTINGS` (non-empty).
        tasks: drawn from :data:`TASKS` (non-empty). In the ``"decoder"`` setting only those of
            :data:`CAUSAL_TASKS` are run (the others are skipped: they are not well posed).
        schemes: drawn from :data:`SCHEMES` (non-empty).
        seeds: seeds (non-negative integers, non-empty); each seeds a model's initialisation,
            its training data and its evaluation data.
        train_len: longest training length L (training lengths are drawn from min_len .. L).
        min_len: shortest training length, 1 <= min_len <= train_len.
        eval_factor: evaluation at lengths L, 2L, ... up to eval_factor * L (doubling); the
            learned table has eval_factor * L rows.
        vocab: input tokens V >= 2 (the model has V + 1 output classes: the tokens and NONE).
        k: look-back distance of the ``"lookback"`` task.
        d_model: model width (even, divisible by ``n_heads`` into even head widths).
        n_heads: attention heads.
        n_layers: Transformer blocks.
        steps: training steps (one batch each).
        batch: training batch size.
        lr: peak Adam learning rate (> 0), decayed on a cosine to a tenth.
        eval_batch: sequences per evaluation length (accuracy per position is their mean).
        base: frequency base of the sinusoidal table and of RoPE (> 1).
        log_every: steps between progress lines and between points of the in-range accuracy
            curve (loss curves are stored as block means over ``log_every // 10`` steps).

    Raises:
        TypeError: a value of the wrong kind (a list option not a non-empty list, a
            non-integer size).
        ValueError: a value out of range (a size below 1, ``min_len > train_len``, ``vocab < 2``,
            ``lr <= 0``, ``base <= 1``, an unknown setting, task or scheme, a negative seed).
    """

    settings: tuple[str, ...] = SETTINGS
    tasks: tuple[str, ...] = ("first", "lookback")
    schemes: tuple[str, ...] = SCHEMES
    seeds: tuple[int, ...] = (0, 1, 2)
    train_len: int = 32
    min_len: int = 1
    eval_factor: int = 4
    vocab: int = 16
    k: int = 3
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    steps: int = 800
    batch: int = 32
    lr: float = 3e-3
    eval_batch: int = 256
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
        for name, allowed in (("settings", SETTINGS), ("tasks", TASKS), ("schemes", SCHEMES)):
            value = getattr(self, name)
            if isinstance(value, str) or not isinstance(value, Sequence) or not value:
                raise TypeError(
                    f"{name} must be a non-empty list drawn from {allowed}, got {value!r}"
                )
            put(name, tuple(check.choice(name[:-1], x, allowed) for x in value))
        if isinstance(self.seeds, (int, str)) or not self.seeds:
            raise TypeError(f"seeds must be a non-empty list of integers, got {self.seeds!r}")
        put("seeds", tuple(check.non_negative_int("seed", s) for s in self.seeds))
        if d_h_bad := (self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2):
            raise ValueError(
                f"n_heads={self.n_heads} must divide d_model={self.d_model} into even head "
                f"widths (remainder {d_h_bad})"
            )
        if not self.plan():
            raise ValueError(
                f"settings {self.settings} and tasks {self.tasks} leave nothing to run: the "
                f"decoder runs only {CAUSAL_TASKS}"
            )

    @property
    def eval_lengths(self) -> tuple[int, ...]:
        """The evaluation lengths L, 2L, 4L, ... up to eval_factor * L."""
        out, n = [], self.train_len
        while n < self.eval_factor * self.train_len:
            out.append(n)
            n *= 2
        return tuple(out + [self.eval_factor * self.train_len])

    def plan(self) -> list[tuple[str, str, str, int]]:
        """Every (setting, task, scheme, seed) the study runs, in order (decoder: causal tasks
        only)."""
        return [
            (setting, task, scheme, seed)
            for setting in self.settings
            for task in self.tasks
            if setting == "encoder" or task in CAUSAL_TASKS
            for scheme in self.schemes
            for seed in self.seeds
        ]

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-ready dict (lists for the list options)."""
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


def target_index(task: str, length: int, k: int = 3) -> list[int | None]:
    """Which input position each output position of a task copies (None: the NONE class).

    Args:
        task: one of :data:`TASKS`.
        length: sequence length n >= 1.
        k: the look-back distance of ``"lookback"``.

    Returns:
        list of n input positions, one per output position i (``first``, 0; ``lookback``,
        i - k, or None for i < k; ``reverse``, n - 1 - i; ``swap``, i XOR 1, and the last
        position of an odd length itself).
    """
    check.choice("task", task, TASKS)
    n, k = check.positive_int("length", length), check.positive_int("k", k)
    rule: dict[str, Callable[[int], int | None]] = {
        "first": lambda i: 0,
        "lookback": lambda i: i - k if i >= k else None,
        "reverse": lambda i: n - 1 - i,
        "swap": lambda i: min(i ^ 1, n - 1),
    }
    return [rule[task](i) for i in range(n)]


def make_batch(
    task: str, batch: int, length: int, vocab: int, generator: torch.Generator, *, k: int = 3
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of a synthetic task, drawn from ``generator``: uniform random tokens and, at
    every position, the token :func:`target_index` names (or NONE, the class ``vocab``).

    Args:
        task: one of :data:`TASKS`.
        batch: number of sequences b.
        length: sequence length n >= 1.
        vocab: number of input tokens V >= 2 (tokens 0 .. V-1).
        generator: a CPU ``torch.Generator`` (the only source of randomness).
        k: the look-back distance of ``"lookback"``, >= 1.

    Returns:
        ``(x, y)``: input tokens ``(b, n)`` and targets ``(b, n)`` in 0 .. V (int64, CPU).
    """
    batch = check.positive_int("batch", batch)
    vocab = check.positive_int("vocab", vocab)
    if vocab < 2:
        raise ValueError(f"vocab must be >= 2, got {vocab}")
    idx = target_index(task, length, k)
    x = torch.randint(vocab, (batch, length), generator=generator)  # (b, n)
    none = torch.tensor([j is None for j in idx])  # (n,)
    gather = torch.tensor([0 if j is None else j for j in idx])  # (n,)
    y = x[:, gather].masked_fill(none, vocab)  # (b, n)
    return x, y


def reversal_cap(task: str, length: int, vocab: int, k: int = 3) -> np.ndarray:
    """The most a reversal-equivariant model can score, position by position, on average with
    the mirror position.

    An encoder whose only positional signal is symmetric ALiBi (bias ``-m|i-j|``, the same for
    i - j = +t and -t) gives, at position i of the sequence x, exactly what it gives at position
    n - 1 - i of the reversed sequence. Random tokens are as likely reversed as not, so the same
    prediction must serve two targets: t(x, i) and the target at n - 1 - i of reversed x. One
    prediction hits both only when they agree, which has probability q_i (1 if both are NONE or
    the same input position, 1/V for two different random tokens, 0 for a token against NONE).
    Hence ``acc(i) + acc(n - 1 - i) <= 1 + q_i``; the returned ``(1 + q_i) / 2`` bounds the
    mean accuracy over any set of positions closed under the mirror (for example the whole
    sequence). For ``first`` and ``lookback`` at n >> k it is about (1 + 1/V) / 2.

    Args:
        task: one of :data:`TASKS`.
        length: sequence length n.
        vocab: tokens V.
        k: look-back distance.

    Returns:
        float64 array ``(n,)``.
    """
    vocab = check.positive_int("vocab", vocab)
    idx = target_index(task, length, k)
    n = len(idx)
    q = []
    for i in range(n):
        a = idx[i]
        b = None if idx[n - 1 - i] is None else n - 1 - idx[n - 1 - i]  # index into x
        if a is None or b is None:
            q.append(1.0 if a is None and b is None else 0.0)
        else:
            q.append(1.0 if a == b else 1.0 / vocab)
    return (1.0 + np.array(q)) / 2.0


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
    """A small pre-LN Transformer that predicts a class at every position.

    Initialised as GPT-2 (nanoGPT's ``_init_weights``): linear weights and the token embedding
    N(0, 0.02), biases 0, the output projections of attention and MLP N(0, 0.02 / sqrt(2
    n_layers)), LayerNorms 1 and 0. With the sinusoidal scheme the token embedding is instead
    N(0, 1/d) and multiplied by sqrt(d) at the input (Vaswani et al. 2017, Sec. 3.4), so that
    tokens and table start on one scale (with 0.02 the table's entries, of size 1, outweigh the
    tokens fifty to one; :class:`~posenc_core.book.lm.ByteLM` measured that this stalls
    training).

    Args:
        vocab: number of input tokens V; the output has V + 1 classes (the tokens and NONE).
        d_model: width (even; divisible by ``n_heads``).
        n_heads: attention heads.
        n_layers: blocks.
        scheme: one of :data:`SCHEMES`. ``"sinusoidal"`` and ``"learned"`` add a table to the
            token embeddings (:class:`~posenc_core.sinusoidal.SinusoidalPositionalEncoding`,
            :class:`~posenc_core.learned.LearnedPositionalEmbedding`); ``"rope"`` rotates queries
            and keys in every layer (:class:`~posenc_core.rope.RotaryEmbedding`); ``"alibi"``
            adds ALiBi biases in every layer (symmetric ``-m|i-j|`` when bidirectional,
            ``-m(i-j)`` with the mask when ``causal``); ``"none"`` uses no position at all.
        max_len: rows of the learned table (longer inputs raise posenc_core's ``ValueError``);
            rows precomputed by the sinusoidal module (longer ones come from the formula).
        base: frequency base of the sinusoidal table and of RoPE.
        causal: use a causal mask (default False: every position sees the whole sequence).
        learned_init_std: standard deviation of the learned table's initial rows (0.02, BERT's
            and GPT-2's).
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
        learned_init_std: float = INIT_STD,
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
        self._init_weights(n_layers)
        if scheme == "sinusoidal":
            nn.init.normal_(self.embed.weight, 0.0, d_model**-0.5)
            self.pos = SinusoidalPositionalEncoding(d_model, max_len, base=base, scale=d_model**0.5)
        elif scheme == "learned":
            self.pos = LearnedPositionalEmbedding(max_len, d_model, init_std=learned_init_std)

    def _init_weights(self, n_layers: int) -> None:
        """GPT-2's initialisation (nanoGPT's ``_init_weights`` and its scaled projections)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, INIT_STD)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for block in self.blocks:
            for proj in (block.attn.out, block.mlp[2]):
                nn.init.normal_(proj.weight, 0.0, INIT_STD / math.sqrt(2 * n_layers))

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


def build_model(
    scheme: str, config: StudyConfig, seed: int, setting: str = "encoder"
) -> TinyTransformer:
    """The study's model, initialised from ``seed`` without touching the global random state.

    Args:
        scheme: one of :data:`SCHEMES` (a learned table gets ``eval_factor * L`` rows).
        config: the study's :class:`StudyConfig` (``vocab``, ``d_model``, ``n_heads``,
            ``n_layers``, ``train_len``, ``eval_factor``, ``base``).
        seed: initialisation seed.
        setting: ``"encoder"`` (bidirectional) or ``"decoder"`` (causal).

    Returns:
        a :class:`TinyTransformer` in float32 on the CPU.
    """
    c = _config(config)
    check.choice("scheme", scheme, SCHEMES)
    check.choice("setting", setting, SETTINGS)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(check.non_negative_int("seed", seed))
        return TinyTransformer(
            c.vocab,
            c.d_model,
            c.n_heads,
            c.n_layers,
            scheme=scheme,
            max_len=c.train_len * c.eval_factor,
            base=c.base,
            causal=setting == "decoder",
        )


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(x)  # (b, s, C)
    return F.cross_entropy(logits.flatten(0, 1), y.flatten())


@torch.no_grad()
def _accuracy_by_position(
    model: TinyTransformer, task: str, c: StudyConfig, length: int, batch: int, gen, device
) -> np.ndarray:
    x, y = make_batch(task, batch, length, c.vocab, gen, k=c.k)
    pred = model(x.to(device)).argmax(-1).cpu()  # (b, n)
    return (pred == y).double().mean(0).numpy()  # (n,)


def train_model(
    model: TinyTransformer,
    task: str,
    config: StudyConfig,
    seed: int,
    *,
    device: str | torch.device = "cpu",
    on_step: Callable[[int, float], None] | None = None,
) -> tuple[list[float], list[list[float]]]:
    """Train ``model`` in place on random lengths in [min_len, train_len], one length per batch.

    Adam, learning rate ``lr`` with a cosine decay to a tenth, gradients clipped at norm 1. The
    data come from ``torch.Generator().manual_seed(seed)``, so a run is deterministic on the CPU.
    Every ``log_every`` steps the in-range accuracy (the mean over positions of sequences of
    length L, on one fixed batch of ``eval_batch // 2`` sequences) is recorded: the curve that
    shows whether training has converged.

    Args:
        model: a :class:`TinyTransformer` (moved to ``device``).
        task: one of :data:`TASKS`.
        config: the study's :class:`StudyConfig` (``steps``, ``batch``, ``lr``, ``train_len``,
            ``min_len``, ``vocab``, ``k``, ``log_every``, ``eval_batch``).
        seed: data seed.
        device: where to train.
        on_step: called as ``on_step(step, loss)`` after every step (step counts from 1).

    Returns:
        ``(losses, accuracy_curve)``: the training loss at every step (``steps`` floats) and
        ``[[step, in-range accuracy], ...]`` at step 0 and every ``log_every`` steps.
    """
    c = _config(config)
    check.choice("task", task, TASKS)
    seed = check.non_negative_int("seed", seed)
    gen = torch.Generator().manual_seed(seed + 1_000_003)
    model.to(device).train()
    opt = torch.optim.Adam(model.parameters(), lr=c.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda t: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t / c.steps))
    )

    def in_range() -> float:
        model.eval()
        g = torch.Generator().manual_seed(seed + 3_000_003)  # the same batch every time
        a = _accuracy_by_position(model, task, c, c.train_len, max(1, c.eval_batch // 2), g, device)
        model.train()
        return float(a.mean())

    losses, accuracy = [], [[0, in_range()]]
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
        if step % c.log_every == 0 or step == c.steps:
            accuracy.append([step, in_range()])
        if on_step is not None:
            on_step(step, losses[-1])
    model.eval()
    return losses, accuracy


@torch.no_grad()
def evaluate(
    model: TinyTransformer,
    task: str,
    config: StudyConfig,
    seed: int,
    *,
    device: str | torch.device = "cpu",
) -> dict[str, list[float]]:
    """Token accuracy at every position of fresh seeded sequences of each evaluation length.

    In an encoder a position's output depends on the whole sequence, so the accuracy at
    position p is measured separately in sequences of length L, 2L and 4L
    (:attr:`StudyConfig.eval_lengths`). In a decoder it depends only on positions 0 .. p, so
    the three agree up to sampling.

    Args:
        model, task, config, device: as in :func:`train_model` (uses ``eval_lengths``,
            ``eval_batch``, ``vocab``, ``k``).
        seed: evaluation seed (the batches differ from the training ones).

    Returns:
        ``{str(n): accuracy at positions 0 .. n-1}`` for each evaluation length n (each the
        mean over ``eval_batch`` sequences).
    """
    c = _config(config)
    gen = torch.Generator().manual_seed(check.non_negative_int("seed", seed) + 2_000_003)
    model.to(device).eval()
    return {
        str(n): [
            float(a) for a in _accuracy_by_position(model, task, c, n, c.eval_batch, gen, device)
        ]
        for n in c.eval_lengths
    }


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
    """Print a line every ``every`` steps and one per finished run, with the time elapsed and
    an estimate of the time left (elapsed time over the fraction of the study's steps done);
    lines stay within 80 characters."""

    def show(event: dict[str, Any]) -> None:
        if event["event"] == "step" and event["step"] % every and event["step"] != event["steps"]:
            return
        key = run_key(event["setting"], event["task"], event["scheme"], event["seed"])
        head = f"[{event['run']}/{event['runs']}] {key}"
        done, elapsed = event.get("fraction_done", 0.0), event.get("elapsed", 0.0)
        eta = f" {elapsed:.0f} s, ~{elapsed * (1 - done) / done:.0f} s left" if done else ""
        if event["event"] == "step":
            print(f"{head} step {event['step']} loss {event['loss']:.3f}{eta}", flush=True)
        elif event["event"] == "done":
            acc = event["acc_at_L"]
            print(f"{head} done {event['seconds']:.0f} s, acc@L {acc:.3f}{eta}", flush=True)
        elif event["event"] == "skipped":
            print(f"{head} already done (resumed)", flush=True)

    return show


def run_key(setting: str, task: str, scheme: str, seed: int) -> str:
    """The key of one run in ``results["runs"]``: ``"setting/task/scheme/seed"``."""
    return f"{setting}/{task}/{scheme}/{seed}"


def _one_run(
    c: StudyConfig,
    item: tuple[str, str, str, int],
    device: str | torch.device,
    keep_tables: bool,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, Any]:
    """Train and evaluate one (setting, task, scheme, seed): the run dict of :func:`run_study`."""
    setting, task, scheme, seed = item
    t0 = time.perf_counter()
    model = build_model(scheme, c, seed, setting)
    table_init = model.position_table()
    curve, acc_curve = train_model(model, task, c, seed, device=device, on_step=on_step)
    run: dict[str, Any] = {
        "setting": setting,
        "task": task,
        "scheme": scheme,
        "seed": seed,
        "curve": curve,
        "acc_curve": acc_curve,
        "acc": evaluate(model, task, c, seed, device=device),
        "params": parameter_counts(model),
    }
    table = model.position_table()
    if table is not None:
        table, rows = table.cpu(), c.train_len  # rows past L never get a gradient
        run["geometry"] = table_summary(table[:rows])
        run["geometry_init"] = table_summary(table_init[:rows])
        update = (table - table_init)[:rows]
        run["geometry_update"] = table_summary(update)
        run["update_ratio"] = float(update.norm() / table_init[:rows].norm())
        if keep_tables:
            run["table"], run["table_init"] = table.tolist(), table_init.tolist()
    run["seconds"] = time.perf_counter() - t0
    return run


def _worker_run(args: tuple) -> dict[str, Any]:
    """One run in a worker process (one CPU thread each)."""
    options, item, device, keep_tables = args
    torch.set_num_threads(1)
    return _one_run(StudyConfig.from_dict(options), item, device, keep_tables)


def run_study(
    config: StudyConfig | None = None,
    *,
    device: str | torch.device = "cpu",
    threads: int | None = 1,
    workers: int = 1,
    on_progress: Callable[[dict[str, Any]], None] | None | str = "print",
    resume: Mapping[str, Any] | None = None,
    keep_tables: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """Train and evaluate every (setting, task, scheme, seed) of the study
    (:meth:`StudyConfig.plan`).

    Progress goes to ``on_progress`` as event dicts (``event`` = ``"step"``, ``"done"`` or
    ``"skipped"``, with ``run``, ``runs``, ``setting``, ``task``, ``scheme``, ``seed``,
    ``elapsed`` and ``fraction_done`` and, for steps, ``step``, ``steps``, ``loss``); the
    default prints a line every ``log_every`` steps and one per finished run, with an estimate
    of the time left. With ``workers > 1`` runs go to that many processes (one CPU thread
    each; ``make study`` uses 2, one per core) and only ``"done"`` events are reported. Each run
    is seeded on its own, so the numbers do not depend on ``workers``. A ``KeyboardInterrupt``
    stops the study after the finished runs: the result is returned with ``interrupted`` True
    and can be passed back as ``resume`` to continue.

    Args:
        config: the study's :class:`StudyConfig` (default: ``StudyConfig()``, what
            ``make study`` runs).
        device: torch device for training and evaluation (``"cuda"`` on a GPU).
        threads: CPU threads for the duration of the study (restored afterwards). Models this
            small run fastest on one thread (the default); None keeps torch's setting.
        workers: processes to spread the runs over (1: run here, with per-step progress).
        on_progress: callback, ``"print"`` (default) or None for silence.
        resume: an earlier (possibly interrupted) result with the same configuration; its
            finished runs are kept, not retrained.
        keep_tables: keep learned position tables (as nested lists) in the runs.
        **overrides: options of :class:`StudyConfig` to change (``steps``, ``d_model``,
            ``seeds``, ``schemes``, ...); ``run_study(steps=60)`` is
            ``run_study(StudyConfig(steps=60))``.

    Returns:
        dict with ``config`` (:meth:`StudyConfig.to_dict`), ``runs`` (key :func:`run_key` ->
        ``setting``, ``task``, ``scheme``, ``seed``, ``curve`` (loss per step),
        ``acc_curve`` (in-range accuracy during training), ``acc`` (:func:`evaluate`),
        ``params``, ``seconds``, and for learned tables ``table`` / ``table_init`` (if
        ``keep_tables``) with their :func:`table_summary` as ``geometry`` / ``geometry_init``
        (of rows 0 .. L-1, the rows training reaches), ``geometry_update`` (of the change
        ``table - table_init`` in those rows) and ``update_ratio`` (norm of that change over
        the norm of those initial rows)), ``interrupted``, ``seconds`` and ``cpu_seconds``.
    """
    c = StudyConfig() if config is None else _config(config)
    if overrides:
        c = c.replace(**overrides)
    workers = check.positive_int("workers", workers)
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
    plan = c.plan()
    number = {item: i for i, item in enumerate(plan, start=1)}
    todo = [p for p in plan if run_key(*p) not in runs]
    start, cpu_start = time.perf_counter(), time.process_time()
    interrupted = False

    def info(item: tuple[str, str, str, int], done: float) -> dict[str, Any]:
        setting, task, scheme, seed = item
        return {
            "run": number[item],
            "runs": len(plan),
            "setting": setting,
            "task": task,
            "scheme": scheme,
            "seed": seed,
            "elapsed": time.perf_counter() - start,
            "fraction_done": done / max(1, len(todo)),
        }

    def finished(item: tuple[str, str, str, int], run: dict[str, Any]) -> None:
        runs[run_key(*item)] = run
        if on_progress:
            done = len(runs) - (len(plan) - len(todo))
            on_progress(
                {
                    "event": "done",
                    "seconds": run["seconds"],
                    "acc_at_L": run["acc_curve"][-1][1],
                    **info(item, done),
                }
            )

    try:
        if on_progress:
            for item in plan:
                if item not in todo:
                    on_progress({"event": "skipped", **info(item, 0)})
        if workers == 1:
            for n, item in enumerate(todo):

                def step(s: int, loss: float, item=item, n=n) -> None:
                    if on_progress:
                        event = {"event": "step", "step": s, "steps": c.steps, "loss": loss}
                        on_progress({**event, **info(item, n + s / c.steps)})

                finished(item, _one_run(c, item, device, keep_tables, step))
        else:
            import multiprocessing

            jobs = [(c.to_dict(), item, str(device), keep_tables) for item in todo]
            with multiprocessing.get_context("spawn").Pool(workers) as pool:
                for item, run in zip(todo, pool.imap(_worker_run, jobs)):
                    finished(item, run)
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
        "workers": workers,
        "run_seconds": sum(r["seconds"] for r in runs.values()),
    }


# ----------------------------------------------------------------------------- summaries


def runs_for(
    results: Mapping[str, Any], setting: str, task: str, scheme: str
) -> list[dict[str, Any]]:
    """The finished runs of one (setting, task, scheme), one per seed, sorted by seed.

    Args:
        results: a :func:`run_study` result (or one read by :func:`load_results`).
        setting: ``"encoder"`` or ``"decoder"``.
        task: a task of the study, such as ``"first"``.
        scheme: a scheme of the study, such as ``"learned"``.

    Returns:
        the run dicts (as stored in ``results["runs"]``), in increasing order of ``seed``.

    Raises:
        KeyError: if ``results`` holds no such run; the message lists the (setting, task,
            scheme) triples it does hold.
    """
    want = (setting, task, scheme)
    runs = [r for r in results["runs"].values() if (r["setting"], r["task"], r["scheme"]) == want]
    if not runs:
        held = sorted({(r["setting"], r["task"], r["scheme"]) for r in results["runs"].values()})
        raise KeyError(
            f"no finished runs for setting={setting!r}, task={task!r}, scheme={scheme!r}; the "
            "results hold " + (", ".join("/".join(h) for h in held) or "no runs")
        )
    return sorted(runs, key=lambda r: r["seed"])


def position_accuracy(
    results: Mapping[str, Any], setting: str, task: str, scheme: str, length: int | None = None
) -> np.ndarray:
    """Accuracy at every position of sequences of one evaluation length, one row per seed.

    Args:
        results: a study result.
        setting, task, scheme: which runs.
        length: an evaluation length (:attr:`StudyConfig.eval_lengths`); None: the longest.

    Returns:
        float64 array ``(S, length)``.
    """
    runs = runs_for(results, setting, task, scheme)
    key = str(length) if length is not None else max(runs[0]["acc"], key=int)
    if key not in runs[0]["acc"]:
        raise KeyError(f"no evaluation at length {length}; there are {sorted(runs[0]['acc'])}")
    return np.array([r["acc"][key] for r in runs], dtype=float)


def bands(config: StudyConfig) -> list[tuple[int, int]]:
    """Position bands for summaries: [0, L), [L, 2L), [2L, 4L), ... (inside L never shares a
    band with beyond L)."""
    c = _config(config)
    edges = [0, *c.eval_lengths]
    return list(zip(edges[:-1], edges[1:]))


def band_accuracy(
    results: Mapping[str, Any],
    setting: str,
    task: str,
    scheme: str,
    lo: int,
    hi: int,
    length: int | None = None,
) -> tuple[float, float]:
    """Mean accuracy over positions lo .. hi - 1 of sequences of ``length`` (None: the
    longest), then mean and population standard deviation over seeds.

    Returns:
        ``(mean, std)``.
    """
    a = position_accuracy(results, setting, task, scheme, length)  # (S, n)
    if not 0 <= lo < hi <= a.shape[1]:
        raise ValueError(f"need 0 <= lo < hi <= {a.shape[1]}, got lo={lo}, hi={hi}")
    per_seed = a[:, lo:hi].mean(1)
    return float(per_seed.mean()), float(per_seed.std())


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
    results: Mapping[str, Any], setting: str, task: str, scheme: str
) -> tuple[np.ndarray, np.ndarray]:
    """The (block-averaged) loss curves of one (setting, task, scheme)'s seeds.

    Works on a :func:`run_study` result (per-step curves, averaged over blocks of ``log_every``
    / 10 steps, at least 1) and on one read by :func:`load_results` (already stored as blocks).

    Returns:
        ``(steps, losses)``: float64 arrays ``(blocks,)`` and ``(S, blocks)``.
    """
    runs = runs_for(results, setting, task, scheme)
    every = max(1, results["config"]["log_every"] // 10)
    blocks = [
        r["curve"] if isinstance(r["curve"][0], list) else loss_blocks(r["curve"], every)
        for r in runs
    ]
    steps = np.array([b[0] for b in blocks[0]], dtype=float)
    return steps, np.array([[b[1] for b in bl] for bl in blocks], dtype=float)


def accuracy_curves(
    results: Mapping[str, Any], setting: str, task: str, scheme: str
) -> tuple[np.ndarray, np.ndarray]:
    """In-range accuracy (length L) during training, one row per seed.

    Returns:
        ``(steps, accuracy)``: float64 arrays ``(points,)`` and ``(S, points)``.
    """
    runs = runs_for(results, setting, task, scheme)
    steps = np.array([p[0] for p in runs[0]["acc_curve"]], dtype=float)
    return steps, np.array([[p[1] for p in r["acc_curve"]] for r in runs], dtype=float)


def geometry_summary(
    results: Mapping[str, Any], setting: str, task: str, which: str = "geometry"
) -> dict[str, float]:
    """Mean and spread over seeds of the learned table's geometry (see :func:`table_summary`).

    Args:
        results: a study result.
        setting, task: which runs (scheme ``"learned"``).
        which: ``"geometry"`` (rows 0 .. L-1 of the trained table), ``"geometry_init"`` (the
            same rows at initialisation) or ``"geometry_update"`` (the change training made,
            trained minus initial, in those rows).

    Returns:
        dict with ``neighbour_similarity`` and ``neighbour_is_nearest`` (means over seeds) and
        their population standard deviations ``neighbour_similarity_std``,
        ``neighbour_is_nearest_std``.
    """
    runs = runs_for(results, setting, task, "learned")
    if any(which not in r for r in runs):
        raise KeyError(f"no {which!r} in the runs of setting={setting!r}, task={task!r}")
    out = {}
    for name in ("neighbour_similarity", "neighbour_is_nearest"):
        vals = [r[which][name] for r in runs]
        out[name], out[name + "_std"] = float(np.mean(vals)), float(np.std(vals))
    return out


# ----------------------------------------------------------------------------- results file


def _module_files(name: str) -> list[pathlib.Path]:
    """Source files of ``posenc_core.<name>``: the module, or every source file of a package
    (its Python modules and its C source, such as ``rope/native.c``)."""
    root = pathlib.Path(__file__).resolve().parents[1]  # posenc_core/
    path = root.joinpath(*name.split("."))
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".py", ".c"))
    return [path.with_suffix(".py")]


def module_hashes(modules: Sequence[str]) -> dict[str, str]:
    """SHA-256 of the source of every module in ``modules`` (names relative to
    ``posenc_core``; for a package, of its files' names and bytes in order). The studies record
    them, and a results file is stale when one differs."""
    hashes = {}
    for name in modules:
        digest = hashlib.sha256()
        for path in _module_files(name):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        hashes[name] = digest.hexdigest()
    return hashes


def code_hashes() -> dict[str, str]:
    """:func:`module_hashes` of :data:`CODE_MODULES`."""
    return module_hashes(CODE_MODULES)


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
        if not isinstance(r["curve"][0], list):
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
        "workers": results.get("workers", 1),
        "run_seconds": round(float(results.get("run_seconds", 0.0)), 1),
        "runs": runs,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, separators=(",", ":")) + "\n", encoding="utf-8")
    return path


def load_results(path: str | pathlib.Path | None = None) -> dict[str, Any]:
    """Read a file written by :func:`save_results` (curves come back as ``[step, mean loss]``
    blocks); None reads the committed one, :data:`RESULTS_FILE`."""
    return json.loads(pathlib.Path(RESULTS_FILE if path is None else path).read_text("utf-8"))


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
    p.add_argument("--n-layers", type=int, default=defaults.n_layers)
    p.add_argument("--train-len", type=int, default=defaults.train_len)
    p.add_argument("--batch", type=int, default=defaults.batch)
    p.add_argument("--seeds", type=int, nargs="+", default=list(defaults.seeds))
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--workers", type=int, default=2, help="processes (default 2: one per core)")
    a = p.parse_args(argv)
    results = run_study(
        device=a.device,
        threads=a.threads,
        workers=a.workers,
        steps=a.steps,
        d_model=a.d_model,
        n_layers=a.n_layers,
        train_len=a.train_len,
        batch=a.batch,
        seeds=a.seeds,
    )
    path = save_results(results, a.out)
    print(
        f"Wrote {path}: {len(results['runs'])} runs in {results['seconds']:.1f} s wall, "
        f"{results['cpu_seconds']:.1f} s CPU{' (interrupted)' if results['interrupted'] else ''}"
    )
    return 130 if results["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
