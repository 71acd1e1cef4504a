"""Benchmark of posenc_core.apply_rope and rope_cos_sin on the CPU (a script, not a test).

What is measured, in one run, on q and k of shape (b, h, s, d) = (4, 32, 2048, 128), against
the peers a user would pick instead:

1. float32, ``layout="half"``: ``apply_rope(q, cos, sin)`` (out of place; the native C kernel,
   compiled on the first call of the first run and cached on disk; the first call's time is
   printed) and its eager path (``fused=False``) against ``q.clone()``, the memory-traffic
   floor. Target: at most 1.3x clone. Beside it Hugging Face's eager formula
   ``q * cos + rotate_half(q) * sin``, the same under ``torch.compile``, and
   rotary-embedding-torch (``RotaryEmbedding(dim=128).rotate_queries_or_keys``, interleaved
   pairs, compared with our interleaved layout), with its max abs error against the exact
   (float64) rotation.
2. ``apply_rope(q, cos, sin, out=buf)`` into a preallocated buffer and in place (``out=q``),
   each against ``buf.copy_(q)`` (target: at most 1.3x).
3. partial rotary, r = d/4 (GPT-NeoX's rotary_pct 0.25), against clone (reported).
4. bfloat16 and float16 inputs with tables of the same dtype against that dtype's clone
   (target: at most 1.5x), and bfloat16 with float64 tables (what RotaryEmbedding uses);
   Hugging Face's bf16 formula beside them.
5. building a 131072 x 128 cos/sin table with ``rope_cos_sin`` (float64, rounded once)
   against the all-float32 recipe, with the max abs error of each against float64.

Checks (a wrong result exits non-zero): float32 results (every path) bit-identical to Hugging
Face's formula (the interleaved one to the plain formula); bfloat16/float16 results equal to
the formula in float64 rounded once, bit for bit (the correctly rounded value: float64 holds
these sums exactly).

Method: every contender processes both q and k per call. After a warm-up, the contenders
run in interleaved rounds (the starting contender rotates each round), so slow phases of
the machine hit all of them alike; medians are reported with min, max and interquartile
range, and ratios are ratios of medians (the median of the per-round ratios and the ratio of
the fastest calls are printed too). Outputs are freed outside the timed region.

Usage::

    python benchmarks/rope_benchmark.py            # full size (about 3 GB of RAM, ~2-3 min)
    python benchmarks/rope_benchmark.py --quick    # (2, 8, 512, 128), few rounds: smoke test
    python benchmarks/rope_benchmark.py --strict   # exit 1 if a target is missed
    python benchmarks/rope_benchmark.py --sweep-chunks   # also time apply_rope per chunk size

The exit status is 0 even when a timing target is missed (the miss is printed loudly)
unless ``--strict`` is given; a wrong result always exits non-zero.
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
from posenc_core._numerics import round_once
from posenc_core.rope import kernels as rope_kernels
from posenc_core.rope import native as rope_native
from posenc_core.rope.formula import rope_formula

# --------------------------------------------------------------------------- setup

TARGET_VS_CLONE = 1.3  # apply_rope (half, float32) at most this many times clone
TARGET_OUT_VS_COPY = 1.3  # apply_rope(out=buf), and out=x in place, at most this x buf.copy_(x)
TARGET_LOW_VS_CLONE = 1.5  # bfloat16/float16 with same-dtype tables, vs that dtype's clone


def _llama_config(head_dim: int, layers: int) -> dict[str, object]:
    """A Llama config.json dict (base 500000, no scaling) with ``layers`` decoder layers."""
    return {
        "model_type": "llama",
        "hidden_size": 64 * head_dim,
        "num_attention_heads": 64,
        "num_hidden_layers": layers,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
    }


def _timed_group(
    title: str, contenders: dict[str, Callable[[], object]], rounds: int, warmup: int
) -> Timings:
    """Time ``contenders`` in their own interleaved rounds and print each one's spread."""
    timings = Timings(contenders)
    with torch.no_grad():
        timings.run(rounds, warmup)
    print(f"{title}, ms per call")
    for name in contenders:
        print(f"  {name:40s} {_describe(timings, name)}")
    return timings


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


def _rotary_embedding_torch() -> tuple[Callable[[torch.Tensor], torch.Tensor] | None, str]:
    """rotary-embedding-torch's public API as a user calls it (a benchmark peer only), or None."""
    try:
        import rotary_embedding_torch
        from rotary_embedding_torch import RotaryEmbedding
    except Exception as exc:  # noqa: BLE001 - any import problem means: skip this peer
        return (
            None,
            f"not installed ({exc.__class__.__name__}); pip install -r requirements-test.txt",
        )
    version = getattr(rotary_embedding_torch, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("rotary-embedding-torch")
    module = RotaryEmbedding(dim=128)  # interleaved pairs, theta 10000, float32 angles
    return module.rotate_queries_or_keys, f"rotary-embedding-torch {version}"


def _exact_rotation(x: torch.Tensor, layout: str) -> torch.Tensor:
    """The rotation of x by its positions 0..s-1 in float64 (angles and formula)."""
    s, d = x.shape[-2], x.shape[-1]
    inv = torch.pow(
        torch.tensor(10000.0, dtype=torch.float64), -torch.arange(0, d, 2, dtype=torch.float64) / d
    )
    ang = torch.arange(s, dtype=torch.float64)[:, None] * inv  # (s, d/2)
    if layout == "half":
        c, sn = torch.cat((ang.cos(), ang.cos()), -1), torch.cat((ang.sin(), ang.sin()), -1)
    else:
        c, sn = ang.cos().repeat_interleave(2, -1), ang.sin().repeat_interleave(2, -1)
    return rope_formula(x.double(), c, sn, layout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="small shape (2, 8, 512, 128) and few rounds"
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a timing target is missed"
    )
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 11)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed rounds first (2)")
    parser.add_argument(
        "--sweep-chunks",
        action="store_true",
        help="also time apply_rope's eager path for several kernels.CHUNK_ELEMENTS",
    )
    args = parser.parse_args(argv)

    shape = (2, 8, 512, 128) if args.quick else (4, 32, 2048, 128)
    rounds = args.rounds if args.rounds is not None else (5 if args.quick else 11)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    table_len = 16384 if args.quick else 131072
    if rounds < 1 or warmup < 0:
        parser.error("--rounds must be >= 1 and --warmup >= 0")
    _, _, s, d = shape
    r_part = d // 4
    started = time.perf_counter()

    torch.manual_seed(0)
    rotate_half, rotate_half_src = _hf_rotate_half()
    ret, ret_src = _rotary_embedding_torch()

    print("RoPE benchmark (posenc_core.apply_rope, rope_cos_sin)")
    print(
        f"  torch {torch.__version__}, {torch.get_num_threads()} threads, cpu capability "
        f"{torch.backends.cpu.get_cpu_capability()}; CPU: {_cpu_model()} "
        f"({os.cpu_count()} logical CPUs visible); {time.strftime('%Y-%m-%d')}"
    )
    print(
        f"  Python {platform.python_version()}, posenc_core from "
        f"{Path(posenc_core.__file__).parent}; transparent hugepages: "
        f"{_read('/sys/kernel/mm/transparent_hugepage/enabled')}"
    )
    print(f"  HF formula uses {rotate_half_src}; peer: {ret_src}")
    print(
        f"  shape (b, h, s, d) = {shape}, q and k per call; {warmup} warm-up + {rounds} timed "
        "rounds, interleaved"
    )
    if args.quick:
        print("  QUICK MODE: small shape, few rounds; indicative only")
    print()

    # ---------------------------------------------------------------- inputs
    q, k = torch.randn(shape), torch.randn(shape)
    low = {dt: (q.to(dt), k.to(dt)) for dt in (torch.bfloat16, torch.float16)}
    pos = torch.arange(s)
    cos, sin = posenc_core.rope_cos_sin(pos, d)  # (s, d) float32, layout "half"
    cos_i, sin_i = posenc_core.rope_cos_sin(pos, d, layout="interleaved")
    cos_p, sin_p = posenc_core.rope_cos_sin(pos, r_part)  # partial rotary: (s, d/4)
    low_tabs = {dt: posenc_core.rope_cos_sin(pos, d, dtype=dt) for dt in low}
    cos64, sin64 = posenc_core.rope_cos_sin(pos, d, dtype=torch.float64)
    cos4, sin4 = cos[None, None], sin[None, None]  # HF: (1, 1, s, d) after unsqueeze(1)
    cos4b, sin4b = (t.to(torch.bfloat16) for t in (cos4, sin4))  # HF casts to the input dtype
    buf_q, buf_k = torch.empty_like(q), torch.empty_like(k)
    work_q, work_k = q.clone(), k.clone()  # rotated in place, round after round
    apply_rope = posenc_core.apply_rope

    def hf(x: torch.Tensor, c: torch.Tensor, sn: torch.Tensor) -> torch.Tensor:
        return x * c + rotate_half(x) * sn

    hf_compiled = torch.compile(hf, dynamic=False)

    # ---------------------------------------------------------------- correctness
    failures: list[str] = []
    lines: list[str] = []

    def check(name: str, ok: bool, detail: str) -> None:
        lines.append(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}")
        if not ok:
            failures.append(f"{name}: {detail}")

    with torch.no_grad():
        t_first = time.perf_counter()
        ours = apply_rope(q, cos, sin)
        t_first = time.perf_counter() - t_first
        ref = hf(q, cos4, sin4)
        for name, got in (
            ("apply_rope f32", ours),
            ("apply_rope f32 eager", apply_rope(q, cos, sin, fused=False)),
            ("apply_rope f32 out=", apply_rope(q, cos, sin, out=buf_q)),
            ("HF compiled f32", hf_compiled(q, cos4, sin4)),
        ):
            n_diff = int((got != ref).sum())
            check(name, n_diff == 0, f"{n_diff} elements differ from HF's formula")
        qi = q.clone()
        apply_rope(qi, cos, sin, out=qi)
        check("apply_rope f32 out=q (in place)", torch.equal(qi, ref), "equal to HF's formula")
        del ours, ref, qi
        got = apply_rope(q, cos_p, sin_p)
        ref_p = torch.cat((hf(q[..., :r_part], cos_p, sin_p), q[..., r_part:]), -1)
        check(
            f"apply_rope f32 partial r={r_part}",
            torch.equal(got, ref_p),
            "equal to HF's GPT-NeoX partial formula",
        )
        del got, ref_p
        plain_i = q * cos_i + posenc_core.rotate_pairs(q, layout="interleaved") * sin_i
        n_il = int((apply_rope(q, cos_i, sin_i, layout="interleaved") != plain_i).sum())
        check("apply_rope f32 interleaved", n_il == 0, f"{n_il} elements differ from the formula")
        exact_i = _exact_rotation(q, "interleaved")
        err_ours_i = (plain_i.double() - exact_i).abs().max().item()
        err_ret = math.nan
        if ret is not None:
            got = ret(q)
            err_ret = (got.double() - exact_i).abs().max().item()
            del got
        del plain_i, exact_i
        for dt, (xl, _) in low.items():
            c, sn = low_tabs[dt]
            want = round_once(rope_formula(xl.double(), c.double(), sn.double(), "half"), dt)
            n_bad = int((apply_rope(xl, c, sn).view(torch.int16) != want.view(torch.int16)).sum())
            check(
                f"apply_rope {dt} ({dt} tables)",
                n_bad == 0,
                f"{n_bad} elements differ from the float64 formula rounded once",
            )
            del want
        xb = low[torch.bfloat16][0]
        exact_b = rope_formula(xb.double(), cos64, sin64, "half")
        got_b = apply_rope(xb, cos64, sin64)
        nn = _not_nearest(got_b, exact_b)
        check("apply_rope bf16 (float64 tables)", nn == 0, f"{nn} elements not the nearest bf16")
        hf_b = hf(xb, cos4b, sin4b)
        nn_hf = _not_nearest(
            hf_b, rope_formula(xb.double(), cos4b.double(), sin4b.double(), "half")
        )
        lines.append(
            f"  info HF bf16 formula: {nn_hf} of {xb.numel()} elements not the nearest bf16"
        )
        del exact_b, got_b, hf_b
    native_error = rope_native.kernel.error
    print(
        f"First apply_rope call (float32, native kernel): {t_first:.2f} s, loading (or compiling)"
        " the library included"
        + (f"; NATIVE KERNEL UNAVAILABLE, eager path used: {native_error}" if native_error else "")
    )
    print("Checks (q only; unit-normal inputs)")
    print("\n".join(lines))
    print(
        f"  info max |rotation - exact float64 rotation|, interleaved: apply_rope "
        f"{err_ours_i:.3g}, {ret_src}: {err_ret:.3g}"
    )
    print()

    # ---------------------------------------------------------------- timings
    bq, bk = low[torch.bfloat16]
    hq, hk = low[torch.float16]
    cb, sb = low_tabs[torch.bfloat16]
    ch, sh = low_tabs[torch.float16]
    C: dict[str, Callable[[], object]] = {
        "clone f32": lambda: (q.clone(), k.clone()),
        "copy_ prealloc f32": lambda: (buf_q.copy_(q), buf_k.copy_(k)),
        "apply_rope f32": lambda: (apply_rope(q, cos, sin), apply_rope(k, cos, sin)),
        "apply_rope eager f32": lambda: (
            apply_rope(q, cos, sin, fused=False),
            apply_rope(k, cos, sin, fused=False),
        ),
        "apply_rope out= f32": lambda: (
            apply_rope(q, cos, sin, out=buf_q),
            apply_rope(k, cos, sin, out=buf_k),
        ),
        "apply_rope in place f32": lambda: (
            apply_rope(work_q, cos, sin, out=work_q),
            apply_rope(work_k, cos, sin, out=work_k),
        ),
        "apply_rope interleaved f32": lambda: (
            apply_rope(q, cos_i, sin_i, layout="interleaved"),
            apply_rope(k, cos_i, sin_i, layout="interleaved"),
        ),
        f"apply_rope partial r={r_part} f32": lambda: (
            apply_rope(q, cos_p, sin_p),
            apply_rope(k, cos_p, sin_p),
        ),
        "HF eager f32": lambda: (hf(q, cos4, sin4), hf(k, cos4, sin4)),
        "HF torch.compile f32": lambda: (hf_compiled(q, cos4, sin4), hf_compiled(k, cos4, sin4)),
        "clone bf16": lambda: (bq.clone(), bk.clone()),
        "apply_rope bf16": lambda: (apply_rope(bq, cb, sb), apply_rope(bk, cb, sb)),
        "apply_rope bf16 f64 tables": lambda: (
            apply_rope(bq, cos64, sin64),
            apply_rope(bk, cos64, sin64),
        ),
        "HF eager bf16": lambda: (hf(bq, cos4b, sin4b), hf(bk, cos4b, sin4b)),
        "clone f16": lambda: (hq.clone(), hk.clone()),
        "apply_rope f16": lambda: (apply_rope(hq, ch, sh), apply_rope(hk, ch, sh)),
    }
    if ret is not None:
        C["rotary-embedding-torch f32"] = lambda: (ret(q), ret(k))
    t = Timings(C)
    t0 = time.perf_counter()
    with torch.no_grad():
        t.run(rounds, warmup)
    print(f"Timings, ms per call on q and k ({time.perf_counter() - t0:.1f} s in all)")
    for name in C:
        print(f"  {name:30s} {_describe(t, name)}")
    print()

    # uniform models pay nothing for the per-layer reading: the module from_config builds for
    # a Llama config is the plain module (timed apart from C, whose allocation pattern the
    # clone-relative targets depend on)
    direct = posenc_core.RotaryEmbedding(d, base=500000.0)
    uniform = posenc_core.RotaryEmbedding.from_config(_llama_config(d, 32))
    U = {
        "RotaryEmbedding f32": lambda: direct(q, k),
        "RotaryEmbedding.from_config f32": lambda: uniform(q, k),
    }
    tu = _timed_group(
        "RotaryEmbedding built directly and from a 32-layer Llama config", U, rounds, warmup
    )
    den, num = U  # from_config against the module built directly
    print(f"  {num} / {den}: {_paired(tu, num, den)}")
    print()

    construct = {
        "rope_config_from_hf (one reading)": lambda: posenc_core.rope.rope_config_from_hf(
            _llama_config(d, 80)
        ),
        "RotaryEmbedding.from_config (80 layers)": lambda: posenc_core.RotaryEmbedding.from_config(
            _llama_config(d, 80)
        ),
        "layer_plan (80 layers)": lambda: posenc_core.rope.layer_plan(_llama_config(d, 80)),
    }
    _timed_group("Reading an 80-layer Llama config.json dict", construct, max(5, rounds), 1)
    print()

    # ---------------------------------------------------------------- chunk sweep (optional)
    if args.sweep_chunks:
        saved = rope_kernels.CHUNK_ELEMENTS
        SC: dict[str, Callable[[], object]] = {"clone f32": C["clone f32"]}

        def with_chunk(n_el: int) -> Callable[[], object]:
            def call() -> object:
                rope_kernels.CHUNK_ELEMENTS = n_el
                try:
                    return apply_rope(q, cos, sin, fused=False), apply_rope(
                        k, cos, sin, fused=False
                    )
                finally:
                    rope_kernels.CHUNK_ELEMENTS = saved

            return call

        for n_el in [1 << e for e in range(16, 23)]:
            SC[f"chunk {n_el}"] = with_chunk(n_el)
        ts = Timings(SC)
        with torch.no_grad():
            ts.run(rounds, warmup)
        print("apply_rope eager path (half, float32, fused=False) by kernels.CHUNK_ELEMENTS")
        for name in SC:
            print(f"  {name:30s} {_describe(ts, name)}   {ts.ratio(name, 'clone f32'):.3f}x clone")
        print()

    # ---------------------------------------------------------------- tables
    ref_cos, ref_sin = _tables_float64_reference(table_len, d)
    ours_cos, ours_sin = posenc_core.rope_cos_sin(torch.arange(table_len), d)
    f32_cos, f32_sin = _tables_all_float32(table_len, d)
    err_tab_ours = max(
        (ours_cos.double() - ref_cos).abs().max().item(),
        (ours_sin.double() - ref_sin).abs().max().item(),
    )
    err_tab_f32 = max(
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
    tt.run(max(3, rounds // 2), 1)

    # ---------------------------------------------------------------- summary
    verdict = {True: "PASS", False: "MISS"}
    targets = {
        "apply_rope f32": ("clone f32", TARGET_VS_CLONE),
        "apply_rope out= f32": ("copy_ prealloc f32", TARGET_OUT_VS_COPY),
        "apply_rope in place f32": ("copy_ prealloc f32", TARGET_OUT_VS_COPY),
        "apply_rope bf16": ("clone bf16", TARGET_LOW_VS_CLONE),
        "apply_rope f16": ("clone f16", TARGET_LOW_VS_CLONE),
    }
    floors = {
        "copy_ prealloc f32": "clone f32",
        "apply_rope eager f32": "clone f32",
        "apply_rope interleaved f32": "clone f32",
        f"apply_rope partial r={r_part} f32": "clone f32",
        "HF eager f32": "clone f32",
        "HF torch.compile f32": "clone f32",
        "rotary-embedding-torch f32": "clone f32",
        "apply_rope bf16 f64 tables": "clone bf16",
        "HF eager bf16": "clone bf16",
    }
    missed = []
    print("Summary (Markdown)")
    print()
    print(
        f"{_cpu_model()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), {time.strftime('%Y-%m-%d')}; q and k of shape "
        f"{shape}, {rounds} interleaved rounds, medians" + (" (QUICK MODE)" if args.quick else "")
    )
    print()
    print("| contender (q and k per call) | median ms | min-max ms | ratio | target | result |")
    print("|---|---:|---:|---|---|---|")
    for name in C:
        lo, _, _, hi = t.spread(name)
        if name in targets:
            den, limit = targets[name]
            ratio = t.ratio(name, den)
            ok = ratio <= limit
            if not ok:
                missed.append(f"{name} {ratio:.2f}x {den} > {limit}x")
            cells = f"{ratio:.2f}x {den.split()[0]} | <= {limit}x | {verdict[ok]}"
        elif name in floors:
            cells = f"{t.ratio(name, floors[name]):.2f}x {floors[name].split()[0]} | report | -"
        else:
            cells = "1.00 (floor) | | "
        extra = f" (max err {err_ret:.2g})" if name == "rotary-embedding-torch f32" else ""
        print(f"| {name}{extra} | {_ms(t.median(name))} | {_ms(lo)}-{_ms(hi)} | {cells} |")
    for name, err in zip(T, (err_tab_ours, err_tab_f32)):
        lo, _, _, hi = tt.spread(name)
        print(
            f"| {name}, table {table_len}x{d} | {_ms(tt.median(name))} | {_ms(lo)}-{_ms(hi)} | "
            f"max err {err:.2g} | report | - |"
        )
    print()
    for name, (den, _) in targets.items():
        print(f"  {name} / {den}: {_paired(t, name, den)}")
    print(f"Total run time {time.perf_counter() - started:.0f} s")
    if missed:
        print()
        print("!" * 72)
        print("!!! TARGET MISSED: " + "; ".join(missed) + (" (quick mode)" if args.quick else ""))
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
