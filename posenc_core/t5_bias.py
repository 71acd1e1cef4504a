"""T5's relative position bias: key - query distances sorted into buckets, one learned scalar per
head and bucket, added to the attention scores (Raffel et al. 2020, "Exploring the Limits of
Transfer Learning with a Unified Text-to-Text Transformer", JMLR 21, Sec. 2.1).

The ancestor is Shaw et al. 2018 (learned vectors for relative positions clipped at a maximum
distance). T5 keeps one scalar per (head, bucket) and makes the buckets coarser with distance:
exact for small distances, logarithmically wider up to ``max_distance``, and one last bucket for
every distance beyond it. The bucket rule is Mesh TensorFlow's ``_relative_position_bucket``, as
Hugging Face's ``T5Attention._relative_position_bucket`` and ``compute_bias`` (transformers
5.23.0) reproduce it; ``tests/core/test_t5_bias.py`` checks both functions here against those.

Notation for tensor shapes: h = heads, q = query length, k = key length, ``...`` any shape.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from . import _validation as check

__all__ = ["relative_position_bucket", "T5RelativePositionBias", "MAX_BUCKETS"]

MAX_BUCKETS = 2**16
"""The largest ``num_buckets`` the rule accepts (65536; T5 uses 32). The bucket starts are
computed and cached per (buckets, max_distance)."""


def _check_buckets(
    bidirectional: object, num_buckets: object, max_distance: object, where: str
) -> tuple[bool, int, int]:
    """Checked ``(bidirectional, num_buckets, max_distance)`` of the bucket rule; ``where``
    names the public caller in the message for a count above its bound."""
    bidirectional = check.boolean("bidirectional", bidirectional)
    num_buckets = check.size("num_buckets", num_buckets, MAX_BUCKETS, "buckets", where=where)
    if bidirectional and (num_buckets < 4 or num_buckets % 2):
        raise ValueError(
            "num_buckets must be an even integer >= 4 when bidirectional=True (half the buckets "
            "for keys before the query, half for keys after it, each half with at least one "
            f"exact and one logarithmic bucket), got {num_buckets}"
        )
    if num_buckets < 2:
        raise ValueError(
            "num_buckets must be an integer >= 2 when bidirectional=False (at least one exact "
            f"and one logarithmic bucket), got {num_buckets}"
        )
    half = num_buckets // 2 if bidirectional else num_buckets
    exact = half // 2
    max_distance = check.position_count("max_distance", max_distance, where=where)
    if max_distance <= exact:
        raise ValueError(
            f"max_distance must be an integer greater than the {exact} exact buckets per direction "
            f"(num_buckets={num_buckets}, bidirectional={bidirectional}: distances below {exact} "
            f"get a bucket each, the logarithmic buckets reach up to max_distance), got "
            f"{max_distance}"
        )
    return bidirectional, num_buckets, max_distance


def _t5_log_index(n: torch.Tensor, exact: int, max_distance: int, n_log: int) -> torch.Tensor:
    """Which logarithmic bucket T5 gives distance ``n >= exact`` (0 = the first), before capping.

    floor(log(n / exact) / log(max_distance / exact) * n_log), evaluated in float32 as Mesh
    TensorFlow and Hugging Face do: trained checkpoints saw these ids. Exact arithmetic can
    differ only where the product is within float32's rounding error (about 1e-6 of it) of an
    integer k, above all at a tie, where it is exactly k (e.g. causal num_buckets=17,
    max_distance=27 at distances 12 and 18, products 3 and 6): float32 gives k there, or k - 1
    where it rounds the product below k, and which one depends on the machine's float32
    logarithm (distance 12 lands in bucket 11 on some CPUs, 10 on others). For T5's 32 and 128
    the only ties are the encoder's distances 16, 32 and 64 (products 2, 4 and 6), which a
    correctly rounded float32 logarithm gets exactly; at every other distance the product is
    more than 1e-3 from an integer, so float32 gives the exact id there on any machine.
    """
    ratio = torch.log(n.to(torch.float32) / exact) / math.log(max_distance / exact)
    return (ratio * n_log).to(torch.int64)


@functools.lru_cache(maxsize=64)
def _bucket_starts(half: int, max_distance: int) -> torch.Tensor:
    """The smallest distance of each bucket 1 .. half-1 of one direction -> ``(half - 1,)`` int64.

    Bucket ``b`` holds the distances from ``starts[b - 1]`` up to the next start, so the bucket
    of a distance ``n >= 0`` is the number of starts ``<= n``. Exact buckets ``1 .. exact`` start
    at distances ``1 .. exact``; the start of logarithmic bucket ``exact + m`` is found by binary
    search on :func:`_t5_log_index`, which is non-decreasing in ``n``. Distances from
    ``max_distance`` on all fall in the last bucket, ``half - 1``.
    """
    exact = half // 2
    n_log = half - exact
    m = torch.arange(
        1, n_log, dtype=torch.int64
    )  # (n_log - 1,) logarithmic buckets after the first
    lo = torch.full_like(m, exact)  # index(exact) = 0 < m
    hi = torch.full_like(m, max_distance)  # index(max_distance) >= n_log - 1 >= m
    while bool((hi - lo > 1).any()):
        mid = (lo + hi) // 2
        reached = _t5_log_index(mid, exact, max_distance, n_log) >= m
        hi = torch.where(reached, mid, hi)
        lo = torch.where(reached, lo, mid)
    return torch.cat([torch.arange(1, exact + 1, dtype=torch.int64), hi])  # (half - 1,)


def _buckets(
    relative_position: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """:func:`relative_position_bucket` for checked arguments -> int64 of the same shape."""
    half = num_buckets // 2 if bidirectional else num_buckets
    starts = _bucket_starts(half, max_distance).to(relative_position.device)
    # every |r| >= max_distance shares the last bucket, so clamping first changes no id (and
    # keeps abs() of the most negative int64 from overflowing)
    r = relative_position.to(torch.int64).clamp(-max_distance, max_distance)
    if bidirectional:
        distance = r.abs()
        first = torch.where(r > 0, half, 0)  # keys after the query use the upper half
    else:
        distance = (-r).clamp(min=0)  # keys after the query (masked anyway) -> distance 0
        first = 0
    return first + torch.bucketize(distance, starts, right=True)


def relative_position_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """T5's bucket id of each relative position ``r = key position - query position``.

    With B buckets per direction (``num_buckets // 2`` if bidirectional, else ``num_buckets``),
    E = B // 2 exact buckets and M = ``max_distance``, a distance n >= 0 gets bucket n if n < E,
    else ``min(E + floor(log(n/E) / log(M/E) * (B - E)), B - 1)`` (Raffel et al. 2020, Sec. 2.1;
    Mesh TensorFlow's ``_relative_position_bucket``). The logarithm is float32, as T5's, so the
    ids are those T5 checkpoints were trained with. Bidirectional: n = abs(r), keys after the
    query in buckets B + 1 .. 2B - 1 (bucket B is never used); causal: n = max(-r, 0). Tested in
    ``tests/core/test_t5_bias.py`` against Hugging Face's ``T5Attention._relative_position_bucket``
    and the rule in exact integer arithmetic away from ties.

    Args:
        relative_position: integer tensor of any shape ``(...)``: key minus query position, in
            tokens (floating tensors are refused; ``.round().long()`` if that is meant).
        bidirectional: True (an encoder) or False (a causal decoder).
        num_buckets: buckets in all, an even integer >= 4 if bidirectional, >= 2 otherwise (T5:
            32), at most ``MAX_BUCKETS``.
        max_distance: an integer > E from which every distance shares the last bucket (T5: 128),
            at most 2**53.

    Returns:
        int64 tensor of shape ``(...)`` on the input's device, ids in ``0 .. num_buckets - 1``.

    Raises:
        TypeError: a non-integer tensor (bool included), a flag not a bool, a count not an int.
        ValueError: ``num_buckets`` or ``max_distance`` outside the ranges above.
    """
    if not isinstance(relative_position, torch.Tensor):
        raise TypeError(
            "relative_position must be an integer torch.Tensor (key position - query position), "
            f"got {type(relative_position).__name__}"
        )
    if (
        relative_position.is_floating_point()
        or relative_position.is_complex()
        or relative_position.dtype == torch.bool
    ):
        raise TypeError(
            "relative_position must be an integer tensor (key position - query position, in "
            f"tokens), got dtype {relative_position.dtype}; for integer-valued floats pass "
            "relative_position.round().long()"
        )
    bidirectional, num_buckets, max_distance = _check_buckets(
        bidirectional, num_buckets, max_distance, "relative_position_bucket"
    )
    return _buckets(relative_position, bidirectional, num_buckets, max_distance)


class T5RelativePositionBias(nn.Module):
    """T5's learned relative position bias: one scalar per (bucket, head), added to the scores.

    Entry ``(h, i, j)`` is ``W[bucket(j - (offset + i)), h]`` for the table
    ``W = relative_attention_bias.weight`` ``(num_buckets, num_heads)``, named and shaped as a T5
    checkpoint's, so ``copy_`` loads one (Raffel et al. 2020, Sec. 2.1). T5 computes it in the
    first layer and reuses it in every layer, and uses no 1/sqrt(d_h):
    :func:`~posenc_core.attention.attention` scales the dot product, so pass ``q * sqrt(d_h)`` to
    run T5's weights through it. Tested in ``tests/core/test_t5_bias.py`` against Hugging Face's
    ``compute_bias`` and ``T5Attention`` with the same weights.

    Args:
        num_heads: number of heads, a positive integer at most ``MAX_HEADS``; the table may take
            at most ``MAX_RESULT_BYTES``.
        bidirectional: True (an encoder) or False (a causal decoder); see
            :func:`relative_position_bucket`.
        num_buckets: as in :func:`relative_position_bucket` (T5: 32).
        max_distance: as in :func:`relative_position_bucket` (T5: 128).
        init_std: positive standard deviation of the table's normal initialisation (1.0:
            ``nn.Embedding``'s default; Hugging Face's T5 uses ``d_model ** -0.5``).
    """

    def __init__(
        self,
        num_heads: int,
        *,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
        init_std: float = 1.0,
    ) -> None:
        super().__init__()
        where = "T5RelativePositionBias"
        self.num_heads = check.size("num_heads", num_heads, check.MAX_HEADS, "heads", where=where)
        self.bidirectional, self.num_buckets, self.max_distance = _check_buckets(
            bidirectional, num_buckets, max_distance, where
        )
        dtype = torch.get_default_dtype()
        check.result_size(
            where,
            "the table",
            {"num_buckets": self.num_buckets, "num_heads": self.num_heads},
            self.num_buckets * self.num_heads,
            dtype.itemsize,
            precision=f"{dtype} parameters",
        )
        init_std = check.real_number("init_std", init_std)
        if init_std <= 0:
            raise ValueError(f"init_std must be a positive number, got {init_std}")
        self.relative_attention_bias = nn.Embedding(self.num_buckets, self.num_heads)  # (nb, h)
        nn.init.normal_(self.relative_attention_bias.weight, mean=0.0, std=init_std)

    def extra_repr(self) -> str:
        return (
            f"num_heads={self.num_heads}, bidirectional={self.bidirectional}, "
            f"num_buckets={self.num_buckets}, max_distance={self.max_distance}"
        )

    def forward(self, query_length: int, key_length: int, *, offset: int = 0) -> torch.Tensor:
        """The additive bias for ``query_length`` queries against ``key_length`` keys.

        Query row i sits at position ``offset + i`` and key column j at j, so with a KV cache of n
        tokens ``forward(1, n + 1, offset=n)`` is the last row of ``forward(n + 1, n + 1)``.

        Args:
            query_length: number of queries, a positive integer.
            key_length: number of keys, a positive integer; the bias and its bucket ids may take
                at most ``MAX_RESULT_BYTES``.
            offset: position of the first query, an integer >= 0 (offset + query_length - 1
                <= 2**53).

        Returns:
            ``(num_heads, query_length, key_length)`` in the table's dtype and device; it broadcasts
            into the scores ``(b, h, q, k)`` of :func:`~posenc_core.attention.attention`. It holds
            no mask: pass ``causal=True`` for a decoder.
        """
        query_length = check.positive_int("query_length", query_length)
        key_length = check.positive_int("key_length", key_length)
        offset = check.position_offset("offset", offset, query_length)
        weight = self.relative_attention_bias.weight
        check.result_size(
            "T5RelativePositionBias.forward",
            "the bias and its bucket ids",
            {
                "query_length": query_length,
                "key_length": key_length,
                "num_heads": self.num_heads,
            },
            query_length * key_length,
            self.num_heads * weight.dtype.itemsize + 8,
            precision=f"{weight.dtype} per head and an int64 bucket id per pair",
            advice="compute the bias for chunks of queries (offset= the first one's position)",
        )
        device = weight.device
        query_pos = torch.arange(offset, offset + query_length, device=device)  # (q,)
        key_pos = torch.arange(key_length, device=device)  # (k,)
        relative = key_pos[None, :] - query_pos[:, None]  # (q, k), j - i
        buckets = _buckets(relative, self.bidirectional, self.num_buckets, self.max_distance)
        return self.relative_attention_bias(buckets).permute(2, 0, 1)  # (q, k, h) -> (h, q, k)
