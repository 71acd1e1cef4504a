"""The book's byte model with positions placed layer by layer, as a Hugging Face config places them.

:class:`LayeredLM` is :class:`~posenc_core.book.models.byte_lm.ByteLM` (same embedding, blocks,
MLP, tied head and initialisation) whose attention layer i follows ``plan[i]``, one
:class:`~posenc_core.rope.LayerPlan` of :func:`~posenc_core.rope.layer_plan`: the layer's
rotation (or none), a sliding window or chunk, a query temperature and learned sink logits. So
the code that reads a real config also builds the book's model: ``LayeredLM(layer_plan(cfg))``.
A plan for other settings (a bug, a scaling method) loads the same weights
(:meth:`LayeredLM.with_plan`). ``tests/book/test_layered_lm.py`` checks each layer against its
plan by what it does (which keys can change a query's output, whether shuffling earlier keys
does, whether a shift of every position does), and the all-RoPE plan against ``ByteLM("rope")``.
Shapes: b = batch, s = sequence, d = d_model, h = heads, d_h = head_dim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from posenc_core.attention import attention
from posenc_core.book.models.byte_lm import ByteLM
from posenc_core.rope import LayerPlan, LayerPlans

__all__ = ["LayeredLM", "PlannedAttention"]

_KINDS = ("full", "sliding", "chunked")


class PlannedAttention(nn.Module):
    """Causal self-attention placing positions as one :class:`~posenc_core.rope.LayerPlan`.

    Args:
        d_model, n_heads: the width and the number of heads (head width d_h = d_model / n_heads).
        plan: the layer's plan; its rotation (if any) must have ``head_dim`` d_h.
    """

    def __init__(self, d_model: int, n_heads: int, plan: LayerPlan) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)  # the parameters of ByteLM's attention
        self.proj = nn.Linear(d_model, d_model)
        self.rope = plan.rope
        self.plan = plan
        self.sinks = nn.Parameter(torch.zeros(n_heads)) if plan.sinks else None

    def place(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries and keys ``(b, h, s, d_h)`` after the layer's rotation and query temperature
        (positions ``(s,)`` or ``(b, s)``; None: 0 .. s-1)."""
        s = q.shape[-2]
        if self.rope is not None:
            q, k = self.rope(q, k, positions)
        temperature = self.plan.temperature
        if temperature is not None:
            pos = torch.arange(s, device=q.device) if positions is None else positions
            if temperature.positions == "cache":  # Llama 4: the index in the sequence
                pos = torch.arange(s, device=q.device)
            q = q * temperature(pos, q.dtype)[..., None, :, None].to(q.device)
        return q, k

    def mask_options(self) -> dict[str, Any]:
        """The window or chunk and sinks that :func:`~posenc_core.attention.attention` takes."""
        options: dict[str, Any] = {"sinks": self.sinks}
        if self.plan.attention == "sliding":
            options["window"] = self.plan.window
        elif self.plan.attention == "chunked":
            options["chunk"] = self.plan.window
        return options

    def forward(
        self,
        x: torch.Tensor,
        bias: torch.Tensor | None,
        positions: torch.Tensor | None = None,
        rotate: Any = None,
        score_scale: float = 1.0,
        attend: Any = None,
    ) -> torch.Tensor:
        """The layer's output ``(b, s, d)`` from ``x`` ``(b, s, d)``: the options of
        :meth:`~posenc_core.book.models.byte_lm.ByteLM.forward` (``rotate`` is not used: a
        layer's rotation is its plan's)."""
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.n_heads, d // self.n_heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (b, h, s, d_h) each
        if attend is not None:
            y = attend(q, k, v)
        else:
            q, k = self.place(q, k, positions)
            if score_scale != 1.0:
                q = q * score_scale
            y = attention(q, k, v, causal=True, bias=bias, **self.mask_options())
        return self.proj(y.transpose(1, 2).reshape(b, s, d))  # (b, s, d)


class LayeredLM(ByteLM):
    """:class:`~posenc_core.book.models.byte_lm.ByteLM` whose layer i places positions as
    ``plan[i]`` (see the module docstring); no table or bias on the embeddings.

    Args:
        plan: one :class:`~posenc_core.rope.LayerPlan` per layer (a
            :class:`~posenc_core.rope.LayerPlans` from :func:`~posenc_core.rope.layer_plan`);
            every layer causal, attention ``"full"``, ``"sliding"`` or ``"chunked"``, each
            rotation of head width ``d_model // n_heads``.
        d_model, n_heads, max_len: as :class:`~posenc_core.book.models.byte_lm.ByteLM`; the
            number of layers is ``len(plan)``.

    Raises:
        TypeError, ValueError: a plan that is not a sequence of LayerPlan, a linear-attention
            or bidirectional layer, a rotation of another head width, or ByteLM's size errors.
    """

    def __init__(
        self, plan: Sequence[LayerPlan], *, d_model: int = 64, n_heads: int = 4, max_len: int = 512
    ) -> None:
        plan = _checked_plan(plan, d_model, n_heads)
        super().__init__("none", d_model=d_model, n_layers=len(plan), n_heads=n_heads,
                         max_len=max_len)  # fmt: skip
        for block, layer in zip(self.blocks, plan):
            block.attn = PlannedAttention(d_model, n_heads, layer)
        self.plan = LayerPlans(plan)
        self._init_weights()  # the same draws as ByteLM's, for the replaced layers too

    def with_plan(self, plan: Sequence[LayerPlan]) -> LayeredLM:
        """A copy of this model with another plan of the same shape and the same weights (a bug
        or a scaling method applied to a trained model); in eval mode.

        Raises:
            ValueError: the plan has another number of layers, or adds or drops sink logits.
        """
        plan = _checked_plan(plan, self.d_model, self.n_heads)
        if len(plan) != len(self.plan) or [p.sinks for p in plan] != [p.sinks for p in self.plan]:
            raise ValueError(
                f"plan must keep the model's {len(self.plan)} layers and its sink logits, got "
                f"{len(plan)} layers with sinks {[p.sinks for p in plan]}"
            )
        other = LayeredLM(plan, d_model=self.d_model, n_heads=self.n_heads, max_len=self.max_len)
        other.load_state_dict(self.state_dict())
        return other.to(next(self.parameters()).device).eval()

    def attention_weights(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """The attention weights of every layer, ``(b, h, s, s)`` each, computed explicitly with
        each layer's rotation, temperature, mask and sinks (rows sum to 1 less the sink's share).
        """
        weights: list[torch.Tensor] = []

        def spy(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            attn = self.blocks[layer].attn
            q, k = attn.place(q, k, None)
            y, w = attention(q, k, v, causal=True, return_weights=True, **attn.mask_options())
            weights.append(w)
            return y

        with torch.no_grad():
            self(tokens, attend=spy)
        return weights


def _checked_plan(plan: object, d_model: int, n_heads: int) -> tuple[LayerPlan, ...]:
    if isinstance(plan, (str, bytes)) or not isinstance(plan, Sequence) or not plan:
        raise TypeError(f"plan must be a non-empty sequence of LayerPlan, got {plan!r}")
    head_dim = d_model // n_heads if n_heads > 0 else None
    for i, layer in enumerate(plan):
        if not isinstance(layer, LayerPlan):
            raise TypeError(f"plan[{i}] must be a LayerPlan, got {type(layer).__name__}")
        if layer.attention not in _KINDS or not layer.causal:
            raise ValueError(
                f"plan[{i}] has {'bidirectional ' if not layer.causal else ''}"
                f"{layer.attention!r} attention; LayeredLM takes causal {', '.join(_KINDS)} layers"
            )
        if layer.rope is not None and layer.rope.head_dim != head_dim:
            raise ValueError(
                f"plan[{i}] rotates heads of width {layer.rope.head_dim}, but d_model={d_model} "
                f"and n_heads={n_heads} give heads of width {head_dim}"
            )
    return tuple(plan)
