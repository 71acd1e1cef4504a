"""The book's trained models: :mod:`~posenc_core.book.models.byte_lm` (``ByteLM``, the causal
byte-level language model of chapters 5, 7, 8 and 9) and :mod:`~posenc_core.book.models.encoder`
(``TinyTransformer``, the encoder and decoder of chapter 5's synthetic tasks). Each takes its
positional scheme as an argument and is built from the core's modules."""

__all__ = ["byte_lm", "encoder"]
