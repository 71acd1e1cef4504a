"""The book layer: what the chapters need around the numerical core.

Figures (:mod:`~posenc_core.book.viz`, matplotlib), explorers
(:mod:`~posenc_core.book.widgets`, ipywidgets), the checksum-verified MiniLM checkpoint
(:mod:`~posenc_core.book.checkpoints`, safetensors), the learned-versus-fixed training study
(:mod:`~posenc_core.book.study`), the exercise checkers (:mod:`~posenc_core.book.exercises`)
and notebook helpers (:mod:`~posenc_core.book.notebook`, IPython and MyST-NB).

Modules here import the core (``posenc_core``) and third-party plotting, widget and file
libraries; the core never imports this package. Importing ``posenc_core.book`` itself loads
nothing: each module is imported on its own, e.g. ``from posenc_core.book import viz``.
"""
