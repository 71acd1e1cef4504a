"""xPos: RoPE whose queries and keys are also scaled, so that scores decay with distance
(Sun et al. 2022, "A Length-Extrapolatable Transformer", arXiv 2212.10554, ACL 2023).

Each pair i < d/2 of a head is rotated by RoPE's angle n * theta_i and, in addition, the query
at position n is multiplied by zeta_i ** ((n - c) / B) and the key at position m by
zeta_i ** (-(m - c) / B), with::

    zeta_i = (2i/d + gamma) / (1 + gamma),   gamma = 0.4,   B = scale_base = 512

The score of pair i between query n and key m is then RoPE's score times
zeta_i ** ((n - m) / B): a decay for keys behind the query, which is why xPos is used with a
causal mask. The centre c cancels in every score but not in the scales, which overflow a dtype
once abs(n - c) reaches :func:`xpos_overflow_position`; so both references centre the
positions on the sequence: rotary-embedding-torch 0.9.1 (``get_scale``: c = s // 2, the rule
of :class:`XPosEmbedding` with ``center=None``) and torchscale (``XPOS``: c = ceil(s/2), pass
``center=(s + 1) // 2``), both with interleaved pairs. Layout ``"half"`` (the default here)
pairs dims (i, i + d/2) with the same zeta_i on both.

Scales are computed in float64 and rounded once, and :class:`XPosEmbedding` rounds its result
once (see :doc:`/numerics`); a scale or scaled query/key that overflows raises ``ValueError``
naming the position. Tests: ``tests/core/test_xpos.py`` (rotary-embedding-torch, the paper's
formula in float64 for both layouts, relativity, overflow).

Notation for tensor shapes: d = head_dim, s = sequence, P = any shape of positions, K = any
shape of distances, ``...`` leading dims such as (b, h).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import _validation as check
from .._numerics import round_once, warm_up_trigonometry
from .apply import apply_rope
from .formula import rope_angles, rope_cos_sin

__all__ = [
    "XPosEmbedding",
    "xpos_overflow_position",
    "xpos_scales",
    "xpos_score_vs_distance",
    "xpos_zeta",
]

_DTYPE_NAMES = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
}


# --------------------------------------------------------------------------- checks


def _check_gamma(gamma: object) -> float:
    gamma = check.real_number("gamma", gamma)
    if gamma <= 0:
        raise ValueError(
            f"gamma must be a finite number > 0 (zeta_i = (2i/d + gamma) / (1 + gamma) lies in "
            f"(0, 1) only then; the paper uses 0.4), got {gamma}"
        )
    return gamma


def _check_scale_base(scale_base: object) -> float:
    scale_base = check.real_number("scale_base", scale_base)
    if scale_base <= 0:
        raise ValueError(
            f"scale_base must be a finite number > 0 (the exponent is (n - center) / "
            f"scale_base; the paper uses 512), got {scale_base}"
        )
    return scale_base


# --------------------------------------------------------------------------- the formula


def xpos_zeta(head_dim: int, *, gamma: float = 0.4) -> torch.Tensor:
    """The per-pair decay bases zeta_i = (2i/d + gamma) / (1 + gamma), i = 0 .. d/2 - 1.

    Sun et al. 2022; tested in ``tests/core/test_xpos.py`` against rotary-embedding-torch's
    ``(arange(0, d, 2) + 0.4 d) / (1.4 d)`` buffer. Increasing in i, from gamma / (1 + gamma).

    Args:
        head_dim: per-head width d, positive and even, at most ``MAX_WIDTH``.
        gamma: > 0; 0.4 in the paper and both references.

    Returns:
        float64 tensor of shape ``(d/2,)``.
    """
    d = check.width("head_dim", head_dim, where="xpos_zeta")
    return _zeta(d, _check_gamma(gamma))


def _zeta(d: int, gamma: float) -> torch.Tensor:
    i = torch.arange(d // 2, dtype=torch.float64)  # (d/2,)
    return (2 * i / d + gamma) / (1 + gamma)


def _log_scales(pos: torch.Tensor, d: int, scale_base: float, gamma: float, center: float):
    """log of the query scale, ((n - c) / B) * log zeta_i, in float64: P -> P + (d/2,).
    The key scale's log is its negative."""
    log_zeta = torch.log(_zeta(d, gamma)).to(pos.device)  # (d/2,)
    return ((pos - center) / scale_base).unsqueeze(-1) * log_zeta  # P + (d/2,)


def _spread(t: torch.Tensor, layout: str) -> torch.Tensor:
    """P + (d/2,) per-pair values -> P + (d,), laid out as rope_cos_sin lays out its tables."""
    if layout == "half":
        return torch.cat((t, t), -1)  # dims i and i + d/2
    return t.repeat_interleave(2, -1)  # dims 2i and 2i + 1


def xpos_scales(
    positions: torch.Tensor | int | float | list,
    head_dim: int,
    *,
    scale_base: float = 512.0,
    gamma: float = 0.4,
    center: float = 0.0,
    layout: str = "half",
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """xPos's query and key scales, zeta_i ** ((n - center) / B) and its inverse.

    Float64 exp(((n - center) / B) * log zeta_i), rounded once to ``dtype``, laid out like
    :func:`~posenc_core.rope.rope_cos_sin`'s tables so that ``apply_rope(q, cos, sin) * q_scale``
    is xPos's query (Sun et al. 2022). Tested in ``tests/core/test_xpos.py`` against
    rotary-embedding-torch's ``get_scale``.

    Args:
        positions: finite real positions n, any shape ``P``.
        head_dim: per-head width d, positive and even; the tables may take at most
            ``MAX_RESULT_BYTES``.
        scale_base: B > 0 (512 in the paper).
        gamma: > 0 (0.4), see :func:`xpos_zeta`.
        center: c, a finite real; it cancels in every score but decides where the scales overflow.
        layout: ``"half"`` (``cat(z, z)``) or ``"interleaved"`` (zeta_i on dims 2i, 2i + 1).
        dtype: floating dtype of the tables.

    Returns:
        ``(q_scale, k_scale)``, each ``P + (head_dim,)`` in ``dtype`` on the device of
        ``positions``; ``k_scale`` is the exact reciprocal of ``q_scale``, rounded.

    Raises:
        ValueError: a scale is infinite in ``dtype``; the message names the first such position.
    """
    check.layout("layout", layout)
    dtype = check.float_dtype("dtype", dtype)
    device = positions.device if isinstance(positions, torch.Tensor) else None
    pos = check.as_positions("positions", positions)  # P, float64
    d = check.width("head_dim", head_dim, where="xpos_scales")
    check.result_size(
        "xpos_scales",
        "the query and key scales",
        {"positions.shape": tuple(pos.shape), "head_dim": d},
        2 * pos.numel() * d,
        advice="compute them for chunks of positions",
    )
    scale_base = _check_scale_base(scale_base)
    gamma = _check_gamma(gamma)
    center = check.real_number("center", center)
    log_q = _log_scales(pos, d, scale_base, gamma, center)  # P + (d/2,)
    q_scale, k_scale = round_once(torch.exp(log_q), dtype), round_once(torch.exp(-log_q), dtype)
    _refuse_overflow(pos, center, q_scale, k_scale, dtype, d, scale_base, gamma)
    q_scale, k_scale = _spread(q_scale, layout), _spread(k_scale, layout)  # P + (d,)
    return q_scale.to(device=device), k_scale.to(device=device)


def _refuse_overflow(
    pos: torch.Tensor,
    center: float,
    q_scale: torch.Tensor,
    k_scale: torch.Tensor,
    dtype: torch.dtype,
    d: int,
    scale_base: float,
    gamma: float,
) -> None:
    """ValueError naming the first position (in ``pos``'s flattened order) whose query or key
    scale (P + (d/2,), already in ``dtype``) is infinite."""
    bad = (torch.isinf(q_scale) | torch.isinf(k_scale)).any(-1).flatten()  # (prod P,)
    if not bool(bad.any()):
        return
    n = pos.flatten()[bad.nonzero()[0, 0]].item()
    raise ValueError(_overflow_message("the xPos scales", n, center, dtype, d, scale_base, gamma))


def _overflow_message(
    what: str, n: float, center: float, dtype: torch.dtype, d: int, scale_base: float, gamma: float
) -> str:
    limit = _overflow_position(d, dtype, scale_base, gamma)
    wider = "; ".join(
        f"{_DTYPE_NAMES[t]} {_overflow_position(d, t, scale_base, gamma)}"
        for t in (torch.float32, torch.float64)
        if torch.finfo(t).max > torch.finfo(dtype).max
    )
    return (
        f"{what} overflow {_DTYPE_NAMES[dtype]} at position {n:g} (|n - center| = "
        f"{abs(n - center):g} with center={center:g}): zeta_0 ** (-|n - center| / scale_base) "
        f"rounds to infinity, past the largest finite {_DTYPE_NAMES[dtype]} value "
        f"{torch.finfo(dtype).max:.5g}, once |n - center| >= {limit} (xpos_overflow_position, "
        f"scale_base={scale_base:g}, "
        f"gamma={gamma:g}). Centre the positions (a center in the middle of the sequence "
        f"halves |n - center|; it does not change any score) or use a wider dtype"
        + (f" (limits: {wider})" if wider else "")
    )


def xpos_overflow_position(
    head_dim: int, dtype: torch.dtype, *, scale_base: float = 512.0, gamma: float = 0.4
) -> int:
    """The smallest integer abs(n - center) at which an xPos scale is infinite in ``dtype``.

    The largest scale is pair 0's, zeta_0 ** (-abs(n - center) / B), so the answer does not
    depend on head_dim: the smallest N with N * (-log zeta_0) / B >= log((2 - eps/2) * 2**emax),
    where rounding to nearest reaches infinity. Tested in ``tests/core/test_xpos.py`` against
    rounding the float64 scale to each dtype. The inverse scale is below 1 / finfo.max there
    (subnormal in float16), and a scaled key with abs(k) > 1 overflows earlier
    (:class:`XPosEmbedding` refuses that too).

    Args:
        head_dim: per-head width d, positive and even (checked; it does not change the result).
        dtype: float16, bfloat16, float32 or float64.
        scale_base: B > 0.
        gamma: > 0.

    Returns:
        the smallest N such that abs(n - center) = N overflows (N - 1 is finite), an int.
    """
    d = check.width("head_dim", head_dim, where="xpos_overflow_position")
    dtype = check.float_dtype("dtype", dtype)
    return _overflow_position(d, dtype, _check_scale_base(scale_base), _check_gamma(gamma))


def _overflow_position(d: int, dtype: torch.dtype, scale_base: float, gamma: float) -> int:
    info = torch.finfo(dtype)
    emax = math.frexp(info.max)[1] - 1  # finfo.max = (2 - eps) * 2**emax
    log_threshold = math.log(2 - info.eps / 2) + emax * math.log(2)  # rounds to inf from here
    rate = -math.log(gamma / (1 + gamma)) / scale_base  # -log(zeta_0) / B, per position
    return math.ceil(log_threshold / rate)


# --------------------------------------------------------------------------- the module


class XPosEmbedding(nn.Module):
    """xPos for query and key tensors: RoPE (as :class:`~posenc_core.rope.RotaryEmbedding`
    rotates) followed by the scales of :func:`xpos_scales`.

    q'(n) = R_n q * zeta ** ((n - c) / B) and k'(m) = R_m k * zeta ** (-(m - c) / B) per pair, so
    q'(n) . k'(m) = sum_i [RoPE's pair-i score] * zeta_i ** ((n - m) / B) (Sun et al. 2022).
    Evaluated in float64 and rounded once to the inputs' dtype. Tested in
    ``tests/core/test_xpos.py`` against rotary-embedding-torch's ``rotate_queries_and_keys``
    (``layout="interleaved"``, ``center=None``). Self-attention only: cached keys must share the
    queries' centre, so for decoding with a cache pass one explicit ``center``.

    Args:
        head_dim: per-head width d, positive and even, at most ``MAX_WIDTH``.
        base: RoPE's base (rope_theta), > 1.
        scale_base: B > 0 (512).
        gamma: > 0 (0.4), see :func:`xpos_zeta`.
        layout: ``"half"`` (pairs (i, i + d/2)) or ``"interleaved"`` (pairs (2i, 2i + 1), the
            references').
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        scale_base: float = 512.0,
        gamma: float = 0.4,
        layout: str = "half",
    ) -> None:
        super().__init__()
        self.head_dim = check.width("head_dim", head_dim, where="XPosEmbedding")
        self.base = check.base_value("base", base)
        self.scale_base = _check_scale_base(scale_base)
        self.gamma = _check_gamma(gamma)
        self.layout = check.layout("layout", layout)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        positions: torch.Tensor | int | None = None,
        *,
        center: float | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate and scale queries and keys.

        Args:
            q: ``(..., s, head_dim)`` floating tensor, e.g. ``(b, h, s, d)``.
            k: ``(..., s, head_dim)``, the same s (and positions) as ``q``.
            positions: None (0 .. s-1), an int offset o >= 0 (o .. o+s-1, o + s - 1 <= 2**53), or
                a finite real tensor of shape ``(s,)``.
            center: None (floor((p_min + p_max + 1) / 2), rotary-embedding-torch's ``len(t) // 2``
                for 0 .. s-1) or a real centre (needed for decoding with a cache).

        Returns:
            ``(q', k')`` with the shapes and dtypes of ``q`` and ``k``.

        Raises:
            ValueError: a scale, or a scaled query or key, overflows the inputs' dtype.
        """
        pos = self._check_inputs(q, k, positions)  # (s,), float64, on q's device
        if center is None:
            center = math.floor((pos.min().item() + pos.max().item() + 1) / 2) if len(pos) else 0
        center = check.real_number("center", center)
        d, B, gamma = self.head_dim, self.scale_base, self.gamma
        log_q = _log_scales(pos, d, B, gamma, center)  # (s, d/2)
        q_scale, k_scale = torch.exp(log_q), torch.exp(-log_q)  # (s, d/2) float64
        for t in {q.dtype, k.dtype}:  # the scales themselves must fit the inputs' dtype
            _refuse_overflow(
                pos, center, round_once(q_scale, t), round_once(k_scale, t), t, d, B, gamma
            )
        cos, sin = rope_cos_sin(
            pos, d, base=self.base, layout=self.layout, dtype=torch.float64
        )  # (s, d) each
        out = []
        for name, x, scale in (("q", q, q_scale), ("k", k, k_scale)):
            y = apply_rope(x.to(torch.float64), cos, sin, layout=self.layout)  # (..., s, d)
            y = round_once(y * _spread(scale, self.layout), x.dtype)
            bad = torch.isinf(y) & torch.isfinite(x)  # (..., s, d)
            if bool(bad.any()):
                n = pos[bad.nonzero()[0, -2]].item()
                what = f"the scaled {'queries' if name == 'q' else 'keys'} ({name} times its scale)"
                raise ValueError(_overflow_message(what, n, center, x.dtype, d, B, gamma))
            out.append(y)
        return out[0], out[1]

    def _check_inputs(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | int | None
    ) -> torch.Tensor:
        """Check forward's arguments; return the positions as a float64 (s,) tensor."""
        q, k, s = check.query_key_pair(
            q,
            k,
            self.head_dim,
            unequal_lengths=(
                "xPos scales both for the same positions (self-attention); for decoding with a "
                "cache pass an explicit center and scale each new key once"
            ),
        )
        if positions is None or isinstance(positions, int) and not isinstance(positions, bool):
            offset = check.position_offset(
                "positions (offset)", 0 if positions is None else positions, s
            )
            return torch.arange(offset, offset + s, dtype=torch.float64, device=q.device)
        check.tensor("positions", positions, min_dim=1)
        if positions.dim() != 1 or positions.shape[0] != s:
            raise ValueError(
                f"positions must have shape (s,) with s={s} (one sequence of positions shared "
                f"by q and k), got {tuple(positions.shape)}"
            )
        return check.as_positions("positions", positions).to(q.device)  # (s,) float64

    def extra_repr(self) -> str:
        return (
            f"head_dim={self.head_dim}, base={self.base:g}, scale_base={self.scale_base:g}, "
            f"gamma={self.gamma:g}, layout={self.layout!r}"
        )


# --------------------------------------------------------------------------- analysis


def xpos_score_vs_distance(
    distances: torch.Tensor | list | int,
    head_dim: int,
    *,
    base: float = 10000.0,
    scale_base: float = 512.0,
    gamma: float = 0.4,
) -> torch.Tensor:
    """The xPos score q'(n) . k'(m) / head_dim for q = k = all ones, against the distance.

    ``mean_i cos(theta_i * delta) * zeta_i ** (delta / B)`` with delta = n - m, the query's
    position minus the key's (>= 0 for every key a causal mask keeps): the normalisation of
    :func:`~posenc_core.analysis.rope_score_vs_distance` (1 at distance 0); with B -> infinity it
    is RoPE's curve. Sun et al. 2022; tested in ``tests/core/test_xpos.py`` against
    :class:`XPosEmbedding`'s scores.

    Args:
        distances: any shape ``K`` of finite real distances delta = n - m.
        head_dim: per-head width d, positive and even; the float64 angles and decays may take
            at most ``MAX_RESULT_BYTES``.
        base: RoPE's base, > 1.
        scale_base: B > 0.
        gamma: > 0.

    Returns:
        float64 tensor of shape ``K``.
    """
    dist = check.as_positions("distances", distances)  # K, float64
    d = check.width("head_dim", head_dim, where="xpos_score_vs_distance")
    check.result_size(
        "xpos_score_vs_distance",
        "the angles and decays",
        {"distances.shape": tuple(dist.shape), "head_dim": d},
        dist.numel() * d,
        advice="evaluate the distances in chunks",
    )
    scale_base = _check_scale_base(scale_base)
    gamma = _check_gamma(gamma)
    angles = rope_angles(dist, d, base=base)  # K + (d/2,)
    decay = torch.exp(_log_scales(dist, d, scale_base, gamma, 0.0))  # K + (d/2,)
    warm_up_trigonometry()  # once per process: see the Numerics page
    return (torch.cos(angles) * decay).mean(-1)  # K
