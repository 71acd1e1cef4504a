"""The :class:`RotaryEmbedding` module: RoPE for queries and keys, with cached tables.

It checks its arguments once, builds (or looks up) the cos/sin tables for the positions it is
given, and rotates with :func:`~posenc_core.rope.apply.apply_rope`'s unchecked core
(``apply._apply``), which rotates the first r = rotary_dim dims of each head and passes the
rest through. :meth:`RotaryEmbedding.from_config` builds one from a Hugging Face config
(parsed by :func:`~posenc_core.rope.config.rope_config_from_hf`).

Notation for tensor shapes: b = batch, h = heads, s = sequence, d = head_dim,
r = rotary_dim (<= d), P = any shape of positions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from .. import _format
from .. import _validation as check
from .apply import _apply, _broadcast_shape
from .config import RopeConfig
from .formula import _cos_sin, _float64_positions
from .layers import layer_rope
from .scaling import RopeScaling, _inv_freq, parse_scaling

# RotaryEmbedding caches rows 0 .. n-1 only while n stays below this; larger positions (a
# decoding step at offset 10**9, say) are computed per call instead of allocating a table
# with a row for every position before them.
_CACHE_MAX_POSITIONS = 1 << 16


class RotaryEmbedding(nn.Module):
    """RoPE for query and key tensors, with a cache that grows with the sequence.

    Rotates the first ``rotary_dim`` dims of each head (pairs by ``layout``), with frequencies
    over that width, theta_i = base**(-2i/rotary_dim), as Hugging Face's
    ``partial_rotary_factor`` and GPT-J's ``rotary_dim``; the other dims pass through. Tables are
    cached (float32 for float32 inputs, float64 otherwise; not a buffer, so a cast cannot round
    them); see :doc:`/numerics`. Each call uses one length, L = max(positions) + 1, for dynamic
    NTK and LongRoPE, as Hugging Face's ``dynamic_rope_update``, and keeps nothing between calls
    (unlike Hugging Face's module, transformers issue 25306); keys cached from an earlier call keep
    the base they were rotated with (issue 25104). Tested in ``tests/core/test_rope_module.py``
    against Hugging Face's GPT-NeoX ``apply_rotary_pos_emb`` and rotary classes.

    Args:
        head_dim: per-head width d, positive and even, at most ``MAX_WIDTH``.
        base: rope_theta.
        scaling: None, a :class:`~posenc_core.rope.RopeScaling` or a Hugging Face-style
            scaling dict (see :func:`~posenc_core.rope.parse_scaling`); kept parsed, as
            ``self.scaling``.
        layout: ``"half"`` or ``"interleaved"`` (pairs within the rotated dims).
        rotary_dim: the rotated width r, even, 2 <= r <= head_dim; None: head_dim.
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        scaling: RopeScaling | Mapping[str, Any] | None = None,
        layout: str = "half",
        rotary_dim: int | None = None,
    ) -> None:
        super().__init__()
        self.head_dim = check.width("head_dim", head_dim, where="RotaryEmbedding")
        if rotary_dim is None:
            self.rotary_dim = self.head_dim
        else:
            self.rotary_dim = check.int_in_range("rotary_dim", rotary_dim, 2, self.head_dim)
            check.even_int("rotary_dim", rotary_dim)
        self.base = check.base_value("base", base)
        self.scaling = parse_scaling(scaling, base=self.base)
        self.layout = check.layout("layout", layout)
        _inv_freq(self.base, self.rotary_dim, self.scaling, None)  # refuse bad combinations now
        self._cos: torch.Tensor | None = None  # (n, r) rows for positions 0 .. n-1
        self._sin: torch.Tensor | None = None

    def set_scaling(self, scaling: RopeScaling | Mapping[str, Any] | None) -> None:
        """Replace the context-extension scaling and drop the cached tables, which the next
        call rebuilds (for example to switch a trained model to PI or YaRN at inference).

        Args:
            scaling: None, a :class:`~posenc_core.rope.RopeScaling` or a Hugging Face-style
                scaling dict (see :func:`~posenc_core.rope.parse_scaling`).

        Raises:
            ValueError, TypeError: as the constructor, for a scaling it would refuse.
        """
        parsed = parse_scaling(scaling, base=self.base)
        _inv_freq(self.base, self.rotary_dim, parsed, None)  # refuse bad combinations now
        self.scaling = parsed
        self._cos = self._sin = None

    @classmethod
    def from_config(
        cls, config: Any, *, layer: int | None = None, layout: str | None = None
    ) -> RotaryEmbedding | None:
        """The rotary embedding a Hugging Face model applies, from its configuration.

        Reads head_dim, rotary_dim, base, scaling and layout with
        :func:`~posenc_core.rope.layer_facts` and :func:`~posenc_core.rope.rope_config_from_hf`.
        Tested in ``tests/core/test_rope_models.py`` and ``test_rope_layer_models.py`` against the
        models' own classes.

        Args:
            config: a ``transformers`` ``PretrainedConfig`` (anything with ``to_dict()``) or the
                dict of a ``config.json``.
            layer: None (every layer, when all rotate alike) or a decoder layer's index.
            layout: None (the architecture's: ``"interleaved"`` for GPT-J, CodeGen, Cohere,
                Llama 4 and DeepSeek-V3 with ``rope_interleave``, else ``"half"``) or a
                layout that overrides it (for weights permuted with
                :func:`~posenc_core.rope.permute_qk_weight`).

        Returns:
            a :class:`RotaryEmbedding`, or None for a layer that does not rotate (a NoPE layer).

        Raises:
            ValueError: ``layer`` None while the layers differ, ``layer`` out of range, or a config
                :func:`~posenc_core.rope.layer_facts` refuses.
        """
        if layout is not None:
            layout = check.layout("layout", layout)
        rc = layer_rope(config, layer)
        return None if rc is None else cls.from_rope_config(rc, layout=layout)

    @classmethod
    def from_rope_config(cls, rc: RopeConfig, *, layout: str | None = None) -> RotaryEmbedding:
        """The module for a :class:`~posenc_core.rope.RopeConfig` (``layout`` overrides its
        layout when given)."""
        return cls(
            rc.head_dim,
            base=rc.base,
            scaling=rc.scaling,
            layout=rc.layout if layout is None else check.layout("layout", layout),
            rotary_dim=rc.rotary_dim,
        )

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        positions: torch.Tensor | int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries and keys.

        Args:
            q: ``(..., s, head_dim)``, e.g. ``(b, h, s, d)``.
            k: ``(..., s, head_dim)`` with the same sequence length as ``q``.
            positions: None (0 .. s-1), an int offset >= 0 (offset .. offset+s-1, for decoding
                after a KV cache), or a finite real tensor ``(s,)`` or ``(b, s)`` (one row per
                batch row: left padding, see
                :func:`~posenc_core.positions.positions_from_attention_mask`, or packing,
                :func:`~posenc_core.positions.packed_positions`; q and k then ``(b, s, d)`` or
                ``(b, h, s, d)``). Integers are exact up to 2**53.

        Returns:
            ``(q_rotated, k_rotated)`` with the shapes and dtypes of ``q`` and ``k``: what
            :func:`apply_rope` gives with this module's tables.
        """
        pos = self._check_inputs(q, k, positions)  # (s,) or (b, s)
        dtype = torch.float32 if q.dtype == k.dtype == torch.float32 else torch.float64
        cos, sin = self._tables(pos, dtype, q.device)  # pos.shape + (r,)
        if pos.dim() == 2 and q.dim() >= 4:  # (b, s, r) -> (b, 1, s, r): broadcast over heads
            cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)
        return _apply(q, cos, sin, self.layout, None), _apply(k, cos, sin, self.layout, None)

    def _check_inputs(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | int | None
    ) -> torch.Tensor:
        """Check forward's arguments; return the positions as a tensor of shape (s,) or (b, s)."""
        q, k, s = check.query_key_pair(
            q, k, self.head_dim, unequal_lengths="rotate cached keys when they are first computed"
        )
        if positions is None or isinstance(positions, int) and not isinstance(positions, bool):
            offset = check.position_offset(
                "positions (offset)", 0 if positions is None else positions, s
            )
            return torch.arange(offset, offset + s, device=q.device)  # (s,)
        check.tensor("positions", positions, min_dim=1)
        if positions.dtype == torch.bool or positions.is_complex():
            raise TypeError(
                f"positions must hold integers or real numbers, got dtype {positions.dtype}"
            )
        check.finite("positions", positions)
        check.integer_positions_exact("positions", positions)
        if positions.shape[-1] != s or positions.dim() > 2:
            raise ValueError(
                f"positions must have shape (s,) or (b, s) with s={s}, got {tuple(positions.shape)}"
            )
        if positions.dim() == 2:  # the tables will have shape (b, 1, s, d), or (b, s, d)
            table = (positions.shape[0], *([1] if q.dim() >= 4 else []), s, self.head_dim)
            for name, t in (("q", q), ("k", k)):
                batch = t.shape[0] if t.dim() >= 3 else 1
                if positions.shape[0] not in (1, batch):
                    raise ValueError(
                        f"positions of shape {tuple(positions.shape)} give "
                        f"{positions.shape[0]} sequences, but {name} of shape "
                        f"{tuple(t.shape)} has batch size {batch} (its first dimension)"
                    )
                if _broadcast_shape(t.shape, table) != t.shape:
                    raise ValueError(
                        f"positions of shape {tuple(positions.shape)} give tables of shape "
                        f"{table} that do not broadcast to {name} of shape {tuple(t.shape)}; "
                        "per-batch positions need q and k of shape (b, s, d) or (b, h, s, d)"
                    )
        return positions

    def _tables(
        self, positions: torch.Tensor, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for checked ``positions`` (shape P), cached for integers below the cache
        limit when the scaling does not depend on the length; float32 tables for float32
        inputs, float64 otherwise, on ``device`` -> each P + (rotary_dim,).
        """
        table_dtype = torch.float32 if dtype == torch.float32 else torch.float64
        integral = not positions.is_floating_point() or bool((positions == positions.round()).all())
        if (
            self.scaling.depends_on_seq_len
            or not integral
            or positions.numel() == 0
            or positions.min() < 0
            or positions.max() >= _CACHE_MAX_POSITIONS
        ):
            return self._compute(positions.to(device), table_dtype)
        needed = int(positions.max().item()) + 1
        cache = self._cos
        if (
            cache is None
            or cache.shape[0] < needed
            or cache.device != device
            or cache.dtype != table_dtype
        ):
            size = max(needed, cache.shape[0] if cache is not None else 0)
            size = 1 << (size - 1).bit_length()  # next power of two
            self._cos, self._sin = self._compute(torch.arange(size, device=device), table_dtype)
        idx = positions.to(device=device, dtype=torch.long)
        assert self._cos is not None and self._sin is not None
        return self._cos[idx], self._sin[idx]  # P + (r,)

    def _compute(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """rope_cos_sin for this module's settings: tables of shape P + (r,) on the device of
        ``positions`` (shape P); dynamic and LongRoPE take seq_len = max(positions) + 1."""
        pos = _float64_positions(positions)  # P, float64
        r = self.rotary_dim
        cos, sin = _cos_sin(pos, r, self.base, self.scaling, self.layout, dtype, None)
        return cos.to(device=positions.device), sin.to(device=positions.device)

    def extra_repr(self) -> str:
        fields = [
            f"head_dim={self.head_dim}",
            f"rotary_dim={self.rotary_dim}",
            f"base={self.base:g}",
            f"layout={self.layout!r}",
            f"scaling={self.scaling.to_dict()}",
        ]
        return _format.extra_repr(self, fields)
