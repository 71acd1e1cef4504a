"""Serve a subset of Noto Sans SC holding exactly the CJK characters the built pages use.

The chapters give Chinese terms beside the English ones; a browser without a CJK font draws
them as empty boxes. After a successful HTML build this extension

1. collects every CJK character in the output pages (every .html under the output folder but
   _static/): text, attribute values (alt, title, ...), and the strings of saved widget state
   (JSON whose \\uXXXX escapes are decoded: widget labels are rendered into the page);
2. reads the 400 and 700 weight .woff slices of @fontsource/noto-sans-sc from the cached
   tarball, verified against _vendor/vendor.lock.json by _vendor/fetch.py (its `build_inputs`);
   a character no slice holds fails the build (CJKFontError);
3. subsets the slices that hold them (fontTools.subset) and merges them into one .woff per
   weight (fontTools.merge), checking every glyph outline and advance against its slice; the
   head timestamps are the source's, so the same pages give the same bytes;
4. writes _vendor/cjk/ in the output folder: the fonts, cjk.css (@font-face with the exact
   unicode-range, font-display: swap, and the family put first in pydata-sphinx-theme's body,
   heading and monospace font stacks), cjk-font.json (the characters and files, read by
   the tests) and the OFL LICENSE from the tarball (also served there by fetch.py).

Every page links cjk.css. It is written after the pages, so it is removed when the build starts:
Sphinx then adds no ``?v=`` checksum of a previous build's stylesheet to the pages it writes.

For development, on an existing build (``--link`` also adds the stylesheet link to pages
built without this extension):

    python _ext/cjk_font.py _build/html [--link]
"""

from __future__ import annotations

import argparse
import hashlib
import html.parser
import importlib.util
import io
import json
import pathlib
import posixpath
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
FETCH = ROOT / "_vendor" / "fetch.py"
PACKAGE = "@fontsource/noto-sans-sc"
WEIGHTS = (400, 700)  # body text; bold (<strong>, glossary terms, index entries)
SLICE = re.compile(r"package/files/noto-sans-sc-(\d+)-(\d+)-normal\.woff")
OUT = "_vendor/cjk"  # inside the output folder, beside the LICENSE fetch.py serves
CSS = "cjk.css"
MANIFEST = "cjk-font.json"
FAMILY = "Posenc Noto Sans SC"  # the CSS family; the font files keep their own name table
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# CJK blocks: radicals, symbols and punctuation, kana, bopomofo, strokes, extension A, unified
# ideographs, compatibility ideographs, compatibility forms, half/fullwidth forms, extensions B-H.
CJK_BLOCKS = (
    (0x2E80, 0x2FDF),
    (0x3000, 0x303F),
    (0x3040, 0x30FF),
    (0x3100, 0x312F),
    (0x31A0, 0x31EF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0xFE30, 0xFE4F),
    (0xFF00, 0xFFEF),
    (0x20000, 0x323AF),
)


# literal characters, so that the pattern also works as a JavaScript RegExp with the u flag
CJK_RE = re.compile("[" + "".join(f"{chr(lo)}-{chr(hi)}" for lo, hi in CJK_BLOCKS) + "]")


def is_cjk(ch: str) -> bool:
    return CJK_RE.fullmatch(ch) is not None


try:
    from sphinx.errors import SphinxError
except ImportError:  # the CLI works without Sphinx
    SphinxError = Exception  # type: ignore[misc,assignment]


class CJKFontError(SphinxError):
    category = "CJK font error"


# 1. characters -------------------------------------------------------------------------------


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


class _Collector(html.parser.HTMLParser):
    """CJK characters of one page, each with the first bit of text it was found in."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: dict[str, str] = {}
        self._widget_state: list[str] | None = None

    def _add(self, text: str, where: str):
        for m in CJK_RE.finditer(text):
            if m.group() not in self.found:
                i = m.start()
                self.found[m.group()] = f"{where}: {text[max(0, i - 30) : i + 30].strip()!r}"

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if value:
                self._add(value, f"<{tag} {key}=...>")
        if tag == "script" and dict(attrs).get("type") == WIDGET_STATE:
            self._widget_state = []

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        if self._widget_state is not None:
            self._widget_state.append(data)
        else:
            self._add(data, "text")

    def handle_endtag(self, tag):
        if tag == "script" and self._widget_state is not None:
            source = "".join(self._widget_state)
            self._widget_state = None
            self._add(source, "widget state")
            try:
                state = json.loads(source)
            except ValueError as err:
                raise CJKFontError(f"a widget-state block is not JSON ({err})") from None
            for text in _strings(state):
                self._add(text, "widget state")


def cjk_in_html(text: str) -> dict[str, str]:
    """{character: where it first occurs} for the CJK characters of one HTML page."""
    collector = _Collector()
    collector.feed(text)
    collector.close()
    return collector.found


def book_pages(html_dir: pathlib.Path) -> list[pathlib.Path]:
    return sorted(
        p for p in html_dir.rglob("*.html") if "_static" not in p.relative_to(html_dir).parts
    )


def collect(html_dir: pathlib.Path) -> dict[str, dict[str, str]]:
    """{character: {page: where}} over every page of a built book."""
    used: dict[str, dict[str, str]] = {}
    for page in book_pages(html_dir):
        rel = page.relative_to(html_dir).as_posix()
        for ch, where in cjk_in_html(page.read_text(encoding="utf-8")).items():
            used.setdefault(ch, {})[rel] = where
    return dict(sorted(used.items()))


# 2. the verified font slices -----------------------------------------------------------------


def _vendor():
    spec = importlib.util.spec_from_file_location("vendor_fetch", FETCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def font_package() -> tuple[dict, dict[str, bytes]]:
    """The lock entry and {path in tarball: bytes} of its slices and LICENSE (verified tarball)."""
    vendor = _vendor()
    try:
        pkg = next(p for p in vendor.load_lock() if p["package"] == PACKAGE)
        files = vendor.build_inputs(pkg, download=False)
        files.update(
            vendor.tar_members(vendor.verified_tarball(pkg, download=False), ["package/LICENSE"])
        )
    except StopIteration:
        raise CJKFontError(f"{PACKAGE} is not in {vendor.LOCK}") from None
    except vendor.VendorError as err:
        raise CJKFontError(f"{err} (`python _vendor/fetch.py` fetches and verifies it)") from None
    return pkg, files


def slices_by_weight(files: dict[str, bytes]) -> dict[int, dict[str, tuple[bytes, set[int]]]]:
    """weight -> {slice path: (woff bytes, code points of its cmap)}."""
    from fontTools.ttLib import TTFont

    out: dict[int, dict[str, tuple[bytes, set[int]]]] = {w: {} for w in WEIGHTS}
    for name, data in sorted(files.items()):
        m = SLICE.fullmatch(name)
        if m and int(m.group(2)) in out:
            cmap = TTFont(io.BytesIO(data), lazy=True).getBestCmap()
            out[int(m.group(2))][name] = (data, set(cmap))
    for weight, slices in out.items():
        if not slices:
            raise CJKFontError(f"{PACKAGE} has no {weight} weight .woff slices")
    return out


def check_coverage(
    used: dict[str, dict[str, str]], slices: dict[str, tuple[bytes, set[int]]], weight: int
):
    covered = set().union(*(cps for _, cps in slices.values()))
    missing = [ch for ch in used if ord(ch) not in covered]
    if missing:
        lines = [
            f"U+{ord(ch):04X} {ch} in {page} ({where})"
            for ch in missing
            for page, where in sorted(used[ch].items())
        ]
        raise CJKFontError(
            f"{len(missing)} CJK character(s) used in the pages are not in {PACKAGE} "
            f"(weight {weight}); readers would see empty boxes:\n  " + "\n  ".join(lines)
        )


# 3. subset and merge -------------------------------------------------------------------------


def subset_font(
    chars: list[str], slices: dict[str, tuple[bytes, set[int]]]
) -> tuple[bytes, list[str], str]:
    """One .woff holding `chars` (all covered by `slices`): (bytes, slices used, family name)."""
    from fontTools import merge, subset
    from fontTools.pens.recordingPen import RecordingPen
    from fontTools.ttLib import TTFont

    wanted: dict[str, list[int]] = {}
    for ch in chars:
        name = min(n for n, (_, cps) in slices.items() if ord(ch) in cps)  # first slice holding it
        wanted.setdefault(name, []).append(ord(ch))
    parts, sources = [], {}
    for name in sorted(wanted, key=lambda n: int(SLICE.fullmatch(n).group(1))):
        font = TTFont(io.BytesIO(slices[name][0]))
        options = subset.Options()
        options.layout_features = []  # ideographs need no shaping; GSUB/GPOS dropped below
        options.drop_tables += ["GSUB", "GPOS", "GDEF", "STAT", "vhea", "vmtx", "gasp", "DSIG"]
        options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]  # copyright, names, version, licence
        options.recalc_timestamp = False
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=wanted[name])
        subsetter.subset(font)
        font.flavor = None
        buf = io.BytesIO()
        font.save(buf)
        buf.seek(0)
        parts.append(buf)
        sources.update({cp: name for cp in wanted[name]})
    first = TTFont(io.BytesIO(slices[min(wanted)][0]))
    merged = merge.Merger().merge(parts) if len(parts) > 1 else TTFont(parts[0])
    # keep the source's dates and code pages (Merger stamps the time and intersects code pages)
    merged.recalcTimestamp = False
    merged["head"].created, merged["head"].modified = first["head"].created, first["head"].modified
    merged["OS/2"].ulCodePageRange1 = first["OS/2"].ulCodePageRange1
    merged["OS/2"].ulCodePageRange2 = first["OS/2"].ulCodePageRange2
    merged.flavor = "woff"
    out = io.BytesIO()
    merged.save(out)
    data = out.getvalue()

    # the merged font draws every character exactly as its slice does
    check = TTFont(io.BytesIO(data))
    cmap, glyphs = check.getBestCmap(), check.getGlyphSet()
    if sorted(cmap) != sorted(ord(ch) for ch in chars):
        raise CJKFontError(
            f"the subset maps {len(cmap)} characters, not the {len(chars)} asked for"
        )
    cache: dict[str, TTFont] = {}
    for cp, name in sources.items():
        src = cache.setdefault(name, TTFont(io.BytesIO(slices[name][0])))
        a, b = RecordingPen(), RecordingPen()
        glyphs[cmap[cp]].draw(a)
        src.getGlyphSet()[src.getBestCmap()[cp]].draw(b)
        if (
            a.value != b.value
            or glyphs[cmap[cp]].width != src.getGlyphSet()[src.getBestCmap()[cp]].width
        ):
            raise CJKFontError(f"merging the slices changed the glyph of U+{cp:04X} {chr(cp)}")
    family = check["name"].getDebugName(1)
    return data, sorted(wanted), family


# 4. the files --------------------------------------------------------------------------------


def unicode_range(chars: list[str]) -> str:
    """CSS unicode-range of the code points, consecutive ones as ranges (U+4e00-4e01)."""
    cps = sorted(ord(c) for c in chars)
    runs: list[list[int]] = []
    for cp in cps:
        if runs and cp == runs[-1][1] + 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return ", ".join(f"U+{a:x}" if a == b else f"U+{a:x}-{b:x}" for a, b in runs)


def stylesheet(chars: list[str], fonts: dict[int, str], pkg: dict) -> str:
    faces = "".join(
        f"""
@font-face {{
  font-family: "{FAMILY}";
  font-style: normal;
  font-weight: {weight};
  font-display: swap;
  src: url("{name}") format("woff");
  unicode-range: {unicode_range(chars)};
}}
"""
        for weight, name in fonts.items()
    )
    # html:root outranks the theme's :root / html rules whatever the order of the stylesheets
    return f"""/* Generated by _ext/cjk_font.py: the {len(chars)} CJK characters the pages use, from
   {pkg["package"]}@{pkg["version"]} (Noto Sans SC, {pkg["license"]}:
   see LICENSE beside this file). */
{faces}
html:root {{
  --pst-font-family-base: "{FAMILY}", var(--pst-font-family-base-system);
  --pst-font-family-heading: "{FAMILY}", var(--pst-font-family-base-system);
  --pst-font-family-monospace: "{FAMILY}", var(--pst-font-family-monospace-system);
}}
"""


def build(html_dir: pathlib.Path) -> dict:
    """Collect, subset and write html_dir/_vendor/cjk/; return the manifest."""
    html_dir = pathlib.Path(html_dir)
    used = collect(html_dir)
    chars = list(used)
    pkg, files = font_package()
    by_weight = slices_by_weight(files)
    for weight, slices in by_weight.items():
        check_coverage(used, slices, weight)
    out = html_dir / OUT
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, bytes] = {"LICENSE": files["package/LICENSE"]}
    manifest: dict = {
        "package": pkg["package"],
        "version": pkg["version"],
        "license": pkg["license"],
        "css_family": FAMILY,
        "characters": "".join(chars),
        "count": len(chars),
        "pages": sorted({page for pages in used.values() for page in pages}),
        "fonts": {},
    }
    fonts: dict[int, str] = {}
    if chars:
        for weight, slices in by_weight.items():
            data, used_slices, family = subset_font(chars, slices)
            name = f"noto-sans-sc-subset-{weight}.woff"
            written[name] = data
            fonts[weight] = name
            manifest["font_family"] = family
            manifest["fonts"][name] = {
                "weight": weight,
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
                "slices": [posixpath.basename(s) for s in used_slices],
            }
    manifest["bytes"] = sum(f["bytes"] for f in manifest["fonts"].values())
    written[CSS] = (
        stylesheet(chars, fonts, pkg).encode("utf-8") if chars else b"/* no CJK characters */\n"
    )
    written[MANIFEST] = (json.dumps(manifest, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    for old in out.glob("noto-sans-sc-subset-*.woff"):
        if old.name not in written:
            old.unlink()
    for name, data in written.items():
        path = out / name
        if not (path.is_file() and path.read_bytes() == data):
            path.write_bytes(data)
    return manifest


def summary(manifest: dict) -> str:
    slices = sorted({s for f in manifest["fonts"].values() for s in f["slices"]})
    return (
        f"cjk_font: {manifest['count']} CJK characters on {len(manifest['pages'])} pages; "
        f"{manifest['bytes']} bytes of font ({len(manifest['fonts'])} weights, "
        f"{len(slices)} slices of {manifest['package']}@{manifest['version']}) in {OUT}/"
    )


# Sphinx --------------------------------------------------------------------------------------

HTML_BUILDERS = {"html", "dirhtml"}


def _builder_inited(app):
    if app.builder.name in HTML_BUILDERS:
        stale = pathlib.Path(app.outdir) / OUT / CSS
        if stale.is_file():
            stale.unlink()


def _build_finished(app, exception):
    if exception is not None or app.builder.name not in HTML_BUILDERS:
        return
    from sphinx.util import logging

    manifest = build(pathlib.Path(app.outdir))
    logging.getLogger(__name__).info(summary(manifest))


def setup(app):
    # relative to _static/, so it resolves from every page depth (../_static/../_vendor/cjk/...)
    app.add_css_file(f"../{OUT}/{CSS}")
    app.connect("builder-inited", _builder_inited)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# CLI -----------------------------------------------------------------------------------------


def link_pages(html_dir: pathlib.Path) -> int:
    """Add the stylesheet link to pages that lack it (builds made without this extension)."""
    changed = 0
    for page in book_pages(html_dir):
        text = page.read_text(encoding="utf-8")
        if f"{OUT}/{CSS}" in text or "</head>" not in text:
            continue
        href = posixpath.relpath(
            f"{OUT}/{CSS}", posixpath.dirname(page.relative_to(html_dir).as_posix()) or "."
        )
        text = text.replace(
            "</head>", f'  <link rel="stylesheet" type="text/css" href="{href}" />\n</head>', 1
        )
        page.write_text(text, encoding="utf-8")
        changed += 1
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("html_dir", type=pathlib.Path, help="a built book, e.g. _build/html")
    parser.add_argument(
        "--link", action="store_true", help="also link cjk.css from pages that lack it"
    )
    args = parser.parse_args(argv)
    try:
        manifest = build(args.html_dir)
    except CJKFontError as err:
        print(f"cjk_font: ERROR: {err}", file=sys.stderr)
        return 1
    print(summary(manifest))
    if args.link:
        print(f"cjk_font: linked the stylesheet from {link_pages(args.html_dir)} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
