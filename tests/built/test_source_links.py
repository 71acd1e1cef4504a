"""Source one click from the text: every `{py:func}`, `{py:class}`, `{py:meth}` or `{py:mod}`
reference in a chapter lands on an API entry whose `[source]` link (sphinx.ext.viewcode) opens
the rendered source of that very function, class or module (references to constants,
`{py:data}`, land on their documented value; viewcode links code only).

Reads the built pages (`_build/html`) as files; no browser is needed.
"""

import html
import os
import pathlib
import re
from urllib.parse import unquote, urldefrag, urljoin

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = pathlib.Path(os.environ.get("POSENC_BOOK_HTML", ROOT / "_build" / "html")).resolve()
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))

if not (HTML / "index.html").exists():
    if os.environ.get("BOOK_BUILT"):
        raise RuntimeError("BOOK_BUILT is set but _build/html/index.html is missing")
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)

# A Python-domain cross-reference in a chapter: a link into the API page to an object's anchor.
API_LINK = re.compile(
    r'<a class="reference internal" href="(\.\./api\.html#(?:module-)?(posenc_core[\w.]*))"'
)


def read(path: pathlib.Path) -> str:
    return path.read_text(encoding="utf-8")


def api_references(chapter: str) -> set[str]:
    return {m.group(2) for m in API_LINK.finditer(read(HTML / "chapters" / f"{chapter}.html"))}


def entry(api: str, anchor: str) -> str:
    """The API page's signature line (or module section) whose id is ``anchor``."""
    m = re.search(rf'<(dt|section|span)[^>]* id="{re.escape(anchor)}"[^>]*>(.*?)</\1>', api, re.S)
    assert m, f"the API page has no entry {anchor}"
    return m.group(2)


def test_the_chapters_reference_the_api():
    refs = set().union(*(api_references(c) for c in CHAPTERS))
    assert len(refs) >= 40, f"only {len(refs)} API references in the chapters"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_api_reference_leads_to_its_source(chapter):
    api = read(HTML / "api.html")
    checked = 0
    for anchor in sorted(api_references(chapter)):
        if f'id="module-{anchor}"' in api:  # a module: its source page is _modules/<path>.html
            target = "_modules/" + anchor.replace(".", "/") + ".html"
        else:
            kind = re.findall(r'<dl class="py (\w+)">', api[: api.index(f'id="{anchor}"')])[-1]
            if kind in ("data", "attribute"):  # values: viewcode links code, not constants
                continue
            obj = entry(api, anchor)
            link = r'<a class="reference (?:internal|external)" href="(_modules/[^"]+)"'
            source = re.search(link, obj)
            if source is None:  # a data entry written by hand: its text links to the source
                source = re.search(link, api[api.index(f'id="{anchor}"') :][:3000])
            assert source, f"{chapter}: the API entry {anchor} has no [source] link"
            target = html.unescape(source.group(1))
        page, fragment = urldefrag(urljoin("api.html", target))
        path = HTML / unquote(page)
        if not path.exists() and page.endswith(".html"):  # a package: its __init__ module
            path = HTML / unquote(page[: -len(".html")]) / "__init__.html"
        assert path.exists(), f"{chapter}: {anchor} links to {target}, which was not built"
        code = read(path)
        if not fragment:
            name = anchor.rsplit(".", 1)[-1]
            assert re.search(rf'<span class="n">{re.escape(name)}</span>', code) or (
                f'id="module-{anchor}"' in api
            ), f"{chapter}: {target} does not hold {name}"
        if fragment:
            assert f'id="{fragment}"' in code, f"{chapter}: {target} has no anchor {fragment}"
            name = fragment.rsplit(".", 1)[-1]
            block = code[code.index(f'id="{fragment}"') :][:4000]
            definition = (
                rf'(def|class)</span>(<span class="w">\s*</span>)?\s*<span[^>]*>{re.escape(name)}<'
            )
            assert re.search(definition, block), (
                f"{chapter}: the source of {anchor} at {target} does not start with its definition"
            )
        checked += 1
    print(f"\n{chapter}: {checked} references, each one click from its source")
