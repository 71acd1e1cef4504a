"""A chapter's second and third pages numbered as its parts: 6b, 7b, 7c, 8b.

In _toc.yml a chapter's further pages are ``sections`` of its first page. Sphinx numbers a
sub-page after the parent page's last section: chapter 6 has sections 6.1 to 6.8, so its
second page became "6.9 RoPE in real models" with sections 6.9.1, ...; its figures went on
with chapter 6's count (Fig. 7.5 was the first figure of page 7b). A reader of the sidebar
saw a section where there is a page.

After Sphinx has numbered the toctree, this extension relabels the k-th sub-page of chapter N
(numbered N.9 here; N.8.1 where a toctree sits inside the chapter's last section) as ``Nb``,
``Nc``, ... (k = 1 is "b": the chapter's first page is its part "a", unlabelled): its title,
its sections (6b.1, 6b.1.1), its figures, tables and equations (Fig. 7b.1), wherever Sphinx
shows a number (page title, sidebar, previous/next links, headings, {ref}/{numref}). Sphinx
joins a number's tuple with "." to print it, so the label is a string as its first element.
The page files are named the same way (06b, 07b, 07c, 08b); tests/built/test_navigation.py
checks every page's h1 and sidebar entry.

Upstream: Jupyter Book 1 documents that "nested files define sections underneath the last
section of their parent" (jupyter-book/jupyter-book#1016, open); Sphinx numbers a toctree
with integers only (sphinx-doc/sphinx#6614, custom numbering, open). sphinx-external-toc
1.1.0 (pinned) gives a toctree a numbering ``style`` (its PR #112), but a style rewrites the
first number of each entry (the chapter's 6, not the 9): no configuration gives "6b". The
sub-pages are written again (not read again) on every build, since Sphinx's own numbering
differs from the stored one. Delete when Sphinx or sphinx-external-toc can number a
sub-document as its parent's part, or when the book gives each part a chapter number.
"""

from __future__ import annotations

import string

from docutils import nodes
from sphinx.environment.collectors.toctree import TocTreeCollector

# After TocTreeCollector's numbering (priority 500, the default), before the pages are written.
PRIORITY = 900


def part_label(chapter: int | str, index: int) -> str:
    """The label of a chapter's ``index``-th sub-page (1 -> "b", 2 -> "c", ...)."""
    if not isinstance(index, int) or not 1 <= index < len(string.ascii_lowercase):
        raise ValueError(f"index must be an int in 1..25 (a chapter's sub-page), got {index!r}")
    return f"{chapter}{string.ascii_lowercase[index]}"


def _relabel(number, prefix: tuple, label: str):
    """``number`` with ``prefix`` replaced by ``label`` (same type as given: list or tuple)."""
    if number and tuple(number[: len(prefix)]) == prefix:
        new = (label, *number[len(prefix) :])
        return list(new) if isinstance(number, list) else new
    return number


def relabel_parts(app, env) -> list[str]:
    """Rename the numbers of every chapter's sub-pages (see the module docstring); return the
    pages to write again."""
    rewrite = []
    for chapter, secnums in list(env.toc_secnumbers.items()):
        number = secnums.get("")
        if not number or len(number) != 1:
            continue
        parts = [
            doc
            for doc in env.toctree_includes.get(chapter, [])
            if len(env.toc_secnumbers.get(doc, {}).get("", ())) >= 2
            and tuple(env.toc_secnumbers[doc][""][:1]) == tuple(number)
        ]
        for index, doc in enumerate(parts, start=1):
            prefix = tuple(env.toc_secnumbers[doc][""])
            label = part_label(number[0], index)
            env.toc_secnumbers[doc] = {
                anchor: _relabel(n, prefix, label) for anchor, n in env.toc_secnumbers[doc].items()
            }
            for ref in env.tocs[doc].findall(nodes.reference):
                if ref.get("secnumber"):
                    ref["secnumber"] = _relabel(ref["secnumber"], prefix, label)
            for titles in (env.titles, env.longtitles):
                title = titles.get(doc)
                if title is not None and title.get("secnumber"):
                    title["secnumber"] = _relabel(title["secnumber"], prefix, label)
            rewrite.append(doc)
    if rewrite:
        # figures, tables and equations take their chapter's number from the sections
        rewrite += TocTreeCollector().assign_figure_numbers(env)
    return sorted(set(rewrite))


def setup(app):
    app.connect("env-get-updated", relabel_parts, priority=PRIORITY)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
