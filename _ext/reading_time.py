"""Reading times computed from the pages themselves.

The role ``{reading-minutes}`target`` is replaced by a number of minutes. ``target`` is a
document (written as for ``{doc}``: relative to the current page, or absolute from the book's
root with a leading ``/``), optionally followed by ``#label`` for one section (a MyST target
``(label)=`` above a heading); several targets separated by commas are added up, so a reading
path of three sections gets its total.

The count: words of prose (paragraphs, lists, tables, admonitions, captions; not code,
not cell outputs, not formulas) at 200 words a minute, a rate for careful reading of technical
text, plus half a minute for each visible code cell (reading it and its output) and each
figure. The result is rounded to the nearest minute (at least 1). The numbers come from the
build, so they follow the text as it changes.

Not a workaround but a feature no maintained extension provides: MyST-Parser's
``{sub-ref}`wordcount-minutes``` (executablebooks/meta#96) gives only the current page's own
count, while the introduction quotes reading paths made of sections of several chapters.
Delete if the book stops quoting reading times for other pages and sections (each chapter's
own time could then be MyST's ``wordcount-minutes``).
"""

from __future__ import annotations

import math
import posixpath
import re

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxRole

WORDS_PER_MINUTE = 200
MINUTES_PER_BLOCK = 0.5  # a visible code cell with its output, or a figure
_WORD = re.compile(r"[^\W\d_][\w'’-]*|\d[\d,.]*", re.UNICODE)
_log = logging.getLogger(__name__)


class reading_minutes(nodes.Inline, nodes.TextElement):  # noqa: N801 (docutils node naming)
    """Placeholder, replaced by the number once every page has been read."""


def _is_code_cell(node) -> bool:
    return isinstance(node, nodes.container) and "cell" in node.get("classes", [])


def _skip(node) -> bool:
    return isinstance(node, (nodes.literal_block, nodes.math, nodes.math_block, nodes.raw)) or (
        isinstance(node, nodes.container)
        and {"cell_input", "cell_output"} & set(node.get("classes", []))
    )


def measure(node) -> dict:
    """``{"words": prose words, "blocks": visible code cells and figures}`` under ``node``."""
    words = blocks = 0
    stack = [node]
    while stack:
        here = stack.pop()
        if _is_code_cell(here):
            tags = here.get("classes", [])
            if "tag_remove-cell" not in tags and "tag_remove-input" not in tags:
                blocks += 1
        if isinstance(here, nodes.figure) or (
            isinstance(here, nodes.image) and not isinstance(here.parent, nodes.figure)
        ):
            blocks += 1
        if _skip(here):
            continue
        if isinstance(here, nodes.Text):
            words += len(_WORD.findall(here.astext()))
            continue
        stack.extend(here.children)
    return {"words": words, "blocks": blocks}


def minutes(counts: list[dict]) -> int:
    words = sum(c["words"] for c in counts)
    blocks = sum(c["blocks"] for c in counts)
    return max(1, math.floor(words / WORDS_PER_MINUTE + blocks * MINUTES_PER_BLOCK + 0.5))


def resolve_targets(text: str, docname: str) -> list[tuple[str, str]]:
    """``(document, section label)`` pairs named by the role's text on page ``docname``."""
    targets = []
    for item in text.split(","):
        doc, _, label = item.strip().partition("#")
        if doc.startswith("/"):
            doc = doc[1:]
        else:
            doc = posixpath.normpath(posixpath.join(posixpath.dirname(docname), doc))
        targets.append((doc, label))
    return targets


class ReadingMinutesRole(SphinxRole):
    def run(self):
        targets = resolve_targets(self.text, self.env.docname)
        return [reading_minutes(self.rawtext, "?", targets=targets)], []


def _doctree_read(app, doctree):
    env = app.env
    store = env.__dict__.setdefault("posenc_reading", {})
    docname = env.docname
    entry = {"": measure(doctree)}
    for section in doctree.findall(nodes.section):
        for name in section.get("names", []) + section.get("ids", []):
            entry.setdefault(name, measure(section))
    store[docname] = entry


def _purge(app, env, docname):
    env.__dict__.setdefault("posenc_reading", {}).pop(docname, None)


def _merge(app, env, docnames, other):
    store = env.__dict__.setdefault("posenc_reading", {})
    for doc in docnames:
        if doc in getattr(other, "posenc_reading", {}):
            store[doc] = other.posenc_reading[doc]


def _resolve(app, doctree, fromdocname):
    store = getattr(app.env, "posenc_reading", {})
    for node in list(doctree.findall(reading_minutes)):
        counts = []
        for doc, label in node["targets"]:
            found = store.get(doc, {}).get(label)
            if found is None:
                _log.warning(
                    "reading-minutes: no %s %r",
                    "section" if label else "document",
                    f"{doc}#{label}" if label else doc,
                    location=node,
                )
                continue
            counts.append(found)
        node.replace_self(nodes.Text(str(minutes(counts)) if counts else "?"))


def setup(app):
    app.add_node(reading_minutes)
    app.add_role("reading-minutes", ReadingMinutesRole())
    app.connect("doctree-read", _doctree_read)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("doctree-resolved", _resolve)
    return {"env_version": 1, "parallel_read_safe": True, "parallel_write_safe": True}
