"""Rotary position embedding, RoPE (Su et al. 2021, "RoFormer", Eq. 13-16 and 34).

Query and key vectors are split into head_dim/2 pairs; pair i at position m is rotated by
the angle m * theta_i with theta_i = base ** (-2i / head_dim). Because rotations compose,
the score <R_m q, R_n k> = <q, R_{n-m} k> depends on the positions only through n - m.

Two layouts are in use and both are supported:

* ``"half"``: pair i is (x[i], x[i + head_dim/2]); cos/sin are ``cat(freqs, freqs)``. This is
  Hugging Face's ``rotate_half`` / ``apply_rotary_pos_emb`` (modeling_llama.py).
* ``"interleaved"``: pair i is (x[2i], x[2i+1]); each frequency repeats on dims 2i, 2i+1.
  This is RoFormer's formulation and Meta's Llama code (complex multiplication with
  ``freqs_cis``), and torchtune's.

Context-extension ``scaling`` accepts the dictionaries found in Hugging Face configs
(``rope_scaling`` / ``rope_parameters``) with ``rope_type`` (or the legacy ``type``) one of
``linear`` (position interpolation, Chen et al. 2023), ``dynamic`` (dynamic NTK),
``yarn`` (Peng et al. 2023), ``llama3`` (Llama 3.1), and also ``ntk`` (NTK-aware base
scaling, base * factor**(d/(d-2)), "bloc97" 2023). Each is checked against
``transformers.modeling_rope_utils`` in ``tests/test_rope_reference.py``.

Precision: frequencies and angles are computed in float64 and rounded once, so tables stay
within float32 rounding of the exact value at any position up to 2**20 and beyond, and
bfloat16/float16 requests get the correctly rounded value. (Building positions or angles in
bf16 makes cos/sin wrong by O(1) past a few thousand positions; in all-fp32 arithmetic the
error reaches about 1e-2 at position 131072.)

Notation for tensor shapes: b = batch, h = heads, s = sequence, d = head_dim, P = any
shape of positions.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from . import _format
from . import _validation as check
from ._numerics import LOW_PRECISION, round_once, round_once_into

LAYOUTS = ("half", "interleaved")
ROPE_TYPES = ("default", "linear", "ntk", "dynamic", "yarn", "llama3")

# Target number of elements per chunk in apply_rope's unfused (eager) path: small enough that
# the intermediate reads and writes of one chunk stay in cache, large enough that the Python
# loop costs little (measured in benchmarks/rope_benchmark.py).
_CHUNK_ELEMENTS = 1 << 20
_CHUNK_ELEMENTS_LOW = 1 << 18  # for bfloat16/float16 inputs (float64 work): best of 2**16..2**20

# apply_rope(fused=None) runs the torch.compile'd kernel for float32/float64 CPU inputs of at
# least this many elements (16 MB of float32: beyond that, one pass over memory instead of the
# eager path's cache-resident passes pays for itself; smaller calls never wait for a compile).
_FUSED_MIN_ELEMENTS = 1 << 22
_FUSED_AUTO_DTYPES = (torch.float32, torch.float64)
_FUSED_RECOMPILE_LIMIT = 64

# RotaryEmbedding caches rows 0 .. n-1 only while n stays below this; larger positions (a
# decoding step at offset 10**9, say) are computed per call instead of allocating a table
# with a row for every position before them.
_CACHE_MAX_POSITIONS = 1 << 16


# --------------------------------------------------------------------------- scaling


def parse_scaling(scaling: Mapping[str, Any] | None, *, base: float = 10000.0) -> dict[str, Any]:
    """Normalise a scaling dictionary and fill in defaults.

    Accepts Hugging Face's key names: ``rope_type`` or legacy ``type`` (and ``"su"`` is
    not supported); ``factor``; ``original_max_position_embeddings``; yarn's ``beta_fast``
    (default 32), ``beta_slow`` (1), ``attention_factor``, ``mscale``, ``mscale_all_dim``,
    ``truncate`` (True); llama3's ``low_freq_factor`` and ``high_freq_factor``. A
    ``rope_theta`` entry must agree with ``base``. Checked against
    ``transformers.modeling_rope_utils`` (``tests/test_rope_reference.py``).

    Args:
        scaling: None (no scaling) or a mapping as found in a Hugging Face config's
            ``rope_scaling`` / ``rope_parameters``.
        base: rope_theta of the model, for the ``rope_theta`` consistency check.

    Returns:
        a new dict with ``rope_type`` and every parameter that type uses.
    """
    if scaling is None:
        return {"rope_type": "default"}
    if not isinstance(scaling, Mapping):
        raise TypeError(
            f"scaling must be None or a dict like a Hugging Face rope_scaling, got {type(scaling).__name__}"
        )
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    check.choice("scaling['rope_type']", rope_type, ROPE_TYPES)
    if "rope_theta" in scaling:
        theta = check.base_value("scaling['rope_theta']", scaling["rope_theta"])
        if theta != base:
            raise ValueError(
                f"scaling['rope_theta']={theta:g} disagrees with base={base:g}; pass base={theta:g}"
            )
    prf = scaling.get("partial_rotary_factor")
    if prf is not None and check.real_number("scaling['partial_rotary_factor']", prf) != 1.0:
        raise ValueError(
            f"scaling['partial_rotary_factor'] must be 1.0 (partial rotary is not supported), got {prf}"
        )
    out: dict[str, Any] = {"rope_type": rope_type}
    if rope_type == "default":
        return out

    def need(key: str) -> Any:
        if scaling.get(key) is None:
            raise ValueError(
                f"scaling of rope_type {rope_type!r} needs the key {key!r}; got keys {sorted(scaling)}"
            )
        return scaling[key]

    out["factor"] = check.factor_value("scaling['factor']", need("factor"))
    if rope_type in ("dynamic", "yarn", "llama3"):
        out["original_max_position_embeddings"] = check.positive_int(
            "scaling['original_max_position_embeddings']", need("original_max_position_embeddings")
        )
    if rope_type == "yarn":
        out["beta_fast"] = check.real_number(
            "scaling['beta_fast']", scaling.get("beta_fast") or 32.0
        )
        out["beta_slow"] = check.real_number(
            "scaling['beta_slow']", scaling.get("beta_slow") or 1.0
        )
        if not out["beta_fast"] > out["beta_slow"] > 0:
            raise ValueError(
                f"scaling needs beta_fast > beta_slow > 0, got beta_fast={out['beta_fast']}, beta_slow={out['beta_slow']}"
            )
        out["truncate"] = check.boolean("scaling['truncate']", scaling.get("truncate", True))
        af = scaling.get("attention_factor")
        mscale, mscale_all_dim = scaling.get("mscale"), scaling.get("mscale_all_dim")
        for key, value in (("mscale", mscale), ("mscale_all_dim", mscale_all_dim)):
            if value is not None and check.real_number(f"scaling['{key}']", value) < 0:
                raise ValueError(
                    f"scaling['{key}'] must be >= 0 (0 or absent: not used), got {value}"
                )
        if af is None:
            if mscale and mscale_all_dim:
                af = _yarn_mscale(out["factor"], mscale) / _yarn_mscale(
                    out["factor"], mscale_all_dim
                )
            else:
                af = _yarn_mscale(out["factor"])
        out["attention_factor"] = check.real_number("scaling['attention_factor']", af)
        if out["attention_factor"] <= 0:
            raise ValueError(
                f"scaling['attention_factor'] must be > 0 (it multiplies cos and sin), got {af}"
            )
    if rope_type == "llama3":
        low = check.real_number("scaling['low_freq_factor']", need("low_freq_factor"))
        high = check.real_number("scaling['high_freq_factor']", need("high_freq_factor"))
        if not high > low > 0:
            raise ValueError(
                f"scaling needs high_freq_factor > low_freq_factor > 0, got low={low}, high={high}"
            )
        out["low_freq_factor"], out["high_freq_factor"] = low, high
    return out


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature sqrt(1/t) = 0.1 * ln(s) + 1 (Peng et al. 2023, Eq. 22)."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def rope_attention_factor(scaling: Mapping[str, Any] | None) -> float:
    """The factor by which a scaling method multiplies cos and sin (so scores scale by its square).

    Args:
        scaling: None or a scaling dict (see :func:`parse_scaling`).

    Returns:
        1.0 for every method except YaRN, where it is ``0.1 * ln(factor) + 1`` unless the
        dictionary gives ``attention_factor`` (or ``mscale`` / ``mscale_all_dim``).
    """
    return float(parse_scaling(scaling, base=_base_of(scaling)).get("attention_factor", 1.0))


def _base_of(scaling: Mapping[str, Any] | None) -> float:
    if isinstance(scaling, Mapping) and "rope_theta" in scaling:
        return check.base_value("scaling['rope_theta']", scaling["rope_theta"])
    return 10000.0


def rope_frequencies(
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: Mapping[str, Any] | None = None,
    seq_len: int | None = None,
) -> torch.Tensor:
    """Inverse frequencies theta_i, i = 0 .. head_dim/2 - 1, after optional scaling.

    Default: theta_i = base**(-2i/head_dim). With ``scaling``:

    * ``linear``: theta_i / factor (position interpolation, Chen et al. 2023).
    * ``ntk``: base replaced by base * factor**(d/(d-2)) (NTK-aware scaling).
    * ``dynamic``: base replaced by base * (factor*L/L0 - (factor-1))**(d/(d-2)) with
      L = max(seq_len, L0), L0 = original_max_position_embeddings (Hugging Face's dynamic NTK).
    * ``yarn``: per-frequency blend of theta_i and theta_i/factor with a linear ramp between
      the dims that make beta_fast and beta_slow rotations over L0 (Peng et al. 2023, Eq. 18-20).
    * ``llama3``: wavelengths shorter than L0/high_freq_factor kept, longer than
      L0/low_freq_factor divided by factor, smoothly interpolated between (Llama 3.1).

    Args:
        head_dim: per-head width, positive and even.
        base: rope_theta, finite and > 1.
        scaling: None or a dict (see :func:`parse_scaling`).
        seq_len: current sequence length, used only by ``dynamic`` (default: L0, no change).

    Returns:
        float64 tensor of shape ``(head_dim // 2,)``.
    """
    d = check.even_int("head_dim", head_dim)
    base = check.base_value("base", base)
    cfg = parse_scaling(scaling, base=base)
    kind = cfg["rope_type"]
    if seq_len is not None:
        seq_len = check.positive_int("seq_len", seq_len)
    if kind == "ntk":
        if d == 2:
            raise ValueError(
                "head_dim must be > 2 for ntk scaling (the exponent is d/(d-2)), got 2"
            )
        base = base * cfg["factor"] ** (d / (d - 2))
    elif kind == "dynamic":
        if d == 2:
            raise ValueError(
                "head_dim must be > 2 for dynamic scaling (the exponent is d/(d-2)), got 2"
            )
        l0 = cfg["original_max_position_embeddings"]
        length = l0 if seq_len is None else max(seq_len, l0)
        base = base * (cfg["factor"] * length / l0 - (cfg["factor"] - 1)) ** (d / (d - 2))
    two_i = torch.arange(0, d, 2, dtype=torch.float64)  # (d/2,)
    inv_freq = torch.pow(torch.tensor(base, dtype=torch.float64), -two_i / d)  # (d/2,)
    factor = cfg.get("factor", 1.0)
    if kind == "linear":
        inv_freq = inv_freq / factor
    elif kind == "yarn":
        l0 = cfg["original_max_position_embeddings"]

        def correction_dim(n_rotations: float) -> float:
            # the (fractional) dimension index whose wavelength makes n_rotations turns over l0
            return d * math.log(l0 / (n_rotations * 2 * math.pi)) / (2 * math.log(base))

        low, high = correction_dim(cfg["beta_fast"]), correction_dim(cfg["beta_slow"])
        if cfg["truncate"]:
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        if low == high:
            high += 0.001  # avoid a zero-width ramp
        ramp = ((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        keep = 1 - ramp  # 1: extrapolate (keep theta_i), 0: interpolate (theta_i / factor)
        inv_freq = inv_freq / factor * (1 - keep) + inv_freq * keep
    elif kind == "llama3":
        l0 = cfg["original_max_position_embeddings"]
        low_wavelen = l0 / cfg["low_freq_factor"]
        high_wavelen = l0 / cfg["high_freq_factor"]
        wavelen = 2 * math.pi / inv_freq
        smooth = (l0 / wavelen - cfg["low_freq_factor"]) / (
            cfg["high_freq_factor"] - cfg["low_freq_factor"]
        )
        smoothed = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        inv_freq = torch.where(
            wavelen < high_wavelen,
            inv_freq,
            torch.where(wavelen > low_wavelen, inv_freq / factor, smoothed),
        )
    return inv_freq


def rope_angles(
    positions: torch.Tensor | int | float | list,
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: Mapping[str, Any] | None = None,
    seq_len: int | None = None,
) -> torch.Tensor:
    """Rotation angles m * theta_i in float64.

    Args:
        positions: finite real positions, any shape ``P`` (integers are exact up to 2**53).
        head_dim, base, scaling: as in :func:`rope_frequencies`.
        seq_len: for ``dynamic`` scaling; defaults to max(positions) + 1, as Hugging Face does.

    Returns:
        float64 tensor of shape ``P + (head_dim // 2,)``, on the device of ``positions``.
    """
    pos = check.as_positions("positions", positions)  # P, float64
    cfg = parse_scaling(scaling, base=check.base_value("base", base))
    if cfg["rope_type"] == "dynamic" and seq_len is None and pos.numel():
        seq_len = max(int(math.floor(pos.max().item())) + 1, 1)
    inv_freq = rope_frequencies(head_dim, base=base, scaling=scaling, seq_len=seq_len)
    return pos.unsqueeze(-1) * inv_freq.to(pos.device)  # P + (d/2,)


def rope_cos_sin(
    positions: torch.Tensor | int | float | list,
    head_dim: int,
    *,
    base: float = 10000.0,
    scaling: Mapping[str, Any] | None = None,
    layout: str = "half",
    dtype: torch.dtype = torch.float32,
    seq_len: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables for :func:`apply_rope`, computed in float64 and rounded once.

    With ``layout="half"`` they equal Hugging Face's ``cat(freqs, freqs)`` tables; with
    ``"interleaved"`` each frequency is repeated on dims (2i, 2i+1). For YaRN both are
    multiplied by the attention factor (:func:`rope_attention_factor`), as Hugging Face does.

    Args:
        positions: any shape ``P``; a 1-D ``arange(s)`` is the usual case.
        head_dim, base, scaling, seq_len: as in :func:`rope_angles`.
        layout: ``"half"`` or ``"interleaved"``.
        dtype: floating dtype of the tables.

    Returns:
        ``(cos, sin)``, each of shape ``P + (head_dim,)``, on the device of ``positions``.
    """
    check.choice("layout", layout, LAYOUTS)
    dtype = check.float_dtype("dtype", dtype)
    device = positions.device if isinstance(positions, torch.Tensor) else None
    angles = rope_angles(
        positions, head_dim, base=base, scaling=scaling, seq_len=seq_len
    )  # P + (d/2,)
    scale = parse_scaling(scaling, base=base).get("attention_factor", 1.0)
    cos, sin = torch.cos(angles) * scale, torch.sin(angles) * scale
    cos, sin = round_once(cos, dtype), round_once(sin, dtype)
    if layout == "half":
        cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)  # P + (d,)
    else:
        cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)  # P + (d,)
    return cos.to(device=device), sin.to(device=device)


# --------------------------------------------------------------------------- applying


def rotate_pairs(x: torch.Tensor, *, layout: str = "half") -> torch.Tensor:
    """The 90-degree turn of every pair: (a, b) -> (-b, a).

    For ``layout="half"`` this is Hugging Face's ``rotate_half``; for ``"interleaved"`` it
    acts on (x[2i], x[2i+1]). ``apply_rope(x) == x * cos + rotate_pairs(x) * sin``.

    Args:
        x: ``(..., d)`` tensor with an even last dimension d.
        layout: ``"half"`` (pairs (i, i + d/2)) or ``"interleaved"`` (pairs (2i, 2i + 1)).

    Returns:
        tensor of the shape and dtype of ``x``.
    """
    check.tensor("x", x, min_dim=1)
    check.choice("layout", layout, LAYOUTS)
    check.even_int("x.shape[-1]", x.shape[-1])
    half = x.shape[-1] // 2
    if layout == "half":
        return torch.cat((-x[..., half:], x[..., :half]), -1)
    pairs = x.unflatten(-1, (half, 2))  # (..., d/2, 2)
    return torch.stack((-pairs[..., 1], pairs[..., 0]), -1).flatten(-2)


def _formula(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> torch.Tensor:
    """``x * cos + rotate_pairs(x) * sin`` in the dtype of ``cos`` (the working dtype), written
    pair by pair: (x1 c1 - x2 s1, x2 c2 + x1 s2), the same values bit for bit ((-a) * b ==
    -(a * b) and u + (-w) == u - w exactly). Used with autograd, under the caller's
    torch.compile, and as the body of the fused kernel: Inductor turns this form into straight
    vector code, while a concatenation of a negated half becomes masked loads (about 2x slower).
    """
    xw = x.to(cos.dtype)
    x1, x2 = _halves(xw, layout)
    c1, c2 = _halves(cos, layout)
    s1, s2 = _halves(sin, layout)
    first, second = x1 * c1 - x2 * s1, x2 * c2 + x1 * s2
    if layout == "half":
        return torch.cat((first, second), -1)
    return torch.stack((first, second), -1).flatten(-2)


def _check_apply_args(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str) -> None:
    check.tensor("x", x, min_dim=2, floating=True)
    check.tensor("cos", cos, min_dim=1, floating=True)
    check.tensor("sin", sin, min_dim=1, floating=True)
    check.choice("layout", layout, LAYOUTS)
    d = x.shape[-1]
    check.even_int("x.shape[-1] (head_dim)", d)
    if cos.shape != sin.shape:
        raise ValueError(
            f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if cos.shape[-1] != d:
        raise ValueError(
            f"cos and sin must have last dimension head_dim={d} (the last dimension of x), got shape {tuple(cos.shape)}"
        )
    try:
        out_shape = torch.broadcast_shapes(x.shape, cos.shape)
    except RuntimeError:
        out_shape = None
    if out_shape != x.shape:
        raise ValueError(
            f"cos and sin of shape {tuple(cos.shape)} must broadcast to x of shape {tuple(x.shape)} "
            f"(..., seq, head_dim); for per-batch positions give them shape (b, 1, s, d)"
        )
    if cos.device != x.device or sin.device != x.device:
        raise ValueError(
            f"cos, sin and x must be on one device, got {cos.device}, {sin.device} and {x.device}"
        )


def _halves(t: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Views of the first and second element of every pair."""
    if layout == "half":
        h = t.shape[-1] // 2
        return t[..., :h], t[..., h:]
    return t[..., 0::2], t[..., 1::2]


def _swap_sin(sin: torch.Tensor, layout: str) -> torch.Tensor:
    """The table ``sin_swapped`` for which ``x * sin_swapped`` is ``rotate_pairs(x) * sin`` with
    the two elements of every pair exchanged: (sin of the second, -sin of the first)."""
    swapped = torch.empty(sin.shape, dtype=sin.dtype, device=sin.device)
    w1, w2 = _halves(swapped, layout)
    s1, s2 = _halves(sin, layout)
    w1.copy_(s2)
    torch.neg(s1, out=w2)
    return swapped


def _rotate_into(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin_swapped: torch.Tensor,
    out: torch.Tensor,
    tmp: torch.Tensor,
    layout: str,
) -> None:
    """out = x * cos + rotate_pairs(x) * sin, with the roundings of that formula bit for bit.

    ``sin_swapped`` comes from :func:`_swap_sin`; ``tmp`` is scratch of the shape of ``x``, and
    ``out`` may be ``x`` itself. Every product and sum is its own operation, rounded once as in
    the formula ((-a) * b == -(a * b) exactly); ``addcmul`` is avoided because it may use a
    fused multiply-add, which rounds differently.
    """
    torch.mul(
        x, sin_swapped, out=tmp
    )  # pairs (x1 sin2, -x2 sin1): rotate_pairs(x) * sin, exchanged
    torch.mul(x, cos, out=out)
    o1, o2 = _halves(out, layout)
    t1, t2 = _halves(tmp, layout)
    o1.add_(t2)  # first of pair:  x1 cos - x2 sin
    o2.add_(t1)  # second of pair: x2 cos + x1 sin


class _FusedKernel:
    """The formula compiled by torch.compile into one loop: read x, write the result.

    Compiled on first use (a few seconds; Inductor keeps its own on-disk cache), with the
    leading and sequence dimensions dynamic so a new batch size or sequence length does not
    compile again; head_dim, dtype and layout are specialised (one compile each). Inductor
    compiles C++ with ``-ffp-contract=off`` by default, so every product and sum is rounded as
    in the formula and the result equals the eager path bit for bit (tested). If compiling
    fails (no C++ compiler, say), the reason is kept and auto mode stops trying.
    """

    def __init__(self) -> None:
        self.fn: Any = None
        self.error: str | None = None

    def __call__(
        self, x3: torch.Tensor, cos2: torch.Tensor, sin2: torch.Tensor, layout: str
    ) -> torch.Tensor:
        if self.fn is None:
            self.fn = torch.compile(_formula, dynamic=False, fullgraph=True)
        # fresh views, so marking dimensions dynamic leaves the caller's tensors untouched
        x3, cos2, sin2 = x3.view(x3.shape), cos2.view(cos2.shape), sin2.view(sin2.shape)
        for t, dims in ((x3, (0, 1)), (cos2, (0,)), (sin2, (0,))):
            for dim in dims:
                torch._dynamo.maybe_mark_dynamic(t, dim)
        # one compile per head_dim, dtype and layout (and per size-1 dimension, which dynamo
        # specialises): allow more of them than dynamo's default of 8 per function
        with torch.no_grad(), torch._dynamo.config.patch(recompile_limit=_FUSED_RECOMPILE_LIMIT):
            return self.fn(x3, cos2, sin2, layout)


_fused_kernel = _FusedKernel()


def apply_rope(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    layout: str = "half",
    fused: bool | None = None,
) -> torch.Tensor:
    """Rotate every pair of ``x`` by its angle: ``x * cos + rotate_pairs(x) * sin``.

    Equal (within float rounding) to Hugging Face's ``q * cos + rotate_half(q) * sin`` for
    ``layout="half"`` and to Meta's Llama ``apply_rotary_emb`` (complex multiplication) for
    ``layout="interleaved"``. Out of place; the input is not modified.

    Three ways to compute it, all giving the formula's values bit for bit (every product and
    sum rounded once, as written; tested):

    * with autograd (an input requires grad), or under ``torch.compile`` of the caller's
      model: the plain formula, so gradients flow and the compiler can fuse it with its
      neighbours;
    * the fused kernel (``fused=True``, or automatically for float32/float64 CPU tensors of at
      least 2**22 elements): the formula compiled by ``torch.compile`` into a single pass that
      reads ``x`` once and writes the result once. The first call compiles (a few seconds);
      if compiling fails, auto mode warns once and uses the eager path from then on;
    * otherwise the eager path: cache-sized chunks with ``out=`` arithmetic, so memory is
      read and written once and the intermediate passes stay in cache.

    ``benchmarks/rope_benchmark.py`` times the fused kernel and the eager path against
    ``x.clone()``. bfloat16/float16 inputs take the eager path (or the plain formula with
    autograd); they are computed in float64 and rounded to their dtype once, so the result is the
    correctly rounded value of the formula for the given tables (up to ties closer than
    float64 resolves); with float64 tables, as :class:`RotaryEmbedding` uses for such inputs,
    that is the correctly rounded exact rotation (computing in float32 and rounding again
    would miss the nearest value now and then, a double rounding).

    Args:
        x: ``(..., s, d)`` floating tensor, e.g. ``(b, h, s, d)``.
        cos, sin: tables from :func:`rope_cos_sin` with the same ``layout``, shape ``(s, d)``
            or anything that broadcasts to ``x`` (e.g. ``(b, 1, s, d)``).
        layout: ``"half"`` or ``"interleaved"``.
        fused: ``None`` (choose as above), ``True`` (the compiled kernel: float32/float64 CPU
            tensors without autograd; compile errors are raised) or ``False`` (never compile).

    Returns:
        tensor of the shape, dtype and device of ``x``.
    """
    _check_apply_args(x, cos, sin, layout)
    if fused is not None and not isinstance(fused, bool):
        raise TypeError(
            f"fused must be None, True or False, got {fused!r} of type {type(fused).__name__}"
        )
    work = torch.float64 if x.dtype in LOW_PRECISION else x.dtype
    cos, sin = cos.to(work), sin.to(work)
    needs_grad = torch.is_grad_enabled() and (
        x.requires_grad or cos.requires_grad or sin.requires_grad
    )
    if fused:
        if needs_grad:
            raise ValueError(
                "fused=True computes without autograd, but an input requires grad; "
                "use fused=None (the plain formula is used when gradients are needed)"
            )
        if x.device.type != "cpu":
            raise ValueError(
                f"fused=True is for CPU tensors, got x on {x.device}; use fused=None or False"
            )
        if x.dtype not in _FUSED_AUTO_DTYPES:
            raise ValueError(
                f"fused=True is for float32 and float64 tensors, got x of dtype {x.dtype} (bfloat16/float16 "
                "are rotated in float64 and rounded once by the eager path); use fused=None or False"
            )
    if needs_grad or torch.compiler.is_compiling():
        return round_once(_formula(x, cos, sin, layout), x.dtype)
    s, d = x.shape[-2], x.shape[-1]
    table_is_shared = cos.dim() <= 2 or all(n == 1 for n in cos.shape[:-2])
    if x.numel() == 0:  # e.g. an empty sequence: nothing to rotate, and reshape(-1, 0, d) fails
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if fused is None:
        fused = (
            _fused_kernel.error is None
            and x.device.type == "cpu"
            and x.dtype in _FUSED_AUTO_DTYPES
            and table_is_shared
            and x.numel() >= _FUSED_MIN_ELEMENTS
        )
        required = False
    else:
        required = fused
    if fused:
        if table_is_shared:
            cos2 = (
                cos.reshape(cos.shape[-2:]) if cos.dim() >= 2 else cos.reshape(1, d)
            )  # (s or 1, d)
            x3, cos3, sin3 = (
                x.reshape(-1, s, d),
                cos2.contiguous(),
                sin.reshape(cos2.shape).contiguous(),
            )
        else:  # per-batch tables: broadcast them to x's shape in memory first
            x3 = x.reshape(-1, s, d)
            cos3 = cos.expand(x.shape).reshape(-1, s, d)
            sin3 = sin.expand(x.shape).reshape(-1, s, d)
        try:
            return _fused_kernel(x3, cos3, sin3, layout).view(x.shape)
        except Exception as exc:  # noqa: BLE001 - any failure to compile means: use the eager path
            if required:
                raise RuntimeError(f"apply_rope(fused=True): torch.compile failed: {exc}") from exc
            _fused_kernel.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            warnings.warn(
                f"apply_rope: the fused kernel could not be compiled ({_fused_kernel.error}); "
                "using the eager path from now on (same values, slower)",
                RuntimeWarning,
                stacklevel=2,
            )
    return _apply_eager(x, cos, sin, layout, table_is_shared)


# If every nonzero |x| and every nonzero table entry is at least 2**-33, a nonzero exact
# x1*c - x2*s is at least 2**-125: x has an 8-bit and a float32 table a 24-bit significand, so
# each product is a multiple of 2**(e_x + e_c - 30) >= 2**-96; with float64 tables (53 bits) a
# multiple of 2**(-66 - 59) = 2**-125, and the float64 products and sum then differ from zero by
# at least one float64 ulp of numbers >= 2**-66, about 2**-118. So results stay where float32
# is normal, which round_once_into needs.
_LOW_MIN_INPUT = 2.0**-33


def _has_tiny(t: torch.Tensor, threshold: float) -> bool:
    """Whether some element satisfies 0 < |t| < threshold (a power of two, for bfloat16)."""
    if t.dtype == torch.bfloat16:  # on the bits, several times faster than bfloat16 arithmetic
        below = (127 + int(math.log2(threshold))) << 7  # bits of |threshold|
        # |t|'s bits minus one: zero becomes -1, masked to 0x7fff; 0 < |t| < threshold gives 0 .. below - 2
        magnitude = (t.view(torch.int16) & 0x7FFF).sub_(1).bitwise_and_(0x7FFF)
        return t.numel() > 0 and int(magnitude.min()) < below - 1
    a = t.abs()
    return bool(((a < threshold) & (a > 0)).any())


def _apply_eager(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, table_is_shared: bool
) -> torch.Tensor:
    """apply_rope's eager path: chunks of ``_CHUNK_ELEMENTS`` with ``out=`` arithmetic."""
    work = cos.dtype
    s, d = x.shape[-2], x.shape[-1]
    sin_sw = _swap_sin(sin, layout)  # rotate_pairs(x) * sin == x * sin_sw with each pair exchanged
    if not table_is_shared:
        out = torch.empty(x.shape, dtype=work, device=x.device)
        _rotate_into(x.to(work), cos, sin_sw, out, torch.empty_like(out), layout)
        return round_once(out, x.dtype)
    cos2 = cos.reshape(cos.shape[-2:]) if cos.dim() >= 2 else cos.reshape(1, d)  # (s or 1, d)
    sin2 = sin_sw.reshape(cos2.shape)
    xs = x.reshape(-1, s, d)  # (n, s, d); a view when x is contiguous
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    outs = out.view(-1, s, d)
    n = xs.shape[0]
    # chunk over the leading rows, and over the sequence too when one sequence is large
    low = work != x.dtype
    chunk = (
        _CHUNK_ELEMENTS_LOW if low else _CHUNK_ELEMENTS
    )  # float64 work with int64 scratch: smaller
    rows_per_chunk = max(1, chunk // max(1, s * d))
    seq_per_chunk = s if s * d <= chunk else max(1, chunk // d)
    # scratch shared by all chunks: a fresh allocation per chunk would page-fault every time
    chunk_shape = (min(n, rows_per_chunk), min(s, seq_per_chunk), d)
    tmp = torch.empty(chunk_shape, dtype=work, device=x.device)
    xwork = torch.empty(chunk_shape, dtype=work, device=x.device) if low else None
    bits = torch.empty(chunk_shape, dtype=torch.int64, device=x.device) if low else None
    # bfloat16 results below 2**-126 need round_once (see round_once_into); they cannot
    # occur unless some nonzero input or table entry is below _LOW_MIN_INPUT
    check_inputs = x.dtype == torch.bfloat16
    careful = check_inputs and (_has_tiny(cos2, _LOW_MIN_INPUT) or _has_tiny(sin2, _LOW_MIN_INPUT))
    for r0 in range(0, n, rows_per_chunk):
        for p0 in range(0, s, seq_per_chunk):
            xb = xs[r0 : r0 + rows_per_chunk, p0 : p0 + seq_per_chunk]
            ob = outs[r0 : r0 + rows_per_chunk, p0 : p0 + seq_per_chunk]
            cb = cos2 if cos2.shape[0] == 1 else cos2[p0 : p0 + seq_per_chunk]
            sb = sin2 if sin2.shape[0] == 1 else sin2[p0 : p0 + seq_per_chunk]
            tb = tmp[: xb.shape[0], : xb.shape[1]]
            if xwork is not None:  # low precision: rotate a float64 copy in place, round once
                xw = xwork[: xb.shape[0], : xb.shape[1]]
                xw.copy_(xb)
                _rotate_into(xw, cb, sb, xw, tb, layout)
                if careful or check_inputs and _has_tiny(xb, _LOW_MIN_INPUT):
                    ob.copy_(round_once(xw, x.dtype))
                else:
                    round_once_into(xw, ob, bits[: xb.shape[0], : xb.shape[1]])
            else:
                _rotate_into(xb, cb, sb, ob, tb, layout)
    return out


# --------------------------------------------------------------------------- layouts


def interleaved_to_half(head_dim: int) -> torch.Tensor:
    """Index permutation from the interleaved to the half-split layout.

    ``perm = [0, 2, 4, ..., d-2, 1, 3, ..., d-1]``: rotating ``x[..., perm]`` with
    ``layout="half"`` equals ``(x rotated with layout="interleaved")[..., perm]``. Applied to
    the output rows of W_q and W_k within each head (see :func:`permute_qk_weight`), it moves
    weights from Meta's / RoFormer's convention to Hugging Face's, which is what Hugging
    Face's Llama conversion script does.

    Args:
        head_dim: per-head width, positive and even.

    Returns:
        int64 tensor of shape ``(head_dim,)``.
    """
    d = check.even_int("head_dim", head_dim)
    return torch.cat((torch.arange(0, d, 2), torch.arange(1, d, 2)))


def half_to_interleaved(head_dim: int) -> torch.Tensor:
    """The inverse permutation of :func:`interleaved_to_half` (half-split -> interleaved).

    Args:
        head_dim: per-head width, positive and even.

    Returns:
        int64 tensor of shape ``(head_dim,)``.
    """
    return torch.argsort(interleaved_to_half(head_dim))


def permute_qk_weight(weight: torch.Tensor, n_heads: int, *, to: str = "half") -> torch.Tensor:
    """Reorder the output rows of a query or key projection so its heads use another layout.

    Args:
        weight: ``(n_heads * head_dim, d_model)`` as stored by ``nn.Linear``.
        n_heads: number of heads the rows are split into.
        to: ``"half"`` (interleaved -> half) or ``"interleaved"`` (half -> interleaved).

    Returns:
        tensor of the same shape with rows permuted within each head.
    """
    check.tensor("weight", weight, min_dim=1)
    n_heads = check.positive_int("n_heads", n_heads)
    check.choice("to", to, LAYOUTS)
    rows = weight.shape[0]
    if rows % n_heads:
        raise ValueError(f"weight.shape[0]={rows} must be divisible by n_heads={n_heads}")
    head_dim = check.even_int("head_dim (weight.shape[0] // n_heads)", rows // n_heads)
    perm = interleaved_to_half(head_dim) if to == "half" else half_to_interleaved(head_dim)
    per_head = weight.reshape(n_heads, head_dim, *weight.shape[1:])  # (h, d, ...)
    return per_head[:, perm.to(weight.device)].reshape(weight.shape)


# --------------------------------------------------------------------------- module


class RotaryEmbedding(nn.Module):
    """RoPE for query and key tensors, with a cache that grows with the sequence.

    cos/sin rows for positions 0 .. n-1 are cached in float32 for float32 inputs and in
    float64 otherwise (float64 inputs, and bfloat16/float16 ones, whose result is then the
    correctly rounded exact rotation), and regrown to the next power of two when a larger
    position arrives (positions of 2**16 and more are computed per call instead, so a
    decoding step far into a sequence does not allocate rows for every position before it),
    or rebuilt when the inputs move to another device; the cache is not a buffer, so
    ``module.to(torch.bfloat16)`` cannot round it.
    Dynamic scaling depends on the sequence length, so it is recomputed per call from
    max(positions) + 1 (as Hugging Face does); keys already in a KV cache keep the rotation
    they were given, the pitfall discussed in chapter 7.

    Args:
        head_dim: per-head width, positive and even.
        base: rope_theta.
        scaling: None or a Hugging Face-style scaling dict (see :func:`parse_scaling`).
        layout: ``"half"`` or ``"interleaved"``.
    """

    def __init__(
        self,
        head_dim: int,
        *,
        base: float = 10000.0,
        scaling: Mapping[str, Any] | None = None,
        layout: str = "half",
    ) -> None:
        super().__init__()
        self.head_dim = check.even_int("head_dim", head_dim)
        self.base = check.base_value("base", base)
        self.scaling = parse_scaling(scaling, base=self.base)
        self._scaling_arg = dict(scaling) if scaling is not None else None
        self.layout = check.choice("layout", layout, LAYOUTS)
        self.attention_factor = float(self.scaling.get("attention_factor", 1.0))
        rope_frequencies(
            self.head_dim, base=self.base, scaling=scaling
        )  # refuse bad combinations now
        self._cos: torch.Tensor | None = None
        self._sin: torch.Tensor | None = None

    def cos_sin(
        self, positions: torch.Tensor, dtype: torch.dtype, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for ``positions`` (any shape P, on any device).

        Args:
            positions: integer or real positions, shape P.
            dtype: dtype of the inputs they will rotate: float32 gets float32 tables, any
                other dtype float64 ones.
            device: where the tables go.

        Returns:
            ``(cos, sin)``, each of shape P + (head_dim,).
        """
        table_dtype = torch.float32 if dtype == torch.float32 else torch.float64
        integral = not positions.is_floating_point() or bool((positions == positions.round()).all())
        if (
            self.scaling["rope_type"] == "dynamic"
            or not integral
            or positions.numel() == 0
            or positions.min() < 0
            or positions.max() >= _CACHE_MAX_POSITIONS
        ):
            return rope_cos_sin(
                positions.to(device),
                self.head_dim,
                base=self.base,
                scaling=self._scaling_arg,
                layout=self.layout,
                dtype=table_dtype,
            )
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
            grid = torch.arange(size, device=device)
            self._cos, self._sin = rope_cos_sin(
                grid,
                self.head_dim,
                base=self.base,
                scaling=self._scaling_arg,
                layout=self.layout,
                dtype=table_dtype,
            )
        idx = positions.to(device=device, dtype=torch.long)
        assert self._cos is not None and self._sin is not None
        return self._cos[idx], self._sin[idx]

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
            positions: None (positions 0 .. s-1), an int offset (positions offset .. offset+s-1,
                for decoding after a KV cache), or a tensor of shape ``(s,)`` or ``(b, s)``.

        Returns:
            ``(q_rotated, k_rotated)`` with the shapes and dtypes of ``q`` and ``k``.
        """
        check.tensor("q", q, min_dim=2, floating=True)
        check.tensor("k", k, min_dim=2, floating=True)
        for name, t in (("q", q), ("k", k)):
            if t.shape[-1] != self.head_dim:
                raise ValueError(
                    f"{name} must have last dimension head_dim={self.head_dim}, got shape {tuple(t.shape)}"
                )
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                f"q and k must have the same sequence length, got {q.shape[-2]} and {k.shape[-2]}; "
                f"rotate cached keys when they are first computed"
            )
        s = q.shape[-2]
        if positions is None or isinstance(positions, int) and not isinstance(positions, bool):
            offset = check.non_negative_int(
                "positions (offset)", 0 if positions is None else positions
            )
            pos = torch.arange(offset, offset + s, device=q.device)
        else:
            check.tensor("positions", positions, min_dim=1)
            if positions.dtype == torch.bool or positions.is_complex():
                raise TypeError(
                    f"positions must hold integers or real numbers, got dtype {positions.dtype}"
                )
            check.finite("positions", positions)
            if positions.shape[-1] != s or positions.dim() > 2:
                raise ValueError(
                    f"positions must have shape (s,) or (b, s) with s={s}, got {tuple(positions.shape)}"
                )
            if positions.dim() == 2:
                for name, t in (("q", q), ("k", k)):
                    batch = t.shape[0] if t.dim() >= 3 else 1
                    if positions.shape[0] not in (1, batch):
                        raise ValueError(
                            f"positions of shape {tuple(positions.shape)} give {positions.shape[0]} sequences, "
                            f"but {name} of shape {tuple(t.shape)} has batch size {batch} (its first dimension)"
                        )
            pos = positions
        dtype = torch.float32 if q.dtype == k.dtype == torch.float32 else torch.float64
        cos, sin = self.cos_sin(pos, dtype, q.device)  # pos.shape + (d,)
        if pos.dim() == 2 and q.dim() >= 4:  # (b, s, d) -> (b, 1, s, d): broadcast over heads
            cos, sin = cos.unsqueeze(-3), sin.unsqueeze(-3)
        return apply_rope(q, cos, sin, layout=self.layout), apply_rope(
            k, cos, sin, layout=self.layout
        )

    def extra_repr(self) -> str:
        fields = [
            f"head_dim={self.head_dim}",
            f"base={self.base:g}",
            f"layout={self.layout!r}",
            f"scaling={self.scaling}",
        ]
        return _format.extra_repr(self, fields)
