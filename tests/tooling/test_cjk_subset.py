"""_ext/cjk_font.py without a browser or a built book: which characters it collects, the
subset it writes from the cached font tarball, and the build error for a character the font
lacks. (tests/built/test_cjk_font.py checks the built book in a browser.)"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("cjk_font", ROOT / "_ext" / "cjk_font.py")
cjk_font = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cjk_font)

WIDGET = "application/vnd.jupyter.widget-state+json"
SNIPPET = f"""<html><head><title>T</title></head><body>
<p>Rotary embedding (&#x65cb;转)</p>
<img src="a.png" alt="编码">
<!-- 注释 is a comment: never shown -->
<script type="{WIDGET}">{{"state": {{"m": {{"state":
{{"description": "\\u9891\\u7387", "_view_name": "x"}}}}}}}}</script>
</body></html>"""


def test_collects_text_attributes_and_escaped_widget_state():
    found = cjk_font.cjk_in_html(SNIPPET)
    assert set(found) == set("旋转编码频率"), found
    assert found["编"].startswith("<img alt=")
    assert found["频"].startswith("widget state")
    assert "注" not in found  # comments are not rendered


def test_cjk_blocks():
    assert all(cjk_font.is_cjk(c) for c in "、一龥㐀！\U00020000")
    assert not any(cjk_font.is_cjk(c) for c in "a·é—\u200b")


def test_unicode_range_merges_consecutive_code_points():
    assert cjk_font.unicode_range(list("一丁七万")) == "U+4e00-4e01, U+4e03, U+4e07"


@pytest.fixture(scope="module")
def font_cached():
    vendor = cjk_font._vendor()
    pkg = next(p for p in vendor.load_lock() if p["package"] == cjk_font.PACKAGE)
    if not vendor.tarball_path(pkg).exists():
        if os.environ.get("BOOK_BUILT"):
            raise AssertionError(
                f"{vendor.tarball_path(pkg)} is missing although the book was built"
            )
        pytest.skip("the font tarball is not cached (run `python _vendor/fetch.py`)")


def book(tmp_path: pathlib.Path, name: str, pages: dict[str, str]) -> pathlib.Path:
    root = tmp_path / name
    for rel, body in pages.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body, encoding="utf-8")
    return root


def test_subset_holds_exactly_the_pages_characters_and_is_deterministic(tmp_path, font_cached):
    from fontTools.ttLib import TTFont

    pages = {
        "index.html": SNIPPET,
        "chapters/a.html": "<p>位置、编码（RoPE）</p>",
        "_static/x.html": "<p>忽略</p>",
    }
    first = cjk_font.build(book(tmp_path, "one", pages))
    second = cjk_font.build(book(tmp_path, "two", pages))
    assert second == first
    want = set("旋转编码频率位置、（）")
    assert set(first["characters"]) == want and first["count"] == len(want)
    assert first["pages"] == ["chapters/a.html", "index.html"]
    out1, out2 = (tmp_path / d / cjk_font.OUT for d in ("one", "two"))
    names = sorted(p.name for p in out1.iterdir())
    assert names == sorted(
        [
            "LICENSE",
            "cjk.css",
            "cjk-font.json",
            "noto-sans-sc-subset-400.woff",
            "noto-sans-sc-subset-700.woff",
        ]
    )
    for name in names:  # same pages, same bytes (no timestamp from the build time)
        assert (
            hashlib.sha256((out1 / name).read_bytes()).digest()
            == hashlib.sha256((out2 / name).read_bytes()).digest()
        ), name
    css = (out1 / "cjk.css").read_text(encoding="utf-8")
    for weight in (400, 700):
        font = TTFont(out1 / f"noto-sans-sc-subset-{weight}.woff")
        assert font.flavor == "woff"
        assert {chr(c) for c in font.getBestCmap()} == want
        assert f"font-weight: {weight};" in css
    ranges = re.findall(r"unicode-range: ([^;]+);", css)
    assert ranges == [cjk_font.unicode_range(sorted(want))] * 2
    assert css.count("font-display: swap;") == 2
    assert f'--pst-font-family-base: "{cjk_font.FAMILY}",' in css
    assert f'--pst-font-family-monospace: "{cjk_font.FAMILY}",' in css
    assert "SIL OPEN FONT LICENSE" in (out1 / "LICENSE").read_text(encoding="utf-8")
    assert json.loads((out1 / "cjk-font.json").read_text(encoding="utf-8")) == first


def test_a_character_the_font_lacks_fails_the_build(tmp_path, font_cached):
    # U+4E12 is a CJK unified ideograph outside the Google Fonts Noto Sans SC character set
    root = book(
        tmp_path, "book", {"index.html": "<p>编码</p>", "chapters/x.html": '<img alt="丒">'}
    )
    with pytest.raises(
        cjk_font.CJKFontError, match=r"U\+4E12 丒 in chapters/x.html \(<img alt="
    ) as err:
        cjk_font.build(root)
    assert issubclass(cjk_font.CJKFontError, cjk_font.SphinxError)
    assert not (root / cjk_font.OUT).exists(), "nothing is written when the font lacks a character"
    assert "empty boxes" in str(err.value)
