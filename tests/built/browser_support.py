"""Shared pieces of the browser tests (tests/built/test_browser.py, test_layout.py): the
built book served on 127.0.0.1, Debian's chromium driven by Playwright, and a context in which every
request that leaves the machine is blocked and recorded.

The `server` and `browser` fixtures built on these are in conftest.py beside this file.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import struct
import zlib
from urllib.parse import urlparse

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Debian's chromium, never Playwright's own download; nothing that phones home.
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]

# Waits until MathJax is done: startup.promise is replaced whenever more math is queued (the
# widgets' labels, see _config.yml), so wait until it stops changing.
MATHJAX_DONE = """async () => {
  if (!window.MathJax || !MathJax.startup) return;
  let p;
  do { p = MathJax.startup.promise; await p; } while (p !== MathJax.startup.promise);
  await document.fonts.ready;
}"""


def require_book_and_chromium(html: pathlib.Path) -> None:
    """Skip the calling test module when the book is not built or chromium is missing; with
    BOOK_BUILT set (`make test`) either one is an error instead. Call at module level."""
    if not (html / "index.html").exists():
        if os.environ.get("BOOK_BUILT"):
            raise RuntimeError(f"BOOK_BUILT is set but {html / 'index.html'} is missing")
        pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)
    if not pathlib.Path(CHROMIUM).exists():
        if os.environ.get("BOOK_BUILT"):
            raise RuntimeError(f"no chromium at {CHROMIUM}: .ci/run installs Debian's chromium")
        pytest.skip("chromium is not installed", allow_module_level=True)


def block_external(context, server: str) -> list[str]:
    """Let `context` reach only the test server; every other request is aborted and its URL
    appended to the returned list."""
    external: list[str] = []
    origin = urlparse(server).netloc

    def route(r):
        if urlparse(r.request.url).netloc == origin:
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return external


def wait_for_explorers(page, html_file: pathlib.Path) -> None:
    """Wait until every explorer of the page (``html_file``, as built) has drawn its canvas:
    they are drawn once anywidget has loaded their ES module, after the page's own load."""
    n = html_file.read_text(encoding="utf-8").count('"_view_module": "anywidget"')
    if n:
        page.wait_for_function(
            f"document.querySelectorAll('.posenc-explorer canvas').length >= {n}", timeout=30000
        )


def png_facts(data: bytes) -> dict:
    """Width, height, dots per inch (pHYs) and tEXt entries of a PNG file."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    facts = {"text": {}}
    pos = 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            facts["width"], facts["height"] = struct.unpack(">II", body[:8])
        elif kind == b"pHYs":
            x, _, unit = struct.unpack(">IIB", body)
            facts["dpi"] = x * 0.0254 if unit == 1 else None
        elif kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            facts["text"][key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            facts["text"][key.decode("latin-1")] = zlib.decompress(rest[1:]).decode("latin-1")
        pos += 12 + length
    return facts
