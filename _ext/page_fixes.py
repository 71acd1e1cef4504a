"""Fixes to the pages Jupyter Book 1.x generates, so they load without console errors.

1. sphinx-thebe and sphinx-togglebutton add their inline configuration scripts twice per
   page in this Jupyter Book/Sphinx combination; the second ``const THEBE_JS_URL = ...`` is a
   SyntaxError ("Identifier 'THEBE_JS_URL' has already been declared"). Inline scripts with
   identical bodies are kept once.
2. pydata-sphinx-theme logs "Got invalid theme mode" when ``default_mode`` is empty, which is
   as it is here; the page template gets "auto" (follow the reader's system setting).
3. sphinx.ext.viewcode renders the source of the module that defines each documented object;
   for a constant that is a ``pathlib.Path`` that is the standard library. Only modules of
   posenc_core are followed (:func:`_viewcode_module`).
"""

from __future__ import annotations


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
    return {"parallel_read_safe": True, "parallel_write_safe": True}
