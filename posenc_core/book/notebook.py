"""Small helpers for the chapters: glue numbers and figures into the text when the book is
built with MyST-NB, and fall back to plain display in a stock Jupyter or Colab session.

Imports IPython (and myst_nb when present); the numerical modules never import this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "glue",
    "BUILD_ENV",
    "optional_reference",
]


class _NoValue:
    """The default of ``glue``'s value: ``glue(name)`` is a mistake, ``glue(mapping)`` is not."""

    def __repr__(self) -> str:
        return "<no value>"


_NO_VALUE = _NoValue()


def glue(name: str | Mapping[str, Any], value: Any = _NO_VALUE, display: bool = False) -> None:
    """Store ``value`` under ``name`` for ``{glue}`` references in the chapter's text.

    ``glue(name, value)`` stores one value; ``glue({name: value, ...})`` stores each item of
    the mapping in turn, exactly as one ``glue(name, value)`` call per item would, so a
    chapter's hidden cell carries all its numbers in one call.

    With MyST-NB installed (the book build) each value goes to ``myst_nb.glue``. Without it
    (Colab, a bare JupyterLab) the value is shown when ``display`` is True and otherwise
    skipped, so chapters run top to bottom anywhere.

    Args:
        name: the key used in the text, or a mapping of keys to values.
        value: a number (numpy scalars are glued as the Python number they hold, so
            ``{glue:text}`name:.3f``` formats them), string or matplotlib figure; omitted
            when ``name`` is a mapping.
        display: also show each value in the cell output.
    """
    if isinstance(name, Mapping):
        if value is not _NO_VALUE:
            raise TypeError(f"value must be omitted when name is a mapping, got {value!r}")
        for key, item in name.items():
            glue(key, item, display=display)
        return
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty string or a mapping, got {name!r}")
    if value is _NO_VALUE:
        raise TypeError(f"glue({name!r}) needs a value")
    if isinstance(value, np.generic):  # np.float64(0.5) would be glued as its repr, unformattable
        value = value.item()
    try:
        from myst_nb import glue as myst_glue
    except ImportError:
        if display:
            from IPython.display import display as show

            show(value)
        return
    myst_glue(name, value, display=display)


BUILD_ENV = "POSENC_BOOK_BUILD"
"""Environment variable that ``make book`` sets to ``1``: the published book must run every
cross-check, so a missing reference library is an error there, not a skipped check."""


def optional_reference(module: str, purpose: str) -> Any:
    """Import a reference library that a chapter's cross-check compares against.

    A reader's lean environment (Binder, Colab) may lack it: then the check is skipped and a
    one-line message says what to install. The book build must never publish a skipped check,
    so when :data:`BUILD_ENV` is ``"1"`` a missing library raises instead.

    Args:
        module: import name, e.g. ``"transformers"``.
        purpose: what the chapter uses it for, for the messages.

    Returns:
        the imported module, or None when it is missing outside the book build.

    Raises:
        ImportError: if the module is missing and :data:`BUILD_ENV` is ``"1"``.
    """
    import importlib
    import os

    if not isinstance(module, str) or not module:
        raise TypeError(f"module must be a non-empty string, got {module!r}")
    if not isinstance(purpose, str) or not purpose:
        raise TypeError(f"purpose must be a non-empty string, got {purpose!r}")
    try:
        return importlib.import_module(module)
    except ImportError as err:
        if os.environ.get(BUILD_ENV) == "1":
            raise ImportError(
                f"{module} is needed for {purpose}, and {BUILD_ENV}=1 says this is the book "
                f"build, which must not publish a skipped check: install the build "
                f"requirements (requirements-build.txt)"
            ) from err
        print(
            f"{module} is not installed, so {purpose} is skipped here "
            f"(`pip install {module}` runs it)."
        )
        return None
