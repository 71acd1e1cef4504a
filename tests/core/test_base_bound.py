"""The RoPE base bound of Men et al. 2024 (posenc_core.analysis.rope_base_lower_bound and its
helpers), checked against brute force in numpy and against Su Jianlin's published
recomputation of the paper's table."""

import math

import numpy as np
import pytest
import torch

import posenc_core as pc
from posenc_core.analysis import rope_base_lower_bound, rope_base_meets_bound, rope_bound_curve


def _numpy_min_curve(bases: np.ndarray, context_length: int, head_dim: int) -> np.ndarray:
    """min over m = 0..L of sum_i cos(m b**(-2i/d)) for each base, in numpy float64: a
    computation independent of posenc_core (no torch, no shared helper)."""
    i = np.arange(head_dim // 2)
    m = np.arange(context_length + 1, dtype=np.float64)
    out = []
    per_batch = max(1, 4_000_000 // ((context_length + 1) * (head_dim // 2)))
    for start in range(0, len(bases), per_batch):
        theta = bases[start : start + per_batch, None] ** (-2.0 * i / head_dim)  # (nb, d/2)
        curve = np.cos(m[None, :, None] * theta[:, None, :]).sum(-1)  # (nb, L+1)
        out.append(curve.min(axis=1))
    return np.concatenate(out)


@pytest.mark.parametrize("head_dim, context_length", [(8, 50), (16, 100), (32, 100)])
def test_lower_bound_is_the_smallest_feasible_base_by_brute_force(head_dim, context_length):
    """The result meets the bound; on a log grid 10x finer than the search's island width,
    covering every base from 1.0001 up to just above the result, no base below the result
    (minus its tolerance) meets it, and the first grid base that does lies within one grid
    step above the result."""
    island, step = 1e-3, 1e-4
    b = rope_base_lower_bound(context_length, head_dim, island=island)
    assert _numpy_min_curve(np.array([b]), context_length, head_dim)[0] >= 0
    grid = np.exp(np.arange(step, math.log(b) + 2 * step, step))
    feasible = _numpy_min_curve(grid, context_length, head_dim) >= 0
    assert feasible.any()
    first = grid[np.argmax(feasible)]
    assert b * (1 - 1e-6) <= first <= b * math.exp(step) * (1 + 1e-12)


def test_feasible_bases_are_not_an_interval():
    """Llama-like head_dim 128 at L = 4096: base 26960 meets the bound, 27500 does not, 28700
    does again (found by a numpy scan of bases 26000..29000 in steps of 1; checked here in
    numpy). The search returns the lower island, below 27500."""
    b1, b2, b3 = 26960.0, 27500.0, 28700.0
    mins = _numpy_min_curve(np.array([b1, b2, b3]), 4096, 128)
    assert mins[0] >= 0 and mins[1] < 0 and mins[2] >= 0
    assert [rope_base_meets_bound(4096, 128, base=b) for b in (b1, b2, b3)] == [True, False, True]
    bound = rope_base_lower_bound(4096, 128)
    assert bound <= b1 and rope_base_meets_bound(4096, 128, base=bound)


def test_small_head_dim_has_several_feasible_intervals():
    """head_dim 16, L = 300 (a numpy scan in relative steps of 1e-4): bases 14866..15730 meet
    the bound, the scanned bases from there to 18696 do not, 18697..22756 do again."""
    mins = _numpy_min_curve(np.array([15000.0, 17000.0, 20000.0]), 300, 16)
    assert mins[0] >= 0 and mins[1] < 0 and mins[2] >= 0
    assert rope_base_lower_bound(300, 16) <= 15000.0


def test_bound_grows_with_the_context_length():
    """Meeting the bound for L + 1 implies meeting it for L (one more condition), so the
    smallest base is non-decreasing in L: up to the tolerance, since where the same distance
    binds for several L (a plateau) each result is the same infimum to within rtol."""
    rtol = 1e-7
    lengths = list(range(2, 160, 3))
    bounds = [rope_base_lower_bound(L, 16, island=1e-3, rtol=rtol) for L in lengths]
    assert all(a <= b * math.exp(rtol) for a, b in zip(bounds, bounds[1:]))
    assert bounds[-1] > 100 * bounds[0]
    powers = [rope_base_lower_bound(2**k, 128) for k in range(6, 12)]
    assert all(a < b for a, b in zip(powers, powers[1:]))


def test_matches_su_jianlin_recomputation_of_the_paper_table():
    """Su Jianlin, "Transformer升级之路：18、RoPE的底数选择原则" (kexue.fm/archives/10122, 2024),
    recomputed Men et al.'s table for head_dim 128 with m = 0..L-1 by a finer grid search
    (JAX, in its default float32) and printed two significant figures: 4.3e3, 1.2e4, 2.7e4,
    8.4e4 for L = 1k, 2k, 4k, 8k (where float32 rounding is still far below the margins)."""
    su = {1024: 4.3e3, 2048: 1.2e4, 4096: 2.7e4, 8192: 8.4e4}
    for L, published in su.items():
        ours = rope_base_lower_bound(L - 1, 128)  # Su's (and the paper's) m = 0 .. L - 1
        assert float(f"{ours:.1e}") == published, (L, ours)


def test_two_figure_bases_can_fail_the_bound_they_round():
    """Chapter 3's even-handed reading: Su's printed values are our bound to two figures at
    L = 2k, 4k and 16k, yet taken as printed they fail the test (rounding down lands below the
    smallest passing base, rounding up can land in a gap); numpy brute force, m = 0 .. L - 1."""
    printed = {2048: 1.2e4, 4096: 2.7e4, 16384: 2.3e5}
    for L, base in printed.items():
        assert float(f"{rope_base_lower_bound(L - 1, 128):.1e}") == base
        assert _numpy_min_curve(np.array([base]), L - 1, 128)[0] < -0.4, L
    # and a rounded value need not fail: Su's 6.3e5 at 32k passes, Men et al.'s 6.4e5 does not
    assert _numpy_min_curve(np.array([6.3e5]), 32767, 128)[0] >= 0
    assert _numpy_min_curve(np.array([6.4e5]), 32767, 128)[0] < 0


def test_lower_bound_is_reproducible_and_within_rtol():
    a = rope_base_lower_bound(1000, 64, rtol=1e-9)
    assert a == rope_base_lower_bound(1000, 64, rtol=1e-9)
    coarse = rope_base_lower_bound(1000, 64, rtol=1e-4)
    assert a <= coarse <= a * math.exp(1e-4) * (1 + 1e-12)
    assert rope_base_meets_bound(1000, 64, base=coarse)


def test_curve_is_half_head_dim_times_the_rope_score_and_matches_numpy():
    curve = rope_bound_curve(3000, 128, base=10_000.0)
    assert curve.dtype == torch.float64 and curve.shape == (3001,)
    score = pc.rope_score_vs_distance(torch.arange(3001), 128, base=10_000.0)
    torch.testing.assert_close(curve, 64 * score, rtol=0, atol=1e-12)
    i = np.arange(64)
    direct = np.cos(np.arange(3001)[:, None] * 10_000.0 ** (-2.0 * i / 128)).sum(-1)
    np.testing.assert_allclose(curve.numpy(), direct, rtol=0, atol=1e-10)
    assert curve[0] == 64
    # chapter 3 measures the first negative value at base 10000; the bound says the same
    first_negative = int(torch.nonzero(curve < 0)[0])
    assert rope_base_meets_bound(first_negative - 1, 128, base=10_000.0)
    assert not rope_base_meets_bound(first_negative, 128, base=10_000.0)


def test_meets_bound_agrees_with_numpy():
    bases = np.exp(np.linspace(math.log(1.5), math.log(1e6), 40))
    expected = _numpy_min_curve(bases, 700, 32) >= 0
    got = [rope_base_meets_bound(700, 32, base=float(b)) for b in bases]
    assert got == expected.tolist()
    assert any(got) and not all(got)


def test_llama2_base_fails_the_bound_at_its_context():
    """Llama 2: base 10000, head_dim 128, context 4096 (Touvron et al. 2023)."""
    assert not rope_base_meets_bound(4096, 128, base=10_000.0)
    assert rope_base_lower_bound(4096, 128) > 10_000.0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"context_length": 1}, ValueError, "context_length must be an integer >= 2"),
        ({"context_length": 100.0}, TypeError, "context_length must be an integer >= 2"),
        ({"context_length": True}, TypeError, "context_length"),
        # the search's cost grows faster than L: 10**7 would run for hours
        (
            {"context_length": 10**7},
            ValueError,
            r"context_length must be at most 2\*\*18.*10000000",
        ),
        ({"context_length": 2**18 + 1}, ValueError, r"at most 2\*\*18 = 262144.*262145"),
        ({"head_dim": 7}, ValueError, "head_dim must be a positive even integer"),
        ({"head_dim": 4}, ValueError, "head_dim must be an even integer >= 6"),
        ({"head_dim": "128"}, TypeError, "head_dim"),
        ({"island": 0.0}, ValueError, r"island must be a real number in \[1e-06, 0.1\]"),
        ({"island": 1.0}, ValueError, "island"),
        ({"rtol": 1e-2}, ValueError, "rtol must be a real number"),
        ({"island": 1e-5, "rtol": 1e-4}, ValueError, "rtol must be at most island"),
        ({"rtol": float("nan")}, ValueError, "rtol"),
    ],
)
def test_lower_bound_rejects_bad_arguments(kwargs, error, match):
    args = {"context_length": 100, "head_dim": 16, **kwargs}
    with pytest.raises(error, match=match):
        rope_base_lower_bound(**args)


@pytest.mark.parametrize("fn", [rope_bound_curve, rope_base_meets_bound])
def test_helpers_reject_bad_arguments(fn):
    with pytest.raises(ValueError, match="base must be a finite number greater than 1"):
        fn(10, 8, base=1.0)
    with pytest.raises(ValueError, match="context_length must be a non-negative integer"):
        fn(-1, 8, base=10.0)
    with pytest.raises(ValueError, match="head_dim must be a positive even integer"):
        fn(10, 9, base=10.0)
    with pytest.raises(TypeError, match="base must be a real number"):
        fn(10, 8, base="10000")


@pytest.mark.parametrize("context_length, head_dim", [(0, 8), (0, 128), (5, 2), (5, 4), (40, 4)])
def test_meets_bound_takes_every_documented_size(context_length, head_dim):
    """context_length 0 (the curve is B(0) = d/2 alone) and head_dim 2 or 4 (one or two pairs,
    for which no lower bound exists, but the test of one base does) give the numpy answer."""
    for base in (1.5, 10.0, 1e4):
        expected = _numpy_min_curve(np.array([base]), context_length, head_dim)[0] >= 0
        assert rope_base_meets_bound(context_length, head_dim, base=base) == expected
