"""PE(p + k) = M_k PE(p): the shift is a rotation that does not depend on p
(derived from the angle-addition formulas; Vaswani et al. 2017, Sec. 3.5)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import posenc_core as pc


@settings(max_examples=40, deadline=None)
@given(
    d_model=st.integers(1, 32).map(lambda h: 2 * h),
    k=st.integers(-500, 500),
    base=st.sampled_from([100.0, 10000.0, 500000.0]),
    layout=st.sampled_from(["interleaved", "half"]),
)
def test_shift_matrix_moves_every_position_by_k(d_model, k, base, layout):
    table = pc.sinusoidal_table(1200, d_model, base=base, layout=layout, dtype=torch.float64)
    m = pc.shift_matrix(k, d_model, base=base, layout=layout, dtype=torch.float64)
    p = torch.arange(max(0, -k), min(1200, 1200 - k))  # positions with p and p+k in the table
    moved = table[p] @ m.T  # rows: (M PE(p))^T
    torch.testing.assert_close(moved, table[p + k], rtol=0, atol=1e-9)


def test_shift_matrix_blocks_do_not_depend_on_p_and_compose():
    d = 12
    m3, m5, m8 = (pc.shift_matrix(k, d, dtype=torch.float64) for k in (3, 5, 8))
    torch.testing.assert_close(m3 @ m5, m8, rtol=0, atol=1e-12)
    torch.testing.assert_close(m3.T @ m3, torch.eye(d, dtype=torch.float64), rtol=0, atol=1e-12)
    torch.testing.assert_close(
        pc.shift_matrix(-3, d, dtype=torch.float64), m3.T, rtol=0, atol=1e-12
    )
    # off the 2x2 diagonal blocks everything is zero
    mask = torch.block_diag(*[torch.ones(2, 2)] * (d // 2)).bool()
    assert torch.all(m3[~mask] == 0)


def test_block_is_written_from_the_angle_addition_formulas():
    omega_1 = 10000 ** (-2 / 8)
    k = 7
    block = pc.shift_matrix(k, 8, dtype=torch.float64)[2:4, 2:4]
    expected = torch.tensor(
        [
            [math.cos(omega_1 * k), math.sin(omega_1 * k)],
            [-math.sin(omega_1 * k), math.cos(omega_1 * k)],
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(block, expected, rtol=0, atol=1e-15)


def test_rotation_matrix_is_a_rotation():
    theta = torch.tensor([0.3, -1.2, 2.0])
    r = pc.rotation_matrix(theta)
    assert r.shape == (3, 2, 2)
    torch.testing.assert_close(torch.linalg.det(r), torch.ones(3, dtype=torch.float64))
    torch.testing.assert_close(
        pc.rotation_matrix(0.5) @ pc.rotation_matrix(0.7), pc.rotation_matrix(1.2)
    )
    x = torch.tensor([1.0, 0.0], dtype=torch.float64)
    torch.testing.assert_close(
        pc.rotation_matrix(math.pi / 2) @ x, torch.tensor([0.0, 1.0], dtype=torch.float64)
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="k.*finite.*nan"):
        pc.shift_matrix(float("nan"), 8)
    with pytest.raises(TypeError, match="k.*str"):
        pc.shift_matrix("3", 8)
    with pytest.raises(ValueError, match="d_model.*even.*9"):
        pc.shift_matrix(1, 9)
    with pytest.raises(ValueError, match="layout.*'half'.*'interleaved'.*'neox'"):
        pc.shift_matrix(1, 8, layout="neox")
    with pytest.raises(ValueError, match=r"layout 'concat' is now called 'half'.*layout='half'"):
        pc.shift_matrix(1, 8, layout="concat")
    with pytest.raises(ValueError, match="base.*greater than 1.*0.5"):
        pc.shift_matrix(1, 8, base=0.5)
    with pytest.raises(ValueError, match="theta.*finite"):
        pc.rotation_matrix(float("inf"))
