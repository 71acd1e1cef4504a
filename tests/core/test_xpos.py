"""Tests for posenc_core.rope.xpos: xPos (Sun et al. 2022) against rotary-embedding-torch 0.9.1,
against the paper's formula written out here in float64, and its properties (scores depend on
n - m only, with RoPE's pair scores times zeta_i ** ((n - m) / B); the centre changes no score
but decides where a dtype overflows)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from rotary_embedding_torch import RotaryEmbedding as RetRotaryEmbedding

from posenc_core._numerics import round_once
from posenc_core.analysis import rope_score_vs_distance
from posenc_core.rope import RotaryEmbedding
from posenc_core.rope.xpos import (
    XPosEmbedding,
    xpos_overflow_position,
    xpos_scales,
    xpos_score_vs_distance,
    xpos_zeta,
)

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _pairs(d: int, layout: str) -> list[tuple[int, int]]:
    """The dims (a, b) of pair i, written out for each layout."""
    if layout == "half":
        return [(i, i + d // 2) for i in range(d // 2)]
    return [(2 * i, 2 * i + 1) for i in range(d // 2)]


def _paper_xpos(x, positions, center, d, layout, *, base, scale_base, gamma, key):
    """xPos written out pair by pair in float64 from the paper's definition (no posenc_core):
    rotate (x_a, x_b) by n * theta_i, theta_i = base ** (-2i/d), then multiply by
    zeta_i ** (+-(n - center) / B), zeta_i = (i / (d/2) + gamma) / (1 + gamma)."""
    x = x.to(torch.float64)
    out = torch.empty_like(x)
    sign = -1.0 if key else 1.0
    for t, n in enumerate(positions):
        for i, (a, b) in enumerate(_pairs(d, layout)):
            theta = base ** (-2.0 * i / d)
            zeta = (i / (d / 2) + gamma) / (1 + gamma)
            scale = zeta ** (sign * (n - center) / scale_base)
            c, s = math.cos(n * theta), math.sin(n * theta)
            xa, xb = x[..., t, a], x[..., t, b]
            out[..., t, a] = (xa * c - xb * s) * scale
            out[..., t, b] = (xb * c + xa * s) * scale
    return out


# --------------------------------------------------------------------------- references


def test_zeta_is_the_references_buffer():
    for d in (8, 16, 128):
        ret = RetRotaryEmbedding(d, use_xpos=True).scale  # (arange(0, d, 2) + 0.4 d) / (1.4 d)
        zeta = xpos_zeta(d)
        assert zeta.dtype == torch.float64 and zeta.shape == (d // 2,)
        torch.testing.assert_close(zeta.float(), ret, rtol=1e-6, atol=0)
        assert zeta[0].item() == pytest.approx(0.4 / 1.4, rel=1e-15)  # gamma / (1 + gamma)
        assert bool((zeta.diff() > 0).all()) and zeta[-1].item() < 1


@pytest.mark.parametrize("d, s", [(16, 41), (64, 40)])  # odd and even s: the centre differs
def test_matches_rotary_embedding_torch(d, s):
    """rotary-embedding-torch pairs dims (2i, 2i+1) and centres on s // 2 (``get_scale``:
    ``power = (t - len(t) // 2) / scale_base``): our layout="interleaved", center=None."""
    g = _gen(0)
    q, k = torch.randn(2, 3, s, d, generator=g), torch.randn(2, 3, s, d, generator=g)
    ret = RetRotaryEmbedding(d, use_xpos=True, xpos_scale_base=32, cache_if_possible=False)
    q_ref, k_ref = ret.rotate_queries_and_keys(q, k)
    ours = XPosEmbedding(d, scale_base=32, layout="interleaved")
    for center in (None, s // 2):
        q_out, k_out = ours(q, k, center=center)
        assert q_out.dtype == k_out.dtype == torch.float32
        torch.testing.assert_close(q_out, q_ref, rtol=2e-5, atol=2e-5)
        torch.testing.assert_close(k_out, k_ref, rtol=2e-5, atol=2e-5)
    if s % 2:  # torchscale's centre, ceil(s/2), gives other q', k' (but the same scores)
        q_ts, k_ts = ours(q, k, center=(s + 1) // 2)
        assert not torch.allclose(q_ts, q_ref, atol=1e-3)
        torch.testing.assert_close(q_ts @ k_ts.mT, q_ref @ k_ref.mT, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize(
    "positions, center",
    [(None, None), (5, None), (torch.tensor([3.0, 0.5, 9.0, 2.0, 7.25]), 4.0), (None, -11.5)],
)
def test_matches_the_paper_formula_in_float64(layout, positions, center):
    d, s, base, scale_base, gamma = 8, 5, 100.0, 8.0, 0.3  # small B: the scales matter
    g = _gen(1)
    q = torch.randn(2, s, d, generator=g, dtype=torch.float64)
    k = torch.randn(2, s, d, generator=g, dtype=torch.float64)
    module = XPosEmbedding(d, base=base, scale_base=scale_base, gamma=gamma, layout=layout)
    q_out, k_out = module(q, k, positions, center=center)
    if positions is None or isinstance(positions, int):
        pos = [float((positions or 0) + t) for t in range(s)]
    else:
        pos = positions.tolist()
    c = math.floor((min(pos) + max(pos) + 1) / 2) if center is None else center
    kw = dict(base=base, scale_base=scale_base, gamma=gamma)
    q_ref = _paper_xpos(q, pos, c, d, layout, key=False, **kw)
    k_ref = _paper_xpos(k, pos, c, d, layout, key=True, **kw)
    torch.testing.assert_close(q_out, q_ref, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(k_out, k_ref, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_scales_tables_are_zeta_powers_laid_out_like_rope(layout):
    d, B = 8, 16.0
    pos = torch.tensor([[0, 3], [-5, 20]])
    q_scale, k_scale = xpos_scales(pos, d, scale_base=B, center=2.0, layout=layout)
    assert q_scale.shape == k_scale.shape == (2, 2, d) and q_scale.dtype == torch.float32
    for (r, c), n in np.ndenumerate(pos.numpy()):
        for i, (a, b) in enumerate(_pairs(d, layout)):
            zeta = (i / (d / 2) + 0.4) / 1.4
            for dim in (a, b):
                assert q_scale[r, c, dim].item() == np.float32(zeta ** ((n - 2.0) / B))
                assert k_scale[r, c, dim].item() == np.float32(zeta ** (-(n - 2.0) / B))


# --------------------------------------------------------------------------- properties


def _scores(module, q, k, positions, center):
    q_out, k_out = module(q, k, positions, center=center)
    return q_out @ k_out.mT  # (..., s, s): [n, m] = q'(n) . k'(m)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_scores_depend_only_on_the_offset_and_not_on_the_centre(layout):
    d, s = 16, 12
    g = _gen(2)
    q = torch.randn(s, d, generator=g, dtype=torch.float64)
    k = torch.randn(s, d, generator=g, dtype=torch.float64)
    module = XPosEmbedding(d, scale_base=16.0, layout=layout)
    pos = torch.randperm(40, generator=g)[:s].to(torch.float64)  # irregular positions
    ref = _scores(module, q, k, pos, 0.0)
    for shift in (0.0, 7.0, 1000.0):
        for center in (None, 3.5, -50.0):
            got = _scores(module, q, k, pos + shift, center)
            torch.testing.assert_close(got, ref, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_each_pair_is_ropes_score_times_zeta_to_the_offset(layout):
    d, s, B = 8, 9, 4.0
    g = _gen(3)
    q = torch.randn(s, d, generator=g, dtype=torch.float64)
    k = torch.randn(s, d, generator=g, dtype=torch.float64)
    pos = torch.arange(s, dtype=torch.float64) * 3 - 4  # -4, -1, ..., 20
    q_x, k_x = XPosEmbedding(d, scale_base=B, layout=layout)(q, k, pos, center=1.0)
    q_r, k_r = RotaryEmbedding(d, layout=layout)(q, k, pos)
    zeta = (torch.arange(d // 2, dtype=torch.float64) / (d / 2) + 0.4) / 1.4
    offset = pos[:, None] - pos[None, :]  # (s, s): n - m
    for i, (a, b) in enumerate(_pairs(d, layout)):
        pair_x = q_x[:, [a, b]] @ k_x[:, [a, b]].T  # (s, s): pair i's part of q'(n) . k'(m)
        pair_r = q_r[:, [a, b]] @ k_r[:, [a, b]].T
        torch.testing.assert_close(pair_x, pair_r * zeta[i] ** (offset / B), rtol=1e-12, atol=0)


def test_low_precision_gets_the_float64_formula_rounded_once():
    d, s = 16, 300
    g = _gen(4)
    q = torch.randn(s, d, generator=g, dtype=torch.float64)
    k = torch.randn(s, d, generator=g, dtype=torch.float64)
    module = XPosEmbedding(d)  # scale_base 512: positions 1000 .. 1299 fit float16
    pos = torch.arange(1000, 1000 + s)
    q64, k64 = xpos_scales(pos, d, dtype=torch.float64)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        q_low, k_low = q.to(dtype), k.to(dtype)
        q_out, k_out = module(q_low, k_low, 1000, center=0.0)
        assert q_out.dtype == k_out.dtype == dtype
        ref_q, ref_k = module(q_low.double(), k_low.double(), 1000, center=0.0)
        assert torch.equal(q_out, round_once(ref_q, dtype))
        assert torch.equal(k_out, round_once(ref_k, dtype))
        q_scale, k_scale = xpos_scales(pos, d, dtype=dtype)
        assert torch.equal(q_scale, round_once(q64, dtype))
        assert torch.equal(k_scale, round_once(k64, dtype))


def test_gradients_flow():
    g = _gen(5)
    q = torch.randn(6, 8, generator=g, requires_grad=True)
    k = torch.randn(6, 8, generator=g, requires_grad=True)
    q_out, k_out = XPosEmbedding(8, scale_base=8.0)(q, k)
    (q_out @ k_out.T).sum().backward()
    assert q.grad is not None and bool(torch.isfinite(q.grad).all()) and q.grad.abs().sum() > 0


# --------------------------------------------------------------------------- overflow


def _largest_scale(n: int, scale_base: float, gamma: float) -> float:
    """zeta_0 ** (-n / B) in float64, computed directly (torch's pow; inf past float64)."""
    zeta0 = torch.tensor(gamma / (1 + gamma), dtype=torch.float64)
    return zeta0 ** torch.tensor(-n / scale_base, dtype=torch.float64)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("head_dim", [16, 128])
@pytest.mark.parametrize("scale_base, gamma", [(512.0, 0.4), (100.0, 1.5)])
def test_overflow_position_is_where_the_scale_rounds_to_infinity(
    dtype, head_dim, scale_base, gamma
):
    n = xpos_overflow_position(head_dim, dtype, scale_base=scale_base, gamma=gamma)
    below = round_once(_largest_scale(n - 1, scale_base, gamma), dtype)
    at = round_once(_largest_scale(n, scale_base, gamma), dtype)
    assert bool(torch.isfinite(below)) and bool(torch.isinf(at))
    kw = dict(scale_base=scale_base, gamma=gamma, dtype=dtype)
    xpos_scales([n - 1, -(n - 1)], head_dim, **kw)  # finite on both sides of the centre
    for bad in (n, -n):
        with pytest.raises(ValueError, match=f"position {bad}.*xpos_overflow_position"):
            xpos_scales([0, bad], head_dim, **kw)
    with pytest.raises(ValueError, match=f"position {n + 7} "):
        xpos_scales([n + 7], head_dim, center=7.0, **kw)


def test_float16_needs_the_centre():
    """Uncentred float16 xPos overflows at xpos_overflow_position; centred on the sequence the
    same length runs, with scores as accurate as float16 allows. Even below the overflow, the
    uncentred query scale zeta_0 ** (n / B) is subnormal in float16 near the end."""
    d, n_max = 16, xpos_overflow_position(16, torch.float16)
    s = n_max + 1  # positions 0 .. n_max
    g = _gen(6)
    q = torch.randn(s, d, generator=g).to(torch.float16)
    k = torch.randn(s, d, generator=g).to(torch.float16)
    module = XPosEmbedding(d)
    with pytest.raises(ValueError, match=f"overflow float16 at position {n_max} "):
        module(q, k, center=0.0)
    q_c, k_c = module(q, k)  # center = s // 2
    q_e, k_e = module(q.double(), k.double())  # the same inputs, float64
    rows, cols = torch.tensor([s - 1, s - 1, s // 2, 10]), torch.tensor([0, s - 50, 0, 3])
    got = (q_c[rows].double() * k_c[cols].double()).sum(-1)
    exact = (q_e[rows] * k_e[cols]).sum(-1)
    torch.testing.assert_close(got, exact, rtol=5e-3, atol=5e-3 * exact.abs().max().item())

    # Keys larger than 1 overflow before their scale does (k' = R k * scale > 65504):
    with pytest.raises(ValueError, match="scaled keys.*overflow float16 at position"):
        module(q[:-1], k[:-1], center=0.0)
    # The precision issue below the overflow: uncentred, the last query's scale is subnormal.
    small_k = torch.full((s - 1, d), 0.25, dtype=torch.float16)  # k' stays below 65504
    q_u, _ = module(q[:-1], small_k, center=0.0)  # positions 0 .. n_max - 1
    q_u64, _ = module(q[:-1].double(), small_k.double(), center=0.0)
    rel_err = lambda a, b: ((a.double() - b).abs() / b.abs()).max().item()  # noqa: E731
    eps16 = torch.finfo(torch.float16).eps
    assert bool((q_u[-1].abs() < torch.finfo(torch.float16).tiny).any())  # subnormal
    assert rel_err(q_u[-1], q_u64[-1]) > 4 * eps16  # far beyond eps / 2: bits lost
    assert rel_err(q_c[-1], q_e[-1]) <= eps16 / 2 * (1 + 1e-9)  # centred: rounded once


def test_scaled_keys_that_overflow_are_refused():
    module = XPosEmbedding(8)
    q = torch.ones(3, 8, dtype=torch.float16)
    k = torch.full((3, 8), 6e4, dtype=torch.float16)  # finite, but k * scale > 65504
    with pytest.raises(ValueError, match="scaled keys.*overflow float16 at position"):
        module(q, k, 2000, center=0.0)


# --------------------------------------------------------------------------- score curve


def test_score_vs_distance():
    d, B = 32, 64.0
    dist = torch.arange(-200, 401, dtype=torch.float64)
    curve = xpos_score_vs_distance(dist, d, scale_base=B)
    assert curve.dtype == torch.float64 and curve.shape == dist.shape
    at0 = xpos_score_vs_distance(0, d, scale_base=B)
    assert at0.item() == pytest.approx(rope_score_vs_distance(0, d).item(), abs=1e-15)
    assert at0.item() == pytest.approx(1.0, abs=1e-15)
    # B -> infinity: RoPE's curve (RoPE's all-ones curve is even in the distance).
    far = xpos_score_vs_distance(dist, d, scale_base=1e15)
    torch.testing.assert_close(far, rope_score_vs_distance(dist, d), rtol=0, atol=1e-12)
    # Envelope for keys behind the query: |score| <= mean_i zeta_i^(delta/B) <= zeta_max^(...).
    zeta = (torch.arange(d // 2, dtype=torch.float64) / (d / 2) + 0.4) / 1.4
    ahead = dist >= 0
    mean_decay = (zeta ** (dist[ahead, None] / B)).mean(-1)
    assert bool((curve[ahead].abs() <= mean_decay + 1e-15).all())
    assert bool((mean_decay <= zeta[-1] ** (dist[ahead] / B) + 1e-15).all())

    # The curve is the module's score for all-ones q and k at query n, key m, delta = n - m.
    s = 30
    ones = torch.ones(s, d, dtype=torch.float64)
    q_out, k_out = XPosEmbedding(d, scale_base=B)(ones, ones, 100)
    scores = q_out @ k_out.T / d  # (s, s): [n, m]
    offsets = torch.arange(s)[:, None] - torch.arange(s)[None, :]
    torch.testing.assert_close(
        scores, xpos_score_vs_distance(offsets, d, scale_base=B), rtol=1e-12, atol=1e-13
    )


# --------------------------------------------------------------------------- bad inputs


def test_bad_arguments_are_named():
    q = torch.zeros(4, 8)
    for call in (
        lambda: xpos_zeta(7),
        lambda: xpos_scales([0, 1], 7),
        lambda: XPosEmbedding(7),
        lambda: xpos_overflow_position(7, torch.float16),
        lambda: xpos_score_vs_distance([1], 7),
    ):
        with pytest.raises(ValueError, match="head_dim"):
            call()
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="scale_base"):
            XPosEmbedding(8, scale_base=bad)
        with pytest.raises(ValueError, match="scale_base"):
            xpos_scales([0], 8, scale_base=bad)
        with pytest.raises(ValueError, match="gamma"):
            xpos_zeta(8, gamma=bad)
        with pytest.raises(ValueError, match="gamma"):
            xpos_overflow_position(8, torch.float16, gamma=bad)
    with pytest.raises(ValueError, match="scale_base"):
        xpos_score_vs_distance([1], 8, scale_base=float("inf"))
    with pytest.raises(TypeError, match="gamma"):
        XPosEmbedding(8, gamma="0.4")
    with pytest.raises(ValueError, match="layout"):
        XPosEmbedding(8, layout="rotate_half")
    with pytest.raises(ValueError, match="layout"):
        xpos_scales([0], 8, layout="pairs")
    with pytest.raises(TypeError, match="dtype"):
        xpos_scales([0], 8, dtype=torch.int32)
    with pytest.raises(TypeError, match="dtype"):
        xpos_overflow_position(8, "float16")
    with pytest.raises(TypeError, match="center"):
        xpos_scales([0], 8, center="middle")
    module = XPosEmbedding(8)
    with pytest.raises(ValueError, match="positions"):
        module(q, q, torch.arange(5))
    with pytest.raises(ValueError, match="positions"):
        module(q, q, torch.zeros(2, 4))
    with pytest.raises(ValueError, match="positions"):
        module(q, q, torch.tensor([0.0, 1.0, float("nan"), 3.0]))
    with pytest.raises(ValueError, match="q and k"):
        module(q, torch.zeros(5, 8))
    with pytest.raises(ValueError, match="k must have last dimension"):
        module(q, torch.zeros(4, 6))
    with pytest.raises(TypeError, match="center"):
        module(q, q, center=torch.tensor(2.0))
    with pytest.raises(TypeError, match="q"):
        module(q.long(), q)
    with pytest.raises(ValueError, match="overflow"):
        module(q.half(), q.half(), 10**5, center=0.0)
