"""The encoder study's model: a small pre-LN Transformer whose positional scheme is an argument.

:class:`TinyTransformer` predicts a class at every position; chapter 5's study
(:mod:`~posenc_core.book.studies.encoder_study`) trains it as an encoder (bidirectional, as
BERT) and as a decoder (causal, as GPT) with each scheme of :data:`SCHEMES`.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from posenc_core import _validation as check
from posenc_core.attention import MultiHeadSelfAttention
from posenc_core.learned import LearnedPositionalEmbedding
from posenc_core.rope import RotaryEmbedding
from posenc_core.sinusoidal import SinusoidalPositionalEncoding

__all__ = [
    "SCHEMES",
    "INIT_STD",
    "TinyTransformer",
    "parameter_counts",
    "learned_table_parameters",
]

SCHEMES = ("none", "sinusoidal", "learned", "rope", "alibi")
"""Positional schemes a :class:`TinyTransformer` accepts (and the study compares)."""
INIT_STD = 0.02
"""GPT-2's (and BERT's) initial standard deviation of weights, embeddings and the learned
table."""


class _Block(nn.Module):
    """Pre-LN Transformer block: x + attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(
        self, d_model: int, n_heads: int, rope: RotaryEmbedding | None, alibi: bool
    ) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.attn = MultiHeadSelfAttention(d_model, n_heads, rope=rope, alibi=alibi)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model)
        )

    def forward(self, x: torch.Tensor, causal: bool, bias: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), causal=causal, bias=bias)
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    """A small pre-LN Transformer that predicts a class at every position.

    Initialised as GPT-2 (nanoGPT's ``_init_weights``): linear weights and token embedding N(0,
    0.02), biases 0, attention and MLP output projections N(0, 0.02 / sqrt(2 n_layers)). With the
    sinusoidal scheme the token embedding is N(0, 1/d), times sqrt(d) at the input (Vaswani et al.
    2017, Sec. 3.4), so tokens and table start on one scale.

    Args:
        vocab: input tokens V; the output has V + 1 classes (the tokens and NONE).
        d_model, n_heads, n_layers: width (even, divisible by ``n_heads``), heads, blocks.
        scheme: one of :data:`SCHEMES`: a table added to the embeddings (``"sinusoidal"``,
            ``"learned"``), RoPE in every layer, ALiBi in every layer (``-m|i-j|`` bidirectional,
            ``-m(i-j)`` with the mask when ``causal``), or ``"none"``.
        max_len: rows of the learned table (longer inputs raise ``ValueError``) and of the
            precomputed sinusoidal table; base: sinusoidal and RoPE base.
        causal: use a causal mask (default False: every position sees the whole sequence).
        learned_init_std: standard deviation of the learned table's initial rows.
    """

    def __init__(
        self,
        vocab: int,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        *,
        scheme: str = "sinusoidal",
        max_len: int = 32,
        base: float = 10000.0,
        causal: bool = False,
        learned_init_std: float = INIT_STD,
    ) -> None:
        super().__init__()
        self.vocab = check.positive_int("vocab", vocab)
        self.d_model = check.even_int("d_model", d_model)
        n_heads, n_layers = (
            check.positive_int("n_heads", n_heads),
            check.positive_int("n_layers", n_layers),
        )
        if d_model % n_heads or (d_model // n_heads) % 2:
            raise ValueError(
                f"n_heads={n_heads} must divide d_model={d_model} into even head widths"
            )
        self.scheme = check.choice("scheme", scheme, SCHEMES)
        self.max_len = check.positive_int("max_len", max_len)
        self.causal = check.boolean("causal", causal)
        self.embed = nn.Embedding(vocab, d_model)
        self.pos: nn.Module | None = None
        head_dim = d_model // n_heads
        self.blocks = nn.ModuleList(
            _Block(
                d_model,
                n_heads,
                RotaryEmbedding(head_dim, base=base) if scheme == "rope" else None,
                scheme == "alibi",
            )
            for _ in range(n_layers)
        )
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab + 1)
        self._init_weights(n_layers)
        if scheme == "sinusoidal":
            nn.init.normal_(self.embed.weight, 0.0, d_model**-0.5)
            self.pos = SinusoidalPositionalEncoding(d_model, max_len, base=base, scale=d_model**0.5)
        elif scheme == "learned":
            self.pos = LearnedPositionalEmbedding(max_len, d_model, init_std=learned_init_std)

    def _init_weights(self, n_layers: int) -> None:
        """GPT-2's initialisation (nanoGPT's ``_init_weights`` and its scaled projections)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, INIT_STD)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        for block in self.blocks:
            for proj in (block.attn.out, block.mlp[2]):
                nn.init.normal_(proj.weight, 0.0, INIT_STD / math.sqrt(2 * n_layers))

    def forward(self, tokens: torch.Tensor, *, window: int | None = None) -> torch.Tensor:
        """Logits for every position.

        Args:
            tokens: ``(b, s)`` integer tokens in 0 .. V-1.
            window: a positive int w: every layer attends only to keys with ``|i - j| < w``
                (on top of the causal mask when ``causal``); None: no band.

        Returns:
            ``(b, s, V + 1)`` logits.

        Raises:
            ValueError: for a learned table, if s exceeds its ``max_len`` rows.
            TypeError, ValueError: a ``window`` that is not a positive integer.
        """
        check.tensor("tokens", tokens, min_dim=2)
        if tokens.dim() != 2 or tokens.dtype.is_floating_point:
            raise ValueError(
                "tokens must be an integer tensor of shape (b, s), "
                f"got {tokens.dtype} {tuple(tokens.shape)}"
            )
        band = None
        if window is not None:
            window = check.positive_int("window", window)
            i = torch.arange(tokens.shape[1], device=tokens.device)
            far = (i[:, None] - i[None, :]).abs() >= window  # (s, s)
            band = torch.zeros(far.shape, device=tokens.device).masked_fill(far, float("-inf"))
        x = self.embed(tokens)  # (b, s, d)
        if self.pos is not None:
            x = self.pos(x)
        if band is not None:
            band = band.to(x.dtype)
        for block in self.blocks:
            x = block(x, self.causal, band)
        return self.head(self.ln_f(x))  # (b, s, C)

    def position_table(self) -> torch.Tensor | None:
        """The learned position table ``(max_len, d)`` (a detached copy), or None for other
        schemes."""
        return (
            self.pos.weight.detach().clone()
            if isinstance(self.pos, LearnedPositionalEmbedding)
            else None
        )


def parameter_counts(model: TinyTransformer) -> dict[str, int]:
    """Trainable parameters of a model: ``total`` and ``positional`` (the learned table's rows)."""
    total = sum(p.numel() for p in model.parameters() if p.requires_grad)
    table = model.position_table()
    return {"total": int(total), "positional": 0 if table is None else int(table.numel())}


def learned_table_parameters(max_len: int, d_model: int) -> int:
    """Parameters of a learned absolute table: ``max_len * d_model`` (BERT-base: 512 x 768)."""
    return check.positive_int("max_len", max_len) * check.positive_int("d_model", d_model)
