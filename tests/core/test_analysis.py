"""Measurements used by the chapters, each checked against a second, independent computation."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc_core as pc


def test_sinusoidal_dot_product_depends_only_on_offset():
    """PE(p) . PE(q) = sum_i cos(omega_i (p - q)): the similarity matrix is Toeplitz."""
    table = pc.sinusoidal_table(300, 64, dtype=torch.float64)
    sim = pc.cosine_similarity_matrix(table)
    for k in (1, 7, 50, 299):
        diag = torch.diagonal(sim, offset=k)
        assert (diag - diag[0]).abs().max() < 1e-12
    closed = pc.sinusoidal_similarity(torch.arange(300), 64)
    torch.testing.assert_close(pc.analysis.similarity_by_offset(table), closed, rtol=0, atol=1e-12)
    direct = np.array(
        [np.mean(np.cos(k * 10000.0 ** (-np.arange(0, 64, 2) / 64))) for k in range(300)]
    )
    np.testing.assert_allclose(closed.numpy(), direct, rtol=0, atol=1e-12)


def test_first_rise():
    assert pc.first_rise(torch.tensor([1.0, 0.5, 0.2, 0.1])) is None
    assert pc.first_rise(torch.tensor([1.0, 0.5, 0.6, 0.1])) == 2
    # a single frequency of 1 rad: cos(k) first rises at k = 4 (cos 3 = -0.990 < cos 4 = -0.654)
    assert pc.first_rise(pc.sinusoidal_similarity(torch.arange(10), 2)) == 4


# curves of exactly representable values (multiples of 1/16), so no comparison is near the 1e-12
# tolerance
_curves = st.lists(st.integers(-64, 64), min_size=1, max_size=30).map(
    lambda xs: [x / 16 for x in xs]
)


@settings(max_examples=200, deadline=None)
@given(values=_curves)
def test_first_rise_is_the_first_offset_above_its_predecessor(values):
    """A plain loop: the smallest k >= 1 with curve[k] > curve[k - 1], else None."""
    expected = next((k for k in range(1, len(values)) if values[k] > values[k - 1]), None)
    for dtype in (torch.float64, torch.float32):
        assert pc.first_rise(torch.tensor(values, dtype=dtype)) == expected


@settings(max_examples=200, deadline=None)
@given(values=_curves)
def test_largest_reversal_matches_a_search_over_all_pairs(values):
    """Brute force: the largest curve[far] - curve[near] over near < far (0 if none is positive)."""
    best = max(
        [values[f] - values[n] for n in range(len(values)) for f in range(n + 1, len(values))],
        default=0.0,
    )
    gap, near, far = pc.largest_reversal(torch.tensor(values, dtype=torch.float64))
    assert gap == max(best, 0.0)
    assert 0 <= near <= far < len(values)
    assert values[far] - values[near] == gap


def test_nearest_neighbour_margin_on_a_small_table():
    table = torch.tensor([[0.0, 1.0], [3.0, 1.0], [0.0, 2.0]])
    out = pc.nearest_neighbour_margin(table)
    assert out["min_distance"] == 1.0
    assert out["nearest_distance"].tolist() == [1.0, math.sqrt(9 + 0), 1.0]
    assert math.isclose(out["max_similarity"], 1.0)  # rows 0 and 2 point the same way
    assert set(out["argmax_pair"]) == {0, 2}
    assert out["all_distinct"]
    assert not pc.nearest_neighbour_margin(torch.tensor([[1.0, 0.0], [1.0, 0.0]]))["all_distinct"]


def test_rope_score_matches_rotating_ones():
    d, base = 64, 10000.0
    distances = torch.arange(0, 500)
    curve = pc.rope_score_vs_distance(distances, d, base=base)
    ones = torch.ones(1, d, dtype=torch.float64)
    c0, s0 = pc.rope_cos_sin(
        torch.zeros(1), d, base=base, layout="interleaved", dtype=torch.float64
    )
    c, s = pc.rope_cos_sin(distances, d, base=base, layout="interleaved", dtype=torch.float64)
    q = pc.apply_rope(ones, c0, s0, layout="interleaved")  # query at position 0
    k = pc.apply_rope(ones.expand(len(distances), d), c, s, layout="interleaved")  # keys at n
    torch.testing.assert_close(curve, (k @ q.T).squeeze(1) / d, rtol=0, atol=1e-12)
    assert curve[0].item() == 1.0


def test_rope_score_with_given_vectors():
    d = 16
    q, k = torch.randn(d, dtype=torch.float64), torch.randn(d, dtype=torch.float64)
    got = pc.rope_score_vs_distance(torch.tensor([0, 3, 40]), d, q=q, k=k)
    for idx, n in enumerate([0, 3, 40]):
        c, s = pc.rope_cos_sin(torch.tensor([n]), d, layout="interleaved", dtype=torch.float64)
        rotated_k = pc.apply_rope(k[None], c, s, layout="interleaved")[0]
        assert math.isclose(got[idx].item(), float(q @ rotated_k) / d, abs_tol=1e-12)


def test_rope_decay_bound_against_numpy():
    """Su et al. 2021, Eq. 37: mean_j |sum_{i<=j} exp(i m theta_i)|, computed here with numpy."""
    d = 32
    theta = 10000.0 ** (-np.arange(0, d, 2) / d)
    for m in (0, 1, 10, 100, 1000):
        partial = np.cumsum(np.exp(1j * m * theta))
        assert math.isclose(pc.rope_decay_bound(m, d).item(), np.abs(partial).mean(), rel_tol=1e-12)
    assert math.isclose(pc.rope_decay_bound(0, d).item(), np.mean(np.arange(1, d // 2 + 1)))


def test_score_decomposition_sums_to_the_full_score():
    s, d, dh = 6, 16, 4
    e, p = torch.randn(s, d), pc.sinusoidal_table(s, d)
    wq, wk = torch.randn(d, dh), torch.randn(d, dh)
    terms = pc.score_decomposition(e, p, wq, wk)
    x = e.double() + p.double()
    full = (x @ wq.double()) @ (x @ wk.double()).T / math.sqrt(dh)
    torch.testing.assert_close(terms["total"], full)
    torch.testing.assert_close(
        terms["content_content"]
        + terms["content_position"]
        + terms["position_content"]
        + terms["position_position"],
        full,
    )
    torch.testing.assert_close(
        terms["position_content"], ((p.double() @ wq.double()) @ (e.double() @ wk.double()).T) / 2
    )


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: pc.cosine_similarity_matrix(torch.zeros(3)), ValueError, "table.*2 dimensions"),
        (
            lambda: pc.cosine_similarity_matrix(torch.zeros(2, 3)),
            ValueError,
            r"row of zeros.*row 0 .*shape \(2, 3\)",
        ),
        (
            lambda: pc.cosine_similarity_matrix(torch.tensor([[1.0, 0.0], [0.0, 0.0]])),
            ValueError,
            r"row of zeros.*row 1 ",
        ),
        (
            lambda: pc.cosine_similarity_matrix(torch.zeros(3, 0)),
            ValueError,
            r"table.*d >= 1.*\(3, 0\)",
        ),
        (
            lambda: pc.cosine_similarity_matrix(torch.ones(2, 3, 4)),
            ValueError,
            r"table.*\(n, d\).*\(2, 3, 4\)",
        ),
        (
            lambda: pc.cosine_similarity_matrix(torch.tensor([[1.0, float("nan")]])),
            ValueError,
            "table.*finite.*nan",
        ),
        (
            lambda: pc.cosine_similarity_matrix(torch.ones(2, 3, dtype=torch.long)),
            TypeError,
            "table.*floating.*int64",
        ),
        (lambda: pc.cosine_similarity_matrix([[1.0, 0.0]]), TypeError, "table.*torch.Tensor.*list"),
        (
            lambda: pc.analysis.similarity_by_offset(torch.ones(0, 3)),
            ValueError,
            r"table.*n >= 1.*\(0, 3\)",
        ),
        (
            lambda: pc.analysis.similarity_by_offset(torch.ones(3, 2), True),
            TypeError,
            "max_offset.*bool True",
        ),
        (
            lambda: pc.analysis.similarity_by_offset(torch.ones(3, 2), -1),
            ValueError,
            "max_offset.*-1",
        ),
        (
            lambda: pc.analysis.similarity_by_offset(torch.tensor([[1.0], [float("inf")]])),
            ValueError,
            "table.*finite.*inf",
        ),
        (
            lambda: pc.analysis.similarity_by_offset(torch.ones(3, 2), 5),
            ValueError,
            "max_offset.*n=3.*5",
        ),
        (lambda: pc.nearest_neighbour_margin(torch.ones(1, 2)), ValueError, r"n >= 2.*\(1, 2\)"),
        (
            lambda: pc.nearest_neighbour_margin(torch.ones(3, 0)),
            ValueError,
            r"table.*d >= 1.*\(3, 0\)",
        ),
        (
            lambda: pc.nearest_neighbour_margin(torch.tensor([[1.0, float("nan")], [1.0, 2.0]])),
            ValueError,
            "table.*finite.*nan",
        ),
        (
            lambda: pc.nearest_neighbour_margin(torch.ones(3, dtype=torch.float64)),
            ValueError,
            r"table.*2 dimensions.*\(3,\)",
        ),
        # first_rise and largest_reversal: a finite, real 1-D curve (largest_reversal: non-empty)
        (lambda: pc.first_rise(torch.ones(2, 3)), ValueError, r"curve.*1-D.*\(2, 3\)"),
        (
            lambda: pc.first_rise(torch.tensor(1.0)),
            ValueError,
            r"curve.*at least 1 dimensions.*\(\)",
        ),
        (
            lambda: pc.first_rise(torch.tensor([1.0, float("nan"), 2.0])),
            ValueError,
            "curve.*finite.*nan",
        ),
        (lambda: pc.first_rise(torch.tensor([True, False])), TypeError, "curve.*real.*torch.bool"),
        (lambda: pc.first_rise([1.0, 0.5]), TypeError, "curve.*torch.Tensor.*list"),
        (
            lambda: pc.largest_reversal(torch.tensor([])),
            ValueError,
            r"curve.*at least one value.*\(0,\)",
        ),
        (lambda: pc.largest_reversal(torch.ones(2, 3)), ValueError, r"curve.*1-D.*\(2, 3\)"),
        (
            lambda: pc.largest_reversal(torch.tensor([1.0, float("inf")])),
            ValueError,
            "curve.*finite.*inf",
        ),
        (lambda: pc.largest_reversal(torch.tensor([1j, 2j])), TypeError, "curve.*real.*complex64"),
        # neighbour_distance, count_pairs: d_model / head_or_model_dim positive and even, base > 1
        (lambda: pc.analysis.neighbour_distance(7), ValueError, "d_model.*even.*7"),
        (lambda: pc.analysis.neighbour_distance(8.0), TypeError, "d_model.*float 8.0"),
        (
            lambda: pc.analysis.neighbour_distance(8, base=1.0),
            ValueError,
            "base.*greater than 1.*1.0",
        ),
        (lambda: pc.count_pairs(7, 10), ValueError, "head_or_model_dim.*even.*7"),
        (lambda: pc.count_pairs(8, 0), ValueError, "length.*0"),
        (lambda: pc.count_pairs(8, 10, frozen_angle="0.1"), TypeError, "frozen_angle.*str"),
        # rope_decay_bound and rope_score_vs_distance: finite real distances, even head_dim
        (lambda: pc.rope_decay_bound(3, 7), ValueError, "head_dim.*even.*7"),
        (lambda: pc.rope_decay_bound(3, True), TypeError, "head_dim.*bool True"),
        (lambda: pc.rope_decay_bound(float("nan"), 8), ValueError, "distances.*finite.*nan"),
        (lambda: pc.rope_decay_bound(torch.tensor([True]), 8), TypeError, "distances.*torch.bool"),
        (lambda: pc.rope_decay_bound("far", 8), TypeError, "distances.*'far'"),
        (lambda: pc.rope_decay_bound(3, 8, base=0.5), ValueError, "base.*0.5"),
        (lambda: pc.rope_score_vs_distance(float("inf"), 8), ValueError, "distances.*finite.*inf"),
        (lambda: pc.rope_score_vs_distance(3, 6.0), TypeError, "head_dim.*float 6.0"),
        (
            lambda: pc.rope_score_vs_distance(3, 8, k=torch.ones(8, dtype=torch.long)),
            TypeError,
            "k.*floating.*int64",
        ),
        (
            lambda: pc.rope_score_vs_distance(3, 8, q=torch.full((8,), float("nan"))),
            ValueError,
            "q.*finite.*nan",
        ),
        (
            lambda: pc.rope_score_vs_distance(3, 8, q=torch.ones(4)),
            ValueError,
            r"q.*\(8,\).*\(4,\)",
        ),
        (
            lambda: pc.score_decomposition(
                torch.ones(3, 4), torch.ones(2, 4), torch.ones(4, 2), torch.ones(4, 2)
            ),
            ValueError,
            "same shape",
        ),
        (lambda: pc.sinusoidal_similarity(float("nan"), 8), ValueError, "offsets.*finite.*nan"),
        (
            lambda: pc.sinusoidal_similarity(torch.tensor([True]), 8),
            TypeError,
            "offsets.*torch.bool",
        ),
        (lambda: pc.sinusoidal_similarity(3, 5), ValueError, "d_model.*even.*5"),
        (
            lambda: pc.sinusoidal_similarity(3, 8, base=float("inf")),
            ValueError,
            "base.*finite.*inf",
        ),
        # score_decomposition: finite floating 2-D inputs, d_h >= 1
        (
            lambda: pc.score_decomposition(
                torch.ones(3, 4), torch.ones(3, 4), torch.ones(4, 0), torch.ones(4, 0)
            ),
            ValueError,
            r"w_q and w_k.*d_h >= 1.*\(4, 0\)",
        ),
        (
            lambda: pc.score_decomposition(
                torch.ones(3, 4), torch.ones(3, 4), torch.ones(4, 2), torch.ones(4, 3)
            ),
            ValueError,
            r"w_q and w_k.*\(4, 2\) and \(4, 3\)",
        ),
        (
            lambda: pc.score_decomposition(
                torch.tensor([[float("nan")] * 4] * 3),
                torch.ones(3, 4),
                torch.ones(4, 2),
                torch.ones(4, 2),
            ),
            ValueError,
            "content.*finite.*nan",
        ),
        (
            lambda: pc.score_decomposition(
                torch.ones(3, 4),
                torch.ones(3, 4),
                torch.ones(4, 2, dtype=torch.long),
                torch.ones(4, 2),
            ),
            TypeError,
            "w_q.*floating.*int64",
        ),
        (
            lambda: pc.score_decomposition(
                torch.ones(1, 3, 4), torch.ones(1, 3, 4), torch.ones(4, 2), torch.ones(4, 2)
            ),
            ValueError,
            r"content.*2-D.*\(1, 3, 4\)",
        ),
    ],
)
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_count_pairs_matches_a_direct_count():
    """Pairs with omega_i L >= 2 pi make a full turn; the closed form
    floor(d/2 log(L/2pi)/log b) + 1 (from omega_i = b^(-2i/d)) gives the same count."""
    for d, length, base in [
        (512, 512, 10000.0),
        (128, 8192, 500000.0),
        (64, 100, 100.0),
        (128, 131072, 10000.0),
    ]:
        counts = pc.count_pairs(d, length, base=base)
        omegas = [base ** (-2 * i / d) for i in range(d // 2)]
        assert counts["full_turn"] == sum(w * length >= 2 * math.pi for w in omegas)
        assert counts["frozen"] == sum(w * length < 0.1 for w in omegas)
        assert sum(counts.values()) == d // 2
        closed = min(
            d // 2, math.floor(d / 2 * math.log(length / (2 * math.pi)) / math.log(base)) + 1
        )
        assert counts["full_turn"] == closed
    with pytest.raises(ValueError, match="frozen_angle"):
        pc.count_pairs(8, 10, frozen_angle=7.0)


def test_neighbour_distance_and_largest_reversal():
    table = pc.sinusoidal_table(2, 64, base=500.0, dtype=torch.float64)
    assert math.isclose(
        pc.analysis.neighbour_distance(64, base=500.0),
        (table[1] - table[0]).norm().item(),
        rel_tol=1e-12,
    )
    gap, near, far = pc.largest_reversal(
        torch.tensor([1.0, 0.2, 0.5, 0.1, 0.9], dtype=torch.float64)
    )
    assert (near, far) == (3, 4) and math.isclose(gap, 0.8)
    assert pc.largest_reversal(torch.tensor([3.0, 2.0, 1.0])) == (0.0, 0, 0)
