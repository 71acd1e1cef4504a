"""The book's CJK subset font (_static/cjk/, `make fonts`) draws every CJK character of the
built pages.

Chromium (Debian's, driven by Playwright) runs with a fontconfig that lists only a DejaVu
folder, checked to hold no CJK font, so a character the book's font missed would be an empty
box. On every page with CJK, after MathJax and the widgets have rendered, each run of CJK
characters is wrapped in its own span, and the Chrome DevTools Protocol
(CSS.getPlatformFontsForNode) says which font drew it: it must be the book's font alone.
Also: every distinct CJK character in the DOM is one the subset was cut for (cjk-font.json), and
the font comes from the local server (every request leaving 127.0.0.1 is blocked).

Runs after the build (`make test` sets BOOK_BUILT=1); POSENC_BOOK_HTML points it at another
built book.
"""

from __future__ import annotations

import functools
import html
import http.server
import importlib.util
import json
import os
import pathlib
import re
import shutil
import subprocess
import threading
from urllib.parse import urlparse

import pytest
from browser_support import CHROMIUM, LAUNCH_ARGS, require_book_and_chromium

HERE = pathlib.Path(__file__).resolve().parent
ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = pathlib.Path(os.environ.get("POSENC_BOOK_HTML") or ROOT / "_build" / "html")
require_book_and_chromium(HTML)

sync_api = pytest.importorskip("playwright.sync_api")

CJK_DIR = HTML / "_static" / "cjk"  # Sphinx copies _static/cjk/ there
MANIFEST = json.loads((CJK_DIR / "cjk-font.json").read_text(encoding="utf-8"))
_spec = importlib.util.spec_from_file_location("cjk_font", ROOT / "tools" / "cjk_font.py")
cjk_font = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cjk_font)
CJK_RE = cjk_font.CJK_RE  # what counts as CJK (the blocks); the scanning below is this test's own


def pages_with_cjk() -> list[str]:
    """Pages whose source holds a CJK character, raw, as an entity or as a JSON \\u escape."""
    found = []
    for page in sorted(HTML.rglob("*.html")):
        rel = page.relative_to(HTML)
        if "_static" in rel.parts:
            continue
        text = html.unescape(page.read_text(encoding="utf-8"))
        text += "".join(chr(int(h, 16)) for h in re.findall(r"\\u([0-9a-fA-F]{4})", text))
        if CJK_RE.search(text):
            found.append(rel.as_posix())
    return found


PAGES = pages_with_cjk()


# a fontconfig without CJK fonts --------------------------------------------------------------


def dejavu_folder() -> pathlib.Path:
    for base in ("/usr/share/fonts", "/usr/local/share/fonts"):
        hits = (
            sorted(pathlib.Path(base).rglob("DejaVuSans.ttf"))
            if pathlib.Path(base).is_dir()
            else []
        )
        if hits:
            return hits[0].parent
    if os.environ.get("BOOK_BUILT"):
        raise RuntimeError("no DejaVuSans.ttf under /usr/share/fonts (Debian's fonts-dejavu-core)")
    pytest.skip("no DejaVu fonts to build a CJK-free font configuration from")


@pytest.fixture(scope="module")
def fontconfig(tmp_path_factory) -> dict:
    folder = dejavu_folder()
    tmp = tmp_path_factory.mktemp("fontconfig")
    conf = tmp / "fonts.conf"
    conf.write_text(
        f"""<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir>{folder}</dir>
  <cachedir>{tmp / "cache"}</cachedir>
</fontconfig>
""",
        encoding="utf-8",
    )
    return {"file": conf, "folder": folder, "env": {**os.environ, "FONTCONFIG_FILE": str(conf)}}


def test_the_font_configuration_has_no_cjk_font(fontconfig):
    """No font the browser can find holds any of the book's CJK characters (or U+4E00)."""
    from fontTools.ttLib import TTCollection, TTFont

    wanted = {ord(c) for c in MANIFEST["characters"]} | {0x4E00}
    files = sorted(
        p for p in fontconfig["folder"].rglob("*") if p.suffix.lower() in {".ttf", ".otf", ".ttc"}
    )
    assert files, fontconfig["folder"]
    for path in files:
        fonts = (
            TTCollection(path).fonts if path.suffix.lower() == ".ttc" else [TTFont(path, lazy=True)]
        )
        for font in fonts:
            assert not wanted & set(font.getBestCmap() or {}), f"{path} has CJK glyphs"
    if shutil.which("fc-list"):
        listed = subprocess.run(
            ["fc-list", "--format", "%{file}\n"],
            env=fontconfig["env"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert listed and all(pathlib.Path(f).parent == fontconfig["folder"] for f in listed), (
            listed[:5]
        )
        cjk = subprocess.run(
            ["fc-list", ":charset=4e00"],
            env=fontconfig["env"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert cjk == "", f"fontconfig still finds a CJK font: {cjk}"


# browser -------------------------------------------------------------------------------------


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser(playwright, fontconfig):
    """A chromium of its own, launched with the CJK-free font configuration (from the run's one
    Playwright driver, conftest.py)."""
    b = playwright.chromium.launch(
        executable_path=CHROMIUM,
        env=fontconfig["env"],
        args=LAUNCH_ARGS,
    )
    yield b
    b.close()


# Wrap every run of CJK characters outside math, scripts and form controls in
# <span data-cjk-run>; returns the runs with some surrounding text.
WRAP = (HERE / "cjk_wrap.js").read_text()

# Every CJK character in the DOM: text nodes (all of them), attribute values, and the strings
# of saved widget state.
DOM_CHARS = (HERE / "cjk_dom_chars.js").read_text()


class CJKVisit:
    """One page in the CJK-free browser: rendered, CJK runs wrapped, fonts asked for."""

    def __init__(self, browser, server: str, path: str):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.external: list[str] = []
        self.fonts: list[tuple[str, int]] = []  # (url, status) of the book's font requests
        origin = urlparse(server).netloc

        def route(r):
            if urlparse(r.request.url).netloc == origin:
                r.continue_()
            else:
                self.external.append(r.request.url)
                r.abort()

        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.page.on(
            "response",
            lambda r: (
                "/_static/cjk/" in r.url
                and r.url.endswith(".woff2")
                and self.fonts.append((r.url, r.status))
            ),
        )
        self.page.goto(f"{server}/{path}", wait_until="networkidle")
        page = self.page
        if page.evaluate("() => !!(window.MathJax && MathJax.startup && MathJax.startup.promise)"):
            page.evaluate("() => MathJax.startup.promise")
        if page.locator('script[type="application/vnd.jupyter.widget-state+json"]').count():
            # the explorers are drawn once their module has loaded
            page.wait_for_selector(
                ".posenc-explorer, .jupyter-widgets:not(script)", state="attached", timeout=30000
            )
            page.wait_for_load_state("networkidle")
            page.evaluate(
                "() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null"
            )
        self.runs = page.evaluate(WRAP, CJK_RE.pattern)
        page.evaluate("() => document.fonts.ready.then(() => null)")
        page.wait_for_load_state("networkidle")
        page.evaluate("() => document.fonts.ready.then(() => null)")
        self.dom_chars = set(page.evaluate(DOM_CHARS, CJK_RE.pattern))

    def platform_fonts(self) -> list[list[dict]]:
        """The fonts that drew each wrapped span, in document order (CDP)."""
        cdp = self.context.new_cdp_session(self.page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        ids = cdp.send("DOM.querySelectorAll", {"nodeId": root, "selector": "span[data-cjk-run]"})[
            "nodeIds"
        ]
        assert len(ids) == len(self.runs)
        return [cdp.send("CSS.getPlatformFontsForNode", {"nodeId": i})["fonts"] for i in ids]

    def close(self):
        self.context.close()


@pytest.fixture(scope="module")
def visits(browser, server):
    """page -> (runs, fonts per run, DOM characters, font requests, external requests)."""
    out = {}
    for path in PAGES:
        v = CJKVisit(browser, server, path)
        try:
            out[path] = (v.runs, v.platform_fonts(), v.dom_chars, v.fonts, v.external)
        finally:
            v.close()
    return out


def test_pages_with_cjk_were_found():
    assert len(PAGES) >= 3 and MANIFEST["count"] >= 50, (PAGES, MANIFEST["count"])
    # the committed subset is the one the build served
    assert (ROOT / "_static" / "cjk" / "cjk-font.json").read_text(encoding="utf-8") == (
        CJK_DIR / "cjk-font.json"
    ).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def served_glyphs() -> dict[str, set[str]]:
    """PostScript name of each served subset -> the characters it has a (non-empty) glyph for.

    CDP names the font that drew a run, but when no font has a character Chromium draws the
    missing-glyph box with the first font of the stack, the book's own: a run counts as drawn
    only if that font also has a real glyph for each of its characters."""
    from fontTools.pens.recordingPen import RecordingPen
    from fontTools.ttLib import TTFont

    out = {}
    for name in MANIFEST["fonts"]:
        font = TTFont(CJK_DIR / name)
        glyphs = font.getGlyphSet()
        has = set()
        for cp, glyph in font.getBestCmap().items():
            pen = RecordingPen()
            glyphs[glyph].draw(pen)
            if pen.value:
                has.add(chr(cp))
        out[font["name"].getDebugName(6)] = has
    return out


def test_every_cjk_character_is_drawn_by_the_books_font(visits, served_glyphs):
    from fontTools.ttLib import TTFont

    # the family name in the font files (what the browser reports), not the CSS family
    family = {TTFont(CJK_DIR / name)["name"].getDebugName(1) for name in MANIFEST["fonts"]}.pop()
    wrong, drawn, hidden = [], set(), []
    for path, (runs, fonts, _, _, _) in visits.items():
        for run, used in zip(runs, fonts):
            if not used:  # not rendered (collapsed, display: none): nothing is drawn
                hidden.append(f"{path}: {run['text']!r} in {run['context']!r}")
                continue
            ours = [f for f in used if f["isCustomFont"] and f["familyName"] == family]
            others = [
                f"{f['familyName']} ({'web font' if f['isCustomFont'] else 'system'}, "
                f"{f['glyphCount']} glyphs)"
                for f in used
                if f not in ours
            ]
            boxes = sorted(
                {
                    ch
                    for f in ours
                    for ch in run["text"]
                    if ch not in served_glyphs.get(f["postScriptName"], set())
                }
            )
            if others or boxes or sum(f["glyphCount"] for f in ours) != len(run["text"]):
                why = (
                    f"drawn by {others}"
                    if others
                    else (
                        f"no glyph for {''.join(boxes)} in {ours}"
                        if boxes
                        else f"glyph count {ours}"
                    )
                )
                wrong.append(
                    f"{path}: {run['text']!r} (weight {run['weight']}) {why} in {run['context']!r}"
                )
            else:
                drawn.update(run["text"])
    assert not wrong, f"{len(wrong)} CJK runs not drawn by {family} alone:\n" + "\n".join(wrong)
    # every character is proven drawn at least once; the only runs not checked are not rendered
    dom = set().union(*(chars for _, _, chars, _, _ in visits.values()))
    not_drawn = sorted(dom - drawn)
    assert not not_drawn, (
        f"never drawn by the book's font: {''.join(not_drawn)}; runs not rendered:\n"
        + "\n".join(hidden)
    )
    print(
        f"\n{sum(len(r) for r, *_ in visits.values())} CJK runs on {len(visits)} pages, "
        f"{len(drawn)} characters drawn by {family} (web font); {len(hidden)} runs not rendered"
    )


def test_every_cjk_character_of_the_dom_is_one_the_font_was_made_for(visits):
    """The subset is cut from the sources (tools/cjk_font.py): every character the pages show
    must be among them; the sources may hold a few the pages do not show."""
    dom = set().union(*(chars for _, _, chars, _, _ in visits.values()))
    subset = set(MANIFEST["characters"])
    assert len(dom) >= 50, len(dom)
    assert dom <= subset, (
        f"in the pages but not in the committed subset: {''.join(sorted(dom - subset))}. Run "
        "`make fonts`; a character only a cell's output shows must come from a file "
        "tools/cjk_font.py reads (book_sources)"
    )
    print(f"\n{len(dom)} CJK characters in the pages; the subset holds {len(subset - dom)} more")


def test_the_font_is_served_locally(visits, server):
    requested = set()
    for path, (_, _, _, fonts, external) in visits.items():
        assert external == [], f"{path}: requests that left the machine: {external[:5]}"
        for url, status in fonts:
            assert url.startswith(f"{server}/_static/cjk/") and status == 200, (path, url, status)
            requested.add(url.rsplit("/", 1)[1].split("?")[0])
    assert "noto-sans-sc-subset-400.woff2" in requested, requested
    assert requested <= set(MANIFEST["fonts"]), requested


def test_without_the_books_font_cjk_has_no_font(browser, server):
    """The control: in this browser, CJK in a system font stack is drawn by no custom font and
    by no font holding it (an empty box), so the test above does prove the book's font."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.route(
            "**/*",
            lambda r: (
                r.abort()
                if urlparse(r.request.url).netloc != urlparse(server).netloc
                else r.continue_()
            ),
        )
        page.goto(f"{server}/genindex.html", wait_until="networkidle")
        page.evaluate(
            """(text) => { const s = document.createElement('span'); s.id = 'control';
            s.style.fontFamily = 'sans-serif'; s.textContent = text; document.body.prepend(s); }""",
            MANIFEST["characters"][:20],
        )
        cdp = context.new_cdp_session(page)
        cdp.send("DOM.enable")
        cdp.send("CSS.enable")
        root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "#control"})["nodeId"]
        fonts = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    finally:
        context.close()
    assert fonts and not any(f["isCustomFont"] for f in fonts), fonts
    assert all("DejaVu" in f["familyName"] for f in fonts), fonts
