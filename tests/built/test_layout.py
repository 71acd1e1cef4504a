"""Layout of the built book in a real browser: nothing a reader needs is cut off or pushed
sideways off the page.

Every page a reader opens (all of `_build/html` but `_static/` and `_vendor/`) is loaded in
Debian's chromium, offline (see browser_support.py), at 1280 px and 390 px (a phone) wide, after
MathJax has typeset it and with every collapsed block (hide-input cells, dropdown solutions)
expanded. Checked:

- no formula is clipped, display or inline (in the text, a table, a proof, a widget's
  label): every part of it is either visible or reachable by scrolling its own box or a box
  around it, such as a table's (MathJax 3 CHTML does not break long lines; _static/posenc.css
  lets wide display formulas scroll, and posenc.js with posenc.css wide inline ones);
- at 1280 px, no display formula even needs its own scrollbar (long ones are broken across
  lines), and no code or output block needs sideways scrolling (the chapters' line length);
  inline formulas that scroll in their box at 1280 px are counted in the -s summary, not
  failed (a long one belongs in display math, which is the chapter's to change);
- the page itself never scrolls sideways, and no inline code runs past the text column.

POSENC_BOOK_HTML=/path/to/html reads another build. Run with -s for a per-page summary.
"""

from __future__ import annotations

import os
import pathlib

import pytest
from browser_support import (
    MATHJAX_DONE,
    block_external,
    require_book_and_chromium,
    wait_for_explorers,
)

HERE = pathlib.Path(__file__).resolve().parent
ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = pathlib.Path(os.environ.get("POSENC_BOOK_HTML", ROOT / "_build" / "html")).resolve()
WIDTHS = (1280, 390)
HEIGHT = 900
CODE_WIDTH = 1280  # code and output lines are checked at this width only

require_book_and_chromium(HTML)
pytest.importorskip("playwright.sync_api")


# The rendered source (sphinx.ext.viewcode, one page per module) is checked on two long
# modules rather than all of them: its pages share one layout (_static/posenc.css wraps their
# code lines), and 2 x 30 more page loads would cost the suite about two minutes.
SOURCE_SAMPLES = (
    "_modules/posenc_core/book/studies/encoder_study.html",
    "_modules/posenc_core/rope/scaling.html",
)


def reader_pages() -> list[str]:
    """The book's pages, relative to HTML. Theme templates (_static/) and vendored files
    (_vendor/) are not pages; a bare redirect (index.html -> intro.html) has no layout."""
    pages = []
    for page in sorted(HTML.rglob("*.html")):
        rel = page.relative_to(HTML)
        if rel.parts[0] in ("_static", "_vendor"):
            continue
        if rel.parts[0] == "_modules" and rel.as_posix() not in SOURCE_SAMPLES:
            continue
        if 'http-equiv="Refresh"' in page.read_text(encoding="utf-8", errors="replace")[:500]:
            continue
        pages.append(rel.as_posix())
    return pages


# Opens every collapsed block so that what is hidden at load is measured too: <details>
# (MyST-NB hide-input/hide-cell, sphinx-design dropdowns) and sphinx-togglebutton's dropdown
# admonitions (the exercises' solutions), which it hides with the class toggle-hidden.
# It then waits three frames: posenc.js measures the inline formulas that were hidden when their
# span.math changes size (a ResizeObserver, then the next frame).
EXPAND_ALL = """async () => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  for (let i = 0; i < 3; i++) await new Promise(r => requestAnimationFrame(r));
}"""

# Returns {formulas: [...], inlineFormulas: [...], blocks: [...], page: {...}, fit: n,
# inline: [...]}; see the Python callers.
MEASURE = (HERE / "layout_measure.js").read_text()


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
        wait_for_explorers(page, HTML / path)
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
        "clipped inline formulas": [
            f"{f['text']!r}: " + "; ".join(f["why"]) for f in found["inlineFormulas"] if f["why"]
        ],
        "code/output blocks that scroll sideways": [],
        "page scrolls sideways": [],
        "inline code past the text column": found["inline"],
    }
    if width == CODE_WIDTH:
        groups["code/output blocks that scroll sideways"] = [
            f"{b['kind']} in the cell starting {b['cell']!r}: longest line {b['longest']} "
            f"chars ({b['line']!r}), scrollWidth {b['sw']} px > clientWidth {b['cw']} px "
            f"(this block fits {b['fits']} chars)"
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
    """No clipped formula, display or inline; no sideways-scrolling code, output or display
    formula at CODE_WIDTH; no sideways-scrolling page. Every offender of the page is listed,
    grouped by kind."""
    found = measure(browser, server, path, width)
    bad = offenders(found, width)
    scrolling = sum(f["scrolls"] and not f["why"] for f in found["formulas"])
    wide = sum(f["scrolls"] and not f["why"] for f in found["inlineFormulas"])
    fit = f", a code line fits {found['fit']} chars" if found["fit"] else ""
    print(
        f"\n{path} @ {width} px: {len(found['formulas'])} display formulas "
        f"({scrolling} scroll in their box), {len(found['inlineFormulas'])} inline ({wide} scroll)"
        f"{fit}; "
        + (", ".join(f"{kind}: {len(lines)}" for kind, lines in bad.items()) or "no offenders")
    )
    assert found["external"] == [], f"requests that left the machine: {found['external'][:5]}"
    assert not bad, f"{path} at {width} px wide:\n" + "\n".join(
        f"  {kind} ({len(lines)}):\n" + "\n".join(f"    - {line}" for line in lines)
        for kind, lines in bad.items()
    )
