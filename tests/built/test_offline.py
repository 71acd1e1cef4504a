"""The built book loads nothing from other hosts, so a downloaded `_build/html` works offline.

Static checks of every built page and stylesheet, plus the vendored third-party files
(`_vendor/vendor.lock.json`, fetched by `_vendor/fetch.py`): integrity of the cached tarballs,
served bytes equal to the tarball contents, versions as pinned, and every file they load at
run time present. The CJK font subset (_static/cjk/, committed, cut by `make fonts` from the
font package's `build_inputs`) is small, from the pinned package and linked from every page.
Runs after the build (`make test` sets BOOK_BUILT=1, which turns a missing build into a
failure instead of a skip). Links (`<a href>`) to other sites are fine: nothing
loads them while reading.
"""

from __future__ import annotations

import hashlib
import html.parser
import importlib.util
import json
import os
import pathlib
import re
from urllib.parse import unquote, urlparse

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
SPHINX = CONFIG["sphinx"]["config"]

if not (HTML / "index.html").exists():
    if os.environ.get("BOOK_BUILT"):
        raise RuntimeError("BOOK_BUILT is set but _build/html/index.html is missing")
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)

_spec = importlib.util.spec_from_file_location("vendor_fetch", ROOT / "_vendor" / "fetch.py")
vendor = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(vendor)
PACKAGES = vendor.load_lock()

# Pages a reader opens; _static/ holds theme templates, not pages.
PAGES = sorted(p for p in HTML.rglob("*.html") if "_static" not in p.relative_to(HTML).parts)
STYLESHEETS = sorted(HTML.rglob("*.css"))
# <link rel=...> values that make the browser fetch or contact the target while reading.
LOADING_RELS = {
    "stylesheet",
    "preload",
    "modulepreload",
    "prefetch",
    "icon",
    "shortcut",
    "apple-touch-icon",
    "mask-icon",
    "manifest",
    "preconnect",
    "dns-prefetch",
    "prerender",
}
# Widget modules html-manager's embed-amd.js bundles, and anywidget, which the book serves
# itself (_vendor/anywidget, the `anywidget` require.js path of _config.yml); any other module
# the html-manager would fetch from a CDN.
BUNDLED_WIDGET_MODULES = {
    "@jupyter-widgets/base",
    "@jupyter-widgets/controls",
    "@jupyter-widgets/output",
    "anywidget",
}
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
CJK_DIR = HTML / "_static" / "cjk"
CJK_MANIFEST = CJK_DIR / "cjk-font.json"


class _Resources(html.parser.HTMLParser):
    """Every URL a page loads while it is read, and its widget-state and inline style blocks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.loads: list[tuple[str, str]] = []  # (tag description, url)
        self.widget_states: list[str] = []
        self.styles: list[str] = []
        self._capture: list | None = None

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        if tag == "script":
            if a.get("src"):
                self.loads.append(("script src", a["src"]))
            if a.get("type") == WIDGET_STATE:
                self._capture = self.widget_states
        elif tag == "link" and a.get("href"):
            if LOADING_RELS & set(a.get("rel", "").lower().split()):
                self.loads.append((f"link rel={a['rel']}", a["href"]))
        elif tag in {
            "img",
            "source",
            "iframe",
            "embed",
            "video",
            "audio",
            "track",
            "input",
        } and a.get("src"):
            self.loads.append((f"{tag} src", a["src"]))
        elif tag == "object" and a.get("data"):
            self.loads.append(("object data", a["data"]))
        elif tag == "style":
            self._capture = self.styles
        if tag in {"img", "source"} and a.get("srcset"):
            for candidate in a["srcset"].split(","):
                if candidate.strip():
                    self.loads.append((f"{tag} srcset", candidate.split()[0]))
        if tag == "video" and a.get("poster"):
            self.loads.append(("video poster", a["poster"]))
        if a.get("style"):
            self.loads += [("style attribute", u) for u in css_urls(a["style"])]

    def handle_data(self, data):
        if self._capture is not None:
            self._capture.append(data)

    def handle_endtag(self, tag):
        if tag in {"script", "style"}:
            self._capture = None


def parse(page: pathlib.Path) -> _Resources:
    parser = _Resources()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def css_urls(css: str) -> list[str]:
    """URLs a stylesheet loads: url(...) and @import "..." (comments removed)."""
    css = re.sub(r"/\*.*?\*/", "", css, flags=re.S)
    found = [m.strip().strip("'\"") for m in re.findall(r"url\(\s*([^)]*?)\s*\)", css)]
    found += re.findall(r"@import\s+['\"]([^'\"]+)['\"]", css)
    return [u for u in found if u]


def is_external(url: str) -> bool:
    parsed = urlparse(url)
    return bool(parsed.netloc) or parsed.scheme not in {"", "data"}


def local_target(base: pathlib.Path, url: str) -> pathlib.Path | None:
    """The file a local URL points at (None for data: URIs and bare fragments)."""
    parsed = urlparse(url)
    if parsed.scheme == "data" or not parsed.path:
        return None
    return (base.parent / unquote(parsed.path)).resolve()


def served(pkg: dict, name: str) -> pathlib.Path:
    return HTML / pkg["dest"] / name[len(vendor.PREFIX) :]


@pytest.fixture(scope="module")
def parsed_pages() -> dict[pathlib.Path, _Resources]:
    return {page: parse(page) for page in PAGES}


@pytest.fixture(scope="module")
def tarball_files() -> dict[str, dict[str, bytes]]:
    """package -> {path in tarball: bytes}, from the verified cached tarballs."""
    out = {}
    for pkg in PACKAGES:
        path = vendor.tarball_path(pkg)
        if not path.exists():
            if os.environ.get("BOOK_BUILT"):
                raise AssertionError(
                    f"{path} is missing although the book was built (`make book` fetches it)"
                )
            pytest.skip(f"{path.name} is not cached (run `python _vendor/fetch.py`)")
        out[pkg["package"]] = vendor.tar_members(
            path, pkg["files"] + [vendor.PREFIX + "package.json"]
        )
    return out


# (a) + (b): what pages load is local and exists ----------------------------------------------


def test_pages_were_found():
    assert len(PAGES) >= 5 and (HTML / "chapters").is_dir()


def test_every_resource_a_page_loads_is_local(parsed_pages):
    external = [
        f"{page.relative_to(HTML)}: {kind} {url}"
        for page, res in parsed_pages.items()
        for kind, url in res.loads
        if is_external(url)
    ]
    assert not external, "resources loaded from other hosts:\n" + "\n".join(external[:20])


def test_every_local_resource_a_page_loads_exists(parsed_pages):
    missing = []
    for page, res in parsed_pages.items():
        for kind, url in res.loads:
            if is_external(url):
                continue
            target = local_target(page, url)
            if target is None:
                continue
            if not target.is_file() or not target.is_relative_to(HTML.resolve()):
                missing.append(f"{page.relative_to(HTML)}: {kind} {url}")
    assert not missing, "local resources that are not in _build/html:\n" + "\n".join(missing[:20])


def test_inline_styles_load_nothing_external(parsed_pages):
    external = [
        f"{page.relative_to(HTML)}: {u}"
        for page, res in parsed_pages.items()
        for u in css_urls("\n".join(res.styles))
        if is_external(u)
    ]
    assert not external, external[:20]


def test_math_pages_load_the_vendored_mathjax(parsed_pages):
    mathjax = [pkg for pkg in PACKAGES if pkg["package"] == "mathjax"][0]
    expected = (HTML / mathjax["dest"] / "es5" / "tex-mml-chtml.js").resolve()
    math_pages = [
        p for p, res in parsed_pages.items() if any("tex-mml-chtml" in u for _, u in res.loads)
    ]
    assert len(math_pages) >= 3, "no page loads MathJax: is math still rendered?"
    for page in math_pages:
        srcs = [local_target(page, u) for _, u in parsed_pages[page].loads if "tex-mml-chtml" in u]
        assert srcs == [expected], f"{page.relative_to(HTML)} loads MathJax from {srcs}"


# (c): stylesheets ----------------------------------------------------------------------------


def test_stylesheets_were_found():
    assert any(p.name == "pydata-sphinx-theme.css" for p in STYLESHEETS)


def test_stylesheets_import_nothing_external():
    external = [
        f"{css.relative_to(HTML)}: {u}"
        for css in STYLESHEETS
        for u in css_urls(css.read_text(encoding="utf-8", errors="replace"))
        if is_external(u)
    ]
    assert not external, "stylesheets loading from other hosts:\n" + "\n".join(external[:20])


def test_stylesheet_fonts_and_images_exist():
    missing = []
    for css in STYLESHEETS:
        for u in css_urls(css.read_text(encoding="utf-8", errors="replace")):
            target = None if is_external(u) else local_target(css, u)
            if target is not None and not target.is_file():
                missing.append(f"{css.relative_to(HTML)}: {u}")
    assert not missing, missing[:20]


# (d) + (e): the vendored files -----------------------------------------------------------------


def test_lock_pins_exact_versions_with_sha512_integrity():
    for pkg in PACKAGES:
        assert re.fullmatch(r"\d+\.\d+\.\d+", pkg["version"]), pkg
        assert re.fullmatch(r"sha512-[A-Za-z0-9+/]{86}==", pkg["integrity"]), pkg
        assert pkg["dest"].startswith("_vendor/") and pkg["files"], pkg
    assert [p["package"] for p in PACKAGES] == [
        "requirejs",
        "@jupyter-widgets/html-manager",
        "anywidget",
        "mathjax",
        "@fontsource/noto-sans-sc",
    ]
    # only the font package has build inputs (not served), and it serves its licence
    assert [p["package"] for p in PACKAGES if p.get("build_inputs")] == ["@fontsource/noto-sans-sc"]
    font = PACKAGES[-1]
    assert font["files"] == ["package/LICENSE"] and font["license"] == "OFL-1.1"
    assert [p["version"] for p in PACKAGES if p["package"] == "mathjax"][0].startswith("3.")


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p["package"])
def test_cached_tarball_matches_the_lock(pkg, tarball_files):
    assert vendor.sri_sha512(vendor.tarball_path(pkg)) == pkg["integrity"]
    manifest = json.loads(tarball_files[pkg["package"]][vendor.PREFIX + "package.json"])
    assert (manifest["name"], manifest["version"]) == (pkg["package"], pkg["version"])


@pytest.mark.parametrize("pkg", PACKAGES, ids=lambda p: p["package"])
def test_served_files_are_the_tarball_files(pkg, tarball_files):
    differ = []
    for name in pkg["files"]:
        path = served(pkg, name)
        want = hashlib.sha256(tarball_files[pkg["package"]][name]).hexdigest()
        got = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "missing"
        if got != want:
            differ.append(f"{path.relative_to(HTML)}: {got[:12]} != tarball {want[:12]}")
    assert not differ, differ[:20]


def test_nothing_unpinned_is_served_under_vendor():
    pinned = {served(pkg, name) for pkg in PACKAGES for name in pkg["files"]}
    extra = [
        p.relative_to(HTML)
        for p in (HTML / "_vendor").rglob("*")
        if p.is_file() and p not in pinned
    ]
    assert not extra, extra[:20]


@pytest.mark.parametrize(
    "pkg",
    [p for p in PACKAGES if any(n.endswith(".js") for n in p["files"])],
    ids=lambda p: p["package"],
)
def test_served_entry_file_carries_the_pinned_version(pkg):
    entry = served(pkg, next(n for n in pkg["files"] if n.endswith(".js")))
    assert pkg["version"] in entry.read_text(encoding="utf-8", errors="replace")


def test_cjk_subset_is_small_comes_from_the_pinned_font_and_is_linked_from_every_page(parsed_pages):
    font = next(pkg for pkg in PACKAGES if pkg["package"] == "@fontsource/noto-sans-sc")
    manifest = json.loads(CJK_MANIFEST.read_text(encoding="utf-8"))
    assert (manifest["package"], manifest["version"]) == (font["package"], font["version"])
    assert manifest["count"] == len(manifest["characters"]) > 0 and manifest["fonts"]
    for name, info in manifest["fonts"].items():
        data = (CJK_DIR / name).read_bytes()
        assert data[:4] == b"wOF2" and len(data) == info["bytes"], name
        assert hashlib.sha256(data).hexdigest() == info["sha256"], name
    assert manifest["bytes"] < 500_000, (
        "the CJK subset should stay a small fraction of the 73 MB package"
    )
    # the package's own slices are never served whole
    assert not [p for p in HTML.rglob("noto-sans-sc-*-normal.*")]
    assert (CJK_DIR / "LICENSE").is_file()
    stylesheet = (CJK_DIR / "cjk.css").resolve()
    # every page but Jupyter Book's index.html, a bare <meta http-equiv="Refresh"> redirect
    unlinked = [
        page.relative_to(HTML)
        for page, res in parsed_pages.items()
        if stylesheet
        not in {local_target(page, u) for kind, u in res.loads if kind.startswith("link")}
        and "<body" in page.read_text(encoding="utf-8")
    ]
    assert not unlinked, unlinked[:20]
    # cjk.css puts its family in front of the theme's own stacks, which must still exist
    theme = (HTML / "_static" / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    for var in re.findall(r"var\((--pst-[a-z-]+)\)", stylesheet.read_text(encoding="utf-8")):
        assert f"{var}:" in theme, (
            f"cjk.css uses {var}, which pydata-sphinx-theme no longer defines"
        )


def test_vendored_files_are_outside_static_paths():
    """Jupyter Book adds every .js/.css under an html_static_path to every page."""
    static = HTML / "_static"
    names = {
        pathlib.PurePosixPath(n).name
        for pkg in PACKAGES
        for n in pkg["files"]
        if n.endswith((".js", ".css"))
    }
    assert not [p for p in static.rglob("*") if p.name in names]
    for folder in SPHINX.get("html_static_path", []):
        assert not (ROOT / folder).resolve().is_relative_to((ROOT / "_vendor").resolve()), folder
    assert SPHINX["html_extra_path"] == ["_vendor/site"]


def test_config_points_at_vendored_files():
    pinned = {served(pkg, name).resolve() for pkg in PACKAGES for name in pkg["files"]}
    # Sphinx and MyST-NB treat a relative asset path as relative to _static/
    paths = [SPHINX["mathjax_path"]] + [p for p in SPHINX["nb_ipywidgets_js"] if p]
    assert len(paths) == 3
    for path in paths:
        assert not is_external(path), path
        assert (HTML / "_static" / path).resolve() in pinned, path
    assert all(
        not is_external(v) for attrs in SPHINX["nb_ipywidgets_js"].values() for v in attrs.values()
    )
    assert "integrity" not in json.dumps(SPHINX["nb_ipywidgets_js"])


def test_mathjax_finds_its_fonts_and_tex_extensions():
    mathjax = [pkg for pkg in PACKAGES if pkg["package"] == "mathjax"][0]
    es5 = HTML / mathjax["dest"] / "es5"
    source = (es5 / "tex-mml-chtml.js").read_text(encoding="utf-8")
    fonts = set(re.findall(r"MathJax_[A-Za-z0-9]+-[A-Za-z]+\.woff", source))
    extensions = set(re.findall(r'"\[tex\]/([a-z0-9-]+)"', source))
    assert len(fonts) > 15 and len(extensions) > 25
    missing = [f for f in fonts if not (es5 / "output/chtml/fonts/woff-v2" / f).is_file()]
    missing += [e for e in extensions if not (es5 / "input/tex/extensions" / f"{e}.js").is_file()]
    assert not missing, missing


def test_widget_bundle_finds_its_icon_fonts():
    manager = [pkg for pkg in PACKAGES if pkg["package"] == "@jupyter-widgets/html-manager"][0]
    dist = HTML / manager["dest"] / "dist"
    source = (dist / "embed-amd.js").read_text(encoding="utf-8")
    fonts = set(re.findall(r"[0-9a-f]{20}\.(?:woff2|woff|ttf)", source))
    assert len(fonts) >= 6
    assert not [f for f in fonts if not (dist / f).is_file()]
    assert "__jupyter_widgets_assets_path__" in source  # the hook _config.yml sets


def test_anywidget_front_end_is_served_and_matches_the_python_package():
    """The html-manager loads anywidget's AMD module from the book (the lock's copy) and the
    explorers' ES modules come from the widget state; the Python package and the served front
    end must be the same release, or the saved model version would not match."""
    import anywidget

    (pkg,) = [p for p in PACKAGES if p["package"] == "anywidget"]
    assert pkg["version"] == anywidget.__version__
    served = (HTML / pkg["dest"] / "dist" / "index.js").read_text(encoding="utf-8")
    assert 'define(["@jupyter-widgets/base"]' in served  # AMD: require.js can load it
    assert "'anywidget': aw" in json.dumps(SPHINX["nb_ipywidgets_js"])


def test_widget_pages_use_only_bundled_widgets_and_local_loaders(parsed_pages):
    """A module outside embed-amd.js's bundle would be fetched from a CDN at read time."""
    for page, res in parsed_pages.items():
        loaders = [
            u for _, u in res.loads if u.split("?")[0].endswith(("require.js", "embed-amd.js"))
        ]
        if not res.widget_states:
            assert not loaders, f"{page.relative_to(HTML)} loads the widget scripts without widgets"
            continue
        assert len(loaders) == 2 and all("_vendor/" in u for u in loaders), (page, loaders)
        for block in res.widget_states:
            state = json.loads(block)["state"]
            for model_id, model in state.items():
                modules = {
                    model["model_module"],
                    model["state"].get("_view_module") or model["model_module"],
                }
                assert modules <= BUNDLED_WIDGET_MODULES, (
                    f"{page.relative_to(HTML)}: {model_id} needs {modules}"
                )
