"""The studies whose committed results the chapters read, and what they share.

Chapter 5's learned-versus-fixed study (:mod:`~posenc_core.book.studies.encoder_study`, its
tasks and its reader), the language-model study (:mod:`~posenc_core.book.studies.lm_study`, its
corpus, held-out loss and curve reader), chapters 8 and 9's measurements
(:mod:`~posenc_core.book.studies.evaluations`) and the provenance of their results
(:mod:`~posenc_core.book.studies.provenance`). ``make study`` writes :data:`posenc_core.book.DATA`.
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
