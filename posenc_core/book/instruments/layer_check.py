"""What each attention layer of a model does with positions, observed from its behaviour.

A config says which layers rotate, attend locally, scale their queries or carry sinks; a bug puts
the right mechanism on the wrong layer, and the logits alone rarely say which. :func:`observe`
asks each layer directly, with random inputs and the layer's own weights:

- ``reach``: the farthest key that can change the last query's output (a nonzero gradient);
  the sequence length for full attention, the window for a sliding one;
- ``rotates``: whether the scores q.k change when the positions are shuffled (without a
  rotation they depend on content only);
- ``query_scale``: the factor on each query's norm (a rotation keeps norms; a query temperature
  multiplies them), one value per position;
- ``profile``: the score of a query and a key of all-ones at distance 0, 1, ... over the
  layer's head width: a sum of cosines of distance times each rotary frequency, so the base
  and the rotated dimensions show in it (flat at 1 without a rotation);
- ``sinks``: whether the attention weights of a row sum to less than 1.

:func:`differences` compares two lists of observations (a model against the same weights built
from the plan its config gives) and names every layer and property that differ.
``tests/book/test_layered_lm.py`` checks the trained layouts against facts written in the test
and that every bug of :data:`~posenc_core.book.studies.mixing_study.BUGS` is named.
Works on any :class:`~posenc_core.book.models.layered_lm.LayeredLM`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from posenc_core import _validation as check
from posenc_core.attention import attention
from posenc_core.book.models.layered_lm import LayeredLM

__all__ = ["LayerObservation", "differences", "observe"]


@dataclass(frozen=True)
class LayerObservation:
    """What one layer was seen to do (see the module docstring).

    Args:
        layer: the layer's index.
        reach: keys this far back (query included) can change the last query's output.
        rotates: the scores depend on the positions.
        query_scale: the factor on the norm of the query at each position.
        profile: the all-ones score at distance 0, 1, ..., divided by the head width.
        sinks: the weights of a row sum to less than 1.
    """

    layer: int
    reach: int
    rotates: bool
    query_scale: tuple[float, ...]
    profile: tuple[float, ...]
    sinks: bool


def observe(model: LayeredLM, *, length: int = 96, seed: int = 0) -> list[LayerObservation]:
    """One :class:`LayerObservation` per layer of ``model`` over ``length`` positions.

    Args:
        model: a :class:`~posenc_core.book.models.layered_lm.LayeredLM` (its weights are used,
            nothing is changed).
        length: positions probed (>= 2); reach is at most ``length``.
        seed: the random inputs' seed.

    Raises:
        TypeError, ValueError: a model that is not a LayeredLM, or a bad length.
    """
    if not isinstance(model, LayeredLM):
        raise TypeError(f"model must be a LayeredLM, got {type(model).__name__}")
    length = check.int_in_range("length", length, 2, 4096)
    g = torch.Generator().manual_seed(check.non_negative_int("seed", seed))
    return [
        _observe_layer(i, block.attn, model.d_model, length, g)
        for i, block in enumerate(model.blocks)
    ]


def _observe_layer(i: int, attn, d_model: int, s: int, g: torch.Generator) -> LayerObservation:  # noqa: ANN001
    h, d_h = attn.n_heads, d_model // attn.n_heads
    x = torch.randn(1, s, d_model, generator=g, requires_grad=True)
    direction = torch.randn(d_model, generator=g)
    (grad,) = torch.autograd.grad(attn(x, None)[0, -1] @ direction, x)
    moved = (grad[0].abs().sum(-1) > 0).flip(0)  # (s,): back 0, 1, ... from the last query
    reach = int(moved.nonzero().max()) + 1 if moved.any() else 0
    with torch.no_grad():
        q, k = (torch.randn(1, h, s, d_h, generator=g) for _ in range(2))
        q1, k1 = attn.place(q, k, None)
        perm = torch.randperm(s, generator=g)
        q2, k2 = attn.place(q, k, perm)
        scores = q1 @ k1.transpose(-1, -2)
        rotates = not torch.allclose(q2 @ k2.transpose(-1, -2), scores, rtol=1e-4, atol=1e-4)
        scale = (q1.norm(dim=-1) / q.norm(dim=-1)).mean(dim=(0, 1))  # (s,)
        ones = torch.ones(1, 1, s, d_h)
        qo, ko = attn.place(ones, ones, None)
        profile = (qo[0, 0, :] @ ko[0, 0, 0]) / d_h / scale  # query at i, key at 0
        _, w = attention(q1, k1, q1, causal=True, return_weights=True, **attn.mask_options())
        sinks = bool((w.sum(-1) < 1 - 1e-6).any())
    return LayerObservation(
        i, reach, rotates, tuple(scale.tolist()), tuple(profile.tolist()), sinks
    )


def differences(
    observed: Sequence[LayerObservation],
    expected: Sequence[LayerObservation],
    *,
    atol: float = 1e-4,
) -> list[str]:
    """Every layer and property where ``observed`` and ``expected`` differ, one line each.

    Args:
        observed, expected: :func:`observe` of two models (the same length and seed).
        atol: tolerance on query scales and profiles.

    Returns:
        lines such as ``"layer 3: rotates (expected: no rotation)"``; empty when they agree.
    """
    if len(observed) != len(expected):
        raise ValueError(
            f"observed has {len(observed)} layers, expected {len(expected)}; compare one model "
            "with another of the same depth"
        )
    out = []
    for a, b in zip(observed, expected):
        if a.reach != b.reach:
            out.append(f"layer {a.layer}: reaches {a.reach} keys back (expected: {b.reach})")
        if a.rotates != b.rotates:
            said = ("rotates", "no rotation") if a.rotates else ("no rotation", "rotates")
            out.append(f"layer {a.layer}: {said[0]} (expected: {said[1]})")
        elif not _close(a.profile, b.profile, atol):
            out.append(f"layer {a.layer}: rotates at other frequencies than expected")
        if not _close(a.query_scale, b.query_scale, atol):
            out.append(
                f"layer {a.layer}: query scale {a.query_scale[-1]:.3f} at the last position "
                f"(expected: {b.query_scale[-1]:.3f})"
            )
        if a.sinks != b.sinks:
            out.append(f"layer {a.layer}: sinks {'present' if a.sinks else 'absent'} "
                       f"(expected: {'present' if b.sinks else 'absent'})")  # fmt: skip
    return out


def _close(a: Sequence[float], b: Sequence[float], atol: float) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= atol for x, y in zip(a, b))
