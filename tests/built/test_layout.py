"""Layout of the built book in a real browser: nothing a reader needs is cut off or pushed
sideways off the page.

Every page a reader opens (all of `_build/html` but `_static/` and `_vendor/`) is loaded in
Debian's chromium, offline (see browser_support.py), at 1280 px and 800 px wide, after
MathJax has typeset it and with every collapsed block (hide-input cells, dropdown solutions)
expanded. Checked:

- no display formula is clipped: every part of it is either visible or reachable by
  scrolling its own box (MathJax 3 CHTML does not break long lines; _static/posenc.css
  lets wide formulas scroll);
- at 1280 px, no display formula even needs its own scrollbar (long ones are broken across
  lines), and no code or output block needs sideways scrolling (the chapters' line length);
- the page itself never scrolls sideways.

POSENC_BOOK_HTML=/path/to/html reads another build. Run with -s for a per-page summary.
"""

from __future__ import annotations

import os
import pathlib

import pytest
from browser_support import block_external, browser, require_book_and_chromium, server  # noqa: F401 (fixtures)

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = pathlib.Path(os.environ.get("POSENC_BOOK_HTML", ROOT / "_build" / "html")).resolve()
WIDTHS = (1280, 800)
HEIGHT = 900
CODE_WIDTH = 1280  # code and output lines are checked at this width only

require_book_and_chromium(HTML)
pytest.importorskip("playwright.sync_api")


def reader_pages() -> list[str]:
    """The book's pages, relative to HTML. Theme templates (_static/) and vendored files
    (_vendor/) are not pages; a bare redirect (index.html -> intro.html) has no layout."""
    pages = []
    for page in sorted(HTML.rglob("*.html")):
        rel = page.relative_to(HTML)
        if rel.parts[0] in ("_static", "_vendor"):
            continue
        if 'http-equiv="Refresh"' in page.read_text(encoding="utf-8", errors="replace")[:500]:
            continue
        pages.append(rel.as_posix())
    return pages


# Waits until MathJax is done: startup.promise is replaced whenever more math is queued (the
# widgets' labels, see _config.yml), so wait until it stops changing.
MATHJAX_DONE = """async () => {
  if (!window.MathJax || !MathJax.startup) return;
  let p;
  do { p = MathJax.startup.promise; await p; } while (p !== MathJax.startup.promise);
  await document.fonts.ready;
}"""

# Opens every collapsed block so that what is hidden at load is measured too: <details>
# (MyST-NB hide-input/hide-cell, sphinx-design dropdowns) and sphinx-togglebutton's dropdown
# admonitions (the exercises' solutions), which it hides with the class toggle-hidden.
EXPAND_ALL = """() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
}"""

# Returns {formulas: [...], blocks: [...], page: {...}, fit: n}; see the Python callers.
MEASURE = r"""() => {
  const style = e => getComputedStyle(e);
  const scrolls = v => v === 'auto' || v === 'scroll';
  const clips = v => v === 'hidden' || v === 'clip';
  const rendered = e => e.getClientRects().length > 0 && style(e).visibility !== 'hidden';
  const oneLine = s => (s || '').replace(/\s+/g, ' ').trim().slice(0, 60);
  const name = e => e.tagName.toLowerCase() + [...e.classList].slice(0, 3).map(c => '.' + c).join('');
  const px = x => Math.round(x);
  const viewport = document.documentElement.clientWidth;
  const article = document.querySelector('article.bd-article') || document.querySelector('main') || document.body;
  const column = article.getBoundingClientRect().right;

  // TeX source of each typeset formula, to name it in messages.
  const tex = new Map();
  if (window.MathJax && MathJax.startup && MathJax.startup.document) {
    for (const item of MathJax.startup.document.math) tex.set(item.typesetRoot, item.math);
  }

  // Why (if at all) part of a display formula can be neither seen nor scrolled to.
  function clipped(m) {
    const why = [];
    const cs = style(m), box = m.getBoundingClientRect();
    const content = (m.querySelector('mjx-math') || m).getBoundingClientRect();
    if (m.scrollWidth > m.clientWidth + 1 && !scrolls(cs.overflowX))
      why.push(`content ${m.scrollWidth} px wide in a ${m.clientWidth} px box that does not scroll (overflow-x: ${cs.overflowX})`);
    if (m.scrollHeight > m.clientHeight + 1 && clips(cs.overflowY))
      why.push(`content ${m.scrollHeight} px tall cut to ${m.clientHeight} px (overflow-y: ${cs.overflowY})`);
    // The span that must stay visible: the box if it scrolls, else the content itself.
    let left = scrolls(cs.overflowX) ? box.left : Math.min(box.left, content.left);
    let right = scrolls(cs.overflowX) ? box.right : Math.max(box.right, content.right);
    for (let a = m.parentElement; a && a !== document.body; a = a.parentElement) {
      const as = style(a);
      if (scrolls(as.overflowX)) {  // the rest is reachable by scrolling a; a itself must show
        const r = a.getBoundingClientRect();
        left = r.left; right = r.right;
      } else if (clips(as.overflowX)) {
        const r = a.getBoundingClientRect(), inner = r.left + a.clientLeft;
        if (right > inner + a.clientWidth + 1 || left < inner - 1) {
          why.push(`cut off by ${name(a)} (overflow-x: ${as.overflowX}): formula spans x = ${px(left)}..${px(right)} px, the box ${px(inner)}..${px(inner + a.clientWidth)} px`);
          break;
        }
      }
    }
    if (right > column + 1) why.push(`ends at ${px(right)} px, past the article column's right edge at ${px(column)} px`);
    if (right > viewport + 1 || left < -1) why.push(`spans x = ${px(left)}..${px(right)} px, outside the ${viewport} px viewport`);
    return why;
  }

  const formulas = [];
  for (const m of document.querySelectorAll('mjx-container[display="true"]')) {
    if (!rendered(m)) continue;
    const why = clipped(m);
    const text = tex.get(m) || (m.querySelector('mjx-assistive-mml') || m).textContent;
    formulas.push({text: oneLine(text), why, scrolls: m.scrollWidth > m.clientWidth + 1,
                   sw: m.scrollWidth, cw: m.clientWidth});
  }

  // Code sources and outputs (MyST-NB cells, plain literal blocks).
  const pres = new Set(document.querySelectorAll('div.cell_input pre, div.cell_output pre, div.highlight pre, .output pre'));
  const blocks = [];
  let fit = null;  // in a code cell of the main text (boxes such as exercises are narrower)
  for (const pre of pres) {
    if (!rendered(pre)) continue;
    if (fit === null && pre.closest('div.cell_input') && !pre.closest('.admonition')) fit = fits(pre);
    if (pre.scrollWidth <= pre.clientWidth + 1) continue;
    const lines = pre.textContent.replace(/\n$/, '').split('\n');
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
    const cell = pre.closest('div.cell');
    const source = cell && cell.querySelector('div.cell_input pre');
    blocks.push({kind: pre.closest('div.cell_output, .output') ? 'output' : 'code',
                 cell: oneLine((source || pre).textContent.split('\n')[0]),
                 longest: longest.length, line: oneLine(longest), fits: fits(pre), sw: pre.scrollWidth, cw: pre.clientWidth});
  }

  // How many monospace characters a code block holds without scrolling.
  function fits(pre) {
    const probe = document.createElement('span');
    probe.textContent = '0'.repeat(200);
    pre.appendChild(probe);
    const char = probe.getBoundingClientRect().width / 200;
    probe.remove();
    const ps = style(pre);
    return Math.floor((pre.clientWidth - parseFloat(ps.paddingLeft) - parseFloat(ps.paddingRight)) / char);
  }

  // The page scrolling sideways, and the outermost elements that stick out of the viewport.
  const sw = document.scrollingElement.scrollWidth, iw = window.innerWidth;
  const culprits = [];
  if (sw > iw + 1) {
    for (const e of document.body.querySelectorAll('*')) {
      const r = e.getBoundingClientRect();
      const p = e.parentElement.getBoundingClientRect();
      if (r.right > iw + 1 && p.right <= iw + 1 && rendered(e))
        culprits.push(`${name(e)} "${oneLine(e.textContent)}" ends at ${px(r.right)} px`);
      if (culprits.length === 5) break;
    }
  }
  return {formulas, blocks, page: {sw, iw, culprits}, fit};
}"""


def measure(chromium, base_url: str, path: str, width: int) -> dict:
    """Load `path` offline at `width` px, typeset and fully expanded, and measure it."""
    context = chromium.new_context(viewport={"width": width, "height": HEIGHT})
    try:
        external = block_external(context, base_url)
        page = context.new_page()
        page.goto(f"{base_url}/{path}", wait_until="networkidle")
        if page.locator(".math").count():
            page.wait_for_selector("mjx-container", state="attached", timeout=30000)
        page.evaluate(MATHJAX_DONE)
        page.evaluate(EXPAND_ALL)
        found = page.evaluate(MEASURE)
        found["external"] = external
        return found
    finally:
        context.close()


def offenders(found: dict, width: int) -> dict[str, list[str]]:
    """Actionable lines for everything that fails, grouped by kind."""
    groups = {
        "clipped display formulas": [
            f"{f['text']!r}: " + "; ".join(f["why"]) for f in found["formulas"] if f["why"]
        ],
        "code/output blocks that scroll sideways": [],
        "page scrolls sideways": [],
    }
    if width == CODE_WIDTH:
        groups["code/output blocks that scroll sideways"] = [
            f"{b['kind']} in the cell starting {b['cell']!r}: longest line {b['longest']} chars ({b['line']!r}), "
            f"scrollWidth {b['sw']} px > clientWidth {b['cw']} px (this block fits {b['fits']} chars)"
            for b in found["blocks"]
        ]
        # At the desktop width a reader should not need a formula's own scrollbar either (it is
        # hidden until hovered on many systems): long formulas are broken across lines.
        groups["display formulas wider than the column"] = [
            f"{f['text']!r}: {f['sw']} px in a {f['cw']} px box"
            for f in found["formulas"]
            if f["scrolls"]
        ]
    p = found["page"]
    if p["sw"] > p["iw"] + 1:
        groups["page scrolls sideways"] = [
            f"scrollWidth {p['sw']} px > innerWidth {p['iw']} px; sticking out: "
            + ", ".join(p["culprits"] or ["?"])
        ]
    return {kind: lines for kind, lines in groups.items() if lines}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", reader_pages())
def test_nothing_is_clipped_or_pushed_sideways(browser, server, path, width):
    """No clipped display formula, no sideways-scrolling code or output at CODE_WIDTH, no
    sideways-scrolling page; every offender of the page is listed, grouped by kind."""
    found = measure(browser, server, path, width)
    bad = offenders(found, width)
    scrolling = sum(f["scrolls"] and not f["why"] for f in found["formulas"])
    fit = f", a code line fits {found['fit']} chars" if found["fit"] else ""
    print(
        f"\n{path} @ {width} px: {len(found['formulas'])} display formulas ({scrolling} scroll in their box)"
        f"{fit}; "
        + (", ".join(f"{kind}: {len(lines)}" for kind, lines in bad.items()) or "no offenders")
    )
    assert found["external"] == [], f"requests that left the machine: {found['external'][:5]}"
    assert not bad, f"{path} at {width} px wide:\n" + "\n".join(
        f"  {kind} ({len(lines)}):\n" + "\n".join(f"    - {line}" for line in lines)
        for kind, lines in bad.items()
    )
