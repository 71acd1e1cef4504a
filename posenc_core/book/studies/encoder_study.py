"""Learned versus fixed positional encodings, measured: chapter 5's study.

A :class:`~posenc_core.book.models.encoder.TinyTransformer` with each positional scheme is
trained on the synthetic tasks of :mod:`~posenc_core.book.studies.synthetic_tasks` at lengths
1 .. L, as an encoder (bidirectional, as BERT; ALiBi symmetric, ``-m|i-j|``) and as a decoder
(causal, as GPT; ALiBi ``-m(i-j)``), and tested at L, 2L and 4L with the accuracy kept **per
position**, so that inside and beyond the training length are never averaged together.

:class:`StudyConfig` holds the configuration; :func:`run_encoder_study` trains every
(setting, task, scheme, seed); :func:`save_results` writes the results with the source keys of
:data:`CODE_MODULES`, the configuration and the library versions, and
:mod:`~posenc_core.book.studies.encoder_results` reads them. Command line:
``python -m posenc_core.book.studies.encoder_study --out FILE``.
Shapes: b = batch, s or n = sequence, d = d_model, V = vocabulary, C = V + 1 output classes
(the tokens and NONE), S = seeds.
"""

from __future__ import annotations

import argparse
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
from torch import nn

from posenc_core import _validation as check
from posenc_core.analysis import cosine_similarity_matrix, similarity_by_offset
from posenc_core.book import DATA
from posenc_core.book.models.encoder import SCHEMES, TinyTransformer, parameter_counts
from posenc_core.book.studies import options, provenance
from posenc_core.book.studies.synthetic_tasks import CAUSAL_TASKS, TASKS, make_batch

__all__ = [
    "SETTINGS",
    "RESULTS_FILE",
    "CODE_MODULES",
    "StudyConfig",
    "build_encoder",
    "train_encoder",
    "evaluate",
    "table_summary",
    "run_key",
    "run_encoder_study",
    "loss_blocks",
    "source_keys",
    "code_version",
    "save_results",
    "load_results",
    "is_stale",
    "main",
]

SETTINGS = ("encoder", "decoder")
"""``"encoder"``: bidirectional attention; ``"decoder"``: causal attention."""
RESULTS_FILE = DATA / "learned_vs_fixed.json"
"""The committed results that chapter 5 reads (``make study`` writes them), in the package's data
folder (:data:`posenc_core.book.DATA`), so they are installed with it."""
CODE_MODULES = (
    "book.studies.encoder_study",
    "book.studies.synthetic_tasks",
    "book.studies.options",
    "book.models.encoder",
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
class StudyConfig(options.Options):
    """The study's configuration (the defaults are what ``make study`` runs), checked once here.

    Args:
        settings: drawn from :data:`SETTINGS` (non-empty).
        tasks: drawn from :data:`~posenc_core.book.studies.synthetic_tasks.TASKS` (non-empty); the
            ``"decoder"`` setting runs only those of
            :data:`~posenc_core.book.studies.synthetic_tasks.CAUSAL_TASKS`.
        schemes: drawn from :data:`~posenc_core.book.models.encoder.SCHEMES` (non-empty).
        seeds: non-negative seeds (non-empty), each for initialisation, training and evaluation.
        train_len, min_len: training lengths are drawn from min_len .. L (1 <= min_len <= L).
        eval_factor: evaluation at L, 2L, ... up to eval_factor * L, the learned table's rows.
        vocab: input tokens V >= 2; k: look-back distance of ``"lookback"``.
        d_model, n_heads, n_layers: model size (d_model split into even head widths).
        steps, batch: training steps and batch size; lr: peak Adam rate, cosine-decayed to a tenth.
        eval_batch: sequences per evaluation length; base: sinusoidal and RoPE base (> 1).
        log_every: steps between progress lines and points of the in-range accuracy curve.

    Raises:
        TypeError, ValueError: naming the option, the value and what is allowed.
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
        def put(name: str, value: Any) -> None:
            options.normalise(self, name, value)

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
        options.even_head_widths(self.d_model, self.n_heads)
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


# ----------------------------------------------------------------------------- training


def build_encoder(
    scheme: str, config: StudyConfig, seed: int, setting: str = "encoder"
) -> TinyTransformer:
    """The study's model, initialised from ``seed`` without touching the global random state.

    Args:
        scheme: one of :data:`~posenc_core.book.models.encoder.SCHEMES` (a learned table gets
            ``eval_factor * L`` rows).
        config: the study's :class:`StudyConfig` (``vocab``, ``d_model``, ``n_heads``,
            ``n_layers``, ``train_len``, ``eval_factor``, ``base``).
        seed: initialisation seed.
        setting: ``"encoder"`` (bidirectional) or ``"decoder"`` (causal).

    Returns:
        a :class:`~posenc_core.book.models.encoder.TinyTransformer` in float32 on the CPU.
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
    model: TinyTransformer,
    task: str,
    c: StudyConfig,
    length: int,
    batch: int,
    gen,
    device,
    window: int | None = None,
) -> np.ndarray:
    x, y = make_batch(task, batch, length, c.vocab, gen, k=c.k)
    pred = model(x.to(device), window=window).argmax(-1).cpu()  # (b, n)
    return (pred == y).double().mean(0).numpy()  # (n,)


def train_encoder(
    model: TinyTransformer,
    task: str,
    config: StudyConfig,
    seed: int,
    *,
    device: str | torch.device = "cpu",
    on_step: Callable[[int, float], None] | None = None,
) -> tuple[list[float], list[list[float]]]:
    """Train ``model`` in place on random lengths in [min_len, train_len], one length per batch.

    Adam at ``lr``, cosine-decayed to a tenth, gradients clipped at norm 1; data from a seeded
    generator, so a CPU run is deterministic.

    Args:
        model: a :class:`~posenc_core.book.models.encoder.TinyTransformer` (moved to ``device``).
        task: one of :data:`~posenc_core.book.studies.synthetic_tasks.TASKS`.
        config: the study's :class:`StudyConfig`; seed: data seed; device: where to train.
        on_step: called as ``on_step(step, loss)`` after every step (step counts from 1).

    Returns:
        ``(losses, accuracy_curve)``: the loss at every step and ``[[step, in-range accuracy],
        ...]`` at step 0 and every ``log_every`` steps (the mean over positions of one fixed batch
        of ``eval_batch // 2`` sequences of length L).
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
    window: int | None = None,
) -> dict[str, list[float]]:
    """Token accuracy at every position of fresh seeded sequences of each evaluation length.

    In an encoder a position's output depends on the whole sequence, so each length of
    :attr:`StudyConfig.eval_lengths` is measured separately; in a decoder they agree up to sampling.

    Args:
        model, task, config, device: as in :func:`train_encoder`.
        seed: evaluation seed (batches differ from training's; the same with or without ``window``).
        window: attend only to keys with ``|i - j| < window``; None: no band. The study passes L,
            the longest offset training produced.

    Returns:
        ``{str(n): accuracy at positions 0 .. n-1}`` for each evaluation length n (the mean over
        ``eval_batch`` sequences).
    """
    c = _config(config)
    gen = torch.Generator().manual_seed(check.non_negative_int("seed", seed) + 2_000_003)
    model.to(device).eval()
    return {
        str(n): [
            float(a)
            for a in _accuracy_by_position(model, task, c, n, c.eval_batch, gen, device, window)
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
    """Train and evaluate one (setting, task, scheme, seed): the run dict of
    :func:`run_encoder_study`."""
    setting, task, scheme, seed = item
    t0 = time.perf_counter()
    model = build_encoder(scheme, c, seed, setting)
    table_init = model.position_table()
    curve, acc_curve = train_encoder(model, task, c, seed, device=device, on_step=on_step)
    run: dict[str, Any] = {
        "setting": setting,
        "task": task,
        "scheme": scheme,
        "seed": seed,
        "curve": curve,
        "acc_curve": acc_curve,
        "acc": evaluate(model, task, c, seed, device=device),
        "window_acc": evaluate(model, task, c, seed, device=device, window=c.train_len),
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


def run_encoder_study(
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
    """Train and evaluate every (setting, task, scheme, seed) of :meth:`StudyConfig.plan`.

    Each run is seeded on its own, so the numbers do not depend on ``workers``. A
    ``KeyboardInterrupt`` stops after the finished runs and returns them with ``interrupted`` True,
    to pass back as ``resume``.

    Args:
        config: a :class:`StudyConfig` (default: ``StudyConfig()``, what ``make study`` runs);
            ``**overrides`` change its options (``run_encoder_study(steps=60)``).
        device: torch device; threads: CPU threads during the study (None: torch's setting).
        workers: processes to spread the runs over, one thread each (then only ``"done"`` events).
        on_progress: called with event dicts (``event`` ``"step"``, ``"done"`` or ``"skipped"``,
            the run's keys, ``elapsed``, ``fraction_done``); ``"print"`` (default) or None.
        resume: an earlier result with the same configuration; its finished runs are kept.
        keep_tables: keep learned position tables (as nested lists) in the runs.

    Returns:
        dict with ``config``, ``runs`` (:func:`run_key` -> the run's keys, ``curve``, ``acc_curve``,
        ``acc`` and ``window_acc`` (:func:`evaluate` without and with ``window=L``), ``params``,
        ``seconds``, and for learned tables ``table``/``table_init`` with their
        :func:`table_summary` as ``geometry``/``geometry_init`` over rows 0 .. L-1,
        ``geometry_update`` and ``update_ratio`` of the change), ``interrupted``, ``seconds``
        and ``cpu_seconds``.
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
                "resume must be a result of run_encoder_study (a dict with 'config' and 'runs')"
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


# ----------------------------------------------------------------------------- results file


def source_keys() -> dict[str, str]:
    """The source key of every module in :data:`CODE_MODULES`
    (:func:`~posenc_core.book.studies.provenance.source_keys`)."""
    return provenance.source_keys(CODE_MODULES)


def code_version() -> str:
    """One SHA-256 over :func:`source_keys` (changes when any of those modules changes)."""
    return provenance.code_version(source_keys())


def save_results(
    results: Mapping[str, Any], path: str | pathlib.Path, *, table_seeds: Sequence[int] = (0,)
) -> pathlib.Path:
    """Write a study result as compact JSON with its provenance.

    Curves are stored as block means (:func:`loss_blocks`, blocks of ``log_every`` / 10 steps),
    numbers rounded to 4 decimals, and learned tables (rounded to 3) kept only for the seeds in
    ``table_seeds``; initial tables are summarised by their ``geometry_init`` only.
    The file records ``code_version`` and ``source_keys``, the configuration and seeds, and the
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
        r = provenance.round_floats(r, 4)
        if table is not None and r["seed"] in table_seeds:
            r["table"] = provenance.round_floats(table, 3)
        runs[key] = r
    out = {
        "code_version": code_version(),
        "source_keys": source_keys(),
        "config": dict(results["config"]),
        "seeds": list(results["config"]["seeds"]),
        "versions": provenance.library_versions(),
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
        changed = provenance.changed_modules(results.get("source_keys", {}), CODE_MODULES)
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
        prog="python -m posenc_core.book.studies.encoder_study", description=__doc__.splitlines()[0]
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
    results = run_encoder_study(
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
