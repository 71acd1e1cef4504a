"""Fixes to the pages Jupyter Book 1.x generates, so they load without console errors.

1. sphinx-thebe and sphinx-togglebutton add their inline configuration scripts twice per
   page in this Jupyter Book/Sphinx combination; the second ``const THEBE_JS_URL = ...`` is a
   SyntaxError ("Identifier 'THEBE_JS_URL' has already been declared"). Inline scripts with
   identical bodies are kept once.
2. pydata-sphinx-theme logs "Got invalid theme mode" when ``default_mode`` is empty, which is
   as it is here; the page template gets "auto" (follow the reader's system setting).
3. Sphinx copies ``_static/`` only when it writes at least one page, and its pages link each
   style sheet and script with a checksum (``posenc.css?v=...``). A change to the book's CSS or
   JavaScript alone was therefore never published by ``make book`` ("0 source files out of
   date"). When a file of ``_static/`` differs from its published copy, every page is written
   again (with the new checksums) and the folder is copied.
4. sphinx.ext.viewcode renders the source of the module that defines each documented object;
   for a constant that is a ``pathlib.Path`` that is the standard library. Only modules of
   posenc_core are followed (:func:`_viewcode_module`).
"""

from __future__ import annotations

import filecmp
import pathlib


def _page_context(app, pagename, templatename, context, doctree):
    if not context.get("default_mode"):
        context["default_mode"] = "auto"
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        body = getattr(script, "attributes", {}).get("body")
        key = ("body", body) if body else ("file", str(script))
        if body and key in seen:
            continue
        seen.add(key)
        kept.append(script)
    scripts[:] = kept


def static_changed(srcdir: pathlib.Path, outdir: pathlib.Path) -> list[str]:
    """Files of ``srcdir/_static`` whose published copy in ``outdir/_static`` is missing or
    different (an empty list when nothing was published yet: the first build writes all)."""
    source, published = srcdir / "_static", outdir / "_static"
    if not source.is_dir() or not published.is_dir():
        return []
    changed = []
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        copy = published / path.relative_to(source)
        if not copy.is_file() or not filecmp.cmp(path, copy, shallow=False):
            changed.append(path.relative_to(source).as_posix())
    return changed


def _outdated(app, env, added, changed, removed):
    if app.builder.format != "html":
        return []
    stale = static_changed(pathlib.Path(app.srcdir), pathlib.Path(app.outdir))
    if not stale:
        return []
    from sphinx.util import logging

    logging.getLogger(__name__).info(
        "_static changed (%s): every page is written again", ", ".join(stale[:3])
    )
    return sorted(env.found_docs)


def _viewcode_module(app, modname: str, attribute: str) -> str | None:
    """Where sphinx.ext.viewcode looks for an object's source: the module that defines it, but
    only inside posenc_core. A documented constant such as ``posenc_core.book.DATA`` is a
    ``pathlib.Path``, whose class lives in ``pathlib``; following it would publish the standard
    library's source (with file:/// examples) among the book's pages."""
    import importlib

    try:
        value = importlib.import_module(modname)
        for part in attribute.split("."):
            value = getattr(value, part)
        defined_in = getattr(value, "__module__", None)
    except Exception:  # noqa: BLE001 (an object viewcode cannot resolve: keep the documenting module)
        defined_in = None
    if isinstance(defined_in, str) and defined_in.startswith("posenc_core"):
        return defined_in
    return modname


def setup(app):
    app.connect("html-page-context", _page_context)
    app.connect("viewcode-follow-imported", _viewcode_module)
    app.connect("env-get-outdated", _outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
