"""The studies whose committed results the chapters read, and what they share.

- :mod:`~posenc_core.book.studies.provenance`: which code computed a results file, and whether
  the installed code still does (both studies and the evaluations use it);
- :mod:`~posenc_core.book.studies.options`: what the two studies' configurations share;
- chapter 5's learned-versus-fixed study: :mod:`~posenc_core.book.studies.encoder_study` (runs
  it), :mod:`~posenc_core.book.studies.synthetic_tasks` (its tasks) and
  :mod:`~posenc_core.book.studies.encoder_results` (reads its results);
- the language-model study: :mod:`~posenc_core.book.studies.corpus` (its text),
  :mod:`~posenc_core.book.studies.lm_study` (trains and evaluates the byte models),
  :mod:`~posenc_core.book.studies.heldout` (the loss by position every measurement uses) and
  :mod:`~posenc_core.book.studies.lm_curves` (reads their per-position losses);
- :mod:`~posenc_core.book.studies.evaluations`: chapters 8 and 9's measurements of the trained
  models, computed once.

``make study`` runs them and writes :data:`posenc_core.book.DATA`.
"""

__all__ = [
    "corpus",
    "encoder_results",
    "encoder_study",
    "evaluations",
    "heldout",
    "lm_curves",
    "lm_study",
    "options",
    "provenance",
    "synthetic_tasks",
]
