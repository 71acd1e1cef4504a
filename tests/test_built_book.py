"""Checks of the built book (`_build/html`). `make test` builds it first and sets
BOOK_BUILT=1, which turns a missing build into a failure instead of a skip."""

import json
import os
import pathlib
import re
import time

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
EXECUTED = ROOT / "_build" / "jupyter_execute" / "chapters"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))

if not (HTML / "index.html").exists():
    if os.environ.get("BOOK_BUILT"):
        raise RuntimeError("BOOK_BUILT is set but _build/html/index.html is missing")
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)


def glued_text(outputs_by_name: dict) -> dict:
    return {k: v["data"].get("text/plain") for k, v in outputs_by_name.items() if "image/png" not in v["data"]}


def glue_of(nb) -> dict:
    """Glued outputs of an executed notebook, with MyST-NB's mime prefix removed."""
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {}).get("scrapbook")
            if meta:
                prefix = meta.get("mime_prefix", "")
                data = {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in out["data"].items()}
                found[meta["name"]] = {"data": data}
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_a_second_execution_glues_identical_values(path, tmp_path):
    """Determinism: executing a chapter again gives the same glued values as the build."""
    built = json.loads((EXECUTED / f"{path.stem}.glue.json").read_text())
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    print(f"{path.name}: executed in {seconds:.1f} s")
    again = glue_of(nb)
    assert set(again) == set(built)
    assert glued_text({k: dict(v) for k, v in again.items()}) == glued_text(built)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_page_has_glued_numbers_figures_and_math(path):
    page = (HTML / "chapters" / f"{path.stem}.html").read_text(encoding="utf-8")
    assert "pasted-text" in page or "glue" in page
    for img in re.findall(r"<img [^>]*>", page):
        if "logo" in img:
            continue
        assert re.search(r'alt="[^"]{15,}"', img), f"figure without alt text: {img[:120]}"
        src = re.search(r'src="([^"]+)"', img).group(1)
        if src.startswith("data:"):  # the widgets' <noscript> stand-in figure
            continue
        assert (HTML / "chapters" / src).resolve().exists(), src
    assert "math notranslate" in page


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_embedded_widget_state_is_at_most_3_mb_per_page(path):
    """Static explorers embed prerendered figures; the page must stay light."""
    page = (HTML / "chapters" / f"{path.stem}.html").read_text(encoding="utf-8")
    states = re.findall(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', page, re.S)
    size = sum(len(s.encode()) for s in states)
    print(f"{path.name}: {size / 1e6:.2f} MB of widget state")
    assert size <= 3_000_000


def test_internal_links_resolve():
    broken = []
    for page in HTML.rglob("*.html"):
        if "_static" in page.parts:  # theme templates, not pages
            continue
        text = page.read_text(encoding="utf-8", errors="replace")
        for href in re.findall(r'href="([^"#?:]+)(?:#[^"]*)?"', text):
            if href.startswith(("//", "mailto")):
                continue
            if not (page.parent / href).resolve().exists():
                broken.append(f"{page.relative_to(HTML)} -> {href}")
    assert not broken, broken[:20]
