"""A small pre-LN causal byte-level language model whose positional scheme is an argument.

:class:`ByteLM` is a GPT-2-shaped decoder (Radford et al. 2019; nanoGPT's layout): a byte
embedding (vocabulary 256), pre-LN blocks ``x + attn(LN(x))``, ``x + MLP(LN(x))`` with a 4x GELU
MLP, a final LayerNorm and an output head tied to the byte embedding. Weights are initialised as
GPT-2: linear layers and embeddings N(0, 0.02), biases 0, the output projections of attention
and MLP N(0, 0.02 / sqrt(2 n_layers)). Attention is :func:`posenc_core.attention.attention`,
causal; the schemes are the entries of :data:`SCHEMES`.
Shapes: b = batch, s = sequence, d = d_model, h = heads, d_h = head_dim, V = 256.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from posenc_core import _validation as check
from posenc_core.alibi import alibi_bias
from posenc_core.attention import attention
from posenc_core.learned import LearnedPositionalEmbedding
from posenc_core.rope import RopeScaling, RotaryEmbedding
from posenc_core.rope.xpos import XPosEmbedding, xpos_scales
from posenc_core.sinusoidal import SinusoidalPositionalEncoding
from posenc_core.t5_bias import T5RelativePositionBias

__all__ = ["SCHEMES", "MATCHED_TABLE_SCALE", "ByteLM", "Rotate", "Attend"]

VOCAB = 256
MATCHED_TABLE_SCALE = 0.02 * math.sqrt(2.0)
"""The ``"sinusoidal-matched"`` table's factor: a sinusoidal entry, sin or cos, has a
root-mean-square of 1/sqrt(2), so this factor gives the table the 0.02 of GPT-2's learned
table at initialisation."""


Rotate = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""``rotate(q, k, positions) -> (q, k)``: q, k ``(b, h, s, d_h)``, positions ``(s,)`` or
``(b, s)``; how a layer rotates its queries and keys (:meth:`ByteLM.forward`'s ``rotate``)."""

Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
"""``attend(layer, q, k, v) -> y``: the whole attention of one layer from its *unrotated*
queries, keys and values ``(b, h, s, d_h)`` to its output ``(b, h, s, d_h)`` (rotation, scores,
mask and softmax included); :meth:`ByteLM.forward`'s ``attend``, for example a KV cache."""


class _Attention(nn.Module):
    """Causal multi-head self-attention with an optional rotary embedding and additive bias."""

    def __init__(self, d_model: int, n_heads: int, rope: RotaryEmbedding | _XPos | None) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.rope = rope

    def forward(
        self,
        x: torch.Tensor,
        bias: torch.Tensor | None,
        positions: torch.Tensor | None = None,
        rotate: Rotate | None = None,
        score_scale: float = 1.0,
        attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.n_heads, d // self.n_heads).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (b, h, s, d_h) each
        if attend is not None:
            y = attend(q, k, v)
        else:
            if rotate is not None:
                q, k = rotate(q, k, torch.arange(s) if positions is None else positions)
            elif self.rope is not None:
                q, k = self.rope(q, k, positions)
            if score_scale != 1.0:
                q = q * score_scale
            y = attention(q, k, v, causal=True, bias=bias)  # (b, h, s, d_h)
        return self.proj(y.transpose(1, 2).reshape(b, s, d))  # (b, s, d)


class _Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, rope: RotaryEmbedding | _XPos | None) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = _Attention(d_model, n_heads, rope)
        self.fc, self.out = nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None, **options: Any) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), bias, **options)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class _Scheme(NamedTuple):
    """What a scheme adds: a table on the embeddings, RoPE in every layer, a shared bias; and
    whether the byte embeddings follow Vaswani et al. (init N(0, 1/d), times sqrt(d) at the
    input) instead of GPT-2 (init N(0, 0.02), used as they are)."""

    embedding: Callable[[ByteLM], nn.Module | None] = lambda m: None
    rope: bool = False
    xpos: bool = False
    bias: Callable[[ByteLM], nn.Module | None] = lambda m: None
    vaswani_embedding: bool = False


class _Sinusoidal(nn.Module):
    """The sinusoidal table's rows 0 .. s-1, cached per length and added in the input dtype.

    For float32 inputs this equals :class:`~posenc_core.sinusoidal.SinusoidalPositionalEncoding`
    bit for bit (it forms the sum in float64 and rounds once, which is what a float32 addition
    does), at a third of the cost in training."""

    def __init__(self, d_model: int, max_len: int, base: float, table_scale: float = 1.0) -> None:
        super().__init__()
        self.table = SinusoidalPositionalEncoding(d_model, max_len, base=base)
        self.table_scale = table_scale
        self._cache: dict[tuple[int, torch.device], torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (x.shape[-2], x.device)
        if key not in self._cache:
            with torch.no_grad():
                zeros = torch.zeros(x.shape[-2], x.shape[-1], device=x.device)
                rows = self.table(zeros)  # (s, d)
                if self.table_scale != 1.0:
                    rows = rows * self.table_scale
                self._cache = {key: rows}
        return x + self._cache[key].to(x.dtype)


class _XPos(nn.Module):
    """xPos for training: the cached float32 rotation of :class:`~posenc_core.rope.RotaryEmbedding`
    times the scale tables of :func:`~posenc_core.rope.xpos.xpos_scales`, cached per length and
    centred as :class:`~posenc_core.rope.xpos.XPosEmbedding` centres them; equal to it to float32
    rounding (``tests/book/test_byte_lm.py``) and faster, since the reference works in float64."""

    def __init__(self, head_dim: int, base: float, scale_base: float) -> None:
        super().__init__()
        XPosEmbedding(head_dim, base=base, scale_base=scale_base)  # refuse bad settings now
        self.rotary = RotaryEmbedding(head_dim, base=base)
        self.head_dim, self.base, self.scale_base = head_dim, base, scale_base
        self._cache: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor | int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        s = q.shape[-2]
        if positions is None or isinstance(positions, int):
            pos = torch.arange(s) + (positions or 0)
        elif positions.dim() == 1:
            pos = positions.cpu()
        else:
            raise ValueError(
                f"xPos takes one sequence of positions, shape (s,), got {tuple(positions.shape)}"
            )
        key = (tuple(pos.tolist()), q.dtype, q.device)
        if key not in self._cache:
            center = (int(pos.min()) + int(pos.max()) + 1) // 2
            qs, ks = xpos_scales(
                pos, self.head_dim, scale_base=self.scale_base, center=center, dtype=q.dtype
            )
            self._cache = {key: (qs.to(q.device), ks.to(q.device))}
        qs, ks = self._cache[key]
        q, k = self.rotary(q, k, positions)
        return q * qs, k * ks


class _AlibiBias(nn.Module):
    """The causal ALiBi bias (h, s, s) for a length s (no parameters; cached per length)."""

    def __init__(self, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self._cache: dict[tuple[int, torch.device], torch.Tensor] = {}

    def forward(self, s: int, device: torch.device) -> torch.Tensor:
        key = (s, device)
        if key not in self._cache:
            self._cache = {key: alibi_bias(self.n_heads, s, s, causal=True, device=device)}
        return self._cache[key]


class _T5Bias(nn.Module):
    """T5's causal bias (h, s, s), one table for all layers."""

    def __init__(self, n_heads: int, num_buckets: int, max_distance: int, d_model: int) -> None:
        super().__init__()
        self.bias = T5RelativePositionBias(
            n_heads,
            bidirectional=False,
            num_buckets=num_buckets,
            max_distance=max_distance,
            init_std=d_model**-0.5,
        )

    def forward(self, s: int, device: torch.device) -> torch.Tensor:
        return self.bias(s, s)


SCHEMES: dict[str, _Scheme] = {
    "none": _Scheme(),
    "sinusoidal": _Scheme(
        embedding=lambda m: _Sinusoidal(m.d_model, m.max_len, m.base),
        vaswani_embedding=True,
    ),
    "sinusoidal-matched": _Scheme(
        embedding=lambda m: _Sinusoidal(m.d_model, m.max_len, m.base, MATCHED_TABLE_SCALE)
    ),
    "learned": _Scheme(
        embedding=lambda m: LearnedPositionalEmbedding(m.max_len, m.d_model, init_std=0.02)
    ),
    "rope": _Scheme(rope=True),
    "xpos": _Scheme(xpos=True),
    "alibi": _Scheme(bias=lambda m: _AlibiBias(m.n_heads)),
    "t5": _Scheme(
        bias=lambda m: _T5Bias(m.n_heads, m.t5_num_buckets, m.t5_max_distance, m.d_model)
    ),
}
"""The positional schemes of :class:`ByteLM`, one small builder each.

``"none"`` (NoPE): the causal mask alone (Haviv et al. 2022). ``"sinusoidal"``: Vaswani et
al.'s table added to byte embeddings drawn N(0, 1/d) and multiplied by sqrt(d) at the input
(their Sec. 3.4), so tokens and table start on one scale (with 0.02 training stalls); the tied
head uses the unscaled embedding. ``"sinusoidal-matched"``: the control, GPT-2's embeddings and
the table times :data:`MATCHED_TABLE_SCALE`. ``"learned"``: a table of ``max_len`` rows, N(0,
0.02); rows never reached in training keep their initialisation. ``"rope"``: RoPE on queries
and keys in every layer, scaling switchable at inference (:meth:`ByteLM.set_rope_scaling`),
``rotary_dim`` for partial rotary. ``"xpos"``: RoPE whose scores also decay as
zeta_i ** ((n - m) / B) (Sun et al. 2022), centred on each call's positions. ``"alibi"``: the
causal bias ``-m_h (i - j)`` of Press et al. 2022. ``"t5"``: T5's causal bucketed bias, one
table shared by every layer, initialised N(0, d_model ** -0.5) as Hugging Face's T5."""


class ByteLM(nn.Module):
    """A small pre-LN causal decoder over bytes (the schemes: :data:`SCHEMES`).

    Args:
        scheme: one of :data:`SCHEMES`.
        d_model, n_layers, n_heads: width d (split into even head widths d_h), blocks, heads.
        max_len: rows of the learned table (longer inputs raise posenc_core's ``ValueError``) and
            of the precomputed sinusoidal table (longer ones come from the formula).
        base: frequency base of the sinusoidal table and of RoPE.
        rope_scaling: initial RoPE scaling (None, a :class:`~posenc_core.rope.RopeScaling` or a
            Hugging Face-style dict); ``"rope"`` only.
        t5_num_buckets, t5_max_distance: T5's causal buckets (``"t5"`` only).
        xpos_scale_base: xPos's B (``"xpos"`` only).
        rotary_dim: rotate only the first ``rotary_dim`` dims of each head, with frequencies over
            that width (partial rotary, as GPT-NeoX); None: the whole head. ``"rope"`` only.

    Raises:
        ValueError, TypeError: an unknown scheme, a size out of range, or ``rope_scaling`` or
            ``rotary_dim`` with a scheme other than ``"rope"``.
    """

    def __init__(
        self,
        scheme: str,
        *,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        max_len: int = 512,
        base: float = 10000.0,
        rope_scaling: RopeScaling | Mapping[str, Any] | None = None,
        t5_num_buckets: int = 32,
        t5_max_distance: int = 64,
        rotary_dim: int | None = None,
        xpos_scale_base: float = 512.0,
    ) -> None:
        super().__init__()
        self.scheme = check.choice("scheme", scheme, tuple(SCHEMES))
        self.d_model = check.even_int("d_model", d_model)
        self.n_layers = check.positive_int("n_layers", n_layers)
        self.n_heads = check.positive_int("n_heads", n_heads)
        if d_model % n_heads or (d_model // n_heads) % 2:
            raise ValueError(
                f"n_heads={n_heads} must divide d_model={d_model} into even head widths"
            )
        self.max_len = check.positive_int("max_len", max_len)
        self.base = check.base_value("base", base)
        self.t5_num_buckets = check.positive_int("t5_num_buckets", t5_num_buckets)
        self.t5_max_distance = check.positive_int("t5_max_distance", t5_max_distance)
        variant = SCHEMES[scheme]
        if rope_scaling is not None and not variant.rope:
            raise ValueError(
                f"rope_scaling applies to scheme 'rope' only, got scheme={scheme!r} with "
                f"rope_scaling={rope_scaling!r}"
            )
        if rotary_dim is not None and not variant.rope:
            raise ValueError(
                f"rotary_dim applies to scheme 'rope' only, got scheme={scheme!r} with "
                f"rotary_dim={rotary_dim!r}"
            )
        self.embed = nn.Embedding(VOCAB, d_model)
        self.pos = variant.embedding(self)
        self.bias = variant.bias(self)
        self.rope: RotaryEmbedding | _XPos | None = None
        if variant.rope:
            self.rope = RotaryEmbedding(
                d_model // n_heads, base=self.base, scaling=rope_scaling, rotary_dim=rotary_dim
            )
        elif variant.xpos:
            self.rope = _XPos(d_model // n_heads, self.base, xpos_scale_base)
        self.blocks = nn.ModuleList(_Block(d_model, n_heads, self.rope) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.embed_scale = math.sqrt(d_model) if variant.vaswani_embedding else 1.0
        self._init_weights()
        if variant.vaswani_embedding:
            nn.init.normal_(self.embed.weight, 0.0, d_model**-0.5)

    def _init_weights(self) -> None:
        """GPT-2's initialisation (nanoGPT's ``_init_weights``; T5's table keeps its own)."""
        for name, p in self.named_parameters():
            if name.startswith("bias.") or p.dim() == 1 and "ln" in name:
                continue
            if p.dim() == 1:
                nn.init.zeros_(p)
            elif name.endswith(("attn.proj.weight", "out.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * self.n_layers))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def set_rope_scaling(self, scaling: RopeScaling | Mapping[str, Any] | None) -> None:
        """Switch RoPE's scaling at inference; the weights are untouched.

        The shared :class:`~posenc_core.rope.RotaryEmbedding` gets the new ``scaling`` and drops
        its cached tables, so the next call uses the new frequencies and, for YaRN, the attention
        factor.

        Args:
            scaling: None (plain RoPE), a :class:`~posenc_core.rope.RopeScaling` or a dict such as
                ``{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}``
                (parsed by :func:`~posenc_core.rope.parse_scaling`).

        Raises:
            ValueError: the model's scheme is not ``"rope"``, or the scaling is invalid.
        """
        if not isinstance(self.rope, RotaryEmbedding):
            raise ValueError(
                f"set_rope_scaling needs a model with scheme 'rope', this one is {self.scheme!r}"
            )
        self.rope.set_scaling(scaling)

    @property
    def rope_scaling(self) -> RopeScaling | None:
        """The RoPE scaling in use (None for other schemes)."""
        return self.rope.scaling if isinstance(self.rope, RotaryEmbedding) else None

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        positions: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
        rotate: Rotate | None = None,
        score_scale: float = 1.0,
        attend: Attend | None = None,
    ) -> torch.Tensor:
        """Next-byte logits; with no option this is the pass the model was trained with, and the
        options expose the positional inputs to the book's instruments (chapters 8 and 9).

        Args:
            tokens: int64 ``(b, s)`` byte values 0 .. 255 (s <= ``max_len`` for ``"learned"``).
            positions: integer ``(s,)`` or ``(b, s)`` position of every token; None: 0 .. s-1.
                Schemes ``"rope"``, ``"learned"`` and ``"none"`` (which ignores them) only.
            bias: additive attention bias broadcasting to ``(b, h, s, s)`` (``-inf`` hides a key),
                added to the causal mask and the model's own bias (ALiBi, T5).
            rotate: replaces the rotation of queries and keys (:data:`Rotate`); RoPE and xPos only.
            score_scale: multiplies every attention score q.k / sqrt(d_h).
            attend: replaces each layer's whole attention (:data:`Attend`); then the other options
                must keep their defaults.

        Returns:
            logits ``(b, s, 256)``: row t predicts byte t + 1 from bytes 0 .. t.
        """
        check.tensor("tokens", tokens, min_dim=2)
        if tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError(
                f"tokens must be an int64 tensor of shape (b, s), got dtype {tokens.dtype} and "
                f"shape {tuple(tokens.shape)}"
            )
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= VOCAB):
            raise ValueError(
                f"tokens must be byte values 0 .. 255, got values from {int(tokens.min())} "
                f"to {int(tokens.max())}"
            )
        b, s = tokens.shape
        positions = self._check_positions(positions, b, s)
        if rotate is not None and not callable(rotate):
            raise TypeError(f"rotate must be callable or None, got {rotate!r}")
        if rotate is not None and self.rope is None:
            raise ValueError(f"rotate needs a RoPE or xPos model, this one is {self.scheme!r}")
        score_scale = check.real_number("score_scale", score_scale)
        if attend is not None:
            if not callable(attend):
                raise TypeError(f"attend must be callable or None, got {attend!r}")
            given = {
                "positions": positions is not None,
                "bias": bias is not None,
                "rotate": rotate is not None,
                "score_scale": score_scale != 1.0,
            }
            if any(given.values()):
                names = ", ".join(name for name, on in given.items() if on)
                raise ValueError(f"attend replaces the whole attention; do not also give {names}")
        x = self.embed(tokens) * self.embed_scale  # (b, s, d)
        if self.pos is not None:
            # adds the table's rows 0 .. s-1, or the given ones (learned table only)
            x = self.pos(x) if positions is None else self.pos(x, positions=positions)
        own = None if self.bias is None else self.bias(s, tokens.device)  # (h, s, s)
        if bias is not None:
            check.tensor("bias", bias, min_dim=2, floating=True)
            own = bias if own is None else own + bias
        for layer, block in enumerate(self.blocks):
            options: dict[str, Any] = {}
            if attend is not None:
                options["attend"] = functools.partial(attend, layer)
            elif positions is not None or rotate is not None or score_scale != 1.0:
                options = {"positions": positions, "rotate": rotate, "score_scale": score_scale}
            x = block(x, own, **options)
        return self.ln_f(x) @ self.embed.weight.T  # (b, s, V), tied head

    def attention_weights(self, tokens: torch.Tensor) -> list[torch.Tensor]:
        """The attention weights of every layer, as the model attends on ``tokens``.

        Each layer's causal softmax of its scores (rotated queries and keys over sqrt(d_h), plus
        the scheme's bias), computed explicitly in float32; its output, weights times values,
        equals :meth:`forward`'s attention to float rounding, so later layers see what they see
        in the model's pass.

        Args:
            tokens: int64 ``(b, s)``, as in :meth:`forward`.

        Returns:
            one ``(b, h, s, s)`` tensor per layer, each row summing to 1 over keys 0 .. i.
        """
        weights: list[torch.Tensor] = []
        s = tokens.shape[-1] if isinstance(tokens, torch.Tensor) and tokens.dim() == 2 else 0
        future = torch.ones(s, s, dtype=torch.bool, device=tokens.device).triu(1)
        own = None if self.bias is None or s == 0 else self.bias(s, tokens.device)

        def spy(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            if self.rope is not None:
                q, k = self.rope(q, k, None)
            scores = q.float() @ k.float().transpose(-1, -2) / q.shape[-1] ** 0.5
            if own is not None:
                scores = scores + own
            w = scores.masked_fill(future, float("-inf")).softmax(-1)  # (b, h, s, s)
            weights.append(w)
            return (w @ v.float()).to(v.dtype)

        with torch.no_grad():
            self(tokens, attend=spy)
        return weights

    def _check_positions(self, positions: object, b: int, s: int) -> torch.Tensor | None:
        if positions is None:
            return None
        check.tensor("positions", positions, min_dim=1)
        assert isinstance(positions, torch.Tensor)
        if positions.is_floating_point() or positions.dtype == torch.bool:
            raise TypeError(f"positions must hold integers, got dtype {positions.dtype}")
        if positions.shape not in ((s,), (b, s), (1, s)):
            raise ValueError(
                f"positions must have shape (s,) or (b, s) = ({b}, {s}), "
                f"got {tuple(positions.shape)}"
            )
        if positions.numel() and positions.min() < 0:
            raise ValueError(f"positions must be >= 0, got a minimum of {int(positions.min())}")
        if self.scheme not in ("rope", "learned", "none"):
            raise ValueError(
                "positions can be given for schemes 'rope', 'learned' and 'none', "
                f"not {self.scheme!r}"
            )
        return positions
