"""What a reader sees, measured in Debian's chromium on the built book (offline, see
browser_support.py): navigation on a phone, and search.

- Phone (390 px): the sidebar buttons open the theme's sidebars and close them again
  (_static/posenc.js works around pydata-sphinx-theme issue 2451); a figure keeps its shape
  and opens at its drawn size on a tap. (Inline code and sideways scrolling at 390 px:
  test_layout.py.)
- Search: a Chinese term finds its glossary entry and a chapter, and a snippet is prose, not
  the page's buttons.

The checks at 1280 px (figure text size and sharpness, tables, the longest stretch of page
without a visual, the length of a page, the explorers' canvases) are in test_layout.py, which
loads every page at that width anyway: one load serves both.

Run with -s for the per-page numbers.
"""

from __future__ import annotations

import os
import pathlib
import re

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
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}

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
