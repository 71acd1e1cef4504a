"""Chinese terms in the book's search index.

Sphinx's English index splits text at non-word characters, and a run of Chinese characters has
none: "(旋转位置编码)" is indexed as one word, so a search for 旋转 ("rotation"), or for
位置编码 ("positional encoding"), found nothing, although the glossary and the chapters use
both. This language class indexes, besides every English word, every contiguous piece of two
or more characters of each run of CJK ideographs (a run of n characters gives n(n-1)/2 pieces;
the book's runs are at most a dozen characters). The search page splits a query the same way
(searchtools.js keeps a run of ideographs whole), so each piece a reader types is a word of
the index. English words are split and stemmed exactly as before.

Upstream: Sphinx indexes one language per project (``html_search_language``). Its Chinese
search (sphinx/search/zh.py) needs jieba's dictionary to segment, and finds 位置编码 only if
the dictionary yields it; it also indexes Latin text as ``[a-zA-Z0-9_]+`` runs with a short
stop-word list, so English search would change (sphinx-doc/sphinx#5605 reported English words
lost in that mode). Delete when Sphinx's English search indexes CJK runs, or when the book
switches to ``html_search_language: zh`` and tests/built/test_reading.py's search checks pass.
"""

from __future__ import annotations

import re

from sphinx.search.en import SearchEnglish

# CJK Unified Ideographs with Extension A and the compatibility block: the characters that the
# book's Chinese terms use (tests/book/test_search_cjk.py checks that every CJK character of
# the sources is in it).
_IDEOGRAPHS = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
MIN_PIECE = 2  # one character alone (位, 置) is not a term


def cjk_pieces(word: str) -> list[str]:
    """Every contiguous piece of at least MIN_PIECE characters of each ideograph run in
    ``word``, longest first, without repeats."""
    pieces: list[str] = []
    for run in _IDEOGRAPHS.findall(word):
        for size in range(len(run), MIN_PIECE - 1, -1):
            for start in range(len(run) - size + 1):
                piece = run[start : start + size]
                if piece not in pieces:
                    pieces.append(piece)
    return pieces


class SearchEnglishCJK(SearchEnglish):
    """English search with the Chinese terms indexed piece by piece."""

    def split(self, input: str) -> list[str]:  # noqa: A002 (Sphinx's signature)
        words = super().split(input)
        extra = [piece for word in words for piece in cjk_pieces(word) if piece != word]
        return words + extra


def setup(app):
    app.add_search_language(SearchEnglishCJK)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
