"""Two workarounds for bugs of the Sphinx that Jupyter Book 1 requires (sphinx~=7.0).

1. Inline scripts added twice. sphinx-thebe and sphinx-togglebutton add their inline
   configuration scripts with ``app.add_js_file(None, body=...)`` after the builder is set
   up; Sphinx 7 compares the builder's copy (filename ``''``) with the registry's (``None``)
   and writes both, so every page declares ``const THEBE_JS_URL`` twice, a SyntaxError in the
   console. Upstream: sphinx-doc/sphinx#13402 (merged March 2025, after the 7.x series).
   Scripts with identical bodies are kept once. Delete when the book builds with a Sphinx
   that has the fix (Jupyter Book 1.0.4 pins sphinx~=7.0).
2. viewcode following a constant's class. sphinx.ext.viewcode takes the module of a
   documented object from its ``__module__``, which for a value such as the
   ``pathlib.Path`` constant ``posenc_core.book.DATA`` is its class's, so the standard
   library's source (with file:/// examples) would be published among the book's pages.
   Upstream: sphinx-doc/sphinx#11279 (open: viewcode reads ``__module__`` of attributes that
   are not definitions). Only modules of posenc_core are followed (:func:`_viewcode_module`).
   Delete when that issue is fixed in the Sphinx the book uses, or when no documented
   constant holds an instance of a class from outside posenc_core.

The theme's light/dark default is configuration (``html_context: default_mode`` in
_config.yml), not code.
"""

from __future__ import annotations


def _page_context(app, pagename, templatename, context, doctree):
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
