"""Learned absolute position embeddings (Devlin et al. 2019): a trainable table with one row
per position and none past its end."""

import pytest
import torch

import posenc_core as pc


def test_adds_the_row_of_each_position():
    emb = pc.LearnedPositionalEmbedding(10, 4)
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(emb(x), x + emb.weight[:3])
    torch.testing.assert_close(emb(x, offset=7), x + emb.weight[7:10])
    pos = torch.tensor([[0, 0, 1], [5, 6, 9]])  # e.g. numbering restarted after left padding
    torch.testing.assert_close(emb(x, positions=pos), x + emb.weight[pos])


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
        (lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor([0.0, 1.0])), TypeError, "positions.*integer.*float32"),
        (lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor([0, -1])), ValueError, "positions.*>= 0.*-1"),
        (lambda e: e(torch.zeros(1, 2, 4), positions=torch.tensor([0, 1, 2])), ValueError, r"positions.*s=2.*\(3,\)"),
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
