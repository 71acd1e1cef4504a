"""What a trained RoPE model does with its frequencies (chapter 9).

Barbero et al. (ICLR 2025, "Round and Round We Go! What makes Rotary Positional Encodings
useful?") report that Gemma 7B puts most query/key norm in the lowest frequencies, nearly
position-free "semantic" channels, and builds positional heads from the highest ones. This
module measures the same on the book's RoPE :class:`~posenc_core.book.models.byte_lm.ByteLM`:
the norm of each frequency pair (pair i holds dims i and i + d_h/2, fastest first), the
attention by offset and the share of it the offset explains, and the p-RoPE ablation
(:func:`without_pairs`: chosen pairs left unrotated).
Shapes: b = windows, h = heads, s = positions, d_h = head width, n = d_h / 2 pairs, l = layers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from posenc_core import _validation as check
from posenc_core.book.instruments.bugs import rotation_by
from posenc_core.book.models.byte_lm import ByteLM, Rotate

__all__ = [
    "captured_attention",
    "pair_norms",
    "offset_profile",
    "positional_share",
    "without_pairs",
]


def _rope_model(model: object) -> ByteLM:
    if not isinstance(model, ByteLM):
        raise TypeError(f"model must be a ByteLM, got {type(model).__name__}")
    if getattr(model.rope, "layout", None) != "half":  # None for xPos and the other schemes
        raise ValueError(
            f"model must be a ByteLM with half-split RoPE (scheme 'rope'), got scheme "
            f"{model.scheme!r}; ByteLM.attention_weights gives any scheme's weights"
        )
    return model


def captured_attention(
    model: ByteLM, tokens: torch.Tensor, *, rotate: Rotate | None = None
) -> list[dict[str, torch.Tensor]]:
    """Queries, keys and attention weights of every layer, for one batch.

    Args:
        model: a RoPE :class:`~posenc_core.book.models.byte_lm.ByteLM` (half-split layout).
        tokens: int64 ``(b, s)``.
        rotate: the rotation to use (see
            :meth:`ByteLM.forward <posenc_core.book.models.byte_lm.ByteLM.forward>`); None: the
            model's own.

    Returns:
        a list with one dict per layer, holding ``"q"``, ``"k"`` before rotation and
        ``"q_rot"``, ``"k_rot"`` after, each ``(b, h, s, d_h)``, and ``"weights"``
        ``(b, h, s, s)``, the causal softmax of q_rot . k_rot / sqrt(d_h) (what the layer
        attends with).
    """
    model = _rope_model(model)
    base = model.rope if rotate is None else rotate
    layers: list[dict[str, torch.Tensor]] = []

    def spy(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor):
        q_rot, k_rot = base(q, k, positions)
        layers.append({"q": q, "k": k, "q_rot": q_rot, "k_rot": k_rot})
        return q_rot, k_rot

    with torch.no_grad():
        model(tokens, rotate=spy)
        s = tokens.shape[1]
        future = torch.ones(s, s, dtype=torch.bool).triu(1)
        for layer in layers:
            scores = layer["q_rot"] @ layer["k_rot"].transpose(-1, -2)
            scores = scores / layer["q"].shape[-1] ** 0.5
            layer["weights"] = scores.masked_fill(future, float("-inf")).softmax(-1)
    return layers


def pair_norms(layers: Sequence[dict[str, torch.Tensor]], which: str = "q") -> np.ndarray:
    """Mean norm of each frequency pair, per layer and head.

    Args:
        layers: :func:`captured_attention`'s output.
        which: ``"q"`` or ``"k"`` (before rotation; a rotation does not change a pair's norm).

    Returns:
        float64 ``(l, h, n)``: the mean over windows and positions of
        sqrt(x_i**2 + x_{i+n}**2), pair 0 the fastest.
    """
    check.choice("which", which, ("q", "k"))
    out = []
    for layer in layers:
        x = layer[which].double()
        n = x.shape[-1] // 2
        out.append((x[..., :n] ** 2 + x[..., n:] ** 2).sqrt().mean((0, 2)))  # (h, n)
    return torch.stack(out).numpy()


def _by_offset(weights: torch.Tensor, queries: range, max_offset: int) -> torch.Tensor:
    """weights (b, h, s, s) -> (b, h, len(queries), max_offset): w[query, query - offset]."""
    i = torch.tensor(list(queries))
    if int(i.min()) < max_offset - 1:
        raise ValueError(
            f"queries must start at max_offset - 1 = {max_offset - 1} or later so every "
            f"offset has a key, got {i.min().item()}"
        )
    d = torch.arange(max_offset)
    return weights[:, :, i[:, None], i[:, None] - d[None]]


def offset_profile(
    layers: Sequence[dict[str, torch.Tensor]], queries: range, max_offset: int
) -> np.ndarray:
    """Mean attention weight at each offset 0 .. max_offset - 1 (key = query - offset).

    Args:
        layers: :func:`captured_attention`'s output.
        queries: the query positions averaged over (each must have max_offset keys before
            it, so ``queries.start >= max_offset - 1``).
        max_offset: offsets measured.

    Returns:
        float64 ``(l, h, max_offset)``.
    """
    max_offset = check.positive_int("max_offset", max_offset)
    return np.stack(
        [_by_offset(x["weights"], queries, max_offset).double().mean((0, 2)).numpy()
         for x in layers]
    )  # fmt: skip


def positional_share(
    layers: Sequence[dict[str, torch.Tensor]], queries: range, max_offset: int
) -> np.ndarray:
    """How much of a head's attention the offset alone explains.

    Over the given queries and the keys at offsets 0 .. max_offset - 1, the weights w vary with
    the query, the window and the offset; the share is 1 - E[(w - m(offset))**2] / Var(w),
    where m(offset) is the mean weight at that offset (:func:`offset_profile`). A head that
    always looks a fixed number of tokens back has a share near 1; one whose weights depend on
    content only, near 0.

    Returns:
        float64 ``(l, h)``.
    """
    max_offset = check.positive_int("max_offset", max_offset)
    out = []
    for layer in layers:
        w = _by_offset(layer["weights"], queries, max_offset).double()  # (b, h, q, o)
        m = w.mean((0, 2), keepdim=True)
        total = ((w - w.mean((0, 2, 3), keepdim=True)) ** 2).mean((0, 2, 3))
        out.append((1 - ((w - m) ** 2).mean((0, 2, 3)) / total).numpy())
    return np.stack(out)


def without_pairs(model: ByteLM, pairs: Sequence[int], n_positions: int) -> Rotate:
    """The model's rotation with some frequency pairs left unrotated (their theta set to 0).

    Leaving out the lowest pairs is p-RoPE (Barbero et al. 2025: keep the fraction p of the
    highest frequencies, so the rest become plain, position-free channels); leaving out the
    highest ones is the opposite ablation.

    Args:
        model: a RoPE :class:`~posenc_core.book.models.byte_lm.ByteLM` rotating its whole head.
        pairs: pair indices 0 .. n-1 to leave unrotated (0 is the fastest).
        n_positions: the longest sequence the rotation will see.

    Returns:
        a :data:`~posenc_core.book.models.byte_lm.Rotate` for
        :meth:`ByteLM.forward <posenc_core.book.models.byte_lm.ByteLM.forward>`.
    """
    model = _rope_model(model)
    rope = model.rope
    assert rope is not None
    if rope.rotary_dim != rope.head_dim or not rope.scaling.rope_type == "default":
        raise ValueError("without_pairs needs plain RoPE over the whole head")
    n = rope.head_dim // 2
    drop = [check.int_in_range("pairs entry", p, 0, n - 1) for p in pairs]
    inv = rope.base ** -(torch.arange(0, rope.head_dim, 2, dtype=torch.float64) / rope.head_dim)
    inv[drop] = 0.0
    return rotation_by(inv, n_positions)
