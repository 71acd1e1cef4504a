"""RoPE over several axes: axial 2-D RoPE and Qwen2-VL's M-RoPE, against Hugging Face's Qwen2-VL
code (transformers 5.23.0: ``Qwen2VLVisionRotaryEmbedding`` with ``get_vision_position_ids``,
``Qwen2VLRotaryEmbedding``, ``Qwen2VLModel.get_rope_index``), and the properties a reader of the
chapter would check: scores depend only on the offset on every axis, text under M-RoPE is 1-D
RoPE, a flattened image puts the patch below grid_w positions away."""

import logging

import numpy as np
import pytest
import torch
from transformers import Qwen2VLConfig
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import (
    Qwen2VLModel,
    Qwen2VLRotaryEmbedding,
    Qwen2VLVisionRotaryEmbedding,
    apply_rotary_pos_emb,
    apply_rotary_pos_emb_vision,
)
from transformers.vision_utils import get_vision_position_ids

from posenc_core import multi_axis as ma
from posenc_core.rope import apply_rope, rope_cos_sin

IMAGE, VIDEO, VISION_START, VISION_END, WORD = 5, 6, 3, 4, 1
MERGE = 2  # spatial_merge_size of the tiny config (Qwen2-VL's own)


def _config(head_dim: int, section: list[int], theta: float = 10000.0) -> Qwen2VLConfig:
    text = {
        "vocab_size": 16,
        "hidden_size": 2 * head_dim,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_hidden_layers": 1,
        "intermediate_size": 32,
        "bos_token_id": 0,
        "eos_token_id": 0,
        "rope_parameters": {"rope_type": "default", "rope_theta": theta, "mrope_section": section},
    }
    vision = {"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2}
    vision["spatial_merge_size"] = MERGE
    return Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=IMAGE,
        video_token_id=VIDEO,
        vision_start_token_id=VISION_START,
        vision_end_token_id=VISION_END,
    )


@pytest.fixture(scope="module")
def hf_model():
    logging.getLogger("transformers").setLevel(logging.ERROR)
    return Qwen2VLModel(_config(16, [2, 3, 3])).eval()


# --------------------------------------------------------------------------- axial 2-D


@pytest.mark.parametrize(("t", "h", "w", "m"), [(1, 4, 6, 2), (2, 4, 4, 2), (1, 3, 5, 1)])
def test_patch_order_is_hugging_faces_block_major_order(t, h, w, m):
    rows, cols = ma.vision_patch_positions(t, h, w, spatial_merge_size=m)
    hf = get_vision_position_ids(torch.tensor([[t, h, w]]), m)  # (n, 2): row, col
    assert rows.dtype == torch.int64 and rows.shape == (t * h * w,)
    assert torch.equal(rows, hf[:, 0]) and torch.equal(cols, hf[:, 1])


@pytest.mark.parametrize(("embed_dim", "grids"), [(64, [[1, 4, 6], [2, 2, 4]]), (160, [[1, 6, 4]])])
def test_axial_tables_equal_qwen2_vl_vision_rotary(embed_dim, grids):
    """The vision tower's tables for a batch of grids (head_dim 32, and 80 as in Qwen2-VL),
    from the positions the vision model builds, and the rotation applied with them."""
    config = Qwen2VLVisionConfig(embed_dim=embed_dim, num_heads=2, spatial_merge_size=MERGE)
    head_dim = embed_dim // 2
    grid_thw = torch.tensor(grids)
    position_ids = get_vision_position_ids(grid_thw, MERGE)  # (n, 2)
    x = torch.zeros(1)
    hf_cos, hf_sin = Qwen2VLVisionRotaryEmbedding(config)(x, position_ids)  # (n, d)
    rows = torch.cat([ma.vision_patch_positions(*g, spatial_merge_size=MERGE)[0] for g in grids])
    cols = torch.cat([ma.vision_patch_positions(*g, spatial_merge_size=MERGE)[1] for g in grids])
    cos, sin = ma.axial_rope_cos_sin(rows, cols, head_dim)
    assert cos.shape == hf_cos.shape == (len(rows), head_dim) and cos.dtype == torch.float32
    torch.testing.assert_close(cos, hf_cos, rtol=0, atol=2e-6)
    torch.testing.assert_close(sin, hf_sin, rtol=0, atol=2e-6)
    q, k = torch.randn(2, len(rows), 2, head_dim).unbind(0)  # (n, heads, d)
    hf_q, hf_k = apply_rotary_pos_emb_vision(q, k, hf_cos, hf_sin)
    torch.testing.assert_close(apply_rope(q, cos[:, None], sin[:, None]), hf_q, atol=1e-5, rtol=0)
    torch.testing.assert_close(apply_rope(k, cos[:, None], sin[:, None]), hf_k, atol=1e-5, rtol=0)


def test_axial_pairs_turn_with_the_axis_pair_axes_names():
    """Moving a patch along one axis changes exactly the pairs pair_axes gives that axis."""
    head_dim = 32
    axes = np.array(ma.pair_axes(head_dim))
    rows, cols = torch.tensor([3, 3, 5]), torch.tensor([2, 7, 2])  # base, right, below
    cos, _ = ma.axial_rope_cos_sin(rows, cols, head_dim, dtype=torch.float64)
    half = cos[:, : head_dim // 2]  # one entry per pair
    assert np.array_equal((half[1] != half[0]).numpy(), axes == "col")
    assert np.array_equal((half[2] != half[0]).numpy(), axes == "row")


def test_axial_score_is_two_1d_rope_scores_one_per_axis():
    """The score at offset (dr, dc) is a 1-D RoPE score of the row pairs at distance dr plus one
    of the column pairs at distance dc, each with head_dim/2 dims (rope_cos_sin)."""
    g = torch.Generator().manual_seed(1)
    d, q4 = 16, 4
    q, k = torch.randn(2, d, dtype=torch.float64, generator=g)
    scores = ma.axial_score_grid(6, 7, 2, 3, d, q=q, k=k)

    def one_axis(part, offset):  # 1-D RoPE score of the pairs in `part`, half layout of d/2
        qa, ka = (torch.cat((v[part], v[d // 2 :][part])) for v in (q, k))
        cos, sin = rope_cos_sin(torch.tensor([0, offset]), d // 2, dtype=torch.float64)
        return float(
            apply_rope(qa[None], cos[:1], sin[:1])[0] @ apply_rope(ka[None], cos[1:], sin[1:])[0]
        )

    for r, c in [(2, 3), (5, 0), (0, 6), (3, 3)]:
        expected = one_axis(slice(0, q4), r - 2) + one_axis(slice(q4, 2 * q4), c - 3)
        assert scores[r, c].item() == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_axial_score_depends_only_on_the_2d_offset():
    g = torch.Generator().manual_seed(2)
    q, k = torch.randn(2, 32, dtype=torch.float64, generator=g)
    a = ma.axial_score_grid(9, 11, 1, 2, 32, q=q, k=k)
    b = ma.axial_score_grid(9, 11, 4, 7, 32, q=q, k=k)  # query moved by (3, 5)
    torch.testing.assert_close(b[3:, 5:], a[:-3, :-5], rtol=1e-12, atol=1e-12)
    assert not torch.allclose(a, b)  # the grids differ; only the offsets match
    ones = ma.axial_score_grid(5, 5, 2, 2, 32)
    assert ones[2, 2].item() == pytest.approx(32.0, rel=1e-14)  # all-ones q, k at offset 0


def test_raster_puts_the_patch_below_grid_w_positions_away():
    """Axial: below and right are both one step (equal scores for all-ones content); raster:
    below is grid_w positions away, and the last patch of a row neighbours the next row's first."""
    h, w, d = 6, 8, 32
    axial = ma.axial_score_grid(h, w, 2, 3, d)
    raster = ma.raster_score_grid(h, w, 2, 3, d)
    cos, sin = rope_cos_sin(torch.tensor([0, 1, w]), d, dtype=torch.float64)
    one = torch.ones(1, d, dtype=torch.float64)
    q0 = apply_rope(one, cos[:1], sin[:1])[0]
    at_1, at_w = (float(apply_rope(one, cos[i : i + 1], sin[i : i + 1])[0] @ q0) for i in (1, 2))
    assert raster[3, 3].item() == pytest.approx(at_w, rel=1e-12)  # below: 1-D distance w
    assert raster[2, 4].item() == pytest.approx(at_1, rel=1e-12)  # right: 1-D distance 1
    assert axial[3, 3].item() == pytest.approx(axial[2, 4].item(), rel=1e-12)
    assert abs(raster[3, 3] - raster[2, 4]) > 1.0
    wrap = ma.raster_score_grid(h, w, 2, w - 1, d)[3, 0]  # (2, w-1) -> (3, 0): raster step 1
    assert wrap.item() == pytest.approx(at_1, rel=1e-12)
    assert ma.axial_score_grid(h, w, 2, w - 1, d)[3, 0] < wrap - 1.0  # axial: far apart


# --------------------------------------------------------------------------- M-RoPE


@pytest.mark.parametrize(
    ("head_dim", "section", "theta"),
    [(16, [2, 3, 3], 10000.0), (32, [4, 6, 6], 1e6), (32, [8, 0, 8], 10000.0)],
)
def test_mrope_tables_equal_qwen2_vl_rotary_for_random_ids(head_dim, section, theta):
    g = torch.Generator().manual_seed(3)
    position_ids = torch.randint(0, 60, (3, 2, 10), generator=g)  # (3, b, s)
    rotary = Qwen2VLRotaryEmbedding(_config(head_dim, section, theta).text_config)
    assert rotary.mrope_section == section
    hf_cos, hf_sin = rotary(torch.zeros(1), position_ids)  # (b, s, d)
    cos, sin = ma.mrope_cos_sin(position_ids, head_dim, section, base=theta)
    assert cos.shape == hf_cos.shape == (2, 10, head_dim)
    torch.testing.assert_close(cos, hf_cos, rtol=0, atol=1e-5)  # HF: float32 angles up to 60
    torch.testing.assert_close(sin, hf_sin, rtol=0, atol=1e-5)
    q, k = torch.randn(2, 2, 2, 10, head_dim, generator=g).unbind(0)  # (b, h, s, d)
    hf_q, hf_k = apply_rotary_pos_emb(q, k, hf_cos, hf_sin)
    torch.testing.assert_close(apply_rope(q, cos[:, None], sin[:, None]), hf_q, atol=4e-5, rtol=0)
    torch.testing.assert_close(apply_rope(k, cos[:, None], sin[:, None]), hf_k, atol=4e-5, rtol=0)


def test_mrope_pairs_turn_with_the_axis_pair_axes_names():
    section = [4, 6, 6]
    axes = np.array(ma.pair_axes(32, section))
    assert list(axes) == ["t"] * 4 + ["h"] * 6 + ["w"] * 6
    base = torch.tensor([[5], [5], [5]])
    cos0, _ = ma.mrope_cos_sin(base, 32, section, dtype=torch.float64)
    for axis, name in enumerate(ma.MROPE_AXES):
        moved = base.clone()
        moved[axis] += 3
        cos, _ = ma.mrope_cos_sin(moved, 32, section, dtype=torch.float64)
        assert np.array_equal((cos[0, :16] != cos0[0, :16]).numpy(), axes == name)


def test_text_under_mrope_is_1d_rope_bit_for_bit():
    pos = torch.arange(0, 300, 7)
    for section in ([4, 6, 6], [16, 0, 0], [1, 1, 14]):
        for dtype in (torch.float32, torch.bfloat16):
            got = ma.mrope_cos_sin(pos.expand(3, -1), 32, section, dtype=dtype)
            want = rope_cos_sin(pos, 32, dtype=dtype)
            assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_mrope_angles_are_float64_rounded_once_at_long_positions():
    """At position 1e5 float32 angles would be off by about 1e-2; these stay at float32 rounding."""
    pos = torch.tensor([[100_000, 3], [7, 123_456], [99_999, 11]])  # (3, s)
    section = [2, 3, 3]
    cos, sin = ma.mrope_cos_sin(pos, 16, section)
    theta = 10000.0 ** (-np.arange(0, 16, 2) / 16)
    axis = np.repeat([0, 1, 2], section)
    angles = pos.numpy()[axis].T * theta  # (s, 8): pair i from its axis
    np.testing.assert_allclose(cos.numpy()[:, :8], np.cos(angles), rtol=0, atol=1.2e-7)
    np.testing.assert_allclose(sin.numpy()[:, 8:], np.sin(angles), rtol=0, atol=1.2e-7)


def test_mrope_score_depends_only_on_the_offset_on_every_axis():
    g = torch.Generator().manual_seed(4)
    q, k = torch.randn(2, 1, 32, dtype=torch.float64, generator=g)
    section = [4, 6, 6]
    ids = torch.randint(0, 40, (3, 2), generator=g)  # a query and a key
    shift = torch.tensor([[7], [-3], [11]])  # a different offset on each axis

    def score(p):
        cos, sin = ma.mrope_cos_sin(p, 32, section, dtype=torch.float64)  # (2, d)
        return float(apply_rope(q, cos[:1], sin[:1])[0] @ apply_rope(k, cos[1:], sin[1:])[0])

    assert score(ids + shift) == pytest.approx(score(ids), rel=1e-12, abs=1e-12)
    moved_key = ids.clone()
    moved_key[1, 1] += 1  # the key one row down: a different offset, a different score
    assert abs(score(moved_key) - score(ids)) > 1e-6


# --------------------------------------------------------------------------- get_rope_index


def _hf_inputs(segments):
    """input_ids, mm_token_type_ids and grids as Qwen2-VL's processor would give them."""
    ids, types, images, videos = [], [], [], []
    for kind, size in segments:
        if kind == "text":
            ids += [WORD] * size
            types += [0] * size
            continue
        t, h, w = size
        token, kinds = (IMAGE, images) if kind == "image" else (VIDEO, videos)
        ids[-1] = VISION_START  # the text segment before ends with <|vision_start|>
        ids += [token] * (t * h * w)
        types += [1 if kind == "image" else 2] * (t * h * w)
        kinds.append([t, h * MERGE, w * MERGE])  # grid_thw in patches, before the merge
    grids = {
        "image_grid_thw": torch.tensor(images) if images else None,
        "video_grid_thw": torch.tensor(videos) if videos else None,
    }
    return torch.tensor([ids]), torch.tensor([types]), grids


MIXES = [
    [("text", 4), ("image", (1, 2, 3)), ("text", 5)],
    [("text", 2), ("image", (1, 4, 2)), ("text", 3), ("image", (1, 1, 5)), ("text", 2)],
    [("text", 3), ("video", (2, 2, 3)), ("text", 2), ("image", (1, 3, 3)), ("text", 1)],
]


@pytest.mark.parametrize("segments", MIXES)
def test_position_ids_equal_get_rope_index(hf_model, segments):
    input_ids, types, grids = _hf_inputs(segments)
    hf_ids, _ = hf_model.get_rope_index(input_ids, types, **grids)  # (3, 1, s)
    got = ma.mrope_position_ids(segments)
    assert got.dtype == torch.int64 and got.shape == (3, input_ids.shape[1])
    assert torch.equal(got, hf_ids[:, 0])
    rotary = Qwen2VLRotaryEmbedding(hf_model.config.text_config)
    hf_cos, hf_sin = rotary(torch.zeros(1), hf_ids)
    cos, sin = ma.mrope_cos_sin(got, 16, [2, 3, 3], base=10000.0)
    torch.testing.assert_close(cos, hf_cos[0], rtol=0, atol=2e-6)
    torch.testing.assert_close(sin, hf_sin[0], rtol=0, atol=2e-6)


def test_position_ids_follow_qwen2_vls_rule():
    """Text counts on all axes; an image's ids are start + (frame, row, col) in raster order;
    the next segment starts after the largest id so far, also when t > max(h, w)."""
    ids = ma.mrope_position_ids([("text", 2), ("image", (3, 1, 2)), ("text", 2)])
    t = [0, 1, 2, 2, 3, 3, 4, 4, 5, 6]
    hw = [0, 1, 2, 2, 2, 2, 2, 2, 5, 6]
    w = [0, 1, 2, 3, 2, 3, 2, 3, 5, 6]
    assert ids.tolist() == [t, hw, w]
    text = ma.mrope_position_ids([("text", 5)])
    assert torch.equal(text, torch.arange(5).expand(3, 5))


# --------------------------------------------------------------------------- errors


def test_bad_arguments_name_themselves():
    pos = torch.zeros(3, 4, dtype=torch.long)
    with pytest.raises(ValueError, match=r"mrope_section must sum to head_dim/2 = 8"):
        ma.mrope_cos_sin(pos, 16, [2, 3, 4])
    with pytest.raises(ValueError, match=r"mrope_section\[1\] must be a non-negative integer"):
        ma.mrope_cos_sin(pos, 16, [6, -1, 3])
    with pytest.raises(ValueError, match=r"mrope_section must hold exactly three"):
        ma.mrope_cos_sin(pos, 16, [4, 4])
    with pytest.raises(TypeError, match=r"mrope_section must be a sequence"):
        ma.pair_axes(16, 8)
    with pytest.raises(ValueError, match=r"head_dim must be a positive even integer"):
        ma.mrope_cos_sin(pos, 15, [2, 3, 3])
    with pytest.raises(ValueError, match=r"position_ids must have shape \(3, \.\.\.\)"):
        ma.mrope_cos_sin(torch.zeros(2, 4), 16, [2, 3, 3])
    with pytest.raises(ValueError, match=r"head_dim must be a positive multiple of 4"):
        ma.axial_rope_cos_sin([0], [0], 6)
    with pytest.raises(ValueError, match=r"rows and cols must have one shape.*\(3,\) and \(2,\)"):
        ma.axial_rope_cos_sin([0, 1, 2], [0, 1], 8)
    with pytest.raises(TypeError, match=r"dtype must be a torch.dtype"):
        ma.axial_rope_cos_sin([0], [0], 8, dtype="float32")
    with pytest.raises(ValueError, match=r"w must be a multiple of spatial_merge_size=2"):
        ma.vision_patch_positions(1, 4, 5, spatial_merge_size=2)


def test_bad_segments_name_the_segment():
    with pytest.raises(TypeError, match=r"segments\[1\]\[1\]\[2\] must be a positive integer"):
        ma.mrope_position_ids([("text", 2), ("image", (1, 2, 2.5))])
    with pytest.raises(TypeError, match=r"segments\[0\]\[1\] must be a positive integer"):
        ma.mrope_position_ids([("text", 2.0)])
    with pytest.raises(ValueError, match=r"segments\[0\]\[1\] must be a positive integer, got 0"):
        ma.mrope_position_ids([("text", 0)])
    with pytest.raises(ValueError, match=r"segments\[1\]\[0\] must be one of 'text', 'image'"):
        ma.mrope_position_ids([("text", 1), ("audio", 3)])
    with pytest.raises(TypeError, match=r"segments\[0\]\[1\] must be a grid \(t, h, w\)"):
        ma.mrope_position_ids([("image", (2, 2))])
    with pytest.raises(TypeError, match=r"segments\[0\] must be a pair"):
        ma.mrope_position_ids(["text"])
    with pytest.raises(TypeError, match=r"segments must be a non-empty list"):
        ma.mrope_position_ids([])


def test_bad_score_grid_arguments():
    with pytest.raises(ValueError, match=r"query_row must be an integer in 0\.\.3, got 4"):
        ma.axial_score_grid(4, 5, 4, 0, 8)
    with pytest.raises(ValueError, match=r"q must have shape \(head_dim,\) = \(8,\), got \(4,\)"):
        ma.raster_score_grid(4, 5, 0, 0, 8, q=torch.ones(4))
    with pytest.raises(TypeError, match=r"k must be a real floating-point tensor"):
        ma.axial_score_grid(4, 5, 0, 0, 8, k=torch.ones(8, dtype=torch.long))


def test_get_rope_index_and_the_paper_rule_part_on_long_videos(hf_model):
    """Chapter 9 says so: for a video with more frames than rows or columns, transformers
    5.23's get_rope_index moves on by max(h, w) only, so the text after it reuses an id the
    last frames hold; mrope_position_ids follows the paper (one past the largest id)."""
    segments = [("text", 2), ("video", (4, 1, 1)), ("text", 1)]
    input_ids, types, grids = _hf_inputs(segments)
    hf_ids, _ = hf_model.get_rope_index(input_ids, types, **grids)
    ours = ma.mrope_position_ids(segments)
    video = slice(2, 6)
    assert torch.equal(hf_ids[:, 0, video], ours[:, video])  # the video itself agrees
    assert int(hf_ids[0, 0, -1]) <= int(hf_ids[0, 0, video].max())  # HF: an id reused
    assert int(ours[0, -1]) == int(ours[:, video].max()) + 1  # ours: one past the largest
