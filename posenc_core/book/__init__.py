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
chapters' first cell does on Colab) or from a wheel.
"""

import pathlib

__all__ = ["DATA"]

DATA = pathlib.Path(__file__).resolve().parent / "data"
"""The folder of the book's committed data, inside the installed package (``make study``
rewrites the studies' files in it)."""
