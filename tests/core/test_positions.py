"""posenc_core.positions: positions of left-padded batches (against transformers 5.23's
``GenerationMixin._prepare_position_ids_for_generation``) and of packed rows, whose
attention with RoPE equals that of each document alone (and what goes wrong without the
restarted positions or without the block mask).
"""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import posenc_core as pc
from posenc_core.positions import (
    PAD_POSITION,
    document_ids_from_lengths,
    packed_causal_mask,
    packed_positions,
    positions_from_attention_mask,
)


def hf_generate_positions(mask):
    """The position_ids transformers' generate derives from an attention mask."""
    config = LlamaConfig(
        hidden_size=16,
        num_attention_heads=2,
        num_hidden_layers=1,
        intermediate_size=16,
        vocab_size=8,
    )
    model = LlamaForCausalLM(config)
    input_ids = torch.zeros(mask.shape, dtype=torch.long)
    return model._prepare_position_ids_for_generation(input_ids, {"attention_mask": mask})


@pytest.mark.parametrize("dtype", [torch.long, torch.int32, torch.bool, torch.float32])
def test_positions_from_attention_mask_match_hf_generate(dtype):
    mask = torch.tensor(
        [[0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1], [0, 1, 1, 1, 1, 1, 0], [0] * 7]
    )
    got = positions_from_attention_mask(mask.to(dtype))
    assert got.dtype == torch.int64
    assert torch.equal(got, hf_generate_positions(mask))
    # real tokens count from 0 in each row; pad slots get PAD_POSITION (0, as HF 5.23)
    assert got[0].tolist() == [0, 0, 0, 0, 1, 2, 3] and PAD_POSITION == 0
    assert got[2].tolist() == [0, 0, 1, 2, 3, 4, 0]


@pytest.mark.parametrize(
    "mask, error, match",
    [
        (torch.tensor([[0, 2, 1]]), ValueError, r"only 0 .* and 1 .*got 2"),
        (torch.tensor([[0.0, 0.5, 1.0]]), ValueError, r"only 0 .* and 1 .*got 0\.5"),
        (torch.tensor([[0, -1, 1]]), ValueError, r"got -1"),
        (torch.ones(3, dtype=torch.long), ValueError, r"shape \(b, s\).*\(3,\)"),
        (torch.ones(1, 2, 3), ValueError, r"shape \(b, s\).*\(1, 2, 3\)"),
        (torch.ones(1, 3, dtype=torch.complex64), TypeError, r"complex64"),
        ([[1, 1, 0]], TypeError, r"attention_mask must be a torch.Tensor"),
    ],
    ids=["two", "half", "negative", "1-d", "3-d", "complex", "list"],
)
def test_bad_attention_mask(mask, error, match):
    with pytest.raises(error, match=match):
        positions_from_attention_mask(mask)


def test_packed_positions_restart_at_each_document():
    ids = document_ids_from_lengths([3, 1, 4])
    assert ids.tolist() == [0, 0, 0, 1, 2, 2, 2, 2]
    assert packed_positions(ids).tolist() == [0, 1, 2, 0, 0, 1, 2, 3]
    rows = torch.tensor([[5, 5, 9, 9, 9], [1, 1, 1, 1, 1]])  # any ids; a change starts a document
    assert packed_positions(rows).tolist() == [[0, 1, 0, 1, 2], [0, 1, 2, 3, 4]]
    assert packed_positions(torch.tensor([7, 7, 3, 7])).tolist() == [0, 1, 0, 0]  # runs


def test_packed_causal_mask_is_block_diagonal_causal():
    ids = document_ids_from_lengths([2, 3])
    mask = packed_causal_mask(ids)
    keep = [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 1, 1, 1]]
    assert mask.dtype == torch.float32 and mask.shape == (5, 5)
    assert torch.equal(mask == 0, torch.tensor(keep, dtype=torch.bool))
    assert bool((mask[mask != 0] == -torch.inf).all())
    rows = packed_causal_mask(
        torch.stack((ids, torch.zeros(5, dtype=torch.long))), dtype=torch.float64
    )
    assert rows.shape == (2, 1, 5, 5) and rows.dtype == torch.float64
    assert torch.equal(rows[0, 0], mask.double())
    assert torch.equal(rows[1, 0] == 0, torch.ones(5, 5, dtype=torch.bool).tril())


def packed_row_setup():
    lengths = [5, 3, 6]
    ids = document_ids_from_lengths(lengths)
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, sum(lengths), 16, generator=g, dtype=torch.float64) for _ in "qkv")
    return lengths, ids, q, k, v


def attend(q, k, v, positions, bias=None, causal=False):
    rope = pc.RotaryEmbedding(16)
    rq, rk = rope(q, k, positions)
    return pc.attention(rq, rk, v, bias=bias, causal=causal)


def test_packed_row_attends_like_each_document_alone():
    """Attention with RoPE over a packed row, with packed positions and the block mask, equals
    causal attention over each document on its own (positions 0 .. n-1)."""
    lengths, ids, q, k, v = packed_row_setup()
    got = attend(q, k, v, packed_positions(ids)[None], bias=packed_causal_mask(ids[None]))
    start = 0
    for n in lengths:
        part = slice(start, start + n)
        alone = attend(q[..., part, :], k[..., part, :], v[..., part, :], None, causal=True)
        torch.testing.assert_close(got[..., part, :], alone, rtol=0, atol=1e-12)
        start += n


def test_packing_without_mask_or_restart_goes_wrong():
    """Without the block mask a document sees the ones before it; without restarted positions
    (0 .. s-1 over the row) a document that starts mid-row is rotated as if it followed them.
    With the mask, RoPE's scores depend only on offsets inside a document, so the positions'
    restart then changes nothing but rounding: the mask is what isolates documents, the
    restart is what makes each document's positions match training (and absolute schemes)."""
    lengths, ids, q, k, v = packed_row_setup()
    positions, mask = packed_positions(ids)[None], packed_causal_mask(ids[None])
    right = attend(q, k, v, positions, bias=mask)
    second = slice(lengths[0], lengths[0] + lengths[1])
    no_mask = attend(q, k, v, positions, causal=True)
    assert (no_mask[..., second, :] - right[..., second, :]).abs().max() > 1e-2
    no_restart = attend(q, k, v, None, bias=mask)
    torch.testing.assert_close(no_restart, right, rtol=0, atol=1e-12)  # relative: offsets only
    no_restart_q, _ = pc.RotaryEmbedding(16)(q, k, None)
    restart_q, _ = pc.RotaryEmbedding(16)(q, k, positions)
    assert (no_restart_q[..., second, :] - restart_q[..., second, :]).abs().max() > 1e-1


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: packed_positions(torch.tensor([0.0, 1.0])), TypeError, r"integer.*float32"),
        (lambda: packed_positions(torch.tensor([True, False])), TypeError, r"integer.*torch\.bool"),
        (
            lambda: packed_positions(torch.zeros(2, 2, 2, dtype=torch.long)),
            ValueError,
            r"\(2, 2, 2\)",
        ),
        (lambda: packed_positions(torch.zeros(0, dtype=torch.long)), ValueError, r"s >= 1.*\(0,\)"),
        (lambda: packed_positions([0, 0, 1]), TypeError, r"document_ids must be a torch.Tensor"),
        (
            lambda: packed_causal_mask(torch.zeros(3, dtype=torch.long), dtype=torch.int32),
            TypeError,
            r"dtype.*floating",
        ),
        (lambda: document_ids_from_lengths([3, 0]), ValueError, r"document_lengths\[1\].*0"),
        (lambda: document_ids_from_lengths([]), ValueError, r"at least one document"),
        (lambda: document_ids_from_lengths(5), TypeError, r"sequence of positive ints.*int 5"),
        (lambda: document_ids_from_lengths([2.0]), TypeError, r"document_lengths\[0\].*float"),
        (lambda: document_ids_from_lengths(torch.tensor([2.0])), TypeError, r"1-D integer"),
    ],
    ids=[
        "float ids",
        "bool ids",
        "3-d ids",
        "empty ids",
        "list ids",
        "int mask dtype",
        "zero length",
        "no documents",
        "int lengths",
        "float length",
        "float tensor lengths",
    ],
)
def test_bad_packing_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
