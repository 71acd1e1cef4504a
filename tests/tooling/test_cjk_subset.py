"""The committed CJK font subset (_static/cjk/, written by `make fonts`, tools/cjk_font.py):
it holds every CJK character of the book's sources, it was cut from the pinned Noto Sans SC
tarball, and its stylesheet serves it. (tests/built/test_cjk_font.py checks in a browser that
the built pages draw every CJK character with it.)"""

from __future__ import annotations

import importlib.util
import io
import json
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("cjk_font", ROOT / "tools" / "cjk_font.py")
cjk_font = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cjk_font)

OUT = cjk_font.OUT
MANIFEST = json.loads((OUT / cjk_font.MANIFEST).read_text(encoding="utf-8"))
RUN_MAKE_FONTS = "run `make fonts` and commit _static/cjk/"


def _font(name: str):
    from fontTools.ttLib import TTFont

    return TTFont(OUT / name)


def test_the_subset_holds_every_cjk_character_of_the_book():
    used = cjk_font.book_characters(ROOT)
    assert len(used) >= 50, "the book gives Chinese terms beside the English ones"
    assert MANIFEST["fonts"] and {f["weight"] for f in MANIFEST["fonts"].values()} == {400, 700}
    for name in MANIFEST["fonts"]:
        cmap = _font(name).getBestCmap()
        missing = [
            f"U+{ord(c):04X} {c} in {where}" for c, where in used.items() if ord(c) not in cmap
        ]
        assert not missing, f"{name} lacks {len(missing)} character(s) ({RUN_MAKE_FONTS}):\n" + (
            "\n".join(missing)
        )
        assert {chr(cp) for cp in cmap} == set(MANIFEST["characters"]), name
    assert set(used) == set(MANIFEST["characters"]), (
        f"the subset holds characters the book no longer uses ({RUN_MAKE_FONTS}): "
        + "".join(sorted(set(MANIFEST["characters"]) - set(used)))
    )


def test_the_collector_reads_pages_cells_outputs_and_the_package(tmp_path):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nchapters:\n- file: ch\n- file: missing\n", encoding="utf-8"
    )
    (tmp_path / "intro.md").write_text("Rotary (旋转)", encoding="utf-8")
    (tmp_path / "README.md").write_text("不在书中", encoding="utf-8")  # not a page of the book
    cells = [
        {"cell_type": "markdown", "source": ["位置"]},
        {
            "cell_type": "code",
            "source": ["x = '编码'  # 注"],
            "outputs": [
                {"output_type": "stream", "text": ["\u9891"]},
                {"output_type": "execute_result", "data": {"text/plain": "率"}},
            ],
        },
    ]
    (tmp_path / "ch.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")
    (tmp_path / "references.bib").write_text("title = {学}", encoding="utf-8")
    (tmp_path / "posenc_core").mkdir()
    (tmp_path / "posenc_core" / "m.py").write_text("# 你", encoding="utf-8")
    (tmp_path / "posenc_core" / "w.js").write_text("// 好", encoding="utf-8")
    (tmp_path / "posenc_core" / "notes.txt").write_text("否", encoding="utf-8")
    found = cjk_font.book_characters(tmp_path)
    assert set(found) == set("旋转位置编码注频率学你好"), found
    assert found["频"] == "ch.ipynb" and found["你"] == "posenc_core/m.py"


def test_cjk_blocks_and_unicode_range():
    assert all(cjk_font.CJK_RE.fullmatch(c) for c in "、一龥㐀！\U00020000")
    assert not any(cjk_font.CJK_RE.fullmatch(c) for c in "a·é—\u200b﹣")
    assert cjk_font.unicode_range(list("一丁七万")) == "U+4e00-4e01, U+4e03, U+4e07"


def test_the_stylesheet_serves_both_weights_for_exactly_these_characters():
    css = (OUT / cjk_font.CSS).read_text(encoding="utf-8")
    chars = list(MANIFEST["characters"])
    for name, info in MANIFEST["fonts"].items():
        face = re.search(r"@font-face \{[^}]*" + re.escape(name) + r"[^}]*\}", css)
        assert face, name
        assert f"font-weight: {info['weight']};" in face.group()
        assert 'format("woff2")' in face.group() and "font-display: swap;" in face.group()
        assert f"unicode-range: {cjk_font.unicode_range(chars)};" in face.group()
    for var in ("base", "heading", "monospace"):
        assert f'--pst-font-family-{var}: "{cjk_font.FAMILY}",' in css
    assert "SIL OPEN FONT LICENSE" in (OUT / "LICENSE").read_text(encoding="utf-8")
    assert sorted(p.name for p in OUT.iterdir()) == sorted(
        [*MANIFEST["fonts"], cjk_font.CSS, cjk_font.MANIFEST, "LICENSE"]
    )


@pytest.fixture(scope="module")
def font_package():
    try:
        return cjk_font.font_package()
    except cjk_font.CJKFontError as err:
        if os.environ.get("BOOK_BUILT") or os.environ.get("CI"):
            raise
        pytest.skip(f"the pinned font tarball is not cached: {err}")


@pytest.fixture(scope="module")
def slices(font_package):
    return cjk_font.slices_by_weight(font_package[2])


def test_the_subset_was_cut_from_the_pinned_font(font_package, slices):
    """Same package, version and tarball as _vendor/vendor.lock.json pins, and every glyph
    (outline and advance) is the one of the tarball's slice that holds the character."""
    from fontTools.ttLib import TTFont

    pkg, tarball_sha256, _ = font_package
    assert (MANIFEST["package"], MANIFEST["version"], MANIFEST["integrity"]) == (
        pkg["package"],
        pkg["version"],
        pkg["integrity"],
    )
    assert MANIFEST["tarball_sha256"] == tarball_sha256
    for name, info in MANIFEST["fonts"].items():
        font, weight = _font(name), slices[info["weight"]]
        sources: dict[str, TTFont] = {}
        for cp in font.getBestCmap():
            where = cjk_font.slice_for(cp, weight)
            source = sources.setdefault(where, TTFont(io.BytesIO(weight[where][0])))
            assert cjk_font.same_glyph(font, cp, source), f"{name}: U+{cp:04X} {chr(cp)}"
        assert {pathlib.PurePosixPath(s).name for s in sources} == set(info["slices"])


def test_a_character_the_font_lacks_is_an_error(slices):
    # U+4E12 is a CJK unified ideograph outside the Google Fonts Noto Sans SC character set
    with pytest.raises(cjk_font.CJKFontError, match=r"U\+4E12 丒 in chapters/x.ipynb") as err:
        cjk_font.check_coverage({"编": "intro.md", "丒": "chapters/x.ipynb"}, slices[400], 400)
    assert "empty boxes" in str(err.value)
