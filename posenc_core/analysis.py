"""Measurements the chapters make on positional encodings.

* similarity of encodings across positions (cosine-similarity matrices, similarity by offset);
* how distinguishable positions stay for a base and length (nearest-neighbour margins);
* the RoPE score as a function of relative distance, and RoFormer's decay bound;
* the lower bound on the RoPE base for a context length (Men et al. 2024);
* the four-term decomposition of an attention score when position is added to content.

All computations are in float64. Notation: n = positions, d = width, s = sequence,
L = context length.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from . import _validation as check
from ._numerics import warm_up_trigonometry
from .rope import rope_angles
from .sinusoidal import _frequencies

__all__ = [
    "cosine_similarity_matrix",
    "similarity_by_offset",
    "sinusoidal_similarity",
    "first_rise",
    "largest_reversal",
    "neighbour_distance",
    "count_pairs",
    "nearest_neighbour_margin",
    "rope_score_vs_distance",
    "rope_decay_bound",
    "rope_bound_curve",
    "rope_base_meets_bound",
    "rope_base_lower_bound",
    "MAX_BOUND_CONTEXT",
    "MAX_BOUND_EVALUATIONS",
    "MAX_BOUND_SEARCH_STEP",
    "score_decomposition",
]


def cosine_similarity_matrix(table: torch.Tensor) -> torch.Tensor:
    """Cosine similarity between every pair of rows, ``u_p . u_q / (|u_p| |u_q|)``.

    Checked in ``tests/core/test_analysis.py`` against the closed form ``mean_i cos(omega_i k)``
    for a sinusoidal table (Vaswani et al. 2017, Sec. 3.5).

    Args:
        table: ``(n, d)`` finite floating encodings, d >= 1 (rows with zero norm are rejected);
            the float64 result (n x n x 8 bytes) may take at most ``MAX_RESULT_BYTES`` (4 GiB):
            n up to 23170.

    Returns:
        float64 tensor ``(n, n)`` with ones on the diagonal.
    """
    t = _check_table(table)
    _check_square("cosine_similarity_matrix", "the (n, n) similarity matrix", t.shape[0], 1)
    return _cosine_similarity(t)


def _check_square(where: str, what: str, n: int, count: int) -> None:
    """Refuse ``count`` float64 (n, n) matrices above ``MAX_RESULT_BYTES``."""
    check.result_size(where, what, {"n": n}, count * n * n, advice="use fewer rows")


def _cosine_similarity(t: torch.Tensor) -> torch.Tensor:
    """:func:`cosine_similarity_matrix` of a checked float64 table ``(n, d)`` -> ``(n, n)``."""
    u = t / t.norm(dim=-1, keepdim=True)  # (n, d), unit rows
    return u @ u.T


def _check_table(table: torch.Tensor, min_rows: int = 0) -> torch.Tensor:
    """A finite floating ``(n, d)`` table with d >= 1, n >= min_rows and no row of zeros,
    returned detached as float64."""
    check.tensor("table", table, min_dim=2, floating=True)
    if table.dim() != 2 or table.shape[1] < 1 or table.shape[0] < min_rows:
        rows = f"n >= {min_rows} and " if min_rows else ""
        raise ValueError(
            f"table must have shape (n, d) with {rows}d >= 1, got shape {tuple(table.shape)}"
        )
    check.finite("table", table)
    t = table.detach().to(torch.float64)
    zero = torch.nonzero(t.norm(dim=-1) == 0)
    if zero.numel():
        raise ValueError(
            f"table must not have a row of zeros (its cosine similarity is undefined), but row "
            f"{int(zero[0, 0])} of table with shape {tuple(table.shape)} is all zeros"
        )
    return t


def _check_curve(curve: torch.Tensor) -> torch.Tensor:
    """A finite 1-D real (integer or floating) tensor, returned as float64."""
    check.tensor("curve", curve, min_dim=1)
    if curve.dtype == torch.bool or curve.is_complex():
        raise TypeError(
            f"curve must be a real (integer or floating-point) tensor, got dtype {curve.dtype}"
        )
    if curve.dim() != 1:
        raise ValueError(
            "curve must be 1-D (one value per offset k = 0, 1, ...), got shape "
            f"{tuple(curve.shape)}"
        )
    check.finite("curve", curve)
    return curve.detach().to(torch.float64)


def similarity_by_offset(table: torch.Tensor, max_offset: int | None = None) -> torch.Tensor:
    """Mean cosine similarity between rows p and p + k, for k = 0 .. max_offset.

    For a sinusoidal table this is the same for every p (see :func:`sinusoidal_similarity`);
    for a learned table it is the average over the available pairs.

    Args:
        table: ``(n, d)`` finite floating encodings, n >= 1; the (n, n) float64 similarity
            matrix it needs may take at most ``MAX_RESULT_BYTES`` (4 GiB): n up to 23170.
        max_offset: largest k, a non-negative integer < n (default n - 1).

    Returns:
        float64 tensor ``(max_offset + 1,)``.
    """
    t = _check_table(table, min_rows=1)
    n = t.shape[0]
    max_offset = n - 1 if max_offset is None else check.non_negative_int("max_offset", max_offset)
    if max_offset >= n:
        raise ValueError(f"max_offset must be < the number of rows n={n}, got {max_offset}")
    _check_square("similarity_by_offset", "the (n, n) similarity matrix", n, 1)
    sim = _cosine_similarity(t)  # (n, n)
    return torch.stack([torch.diagonal(sim, offset=k).mean() for k in range(max_offset + 1)])


def sinusoidal_similarity(
    offsets: torch.Tensor | list | int, d_model: int, *, base: float = 10000.0
) -> torch.Tensor:
    """Cosine similarity of PE(p) and PE(p + k), which depends only on k: ``mean_i cos(w_i k)``.

    From ``PE(p) . PE(p+k) = sum_i cos(w_i k)`` and ``PE(p) . PE(p) = d_model / 2`` (Vaswani et
    al. 2017, Sec. 3.5); tested in ``tests/core/test_analysis.py`` against the table's own rows.

    Args:
        offsets: any shape ``K`` of finite real offsets k.
        d_model, base: as in :func:`~posenc_core.sinusoidal.sinusoidal_frequencies`; the
            float64 angles may take at most ``MAX_RESULT_BYTES``.

    Returns:
        float64 tensor of shape ``K``.
    """
    k = check.as_positions("offsets", offsets)
    d_model = check.width("d_model", d_model, where="sinusoidal_similarity")
    base = check.base_value("base", base)
    check.result_size(
        "sinusoidal_similarity",
        "the angles",
        {"offsets.shape": tuple(k.shape), "d_model": d_model},
        k.numel() * (d_model // 2),
        advice="evaluate the offsets in chunks",
    )
    omega = _frequencies(d_model, base).to(k.device)  # (d/2,)
    warm_up_trigonometry()  # once per process: see the Numerics page
    return torch.cos(k.unsqueeze(-1) * omega).mean(-1)


def first_rise(curve: torch.Tensor) -> int | None:
    """The first offset k at which a similarity-versus-offset curve goes up, or None.

    With ``curve[k]`` the similarity at offset k (k = 0, 1, ...), returns the smallest k with
    ``curve[k] > curve[k - 1] + 1e-12`` (the tolerance ignores float64 rounding noise on a
    flat stretch). A curve that never rises ("closer positions are always more similar")
    returns None. Checked in ``tests/core/test_analysis.py`` against the first rise of cos(k)
    found by hand and by a plain loop.

    Args:
        curve: 1-D finite real tensor ``(K,)``, e.g. from :func:`sinusoidal_similarity`.

    Returns:
        the offset k (an int in 1 .. K - 1), or None.
    """
    s = _check_curve(curve)
    diffs = torch.diff(s)
    ups = torch.nonzero(diffs > 1e-12)
    return None if ups.numel() == 0 else int(ups[0, 0]) + 1


def largest_reversal(curve: torch.Tensor) -> tuple[float, int, int]:
    """The largest amount by which a farther offset beats a nearer one on a similarity curve.

    Returns the largest ``curve[far] - curve[near]`` over ``near < far`` (0.0 and equal
    offsets for a curve that never rises), with the two offsets.

    Checked in ``tests/core/test_analysis.py`` against a brute-force search over all pairs.

    Args:
        curve: 1-D finite real tensor ``(K,)`` with K >= 1, similarity-versus-offset values,
            e.g. from :func:`sinusoidal_similarity`.

    Returns:
        ``(gap, near, far)``: a float >= 0 and two offsets with ``near <= far``.
    """
    s = _check_curve(curve)
    if s.numel() == 0:
        raise ValueError("curve must have at least one value, got shape (0,)")
    later_max = torch.flip(
        torch.cummax(torch.flip(s, [0]), 0).values, [0]
    )  # max of s at offsets >= k
    near = int(torch.argmax(later_max - s))
    far = near + int(torch.argmax(s[near:]))
    return float(s[far] - s[near]), near, far


def neighbour_distance(d_model: int, *, base: float = 10000.0) -> float:
    """Distance between the sinusoidal encodings of neighbouring positions, the same for every p.

    ``|PE(p+1) - PE(p)|**2 = sum_i 2 (1 - cos omega_i)``, from the angle-addition formulas
    applied to the table of Vaswani et al. 2017, Sec. 3.5 (checked against two rows of the
    table in ``tests/core/test_analysis.py``).

    Args:
        d_model: model width, a positive even integer, at most 2**20 (``MAX_WIDTH``).
        base: frequency base, finite and > 1.

    Returns:
        the distance, a float in (0, sqrt(2 d_model)].
    """
    d_model = check.width("d_model", d_model, where="neighbour_distance")
    omega = _frequencies(d_model, check.base_value("base", base))
    warm_up_trigonometry()  # once per process: see the Numerics page
    return float((2 * (1 - torch.cos(omega))).sum().sqrt())


def count_pairs(
    head_or_model_dim: int, length: int, *, base: float = 10000.0, frozen_angle: float = 0.1
) -> dict[str, int]:
    """Sort the (sin, cos) pairs by how far they turn over a sequence of ``length`` positions.

    Pair i turns by ``omega_i * length`` radians, omega_i = base**(-2i/d) (the sinusoidal table,
    Vaswani et al. 2017, Sec. 3.5, and RoPE, Su et al. 2021). Tested in
    ``tests/core/test_analysis.py`` against a direct count and the closed form
    floor(d/2 log(L/2pi) / log b) + 1.

    Args:
        head_or_model_dim: d_model (or head_dim), positive and even, at most ``MAX_WIDTH``.
        length: sequence length L, a positive integer, at most 2**53.
        base: frequency base, finite and > 1.
        frozen_angle: pairs turning less than this many radians count as frozen.

    Returns:
        dict with ``full_turn`` (omega_i L >= 2 pi), ``frozen`` (omega_i L < frozen_angle) and
        ``partial`` (the rest); a float64 angle on a threshold falls on the side it gives.
    """
    head_or_model_dim = check.width("head_or_model_dim", head_or_model_dim, where="count_pairs")
    length = check.position_count("length", length, where="count_pairs")
    base = check.base_value("base", base)
    frozen_angle = check.real_number("frozen_angle", frozen_angle)
    if not 0 < frozen_angle < 2 * math.pi:
        raise ValueError(f"frozen_angle must be in (0, 2*pi), got {frozen_angle}")
    angle = _frequencies(head_or_model_dim, base) * length  # (d/2,)
    full = int((angle >= 2 * math.pi).sum())
    frozen = int((angle < frozen_angle).sum())
    return {"full_turn": full, "partial": angle.numel() - full - frozen, "frozen": frozen}


def nearest_neighbour_margin(table: torch.Tensor) -> dict[str, Any]:
    """How distinguishable the rows of a table are.

    For each position p, the Euclidean distance to the nearest other row, and the largest
    cosine similarity to any other row. Checked in ``tests/core/test_analysis.py`` on a small
    table whose distances and similarities are known by hand.

    Args:
        table: ``(n, d)`` finite floating encodings, n >= 2, d >= 1, no row of zeros; the two
            (n, n) float64 matrices it needs (distances, similarities) may take at most
            ``MAX_RESULT_BYTES`` (4 GiB): n up to 16384.

    Returns:
        dict with ``min_distance`` (float, smallest over p), ``nearest_distance`` (float64
        ``(n,)``), ``max_similarity`` (float, largest off-diagonal cosine similarity),
        ``argmax_pair`` ((p, q) achieving it) and ``all_distinct`` (no two rows equal).
    """
    t = _check_table(table, min_rows=2)  # (n, d), float64
    _check_square(
        "nearest_neighbour_margin", "the (n, n) distances and similarities", t.shape[0], 2
    )
    dist = torch.cdist(t, t)  # (n, n)
    dist.fill_diagonal_(float("inf"))
    nearest = dist.min(dim=1).values  # (n,)
    sim = _cosine_similarity(t)  # (n, n)
    sim.fill_diagonal_(-float("inf"))
    flat = int(torch.argmax(sim))
    n = t.shape[0]
    return {
        "min_distance": float(nearest.min()),
        "nearest_distance": nearest,
        "max_similarity": float(sim.flatten()[flat]),
        "argmax_pair": (flat // n, flat % n),
        "all_distinct": bool(nearest.min() > 0),
    }


def rope_score_vs_distance(
    distances: torch.Tensor | list | int,
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: Mapping[str, Any] | None = None,
    q: torch.Tensor | None = None,
    k: torch.Tensor | None = None,
) -> torch.Tensor:
    """The RoPE score <R_m q, R_n k> / head_dim as a function of the distance n - m.

    With the default q = k = all ones (RoFormer's decay argument, Su et al. 2021, Sec. 3.4.3) the
    curve is mean_i cos(theta_i * distance): 1 at distance 0, smaller on average as the distance
    grows, though not monotonically; random vectors show no systematic decay (Barbero et al.
    2024). Tested in ``tests/core/test_analysis.py`` against rotating the vectors with
    :func:`~posenc_core.rope.apply_rope`.

    Args:
        distances: any shape ``K`` of finite real relative distances n - m.
        head_dim, base, scaling: as in :func:`~posenc_core.rope.rope_frequencies`; the float64
            angles may take at most ``MAX_RESULT_BYTES``.
        q, k: optional finite floating ``(head_dim,)`` vectors, paired as (2i, 2i+1).

    Returns:
        float64 tensor of shape ``K``.
    """
    dist = check.as_positions("distances", distances)  # K, float64
    d = check.width("head_dim", head_dim, where="rope_score_vs_distance")
    _check_curve_size("rope_score_vs_distance", dist, d, d)
    warm_up_trigonometry()  # once per process: see the Numerics page
    angles = rope_angles(dist, d, base=base, scaling=scaling)  # K + (d/2,)
    if q is None and k is None:
        return torch.cos(angles).mean(-1)
    q = torch.ones(d, dtype=torch.float64) if q is None else q
    k = torch.ones(d, dtype=torch.float64) if k is None else k
    for name, t in (("q", q), ("k", k)):
        check.tensor(name, t, min_dim=1, floating=True)
        if t.shape != (d,):
            raise ValueError(f"{name} must have shape (head_dim,) = ({d},), got {tuple(t.shape)}")
        check.finite(name, t)
    q2 = q.detach().to(torch.float64).reshape(d // 2, 2).to(angles.device)
    k2 = k.detach().to(torch.float64).reshape(d // 2, 2).to(angles.device)
    # <q_i, R(a) k_i> = cos(a)(q0 k0 + q1 k1) + sin(a)(q0 (-k1) + q1 k0)
    dot = (q2 * k2).sum(-1)  # (d/2,)
    cross = q2[:, 1] * k2[:, 0] - q2[:, 0] * k2[:, 1]  # (d/2,)
    return (torch.cos(angles) * dot + torch.sin(angles) * cross).sum(-1) / d


def rope_decay_bound(
    distances: torch.Tensor | list | int, head_dim: int, *, base: float = 10000.0
) -> torch.Tensor:
    """RoFormer's upper bound on the relative score, ``(1/(d/2)) sum_j abs(S_j)`` (Su et al. 2021,
    Eq. 37), with ``S_j = sum_{i<j} exp(1j * distance * theta_i)``.

    By Abel summation the score is at most ``max_i abs(h_{i+1} - h_i) * sum_j abs(S_j)``; the paper
    plots the mean of ``abs(S_j)``, which decays with distance. Tested in
    ``tests/core/test_analysis.py`` against the partial sums computed with numpy.

    Args:
        distances: any shape ``K`` of finite real relative distances.
        head_dim: d, a positive even integer; the complex partial sums may take at most
            ``MAX_RESULT_BYTES``.
        base: frequency base, finite and > 1 (theta_i = base**(-2i/d)).

    Returns:
        float64 tensor of shape ``K``; d/4 + 1/2 at distance 0.
    """
    dist = check.as_positions("distances", distances)  # K, float64
    head_dim = check.width("head_dim", head_dim, where="rope_decay_bound")
    _check_curve_size("rope_decay_bound", dist, head_dim, head_dim, "complex128 partial sums")
    angles = rope_angles(dist, head_dim, base=base)  # K + (d/2,)
    warm_up_trigonometry()  # once per process: see the Numerics page
    partial = torch.cumsum(torch.polar(torch.ones_like(angles), angles), dim=-1)  # S_1 .. S_{d/2}
    return partial.abs().mean(-1)


def _check_curve_size(
    where: str, dist: torch.Tensor, head_dim: int, per_distance: int, what: str = ""
) -> None:
    """Refuse ``per_distance`` float64 values per distance (8 bytes each) above the limit."""
    check.result_size(
        where,
        what or "the angles, cosines and sines",
        {"distances.shape": tuple(dist.shape), "head_dim": head_dim},
        dist.numel() * per_distance,
        advice="evaluate the distances in chunks",
    )


def score_decomposition(
    content: torch.Tensor, position: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor
) -> dict[str, torch.Tensor]:
    """Split the attention score of (content + position) into four terms.

    With x_i = e_i + p_i and A = W_q W_k^T / sqrt(d_h), x_i A x_j^T = e_i A e_j^T + e_i A p_j^T +
    p_i A e_j^T + p_i A p_j^T (Ke, He and Liu 2021, TUPE). Tested in
    ``tests/core/test_analysis.py`` against the score of the summed input.

    Args:
        content: ``(s, d)`` finite floating token embeddings e.
        position: ``(s, d)`` finite floating position encodings p.
        w_q, w_k: ``(d, d_h)`` finite floating projections, d_h >= 1; the float64 results may
            take at most ``MAX_RESULT_BYTES`` together.

    Returns:
        dict of float64 ``(s, s)`` tensors: ``content_content``, ``content_position``,
        ``position_content``, ``position_position`` and their sum ``total``.
    """
    for name, t in (("content", content), ("position", position), ("w_q", w_q), ("w_k", w_k)):
        check.tensor(name, t, min_dim=2, floating=True)
        if t.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
    if content.shape != position.shape:
        raise ValueError(
            f"content and position must have the same shape, got {tuple(content.shape)} and "
            f"{tuple(position.shape)}"
        )
    if w_q.shape != w_k.shape or w_q.shape[0] != content.shape[1] or w_q.shape[1] < 1:
        raise ValueError(
            f"w_q and w_k must both have shape (d={content.shape[1]}, d_h) with d_h >= 1, got "
            f"{tuple(w_q.shape)} and {tuple(w_k.shape)}"
        )
    s, d = content.shape
    check.result_size(
        "score_decomposition",
        "the five (s, s) terms and the (d, d) product",
        {"s": s, "d": d},
        5 * s * s + d * d,
        advice="decompose the scores of fewer tokens",
    )
    for name, t in (("content", content), ("position", position), ("w_q", w_q), ("w_k", w_k)):
        check.finite(name, t)
    e, p = content.detach().double(), position.detach().double()
    a = w_q.detach().double() @ w_k.detach().double().T / math.sqrt(w_q.shape[1])  # (d, d)
    terms = {
        "content_content": e @ a @ e.T,
        "content_position": e @ a @ p.T,
        "position_content": p @ a @ e.T,
        "position_position": p @ a @ p.T,
    }
    terms["total"] = sum(terms.values())  # type: ignore[assignment]
    return terms


# --- the RoPE base bound of Men et al. 2024 -------------------------------------------------
#
#   B(m) = sum_{i=0}^{d/2-1} cos(m theta_i),  theta_i = b**(-2i/d),  m = 0 .. L
#
# is (d/2 times) the RoPE score of an all-ones query and key at distance m, and, up to the
# factor 2 sigma**2, what Men et al. 2024 ("Base of RoPE Bounds Context Length", Sec. 3, Eq.
# for B_{m,theta}) show a similar key gains over a random one at distance m. Their bound asks
# B(m) >= 0 for every m up to the context length.

_BOUND_CHUNK_ELEMENTS = 32768  # cos evaluations per step of the search
_BOUND_WITNESSES = 64  # violating distances kept to test the next base first


def rope_bound_curve(context_length: int, head_dim: int, *, base: float = 10000.0) -> torch.Tensor:
    """B(m) = sum_i cos(m * theta_i) for every distance m = 0 .. context_length.

    Men et al. 2024, Sec. 3: ``2 sigma**2 B(m)`` is how much more attention a key similar to the
    query gets than a random one at distance m. It is ``head_dim / 2`` times
    :func:`rope_score_vs_distance` with all-ones q and k; tested in
    ``tests/core/test_base_bound.py`` and against numpy's float64 cos.

    Args:
        context_length: L, a non-negative integer; the float64 angles may take at most
            ``MAX_RESULT_BYTES`` (:func:`rope_base_meets_bound` evaluates longer ones in chunks).
        head_dim: d, a positive even integer, at most ``MAX_WIDTH``.
        base: RoPE base b, finite and > 1 (theta_i = b**(-2i/d)).

    Returns:
        float64 tensor ``(L + 1,)``; ``B(0) = d / 2``.
    """
    context_length = check.non_negative_int("context_length", context_length)
    head_dim = check.width("head_dim", head_dim, where="rope_bound_curve")
    check.result_size(
        "rope_bound_curve",
        "the (context_length + 1, head_dim / 2) angles",
        {"context_length": context_length, "head_dim": head_dim},
        (context_length + 1) * (head_dim // 2),
        advice="rope_base_meets_bound tests B(m) >= 0 in chunks",
    )
    base = check.base_value("base", base)
    m = torch.arange(context_length + 1, dtype=torch.float64)  # (L+1,)
    warm_up_trigonometry()  # once per process: see the Numerics page
    return torch.cos(rope_angles(m, head_dim, base=base)).sum(-1)  # (L+1,)


def rope_base_meets_bound(context_length: int, head_dim: int, *, base: float) -> bool:
    """Whether B(m) >= 0 for every m = 0 .. context_length (Men et al. 2024, Sec. 3).

    ``rope_bound_curve(...).min() >= 0``, evaluated in float64 in chunks of distances by the code
    of :func:`rope_base_lower_bound`; tested against numpy in ``tests/core/test_base_bound.py``.

    Args:
        context_length: L, a non-negative integer, with (L + 1) x d/2 at most
            :data:`MAX_BOUND_EVALUATIONS` cosines.
        head_dim: d, a positive even integer, at most ``MAX_WIDTH``.
        base: RoPE base b, finite and > 1.

    Returns:
        True when the base meets the bound for L.
    """
    context_length = check.non_negative_int("context_length", context_length)
    head_dim = check.width("head_dim", head_dim, where="rope_base_meets_bound")
    _check_work(
        "rope_base_meets_bound",
        context_length,
        head_dim,
        (context_length + 1) * (head_dim // 2),
        MAX_BOUND_EVALUATIONS,
        "MAX_BOUND_EVALUATIONS: about 20 s on one core",
    )
    base = check.base_value("base", base)
    with _one_thread():
        return _BoundSearch(context_length, head_dim).exclusion(math.log(base)) is None


MAX_BOUND_CONTEXT = 2**18
"""The largest ``context_length`` :func:`rope_base_lower_bound` accepts (about a minute)."""

MAX_BOUND_EVALUATIONS = 2**32
"""The most cosines, (context_length + 1) x head_dim / 2, :func:`rope_base_meets_bound`
evaluates: about 20 s on one core; L up to 2**26 - 1 for head_dim 128."""

MAX_BOUND_SEARCH_STEP = 2**24
"""The most cosines per step, context_length x head_dim / 2, of :func:`rope_base_lower_bound`:
2**18 x 64, the documented worst case of about a minute (head_dim 128 at L = 2**18); the cost
grows with both."""


def _check_work(where: str, length: int, head_dim: int, work: int, limit: int, why: str) -> None:
    """Refuse a search of ``work`` cosine evaluations above ``limit``, naming L and head_dim."""
    if work > limit:
        raise ValueError(
            f"{where}: context_length={length} x head_dim={head_dim} is too large: it needs "
            f"{work} cosine evaluations, at most {limit} ({why}) are allowed"
        )


def rope_base_lower_bound(
    context_length: int, head_dim: int, *, island: float = 1e-4, rtol: float = 1e-7
) -> float:
    """The smallest RoPE base b > 1 with B(m) = sum_i cos(m b**(-2i/d)) >= 0 for all m <= L.

    The lower bound of Men et al. 2024 ("Base of RoPE Bounds Context Length", Sec. 3, Table 1),
    in float64. B(m) is not monotone in b, so the feasible set is not an interval and bisection
    alone is unsound: the search, in u = ln b, scans upwards from b = 1 jumping over certified
    infeasible stretches (at a base with some B(m) < 0, every base up to u + (-B(m)) / K_m fails
    too, K_m = sum_i a_i phi_i min(1, phi_i) with a_i = 2i/d, phi_i = m theta_i, bounding
    abs(dB/du)), then bisects to ``rtol``. Guarantee: the result meets the bound, an edge of the
    feasible set lies within ``exp(-rtol)`` below it, and no feasible base lies below that edge
    except in a stretch narrower than ``island`` in ln b. Deterministic; runs torch on one thread.
    Tested in ``tests/core/test_base_bound.py`` against a brute-force scan and Su Jianlin's
    recomputation of the paper's table. Men et al.'s own search checks m < L:
    ``rope_base_lower_bound(L - 1, d)``.

    Args:
        context_length: L, an integer in 2 .. :data:`MAX_BOUND_CONTEXT`, with L x d/2 at most
            :data:`MAX_BOUND_SEARCH_STEP`.
        head_dim: d, an even integer >= 6 (a finite bound exists from three pairs on), at most
            ``MAX_WIDTH``.
        island: width in ln b below which a stretch of feasible bases may be missed, in
            [1e-6, 0.1].
        rtol: accuracy of the result in ln b, in [1e-12, 1e-3] and at most ``island``.

    Returns:
        the base, a float > 1.
    """
    context_length = check.int_in_range("context_length", context_length, 2)
    if context_length > MAX_BOUND_CONTEXT:
        raise ValueError(
            f"context_length must be at most 2**18 = {MAX_BOUND_CONTEXT} for the base bound "
            f"search (2**18 takes about a minute on two cores and the cost grows faster than "
            f"L, so {context_length} would take hours), got {context_length}"
        )
    head_dim = check.width("head_dim", head_dim, where="rope_base_lower_bound")
    if head_dim < 6:
        raise ValueError(
            f"head_dim must be an even integer >= 6 for the base bound (with d/2 >= 3 pairs a "
            f"large enough base always meets it; with one pair none does), got {head_dim}"
        )
    _check_work(
        "rope_base_lower_bound",
        context_length,
        head_dim,
        context_length * (head_dim // 2),
        MAX_BOUND_SEARCH_STEP,
        "MAX_BOUND_SEARCH_STEP cosines per step, about a minute in all",
    )
    island = check.real_in_range("island", island, 1e-6, 0.1)
    rtol = check.real_in_range("rtol", rtol, 1e-12, 1e-3)
    if rtol > island:
        raise ValueError(f"rtol must be at most island={island}, got {rtol}")
    with _one_thread():
        return _BoundSearch(context_length, head_dim).lower_bound(island, rtol)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run torch on one intra-op thread inside the block, restoring the setting after: the
    search's thousands of small steps gain nothing from threads and lose much on busy cores.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class _BoundSearch:
    """Feasibility tests of B(m) >= 0, m = 0 .. L, for one (L, d), with certified exclusion
    radii in u = ln b. Keeps the distances that failed last time ("witnesses") and the chunk
    they came from, and tests them first at the next base: any negative B(m) certifies."""

    def __init__(self, context_length: int, head_dim: int) -> None:
        self.length = context_length
        self.head_dim = head_dim
        self.a = torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim  # (d/2,), 2i/d
        self.witnesses: torch.Tensor | None = None  # (w,) distances m
        self.last_chunk = 0
        self.chunk = max(16, _BOUND_CHUNK_ELEMENTS // (head_dim // 2))  # rows m per step

    def _radius(self, m: torch.Tensor, theta: torch.Tensor, keep: bool) -> float | None:
        """Largest certified radius over distances m ``(k,)`` with B(m) < 0, or None; with
        ``keep``, the distances with the largest radii become the witnesses."""
        warm_up_trigonometry()  # once per process: see the Numerics page
        phi = m.unsqueeze(-1) * theta  # (k, d/2)
        curve = torch.cos(phi).sum(-1)  # (k,)
        bad = curve < 0  # (k,)
        n_bad = int(bad.sum())
        if n_bad == 0:
            return None
        # |dB(m)/du| <= sum_i a_i phi_i min(1, phi_i) for every larger u
        slope = (self.a * phi * phi.clamp(max=1.0)).sum(-1)  # (k,)
        # (torch.where, not boolean indexing: indexing by a mask is slow on small tensors)
        radius = torch.where(bad, -curve / slope.clamp(min=1e-300), -1.0)  # (k,)
        if keep:
            self.witnesses = m[torch.topk(radius, min(_BOUND_WITNESSES, n_bad)).indices]
        return float(radius.max())

    def exclusion(self, u: float) -> float | None:
        """None if base exp(u) meets the bound, else a radius r > 0 such that every base in
        [exp(u), exp(u + r)) fails it."""
        theta = _frequencies(self.head_dim, math.exp(u))  # (d/2,), as rope_frequencies
        if self.witnesses is not None:
            r = self._radius(self.witnesses, theta, keep=False)
            if r is not None:
                return r
        n_chunks = self.length // self.chunk + 1
        order = [self.last_chunk] + [c for c in range(n_chunks) if c != self.last_chunk]
        for c in order:
            start = c * self.chunk
            stop = min(self.length, start + self.chunk - 1)
            m = torch.arange(start, stop + 1, dtype=torch.float64)  # (chunk,)
            r = self._radius(m, theta, keep=True)
            if r is not None:
                self.last_chunk = c
                return r
        return None

    def lower_bound(self, island: float, rtol: float) -> float:
        """The certified scan, then the bisection (see :func:`rope_base_lower_bound`)."""
        n_pairs = self.head_dim // 2  # >= 3 and L >= 2 here (rope_base_lower_bound checks)
        # a base this large or larger meets the bound, see the public docstring
        u_max = n_pairs * math.log(self.length / math.acos(1 / (n_pairs - 1)))
        lo, u = 0.0, island  # lo: every base in (1, exp(lo)) is certified or scanned
        while u < u_max:
            r = self.exclusion(u)
            if r is None:
                break
            lo = u + r
            u += max(island, r)
        hi = min(u, u_max)  # feasible (evaluated, or by the closed-form argument)
        lo = min(lo, hi)
        while hi - lo > rtol:
            mid = 0.5 * (lo + hi)
            r = self.exclusion(mid)
            if r is None:
                hi = mid
            else:
                lo = min(hi, mid + r)
        return math.exp(hi)
