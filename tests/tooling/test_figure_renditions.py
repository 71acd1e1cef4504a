"""_ext/figure_renditions.py: each figure's phone PNG split into a file of its own, and the
page's <img> wrapped in <picture> so that a browser fetches one of the two."""

from __future__ import annotations

import importlib.util
import pathlib
import struct
import types

import matplotlib

matplotlib.use("Agg")

import pytest

from posenc_core.book import figures
from posenc_core.book.notebook import BUILD_ENV

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "figure_renditions", ROOT / "_ext" / "figure_renditions.py"
)
renditions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(renditions)


@pytest.fixture(scope="module")
def carried() -> bytes:
    """A wide figure's PNG as a notebook stores it: the phone PNG inside."""
    fig, axes = figures.panel_grid(2, 2.0)
    for ax in axes:
        ax.plot([0, 1], [1, 0], label="a line")
        ax.set(xlabel="position", ylabel="value")
    figures.legend_below(fig)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(BUILD_ENV, "1")  # drawn in the book's build only
        png, _ = figures.figure_for_display(fig)
    return png


def _text(png: bytes) -> dict[str, str]:
    return {
        data.partition(b"\0")[0].decode(): data.partition(b"\0")[2].decode()
        for kind, data in renditions.png_chunks(png)
        if kind == b"tEXt"
    }


def test_split_gives_the_desktop_png_without_the_phone_one_and_the_phone_png(carried):
    desktop, phone = renditions.split(carried)
    kinds = [kind for kind, _ in renditions.png_chunks(desktop)]
    assert figures.PHONE_CHUNK not in kinds and kinds[0] == b"IHDR" and kinds[-1] == b"IEND"
    assert len(desktop) + len(phone) < len(carried)  # the chunk's 12 bytes of framing are gone
    # the same pixels and text chunks as the desktop part of what was carried
    old = [(k, d) for k, d in renditions.png_chunks(carried) if k != figures.PHONE_CHUNK]
    assert renditions.png_chunks(desktop) == old
    assert figures.TEXT_SIZE_KEY in _text(desktop) and figures.TEXT_SIZE_KEY in _text(phone)
    assert figures.png_size(phone)[0] < figures.png_size(desktop)[0]
    # a PNG without a phone rendition is left as it is; something else is refused
    assert renditions.split(desktop) == (desktop, None)
    with pytest.raises(ValueError, match="png must start with the PNG signature"):
        renditions.split(b"GIF89a")


def test_the_phone_png_is_shown_below_the_width_where_desktop_text_gets_small():
    def desktop(width_px: int, pt: float) -> bytes:
        ihdr = struct.pack(">IIBBBBB", width_px, 100, 8, 6, 0, 0, 0)
        text = f"{figures.TEXT_SIZE_KEY}\0{pt:g}".encode()
        return renditions._join([(b"IHDR", ihdr), (b"tEXt", text), (b"IEND", b"")])

    # 660 CSS px, 7 pt = 700/72 px: 9 px needs a column of 660 * 9 * 72 / 700 = 610.97 px,
    # which a viewport of 611 + 48 = 659 px has; viewports up to 658 px get the phone PNG
    assert renditions.breakpoint_px(desktop(1320, 7.0)) == 658
    # 8 pt text (800/72 px): a column of 534.6 px, a viewport of 535 + 48 px
    assert renditions.breakpoint_px(desktop(1320, 8.0)) == 582
    assert renditions.breakpoint_px(desktop(4000, 7.0)) == renditions.NARROW


def test_split_images_writes_the_phone_file_and_pages_get_a_picture(tmp_path, carried):
    images = tmp_path / "_images"
    images.mkdir()
    (images / "abc.png").write_bytes(carried)
    (images / "plain.png").write_bytes(renditions.split(carried)[0])
    found = renditions.split_images(images)
    assert set(found) == {"abc"}
    phone = (images / "abc.phone.png").read_bytes()
    assert (images / "abc.png").read_bytes() == renditions.split(carried)[0]
    breakpoint, w, h = found["abc"]
    assert (w, h) == tuple(v // figures.PIXEL_RATIO for v in figures.png_size(phone))
    assert renditions.split_images(images) == found  # a second run finds the same

    html = (
        '<p><img alt="A figure" src="../_images/abc.png" style="width: 671px; height: 271px;" />'
        '<img alt="plain" src="../_images/plain.png" style="width: 300px; height: 100px;" /></p>'
    )
    page = renditions.picture_html(html, found)
    assert page == (
        f'<p><picture><source media="(max-width: {breakpoint}px)" '
        f'srcset="../_images/abc.phone.png" width="{w}" height="{h}">'
        '<img alt="A figure" src="../_images/abc.png" style="width: 671px; height: 271px;" />'
        "</picture>"
        '<img alt="plain" src="../_images/plain.png" style="width: 300px; height: 100px;" /></p>'
    )
    assert renditions.picture_html(page, found) == page  # done once


def test_the_build_hook_rewrites_pages_but_not_the_theme(tmp_path, carried):
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "abc.png").write_bytes(carried)
    (tmp_path / "_static").mkdir()
    img = '<img src="_images/abc.png" style="width: 671px; height: 271px;" />'
    (tmp_path / "page.html").write_text(img)
    (tmp_path / "_static" / "t.html").write_text(img)
    app = types.SimpleNamespace(outdir=str(tmp_path), builder=types.SimpleNamespace(format="html"))
    renditions._build_finished(app, None)
    assert "<picture>" in (tmp_path / "page.html").read_text()
    assert (tmp_path / "_static" / "t.html").read_text() == img
    assert (tmp_path / "_images" / "abc.phone.png").exists()
