"""Checks of the built book (`_build/html`). `make test` builds it first and sets
BOOK_BUILT=1, which turns a missing build into a failure instead of a skip."""

import json
import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))

if not (HTML / "index.html").exists():
    if os.environ.get("BOOK_BUILT"):
        raise RuntimeError("BOOK_BUILT is set but _build/html/index.html is missing")
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)


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
def test_embedded_widget_state_is_small(path):
    """Explorers carry an ES module and their numbers, not figures: at most 0.5 MB of widget
    state per page (the prerendered explorers needed up to 2.8 MB)."""
    page = (HTML / "chapters" / f"{path.stem}.html").read_text(encoding="utf-8")
    states = re.findall(
        r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', page, re.S
    )
    size = sum(len(s.encode()) for s in states)
    print(f"{path.name}: {size / 1e6:.2f} MB of widget state")
    assert size <= 500_000


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


# --- No trace of the build machine in what is served --------------------------------------

SERVED = pathlib.Path(
    os.environ.get("POSENC_BOOK_HTML", HTML)
)  # POSENC_BOOK_HTML: check another build
TEXT_SUFFIXES = {".html", ".js", ".json", ".txt", ".css", ".ipynb", ".svg"}


def build_machine_strings() -> list[str]:
    """Strings that reveal where and by whom the book was built: this checkout, the home
    folder, the Python environment, and path fragments no reader-facing page needs."""
    import site
    import sys

    paths = {
        str(ROOT.resolve()),
        sys.prefix,
        sys.exec_prefix,
        *site.getsitepackages(),
        site.getusersitepackages(),
    }
    home = os.path.expanduser("~")
    if len(home) > 1:
        paths.add(home)
    # a one-component prefix such as /usr would match innocent text; the fragments below cover it
    paths = {p for p in paths if len(pathlib.PurePath(p).parts) > 2 or p == home}
    return sorted(
        paths | {"/.venv/", "site-packages", "/tmp/", "/root/", "/home/", "file:///"},
        key=len,
        reverse=True,
    )


def pinned_vendor_bytes() -> dict[pathlib.Path, bytes]:
    """Served path -> bytes of every file _vendor/vendor.lock.json pins, read from the cached
    tarballs whose sha512 matches the lock (empty where a tarball is not cached)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("vendor_fetch", ROOT / "_vendor" / "fetch.py")
    fetch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetch)
    found = {}
    for pkg in fetch.load_lock():
        try:
            tarball = fetch.verified_tarball(pkg, download=False)
        except fetch.VendorError:
            continue
        for name, data in fetch.tar_members(tarball, pkg["files"]).items():
            found[SERVED / pkg["dest"] / name[len(fetch.PREFIX) :]] = data
    return found


def test_no_build_machine_paths_in_pages():
    """Pages, scripts and data served to readers name no path of the build machine (a repr of
    a checkpoint that prints its local file, a traceback, a file:// link). Files that are byte
    for byte a pinned third-party release are skipped: html-manager's embed-amd.js, for one,
    has JupyterLab's own "/home/" path handling in its code, which is not about this machine."""
    needles = build_machine_strings()
    pattern = re.compile("|".join(re.escape(n) for n in needles))
    third_party = pinned_vendor_bytes()
    hits = []
    for path in sorted(SERVED.rglob("*")):
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192] or third_party.get(path) == data:  # binary, or a pinned release
            continue
        text = data.decode("utf-8", errors="replace")
        last = -1000
        for m in pattern.finditer(text):
            if (
                m.start() < last + 40
            ):  # the same path again (checkout, then .venv, then site-packages)
                continue
            last = m.start()
            context = text[max(0, m.start() - 40) : m.end() + 40].replace("\n", " ")
            hits.append(f"{path.relative_to(SERVED)}: {m.group()!r} in ...{context}...")
    print(f"{len(hits)} build-machine strings in {SERVED} (looked for {needles})")
    assert not hits, f"{len(hits)} build-machine paths served to readers:\n" + "\n".join(hits)


def test_the_build_executed_the_current_library():
    """The execution cache records the inputs its outputs were computed from
    (_ext/exec_cache.py); they are today's posenc_core, chapters/data and library versions, so
    no page shows outputs of older code."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("exec_cache", ROOT / "_ext" / "exec_cache.py")
    exec_cache = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exec_cache)
    record = json.loads((ROOT / "_build" / ".jupyter_cache" / exec_cache.RECORD).read_text())
    now = exec_cache.chapter_inputs(ROOT, environ=record["environment"])
    assert record["environment"].get("POSENC_BOOK_BUILD") == "1", (
        "built without make book's switches"
    )
    assert {k: record[k] for k in ("files_sha256", "versions")} == {
        k: now[k] for k in ("files_sha256", "versions")
    }
    assert record["digest"] == now["digest"]
