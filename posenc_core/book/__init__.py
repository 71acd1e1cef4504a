"""The book layer: what the chapters need around the numerical core.

Figures (:mod:`~posenc_core.book.viz`, matplotlib), explorers
(:mod:`~posenc_core.book.widgets`, ipywidgets), the checksum-verified MiniLM checkpoint
(:mod:`~posenc_core.book.checkpoints`, safetensors), the learned-versus-fixed training study
(:mod:`~posenc_core.book.study`), the exercise checkers (:mod:`~posenc_core.book.exercises`)
and notebook helpers (:mod:`~posenc_core.book.notebook`, IPython and MyST-NB).

Modules here import the core (``posenc_core``) and third-party plotting, widget and file
libraries; the core never imports this package. Importing ``posenc_core.book`` itself loads
nothing: each module is imported on its own, e.g. ``from posenc_core.book import viz``.

The committed data the chapters read (the studies' results, the trained checkpoints, the
held-out text excerpt) lives in :data:`DATA`, ``posenc_core/book/data/``, and is installed with
the package (package data), so a chapter finds it however ``posenc_core`` was installed: from
a checkout (``pip install -e .``), from the repository (``pip install git+...``, as the
chapters' first cell does on Colab) or from a wheel.
"""

import pathlib

DATA = pathlib.Path(__file__).resolve().parent / "data"
"""The folder of the book's committed data, inside the installed package (``make study``
rewrites the studies' files in it)."""
