"""The built book in a real browser (Debian's chromium driven by Playwright), served on
localhost with every request that leaves the machine blocked and recorded.

Runs after the build (`make test` sets BOOK_BUILT=1). Checks, on every chapter page: no
console errors, no failed or external requests, rendered math; the launch buttons point at the
configured repository and notebook. The explorers are driven in test_explorers.py.
"""

from __future__ import annotations

import os
import pathlib
from urllib.parse import urlparse

import pytest
import yaml
from browser_support import CHROMIUM, block_external

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())

if not (HTML / "index.html").exists():
    if os.environ.get("BOOK_BUILT"):
        raise RuntimeError("BOOK_BUILT is set but _build/html/index.html is missing")
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)
if not pathlib.Path(CHROMIUM).exists():
    if os.environ.get("BOOK_BUILT"):
        raise RuntimeError(f"no chromium at {CHROMIUM}: .ci/run installs Debian's chromium")
    pytest.skip("chromium is not installed", allow_module_level=True)

sync_api = pytest.importorskip("playwright.sync_api")


class Visit:
    """One page load with every request outside the test server blocked and recorded."""

    def __init__(self, browser, server: str, path: str):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.external: list[str] = block_external(self.context, server)
        self.failed: list[str] = []
        self.console_errors: list[str] = []
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.console_errors.append(m.text))
        self.page.on("pageerror", lambda e: self.console_errors.append(str(e)))
        self.page.on("requestfailed", lambda r: self.failed.append(r.url))
        self.page.goto(f"{server}/{path}", wait_until="networkidle")

    def close(self):
        self.context.close()


@pytest.fixture
def visit(browser, server):
    opened = []

    def _open(path):
        v = Visit(browser, server, path)
        opened.append(v)
        return v

    yield _open
    for v in opened:
        v.close()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_page_loads_cleanly_offline_with_rendered_math(visit, chapter):
    v = visit(f"chapters/{chapter}.html")
    v.page.wait_for_selector("mjx-container", state="attached", timeout=30000)
    assert v.page.locator("mjx-container").count() > 5
    assert v.page.locator("text=Math input error").count() == 0
    assert v.external == [], f"requests that left the machine: {v.external[:5]}"
    assert v.failed == [], f"failed requests: {v.failed[:5]}"
    assert v.console_errors == [], v.console_errors[:5]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_launch_buttons_point_at_the_repository_and_notebook(chapter):
    # The launch links are in the page's HTML as served (no script writes them), so they are
    # read from the file; loading each page in the browser again cost a page load apiece.
    import html
    import re

    page = (HTML / "chapters" / f"{chapter}.html").read_text(encoding="utf-8")
    repo, branch = CONFIG["repository"]["url"], CONFIG["repository"]["branch"]
    org_repo = urlparse(repo).path.strip("/")
    hrefs = [html.unescape(h) for h in re.findall(r'<a\b[^>]*\bhref="([^"]+)"', page)]
    binder = [h for h in hrefs if "mybinder.org" in h]
    colab = [h for h in hrefs if "colab.research.google.com" in h]
    assert binder == [
        f"{CONFIG['launch_buttons']['binderhub_url']}/v2/gh/{org_repo}/{branch}?urlpath=lab/tree/chapters/{chapter}.ipynb"
    ]
    assert colab == [
        f"{CONFIG['launch_buttons']['colab_url']}/github/{org_repo}/blob/{branch}/chapters/{chapter}.ipynb"
    ]
    assert repo in hrefs
