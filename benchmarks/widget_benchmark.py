"""Update time of the explorers in the built book, in Chromium at 1280 px, and each page's weight
(a script, not a test).

For every chapter page that shows an explorer (``_build/html``, after ``make book``), every
explorer and every control: set ``--updates`` values spread over the control's range (the other
controls stay where they are) by firing the slider's ``input`` event, or clicking a button, and
time each update in the page with ``performance.now()``: the whole synchronous handler, which
recomputes the formulas in float64, draws the canvas and writes the label. Painting the canvas to
the screen comes after and is not included. Target: every update under one frame at 60 Hz
(16.7 ms); the table gives the median, the 95th percentile and the slowest update per control
and the 95th percentile's and the slowest's ratios to that frame. On a shared 2-core machine a
single update now and then takes a garbage collection or a descheduling; such spikes land on
different controls from run to run, which is why both are printed.

It also prints each chapter page's weight (the HTML file, which holds the widget state) and the
share of it that is widget state, with ``--before DIR`` the same for another build (e.g. the
prerendered explorers of an older commit) and the ratio.

Usage::

    python benchmarks/widget_benchmark.py                      # 40 updates per control
    python benchmarks/widget_benchmark.py --before /tmp/old/_build/html
    python benchmarks/widget_benchmark.py --strict             # exit 1 if an update is slow

Needs Debian's chromium and Playwright (``make test`` installs both). Every request that leaves
the machine is blocked.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import pathlib
import platform
import re
import statistics
import sys
import threading

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "built"))
from browser_support import (  # noqa: E402
    CHROMIUM,
    LAUNCH_ARGS,
    MATHJAX_DONE,
    block_external,
    wait_for_explorers,
)

FRAME_MS = 1000 / 60
STATE = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-state\+json">(.*?)</script>', re.S
)

# Sets one control to each of `values` in turn and returns the time of each synchronous update.
TIME_UPDATES = """async ([index, name, values]) => {
  const root = document.querySelectorAll('.posenc-explorer')[index];
  const control = root.querySelector(`.posenc-control[data-param="${name}"]`);
  const slider = control.querySelector('input.posenc-slider');
  const buttons = [...control.querySelectorAll('button')];
  const times = [];
  for (const v of values) {
    const t0 = performance.now();
    if (slider) {
      slider.value = String(v);
      slider.dispatchEvent(new Event('input', {bubbles: true}));
    } else {
      buttons[v].click();
    }
    times.push(performance.now() - t0);
    await new Promise(r => requestAnimationFrame(() => r()));  // let the frame be painted
  }
  return times;
}"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(html: pathlib.Path) -> tuple[str, http.server.ThreadingHTTPServer]:
    handler = functools.partial(_Quiet, directory=str(html))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}", httpd


def slider_positions(p: dict, n: int) -> list[float]:
    """n slider positions spread over the range (on the slider's own, log or linear, scale),
    alternating ends and middle so that consecutive updates differ."""
    import math

    lo, hi = (math.log10(p["min"]), math.log10(p["max"])) if p["log"] else (p["min"], p["max"])
    return [lo + (hi - lo) * ((j * 0.618034) % 1.0) for j in range(n)]


def weights(html: pathlib.Path) -> dict[str, tuple[int, int]]:
    out = {}
    for page in sorted((html / "chapters").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        state = sum(len(s.encode()) for s in STATE.findall(text))
        out[page.stem] = (page.stat().st_size, state)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html", type=pathlib.Path, default=ROOT / "_build" / "html")
    ap.add_argument("--before", type=pathlib.Path, help="another build's _build/html to compare")
    ap.add_argument("--updates", type=int, default=40)
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    print(f"machine: {platform.processor() or platform.machine()}, Chromium {CHROMIUM}")
    now = weights(args.html)
    before = weights(args.before) if args.before else {}
    print("\npage weights (MB: page, of which widget state)")
    for name, (size, state) in now.items():
        line = f"  {name:32s} {size / 1e6:6.2f} ({state / 1e6:.2f})"
        if name in before:
            b_size, b_state = before[name]
            line += (
                f"   before {b_size / 1e6:6.2f} ({b_state / 1e6:.2f})   ratio {size / b_size:.2f}"
            )
        print(line)
    pages = [n for n in now if '"anywidget"' in (args.html / "chapters" / f"{n}.html").read_text()]
    url, httpd = serve(args.html)
    slow, rows = [], []
    print(f"\nupdate time in Chromium at 1280 px, {args.updates} updates per control (ms)")
    head = ("page", "explorer", "control", "median", "p95", "max", "p95/frame", "max/frame")
    print("  {:28s} {:14s} {:16s} {:>7s} {:>7s} {:>7s} {:>9s} {:>9s}".format(*head))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        external = block_external(context, url)
        page = context.new_page()
        for name in pages:
            page.goto(f"{url}/chapters/{name}.html", wait_until="networkidle")
            # time a reader's updates, not the page's start-up: explorers drawn, math typeset
            wait_for_explorers(page, args.html / "chapters" / f"{name}.html")
            page.evaluate(MATHJAX_DONE)
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => r()))")
            specs = page.evaluate(
                "() => [...document.querySelectorAll('.posenc-explorer')].map(r => r.posenc.spec)"
            )
            for index, spec in enumerate(specs):
                page.evaluate(
                    "i => document.querySelectorAll('.posenc-explorer')[i].scrollIntoView()", index
                )
                for p in spec["params"]:
                    if p["kind"] == "choice":
                        k = len(p["options"])
                        values = [j % k for j in range(args.updates)]
                    else:
                        values = slider_positions(p, args.updates)
                    times = page.evaluate(TIME_UPDATES, [index, p["name"], values])
                    med, top = statistics.median(times), max(times)
                    p95 = statistics.quantiles(times, n=20, method="inclusive")[-1]
                    print(
                        f"  {name[:28]:28s} {spec['name'][:14]:14s} {p['name'][:16]:16s} "
                        f"{med:7.2f} {p95:7.2f} {top:7.2f} {p95 / FRAME_MS:9.2f} "
                        f"{top / FRAME_MS:9.2f}"
                    )
                    rows.append((med, p95, top, f"{name} {spec['name']} {p['name']}"))
                    if top > FRAME_MS:
                        slow.append((name, spec["name"], p["name"], round(top, 1)))
        browser.close()
    httpd.shutdown()
    if external:
        print(f"requests that left the machine (blocked): {external[:3]}")
    if rows:
        print(
            f"\nmedians {min(r[0] for r in rows):.1f}-{max(r[0] for r in rows):.1f} ms; "
            "slowest 95th percentile {1:.1f} ms ({3}); slowest update {2:.1f} ms ({4})".format(
                *max(rows, key=lambda r: r[1])[:2],
                max(r[2] for r in rows),
                max(rows, key=lambda r: r[1])[3],
                max(rows, key=lambda r: r[2])[3],
            )
        )
    if slow:
        print(f"\nMISSED the one-frame target ({FRAME_MS:.1f} ms): {slow}")
        return 1 if args.strict else 0
    print(f"\nevery update under one frame ({FRAME_MS:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
