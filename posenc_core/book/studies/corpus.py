"""The language-model corpus: the Python source of Pygments 2.21.0, as bytes, split by file.

Real text that installs offline at a pinned version (Pygments is a dependency of IPython) and
gives position work: indentation, brackets that close, aligned tables. The selection is every
``pygments/**/*.py`` sorted by path, minus the generated data modules of :func:`is_generated`
(word lists and Unicode tables); file k is held out when ``k % 10 == 9``, and each split's
bytes (files concatenated in order) are checked against a SHA-256 of the pinned package.
Tokens are bytes, vocabulary 256. Chapters read only the committed held-out excerpt
(:func:`heldout_excerpt`), so they run with any Pygments; training (:func:`corpus_split`)
needs the pinned one. Pygments is BSD-2-Clause: its LICENSE (:data:`LICENSE_FILE`) is
committed beside the excerpt. Shapes: n = number of bytes.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import pathlib

import torch

from posenc_core import _validation as check
from posenc_core.book import DATA

__all__ = [
    "PYGMENTS_VERSION",
    "VOCAB",
    "EXCERPT_FILE",
    "LICENSE_FILE",
    "installed_pygments_version",
    "is_generated",
    "corpus_files",
    "corpus_split",
    "heldout_excerpt",
    "write_excerpt",
    "corpus_summary",
]

PYGMENTS_VERSION = "2.21.0"
"""The Pygments release the corpus is pinned to (``requirements.txt``)."""

VOCAB = 256
"""The vocabulary size, one token per byte value."""

HELDOUT_EVERY = 10
"""File k of the sorted selection is held out when ``k % HELDOUT_EVERY == HELDOUT_EVERY - 1``."""

N_FILES = 311
"""Files in the selection (280 for training, 31 held out)."""

N_BYTES = 3_430_404
"""Bytes in the selection (training and held-out splits together)."""

TRAIN_SHA256 = "0ec89b31baf533c1ec6dbdc25534f7010205c38834604642fd19b657fcb9e6bb"
"""SHA-256 of the training split's bytes (files concatenated in sorted order; 3,010,835 bytes)."""

HELDOUT_SHA256 = "6ef324c1316321e7e69171f11c105fbe364189414c002c80a233020ef70236f7"
"""SHA-256 of the held-out split's bytes (419,569 bytes)."""

EXCERPT_BYTES = 1 << 17
"""Bytes in the committed held-out excerpt (128 KiB: 255 windows of 8L + 1 = 513 bytes at
L = 64)."""

EXCERPT_SHA256 = "629fb637a153b1d5f700afe68d5425f5394fa5eff4a912b40306b75f8c15c5d0"
"""SHA-256 of ``EXCERPT_FILE`` (the first ``EXCERPT_BYTES`` of the held-out split)."""

LICENSE_SHA256 = "a9d66f1d526df02e29dce73436d34e56e8632f46c275bbdffc70569e882f9f17"
"""SHA-256 of :data:`LICENSE_FILE` (Pygments 2.21.0's LICENSE, BSD-2-Clause)."""

_DATA = DATA
EXCERPT_FILE = _DATA / "pygments_heldout.bin"
"""The committed held-out excerpt (raw bytes of Pygments source; see the module docstring)."""

LICENSE_FILE = _DATA / "PYGMENTS_LICENSE.txt"
"""Pygments' LICENSE (BSD-2-Clause), kept beside the excerpt as the licence requires."""

_GENERATED = ("_mapping.py", "unistring.py")


def is_generated(relative_path: str) -> bool:
    """Whether a Pygments file is a machine-generated data module left out of the corpus.

    Args:
        relative_path: path below the package's parent, e.g. ``"pygments/lexers/_mapping.py"``.

    Returns:
        True for ``_mapping.py``, ``unistring.py`` and every ``*_builtins.py``.
    """
    if not isinstance(relative_path, str):
        raise TypeError(
            f"relative_path must be a str, got {type(relative_path).__name__} {relative_path!r}"
        )
    name = relative_path.rsplit("/", 1)[-1]
    return name in _GENERATED or name.endswith("_builtins.py")


def installed_pygments_version() -> str | None:
    """The version of the installed Pygments, the corpus's source (None: not installed); the
    studies record it beside :data:`PYGMENTS_VERSION`, the one the corpus is pinned to."""
    try:
        return importlib.metadata.version("pygments")
    except importlib.metadata.PackageNotFoundError:
        return None


def corpus_files() -> list[tuple[str, pathlib.Path]]:
    """The corpus's files, in corpus order, from the installed Pygments.

    Returns:
        ``[(relative path, absolute path), ...]`` sorted by the relative path (a POSIX string
        such as ``"pygments/cmdline.py"``), generated modules (:func:`is_generated`) left out.

    Raises:
        RuntimeError: Pygments is not installed; the message says what to install.
    """
    try:
        module = importlib.import_module("pygments")
    except ImportError as err:
        raise RuntimeError(
            f"training the language model needs Pygments {PYGMENTS_VERSION}'s source: "
            f"`pip install pygments=={PYGMENTS_VERSION}` (evaluation needs only {EXCERPT_FILE})"
        ) from err
    root = pathlib.Path(module.__file__).resolve().parent
    files = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).as_posix()
        if not is_generated(rel):
            files.append((rel, path))
    return sorted(files)


def _split_bytes() -> tuple[bytes, bytes]:
    """(training bytes, held-out bytes) of the installed package, unverified."""
    train, held = [], []
    for k, (_, path) in enumerate(corpus_files()):
        (held if k % HELDOUT_EVERY == HELDOUT_EVERY - 1 else train).append(path.read_bytes())
    return b"".join(train), b"".join(held)


def _as_tensor(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()  # (n,)


def corpus_split(split: str) -> torch.Tensor:
    """One split of the corpus as byte tokens, verified by SHA-256.

    Args:
        split: ``"train"`` (280 files) or ``"heldout"`` (31 files, every tenth by sorted path).

    Returns:
        int64 tensor ``(n,)`` of byte values 0 .. 255, the split's files concatenated in order.

    Raises:
        ValueError: an unknown split, or bytes whose SHA-256 differs from the pinned one (the
            message names the installed Pygments version and the expected one).
        RuntimeError: Pygments is not installed.
    """
    expected = {"train": TRAIN_SHA256, "heldout": HELDOUT_SHA256}
    check.choice("split", split, tuple(expected))
    data = _split_bytes()[0 if split == "train" else 1]
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected[split]:
        raise ValueError(
            f"the {split} split of the installed Pygments {installed_pygments_version()} has "
            f"SHA-256 {actual}, expected {expected[split]} (Pygments {PYGMENTS_VERSION}): install "
            f"`pygments=={PYGMENTS_VERSION}` to train; evaluation reads {EXCERPT_FILE.name}"
        )
    return _as_tensor(data)


def _read_verified(path: pathlib.Path, expected: str) -> bytes:
    data = pathlib.Path(path).read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise ValueError(
            f"refusing {path}: its SHA-256 is {actual}, expected {expected} (the held-out "
            f"excerpt of Pygments {PYGMENTS_VERSION}); it was changed or truncated: restore it "
            "with git or rewrite it with posenc_core.book.studies.corpus.write_excerpt()"
        )
    return data


def heldout_excerpt(path: str | pathlib.Path | None = None) -> torch.Tensor:
    """The committed held-out excerpt as byte tokens, verified by SHA-256 (no Pygments needed).

    Args:
        path: the file to read; None: ``EXCERPT_FILE``. Its SHA-256 must be
            ``EXCERPT_SHA256`` whatever the path.

    Returns:
        int64 tensor ``(EXCERPT_BYTES,)`` of byte values.

    Raises:
        ValueError: the file's SHA-256 differs from ``EXCERPT_SHA256``.
        FileNotFoundError: no such file.
    """
    if path is not None and not isinstance(path, (str, pathlib.Path)):
        raise TypeError(f"path must be a str, a pathlib.Path or None, got {type(path).__name__}")
    return _as_tensor(_read_verified(EXCERPT_FILE if path is None else path, EXCERPT_SHA256))


def write_excerpt() -> tuple[pathlib.Path, pathlib.Path]:
    """Write the held-out excerpt and Pygments' LICENSE to ``posenc_core/book/data/`` from the
    pinned package (both checked against their SHA-256 before they are written).

    Returns:
        ``(EXCERPT_FILE, LICENSE_FILE)``.
    """
    held = corpus_split("heldout").to(torch.uint8).numpy().tobytes()[:EXCERPT_BYTES]
    dist = importlib.metadata.distribution("pygments")
    licence = next(f for f in dist.files or [] if f.name == "LICENSE")
    licence_bytes = pathlib.Path(dist.locate_file(licence)).read_bytes()
    for data, expected, name in (
        (held, EXCERPT_SHA256, "excerpt"),
        (licence_bytes, LICENSE_SHA256, "LICENSE"),
    ):
        if hashlib.sha256(data).hexdigest() != expected:
            raise ValueError(f"the {name} built from Pygments differs from the pinned SHA-256")
    EXCERPT_FILE.parent.mkdir(parents=True, exist_ok=True)
    EXCERPT_FILE.write_bytes(held)
    LICENSE_FILE.write_bytes(licence_bytes)
    return EXCERPT_FILE, LICENSE_FILE


def corpus_summary() -> dict[str, int | str]:
    """The corpus's size and provenance, for the chapters and the results file.

    Returns:
        dict with ``package``, ``version``, ``licence``, ``files``, ``bytes``,
        ``train_files``, ``heldout_files``, ``excerpt_bytes`` (constants of this module; no
        Pygments needed).
    """
    held = N_FILES // HELDOUT_EVERY
    return {
        "package": "pygments",
        "version": PYGMENTS_VERSION,
        "licence": "BSD-2-Clause",
        "files": N_FILES,
        "bytes": N_BYTES,
        "train_files": N_FILES - held,
        "heldout_files": held,
        "excerpt_bytes": EXCERPT_BYTES,
    }
