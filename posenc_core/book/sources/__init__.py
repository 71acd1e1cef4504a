"""Outside checkpoints the chapters read: :mod:`~posenc_core.book.sources.minilm` (the MiniLM
sentence encoder, checksum-verified, whose learned position table chapters 1 and 5 study)."""

__all__ = ["minilm"]
