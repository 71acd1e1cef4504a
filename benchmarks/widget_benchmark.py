"""Update latency of the live explorers in posenc_core.book.widgets (a script, not a test).

For every explorer in live mode, at its default sizes, and for each of its controls: move
that control through ``--updates`` values spread over its range (the other controls stay at
their defaults) and time each update, from ``Explorer.set`` to the new PNG in the
``ipywidgets.Image`` widget: recompute with posenc_core, update the figure's artists, draw
(incrementally when the axes limits stay the same, in full otherwise), encode the PNG and
assign it to the widget. The time a browser needs to receive and show the PNG is not
included (outside a kernel, the widgets' messages go nowhere).

Target: median update <= 50 ms (the widget contract). Every update must produce a new PNG
(checked; a failed check exits non-zero).

Usage::

    python benchmarks/widget_benchmark.py               # 30 updates per control
    python benchmarks/widget_benchmark.py --updates 10  # quicker
    python benchmarks/widget_benchmark.py --strict      # exit 1 if a median misses the target

The exit status is 0 when a timing target is missed (a banner says so) unless ``--strict``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402

from posenc_core.book import widgets  # noqa: E402

TARGET_MS = 50.0
EXPLORERS = (
    widgets.sinusoidal_explorer,
    widgets.base_explorer,
    widgets.unit_circle_explorer,
    widgets.rope_decay_explorer,
    widgets.rope_scaling_explorer,
)


def sweep(values: list, n: int, current) -> list:
    """``n`` values spread over ``values`` (cycling when there are fewer), never two equal in a
    row and the first different from ``current``, so that every update changes the figure."""
    if len(values) < 2:
        raise ValueError(f"a control needs at least 2 values, got {values}")
    step = max(1, (len(values) - 1) // max(1, n - 1))
    picks = [values[(j * step) % len(values)] for j in range(n)]
    out, previous = [], current
    for v in picks:
        if v == previous:
            v = values[(values.index(v) + 1) % len(values)]
        out.append(v)
        previous = v
    return out


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--updates", type=int, default=30, help="timed updates per control (default 30)"
    )
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed updates per control first (default 3)"
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 if a median misses the target"
    )
    args = parser.parse_args()
    if args.updates < 2:
        parser.error(f"--updates must be >= 2, got {args.updates}")

    print(
        f"python {platform.python_version()}, matplotlib {matplotlib.__version__}, ipywidgets "
        f"{ipywidgets.__version__}, {platform.machine()} with {os.cpu_count()} CPUs, "
        f"{platform.platform()}"
    )
    print(
        f"live mode, {args.updates} timed updates per control after {args.warmup} warm-up updates; "
        f"target: median <= {TARGET_MS:.0f} ms\n"
    )
    header = (
        f"{'explorer':<14} {'control':<10} {'n':>3} {'median':>8} {'p10':>7} {'p90':>7} {'min':>7} "
        f"{'max':>7} {'PNG KB':>7}  result"
    )
    print(header)
    print("-" * len(header))
    misses, broken = [], []
    for make in EXPLORERS:
        start = time.perf_counter()
        explorer = make(mode="live")
        build_ms = (time.perf_counter() - start) * 1e3
        defaults = dict(explorer.values)
        for name in explorer.controls:
            explorer.set(**defaults)
            values = explorer.grid[name]
            for v in sweep(values, args.warmup, explorer.values[name]):
                explorer.set(**{name: v})
            times, sizes = [], []
            previous = explorer.figure_png()
            for v in sweep(values, args.updates, explorer.values[name]):
                t0 = time.perf_counter()
                explorer.set(**{name: v})
                png = bytes(explorer._image.value)  # what the Image widget now shows
                times.append((time.perf_counter() - t0) * 1e3)
                sizes.append(len(png))
                if (
                    png == previous
                    or not png.startswith(b"\x89PNG")
                    or explorer.last_error is not None
                ):
                    broken.append(f"{explorer.name}.{name} = {v!r}")
                previous = png
            median = statistics.median(times)
            ok = median <= TARGET_MS
            if not ok:
                misses.append(f"{explorer.name}.{name}")
            print(
                f"{explorer.name:<14} {name:<10} {len(times):>3} {median:>6.1f}ms "
                f"{percentile(times, 0.1):>5.1f}ms "
                f"{percentile(times, 0.9):>5.1f}ms {min(times):>5.1f}ms {max(times):>5.1f}ms "
                f"{statistics.mean(sizes) / 1e3:>7.1f}  {'PASS' if ok else 'FAIL'}"
            )
        print(f"{'':<14} (built in {build_ms:.0f} ms)")
    print()
    if broken:
        print(
            "ERROR: these updates did not produce a new PNG (or recorded an error):",
            ", ".join(broken),
        )
        return 2
    if misses:
        print("=" * 72)
        print(f"TARGET MISSED: median update above {TARGET_MS:.0f} ms for " + ", ".join(misses))
        print("=" * 72)
        return 1 if args.strict else 0
    print(f"All medians within the {TARGET_MS:.0f} ms target.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
