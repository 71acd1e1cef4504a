"""Small helpers for the chapters: glue numbers and figures into the text when the book is
built with MyST-NB, and fall back to plain display in a stock Jupyter or Colab session.

Imports IPython (and myst_nb when present); the numerical modules never import this.
"""

from __future__ import annotations

from typing import Any


def glue(name: str, value: Any, display: bool = False) -> None:
    """Store ``value`` under ``name`` for ``{glue}`` references in the chapter's text.

    With MyST-NB installed (the book build) this is :func:`myst_nb.glue`. Without it (Colab,
    a bare JupyterLab) the value is shown when ``display`` is True and otherwise skipped, so
    chapters run top to bottom anywhere.

    Args:
        name: the key used in the text.
        value: a number, string or matplotlib figure.
        display: also show it in the cell output.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string, got {name!r}")
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show

            show(value)
        return
    myst_glue(name, value, display=display)
