"""The model lab's forward pass in Chromium, its responsiveness and its page weight (a script,
not a test).

For every model of :data:`posenc_core.book.widgets.lab.MODELS`, ``bytelm.js``'s ``forward``
over the first held-out excerpt (8L = 512 bytes), unmodified run, warmed up, timed ``--repeats``
times with ``performance.now()``: inside a module Worker made from the engine's source (how the
widget runs it) and on the page's main thread, each with ``want = {layer: 0}`` (every head's
attention of the layer shown kept, what the widget's worker asks for; ``--all-maps``: every
layer's, ``want = "all"``) and ``want = null`` (logits only). Beside it,
PyTorch's forward of the same model on the same bytes (``torch.inference_mode``, float32, one
thread and the default thread count), the peer a reader would otherwise run, and the ratio
JavaScript (worker, the widget's ``want``) / PyTorch. ``bytelm.js`` computes in float64.

Responsiveness: while passes of the largest model run back to back (the widget's pass: forward
with every map, loss and top five), a timer asks to run every 10 ms and the page records how
late each one runs; real pointer events (Chromium's input pipeline, driven through Playwright)
record ``performance.now() - event.timeStamp``. Once with the passes in a worker, once on the
main thread (one pass per task, lab.js's fallback where no worker starts) for contrast. With
the built book (``_build/html``, after ``make book``) the same is measured on the chapter page
itself, the lab switched to the largest model and fed a new excerpt whenever a result arrives.

Page weight (built book only): the 8c page's HTML and the widget state inside it (spec, engine,
ES module and CSS), everything the page fetches on first load, the checkpoint fetched for the
default model, against a chapter page without the lab; and every model's checkpoint size.

Targets (issue 41): a pass over 512 bytes in at most 100 ms; input answered within 50 ms while
it computes; at most 1 MB added to a page. The pages are served from 127.0.0.1 by this script:
a folder it writes itself from ``lab.py`` (``bytelm.js``, ``lab_spec()``, the checkpoints from
``lab.weights()``, SHA-256 checked) and, where it exists, the built book. Every request that
leaves the machine is blocked.

Usage::

    python benchmarks/lab_benchmark.py            # 15 timed passes per model and mode
    python benchmarks/lab_benchmark.py --quick    # 5 passes, shorter responsiveness runs
    python benchmarks/lab_benchmark.py --strict   # exit 1 if a target is missed

Needs Debian's chromium and Playwright (``make test`` installs both).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import re
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "built"))
from browser_support import CHROMIUM, LAUNCH_ARGS, block_external  # noqa: E402
from widget_benchmark import serve  # noqa: E402  (this folder is sys.path[0])

PASS_MS = 100.0  # issue 41: one pass over 8L bytes
INPUT_MS = 50.0  # issue 41: input answered while computing
PAGE_BYTES = 1_000_000  # issue 41: added to any page
PAGE = "08c_model_lab"  # the chapter page that shows the lab
PLAIN_PAGE = "08b_caches_and_windows"  # a chapter page without it, for the page weight
STATE = re.compile(
    r'<script type="application/vnd\.jupyter\.widget-state\+json">(.*?)</script>', re.S
)

# Shared by the page and the worker: time `forward` n times after `warm` untimed passes, and
# one pass as the widget's worker makes it (forward with every map, loss, top five).
TIMER = """
export function time_forward(model, tokens, run, want, n, warm) {
  const times = [];
  for (let r = 0; r < warm + n; r++) {
    const t0 = performance.now();
    forward(model, tokens, run, want);
    times.push(performance.now() - t0);  // the caller drops the first `warm`
  }
  return times;
}
export function widget_pass(model, tokens, run, want) {
  const out = forward(model, tokens, run, want);
  loss_per_byte(out.logits, tokens);
  top_k(out.logits, tokens.length, 5);
}
"""

WORKER = """
const models = new Map();
self.onmessage = (e) => {
  const m = e.data;
  try {
    if (m.kind === "load") {
      models.set(m.name, load_model(m.arch, parse_safetensors(m.buffer)));
      self.postMessage({ kind: "loaded" });
    } else if (m.kind === "time") {
      const times = time_forward(models.get(m.name), m.tokens, m.run, m.want, m.n, m.warm);
      self.postMessage({ kind: "times", times });
    } else if (m.kind === "pass") {
      const t0 = performance.now();
      widget_pass(models.get(m.name), m.tokens, m.run, m.want);
      self.postMessage({ kind: "passed", ms: performance.now() - t0 });
    }
  } catch (err) {
    self.postMessage({ kind: "error", message: String((err && err.message) || err) });
  }
};
"""

# The bench page's module: window.bench = {load, time_main, time_worker, responsiveness}.
PAGE_MODULE = """
import * as E from "./engine.js";
const spec = await (await fetch("spec.json")).json();
const engine = await (await fetch("engine.js")).text();
const worker_url = URL.createObjectURL(new Blob([engine + "\\n" + WORKER_SOURCE],
                                                { type: "text/javascript" }));
const worker = new Worker(worker_url, { type: "module" });
const ask = (m, transfer) => new Promise((resolve, reject) => {
  worker.onmessage = (e) => (e.data.kind === "error" ? reject(new Error(e.data.message))
                                                    : resolve(e.data));
  worker.postMessage(m, transfer || []);
});
const main_models = new Map();
const tokens = Uint8Array.from(spec.excerpts[0], (c) => c.charCodeAt(0) & 255);
const entry = (name) => spec.models.find((m) => m.name === name);
const run_of = (name) => E.resolve_run(spec, entry(name), "none");

async function load(name) {
  const e = entry(name);
  const buffer = await (await fetch("bytelm/" + e.file)).arrayBuffer();
  const arch = E.model_arch(spec, e);
  main_models.set(name, E.load_model(arch, E.parse_safetensors(buffer)));
  await ask({ kind: "load", name, arch, buffer: buffer.slice(0) });
  return { bytes: buffer.byteLength, tokens: tokens.length };
}

function time_main(name, want, n, warm) {
  return E.time_forward(main_models.get(name), tokens, run_of(name), want, n, warm);
}

async function time_worker(name, want, n, warm) {
  const run = run_of(name);
  const m = await ask({ kind: "time", name, tokens, run, want, n, warm });
  return m.times;
}

// Passes of `name` back to back for `ms` (in the worker, or on this thread one per task) while
// a 10 ms timer and the pointer events record how late they run.
function responsiveness(where, name, ms, want) {
  const timer = [];
  const input = [];
  const pass_ms = [];
  const on_pointer = (ev) => input.push(performance.now() - ev.timeStamp);
  document.addEventListener("pointermove", on_pointer);
  let running = true;
  const model = main_models.get(name);
  const run = run_of(name);
  const next = () => {
    if (!running) return;
    if (where === "worker") {
      ask({ kind: "pass", name, tokens, run, want }).then((m) => { pass_ms.push(m.ms); next(); });
    } else {
      setTimeout(() => {
        if (!running) return;
        const t0 = performance.now();
        E.widget_pass(model, tokens, run, want);
        pass_ms.push(performance.now() - t0);
        next();
      }, 0);
    }
  };
  return new Promise((resolve) => {
    const end = performance.now() + ms;
    const tick = (due) => {
      const now = performance.now();
      timer.push(now - due);
      if (now < end) { const d = now + 10; setTimeout(() => tick(d), 10); return; }
      running = false;
      document.removeEventListener("pointermove", on_pointer);
      resolve({ timer, input, pass_ms });
    };
    next();
    const d = performance.now() + 10;
    setTimeout(() => tick(d), 10);
  });
}
window.bench = { load, time_main, time_worker, responsiveness };
window.bench_ready = true;
"""

# On the built chapter page: the lab switched to `name`, then a new excerpt whenever a result
# arrives, for `ms`, while a 10 ms timer and the pointer events record how late they run.
PAGE_RESPONSIVENESS = """async ([name, ms]) => {
  const root = document.querySelector('.posenc-lab');
  await root.posenc.ready;
  const select = root.querySelector('.posenc-control[data-param="model"] select');
  const done = (old) => new Promise((r) => {
    const poll = () => (root.posenc.data !== old && root.posenc.data.model === name
                        ? r() : setTimeout(poll, 5));
    poll();
  });
  let old = root.posenc.data;
  select.value = name;
  select.dispatchEvent(new Event('change', { bubbles: true }));
  await done(old);
  const another = [...root.querySelectorAll('.posenc-control[data-param="text"] button')]
    .find((b) => b.textContent.includes('another'));
  const timer = [];
  const input = [];
  const pass_ms = [];
  const on_pointer = (ev) => input.push(performance.now() - ev.timeStamp);
  document.addEventListener('pointermove', on_pointer);
  const end = performance.now() + ms;
  old = root.posenc.data;
  another.click();
  await new Promise((resolve) => {
    const tick = (due) => {
      const now = performance.now();
      timer.push(now - due);
      if (root.posenc.data !== old) {  // a result arrived: ask for the next excerpt
        pass_ms.push(root.posenc.data.ms / Math.max(root.posenc.data.passes, 1));
        old = root.posenc.data;
        if (now < end) another.click();
      }
      if (now < end) { const d = now + 10; setTimeout(() => tick(d), 10); return; }
      resolve();
    };
    const d = performance.now() + 10;
    setTimeout(() => tick(d), 10);
  });
  document.removeEventListener('pointermove', on_pointer);
  return { timer, input, pass_ms };
}"""


def write_site(folder: pathlib.Path) -> dict:
    """The bench page, the engine (bytelm.js and the timer), the spec and every checkpoint."""
    from posenc_core.book.widgets import lab

    spec = lab.lab_spec()
    (folder / "bytelm").mkdir()
    for key in lab.MODELS:
        path, _ = lab.checkpoint(key)
        (folder / "bytelm" / path.name).write_bytes(lab.weights(key))
    (folder / "engine.js").write_text(lab.engine_source() + "\n" + TIMER, encoding="utf-8")
    (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    module = PAGE_MODULE.replace("WORKER_SOURCE", json.dumps(WORKER))
    (folder / "bench.js").write_text(module, encoding="utf-8")
    (folder / "index.html").write_text(
        '<!doctype html><html><head><meta charset="utf-8"><title>lab bench</title></head>'
        '<body><p>model lab benchmark</p><script type="module" src="bench.js"></script>'
        "</body></html>",
        encoding="utf-8",
    )
    return spec


def stats(times: list[float]) -> tuple[float, float]:
    """Median and 95th percentile (inclusive method, as widget_benchmark.py)."""
    if len(times) < 2:
        return times[0], times[0]
    return statistics.median(times), statistics.quantiles(times, n=20, method="inclusive")[-1]


def torch_times(key: str, text: str, n: int, warm: int) -> dict[int, list[float]]:
    """PyTorch's forward of model ``key`` on ``text`` (ms), one thread and the default count."""
    import torch

    from posenc_core.book.widgets import lab

    model = lab.load_model(key)
    tokens = torch.tensor(list(text.encode("latin-1")), dtype=torch.long)[None]
    default = torch.get_num_threads()
    out = {}
    try:
        for threads in (1, default):
            torch.set_num_threads(threads)
            times = []
            with torch.inference_mode():
                for r in range(warm + n):
                    t0 = time.perf_counter()
                    model(tokens)
                    if r >= warm:
                        times.append((time.perf_counter() - t0) * 1e3)
            out[threads] = times
    finally:
        torch.set_num_threads(default)
    return out


def pointer_moves(page, ms: float, box: dict | None = None) -> int:
    """Move the mouse back and forth for ``ms`` (about every 10 ms); the number of moves."""
    x0, y0, w = (box["x"], box["y"] + 5, box["width"]) if box else (20, 20, 400)
    end = time.perf_counter() + ms / 1e3
    n = 0
    while time.perf_counter() < end:
        page.mouse.move(x0 + 5 + (n * 37) % max(int(w) - 10, 1), y0 + (n % 2))
        n += 1
        time.sleep(0.01)
    return n


def delays_line(label: str, res: dict) -> tuple[str, float]:
    t_med, t_p95 = stats(res["timer"])
    worst = max(res["timer"])
    inp = res["input"]
    i_p95, i_worst = (stats(inp)[1], max(inp)) if len(inp) > 1 else (float("nan"),) * 2
    p_med = statistics.median(res["pass_ms"]) if res["pass_ms"] else float("nan")
    line = (
        f"  {label:34s} {len(res['pass_ms']):6d} {p_med:8.1f} {t_p95:8.1f} {worst:8.1f} "
        f"{len(inp):6d} {i_p95:8.1f} {i_worst:8.1f}"
    )
    return line, max(worst, i_worst if inp else 0.0)


def page_weight(html: pathlib.Path, url: str, browser) -> tuple[list[str], list[tuple]]:
    """Lines describing the 8c page's weight, and the targets it was checked against."""
    lines, checks = [], []
    page_file = html / "chapters" / f"{PAGE}.html"
    text = page_file.read_text(encoding="utf-8")
    states = STATE.findall(text)
    state_bytes = sum(len(s.encode()) for s in states)
    parts = {"spec": 0, "engine": 0, "_esm": 0, "_css": 0}
    for s in states:
        for model in json.loads(s).get("state", {}).values():
            for k in parts:
                v = model.get("state", {}).get(k)
                if v is not None:
                    parts[k] += len((v if isinstance(v, str) else json.dumps(v)).encode())
    lines.append(f"  {PAGE}.html: {page_file.stat().st_size / 1e3:8.1f} kB")
    lines.append(f"    widget state in it: {state_bytes / 1e3:8.1f} kB")
    for k, v in parts.items():
        lines.append(f"      {k:8s} {v / 1e3:8.1f} kB")
    fetched = {}
    for name in (PAGE, PLAIN_PAGE):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        block_external(context, url)
        sizes: dict[str, int] = {}

        def on_response(resp, sizes=sizes):
            try:
                sizes[resp.url] = len(resp.body())
            except Exception:  # a redirect or an aborted request has no body
                pass

        page = context.new_page()
        page.on("response", on_response)
        page.goto(f"{url}/chapters/{name}.html", wait_until="commit")
        if name == PAGE:
            page.wait_for_function(
                "() => document.querySelector('.posenc-lab')?.posenc?.data",
                timeout=60000,
                polling=5,
            )
            first = page.evaluate(
                "() => { const d = document.querySelector('.posenc-lab').posenc.data;"
                " return [d.ms, d.passes, performance.now()]; }"
            )
            lines.append(
                f"  first result on a fresh load: {first[1]} pass(es) in {first[0]:.0f} ms in the "
                f"worker (cold), shown {first[2] / 1e3:.1f} s after the page was requested"
            )
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(500)
        context.close()
        fetched[name] = sizes
    lab_sizes, plain = fetched[PAGE], fetched[PLAIN_PAGE]
    total = sum(lab_sizes.values())
    weights = {u: b for u, b in lab_sizes.items() if "/_static/bytelm/" in u}
    new_files = {u: b for u, b in lab_sizes.items() if u not in plain and "/chapters/" not in u}
    lines.append(f"  first load of {PAGE}: {len(lab_sizes)} files, {total / 1e3:.1f} kB in all")
    for u, b in weights.items():
        lines.append(f"    weights fetched: {u.rsplit('/', 1)[-1]} {b / 1e3:.1f} kB")
    plain_total = sum(plain.values())
    lines.append(f"  first load of {PLAIN_PAGE} (no lab): {plain_total / 1e3:.1f} kB")
    code = (".js", ".mjs", ".css")
    extra = {u: b for u, b in new_files.items() if u.split("?")[0].endswith(code)}
    lines.append(
        f"  JS/CSS files {PAGE} fetches that {PLAIN_PAGE} does not: "
        + (
            ", ".join(f"{u.rsplit('/', 1)[-1]} {b / 1e3:.1f} kB" for u, b in extra.items())
            or "none"
        )
        + " (the lab's code and CSS travel in the widget state)"
    )
    added = state_bytes + sum(weights.values()) + sum(extra.values())
    lines.append(
        f"  added by the lab on first load (widget state + weights + new JS/CSS): "
        f"{added / 1e3:.1f} kB (target <= {PAGE_BYTES / 1e3:.0f} kB)"
    )
    biggest = max(p.stat().st_size for p in (html / "_static" / "bytelm").iterdir())
    lines.append(
        f"  a reader who then picks a 4-layer model fetches {biggest / 1e3:.0f} kB more (each "
        f"checkpoint once, on demand): widget state + that checkpoint alone "
        f"{(state_bytes + biggest) / 1e3:.0f} kB"
    )
    checks.append(("page weight added", added, PAGE_BYTES))
    return lines, checks


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--html", type=pathlib.Path, default=ROOT / "_build" / "html")
    ap.add_argument("--repeats", type=int, default=None, help="timed passes (default 15)")
    ap.add_argument("--quick", action="store_true", help="5 passes, 1.5 s responsiveness runs")
    ap.add_argument(
        "--all-maps", action="store_true", help='time want = "all" instead of the layer shown'
    )
    ap.add_argument("--strict", action="store_true", help="exit 1 if a target is missed")
    args = ap.parse_args(argv)
    n = args.repeats or (5 if args.quick else 15)
    want = "all" if args.all_maps else {"layer": 0}  # lab.js's worker: the maps of the layer shown
    # V8 optimises forward's attention-map path only after a few passes (seen: the first 3-5
    # passes with maps kept took up to 3x the steady time), so warm up past that
    warm = 3 if args.quick else 8
    busy_ms = 1500 if args.quick else 4000
    import torch
    from playwright.sync_api import sync_playwright

    from posenc_core.book.widgets import lab

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Chromium {CHROMIUM}, torch {torch.__version__} ({torch.get_num_threads()} threads); "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )
    missed = []
    with tempfile.TemporaryDirectory(prefix="lab-bench-") as tmp, sync_playwright() as pw:
        folder = pathlib.Path(tmp)
        spec = write_site(folder)
        text = spec["excerpts"][0]
        url, httpd = serve(folder)
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        external = block_external(context, url)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/index.html")
        page.wait_for_function("() => window.bench_ready === true", timeout=30000)
        print(
            f"\nforward over {len(text)} held-out bytes (excerpt 0), unmodified run; ms, "
            f"{n} timed after {warm} warm-up passes (W 1st: the first of them); W = worker, "
            "M = main thread; "
            f"torch1/torchD = PyTorch, 1 thread / default; wid = want {json.dumps(want)} "
            "(the widget's), null = logits only"
        )
        head = ("model", "ckpt kB", "W wid", "p95", "min", "W null", "p95", "M wid", "p95",
                "M null", "p95", "W 1st", "torch1", "torchD", "W/t1", "W/tD", "<=100")  # fmt: skip
        fmt = "  {:20s} {:>7s} " + " ".join(["{:>6s}"] * 14) + " {:>5s}"
        print(fmt.format(*head))
        rows = []
        for key in lab.MODELS:
            info = page.evaluate("name => bench.load(name)", key)
            timed = {}
            for where in ("worker", "main"):
                for x in (want, None):
                    timed[where, x is None] = page.evaluate(
                        f"([k, x, n, w]) => bench.time_{where}(k, x, n, w)", [key, x, n, warm]
                    )
            first = timed["worker", False][0]  # this model's first pass in the worker
            timed = {k: v[warm:] for k, v in timed.items()}
            w_all, w_null = timed["worker", False], timed["worker", True]
            m_all, m_null = timed["main", False], timed["main", True]
            tt = torch_times(key, text, n, warm)
            t1 = statistics.median(tt[1])
            td = statistics.median(tt[max(tt)])
            cols = [*stats(w_all), min(w_all), *stats(w_null), *stats(m_all), *stats(m_null)]
            cols += [first, t1, td]
            ok = cols[0] <= PASS_MS
            if not ok:
                missed.append(("pass", key, round(cols[0], 1)))
            rows.append((key, info["bytes"], cols))
            print(
                fmt.format(
                    key, f"{info['bytes'] / 1e3:.0f}", *(f"{c:.1f}" for c in cols),
                    f"{cols[0] / t1:.1f}", f"{cols[0] / td:.1f}", "yes" if ok else "MISS",
                )
            )  # fmt: skip
        all_w = [r[2][0] for r in rows]
        top = max(rows, key=lambda r: r[2][1])
        print(
            f"  worker, the widget's want: medians {min(all_w):.1f}-{max(all_w):.1f} ms; "
            f"slowest 95th percentile {top[2][1]:.1f} ms ({top[0]})"
        )
        largest = max(rows, key=lambda r: (r[1], r[2][0]))[0]
        print(
            f"\nresponsiveness while passes of {largest} (the largest checkpoint) run back to back "
            f"for {busy_ms / 1e3:.1f} s: a 10 ms timer's lateness and pointer events' delay "
            f"(performance.now() - event.timeStamp), ms"
        )
        rhead = ("where the passes run", "passes", "pass med", "timer95", "timerMax", "inputs",
                 "input95", "inputMax")  # fmt: skip
        print("  {:34s} {:>6s} {:>8s} {:>8s} {:>8s} {:>6s} {:>8s} {:>8s}".format(*rhead))
        for where in ("worker", "main"):
            page.evaluate(
                "([w, k, ms, x]) => { window.busy = bench.responsiveness(w, k, ms, x); }",
                [where, largest, busy_ms, want],
            )
            pointer_moves(page, busy_ms)
            res = page.evaluate("() => window.busy")
            line, worst = delays_line(f"bench page, {where}", res)
            print(line)
            if where == "worker" and worst > INPUT_MS:
                missed.append(("input delay, worker", largest, round(worst, 1)))
        context.close()
        httpd.shutdown()
        html = args.html
        if (html / "chapters" / f"{PAGE}.html").exists():
            url2, httpd2 = serve(html)
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            external += block_external(context, url2)
            page = context.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{url2}/chapters/{PAGE}.html", wait_until="networkidle")
            page.wait_for_function(
                "() => document.querySelector('.posenc-lab')?.posenc?.data", timeout=60000
            )
            page.evaluate("() => document.querySelector('.posenc-lab').scrollIntoView()")
            box = page.locator(".posenc-lab canvas.posenc-lab-loss").bounding_box()
            page.evaluate(
                "([k, ms]) => { window.busy = (" + PAGE_RESPONSIVENESS + ")([k, ms]); }",
                [largest, busy_ms],
            )
            page.wait_for_timeout(300)  # the switch to the largest model (weights, one pass)
            pointer_moves(page, busy_ms, box)
            res = page.evaluate("() => window.busy")
            line, worst = delays_line(f"{PAGE} page, its worker", res)
            print(line)
            if worst > INPUT_MS:
                missed.append(("input delay, chapter page", largest, round(worst, 1)))
            context.close()
            print("\npage weight (built book, first load at 1280 px)")
            lines, checks = page_weight(html, url2, browser)
            print("\n".join(lines))
            missed += [(what, PAGE, v) for what, v, limit in checks if v > limit]
            httpd2.shutdown()
        else:
            print(
                f"\n(no built {PAGE}.html under {html}: page weight and the page's own lab skipped)"
            )
        browser.close()
    print("\ncheckpoints (float32 safetensors), kB: " + ", ".join(
        f"{k} {b / 1e3:.0f}" for k, b, _ in rows))  # fmt: skip
    if external:
        print(f"requests that left the machine (blocked): {external[:3]}")
    if errors:
        print(f"page errors: {errors[:3]}")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    if missed:
        print(f"\nMISSED a target: {missed}")
        return 1 if args.strict else 0
    print("\nevery target met")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
