"""_ext/part_numbers.py: a chapter's sub-pages are numbered as its parts (2b, 2c), in a scratch
Sphinx project built here (about 2 s): headings, page title, toctree, previous/next links,
figure numbers and {numref}/{ref} cross-references. The book itself: tests/built/test_navigation.py.
"""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("part_numbers", ROOT / "_ext" / "part_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


part_numbers = _load()

PAGES = {
    "index": """Book
====

.. toctree::
   :numbered:

   one
   two
""",
    "one": """One
===

Alpha
-----

Beta
----
""",
    # chapter 2 has two sections of its own before its sub-pages: Sphinx would number them
    # 2.3 and 2.4
    "two": """Two
=====

First
-----

Second
------

.. toctree::

   two_b
   two_c
""",
    "two_b": """Two, second page
================

.. _part-b-section:

Inside b
--------

.. _fig-b:

.. figure:: dot.png

   The first figure of part b.

Deeper
^^^^^^

See :numref:`fig-b` and :ref:`part-b-section`, and :numref:`fig-c`.
""",
    "two_c": """Two, third page
===============

Inside c
--------

.. _fig-c:

.. figure:: dot.png

   The first figure of part c.
""",
}

# the smallest PNG: 1 x 1 pixel
DOT = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    src = tmp_path_factory.mktemp("src")
    for name, text in PAGES.items():
        (src / f"{name}.rst").write_text(text, encoding="utf-8")
    (src / "dot.png").write_bytes(DOT)
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / '_ext')!r})\n"
        "extensions = ['part_numbers']\nnumfig = True\nhtml_theme = 'basic'\n",
        encoding="utf-8",
    )
    out = src / "_build"
    # docutils_namespace: Sphinx registers its directives (math, ...) in docutils' global
    # tables; without it they stay there and break plain docutils parsing in later tests
    with docutils_namespace():
        app = Sphinx(
            str(src), str(src), str(out), str(out / ".doctrees"), "html", status=None, freshenv=True
        )
        app.build()
    return {name: (out / f"{name}.html").read_text(encoding="utf-8") for name in PAGES}


def _numbers(html: str) -> list[str]:
    """The numbers of the page's headings, in order."""
    return re.findall(r'<h[1-6]><span class="section-number">([^<]*?)\.?\s*<', html)


def test_sub_pages_are_numbered_as_their_chapters_parts(built):
    assert _numbers(built["two"])[:3] == ["2", "2.1", "2.2"]
    b, c = _numbers(built["two_b"]), _numbers(built["two_c"])
    assert b[:3] == ["2b", "2b.1", "2b.1.1"], b
    assert c[:2] == ["2c", "2c.1"], c
    assert not any(n.startswith("2.3") or n.startswith("2.4") for n in b + c)
    assert re.search(r"<title>2b\. Two, second page", built["two_b"])


def test_the_toctree_and_the_neighbour_links_show_the_part(built):
    # the chapter's page lists its parts; the root lists every page
    for page in ("index", "two"):
        assert re.search(r">2b\. (</span>)?Two, second page", built[page]), page
        assert re.search(r">2c\. (</span>)?Two, third page", built[page]), page
    # previous/next links (the basic theme's relbar) of part b name its neighbours
    assert re.search(r"2c\. (</span>)?Two, third page", built["two_b"])


def test_figures_and_cross_references_follow(built):
    assert "Fig. 2b.1" in built["two_b"]
    assert "Fig. 2c.1" in built["two_c"]
    refs = re.sub(r"<[^>]+>", "", built["two_b"])
    assert "See Fig. 2b.1" in refs
    assert "and Fig. 2c.1" in refs


def test_part_label():
    assert part_numbers.part_label(6, 1) == "6b"
    assert part_numbers.part_label(7, 2) == "7c"
    for bad in (0, 26, "1"):
        with pytest.raises(ValueError, match="index"):
            part_numbers.part_label(6, bad)
