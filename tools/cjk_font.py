"""Cut the book's CJK font: a subset of Noto Sans SC holding every CJK character the book shows.

The chapters give Chinese terms beside the English ones; a browser without a CJK font draws
them as empty boxes. ``make fonts`` runs this script, which

1. collects the CJK characters of the book's sources (:func:`book_characters`): the pages of
   _toc.yml (markdown, and every cell of a notebook, outputs included when saved), the
   bibliography (references.bib), and posenc_core's .py, .js and .css files (the API page and
   its rendered source show their docstrings and comments; the explorers' saved widget state
   carries the .js and .css);
2. reads the 400 and 700 weight .woff slices of @fontsource/noto-sans-sc from the cached npm
   tarball, verified against _vendor/vendor.lock.json by _vendor/fetch.py (`build_inputs`);
   a character no slice holds is an error (readers would see an empty box);
3. subsets the slices that hold them (fontTools.subset) and merges them into one font per
   weight (fontTools.merge); the head timestamps are the source's, so the same characters give
   the same bytes;
4. writes _static/cjk/ (committed): the two .woff2 files, cjk.css (@font-face with the exact
   unicode-range, font-display: swap, and the family put first in pydata-sphinx-theme's body,
   heading and monospace font stacks; Jupyter Book links every .css under _static from every
   page), cjk-font.json (the characters, the source tarball and the files, read by the tests)
   and the font's OFL licence from the tarball.

tests/tooling/test_cjk_subset.py fails when a source gains a CJK character the committed font
lacks (run ``make fonts``) and checks the glyphs against the pinned tarball;
tests/built/test_cjk_font.py checks in a browser that the built pages draw every one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "_static" / "cjk"
PACKAGE = "@fontsource/noto-sans-sc"
WEIGHTS = (400, 700)  # body text; bold (<strong>, glossary terms, index entries)
SLICE = re.compile(r"package/files/noto-sans-sc-(\d+)-(\d+)-normal\.woff")
CSS = "cjk.css"
MANIFEST = "cjk-font.json"
FAMILY = "Posenc Noto Sans SC"  # the CSS family; the font files keep their own name table
# Besides the pages of _toc.yml: the bibliography's entries and what the API page, the rendered
# source (sphinx.ext.viewcode) and the explorers' widget state show of the package.
EXTRA_SOURCES = ("references.bib",)
PACKAGE_SOURCES = ("posenc_core", (".py", ".js", ".css"))

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


class CJKFontError(Exception):
    pass


# 1. characters -------------------------------------------------------------------------------


def book_sources(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """The files whose text the built book shows: the pages of _toc.yml, EXTRA_SOURCES and the
    package's .py, .js and .css files (a page _toc.yml names but that does not exist is left to
    the build, which fails on it)."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    names: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if isinstance(node.get(key), str):
                    names.append(node[key])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(toc)
    found = []
    for name in names:
        for suffix in (".md", ".ipynb"):
            if (root / (name + suffix)).is_file():
                found.append(root / (name + suffix))
                break
    found += [root / name for name in EXTRA_SOURCES if (root / name).is_file()]
    folder, suffixes = PACKAGE_SOURCES
    found += sorted(p for p in (root / folder).rglob("*") if p.suffix in suffixes and p.is_file())
    return found


def _notebook_text(path: pathlib.Path) -> str:
    """Every cell's source and saved text outputs (JSON escapes decoded)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    parts = []
    for cell in nb.get("cells", []):
        parts.append("".join(cell.get("source", [])))
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", [])))
            for value in output.get("data", {}).values():
                parts.append(value if isinstance(value, str) else "".join(map(str, value)))
    return "\n".join(parts)


def book_characters(root: pathlib.Path = ROOT) -> dict[str, str]:
    """{CJK character: the first source file (relative to root) that has it}, sorted."""
    found: dict[str, str] = {}
    for path in book_sources(root):
        text = _notebook_text(path) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
        for ch in CJK_RE.findall(text):
            found.setdefault(ch, path.relative_to(root).as_posix())
    return dict(sorted(found.items()))


# 2. the verified font slices -----------------------------------------------------------------


def _vendor():
    spec = importlib.util.spec_from_file_location("vendor_fetch", ROOT / "_vendor" / "fetch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def font_package() -> tuple[dict, str, dict[str, bytes]]:
    """The lock entry, the tarball's SHA-256 and {path in tarball: bytes} of its slices and
    LICENSE, read from the verified cached tarball."""
    vendor = _vendor()
    try:
        pkg = next(p for p in vendor.load_lock() if p["package"] == PACKAGE)
        files = vendor.build_inputs(pkg, download=False)
        tarball = vendor.verified_tarball(pkg, download=False)
        files.update(vendor.tar_members(tarball, ["package/LICENSE"]))
    except StopIteration:
        raise CJKFontError(f"{PACKAGE} is not in {vendor.LOCK}") from None
    except vendor.VendorError as err:
        raise CJKFontError(f"{err} (`python _vendor/fetch.py` fetches and verifies it)") from None
    return pkg, hashlib.sha256(tarball.read_bytes()).hexdigest(), files


def slices_by_weight(files: dict[str, bytes]) -> dict[int, dict[str, tuple[bytes, set[int]]]]:
    """weight -> {slice path: (woff bytes, code points of its cmap)}."""
    from fontTools.ttLib import TTFont

    out: dict[int, dict[str, tuple[bytes, set[int]]]] = {w: {} for w in WEIGHTS}
    for name, data in sorted(files.items()):
        m = SLICE.fullmatch(name)
        if m and int(m.group(2)) in out:
            out[int(m.group(2))][name] = (data, set(TTFont(io.BytesIO(data)).getBestCmap()))
    for weight, slices in out.items():
        if not slices:
            raise CJKFontError(f"{PACKAGE} has no {weight} weight .woff slices")
    return out


def slice_for(cp: int, slices: dict[str, tuple[bytes, set[int]]]) -> str:
    """The slice a character is cut from: the lowest-numbered one holding it."""
    holding = [n for n, (_, cps) in slices.items() if cp in cps]
    return min(holding, key=lambda n: int(SLICE.fullmatch(n).group(1)))


def check_coverage(used: dict[str, str], slices: dict[str, tuple[bytes, set[int]]], weight: int):
    covered = set().union(*(cps for _, cps in slices.values()))
    missing = [
        f"U+{ord(ch):04X} {ch} in {where}" for ch, where in used.items() if ord(ch) not in covered
    ]
    if missing:
        raise CJKFontError(
            f"{len(missing)} CJK character(s) of the book are not in {PACKAGE} (weight {weight}); "
            "readers would see empty boxes:\n  " + "\n  ".join(missing)
        )


# 3. subset and merge -------------------------------------------------------------------------


def same_glyph(font, cp: int, source) -> bool:
    """Whether ``font`` draws code point ``cp`` exactly as ``source`` does (outline, advance)."""
    from fontTools.pens.recordingPen import RecordingPen

    drawn = []
    for f in (font, source):
        glyph = f.getGlyphSet()[f.getBestCmap()[cp]]
        pen = RecordingPen()
        glyph.draw(pen)
        drawn.append((pen.value, glyph.width))
    return drawn[0] == drawn[1]


def subset_font(
    chars: list[str], slices: dict[str, tuple[bytes, set[int]]]
) -> tuple[bytes, list[str]]:
    """One .woff2 holding ``chars`` (all covered by ``slices``): (bytes, slices used)."""
    from fontTools import merge, subset
    from fontTools.ttLib import TTFont

    wanted: dict[str, list[int]] = {}
    for ch in chars:
        wanted.setdefault(slice_for(ord(ch), slices), []).append(ord(ch))
    order = sorted(wanted, key=lambda n: int(SLICE.fullmatch(n).group(1)))
    parts = []
    for name in order:
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
    first = TTFont(io.BytesIO(slices[order[0]][0]))
    merged = merge.Merger().merge(parts) if len(parts) > 1 else TTFont(parts[0])
    # keep the source's dates and code pages (Merger stamps the time and intersects code pages)
    merged.recalcTimestamp = False
    merged["head"].created, merged["head"].modified = first["head"].created, first["head"].modified
    merged["OS/2"].ulCodePageRange1 = first["OS/2"].ulCodePageRange1
    merged["OS/2"].ulCodePageRange2 = first["OS/2"].ulCodePageRange2
    merged.flavor = "woff2"
    out = io.BytesIO()
    merged.save(out)
    data = out.getvalue()

    cmap = TTFont(io.BytesIO(data)).getBestCmap()
    if sorted(cmap) != sorted(ord(ch) for ch in chars):
        raise CJKFontError(f"the subset maps {len(cmap)} characters, not {len(chars)}")
    # each glyph is its slice's: tests/tooling/test_cjk_subset.py compares them with same_glyph
    return data, order


# 4. the files --------------------------------------------------------------------------------


def unicode_range(chars: list[str]) -> str:
    """CSS unicode-range of the code points, consecutive ones as ranges (U+4e00-4e01)."""
    runs: list[list[int]] = []
    for cp in sorted(ord(c) for c in chars):
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
  src: url("{name}") format("woff2");
  unicode-range: {unicode_range(chars)};
}}
"""
        for weight, name in fonts.items()
    )
    # html:root outranks the theme's :root / html rules whatever the order of the stylesheets
    return f"""/* Written by `make fonts` (tools/cjk_font.py): the {len(chars)} CJK characters
   of the book, from {pkg["package"]}@{pkg["version"]} (Noto Sans SC, {pkg["license"]}: see LICENSE
   beside this file). */
{faces}
html:root {{
  --pst-font-family-base: "{FAMILY}", var(--pst-font-family-base-system);
  --pst-font-family-heading: "{FAMILY}", var(--pst-font-family-base-system);
  --pst-font-family-monospace: "{FAMILY}", var(--pst-font-family-monospace-system);
}}
"""


def build(root: pathlib.Path = ROOT, out: pathlib.Path = OUT) -> dict:
    """Collect, subset and write ``out``; return the manifest."""
    used = book_characters(root)
    if not used:
        raise CJKFontError("the book's sources have no CJK character")
    chars = list(used)
    pkg, tarball_sha256, files = font_package()
    by_weight = slices_by_weight(files)
    for weight, slices in by_weight.items():
        check_coverage(used, slices, weight)
    written: dict[str, bytes] = {"LICENSE": files["package/LICENSE"]}
    manifest: dict = {
        "package": pkg["package"],
        "version": pkg["version"],
        "integrity": pkg["integrity"],
        "tarball_sha256": tarball_sha256,
        "license": pkg["license"],
        "css_family": FAMILY,
        "characters": "".join(chars),
        "count": len(chars),
        "fonts": {},
    }
    fonts: dict[int, str] = {}
    for weight, slices in by_weight.items():
        data, used_slices = subset_font(chars, slices)
        name = f"noto-sans-sc-subset-{weight}.woff2"
        written[name] = data
        fonts[weight] = name
        manifest["fonts"][name] = {
            "weight": weight,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "slices": [pathlib.PurePosixPath(s).name for s in used_slices],
        }
    manifest["bytes"] = sum(f["bytes"] for f in manifest["fonts"].values())
    written[CSS] = stylesheet(chars, fonts, pkg).encode("utf-8")
    written[MANIFEST] = (json.dumps(manifest, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.iterdir():
        if old.name not in written:
            old.unlink()
    for name, data in written.items():
        path = out / name
        if not (path.is_file() and path.read_bytes() == data):
            path.write_bytes(data)
    return manifest


def main() -> int:
    try:
        manifest = build()
    except CJKFontError as err:
        print(f"make fonts: ERROR: {err}", file=sys.stderr)
        return 1
    print(
        f"{OUT.relative_to(ROOT)}: {manifest['count']} CJK characters, {manifest['bytes']} "
        f"bytes of font ({len(manifest['fonts'])} weights) from "
        f"{manifest['package']}@{manifest['version']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
