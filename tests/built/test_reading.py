"""What a reader sees, measured in Debian's chromium on the built book (offline, see
browser_support.py): navigation on a phone, figure text size, tables, the longest stretch of
page without a visual, and search.

- Phone (390 px): the sidebar buttons open the theme's sidebars and close them again
  (_static/posenc.js works around pydata-sphinx-theme issue 2451); a figure keeps its shape
  and opens at its drawn size on a tap. (Inline code and sideways scrolling at 390 px:
  test_layout.py.)
- Figures (1280 px): every figure a chapter shows carries its smallest text size in points
  (posenc_core.book.figures.figure_for_display writes it into the PNG); shown at the width the
  page gives it, that text is at least MIN_TEXT_PX CSS pixels, and the PNG holds at least
  twice the pixels it is shown at.
- Tables (1280 px): every table has a numbered caption, fits the column without scrolling
  sideways, and no glued number in it breaks over two lines.
- Visuals (1280 px): between any two figures, tables, explorers, summary boxes or claim cards
  there are at most MAX_SCREENS screens of page (a screen is the 900 px viewport).
- Search: a Chinese term finds its glossary entry and a chapter, and a snippet is prose, not
  the page's buttons.

Run with -s for the per-page numbers.
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

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = pathlib.Path(os.environ.get("POSENC_BOOK_HTML", ROOT / "_build" / "html")).resolve()
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}
MIN_TEXT_PX = 9.0
MAX_SCREENS = 5.0

require_book_and_chromium(HTML)
pytest.importorskip("playwright.sync_api")


@pytest.fixture
def open_page(browser, server):
    contexts = []

    def _open(path: str, viewport: dict, **options):
        context = browser.new_context(viewport=viewport, **options)
        contexts.append(context)
        external = block_external(context, server)
        page = context.new_page()
        page.goto(f"{server}/{path}", wait_until="networkidle")
        page.evaluate(MATHJAX_DONE)
        wait_for_explorers(page, HTML / path.split("?")[0].split("#")[0])
        page.external = external
        return page

    yield _open
    for context in contexts:
        context.close()


# Each explorer's canvas: backing-store width, shown width and height, the article's width,
# and the device pixel ratio (explorer.js draws at the screen's density, as wide as the column).
EXPLORER_CANVASES = """() => [...document.querySelectorAll('.posenc-explorer canvas')].map(c => [
    c.width, c.clientWidth, c.clientHeight, c.closest('article').clientWidth,
    window.devicePixelRatio])"""


@pytest.fixture(scope="module")
def desktop(browser, server):
    """page path -> what the desktop checks read, each page loaded once at 1280 px."""
    cache: dict[str, dict] = {}
    context = browser.new_context(viewport=DESKTOP)
    external = block_external(context, server)

    def _measure(path: str) -> dict:
        if path not in cache:
            page = context.new_page()
            page.goto(f"{server}/{path}", wait_until="networkidle")
            page.evaluate(MATHJAX_DONE)
            wait_for_explorers(page, HTML / path)
            cache[path] = {
                "url": page.url,
                "figures": page.evaluate(FIGURES),
                "tables": page.evaluate(TABLES),
                "visuals": page.evaluate(VISUALS),
                "explorer_canvases": page.evaluate(EXPLORER_CANVASES),
                "external": list(external),
            }
            page.close()
        return cache[path]

    yield _measure
    context.close()


# --- Phone navigation ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["intro.html", "chapters/02_sinusoidal_formula.html"])
@pytest.mark.parametrize(
    "toggle, dialog",
    [
        (".primary-toggle", "#pst-primary-sidebar-modal"),
        (".secondary-toggle", "#pst-secondary-sidebar-modal"),
    ],
)
def test_phone_sidebar_buttons_open_and_close_the_sidebars(open_page, path, toggle, dialog):
    page = open_page(path, PHONE, has_touch=True, is_mobile=True)
    buttons = page.locator(f"{toggle}:visible")
    if toggle == ".secondary-toggle" and path == "intro.html" and buttons.count() == 0:
        pytest.skip("the intro has no page contents button")
    assert buttons.count() >= 1, f"no visible {toggle} at 390 px on {path}"
    buttons.first.tap()
    page.wait_for_timeout(300)
    opened = page.evaluate(
        """sel => { const d = document.querySelector(sel);
          return d ? {open: d.open, width: d.getBoundingClientRect().width,
                      links: d.querySelectorAll('a').length} : null; }""",
        dialog,
    )
    assert opened and opened["open"], f"a tap on {toggle} did not open {dialog} on {path}"
    assert opened["width"] > 200 and opened["links"] > 3, opened
    page.keyboard.press("Escape")
    page.wait_for_timeout(300)
    assert not page.evaluate("sel => document.querySelector(sel).open", dialog)
    shown_tips = page.evaluate(
        "[...document.querySelectorAll('.tooltip')]"
        ".filter(t => getComputedStyle(t).display !== 'none' && t.getClientRects().length).length"
    )
    assert shown_tips == 0, "a tooltip stayed on screen after the tap"
    assert page.external == []


@pytest.mark.parametrize("path", ["intro.html", "chapters/05_learned_vs_fixed.html"])
def test_phone_figures_keep_their_shape_and_open_full_size_on_a_tap(open_page, path):
    page = open_page(path, PHONE, has_touch=True, is_mobile=True)
    figure = page.locator("article.bd-article img.posenc-zoomable").first
    figure.scroll_into_view_if_needed()
    shown = figure.evaluate(
        "i => ({w: i.clientWidth, h: i.clientHeight, nw: i.naturalWidth, nh: i.naturalHeight})"
    )
    assert shown["w"] < 390, shown
    assert shown["h"] / shown["w"] == pytest.approx(shown["nh"] / shown["nw"], rel=0.02), (
        "the figure is squeezed: its height did not follow its width"
    )
    figure.tap()
    page.wait_for_timeout(300)
    big = page.evaluate("""() => { const d = document.querySelector('dialog.posenc-zoom');
        if (!d || !d.open) return null; const i = d.querySelector('img');
        return {w: i.clientWidth, nw: i.naturalWidth}; }""")
    assert big, f"a tap on a shrunk figure on {path} opened nothing"
    assert big["w"] * 2 == pytest.approx(big["nw"], abs=4), big  # its drawn size, 2x pixels
    page.locator("dialog.posenc-zoom").tap()
    page.wait_for_timeout(300)
    assert page.evaluate("document.querySelector('dialog.posenc-zoom')") is None
    assert page.external == []


# --- Figures ------------------------------------------------------------------------------


def test_png_facts_reads_what_matplotlib_writes(tmp_path):
    """The reader above against a PNG written by matplotlib here, with known values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(2, 1))
    fig.savefig(tmp_path / "f.png", dpi=150, metadata={"posenc:test": "7.5"})
    plt.close(fig)
    facts = png_facts((tmp_path / "f.png").read_bytes())
    assert (facts["width"], facts["height"]) == (300, 150)
    assert facts["dpi"] == pytest.approx(150, abs=0.1)
    assert facts["text"]["posenc:test"] == "7.5"


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


# --- Search -------------------------------------------------------------------------------


def search(open_page, query: str) -> list[dict]:
    page = open_page(f"search.html?q={query}", DESKTOP)
    page.wait_for_function(
        "() => /finished/.test((document.querySelector('.search-summary') || {}).textContent)",
        timeout=30000,
    )
    page.wait_for_timeout(1500)  # snippets are filled in as each page is fetched
    return page.evaluate("""() => [...document.querySelectorAll('#search-results li')].map(li => ({
        href: li.querySelector('a').getAttribute('href'),
        snippet: (li.querySelector('p.context') || {}).textContent || ''}))""")


@pytest.mark.parametrize("term", ["旋转", "位置编码"])
def test_a_chinese_term_finds_the_glossary_and_a_chapter(open_page, term):
    hits = search(open_page, term)
    pages = [h["href"].split("#")[0].split("?")[0] for h in hits]
    print(f"\n{term}: {pages}")
    assert any(p.endswith("glossary.html") for p in pages), pages
    assert any("chapters/" in p for p in pages), pages


def test_search_snippets_are_prose(open_page):
    hits = search(open_page, "rotation")
    chapters = [h for h in hits if "chapters/" in h["href"]]
    assert chapters, hits
    furniture = ("Binder", "Colab", "Contents", "Show code cell")
    bad = [
        h for h in chapters if not h["snippet"].strip() or any(w in h["snippet"] for w in furniture)
    ]
    print(f"\nrotation: {len(chapters)} chapter hits, e.g. {chapters[0]['snippet'][:120]!r}")
    assert not bad, [(h["href"], h["snippet"][:100]) for h in bad[:3]]


@pytest.mark.parametrize("term", ["offset", "frequency", "slope"])
def test_search_snippets_show_formulas_as_text_not_tex(open_page, term):
    """A snippet is taken from the page's HTML before MathJax runs; _static/posenc.js reads
    each formula's TeX as plain text there ("θᵢ = b^(−2i/d)", not "\\(\\theta_i = b^{-2i/d}\\)")."""
    hits = [h for h in search(open_page, term) if h["snippet"].strip()]
    assert hits, term
    tex = re.compile(r"\\[()\[\]]|\\[A-Za-z]+|[_^]\{")
    bad = [(h["href"], h["snippet"][:160]) for h in hits if tex.search(h["snippet"])]
    maths = [h["snippet"] for h in hits if re.search(r"[α-ωᵢₖ⊤≤−]", h["snippet"])]
    print(f"\n{term}: {len(hits)} snippets, {len(maths)} with a formula; e.g. {maths[:1]!r}")
    assert not bad, bad[:3]
    assert maths, "no snippet shows a formula: the search term no longer finds one"


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
