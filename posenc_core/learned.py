"""Learned absolute position embeddings (BERT, Devlin et al. 2019; GPT-2).

A trainable table P of shape (max_len, d_model); position p reads row P[p]. The table has
no row for p >= max_len, so, unlike a formula, it cannot produce an encoding for a longer
sequence: asking for one raises a ``ValueError`` that says so, instead of torch's bare
``IndexError``.

Notation for tensor shapes: b = batch, s = sequence, d = d_model.
"""

from __future__ import annotations

import torch
from torch import nn

from . import _validation as check
from ._numerics import LOW_PRECISION, round_once


class LearnedPositionalEmbedding(nn.Module):
    """Adds a learned row per position to token embeddings: ``x + P[p]``, the input embedding of
    BERT (Devlin et al. 2019, Sec. 3) and GPT-2 (``wpe``).

    The table is an ``nn.Parameter`` ``(max_len, d_model)`` initialised from N(0, init_std**2).
    Tested in ``tests/core/test_learned.py`` against indexing the table by hand, with the error
    past ``max_len`` and gradients reaching both ``x`` and the table.

    Args:
        max_len: number of rows (positions 0 .. max_len - 1); the table may take at most
            ``MAX_RESULT_BYTES``.
        d_model: width of each row, a positive integer at most ``MAX_WIDTH``.
        init_std: standard deviation of the normal initialisation (0.02, as in BERT).
    """

    def __init__(self, max_len: int, d_model: int, *, init_std: float = 0.02) -> None:
        super().__init__()
        self.max_len = check.positive_int("max_len", max_len)
        self.d_model = check.width(
            "d_model", d_model, where="LearnedPositionalEmbedding", even=False
        )
        dtype = torch.get_default_dtype()
        check.result_size(
            "LearnedPositionalEmbedding",
            "the table",
            {"max_len": self.max_len, "d_model": self.d_model},
            self.max_len * self.d_model,
            dtype.itemsize,
            precision=f"{dtype} parameters",
        )
        init_std = check.real_number("init_std", init_std)
        if init_std < 0:
            raise ValueError(f"init_std must be >= 0, got {init_std}")
        self.weight = nn.Parameter(torch.empty(self.max_len, self.d_model))  # (max_len, d)
        nn.init.normal_(self.weight, std=init_std)

    def _check_range(self, last: int, what: str) -> None:
        if last >= self.max_len:
            raise ValueError(
                f"{what} needs position {last}, but this learned table has rows only for "
                f"positions 0..{self.max_len - 1} (max_len={self.max_len}). A learned table has "
                f"no row for a position it was never given; use a longer table (and train it) or "
                f"a formula-based encoding such as sinusoidal or RoPE."
            )

    def _check_positions(self, positions: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Check explicit position ids against ``x`` and the table; return them unchanged."""
        positions = check.tensor("positions", positions)
        if (
            positions.dtype.is_floating_point
            or positions.is_complex()
            or positions.dtype == torch.bool
        ):
            raise TypeError(
                f"positions must be an integer tensor (position ids), got dtype {positions.dtype}"
            )
        seq, lead = x.shape[-2], tuple(x.shape[:-1])  # lead = (b, s) or (s,)
        shape = tuple(positions.shape)
        fits = 1 <= len(shape) <= len(lead) and shape[-1] == seq
        if fits:
            try:
                fits = tuple(torch.broadcast_shapes(shape, lead)) == lead  # the sum keeps x's shape
            except RuntimeError:
                fits = False
        if not fits:
            allowed = f"(s,) with s={seq}"
            if len(lead) >= 2:
                name = "(b, s)" if len(lead) == 2 else "x's leading shape"
                allowed += f" or {name} = {lead} (a size of 1 broadcasts)"
            raise ValueError(
                f"positions must have shape {allowed}, so that the result has the shape of x; "
                f"got positions of shape {shape} for x of shape {tuple(x.shape)}"
            )
        if positions.numel():
            lo, hi = int(positions.min()), int(positions.max())
            if lo < 0:
                raise ValueError(f"positions must be >= 0, got {lo}")
            self._check_range(hi, "positions")
        return positions

    def forward(
        self, x: torch.Tensor, offset: int = 0, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Return ``x + P[positions]`` (Devlin et al. 2019, Sec. 3).

        Args:
            x: ``(b, s, d)`` or ``(s, d)`` floating tensor.
            offset: position of the first token when ``positions`` is not given (e.g. the length
                of a KV cache): rows ``offset .. offset + s - 1``.
            positions: optional integer ids ``(s,)`` or ``(b, s)`` (b of x, or 1), each in
                ``0 .. max_len - 1``. Give either this or ``offset``.

        Returns:
            tensor with the shape and dtype of ``x``; for bfloat16/float16 the sum is formed in
            float64 and rounded once (see :doc:`/numerics`).

        Raises:
            ValueError: a position outside the table, ``positions`` of the wrong shape, or both.
            TypeError: a non-floating ``x``, a non-integer ``offset`` or ``positions``.
        """
        check.tensor("x", x, min_dim=2, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}"
            )
        offset = check.non_negative_int("offset", offset)
        seq = x.shape[-2]
        if positions is None:
            if seq:
                self._check_range(
                    offset + seq - 1, f"a sequence of length {seq} at offset {offset}"
                )
            rows = self.weight[offset : offset + seq]  # (s, d)
        else:
            if offset != 0:
                raise ValueError(
                    f"give either offset or positions, not both: got offset={offset} together with "
                    f"positions (position ids are absolute; add the offset to them instead)"
                )
            positions = self._check_positions(positions, x)
            rows = self.weight[positions.to(self.weight.device)]  # positions.shape + (d,)
        if x.dtype in LOW_PRECISION:  # one rounding of the exact sum, not two
            return round_once(
                x.to(torch.float64) + rows.to(device=x.device, dtype=torch.float64), x.dtype
            )
        return x + rows.to(device=x.device, dtype=x.dtype)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, d_model={self.d_model}"
