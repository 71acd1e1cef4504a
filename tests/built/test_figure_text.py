"""Figure text as a reader sees it on a phone: at least 9 CSS px (1280 px: test_layout.py).

Every content figure of every page (chapters and intro, glued figures included) is a PNG from
posenc_core's figure functions, which records its smallest text size in points in a text chunk
(``style.TEXT_SIZE_KEY``) and is stored at ``PIXEL_RATIO`` times its drawn size. In Debian's
chromium, offline (browser_support.py), at 390 x 844 (device scale 2), each page
is loaded once, every content ``<img>`` is read where the browser put it, and the PNG it shows
(``img.currentSrc``: the phone rendition of _ext/figure_renditions.py or the desktop one) is
read from the build. Its smallest text as displayed is

    pt * DISPLAY_DPI / 72 * rendered CSS width / (natural width / PIXEL_RATIO)

which must be at least MIN_DISPLAYED_PX; no page may scroll sideways either.

POSENC_BOOK_HTML=/path/to/html reads another build. Run with -s for a per-width summary.
"""

from __future__ import annotations

import os
import pathlib
import statistics
from urllib.parse import unquote, urlparse

import pytest
from browser_support import block_external, png_facts, require_book_and_chromium

from posenc_core.book.figures.style import DISPLAY_DPI, PIXEL_RATIO, TEXT_SIZE_KEY

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = pathlib.Path(os.environ.get("POSENC_BOOK_HTML", ROOT / "_build" / "html")).resolve()
# The phone only: at 1280 px the same bound is test_layout.py's
# test_figure_text_is_readable_and_sharp (every page's figures, with their sharpness).
VIEWPORTS = {390: {"width": 390, "height": 844}}
SCALE = {390: 2}
MIN_DISPLAYED_PX = 9.0

require_book_and_chromium(HTML)
pytest.importorskip("playwright.sync_api")


def figure_pages() -> list[str]:
    """The reader pages that show a figure of the book (an image from _images/)."""
    pages = []
    for page in sorted(HTML.rglob("*.html")):
        rel = page.relative_to(HTML)
        if rel.parts[0] in ("_static", "_vendor", "_modules"):
            continue
        if "_images/" in page.read_text(encoding="utf-8", errors="replace"):
            pages.append(rel.as_posix())
    return pages


# Every content image of the article, loaded (lazy ones made eager), with what the browser
# chose and the size it shows it at; and the page's own width against the viewport's.
READ_IMAGES = """async () => {
  const imgs = [...document.querySelectorAll('article img, .bd-article img')]
    .filter(i => (i.getAttribute('src') || '').includes('_images/'));
  imgs.forEach(i => { i.loading = 'eager'; });
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  return {
    images: [...new Set(imgs)].map(i => ({
      src: i.currentSrc, shown: i.getBoundingClientRect().width,
      visible: i.getClientRects().length > 0, natural: i.naturalWidth})),
    sw: document.documentElement.scrollWidth, iw: window.innerWidth};
}"""


def displayed_px(pt: float, shown_css_px: float, png_width: int) -> float:
    """Smallest text in CSS px of a PNG stored at PIXEL_RATIO, shown ``shown_css_px`` wide."""
    return pt * DISPLAY_DPI / 72 * shown_css_px / (png_width / PIXEL_RATIO)


def measure(chromium, base_url: str, width: int) -> dict[str, dict]:
    """{page: {"images": [(file, smallest text px, pt), ...], "sw": .., "iw": ..}} at ``width``."""
    context = chromium.new_context(
        viewport=VIEWPORTS[width], device_scale_factor=SCALE[width], is_mobile=width < 600
    )
    results = {}
    try:
        external = block_external(context, base_url)
        page = context.new_page()
        for path in figure_pages():
            page.goto(f"{base_url}/{path}", wait_until="load")
            found = page.evaluate(READ_IMAGES)
            images = []
            for img in found["images"]:
                if not img["visible"]:
                    continue
                file = HTML / unquote(urlparse(img["src"]).path).lstrip("/")
                facts = png_facts(file.read_bytes())
                assert TEXT_SIZE_KEY in facts["text"], f"{file.name} ({path}) records no text size"
                pt = float(facts["text"][TEXT_SIZE_KEY])
                px = displayed_px(pt, img["shown"], facts["width"])
                images.append((file.name, px, pt))
            results[path] = {"images": images, "sw": found["sw"], "iw": found["iw"]}
        assert external == [], f"requests that left the machine: {external[:5]}"
    finally:
        context.close()
    return results


@pytest.mark.parametrize("width", sorted(VIEWPORTS))
def test_figure_text_is_readable_and_no_page_scrolls_sideways(browser, server, width):
    """Every shown figure's smallest text >= MIN_DISPLAYED_PX CSS px; no sideways scroll."""
    results = measure(browser, server, width)
    sizes = [px for r in results.values() for _, px, _ in r["images"]]
    assert sizes, "no figure found: is the build complete?"
    print(
        f"\n{width} px: {len(sizes)} figures on {len(results)} pages, smallest text "
        f"min {min(sizes):.1f} px, median {statistics.median(sizes):.1f} px"
    )
    small = [
        f"{path}: {name} {px:.1f} px ({pt:g} pt)"
        for path, r in results.items()
        for name, px, pt in r["images"]
        if px < MIN_DISPLAYED_PX
    ]
    wide = [
        f"{path}: {r['sw']} > {r['iw']}" for path, r in results.items() if r["sw"] > r["iw"] + 1
    ]
    assert not small, f"figure text under {MIN_DISPLAYED_PX} px at {width} px:\n" + "\n".join(small)
    assert not wide, f"pages that scroll sideways at {width} px:\n" + "\n".join(wide)
