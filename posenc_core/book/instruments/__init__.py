"""Instruments for positional encoding in a real model: chapter 8's shipped bugs
(:mod:`~posenc_core.book.instruments.bugs`, :mod:`~posenc_core.book.instruments.layer_bugs`),
caches that evict keys (:mod:`~posenc_core.book.instruments.caches`), chapter 9's frequency
probes (:mod:`~posenc_core.book.instruments.frequency_use`) and Hugging Face's models run with
this package's rotation (:mod:`~posenc_core.book.instruments.hf_check`)."""

__all__ = ["bugs", "caches", "frequency_use", "hf_check", "layer_bugs"]
