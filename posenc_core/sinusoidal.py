"""Sinusoidal positional encoding (Vaswani et al. 2017, "Attention Is All You Need", Sec. 3.5).

    PE(pos, 2i)   = sin(pos * omega_i)
    PE(pos, 2i+1) = cos(pos * omega_i),      omega_i = base ** (-2i / d_model)

Two layouts, named as RoPE's: ``"interleaved"`` is the paper's (sine i at dim 2i, cosine i at
2i + 1); ``"half"`` puts all sines, then all cosines (the pairs (j, j + d/2) of RoPE's half
layout), as tensor2tensor's ``get_timing_signal_1d`` and fairseq do. The old name
``"concat"`` is refused with a message giving the new one. Angles are float64, rounded once to
the requested dtype (see :doc:`/numerics`). Tested in ``tests/core/test_sinusoidal.py``
against the paper's formula evaluated with Python's ``math`` in double precision.

Notation for tensor shapes: n = number of positions, d = d_model, b = batch, s = sequence,
``P`` = any shape of positions.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from . import _format
from . import _validation as check
from ._numerics import LOW_PRECISION, round_once, warm_up_trigonometry

LAYOUTS = check.LAYOUTS


def sinusoidal_frequencies(d_model: int, *, base: float = 10000.0) -> torch.Tensor:
    """Angular frequencies omega_i = base**(-2i/d_model), i = 0 .. d_model/2 - 1.

    A geometric sequence from 1 rad/position (i = 0, whatever the base) down to
    base**(-(d_model-2)/d_model): the frequencies of Vaswani et al. 2017, Sec. 3.5, checked
    in ``tests/core/test_sinusoidal.py`` against the paper's formula.

    Args:
        d_model: model width, a positive even integer, at most 2**20 (``MAX_WIDTH``).
        base: the constant in the denominator (10000 in the paper), finite and > 1.

    Returns:
        float64 tensor of shape ``(d_model // 2,)``.
    """
    d_model = check.width("d_model", d_model, where="sinusoidal_frequencies")
    base = check.base_value("base", base)
    return _frequencies(d_model, base)


def _frequencies(d_model: int, base: float) -> torch.Tensor:
    """:func:`sinusoidal_frequencies` for checked arguments -> float64 ``(d_model // 2,)``."""
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,)
    return torch.pow(torch.tensor(base, dtype=torch.float64), -two_i / d_model)


def sinusoidal_wavelengths(d_model: int, *, base: float = 10000.0) -> torch.Tensor:
    """Wavelengths 2*pi/omega_i in positions: from 2*pi up to 2*pi*base**((d_model-2)/d_model).

    The geometric progression of wavelengths described by Vaswani et al. 2017, Sec. 3.5
    ("from 2*pi to 10000 * 2*pi"); checked in ``tests/core/test_sinusoidal.py`` against
    ``2*pi*base**(2i/d)`` computed with Python's ``math``.

    Args:
        d_model: model width, a positive even integer, at most 2**20 (``MAX_WIDTH``).
        base: the constant in the denominator (10000 in the paper), finite and > 1.

    Returns:
        float64 tensor of shape ``(d_model // 2,)``, increasing.
    """
    d_model = check.width("d_model", d_model, where="sinusoidal_wavelengths")
    base = check.base_value("base", base)
    return 2 * math.pi / _frequencies(d_model, base)


def sinusoidal_formula(
    positions: torch.Tensor, d_model: int, base: float, layout: str
) -> torch.Tensor:
    """The formula itself: sin(pos * omega_i) and cos(pos * omega_i), laid out by ``layout``.

    Every table of this module is this function of float64 positions, rounded once. Trusts its
    arguments.

    Args:
        positions: float64 tensor of any shape ``P``.
        d_model: even width d.
        base: the base, > 1.
        layout: ``"interleaved"`` or ``"half"``.

    Returns:
        float64 tensor of shape ``P + (d_model,)``.
    """
    omega = _frequencies(d_model, base).to(positions.device)  # (d/2,)
    angles = positions.unsqueeze(-1) * omega  # P + (d/2,)
    warm_up_trigonometry()  # once per process: see the Numerics page
    sin, cos = torch.sin(angles), torch.cos(angles)
    if layout == "interleaved":
        return torch.stack((sin, cos), dim=-1).flatten(-2)  # P + (d/2, 2) -> P + (d,)
    return torch.cat((sin, cos), dim=-1)  # "half": P + (d,)


def sinusoidal_encoding(
    positions: torch.Tensor | int | float | list,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Encodings PE(pos) of Vaswani et al. 2017, Sec. 3.5, for any real (fractional or negative)
    positions, from float64 angles rounded once to ``dtype``.

    Tested in ``tests/core/test_sinusoidal.py`` against the paper's formula evaluated with
    Python's ``math`` in float64 (correctly rounded in float32, bfloat16 and float16).

    Args:
        positions: any shape ``P`` of finite real positions.
        d_model: positive even width, at most ``MAX_WIDTH``; the float64 encodings may take at
            most ``MAX_RESULT_BYTES`` (encode longer runs in chunks).
        base: frequency base, finite and > 1.
        layout: ``"interleaved"`` (the paper's) or ``"half"`` (all sines, then all cosines).
        dtype: floating dtype of the result.
        device: a torch.device, a string such as ``"cpu"``, or None (that of ``positions``,
            else CPU).

    Returns:
        tensor of shape ``P + (d_model,)``.
    """
    d_model = check.width("d_model", d_model, where="sinusoidal_encoding")
    base = check.base_value("base", base)
    layout = check.layout("layout", layout)
    dtype = check.float_dtype("dtype", dtype)
    device = check.device_value("device", device)
    if device is None and isinstance(positions, torch.Tensor):
        device = positions.device
    pos = check.as_positions("positions", positions)  # P, float64
    check.result_size(
        "sinusoidal_encoding",
        "the encodings",
        {"positions.shape": tuple(pos.shape), "d_model": d_model},
        pos.numel() * d_model,
        advice="encode the positions in chunks",
    )
    return round_once(sinusoidal_formula(pos, d_model, base, layout), dtype).to(device=device)


def sinusoidal_table(
    n_positions: int,
    d_model: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The table PE[pos, :] for pos = 0 .. n_positions - 1 (Vaswani et al. 2017, Sec. 3.5).

    Tested in ``tests/core/test_sinusoidal.py`` against the paper's formula evaluated with
    Python's ``math`` (and, for bfloat16 and float16, against numpy's float64 table).

    Args:
        n_positions: number of rows, a positive integer.
        d_model: positive even width, at most ``MAX_WIDTH``; the float64 table may take at most
            ``MAX_RESULT_BYTES`` (build a longer one in chunks with :func:`sinusoidal_encoding`).
        base, layout, dtype, device: as in :func:`sinusoidal_encoding` (``device`` None means
            CPU).

    Returns:
        tensor of shape ``(n_positions, d_model)``, values in [-1, 1].
    """
    n_positions = check.positive_int("n_positions", n_positions)
    d_model = check.width("d_model", d_model, where="sinusoidal_table")
    check.result_size(
        "sinusoidal_table",
        "the table",
        {"n_positions": n_positions, "d_model": d_model},
        n_positions * d_model,
        advice="build it in chunks of positions with sinusoidal_encoding",
    )
    base = check.base_value("base", base)
    layout = check.layout("layout", layout)
    dtype = check.float_dtype("dtype", dtype)
    device = check.device_value("device", device)
    positions = torch.arange(n_positions, dtype=torch.float64)  # (n,)
    return round_once(sinusoidal_formula(positions, d_model, base, layout), dtype).to(device=device)


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the sinusoidal table to token embeddings, as in the original Transformer (Vaswani et
    al. 2017, Sec. 3.5).

    The first ``max_len`` rows are precomputed in float64 into a non-persistent buffer (a formula,
    not a weight: not in ``state_dict``), rebuilt in float64 if a cast lowers its precision; rows
    past ``max_len`` are computed on demand (see :doc:`/numerics`). Tested in
    ``tests/core/test_sinusoidal.py`` against the paper's formula, before and past ``max_len``.

    Args:
        d_model: positive even width, at most ``MAX_WIDTH``.
        max_len: number of rows to precompute, a positive integer; the float64 table may take
            at most ``MAX_RESULT_BYTES``.
        base: frequency base, finite and > 1.
        layout: ``"interleaved"`` or ``"half"`` (see :func:`sinusoidal_encoding`).
        scale: multiply the input by this before adding (the paper's sqrt(d_model):
            ``scale=d_model**0.5``). Defaults to 1.
    """

    def __init__(
        self,
        d_model: int,
        max_len: int,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
        scale: float = 1.0,
    ) -> None:
        super().__init__()
        where = "SinusoidalPositionalEncoding"
        self.d_model = check.width("d_model", d_model, where=where)
        self.max_len = check.positive_int("max_len", max_len)
        check.result_size(
            where,
            "the precomputed table",
            {"max_len": self.max_len, "d_model": self.d_model},
            self.max_len * self.d_model,
            advice="rows past max_len are computed on demand, so a shorter table serves them too",
        )
        self.base = check.base_value("base", base)
        self.layout = check.layout("layout", layout)
        self.scale = check.real_number("scale", scale)
        table = self._table(torch.arange(self.max_len, dtype=torch.float64))  # (max_len, d)
        self.register_buffer("pe", table, persistent=False)  # float64

    def _table(self, positions: torch.Tensor) -> torch.Tensor:
        """float64 rows for float64 ``positions`` ``(n,)`` -> ``(n, d)``, on their device."""
        return sinusoidal_formula(positions, self.d_model, self.base, self.layout)

    def _rows(self, start: int, stop: int, device: torch.device) -> torch.Tensor:
        """float64 rows for positions start .. stop-1 -> (stop - start, d)."""
        if stop <= self.max_len:
            if self.pe.dtype != torch.float64:  # a cast lowered it: rebuild at full precision
                table = self._table(torch.arange(self.max_len, dtype=torch.float64))
                self.pe = table.to(device=self.pe.device)
            return self.pe[start:stop].to(device)
        return self._table(torch.arange(start, stop, dtype=torch.float64)).to(device=device)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """Return ``scale * x + PE[offset : offset + s]``.

        Args:
            x: ``(b, s, d_model)`` (or ``(s, d_model)``) floating tensor.
            offset: position of the first token (e.g. the length of a KV cache), an integer >= 0
                with offset + s - 1 <= 2**53.

        Returns:
            tensor with the shape and dtype of ``x``; for bfloat16/float16 the sum is formed in
            float64 and rounded once.
        """
        check.tensor("x", x, min_dim=2, floating=True)
        if x.shape[-1] != self.d_model:
            raise ValueError(
                f"x must have last dimension d_model={self.d_model}, got shape {tuple(x.shape)}"
            )
        seq = x.shape[-2]
        offset = check.position_offset("offset", offset, seq)
        pe = self._rows(offset, offset + seq, x.device)  # (s, d), float64
        work = torch.float64 if x.dtype in LOW_PRECISION else x.dtype
        out = x.to(work) * self.scale + pe.to(work)
        return round_once(out, x.dtype)

    def extra_repr(self) -> str:
        fields = [
            f"d_model={self.d_model}",
            f"max_len={self.max_len}",
            f"base={self.base:g}",
            f"layout={self.layout!r}",
        ]
        return _format.extra_repr(self, fields)
