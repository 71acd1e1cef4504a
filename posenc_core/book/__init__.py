"""The book layer: what the chapters need around the numerical core, in rooms by kind.

:mod:`~posenc_core.book.figures` (matplotlib), :mod:`~posenc_core.book.widgets` (the
explorers), :mod:`~posenc_core.book.models` (the trained models),
:mod:`~posenc_core.book.studies` (the studies that train them and the readers of their
results), :mod:`~posenc_core.book.instruments` (chapter 8's bugs, chapter 9's probes, the
Hugging Face cross-check), :mod:`~posenc_core.book.sources` (the verified MiniLM checkpoint),
:mod:`~posenc_core.book.exercises` and :mod:`~posenc_core.book.notebook` (glue for the pages).
The core never imports this package, and importing it loads no submodule; it checks that
the ``book`` extra's packages are installed at the versions asked for, raising a
``ModuleNotFoundError`` with the command that installs them (:func:`posenc_core._extras.ensure`),
and runs the core's one-time sin/cos warm-up (the Numerics page says why).
The committed data (results, checkpoints, the held-out excerpt) is package data in :data:`DATA`,
so chapters find it however the package was installed; a results file names each checkpoint by
``{"file": ..., "sha256": ...}``, read through :func:`data_entry`.
"""

from __future__ import annotations

import os
import pathlib
import re
from collections.abc import Mapping

from posenc_core import _extras, _numerics

_extras.ensure("book")
# The chapters, the studies and the book's instruments call torch.sin/cos directly, not only
# through core functions that warm up first: warm up here once (see numerics.md).
_numerics.warm_up_trigonometry()

__all__ = ["DATA", "data_entry"]

DATA = pathlib.Path(__file__).resolve().parent / "data"
"""The folder of the book's committed data, inside the installed package (``make study``
rewrites the studies' files in it)."""

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


def data_entry(
    entry: object, *, where: str, folder: str | os.PathLike[str] = DATA
) -> tuple[pathlib.Path, str]:
    """The file a data entry names and the SHA-256 recorded for it, both checked (the file is
    not read).

    Args:
        entry: ``{"file": name, "sha256": digest}`` as loaded from a results file; ``name`` a
            relative path resolving (symbolic links followed) inside ``folder``, ``digest`` 64
            hex digits.
        where: what the entry is, for messages, e.g. ``"lm_study.json checkpoints['rope/0']"``.
        folder: the folder the entry's file must lie in (the results file's).

    Returns:
        ``(path, sha256)``: the file's resolved path and the digest in lowercase.

    Raises:
        ValueError: not such a mapping, a missing key, a file outside ``folder`` (absolute,
            ``..``) or no valid digest; the message names the entry, the key and what is allowed.
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
