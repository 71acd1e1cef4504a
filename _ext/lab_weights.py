"""The model lab's checkpoints in the built book: ``_static/bytelm/`` of the output.

The lab (:mod:`posenc_core.book.widgets.lab`) computes the book's trained byte models in the
reader's browser; with no kernel behind a static page, its weights must be files the page can
fetch from its own host. At the end of each HTML build this extension copies every model's
committed checkpoint (safetensors, float32), checked against the SHA-256 its study records by
:func:`~posenc_core.book.widgets.lab.weights`, to ``<outdir>/_static/bytelm/<file>``, the
folder the widget's ``weights_base`` names. Nothing is converted: the browser reads the file the
PyTorch models load, and checks its length and SHA-256 again before use.
Tested in ``tests/built/test_lab.py`` (the files are there, equal to the committed ones).
"""

from __future__ import annotations

import pathlib


def _build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from posenc_core.book.widgets import lab

    folder = pathlib.Path(app.outdir) / "_static" / "bytelm"
    folder.mkdir(parents=True, exist_ok=True)
    for key in lab.MODELS:
        path, _ = lab.checkpoint(key)
        (folder / path.name).write_bytes(lab.weights(key))


def setup(app):
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
