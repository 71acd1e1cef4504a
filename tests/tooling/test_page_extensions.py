"""The two page extensions that compute what the reader sees: Chinese terms in the search
index (_ext/search_cjk.py) and reading times (_ext/reading_time.py)."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re

import pytest
from docutils import nodes
from docutils.core import publish_doctree

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "_ext" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


search_cjk = _load("search_cjk")
reading_time = _load("reading_time")


def test_cjk_runs_are_indexed_piece_by_piece():
    pieces = search_cjk.cjk_pieces("旋转位置编码")
    assert pieces[0] == "旋转位置编码"
    for term in ("旋转", "位置", "编码", "位置编码", "旋转位置"):
        assert term in pieces
    assert "位" not in pieces, "single characters are not terms"
    assert len(pieces) == len(set(pieces)) == 6 * 5 // 2  # every piece of 2..6 characters
    assert search_cjk.cjk_pieces("rotation") == []


def test_english_words_are_split_as_before():
    from sphinx.search.en import SearchEnglish

    text = "Rotary position embedding (旋转位置编码) rotates queries; 自注意力 too."
    plain, ours = SearchEnglish({}).split(text), search_cjk.SearchEnglishCJK({}).split(text)
    assert ours[: len(plain)] == plain
    assert {"旋转", "注意力", "自注意力"} <= set(ours)


def _book_text() -> str:
    parts = [p.read_text(encoding="utf-8") for p in ROOT.glob("*.md")]
    for path in (ROOT / "chapters").glob("*.ipynb"):
        nb = json.loads(path.read_text(encoding="utf-8"))
        parts += ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    return "\n".join(parts)


def test_every_chinese_character_of_the_book_is_in_the_indexed_ranges():
    """Characters outside the ranges would be left inside one long English 'word'."""
    han = re.compile(
        r"[\u2e80-\u2fdf\u3040-\u30ff\u3100-\u312f\u3190-\u31ff\u3400-\u9fff\uf900-\ufaff]"
    )
    found = set(han.findall(_book_text()))
    assert found, "the book uses Chinese terms"
    outside = sorted(c for c in found if not search_cjk._IDEOGRAPHS.fullmatch(c))
    assert outside == []


def _doctree(rst: str):
    return publish_doctree(rst, settings_overrides={"report_level": 5})


def test_reading_time_counts_prose_not_code_or_math():
    prose = " ".join(["word"] * 400)
    tree = _doctree(
        f"Title\n=====\n\n{prose}\n\n.. code-block:: python\n\n   x = 1 + 2 + 3 + 4\n\n"
        ".. math::\n\n   a + b = c\n"
    )
    counts = reading_time.measure(tree)
    assert counts["words"] == 401  # the title and the 400 words
    assert reading_time.minutes([counts]) == 2  # 401 / 200 words a minute


def test_reading_time_adds_half_a_minute_per_cell_and_figure_and_rounds():
    cell = nodes.container(classes=["cell"])
    cell += nodes.container("", nodes.literal_block("", "x = 1"), classes=["cell_input"])
    hidden = nodes.container(classes=["cell", "tag_remove-input"])
    tree = nodes.section("", nodes.paragraph("", " ".join(["w"] * 300)), cell, hidden)
    counts = reading_time.measure(tree)
    assert counts == {"words": 300, "blocks": 1}
    assert reading_time.minutes([counts]) == 2  # 1.5 + 0.5
    assert reading_time.minutes([{"words": 20, "blocks": 0}]) == 1, "at least a minute"
    assert reading_time.minutes([counts, counts]) == 4, "a path adds its parts"


@pytest.mark.parametrize("role_text, doc, expected", [
    ("06_rope#ch6-sec-rotate", "chapters/08_x", [("chapters/06_rope", "ch6-sec-rotate")]),
    ("/intro", "chapters/08_x", [("intro", "")]),
    ("chapters/a, chapters/b#s", "intro", [("chapters/a", ""), ("chapters/b", "s")]),
])  # fmt: skip
def test_reading_minutes_targets_resolve_like_doc_links(role_text, doc, expected):
    assert reading_time.resolve_targets(role_text, doc) == expected
