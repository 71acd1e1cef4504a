"""Instruments for positional encoding in a real model: :mod:`~posenc_core.book.instruments.bugs`
(chapter 8's shipped bugs, reproduced on the trained models, with the KV-cache decoder and the
per-position loss), :mod:`~posenc_core.book.instruments.caches` (positions in a KV cache that
evicts keys: sliding windows and attention sinks),
:mod:`~posenc_core.book.instruments.frequency_use` (chapter 9: what a trained RoPE model does
with each frequency pair) and :mod:`~posenc_core.book.instruments.hf_check` (Hugging Face's
model classes run with this package's rotation)."""

__all__ = ["bugs", "caches", "frequency_use", "hf_check"]
