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

The same load at 1280 px also serves what a reader sees there (read before anything is
expanded; the `desktop` fixture loads each page once for all of them):

- Figures: every figure a chapter shows carries its smallest text size in points
  (posenc_core.book.figures.figure_for_display writes it into the PNG); shown at the width the
  page gives it, that text is at least MIN_TEXT_PX CSS pixels, and the PNG holds at least
  twice the pixels it is shown at.
- Tables: every table has a numbered caption, fits the column without scrolling sideways,
  and no glued number in it breaks over two lines.
- Visuals: between any two figures, tables, explorers, summary boxes or claim cards there are
  at most MAX_SCREENS screens of page (a screen is the 900 px viewport); a page is at most
  MAX_PAGE_SCREENS screens and its reading time at most MAX_PAGE_MINUTES.
- Explorers: each canvas is drawn at the screen's density and fits the column.

POSENC_BOOK_HTML=/path/to/html reads another build. Run with -s for a per-page summary.
"""

from __future__ import annotations

import os
import pathlib
import re
from urllib.parse import unquote, urljoin, urlparse

import pytest
from browser_support import (
    MATHJAX_DONE,
    block_external,
    png_facts,
    require_book_and_chromium,
    wait_for_explorers,
)

HERE = pathlib.Path(__file__).resolve().parent
ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = pathlib.Path(os.environ.get("POSENC_BOOK_HTML", ROOT / "_build" / "html")).resolve()
WIDTHS = (1280, 390)
HEIGHT = 900
CODE_WIDTH = 1280  # code and output lines are checked at this width only
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))
DESKTOP = {"width": 1280, "height": HEIGHT}
MIN_TEXT_PX = 9.0
MAX_SCREENS = 5.0
# the pages the reading checks at 1280 px read (the others have no article of a chapter)
READ_PAGES = ("intro.html", *(f"chapters/{c}.html" for c in CHAPTERS))

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


EXPLORER_CANVASES = """() => [...document.querySelectorAll('.posenc-explorer canvas')].map(c => [
    c.width, c.clientWidth, c.clientHeight, c.closest('article').clientWidth,
    window.devicePixelRatio])"""


def measure(chromium, base_url: str, path: str, width: int, reading: bool = False) -> dict:
    """Load `path` offline at `width` px, typeset and fully expanded, and measure it. With
    `reading`, the page is first read as the reading checks below read it (typeset, not yet
    expanded): their results go in the same dict ("figures", "tables", "visuals",
    "explorer_canvases" and "url")."""
    context = chromium.new_context(viewport={"width": width, "height": HEIGHT})
    try:
        external = block_external(context, base_url)
        page = context.new_page()
        page.goto(f"{base_url}/{path}", wait_until="networkidle")
        if page.locator(".math").count():
            page.wait_for_selector("mjx-container", state="attached", timeout=30000)
        page.evaluate(MATHJAX_DONE)
        wait_for_explorers(page, HTML / path)
        read = {}
        if reading:
            read = {
                "url": page.url,
                "figures": page.evaluate(FIGURES),
                "tables": page.evaluate(TABLES),
                "visuals": page.evaluate(VISUALS),
                "explorer_canvases": page.evaluate(EXPLORER_CANVASES),
            }
        page.evaluate(EXPAND_ALL)
        found = page.evaluate(MEASURE)
        found.update(read)
        found["external"] = external
        return found
    finally:
        context.close()


@pytest.fixture(scope="module")
def desktop(browser, server):
    """page path -> what the 1280 px checks of this module read (the layout measure and the
    reading checks), each page loaded once."""
    cache: dict[str, dict] = {}

    def _measure(path: str) -> dict:
        if path not in cache:
            reading = path in READ_PAGES
            cache[path] = measure(browser, server, path, DESKTOP["width"], reading=reading)
        return cache[path]

    return _measure


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
def test_nothing_is_clipped_or_pushed_sideways(browser, server, desktop, path, width):
    """No clipped formula, display or inline; no sideways-scrolling code, output or display
    formula at CODE_WIDTH; no sideways-scrolling page. Every offender of the page is listed,
    grouped by kind."""
    if width == DESKTOP["width"]:
        found = desktop(path)
    else:
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


# --- What a reader sees at 1280 px: figures, tables, visuals, explorers ------------------

FIGURES = """() => [...document.querySelectorAll('article img')]
  .filter(i => !i.closest('.jupyter-widgets, .widget-subarea, .cell_input, .bd-header-article')
            && i.naturalWidth > 64 && !i.src.startsWith('data:'))
  .map(i => ({src: i.getAttribute('src'), natural: i.naturalWidth, shown: i.clientWidth,
              caption: (i.closest('figure') && i.closest('figure').querySelector('.caption-number')
                        || {}).textContent || ''}))"""


@pytest.mark.parametrize("page_name", ["intro", *(f"chapters/{c}" for c in CHAPTERS)])
def test_figure_text_is_readable_and_sharp(desktop, page_name):
    from posenc_core.book.figures import TEXT_SIZE_KEY

    found = desktop(f"{page_name}.html")
    figures = found["figures"]
    base = f"{urlparse(found['url']).path}"
    problems, sizes = [], []
    for fig in figures:
        served = unquote(urlparse(urljoin(base, fig["src"])).path).lstrip("/")
        facts = png_facts((HTML / served).read_bytes())
        name = f"{fig['caption'].strip() or pathlib.Path(served).name[:12]}"
        if TEXT_SIZE_KEY not in facts["text"]:
            problems.append(f"{name}: no {TEXT_SIZE_KEY} (not drawn by posenc_core.book.figures?)")
            continue
        pt = float(facts["text"][TEXT_SIZE_KEY])
        scale = fig["shown"] / fig["natural"]
        shown_px = pt * facts["dpi"] / 72 * scale
        sizes.append((name, round(shown_px, 1), fig["shown"]))
        if shown_px < MIN_TEXT_PX:
            problems.append(
                f"{name}: smallest text {pt:g} pt shows at {shown_px:.1f} px "
                f"({fig['natural']} px drawn, shown at {fig['shown']} px)"
            )
        if fig["natural"] < 2 * fig["shown"] - 2:
            problems.append(f"{name}: {fig['natural']} px of image shown at {fig['shown']} px")
    print(f"\n{page_name}: {len(figures)} figures; smallest text shown (px): {sizes}")
    assert found["external"] == [], f"requests that left the machine: {found['external'][:3]}"
    assert not problems, "\n".join(problems)


# --- Tables -------------------------------------------------------------------------------

TABLES = """() => [...document.querySelectorAll('article table')]
  .filter(t => !t.closest('.jupyter-widgets, .cell_output, .genindextable'))
  .map(t => {
    const box = t.parentElement;
    const caption = t.querySelector('caption');
    const broken = [...t.querySelectorAll('td span.pasted-text')]
      .filter(s => s.getClientRects().length > 1).map(s => s.textContent);
    return {caption: caption ? caption.textContent.replace(/\\s+/g, ' ').trim().slice(0, 70) : '',
            number: !!(caption && caption.querySelector('.caption-number')),
            width: Math.round(t.getBoundingClientRect().width),
            column: Math.round(document.querySelector('article.bd-article').clientWidth),
            scrolls: box.scrollWidth > box.clientWidth + 1 || t.scrollWidth > t.clientWidth + 1,
            broken};
  })"""


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_tables_are_numbered_captioned_and_fit(desktop, chapter):
    tables = desktop(f"chapters/{chapter}.html")["tables"]
    problems = []
    for k, t in enumerate(tables, start=1):
        name = t["caption"] or f"table {k} (no caption)"
        if not t["number"]:
            problems.append(f"{name}: no numbered caption")
        if t["scrolls"] or t["width"] > t["column"] + 1:
            problems.append(f"{name}: {t['width']} px in a {t['column']} px column")
        if t["broken"]:
            problems.append(f"{name}: numbers broken over lines: {t['broken'][:4]}")
    print(f"\n{chapter}: {len(tables)} tables, widths {[t['width'] for t in tables]}")
    assert not problems, "\n".join(problems)


# --- Walls --------------------------------------------------------------------------------

VISUALS = """() => {
  const article = document.querySelector('article.bd-article');
  const top = article.getBoundingClientRect().top + window.scrollY;
  const sel = ['article img:not(.cell_input img)', 'article table', 'article .jupyter-widgets',
    'article .widget-subarea', 'article div.chapter-box', 'article div.section-summary',
    'article div.claim-cards', 'article figure'].join(',');
  const spans = [...document.querySelectorAll(sel)]
    .filter(e => e.getClientRects().length && !e.closest('.bd-header-article'))
    .map(e => { const r = e.getBoundingClientRect();
                return [r.top + window.scrollY - top, r.bottom + window.scrollY - top]; })
    .filter(([a, b]) => b - a > 40)
    .sort((x, y) => x[0] - y[0]);
  return {height: article.getBoundingClientRect().height, spans};
}"""


def longest_gap(height: float, spans: list[list[float]]) -> tuple[float, float]:
    """The longest stretch of [0, height] covered by none of ``spans``: (start, length)."""
    best, reach = (0.0, 0.0), 0.0
    for start, end in sorted(spans):
        if start - reach > best[1]:
            best = (reach, start - reach)
        reach = max(reach, end)
    if height - reach > best[1]:
        best = (reach, height - reach)
    return best


def test_longest_gap_finds_the_uncovered_stretch():
    assert longest_gap(100, [[10, 20], [15, 30], [70, 80]]) == (30, 40)
    assert longest_gap(100, []) == (0, 100)
    assert longest_gap(100, [[0, 95]]) == (95, 5)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_visual_at_least_every_five_screens(desktop, chapter):
    found = desktop(f"chapters/{chapter}.html")["visuals"]
    start, length = longest_gap(found["height"], found["spans"])
    screens = length / DESKTOP["height"]
    print(
        f"\n{chapter}: {found['height'] / DESKTOP['height']:.1f} screens, "
        f"{len(found['spans'])} visuals, longest stretch without one {screens:.1f} screens "
        f"(from {start / DESKTOP['height']:.1f})"
    )
    assert screens <= MAX_SCREENS, (
        f"{chapter}: {screens:.1f} screens without a figure, table, explorer or summary, "
        f"starting {start:.0f} px into the article"
    )


# --- One sitting ----------------------------------------------------------------------------

MAX_PAGE_SCREENS = 45.0
MAX_PAGE_MINUTES = 60


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_a_page_is_read_in_one_sitting(desktop, chapter):
    """A chapter too long for one sitting is split into pages (chapters 6 and 7 were 47 and 48
    screens, 71 and 75 minutes): every page is at most MAX_PAGE_SCREENS screens tall at 1280 px,
    and the reading time its box gives is at most MAX_PAGE_MINUTES."""
    screens = desktop(f"chapters/{chapter}.html")["visuals"]["height"] / DESKTOP["height"]
    box = re.search(
        r'class="[^"]*chapter-box.*?Reading time</strong> about (?:<[^>]+>)*(\d+)',
        (HTML / "chapters" / f"{chapter}.html").read_text(encoding="utf-8"),
        re.S,
    )
    assert box, f"{chapter}: no chapter box with a reading time at the top of the page"
    minutes = int(box.group(1))
    print(f"\n{chapter}: {screens:.1f} screens, {minutes} minutes")
    assert screens <= MAX_PAGE_SCREENS, f"{chapter}: {screens:.1f} screens; split the page"
    assert minutes <= MAX_PAGE_MINUTES, f"{chapter}: {minutes} minutes of reading; split the page"


# --- Explorers ------------------------------------------------------------------------------


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_explorers_are_sharp_fit_the_column_and_keep_their_size(desktop, chapter):
    """A canvas drawn at the screen's density (no blur), at most 672 px and within the
    article, whose size does not change when a control changes what the label says."""
    html = (HTML / "chapters" / f"{chapter}.html").read_text(encoding="utf-8")
    if '"anywidget"' not in html:
        pytest.skip(f"{chapter} has no explorer")
    canvases = desktop(f"chapters/{chapter}.html")["explorer_canvases"]
    assert canvases, f"{chapter}: no explorer was drawn"
    for width, shown, height, article, dpr in canvases:
        assert width == round(shown * dpr), (width, shown, dpr)  # one pixel per device pixel
        assert 320 <= shown <= min(672, article) and height > 100, (shown, article, height)
