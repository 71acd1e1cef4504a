"""The book layer: what the chapters need around the numerical core, in rooms by kind.

- :mod:`~posenc_core.book.figures`: the chapters' figures, by kind of plot, and the frames
  the static explorers show (:mod:`~posenc_core.book.figures.explorer_frames`), matplotlib;
- :mod:`~posenc_core.book.widgets`: the explorers (the ``Explorer`` they are built on, the
  explorers of formulas and the explorer of the study's measured curves), ipywidgets;
- :mod:`~posenc_core.book.models`: the trained models (``ByteLM``, ``TinyTransformer``);
- :mod:`~posenc_core.book.studies`: the studies that train them, their corpus and tasks, the
  readers of their results, and the provenance of those results;
- :mod:`~posenc_core.book.instruments`: chapter 8's bugs, chapter 9's frequency probes and the
  Hugging Face cross-check;
- :mod:`~posenc_core.book.sources`: the checksum-verified MiniLM checkpoint, safetensors;
- :mod:`~posenc_core.book.exercises` (the exercise checkers) and
  :mod:`~posenc_core.book.notebook` (glue for the pages, IPython and MyST-NB).

Modules here import the core (``posenc_core``) and third-party plotting, widget and file
libraries; the core never imports this package. Importing ``posenc_core.book`` itself loads
nothing: each module is imported on its own, e.g. ``from posenc_core.book import figures`` or
``from posenc_core.book.studies import lm_study``.

The committed data the chapters read (the studies' results, the trained checkpoints, the
held-out text excerpt) lives in :data:`DATA`, ``posenc_core/book/data/``, and is installed with
the package (package data), so a chapter finds it however ``posenc_core`` was installed: from
a checkout (``pip install -e .``), from the repository (``pip install git+...``, as the
chapters' first cell does on Colab) or from a wheel. A results file names each checkpoint by
an entry ``{"file": ..., "sha256": ...}``, read through :func:`data_entry`.

The layer needs the packages of the ``book`` extra (``pip install "posenc_core[book]"``):
importing ``posenc_core.book`` checks that they are installed, at the versions the extra asks
for, and raises a ``ModuleNotFoundError`` naming the missing ones and the one command that
installs them (:func:`posenc_core._extras.ensure`; module lookups and package metadata only,
nothing is imported).
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Mapping

from posenc_core import _extras

_extras.ensure("book")

__all__ = ["DATA", "data_entry"]

DATA = pathlib.Path(__file__).resolve().parent / "data"
"""The folder of the book's committed data, inside the installed package (``make study``
rewrites the studies' files in it)."""

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def data_entry(
    entry: object, *, where: str, folder: str | os.PathLike[str] = DATA
) -> tuple[pathlib.Path, str]:
    """The file a data entry names and the SHA-256 recorded for it, both checked.

    An entry (a checkpoint of a study's results file) is ``{"file": name, "sha256": digest}``:
    ``name`` a relative path whose resolved location (symbolic links followed) lies inside
    ``folder``, ``digest`` 64 hex digits. The file is not read.

    Args:
        entry: the entry, as loaded from the results file.
        where: what the entry is, for messages, e.g. ``"lm_study.json checkpoints['rope/0']"``.
        folder: the folder the entry's file must lie in (the results file's).

    Returns:
        ``(path, sha256)``: the file's resolved path and the digest in lowercase.

    Raises:
        ValueError: the entry is not such a mapping, lacks a key, names a file outside
            ``folder`` (an absolute path, ``..``) or records no valid digest; the message names
            the entry, the key and what is allowed.
    """
    root = pathlib.Path(folder).resolve()
    file_rule = f"a relative file name inside {root}"
    sha_rule = "64 hex digits, the file's SHA-256"
    if not isinstance(entry, Mapping):
        raise ValueError(
            f"{where} must be a mapping {{'file': {file_rule}, 'sha256': {sha_rule}}}, "
            f"got {type(entry).__name__} {entry!r}"
        )
    for key in ("file", "sha256"):
        if key not in entry:
            raise ValueError(
                f"{where} has no {key!r}: a data entry needs 'file' ({file_rule}) and "
                f"'sha256' ({sha_rule}); it has {sorted(map(str, entry))}"
            )
    name, sha = entry["file"], entry["sha256"]
    path = root / name if isinstance(name, str) and name else None
    resolved = path.resolve() if path is not None else None
    if (
        resolved is None
        or pathlib.PurePath(name).is_absolute()
        or not resolved.is_relative_to(root)
        or resolved == root
    ):
        shown = f" (resolves to {resolved})" if resolved is not None and resolved != path else ""
        raise ValueError(f"{where}['file'] must be {file_rule}, got {name!r}{shown}")
    if not (isinstance(sha, str) and _SHA256.fullmatch(sha)):
        raise ValueError(f"{where}['sha256'] must be {sha_rule}, got {sha!r}")
    return resolved, sha.lower()
