"""The closing sections of the chapter pages, read from the built HTML (`_build/html`).

Issue #39, item 7: claims are chapter 1's cards in every chapter (each card a claim with its
**Verdict:**). For the chapters HC-B rewrote (5, 7c, 8, 8b, 9) the cards are also short and
stand alone, and "What to remember" is a short list, not the chapter told again. Plain HTML
parsing, no browser.
"""

import html.parser
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = pathlib.Path(os.environ.get("POSENC_BOOK_HTML", ROOT / "_build" / "html"))
PAGES = sorted((HTML / "chapters").glob("*.html"))

if not PAGES:
    if os.environ.get("BOOK_BUILT"):
        raise RuntimeError("BOOK_BUILT is set but _build/html/chapters/*.html is missing")
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)

SHORT = ("05_learned_vs_fixed", "07c_scaling_measured", "08_when_positions_go_wrong",
         "08b_caches_and_windows", "09_beyond_one_axis")  # fmt: skip
CARD_WORDS = 90  # chapter 1's longest card has 57 words
REMEMBER_WORDS = 160  # a list of lessons, a line or two each


class _Section(html.parser.HTMLParser):
    """The text of one ``<section id=...>`` of a page: the whole section, each claim card's
    text, the number of lists outside the cards, and each list item of the section."""

    def __init__(self, section_id: str):
        super().__init__(convert_charrefs=True)
        self.section_id, self.depth, self.card_depth = section_id, 0, 0
        self.text: list[str] = []
        self.cards: list[list[str]] = []
        self.card_grids = self.bare_lists = 0
        self.items: list[list[str]] = []
        self._tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if not self.depth:
            if tag == "section" and attrs.get("id") == self.section_id:
                self.depth = 1
            return
        if tag in ("br", "img", "hr", "input", "meta", "link"):
            return
        self.depth += 1
        self._tags.append(tag)
        if "claim-cards" in classes:
            self.card_grids += 1
        if "claim-card" in classes and not self.card_depth:
            self.card_depth = self.depth
            self.cards.append([])
        if tag in ("ol", "ul") and not self.card_depth:
            self.bare_lists += 1
        if tag == "li":
            self.items.append([])

    def handle_endtag(self, tag):
        if not self.depth or tag in ("br", "img", "hr", "input", "meta", "link"):
            return
        if self.card_depth == self.depth:
            self.card_depth = 0
        self.depth -= 1
        if self._tags:
            self._tags.pop()

    def handle_data(self, data):
        if not self.depth:
            return
        self.text.append(data)
        if self.card_depth:
            self.cards[-1].append(data)
        if self.items and "li" in self._tags:
            self.items[-1].append(data)


def _section(page: pathlib.Path, section_id: str) -> _Section | None:
    parser = _Section(section_id)
    parser.feed(page.read_text(encoding="utf-8"))
    return parser if parser.text else None


def _words(parts) -> int:
    return len(re.findall(r"\S+", " ".join(parts)))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_claims_are_cards_with_a_verdict(page):
    """A "Checking the claims" section holds its claims as cards, each with a verdict."""
    claims = _section(page, "checking-the-claims")
    if claims is None:
        pytest.skip("no claims section on this page")
    assert claims.card_grids == 1 and claims.cards, "claims are not cards"
    for card in claims.cards:
        assert "Verdict:" in " ".join(card), " ".join(" ".join(card).split())[:80]


@pytest.mark.parametrize("stem", SHORT)
def test_claim_cards_are_short_and_alone(stem):
    """In the chapters listed, no list of claims beside the cards, and each card short enough to
    read at a glance."""
    claims = _section(HTML / "chapters" / f"{stem}.html", "checking-the-claims")
    if claims is None:
        pytest.skip("no claims section on this page")
    assert claims.bare_lists == 0, "a list of claims beside the cards"
    for card in claims.cards:
        text = " ".join(" ".join(card).split())
        assert _words(card) <= CARD_WORDS, f"{_words(card)} words: {text[:80]}"


@pytest.mark.parametrize("stem", SHORT)
def test_what_to_remember_is_a_short_list(stem):
    """ "What to remember" is a list of lessons, not the chapter told again."""
    remember = _section(HTML / "chapters" / f"{stem}.html", "what-to-remember")
    if remember is None:
        pytest.skip("no What-to-remember section on this page")
    assert remember.items, "not a list"
    assert _words(remember.text) <= REMEMBER_WORDS, f"{_words(remember.text)} words"
