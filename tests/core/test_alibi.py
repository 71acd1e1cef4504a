"""ALiBi (Press, Smith and Lewis 2022): slopes and biases."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rounding import is_nearest

import posenc_core as pc


def reference_get_slopes(n):
    """The slope recipe of the ALiBi reference code (ofirpress/attention_with_linear_biases),
    rewritten here from its description: for a power of two, start = ratio = 2**(-2**-(log2(n)-3))
    and slopes start * ratio**i; otherwise the slopes of the closest lower power of two, then
    every other slope of twice that, cut to n."""

    def power_of_2(m):
        start = 2 ** (-(2 ** -(math.log2(m) - 3)))
        return [start * start**i for i in range(m)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + reference_get_slopes(2 * closest)[0::2][: n - closest]


@pytest.mark.parametrize("n", list(range(1, 65)) + [96, 100, 128])
def test_slopes_match_reference_get_slopes(n):
    got = pc.alibi_slopes(n, dtype=torch.float64)
    torch.testing.assert_close(
        got, torch.tensor(reference_get_slopes(n), dtype=torch.float64), rtol=1e-13, atol=0
    )


def test_eight_heads_published_slopes():
    """The paper: for 8 heads the slopes are 1/2, 1/4, ..., 1/256."""
    assert pc.alibi_slopes(8, dtype=torch.float64).tolist() == [2.0**-k for k in range(1, 9)]


def test_bias_rows_match_the_formula():
    h, n = 6, 9
    m = torch.tensor(reference_get_slopes(h), dtype=torch.float64)
    causal = pc.alibi_bias(h, n, n, dtype=torch.float64)
    both = pc.alibi_bias(h, n, n, causal=False, dtype=torch.float64)
    for head in range(h):
        for i in range(n):
            for j in range(n):
                assert both[head, i, j] == -m[head] * abs(i - j)
                if j <= i:
                    assert causal[head, i, j] == -m[head] * (i - j)
                else:
                    assert causal[head, i, j] == float("-inf")


@st.composite
def _bias_case(draw):
    k_len = draw(st.integers(1, 40))
    return draw(st.integers(1, 64)), draw(st.integers(1, k_len)), k_len


@settings(max_examples=80, deadline=None)
@given(
    case=_bias_case(),
    causal=st.booleans(),
    dtype=st.sampled_from([torch.float64, torch.float32, torch.bfloat16, torch.float16]),
)
def test_bias_matches_the_formula_for_any_heads_and_lengths(case, causal, dtype):
    """Press et al. 2022, Sec. 3: bias -m_h (i - j) for keys j at or before query i (-inf after
    it, the causal mask), or -m_h |i - j| without a mask. The q_len queries are the last q_len of
    the k_len positions, so query row r sits at position i = k_len - q_len + r. Slopes come from
    this file's own transcription of get_slopes; the result is the nearest value in ``dtype``."""
    h, q_len, k_len = case
    m = np.array(reference_get_slopes(h), dtype=np.float64)  # (h,)
    i = np.arange(q_len) + (k_len - q_len)  # (q,) absolute positions of the queries
    j = np.arange(k_len)  # (k,)
    rel = (i[:, None] - j[None, :]).astype(np.float64)  # (q, k)
    if causal:
        expected = np.where(rel[None] >= 0, -m[:, None, None] * rel[None], -np.inf)
    else:
        expected = -m[:, None, None] * np.abs(rel)[None]
    expected = torch.from_numpy(expected)  # (h, q, k), float64
    got = pc.alibi_bias(h, q_len, k_len, causal=causal, dtype=dtype)
    assert got.shape == (h, q_len, k_len) and got.dtype == dtype
    masked = torch.isinf(expected)
    assert torch.equal(torch.isinf(got), masked) and bool((got[masked] < 0).all())
    if dtype == torch.float64:
        torch.testing.assert_close(got[~masked], expected[~masked], rtol=1e-13, atol=0)
    else:  # the float64 value rounded once (slack: the slopes' own float64 rounding, |bias| <= 40)
        assert bool(is_nearest(got[~masked], expected[~masked], 1e-12).all())


def test_numpy_bool_is_accepted_for_causal():
    assert torch.equal(
        pc.alibi_bias(3, 4, 5, causal=np.bool_(True)), pc.alibi_bias(3, 4, 5, causal=True)
    )
    assert torch.equal(
        pc.alibi_bias(3, 4, 5, causal=np.bool_(False)), pc.alibi_bias(3, 4, 5, causal=False)
    )


def test_key_bias_is_slope_times_key_index():
    """The reference code's key-only bias m_h * j (ofirpress/attention_with_linear_biases)."""
    for h in (1, 5, 8, 12):
        m = torch.tensor(reference_get_slopes(h), dtype=torch.float64)
        got = pc.alibi_key_bias(h, 7, dtype=torch.float64)
        assert got.shape == (h, 1, 7)
        torch.testing.assert_close(
            got, m[:, None, None] * torch.arange(7.0, dtype=torch.float64), rtol=1e-13, atol=0
        )


def test_device_may_be_a_string_or_a_device():
    for device in ("cpu", torch.device("cpu"), None):
        assert pc.alibi_slopes(4, device=device).device.type == "cpu"
        assert pc.alibi_bias(4, 2, 3, device=device).device.type == "cpu"
        assert pc.alibi_key_bias(4, 3, device=device).device.type == "cpu"


def test_decoding_rows_are_the_last_rows():
    full = pc.alibi_bias(4, 10, 10)
    torch.testing.assert_close(pc.alibi_bias(4, 3, 10), full[:, -3:])
    torch.testing.assert_close(
        pc.alibi_bias(4, 1, 10, causal=False), pc.alibi_bias(4, 10, 10, causal=False)[:, -1:]
    )


def test_key_only_shortcut_equals_alibi_only_under_a_causal_mask():
    h, n = 4, 12
    scores = torch.randn(h, n, n, dtype=torch.float64)
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    short = pc.alibi_key_bias(h, n, dtype=torch.float64)
    causal_full = pc.alibi_bias(h, n, n, dtype=torch.float64)
    w_short = torch.softmax((scores + short).masked_fill(~mask, float("-inf")), -1)
    torch.testing.assert_close(w_short, torch.softmax(scores + causal_full, -1))
    w_short_bi = torch.softmax(scores + short, -1)
    w_bi = torch.softmax(scores + pc.alibi_bias(h, n, n, causal=False, dtype=torch.float64), -1)
    assert (w_short_bi - w_bi).abs().max() > 0.05


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: pc.alibi_slopes(0), ValueError, "n_heads.*0"),
        (lambda: pc.alibi_slopes(2.0), TypeError, "n_heads.*float"),
        (lambda: pc.alibi_bias(4, 5, 3), ValueError, "q_len.*k_len.*q_len=5, k_len=3"),
        (lambda: pc.alibi_bias(4, 0, 3), ValueError, "q_len.*0"),
        (lambda: pc.alibi_bias(4, 3, 3, causal="yes"), TypeError, "causal.*str"),
        (lambda: pc.alibi_slopes(4, dtype=torch.int32), TypeError, "dtype.*int32"),
        # dtype: floating only (an int32 bias held -2147483648 for -inf; an int key bias was all
        # zeros)
        (lambda: pc.alibi_bias(2, 3, 3, dtype=torch.int32), TypeError, "dtype.*floating.*int32"),
        (
            lambda: pc.alibi_bias(2, 3, 3, dtype=torch.bool),
            TypeError,
            "dtype.*floating.*torch.bool",
        ),
        (
            lambda: pc.alibi_bias(2, 3, 3, dtype="float32"),
            TypeError,
            "dtype.*torch.dtype.*str 'float32'",
        ),
        (lambda: pc.alibi_key_bias(2, 3, dtype=torch.int32), TypeError, "dtype.*floating.*int32"),
        (
            lambda: pc.alibi_key_bias(2, 3, dtype=torch.complex64),
            TypeError,
            "dtype.*floating.*complex64",
        ),
        # causal: True or False (numpy bools too), nothing else
        (lambda: pc.alibi_bias(4, 3, 3, causal=1), TypeError, "causal.*True or False.*int 1"),
        (
            lambda: pc.alibi_bias(4, 3, 3, causal=None),
            TypeError,
            "causal.*True or False.*NoneType None",
        ),
        # head counts and lengths
        (lambda: pc.alibi_slopes(True), TypeError, "n_heads.*bool True"),
        (lambda: pc.alibi_bias(True, 3, 3), TypeError, "n_heads.*bool True"),
        (lambda: pc.alibi_key_bias(True, 3), TypeError, "n_heads.*bool True"),
        (lambda: pc.alibi_bias(-2, 3, 3), ValueError, "n_heads.*-2"),
        (lambda: pc.alibi_key_bias(0, 3), ValueError, "n_heads.*0"),
        (lambda: pc.alibi_key_bias(4, 0), ValueError, "k_len.*0"),
        (lambda: pc.alibi_key_bias(4, 3.0), TypeError, "k_len.*float 3.0"),
        (lambda: pc.alibi_bias(4, 3, 3.5), TypeError, "k_len.*float 3.5"),
        (lambda: pc.alibi_bias(4, True, 3), TypeError, "q_len.*bool True"),
        # device: what torch.device parses, a torch.device, or None
        (lambda: pc.alibi_slopes(4, device="foo"), ValueError, "device.*'foo'"),
        (lambda: pc.alibi_bias(4, 3, 3, device="foo"), ValueError, "device.*'foo'"),
        (lambda: pc.alibi_key_bias(4, 3, device="foo"), ValueError, "device.*'foo'"),
        (lambda: pc.alibi_key_bias(4, 3, device=1.5), TypeError, "device.*float 1.5"),
        (lambda: pc.alibi_bias(4, 3, 3, device=True), TypeError, "device.*bool True"),
    ],
)
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
