"""Sinusoidal encoding against the paper's formula (Vaswani et al. 2017, Sec. 3.5),
evaluated independently with Python's math module in double precision."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rounding import is_nearest

import posenc_core as pc


def paper_pe(pos: float, d_model: int, base: float = 10000.0) -> list[float]:
    """PE(pos, 2i) = sin(pos / base^(2i/d)), PE(pos, 2i+1) = cos(pos / base^(2i/d)), in float64."""
    row = []
    for i in range(d_model // 2):
        angle = pos / base ** (2 * i / d_model)
        row += [math.sin(angle), math.cos(angle)]
    return row


def test_table_matches_paper_formula():
    table = pc.sinusoidal_table(50, 16, dtype=torch.float64)
    expected = torch.tensor([paper_pe(p, 16) for p in range(50)], dtype=torch.float64)
    # the two evaluations round base**(2i/d) differently by an ulp; times pos < 50 that is < 1e-13
    torch.testing.assert_close(table, expected, rtol=0, atol=1e-13)


def test_d768_position_one_first_dims():
    """dims 2, 3 at pos 1 use omega_1 = 10000^(-2/768), about 0.976 rad, not 0.01."""
    row = pc.sinusoidal_table(2, 768, dtype=torch.float64)[1, :4]
    w1 = 10000 ** (-2 / 768)
    expected = torch.tensor(
        [math.sin(1), math.cos(1), math.sin(w1), math.cos(w1)], dtype=torch.float64
    )
    torch.testing.assert_close(row, expected, rtol=0, atol=1e-15)


@settings(max_examples=30, deadline=None)
@given(
    d_model=st.integers(1, 64).map(lambda h: 2 * h),
    base=st.floats(1.5, 1e7),
    pos=st.integers(0, 2**20),
)
def test_float32_within_1e6_of_float64_up_to_2_20(d_model, base, pos):
    got = pc.sinusoidal_encoding(torch.tensor([pos]), d_model, base=base)[0].double()
    expected = torch.tensor(paper_pe(pos, d_model, base), dtype=torch.float64)
    assert (got - expected).abs().max() < 1e-6


def test_low_precision_tables_are_correctly_rounded():
    positions = torch.tensor([0, 1, 255, 256, 257, 2049, 4096, 65519, 131072, 1_000_000])
    exact = torch.tensor([paper_pe(int(p), 64) for p in positions], dtype=torch.float64)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        got = pc.sinusoidal_encoding(positions, 64, dtype=dtype)
        assert got.dtype == dtype
        # math's angle differs from ours by an ulp of the frequency times pos: slack 4e-10
        assert bool(is_nearest(got, exact, 4e-10).all())


def test_low_precision_tables_are_correctly_rounded_everywhere():
    """Over 262,144 values the double rounding float64 -> float32 -> bf16 would miss the
    nearest value a few times; the table must not (reference: numpy float64)."""
    import numpy as np

    pos = np.arange(4096, dtype=np.float64)[:, None]
    ang = pos * 10000.0 ** (-np.arange(0, 128, 2) / 128)
    exact = torch.from_numpy(np.stack((np.sin(ang), np.cos(ang)), -1).reshape(4096, 128))
    for dtype in (torch.bfloat16, torch.float16):
        got = pc.sinusoidal_table(4096, 128, dtype=dtype)
        assert bool(is_nearest(got, exact, 4096 * 2.0**-52).all())


def test_frequencies_are_geometric_from_one():
    d, base = 128, 10000.0
    omega = pc.sinusoidal_frequencies(d, base=base)
    assert omega.shape == (64,) and omega.dtype == torch.float64
    assert omega[0].item() == 1.0
    ratios = omega[1:] / omega[:-1]
    torch.testing.assert_close(
        ratios, torch.full_like(ratios, base ** (-2 / d)), rtol=1e-13, atol=0
    )
    lam = pc.sinusoidal_wavelengths(d, base=base)
    assert math.isclose(lam[0].item(), 2 * math.pi, rel_tol=1e-15)
    assert math.isclose(lam[-1].item(), 2 * math.pi * base ** ((d - 2) / d), rel_tol=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    d_model=st.integers(1, 128).map(lambda h: 2 * h),
    base=st.floats(2.0, 1e6),
    p=st.integers(0, 10_000),
    p2=st.integers(0, 10_000),
    k=st.integers(-2_000, 2_000),
    layout=st.sampled_from(["interleaved", "half"]),
)
def test_dot_product_depends_only_on_the_offset(d_model, base, p, p2, k, layout):
    """Vaswani et al. 2017, Sec. 3.5 (PE(p+k) is a linear function of PE(p)): by the angle-addition
    formulas PE(p) . PE(p+k) = sum_i cos(k omega_i), whatever p. The right-hand side is computed
    here in float64 with Python's math, independently of the library."""
    expected = math.fsum(math.cos(k * base ** (-2 * i / d_model)) for i in range(d_model // 2))
    for start in (p, p2):
        rows = pc.sinusoidal_encoding(
            torch.tensor([start, start + k]), d_model, base=base, layout=layout, dtype=torch.float64
        )
        # angles up to 12,000 rad are off by about ulp(12,000) = 2e-12 each (3e-12 seen over <= 128
        # pairs); a wrong formula or frequency is off by far more than 1e-10
        assert abs(float(rows[0] @ rows[1]) - expected) < 1e-10


def test_wavelengths_grow_geometrically_from_two_pi():
    """Vaswani et al. 2017, Sec. 3.5: the wavelengths form a geometric progression from 2 pi
    (to 10000 * 2 pi for the paper's base); 2 pi base**(2i/d) computed here with math."""
    for d, base in [(8, 10000.0), (64, 500.0), (128, 500000.0)]:
        expected = torch.tensor(
            [2 * math.pi * base ** (2 * i / d) for i in range(d // 2)], dtype=torch.float64
        )
        torch.testing.assert_close(
            pc.sinusoidal_wavelengths(d, base=base), expected, rtol=1e-13, atol=0
        )


def test_device_may_be_a_string_or_a_device():
    for device in ("cpu", torch.device("cpu")):
        assert pc.sinusoidal_table(4, 8, device=device).device.type == "cpu"
        assert pc.sinusoidal_encoding([0.5, 2.0], 8, device=device).device.type == "cpu"


@pytest.mark.parametrize("base", [10.0, 100.0, 10000.0, 500000.0])
def test_highest_frequency_is_one_radian_whatever_the_base(base):
    assert pc.sinusoidal_frequencies(64, base=base)[0].item() == 1.0


def test_bounded_values_and_constant_norm():
    table = pc.sinusoidal_table(3000, 64, dtype=torch.float64)
    assert table.abs().max() <= 1.0
    torch.testing.assert_close(
        table.norm(dim=1), torch.full((3000,), math.sqrt(32), dtype=torch.float64)
    )


def test_half_layout_is_a_permutation_of_interleaved():
    """ "half" = all sines, then all cosines: sine i at dim i, cosine i at dim i + d/2."""
    inter = pc.sinusoidal_table(20, 10, dtype=torch.float64)
    half = pc.sinusoidal_table(20, 10, layout="half", dtype=torch.float64)
    torch.testing.assert_close(half[:, :5], inter[:, 0::2], rtol=0, atol=0)
    torch.testing.assert_close(half[:, 5:], inter[:, 1::2], rtol=0, atol=0)


def test_half_layout_pairs_dims_as_ropes_half_layout():
    """One vocabulary: in the "half" table dims j and j + d/2 are the (sin, cos) of one angle,
    the pairs RoPE's half layout rotates together (its cos table repeats each angle at j and
    j + d/2)."""
    d = 10
    half = pc.sinusoidal_table(20, d, layout="half", dtype=torch.float64)
    cos, sin = pc.rope_cos_sin(torch.arange(20), d, layout="half", dtype=torch.float64)
    torch.testing.assert_close(half[:, : d // 2], sin[:, : d // 2], rtol=0, atol=1e-13)
    torch.testing.assert_close(half[:, d // 2 :], cos[:, d // 2 :], rtol=0, atol=1e-13)


@pytest.mark.parametrize(
    "call",
    [
        lambda: pc.sinusoidal_table(4, 8, layout="concat"),
        lambda: pc.sinusoidal_encoding([0, 1], 8, layout="concat"),
        lambda: pc.SinusoidalPositionalEncoding(8, 4, layout="concat"),
    ],
    ids=["table", "encoding", "module"],
)
def test_the_old_layout_name_concat_is_refused_with_its_new_name(call):
    with pytest.raises(
        ValueError, match=r"layout 'concat' is now called 'half'.*layout='half'.*'interleaved'"
    ):
        call()


def test_module_adds_table_with_offset_and_beyond_max_len():
    d = 16
    module = pc.SinusoidalPositionalEncoding(d, max_len=8)
    x = torch.randn(2, 5, d)
    torch.testing.assert_close(module(x), x + pc.sinusoidal_table(5, d))
    # positions 6..10 run past the 8 precomputed rows: the formula still gives them
    out = module(x, offset=6)
    expected = x + torch.tensor([paper_pe(p, d) for p in range(6, 11)], dtype=torch.float32)
    torch.testing.assert_close(out, expected)


def test_module_scale_and_buffer_is_not_persistent():
    module = pc.SinusoidalPositionalEncoding(8, 4, scale=math.sqrt(8))
    assert "pe" not in module.state_dict()
    x = torch.randn(1, 4, 8)
    torch.testing.assert_close(module(x), x * math.sqrt(8) + pc.sinusoidal_table(4, 8))


def test_module_low_precision_sum_is_rounded_once():
    module = pc.SinusoidalPositionalEncoding(32, 64)
    x = torch.randn(3, 64, 32).to(torch.bfloat16)
    out = module(x)
    assert out.dtype == torch.bfloat16
    exact = x.double() + torch.tensor([paper_pe(p, 32) for p in range(64)], dtype=torch.float64)
    assert bool(is_nearest(out, exact, 1e-12).all())
    module.half()  # a cast must not lower the table's precision
    x16 = x.to(torch.float16)
    out16 = module(x16)
    assert bool(is_nearest(out16, x16.double() + exact - x.double(), 1e-12).all())


def test_module_low_precision_gradient_is_that_of_a_cast():
    """d(x + PE)/dx = 1 for every element, also where rounding to bfloat16 is inexact (the
    rounding is a cast; its gradient is the incoming gradient, as for ``Tensor.to``)."""
    module = pc.SinusoidalPositionalEncoding(64, 128)
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.randn(2, 128, 64).to(dtype).requires_grad_()
        module(x).float().sum().backward()
        assert x.grad.dtype == dtype
        assert torch.equal(x.grad, torch.ones_like(x))


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"n_positions": 4, "d_model": 7}, ValueError, "d_model.*even.*7"),
        ({"n_positions": 4, "d_model": 0}, ValueError, "d_model.*positive.*0"),
        ({"n_positions": 4, "d_model": -4}, ValueError, "d_model.*-4"),
        ({"n_positions": 4, "d_model": 8.0}, TypeError, "d_model.*float"),
        ({"n_positions": 4, "d_model": True}, TypeError, "d_model.*bool"),
        ({"n_positions": 0, "d_model": 8}, ValueError, "n_positions.*0"),
        ({"n_positions": 4, "d_model": 8, "base": 1.0}, ValueError, "base.*greater than 1.*1.0"),
        ({"n_positions": 4, "d_model": 8, "base": 0.5}, ValueError, "base.*0.5"),
        ({"n_positions": 4, "d_model": 8, "base": float("nan")}, ValueError, "base.*finite.*nan"),
        ({"n_positions": 4, "d_model": 8, "base": float("inf")}, ValueError, "base.*finite.*inf"),
        ({"n_positions": 4, "d_model": 8, "base": "10000"}, TypeError, "base.*str"),
        (
            {"n_positions": 4, "d_model": 8, "layout": "fairseq"},
            ValueError,
            "layout.*'half'.*'interleaved'.*fairseq",
        ),
        ({"n_positions": 4, "d_model": 8, "dtype": torch.int64}, TypeError, "dtype.*int64"),
        ({"n_positions": True, "d_model": 8}, TypeError, "n_positions.*bool True"),
        ({"n_positions": 4, "d_model": 8, "device": "foo"}, ValueError, "device.*'foo'"),
        ({"n_positions": 4, "d_model": 8, "device": 1.5}, TypeError, "device.*float 1.5"),
        ({"n_positions": 4, "d_model": 8, "device": ["cpu"]}, TypeError, r"device.*list \['cpu'\]"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        pc.sinusoidal_table(**kwargs)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: pc.sinusoidal_frequencies(7), ValueError, "d_model.*even.*7"),
        (lambda: pc.sinusoidal_frequencies(0), ValueError, "d_model.*positive.*0"),
        (lambda: pc.sinusoidal_frequencies(True), TypeError, "d_model.*bool True"),
        (lambda: pc.sinusoidal_frequencies(8, base=1.0), ValueError, "base.*greater than 1.*1.0"),
        (lambda: pc.sinusoidal_frequencies(8, base=None), TypeError, "base.*NoneType None"),
        (lambda: pc.sinusoidal_wavelengths(9), ValueError, "d_model.*even.*9"),
        (lambda: pc.sinusoidal_wavelengths(8.0), TypeError, "d_model.*float 8.0"),
        (lambda: pc.sinusoidal_wavelengths(8, base=float("nan")), ValueError, "base.*finite.*nan"),
        (lambda: pc.sinusoidal_wavelengths(8, base="10000"), TypeError, "base.*str '10000'"),
        (lambda: pc.sinusoidal_encoding([0, 1], 8, device="foo"), ValueError, "device.*'foo'"),
        (lambda: pc.sinusoidal_encoding([0, 1], 8, device=0.5), TypeError, "device.*float 0.5"),
        (
            lambda: pc.sinusoidal_encoding(torch.tensor([True]), 8),
            TypeError,
            "positions.*torch.bool",
        ),
        (lambda: pc.sinusoidal_encoding(torch.tensor([1j]), 8), TypeError, "positions.*complex64"),
        (lambda: pc.sinusoidal_encoding("abc", 8), TypeError, "positions.*'abc'"),
        (
            lambda: pc.sinusoidal_encoding([0, 1], 8, layout="rotate_half"),
            ValueError,
            "layout.*'half'.*'interleaved'.*'rotate_half'",
        ),
        (lambda: pc.sinusoidal_encoding([0, 1], 8, dtype=torch.int32), TypeError, "dtype.*int32"),
        (lambda: pc.SinusoidalPositionalEncoding(7, 4), ValueError, "d_model.*even.*7"),
        (
            lambda: pc.SinusoidalPositionalEncoding(8, 4, scale=float("nan")),
            ValueError,
            "scale.*finite.*nan",
        ),
        (lambda: pc.SinusoidalPositionalEncoding(8, 4, base=1.0), ValueError, "base.*1.0"),
        (
            lambda: pc.SinusoidalPositionalEncoding(8, 4)(torch.zeros(8)),
            ValueError,
            r"x.*2 dimensions.*\(8,\)",
        ),
        (
            lambda: pc.SinusoidalPositionalEncoding(8, 4)(torch.zeros(1, 2, 8), offset=True),
            TypeError,
            "offset.*bool True",
        ),
        (
            lambda: pc.SinusoidalPositionalEncoding(8, 4)(torch.zeros(1, 2, 8), offset=1.5),
            TypeError,
            "offset.*float 1.5",
        ),
    ],
)
def test_bad_inputs_to_each_function(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_bad_positions_and_module_inputs():
    with pytest.raises(ValueError, match="positions.*finite.*nan"):
        pc.sinusoidal_encoding(torch.tensor([0.0, float("nan")]), 8)
    with pytest.raises(ValueError, match="positions.*finite.*inf"):
        pc.sinusoidal_encoding(torch.tensor([float("inf")]), 8)
    module = pc.SinusoidalPositionalEncoding(8, 16)
    with pytest.raises(ValueError, match="d_model=8.*\\(2, 3, 6\\)"):
        module(torch.zeros(2, 3, 6))
    with pytest.raises(TypeError, match="x.*floating.*int64"):
        module(torch.zeros(2, 3, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="offset.*-1"):
        module(torch.zeros(2, 3, 8), offset=-1)
    with pytest.raises(ValueError, match="max_len.*0"):
        pc.SinusoidalPositionalEncoding(8, 0)


def test_the_module_repr_fits_the_books_code_column():
    """The chapters print modules; a line over 80 characters would scroll sideways."""
    import posenc_core as pc

    long = pc.SinusoidalPositionalEncoding(128, max_len=64)
    assert max(len(line) for line in repr(long).splitlines()) <= 80
    assert "d_model=128" in repr(long) and "layout='interleaved'" in repr(long)
    rope = pc.RotaryEmbedding(64, scaling={"rope_type": "linear", "factor": 4.0})
    assert max(len(line) for line in repr(rope).splitlines()) <= 80
    assert "'factor': 4.0" in repr(rope)


def test_the_module_checks_its_arguments_once(monkeypatch):
    """Validate once: forward checks x and offset; building rows (also past max_len, and
    after a cast) does not check the module's own settings again."""
    import posenc_core._validation as check

    module = pc.SinusoidalPositionalEncoding(16, 8)
    x = torch.randn(2, 5, 16)
    expected = module(x, offset=6)
    calls = []
    for name in ("even_int", "base_value", "layout", "float_dtype", "device_value", "as_positions"):
        monkeypatch.setattr(check, name, lambda *a, _n=name, **k: calls.append(_n))
    assert torch.equal(module(x, offset=6), expected)  # rows 6..10: past the 8 precomputed
    module.half()
    module(x.half())  # rebuilds the table in float64
    assert calls == []
