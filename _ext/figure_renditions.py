"""A phone rendition of every figure, chosen by the reader's browser (art direction).

The figures are drawn for the 672 px text column; on a 390 px phone the column is 342 px, a
figure is shrunk to fit, and its smallest text would show at 5-7 px. So
``figure_for_display`` (posenc_core/book/figures/style.py) also draws each wide figure for a
phone (the same figure, ``PHONE_WIDTH`` inches wide, panels in one column) when the book is
built (``POSENC_BOOK_BUILD=1``) and carries that PNG inside the desktop one, in the private
ancillary chunk ``PHONE_CHUNK`` that PNG viewers skip. MyST-NB copies the notebook's PNG
into ``_images/`` unchanged. When the HTML build has finished, this extension

1. splits every such PNG in two: the desktop PNG without the chunk (the same pixels and text
   chunks), and ``<name>.phone.png`` beside it (which records its own smallest text size);
2. wraps every ``<img>`` of it in ``<picture>`` with a ``<source>`` for the phone file, for
   viewports too narrow to show the desktop PNG's smallest text at ``MIN_PX`` or more. A
   reader's browser downloads one of the two, never both. The ``<img>`` keeps MyST-NB's
   inline size (the drawn width, which _static/posenc.js reads to open a figure full size
   on a tap), so the phone PNG fills the column: on a 390 px phone 342 px for its 330.

Why a local extension: no maintained package renders a notebook output as art-directed
alternatives (MyST-NB writes one ``<img>`` per ``image/png`` output; Sphinx's image
extensions resize or convert one image, they do not offer a second drawing). Delete it when
MyST-NB can render an output's alternatives as ``<picture>`` (or a figure format that reflows
with the column, such as SVG with text that stays readable, replaces the PNGs). Tested in
tests/tooling/test_figure_renditions.py and, in the browser, tests/built/test_figure_text.py.
"""

from __future__ import annotations

import math
import pathlib
import re
import struct
import zlib

from posenc_core.book.figures.style import DISPLAY_DPI, PHONE_CHUNK, PIXEL_RATIO, TEXT_SIZE_KEY

MIN_PX = 9.0
"""Smallest text, in CSS px as displayed, that a reader is shown."""

PAGE_PADDING = 48
"""Viewport width less the text column's, in CSS px, for viewports up to NARROW (measured in
the built book with chromium: a 390 px viewport has a 342 px column)."""

NARROW = 767
"""Widest viewport (CSS px) with the narrow layout; wider ones have a column of 608 px or more."""

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_IMG = re.compile(r'<img\b[^>]*?\bsrc="(?P<src>[^"]*?_images/(?P<stem>[^"/]+)\.png)"[^>]*>')


def png_chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """The chunks of ``png`` as (type, data), in file order."""
    if png[:8] != _SIGNATURE:
        raise ValueError(f"png must start with the PNG signature, got {png[:8]!r}")
    chunks, at = [], 8
    while at + 8 <= len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        chunks.append((png[at + 4 : at + 8], png[at + 8 : at + 8 + length]))
        at += 12 + length
    return chunks


def _join(chunks: list[tuple[bytes, bytes]]) -> bytes:
    out = [_SIGNATURE]
    for kind, data in chunks:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        out.append(struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc))
    return b"".join(out)


def split(png: bytes) -> tuple[bytes, bytes | None]:
    """``png`` without its phone chunk, and the phone PNG it carried (None if none)."""
    chunks = png_chunks(png)
    phone = next((data for kind, data in chunks if kind == PHONE_CHUNK), None)
    if phone is None:
        return png, None
    return _join([(k, d) for k, d in chunks if k != PHONE_CHUNK]), phone


def _text_pt(png: bytes) -> float | None:
    for kind, data in png_chunks(png):
        key, _, value = data.partition(b"\0")
        if kind == b"tEXt" and key.decode("latin-1") == TEXT_SIZE_KEY:
            return float(value)
    return None


def breakpoint_px(desktop: bytes) -> int:
    """The widest viewport (CSS px) at which the phone rendition is shown: below the width at
    which the desktop PNG's smallest text would show under MIN_PX, and never above NARROW."""
    width = struct.unpack(">I", desktop[16:20])[0] / PIXEL_RATIO
    pt = _text_pt(desktop) or 0.0
    natural_px = pt * DISPLAY_DPI / 72
    if natural_px <= 0:
        return NARROW
    column = width * MIN_PX / natural_px  # narrowest column that shows it at MIN_PX
    return min(NARROW, math.ceil(column) + PAGE_PADDING - 1)


def split_images(images: pathlib.Path) -> dict[str, tuple[int, int, int]]:
    """Split every PNG of ``images`` that carries a phone rendition; returns, for every PNG
    with a phone file beside it, its stem -> (breakpoint, phone width, phone height) in CSS px."""
    found = {}
    for path in sorted(images.glob("*.png")):
        if path.name.endswith(".phone.png"):
            continue
        phone_path = path.with_name(f"{path.stem}.phone.png")
        desktop, phone = split(path.read_bytes())
        if phone is not None:
            path.write_bytes(desktop)
            phone_path.write_bytes(phone)
        elif phone_path.exists():
            phone = phone_path.read_bytes()
        else:
            continue
        w, h = struct.unpack(">II", phone[16:24])
        found[path.stem] = (breakpoint_px(desktop), w // PIXEL_RATIO, h // PIXEL_RATIO)
    return found


def picture_html(html: str, renditions: dict[str, tuple[int, int, int]]) -> str:
    """``html`` with every ``<img>`` of a PNG in ``renditions`` wrapped in ``<picture>``."""

    def wrap(m: re.Match) -> str:
        stem = m["stem"]
        if stem not in renditions:
            return m[0]
        breakpoint, w, h = renditions[stem]
        phone = m["src"][: -len(".png")] + ".phone.png"
        return (
            f'<picture><source media="(max-width: {breakpoint}px)" srcset="{phone}" '
            f'width="{w}" height="{h}">{m[0]}</picture>'
        )

    if ".phone.png" in html:  # already done (a page written by an earlier run)
        return html
    return _IMG.sub(wrap, html)


def _build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    out = pathlib.Path(app.outdir)
    renditions = split_images(out / "_images")
    if not renditions:
        return
    for page in out.rglob("*.html"):
        if page.relative_to(out).parts[0] in ("_static", "_vendor", "_modules"):
            continue
        html = page.read_text(encoding="utf-8")
        new = picture_html(html, renditions)
        if new != html:
            page.write_text(new, encoding="utf-8")


def setup(app):
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
