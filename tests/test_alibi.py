"""ALiBi (Press, Smith and Lewis 2022): slopes and biases."""

import math

import pytest
import torch

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
    torch.testing.assert_close(got, torch.tensor(reference_get_slopes(n), dtype=torch.float64), rtol=1e-13, atol=0)


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


def test_decoding_rows_are_the_last_rows():
    full = pc.alibi_bias(4, 10, 10)
    torch.testing.assert_close(pc.alibi_bias(4, 3, 10), full[:, -3:])
    torch.testing.assert_close(pc.alibi_bias(4, 1, 10, causal=False), pc.alibi_bias(4, 10, 10, causal=False)[:, -1:])


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
    ],
)
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
