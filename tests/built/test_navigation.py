"""Finding one's way in the built book: the numbers of the pages, and the page's own contents
on a phone.

- Numbering: a chapter's further pages are numbered as its parts (6b, 7b, 7c, 8b: the k-th
  page listed under a chapter in _toc.yml is the chapter's number and the letter after "a"),
  never after the previous page's last section (6.9). Checked in the built HTML of every
  page: its h1 and <title>, its headings, the numbers of its figures, tables, exercises and
  proofs, the sidebar's entry for every page, the previous/next links, and the search
  index's titles (_ext/part_numbers.py does the renumbering).
- Phone (390 px): a tap on a section in the page's Contents drawer (the theme's dialog)
  closes it and shows the section; the same from the keyboard, where the focus moves on to
  the section (_static/posenc.js).
"""

from __future__ import annotations

import html as html_lib
import json
import os
import pathlib
import re
import string

import pytest
import yaml
from browser_support import MATHJAX_DONE, block_external, require_book_and_chromium

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = pathlib.Path(os.environ.get("POSENC_BOOK_HTML", ROOT / "_build" / "html")).resolve()
PHONE = {"width": 390, "height": 844}

require_book_and_chromium(HTML)


def expected_numbers() -> dict[str, str]:
    """Page (path of its .html under HTML) -> the number a reader should see, from _toc.yml:
    chapter k of a numbered part is "k", the j-th page listed under it "k" + "bcd..."[j]."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    numbers: dict[str, str] = {}
    for part in toc["parts"]:
        if not part.get("numbered"):
            continue
        for k, chapter in enumerate(part["chapters"], start=1):
            numbers[chapter["file"] + ".html"] = str(k)
            for j, section in enumerate(chapter.get("sections", []), start=1):
                numbers[section["file"] + ".html"] = f"{k}{string.ascii_lowercase[j]}"
    return numbers


NUMBERS = expected_numbers()
UNNUMBERED = ["intro.html", "glossary.html", "api.html", "numerics.html", "bibliography.html"]


def _text(fragment: str) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def test_the_toc_has_parts():
    """The check below is about something: some chapter has further pages."""
    assert any(re.fullmatch(r"\d+[b-z]", n) for n in NUMBERS.values()), NUMBERS


@pytest.mark.parametrize("path", sorted(NUMBERS) + UNNUMBERED)
def test_every_page_is_numbered_as_its_chapters_part(path):
    page = (HTML / path).read_text(encoding="utf-8")
    number = NUMBERS.get(path)
    article = page[page.index('<article class="bd-article"') :]
    h1 = re.search(r"<h1[^>]*>(.*?)</h1>", article, re.S).group(1)
    h1_number = re.match(r'\s*<span class="section-number">([^<]*)</span>', h1)
    title = _text(re.search(r"<title>(.*?)</title>", page, re.S).group(1))
    if number is None:
        assert h1_number is None, f"{path}: an unnumbered page's h1 has {h1_number.group(1)!r}"
    else:
        assert h1_number and h1_number.group(1).strip() == f"{number}.", (path, h1[:80])
        assert title.startswith(f"{number}. "), (path, title)
        # every heading of the page, and every numbered figure, table, exercise or proof
        for h in re.findall(r'<h[2-6]><span class="section-number">([^<]*)</span>', page):
            assert h.startswith(f"{number}."), f"{path}: heading numbered {h!r}"
        counts: dict[str, int] = {}
        for kind, num in re.findall(
            r'<span class="caption-number">([A-Z][a-z.]*) ([^ <]+)\s*</span>', page
        ):
            counts[kind] = counts.get(kind, 0) + 1
            if num != f"{number}.{counts[kind]}" and kind in ("Fig.", "Table"):
                pytest.fail(f"{path}: {kind} {num}, expected {number}.{counts[kind]}")
            assert num.startswith(f"{number}."), f"{path}: {kind} {num}"

    # the sidebar lists every page with its number (or none)
    nav = re.search(r'<nav class="[^"]*bd-docs-nav.*?</nav>', page, re.S).group(0)
    here = pathlib.PurePosixPath(path).parent
    shown = {}
    for href, text in re.findall(r'<a class="reference internal" href="([^"#]+)">(.*?)</a>', nav):
        target = os.path.normpath(str(here / href)).replace(os.sep, "/")
        shown[target] = _text(text)
    for target, n in NUMBERS.items():
        if target in shown:
            assert shown[target].startswith(f"{n}. "), (path, target, shown[target])
    assert set(NUMBERS) - {path} <= set(shown), f"{path}: sidebar lacks pages"

    # previous / next links
    for href, title_html in re.findall(
        r'<a class="(?:left-prev|right-next)"\s+href="([^"]+)".*?'
        r'<p class="prev-next-title">(.*?)</p>',
        page,
        re.S,
    ):
        target = os.path.normpath(str(here / href.split("#")[0])).replace(os.sep, "/")
        if target in NUMBERS:
            assert _text(title_html).startswith(f"{NUMBERS[target]}. "), (path, title_html)


def test_search_results_carry_the_parts():
    index = (HTML / "searchindex.js").read_text(encoding="utf-8")
    data = json.loads(index[index.index("(") + 1 : index.rindex(")")])
    titles = dict(zip(data["docnames"], data["titles"], strict=True))
    for path, n in NUMBERS.items():
        assert _text(titles[path.removesuffix(".html")]).startswith(f"{n}. "), titles


# --- The page's contents on a phone --------------------------------------------------------

CHAPTER = "chapters/02_sinusoidal_formula.html"


@pytest.fixture
def phone_page(browser, server):
    context = browser.new_context(
        viewport=PHONE, device_scale_factor=2, has_touch=True, is_mobile=True
    )
    external = block_external(context, server)
    page = context.new_page()
    page.goto(f"{server}/{CHAPTER}", wait_until="networkidle")
    page.evaluate(MATHJAX_DONE)
    yield page
    assert external == [], external
    context.close()


DRAWER = "#pst-secondary-sidebar-modal"
STATE = """([dialog, hash]) => {
  const d = document.querySelector(dialog);
  const target = hash && document.getElementById(decodeURIComponent(hash.slice(1)));
  const heading = target && (target.querySelector('h1, h2, h3, h4') || target);
  return {open: !!(d && d.open), hash: location.hash,
          top: heading ? heading.getBoundingClientRect().top : null,
          focusInTarget: !!(target && target.contains(document.activeElement))};
}"""


def _section_link(page, index: int = 2):
    """The index-th section link of the open drawer and its hash."""
    links = page.locator(f"{DRAWER} a.nav-link[href^='#']")
    assert links.count() > index, f"the drawer lists {links.count()} sections"
    link = links.nth(index)
    return link, link.get_attribute("href")


def test_a_tap_on_a_section_closes_the_contents_drawer(phone_page):
    page = phone_page
    page.locator(".secondary-toggle:visible").first.tap()
    page.wait_for_timeout(300)
    assert page.evaluate(STATE, [DRAWER, ""])["open"], "the Contents button did not open it"
    link, hash_ = _section_link(page)
    link.tap()
    page.wait_for_timeout(600)
    state = page.evaluate(STATE, [DRAWER, hash_])
    print(f"\nafter a tap on {hash_}: {state}")
    assert not state["open"], "the drawer stayed open over the section"
    assert state["hash"] == hash_
    assert state["top"] is not None and -5 <= state["top"] < 844 / 2, state


def test_the_contents_drawer_works_from_the_keyboard(phone_page):
    page = phone_page
    toggle = page.locator(".secondary-toggle:visible").first
    toggle.focus()
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)
    assert page.evaluate(STATE, [DRAWER, ""])["open"]
    link, hash_ = _section_link(page)
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_timeout(600)
    state = page.evaluate(STATE, [DRAWER, hash_])
    print(f"\nafter Enter on {hash_}: {state}")
    assert not state["open"] and state["hash"] == hash_, state
    assert state["focusInTarget"], "the focus did not move on to the section"
    # and Escape still closes it without following a link
    toggle.focus()
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)
    assert page.evaluate(STATE, [DRAWER, ""])["open"]
    page.keyboard.press("Escape")
    page.wait_for_timeout(300)
    assert not page.evaluate(STATE, [DRAWER, ""])["open"]
