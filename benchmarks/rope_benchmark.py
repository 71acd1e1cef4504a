"""Benchmark of posenc_core.apply_rope and rope_cos_sin on the CPU (a script, not a test).

What is measured, in one run, on q and k of shape (b, h, s, d) = (4, 32, 2048, 128):

1. ``apply_rope(q, cos, sin)`` (layout "half", out of place) against ``q.clone()``, the
   memory-traffic floor: one read of the input and one write of a fresh output.
   Target: at most 1.3x clone. At this size apply_rope runs its fused kernel (compiled by
   torch.compile on the first call, which the warm-up absorbs; the compile time is printed);
   the eager path (``fused=False``) is timed beside it.
2. against Hugging Face's eager formula ``q * cos + rotate_half(q) * sin``. Target: at
   least 3x faster, and equal within float32 rounding (asserted, max abs diff < 1e-5).
3. the same for bfloat16 inputs (float32 tables for apply_rope; bfloat16 tables for the
   HF formula, as HF casts cos/sin to the input dtype). apply_rope rotates them in float64
   and rounds once (the eager path); HF computes in bfloat16. Reported, no target.
4. the interleaved layout against clone. Reported, no target.
5. building a 131072 x 128 cos/sin table with ``rope_cos_sin`` (float64, rounded once)
   against the all-float32 recipe (float32 positions outer float32 inv_freq, cos, sin,
   cat), with the max abs error of each against float64.

Method: every contender processes both q and k per call. After a warm-up, the contenders
run in interleaved rounds (the starting contender rotates each round), so slow phases of
the machine hit all of them alike; medians are reported with min, max and interquartile
range, and ratios are ratios of medians (the median of the per-round ratios is printed
too). Outputs are freed outside the timed region.

Usage::

    python benchmarks/rope_benchmark.py            # full size (about 1.5 GB of RAM, ~1 min)
    python benchmarks/rope_benchmark.py --quick    # (2, 8, 512, 128), few rounds: smoke test
    python benchmarks/rope_benchmark.py --strict   # exit 1 if a target is missed
    python benchmarks/rope_benchmark.py --sweep-chunks   # also time apply_rope per chunk size

The exit status is 0 even when a timing target is missed (the miss is printed loudly)
unless ``--strict`` is given; a wrong result (the equality check) always exits non-zero.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

import posenc_core
from posenc_core.rope import kernels as rope_kernels

# --------------------------------------------------------------------------- setup

TARGET_VS_CLONE = 1.3  # apply_rope (half, float32) at most this many times clone
TARGET_VS_HF = 3.0  # apply_rope at least this many times faster than the HF eager formula
EQUALITY_TOL = 1e-5  # max abs difference to the HF formula for unit-normal float32 inputs


def _hf_rotate_half() -> tuple[Callable[[torch.Tensor], torch.Tensor], str]:
    """Hugging Face's rotate_half if transformers imports, else the same one-liner inline."""
    try:
        import transformers
        from transformers.models.llama.modeling_llama import rotate_half

        return (
            rotate_half,
            f"transformers {transformers.__version__}: "
            "transformers.models.llama.modeling_llama.rotate_half",
        )
    except Exception as exc:  # noqa: BLE001 - any import problem means: use the inline copy

        def rotate_half(x: torch.Tensor) -> torch.Tensor:
            h = x.shape[-1] // 2
            return torch.cat((-x[..., h:], x[..., :h]), -1)

        return (
            rotate_half,
            "inline torch.cat((-x[..., h:], x[..., :h]), -1) (transformers unavailable: "
            f"{exc.__class__.__name__})",
        )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "n/a"


# --------------------------------------------------------------------------- timing


class Timings:
    """Seconds per call of each contender, gathered in interleaved rounds."""

    def __init__(self, contenders: dict[str, Callable[[], object]]) -> None:
        self.contenders = contenders
        self.samples: dict[str, list[float]] = {name: [] for name in contenders}

    def run(self, rounds: int, warmup: int) -> None:
        names = list(self.contenders)
        for _ in range(warmup):
            for name in names:
                result = self.contenders[name]()
                del result
        for r in range(rounds):
            for i in range(len(names)):
                name = names[(i + r) % len(names)]  # rotate who goes first
                t0 = time.perf_counter()
                result = self.contenders[name]()
                t1 = time.perf_counter()
                del result  # free the outputs outside the timed region
                self.samples[name].append(t1 - t0)

    def median(self, name: str) -> float:
        return statistics.median(self.samples[name])

    def spread(self, name: str) -> tuple[float, float, float, float]:
        """(min, q1, q3, max) in seconds."""
        ts = sorted(self.samples[name])
        q1, _, q3 = statistics.quantiles(ts, n=4) if len(ts) >= 2 else (ts[0], ts[0], ts[0])
        return ts[0], q1, q3, ts[-1]

    def ratio(self, num: str, den: str) -> float:
        return self.median(num) / self.median(den)

    def paired_ratios(self, num: str, den: str) -> list[float]:
        """Per-round ratios (same round, so the same state of the machine)."""
        return [a / b for a, b in zip(self.samples[num], self.samples[den])]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def _describe(t: Timings, name: str) -> str:
    lo, q1, q3, hi = t.spread(name)
    return (
        f"median {_ms(t.median(name)):>8} ms   IQR {_ms(q1)}-{_ms(q3)}   "
        f"min {_ms(lo)}   max {_ms(hi)}"
    )


def _paired(t: Timings, num: str, den: str) -> str:
    rs = t.paired_ratios(num, den)
    best = min(t.samples[num]) / min(t.samples[den])
    return (
        f"per-round ratio median {statistics.median(rs):.3f} "
        f"(min {min(rs):.3f}, max {max(rs):.3f}); ratio of fastest calls {best:.3f}"
    )


def _not_nearest(got: torch.Tensor, exact: torch.Tensor) -> int:
    """How many elements of a low-precision ``got`` have a neighbour closer to ``exact``
    (float64)."""
    err = (got.double() - exact).abs()
    closer = torch.zeros_like(err, dtype=torch.bool)
    for direction in (math.inf, -math.inf):
        neighbour = torch.nextafter(got, torch.full_like(got, direction)).double()
        closer |= (neighbour - exact).abs() < err
    return int(closer.sum())


# --------------------------------------------------------------------------- tables


def _tables_all_float32(n: int, d: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The common all-float32 recipe (Hugging Face's default rotary embedding)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))  # float32
    freqs = torch.arange(n).float()[:, None] * inv_freq[None, :]  # float32 angles (n, d/2)
    emb = torch.cat((freqs, freqs), -1)
    return emb.cos(), emb.sin()


def _tables_float64_reference(
    n: int, d: int, base: float = 10000.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 angles from a float64 inv_freq: the reference both are compared against."""
    inv_freq = torch.pow(
        torch.tensor(base, dtype=torch.float64), -torch.arange(0, d, 2, dtype=torch.float64) / d
    )
    ang = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((ang, ang), -1)
    return emb.cos(), emb.sin()


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small shape (2, 8, 512, 128) and few rounds: a smoke test",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a timing target is missed"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="timed rounds (default 15, quick 5)"
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help="untimed rounds first (default 2, quick 1)"
    )
    parser.add_argument(
        "--sweep-chunks",
        action="store_true",
        help="also time apply_rope for several kernels.CHUNK_ELEMENTS",
    )
    args = parser.parse_args(argv)

    shape = (2, 8, 512, 128) if args.quick else (4, 32, 2048, 128)
    rounds = args.rounds if args.rounds is not None else (5 if args.quick else 15)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    table_len = 16384 if args.quick else 131072
    if rounds < 1 or warmup < 0:
        parser.error("--rounds must be >= 1 and --warmup >= 0")
    _, _, s, d = shape

    torch.manual_seed(0)
    rotate_half, rotate_half_src = _hf_rotate_half()

    print("RoPE benchmark (posenc_core.apply_rope, rope_cos_sin)")
    print(
        f"  torch {torch.__version__}, {torch.get_num_threads()} threads "
        f"(interop {torch.get_num_interop_threads()}), cpu capability "
        f"{torch.backends.cpu.get_cpu_capability()}"
    )
    print(f"  CPU: {_cpu_model()} ({os.cpu_count()} logical CPUs visible)")
    print(
        f"  Python {platform.python_version()}, posenc_core from "
        f"{Path(posenc_core.__file__).parent}"
    )
    print(
        f"  transparent hugepages: {_read('/sys/kernel/mm/transparent_hugepage/enabled')}; "
        f"THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')}"
    )
    print(f"  HF formula uses {rotate_half_src}")
    print(
        f"  shape (b, h, s, d) = {shape}, q and k per call; {warmup} warm-up + {rounds} timed "
        f"rounds, interleaved; apply_rope chunk = {rope_kernels.CHUNK_ELEMENTS} elements"
    )
    if args.quick:
        print("  QUICK MODE: small shape, results are indicative only")
    print()

    # ---------------------------------------------------------------- inputs
    q = torch.randn(shape)
    k = torch.randn(shape)
    qb, kb = q.to(torch.bfloat16), k.to(torch.bfloat16)
    pos = torch.arange(s)
    cos, sin = posenc_core.rope_cos_sin(pos, d)  # (s, d) float32, layout "half"
    cos_i, sin_i = posenc_core.rope_cos_sin(pos, d, layout="interleaved")
    cos4, sin4 = cos[None, None], sin[None, None]  # HF: (1, 1, s, d) after unsqueeze(1)
    cos4b, sin4b = cos4.to(torch.bfloat16), sin4.to(torch.bfloat16)  # HF casts to the input dtype
    prealloc_q, prealloc_k = torch.empty_like(q), torch.empty_like(k)
    apply_rope = posenc_core.apply_rope

    def eager(
        x: torch.Tensor, c: torch.Tensor, sn: torch.Tensor, layout: str = "half"
    ) -> torch.Tensor:
        return apply_rope(x, c, sn, layout=layout, fused=False)

    def hf(x: torch.Tensor, c: torch.Tensor, sn: torch.Tensor) -> torch.Tensor:
        return x * c + rotate_half(x) * sn

    # ---------------------------------------------------------------- correctness
    failures: list[str] = []
    with torch.no_grad():
        t_first = time.perf_counter()
        ours = apply_rope(q, cos, sin)
        t_first = time.perf_counter() - t_first
        ref = hf(q, cos4, sin4)
        diff_fp32 = (ours - ref).abs().max().item()
        bit_fp32 = torch.equal(ours, ref)
        n_diff_fp32 = int((ours != ref).sum())
        ours_eager = eager(q, cos, sin)
        diff_eager = (ours_eager - ref).abs().max().item()
        bit_eager = torch.equal(ours_eager, ref)
        del ours, ref, ours_eager
        plain_i = q * cos_i + posenc_core.rotate_pairs(q, layout="interleaved") * sin_i
        ours_i = apply_rope(q, cos_i, sin_i, layout="interleaved")
        diff_il = (ours_i - plain_i).abs().max().item()
        bit_il = torch.equal(ours_i, plain_i)
        del ours_i, plain_i
        ref_b = hf(
            qb.double(), cos4.double(), sin4.double()
        )  # the formula on the bf16 inputs, in float64
        ours_b, hf_b = apply_rope(qb, cos, sin), hf(qb, cos4b, sin4b)
        diff_ours_b = (ours_b.double() - ref_b).abs().max().item()
        diff_hf_b = (hf_b.double() - ref_b).abs().max().item()
        diff_b_between = (ours_b.float() - hf_b.float()).abs().max().item()
        not_nearest_ours, not_nearest_hf = _not_nearest(ours_b, ref_b), _not_nearest(hf_b, ref_b)
        del ref_b, ours_b, hf_b
    fused_error = rope_kernels.fused_kernel.error
    if q.numel() >= rope_kernels.FUSED_MIN_ELEMENTS:
        path = f"{q.numel()} elements >= {rope_kernels.FUSED_MIN_ELEMENTS}: the fused kernel"
    else:
        path = f"{q.numel()} elements < {rope_kernels.FUSED_MIN_ELEMENTS}: the eager path"
    print(
        f"First apply_rope call (float32, {path}): {t_first:.2f} s, compilation included"
        + (f"; COMPILING FAILED, eager path used: {fused_error}" if fused_error else "")
    )
    print()
    print("Correctness (q only; unit-normal inputs)")
    print(
        f"  float32 half:        max |apply_rope - HF formula| = {diff_fp32:.3g}  "
        f"(bit-identical: {bit_fp32}, {n_diff_fp32} of {q.numel()} elements differ); must be < "
        f"{EQUALITY_TOL:g}"
    )
    print(
        "  float32 half, eager path (fused=False): max |apply_rope - HF formula| = "
        f"{diff_eager:.3g}  (bit-identical: {bit_eager})"
    )
    print(
        f"  float32 interleaved: max |apply_rope - plain formula| = {diff_il:.3g}  "
        f"(bit-identical: {bit_il})"
    )
    print(
        f"  bfloat16: max |apply_rope - exact formula| = {diff_ours_b:.3g}, "
        f"elements that are not the nearest bf16 to it: {not_nearest_ours} of {qb.numel()}; "
        f"HF bf16: {diff_hf_b:.3g}, {not_nearest_hf} not nearest; max |apply_rope - HF bf16| = "
        f"{diff_b_between:.3g}"
    )
    if not diff_fp32 < EQUALITY_TOL:
        failures.append(
            f"float32 apply_rope differs from the HF formula by {diff_fp32:.3g} >= {EQUALITY_TOL:g}"
        )
    if not_nearest_ours:
        failures.append(
            "bfloat16 apply_rope is not the nearest bf16 value of the formula for "
            f"{not_nearest_ours} elements"
        )
    if not diff_eager < EQUALITY_TOL:
        failures.append(
            f"float32 eager apply_rope differs from the HF formula by {diff_eager:.3g} >= "
            f"{EQUALITY_TOL:g}"
        )
    if not diff_il < EQUALITY_TOL:
        failures.append(
            f"float32 interleaved apply_rope differs from the plain formula by {diff_il:.3g} >= "
            f"{EQUALITY_TOL:g}"
        )
    print()

    # ---------------------------------------------------------------- apply_rope timings
    C = {
        "clone f32": lambda: (q.clone(), k.clone()),
        "copy_ prealloc f32": lambda: (prealloc_q.copy_(q), prealloc_k.copy_(k)),
        "apply_rope half f32": lambda: (apply_rope(q, cos, sin), apply_rope(k, cos, sin)),
        "apply_rope eager half f32": lambda: (eager(q, cos, sin), eager(k, cos, sin)),
        "HF eager f32": lambda: (hf(q, cos4, sin4), hf(k, cos4, sin4)),
        "apply_rope interleaved f32": lambda: (
            apply_rope(q, cos_i, sin_i, layout="interleaved"),
            apply_rope(k, cos_i, sin_i, layout="interleaved"),
        ),
        "clone bf16": lambda: (qb.clone(), kb.clone()),
        "apply_rope half bf16": lambda: (apply_rope(qb, cos, sin), apply_rope(kb, cos, sin)),
        "HF eager bf16": lambda: (hf(qb, cos4b, sin4b), hf(kb, cos4b, sin4b)),
    }
    t = Timings(C)
    t0 = time.perf_counter()
    with torch.no_grad():
        t.run(rounds, warmup)
    print(f"apply_rope timings, ms per call on q and k ({time.perf_counter() - t0:.2f} s in all)")
    for name in C:
        print(f"  {name:28s} {_describe(t, name)}")
    print()

    r_clone = t.ratio("apply_rope half f32", "clone f32")
    r_hf = t.ratio("HF eager f32", "apply_rope half f32")
    r_clone_b = t.ratio("apply_rope half bf16", "clone bf16")
    r_hf_b = t.ratio("HF eager bf16", "apply_rope half bf16")
    r_il = t.ratio("apply_rope interleaved f32", "clone f32")
    r_copy = t.ratio("copy_ prealloc f32", "clone f32")
    r_eager = t.ratio("apply_rope eager half f32", "clone f32")
    print(
        "Ratios (ratio of medians; in brackets: per-round ratios, and the ratio of the "
        "fastest calls,"
    )
    print("which noise that only ever adds time cannot inflate)")
    print(
        f"  1. apply_rope / clone, float32:            {r_clone:.3f}x   "
        f"[{_paired(t, 'apply_rope half f32', 'clone f32')}]"
    )
    print(
        f"     eager path (fused=False) / clone, f32:  {r_eager:.3f}x   "
        f"[{_paired(t, 'apply_rope eager half f32', 'clone f32')}]"
    )
    print(
        f"  2. HF eager time / apply_rope time, f32: {r_hf:.2f}x   "
        f"[{_paired(t, 'HF eager f32', 'apply_rope half f32')}]"
    )
    print(
        f"  3. apply_rope / clone, bfloat16:           {r_clone_b:.3f}x   "
        f"[{_paired(t, 'apply_rope half bf16', 'clone bf16')}]"
    )
    print(
        f"     HF eager time / apply_rope time, bf16:{r_hf_b:.2f}x   "
        f"[{_paired(t, 'HF eager bf16', 'apply_rope half bf16')}]"
    )
    print(
        f"  4. apply_rope interleaved / clone, f32:    {r_il:.3f}x   "
        f"[{_paired(t, 'apply_rope interleaved f32', 'clone f32')}]"
    )
    print(f"     copy_ into a preallocated buffer takes {r_copy:.2f}x the time of clone", end="")
    if r_copy < 0.8:
        print(
            "; the difference is the first touch\n     of clone's fresh output pages "
            "(page faults), which every out-of-place contender pays too,\n     so ratios to "
            "clone depend on what page faults cost on the machine"
        )
    else:
        print(" (small tensors: fresh pages are not the bottleneck here)")
    print()

    # ---------------------------------------------------------------- chunk sweep (optional)
    sweep: list[tuple[int, float, float]] = []
    if args.sweep_chunks:
        saved = rope_kernels.CHUNK_ELEMENTS
        sizes = [1 << e for e in range(16, 23)]
        SC: dict[str, Callable[[], object]] = {"clone f32": C["clone f32"]}

        def with_chunk(n_el: int) -> Callable[[], object]:
            def call() -> object:
                rope_kernels.CHUNK_ELEMENTS = n_el
                try:
                    return eager(q, cos, sin), eager(k, cos, sin)
                finally:
                    rope_kernels.CHUNK_ELEMENTS = saved

            return call

        for n_el in sizes:
            SC[f"chunk {n_el}"] = with_chunk(n_el)
        ts = Timings(SC)
        with torch.no_grad():
            ts.run(rounds, warmup)
        print("apply_rope eager path (half, float32, fused=False) by kernels.CHUNK_ELEMENTS")
        print(f"  {'clone f32':28s} {_describe(ts, 'clone f32')}")
        for n_el in sizes:
            name = f"chunk {n_el}"
            sweep.append((n_el, ts.median(name), ts.ratio(name, "clone f32")))
            print(f"  {name:28s} {_describe(ts, name)}   {ts.ratio(name, 'clone f32'):.3f}x clone")
        print()

    # ---------------------------------------------------------------- tables
    ref_cos, ref_sin = _tables_float64_reference(table_len, d)
    ours_cos, ours_sin = posenc_core.rope_cos_sin(torch.arange(table_len), d)
    f32_cos, f32_sin = _tables_all_float32(table_len, d)
    err_ours = max(
        (ours_cos.double() - ref_cos).abs().max().item(),
        (ours_sin.double() - ref_sin).abs().max().item(),
    )
    err_f32 = max(
        (f32_cos.double() - ref_cos).abs().max().item(),
        (f32_sin.double() - ref_sin).abs().max().item(),
    )
    del ref_cos, ref_sin, ours_cos, ours_sin, f32_cos, f32_sin
    positions = torch.arange(table_len)
    T = {
        "rope_cos_sin (float64, rounded once)": lambda: posenc_core.rope_cos_sin(positions, d),
        "all-float32 recipe": lambda: _tables_all_float32(table_len, d),
    }
    tt = Timings(T)
    tt.run(rounds, warmup)
    r_tab = tt.ratio("rope_cos_sin (float64, rounded once)", "all-float32 recipe")
    print(f"cos/sin table of {table_len} x {d} (float32 result), ms per build")
    for name in T:
        print(f"  {name:38s} {_describe(tt, name)}")
    print(
        f"  max abs error vs float64: rope_cos_sin {err_ours:.3g}, all-float32 {err_f32:.3g}; "
        f"rope_cos_sin takes {r_tab:.2f}x the time"
    )
    print()

    # ---------------------------------------------------------------- verdicts
    pass_clone = r_clone <= TARGET_VS_CLONE
    pass_hf = r_hf >= TARGET_VS_HF
    verdict = {True: "PASS", False: "FAIL"}

    def row(name: str, ratio_text: str, target: str, result: str, tm: Timings = t) -> str:
        lo, _, _, hi = tm.spread(name)
        return (
            f"| {name} | {_ms(tm.median(name))} | {_ms(lo)}-{_ms(hi)} | {ratio_text} | "
            f"{target} | {result} |"
        )

    print("Summary (Markdown)")
    print()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, {_cpu_model()}; "
        f"q and k of shape {shape}, {rounds} interleaved rounds, medians"
        + (" (QUICK MODE)" if args.quick else "")
    )
    print()
    print("| contender (q and k per call) | median ms | min-max ms | ratio | target | result |")
    print("|---|---:|---:|---:|---|---|")
    print(row("clone f32", "1.00 (floor)", "", ""))
    print(row("copy_ prealloc f32", f"{r_copy:.2f}x clone", "report", "-"))
    print(
        row(
            "apply_rope half f32",
            f"{r_clone:.2f}x clone",
            f"<= {TARGET_VS_CLONE}x clone",
            verdict[pass_clone],
        )
    )
    print(row("apply_rope eager half f32", f"{r_eager:.2f}x clone", "report", "-"))
    print(
        row(
            "HF eager f32",
            f"{r_hf:.2f}x apply_rope",
            f">= {TARGET_VS_HF}x apply_rope",
            verdict[pass_hf],
        )
    )
    print(row("apply_rope interleaved f32", f"{r_il:.2f}x clone", "report", "-"))
    print(row("clone bf16", "1.00 (floor)", "", ""))
    print(row("apply_rope half bf16", f"{r_clone_b:.2f}x clone", "report", "-"))
    print(row("HF eager bf16", f"{r_hf_b:.2f}x apply_rope", "report", "-"))
    for name, err in zip(T, (err_ours, err_f32)):
        print(row(name, f"max err {err:.2g}", f"table {table_len}x{d}", "-", tm=tt))
    print()
    print(
        f"float32 max |apply_rope - HF formula| = {diff_fp32:.3g} (bit-identical: {bit_fp32}); "
        f"HF formula: {rotate_half_src}"
    )
    print()

    print(
        f"TARGET 1  apply_rope <= {TARGET_VS_CLONE}x clone (float32):   {verdict[pass_clone]}  "
        f"({r_clone:.3f}x)"
    )
    print(
        f"TARGET 2  apply_rope >= {TARGET_VS_HF}x faster than HF eager: {verdict[pass_hf]}  "
        f"({r_hf:.2f}x)"
    )
    print(
        f"CHECK     float32 result within {EQUALITY_TOL:g} of HF formula:   "
        f"{verdict[diff_fp32 < EQUALITY_TOL]}  ({diff_fp32:.3g})"
    )
    missed = [n for n, ok in (("1 (vs clone)", pass_clone), ("2 (vs HF)", pass_hf)) if not ok]
    if missed:
        print()
        print("!" * 72)
        print(
            f"!!! TARGET MISSED: {', '.join(missed)}"
            + (" (quick mode: indicative only)" if args.quick else "")
        )
        print("!" * 72)
    if failures:
        print()
        for f in failures:
            print(f"ERROR: {f}")
        return 2
    if missed and args.strict:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
