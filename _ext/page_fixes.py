"""Two fixes to the pages Jupyter Book 1.x generates, so they load without console errors.

1. sphinx-thebe and sphinx-togglebutton add their inline configuration scripts twice per
   page in this Jupyter Book/Sphinx combination; the second ``const THEBE_JS_URL = ...`` is a
   SyntaxError ("Identifier 'THEBE_JS_URL' has already been declared"). Inline scripts with
   identical bodies are kept once.
2. pydata-sphinx-theme logs "Got invalid theme mode" when ``default_mode`` is empty, which is
   as it is here; the page template gets "auto" (follow the reader's system setting).
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


def setup(app):
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
