"""Learned absolute position embeddings (Devlin et al. 2019): a trainable table with one row
per position and none past its end."""

import pytest
import torch
from rounding import is_nearest

import posenc_core as pc


def test_adds_the_row_of_each_position():
    emb = pc.LearnedPositionalEmbedding(10, 4)
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(emb(x), x + emb.weight[:3])
    torch.testing.assert_close(emb(x, offset=7), x + emb.weight[7:10])
    pos = torch.tensor([[0, 0, 1], [5, 6, 9]])  # e.g. numbering restarted after left padding
    torch.testing.assert_close(emb(x, positions=pos), x + emb.weight[pos])


def test_float32_and_float64_sums_are_the_plain_sum():
    """For float32/float64 inputs the result is exactly ``x + P[p]`` in x's dtype."""
    emb = pc.LearnedPositionalEmbedding(10, 4)
    x = torch.randn(2, 3, 4)
    assert torch.equal(emb(x, offset=2), x + emb.weight[2:5])
    emb64 = pc.LearnedPositionalEmbedding(10, 4).double()
    x64 = torch.randn(3, 4, dtype=torch.float64)
    assert torch.equal(emb64(x64), x64 + emb64.weight[:3])
    pos = torch.tensor([4, 0, 9])
    assert torch.equal(emb64(x64, positions=pos), x64 + emb64.weight[pos])


def test_positions_shapes_that_keep_the_shape_of_x():
    """positions (s,) for any x; (b, s) with x's batch size, or 1, for x of shape (b, s, d)."""
    emb = pc.LearnedPositionalEmbedding(10, 4)
    x = torch.randn(2, 3, 4)
    for pos in (
        torch.tensor([1, 2, 3]),
        torch.tensor([[1, 2, 3]]),
        torch.tensor([[1, 2, 3], [7, 8, 9]]),
    ):
        out = emb(x, positions=pos)
        assert out.shape == x.shape
        torch.testing.assert_close(out, x + emb.weight[pos], rtol=0, atol=0)
    x2 = torch.randn(3, 4)
    assert emb(x2, positions=torch.tensor([5, 5, 5], dtype=torch.int32)).shape == (3, 4)
    assert emb(x2, offset=0, positions=torch.tensor([5, 5, 5])).shape == (
        3,
        4,
    )  # offset 0 is no clash


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_sum_is_rounded_once(dtype):
    """Every output is the nearest bf16/fp16 value to the exact sum x + W (float64), not the
    double rounding x + W.to(dtype); the gradient still reaches x and the table."""
    torch.manual_seed(1)
    emb = pc.LearnedPositionalEmbedding(512, 256, init_std=1.0)
    x = torch.randn(2, 512, 256).to(dtype).requires_grad_()
    out = emb(x)
    assert out.dtype == dtype and out.shape == x.shape
    exact = x.detach().double() + emb.weight.detach().double()  # (2, 512, 256), exact in float64
    assert bool(is_nearest(out.detach(), exact, 0).all())
    naive = x.detach() + emb.weight.detach().to(dtype)  # the old, twice-rounded sum
    assert not bool(is_nearest(naive, exact, 0).all())  # so this data does exercise the difference
    pos = torch.randint(0, 512, (2, 512))
    out_pos = emb(x.detach(), positions=pos)
    assert bool(
        is_nearest(out_pos, x.detach().double() + emb.weight.detach().double()[pos], 0).all()
    )

    (out.float() * 2).sum().backward()
    assert x.grad.dtype == dtype and torch.equal(x.grad, torch.full_like(x, 2))
    assert emb.weight.grad.dtype == torch.float32
    torch.testing.assert_close(
        emb.weight.grad, torch.full_like(emb.weight, 4), rtol=0, atol=0
    )  # 2 x batch of 2


def test_parameter_count_is_rows_times_width():
    """BERT-base: 512 positions x 768 dims = 393,216 parameters (Devlin et al. 2019 sizes)."""
    emb = pc.LearnedPositionalEmbedding(512, 768)
    assert sum(p.numel() for p in emb.parameters()) == 512 * 768 == 393216


def test_only_used_rows_get_gradient():
    emb = pc.LearnedPositionalEmbedding(16, 4)
    emb(torch.zeros(1, 5, 4), offset=3).sum().backward()
    used = torch.zeros(16, dtype=torch.bool)
    used[3:8] = True
    assert torch.all(emb.weight.grad[used] == 1)
    assert torch.all(emb.weight.grad[~used] == 0)


def test_position_past_the_table_is_a_clear_value_error():
    emb = pc.LearnedPositionalEmbedding(8, 4)
    with pytest.raises(ValueError, match=r"needs position 8.*only for positions 0\.\.7.*max_len=8"):
        emb(torch.zeros(1, 9, 4))
    with pytest.raises(ValueError, match=r"position 10.*0\.\.7"):
        emb(torch.zeros(1, 3, 4), offset=8)
    with pytest.raises(ValueError, match=r"position 8"):
        emb(torch.zeros(1, 2, 4), positions=torch.tensor([0, 8]))
    emb(torch.zeros(1, 8, 4))  # exactly fills the table: fine


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda e: e(torch.zeros(1, 2, 5)), ValueError, r"d_model=4.*\(1, 2, 5\)"),
        (lambda e: e(torch.zeros(1, 2, 4, dtype=torch.long)), TypeError, "x.*floating.*int64"),
        (lambda e: e(torch.zeros(1, 2, 4), offset=-1), ValueError, "offset.*-1"),
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor([0.0, 1.0])),
            TypeError,
            "positions.*integer.*float32",
        ),
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor([0, -1])),
            ValueError,
            "positions.*>= 0.*-1",
        ),
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor([0, 1, 2])),
            ValueError,
            r"positions.*s=2.*\(3,\)",
        ),
        (lambda e: e(torch.zeros(4)), ValueError, r"x.*2 dimensions.*\(4,\)"),
        # positions: a 0-d tensor, or a shape that would not give x's shape
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor(1)),
            ValueError,
            r"positions.*s=2.*got positions of shape \(\)",
        ),
        (
            lambda e: e(torch.zeros(2, 2, 4), positions=torch.zeros(3, 2, dtype=torch.long)),
            ValueError,
            r"positions.*\(b, s\) = \(2, 2\).*shape \(3, 2\) for x of shape \(2, 2, 4\)",
        ),
        (
            lambda e: e(torch.zeros(2, 4), positions=torch.zeros(3, 2, dtype=torch.long)),
            ValueError,
            r"positions.*\(s,\) with s=2, .*shape \(3, 2\) for x of shape \(2, 4\)",
        ),
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=torch.zeros(2, 2, dtype=torch.long)),
            ValueError,
            r"positions.*\(1, 2\).*shape \(2, 2\) for x of shape \(1, 2, 4\)",
        ),
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=torch.zeros(1, 1, 2, dtype=torch.long)),
            ValueError,
            r"positions.*shape \(1, 1, 2\) for x of shape \(1, 2, 4\)",
        ),
        # positions: integers only
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor([True, False])),
            TypeError,
            "positions.*integer.*torch.bool",
        ),
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor([0j, 1j])),
            TypeError,
            "positions.*integer.*complex64",
        ),
        (
            lambda e: e(
                torch.zeros(1, 2, 4), positions=torch.tensor([0.0, 1.0], dtype=torch.float64)
            ),
            TypeError,
            "positions.*integer.*float64",
        ),
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=[0, 1]),
            TypeError,
            "positions.*torch.Tensor.*list",
        ),
        (
            lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor([[0, 9]])),
            ValueError,
            r"needs position 9.*max_len=8",
        ),
        # offset and positions together; offsets that are not integers
        (
            lambda e: e(torch.zeros(1, 2, 4), offset=7, positions=torch.tensor([0, 1])),
            ValueError,
            "either offset or positions.*offset=7",
        ),
        (lambda e: e(torch.zeros(1, 2, 4), offset=True), TypeError, "offset.*bool True"),
        (lambda e: e(torch.zeros(1, 2, 4), offset=1.5), TypeError, "offset.*float 1.5"),
        (lambda e: e(torch.zeros(1, 2, 4), True), TypeError, "offset.*bool True"),
        (
            lambda e: e(torch.zeros(1, 2, 4), offset=1.0, positions=torch.tensor([0, 1])),
            TypeError,
            "offset.*float 1.0",
        ),
    ],
)
def test_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call(pc.LearnedPositionalEmbedding(8, 4))


def test_bad_construction():
    with pytest.raises(ValueError, match="max_len.*0"):
        pc.LearnedPositionalEmbedding(0, 4)
    with pytest.raises(TypeError, match="d_model.*float"):
        pc.LearnedPositionalEmbedding(8, 4.0)
    with pytest.raises(TypeError, match="max_len.*bool True"):
        pc.LearnedPositionalEmbedding(True, 4)
    with pytest.raises(ValueError, match="init_std.*-0.5"):
        pc.LearnedPositionalEmbedding(8, 4, init_std=-0.5)
    with pytest.raises(ValueError, match="init_std.*finite.*nan"):
        pc.LearnedPositionalEmbedding(8, 4, init_std=float("nan"))
