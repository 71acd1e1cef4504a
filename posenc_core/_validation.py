"""Argument checks shared by every public function (imported as ``check``).

Validate once: a public entry point checks each of its arguments with one of these, always
called as ``check.<kind>(name, value, ...)``, and the internal helpers it calls trust it.
Each check returns the value (converted where that is its job, e.g. an integer to ``int``)
or raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, wrong value)
with a message that names the argument, the value received and what is allowed, so that a
mistake surfaces at the call site rather than deep inside torch.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping

import torch

_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def positive_int(name: str, value: object) -> int:
    """Return ``value`` as an int, requiring an integer greater than zero."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


def non_negative_int(name: str, value: object) -> int:
    """Return ``value`` as an int, requiring an integer >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be a non-negative integer, got {type(value).__name__} {value!r}"
        )
    if value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value}")
    return int(value)


def even_int(name: str, value: object) -> int:
    """Return ``value`` as an int, requiring a positive even integer (dimensions come in pairs)."""
    value = positive_int(name, value)
    if value % 2:
        raise ValueError(
            f"{name} must be a positive even integer because dimensions are used in (sin, cos) "
            f"pairs, got {value}"
        )
    return value


def real_number(name: str, value: object) -> float:
    """Return ``value`` as a finite float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def base_value(name: str, value: object) -> float:
    """Return a frequency base as a float, requiring a finite number greater than 1."""
    value = real_number(name, value)
    if value <= 1.0:
        raise ValueError(
            f"{name} must be a finite number greater than 1, got {value} "
            f"(frequencies are base**(-2i/d))"
        )
    return value


def factor_value(name: str, value: object) -> float:
    """Return a context-extension factor, requiring a finite number >= 1."""
    value = real_number(name, value)
    if value < 1.0:
        raise ValueError(
            f"{name} must be a finite number >= 1 (a context-extension factor), got {value}"
        )
    return value


def choice(name: str, value: object, allowed: Iterable[str | float]) -> str | float:
    """Return the option of ``allowed`` that ``value`` equals.

    Options are strings (matched by a string equal to them) or real numbers (matched by an
    equal real number, not a bool: ``500000.0`` matches ``500000``, which is returned).
    """
    allowed = tuple(allowed)
    for option in allowed:
        if isinstance(option, str):
            if isinstance(value, str) and value == option:
                return option
        elif _is_real(value) and value == option:
            return option
    raise ValueError(f"{name} must be one of {', '.join(repr(a) for a in allowed)}; got {value!r}")


LAYOUTS = ("half", "interleaved")
"""The two pair layouts, for RoPE and the sinusoidal table alike: ``"half"`` pairs dims
(j, j + d/2) (Hugging Face's ``rotate_half``; for the table, all sines then all cosines),
``"interleaved"`` pairs dims (2i, 2i + 1) (RoFormer, Meta's Llama; the paper's table)."""


def layout(name: str, value: object) -> str:
    """Return ``value`` if it is one of :data:`LAYOUTS`.

    ``"concat"``, the sinusoidal table's old name for all sines then all cosines, is refused
    with a message that gives its new name, ``"half"``: one vocabulary, not two aliases.
    """
    if isinstance(value, str) and value == "concat":
        raise ValueError(
            f"{name} 'concat' is now called 'half' (all sines, then all cosines: dims j and "
            f"j + d/2 form a pair, as in RoPE's half layout); pass {name}='half'. {name} must "
            f"be one of {', '.join(repr(a) for a in LAYOUTS)}"
        )
    return choice(name, value, LAYOUTS)


def int_in_range(name: str, value: object, lo: int, hi: int | None = None) -> int:
    """Return ``value`` as an int, requiring an integer with ``lo <= value`` (``<= hi`` too,
    unless ``hi`` is None)."""
    allowed = f"an integer >= {lo}" if hi is None else f"an integer in {lo}..{hi}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {allowed}, got {type(value).__name__} {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return int(value)


MAX_RESULT_BYTES = 2**32
"""The most memory, 4 GiB, a public function may allocate for one result, estimated from its
size arguments before anything is allocated (:func:`result_size`); a larger request raises a
ValueError naming the arguments, instead of allocating for minutes or being killed for lack of
memory. Counted at working precision: a table computed in float64 and then rounded counts 8
bytes per element whatever dtype it is returned in. It admits, for example, cos and sin tables
for 2**20 positions x head_dim 128 in float64 (2 GiB) and a 2**18 x 2048 float64 sinusoidal
table (4 GiB); the peak memory of a call is a small multiple of its estimate (temporaries).
Read at every call, so it can be raised (or lowered) by assigning to it."""

MAX_WIDTH = 2**20
"""The largest width (d_model, head_dim, rotary_dim) any function accepts: 1048576 dims, far
beyond any model's, and small enough that a per-dimension vector (the frequencies) or a
Python loop over the pairs stays cheap."""

MAX_HEADS = 2**16
"""The largest number of attention heads (ALiBi, T5's bias, multi-head attention): 65536. ALiBi's
slopes are built in a Python loop over the heads (the reference ``get_slopes``), so their count
is bounded, not only the bytes of the result."""


def _amount(limit: int) -> str:
    """``2**k = n`` for a power of two from 2**10 on, else ``n``."""
    if limit >= 1024 and limit & (limit - 1) == 0:
        return f"2**{limit.bit_length() - 1} = {limit}"
    return str(limit)


def format_bytes(n: int) -> str:
    """A byte count for a message: ``512 bytes``, ``1.5 KiB``, ... ``8.0 TiB``."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")
    if n < 1024:
        return f"{n} bytes"
    step = min((n.bit_length() - 1) // 10, len(units) - 1)
    if n >= 1024 ** (len(units) + 20):  # too large for a float: give the order of magnitude
        return f"more than 10**{len(str(n)) - 1} bytes"
    value = n / 1024**step
    return f"{value:.1f} {units[step]}" if value < 1024 else f"{value:.3g} {units[step]}"


def size(name: str, value: object, limit: int, unit: str, *, where: str, why: str = "") -> int:
    """Return ``value`` as an int, requiring a positive integer at most ``limit``.

    The ValueError for a value above the limit reads ``"<where>: <name>=<value> is too large:
    at most <limit> <unit> (<why>)"``.
    """
    value = positive_int(name, value)
    if value > limit:
        raise ValueError(
            f"{where}: {name}={value} is too large: at most {_amount(limit)} {unit}"
            + (f" ({why})" if why else "")
        )
    return value


def width(name: str, value: object, *, where: str, even: bool = True) -> int:
    """Return a width (d_model, head_dim, ...) as an int: a positive integer, even unless
    ``even=False`` (dimensions used in pairs), at most :data:`MAX_WIDTH`."""
    value = even_int(name, value) if even else positive_int(name, value)
    return size(name, value, MAX_WIDTH, "dims", where=where, why="MAX_WIDTH")


def position_count(name: str, value: object, *, where: str) -> int:
    """Return a positive number of positions (a sequence length, a context length, a distance)
    as an int, at most 2**53: beyond it positions are integers float64 does not hold exactly."""
    return size(
        name,
        value,
        MAX_EXACT_POSITION,
        "positions",
        where=where,
        why="the integers float64 holds exactly, which positions are converted to",
    )


def result_size(
    where: str,
    what: str,
    sizes: Mapping[str, object] | Iterable[tuple[str, object]],
    n_elements: int,
    element_bytes: int = 8,
    *,
    precision: str = "float64 working precision",
    advice: str = "",
) -> int:
    """Refuse a result of ``n_elements * element_bytes`` bytes above :data:`MAX_RESULT_BYTES`,
    before anything is allocated; return the estimate.

    Args:
        where: the public function (or class) the request came to, for the message.
        what: what would be built, e.g. ``"the table"``.
        sizes: the arguments (or shapes) that fix its size, ``{"n_positions": n, ...}`` or
            ``[("s", s), ("s", s)]``, named in the message with their values.
        n_elements: the number of elements (Python ints, so no overflow).
        element_bytes: bytes per element at working precision (8 for float64 and int64).
        precision: what ``element_bytes`` counts, for the message.
        advice: how to get the result anyway (in chunks, say), appended to the message.
    """
    need = n_elements * element_bytes
    if need > MAX_RESULT_BYTES:
        pairs = sizes.items() if isinstance(sizes, Mapping) else sizes
        dims = " x ".join(f"{name}={value}" for name, value in pairs)
        raise ValueError(
            f"{where}: {what} for {dims} would need {format_bytes(need)} ({precision}); at most "
            f"{format_bytes(MAX_RESULT_BYTES)} (MAX_RESULT_BYTES) is allowed"
            + (f"; {advice}" if advice else "")
        )
    return need


def real_in_range(name: str, value: object, lo: float, hi: float, *, rel_tol: float = 0.0) -> float:
    """Return ``value`` as a float in ``[lo, hi]``, for positive bounds ``0 < lo <= hi``.

    A value outside by at most a relative ``rel_tol`` (the rounding of a slider's ``b**x``,
    say) is accepted and clipped to the bound.
    """
    allowed = f"a real number in [{lo:g}, {hi:g}]"
    if not _is_real(value):
        raise TypeError(f"{name} must be {allowed}, got {type(value).__name__} {value!r}")
    value = float(value)
    if not (math.isfinite(value) and lo * (1 - rel_tol) <= value <= hi * (1 + rel_tol)):
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return min(max(value, lo), hi)


def _is_real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def boolean(name: str, value: object) -> bool:
    """Return ``value`` if it is a bool (``numpy.bool_`` too): not 0/1, not a string."""
    if isinstance(value, bool):
        return value
    if type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_"):
        return bool(value)  # numpy.bool_
    raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


def device_value(name: str, value: object) -> torch.device | None:
    """Return ``value`` as a torch.device (None stays None), refusing what torch cannot parse
    and a device this process cannot use.

    ``"cpu"`` and ``"meta"`` (shapes without data) are always available; ``"cuda"`` needs
    ``torch.cuda.is_available()`` and an index below ``torch.cuda.device_count()``, ``"mps"``
    ``torch.backends.mps.is_available()`` (index 0 only); another type needs its torch module's
    ``is_available()`` (``torch.xpu``, ...) or, without one, an empty tensor to be creatable
    there. The ValueError names the device and lists the available ones.
    """
    if value is None:
        return value
    if isinstance(value, torch.device):
        device = value
    elif not isinstance(value, (str, int)) or isinstance(value, bool):
        raise TypeError(
            f"{name} must be a torch.device, a string such as 'cpu' or 'cuda:0', or None; "
            f"got {type(value).__name__} {value!r}"
        )
    else:
        try:
            device = torch.device(value)
        except RuntimeError as exc:
            raise ValueError(
                f"{name} must name a device such as 'cpu' or 'cuda:0', got {value!r} ({exc})"
            ) from None
    why = _unavailable(device)
    if why is not None:
        raise ValueError(
            f"{name}={value!r} is not available in this process: {why}; available devices: "
            f"{', '.join(repr(d) for d in available_devices())}"
        )
    return device


def available_devices() -> list[str]:
    """The devices this process can use: ``"cpu"``, every CUDA device, ``"mps"`` and every XPU
    device when available, and ``"meta"``."""
    found = ["cpu"]
    if torch.cuda.is_available():
        found += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if torch.backends.mps.is_available():
        found.append("mps")
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and _call(xpu, "is_available"):
        found += [f"xpu:{i}" for i in range(_call(xpu, "device_count") or 0)]
    return found + ["meta"]


def _call(module: object, function: str) -> object:
    """``module.function()``, or None if it is missing or fails."""
    try:
        return getattr(module, function)()
    except Exception:  # a backend's probe may raise anything; absent means unavailable
        return None


def _unavailable(device: torch.device) -> str | None:
    """Why ``device`` cannot be used here, or None if it can."""
    kind, index = device.type, device.index
    if kind in ("cpu", "meta"):
        return None
    if kind == "cuda":
        if not torch.cuda.is_available():
            return "torch.cuda.is_available() is False (no CUDA build or no GPU)"
        count = torch.cuda.device_count()
        if index is not None and index >= count:
            return f"CUDA device index {index} is not below torch.cuda.device_count() = {count}"
        return None
    if kind == "mps":
        if not torch.backends.mps.is_available():
            return "torch.backends.mps.is_available() is False"
        if index not in (None, 0):
            return f"there is one MPS device, index 0, not {index}"
        return None
    module = getattr(torch, kind, None)
    if module is not None and hasattr(module, "is_available"):
        if not _call(module, "is_available"):
            return f"torch.{kind}.is_available() is False"
        count = _call(module, "device_count")
        if index is not None and isinstance(count, int) and index >= count:
            return f"{kind} device index {index} is not below torch.{kind}.device_count() = {count}"
        return None
    try:  # a backend with no availability check of its own (xla, ...): try an empty tensor
        torch.empty(0, device=device)
    except Exception as exc:  # torch raises RuntimeError, NotImplementedError, AssertionError
        return f"torch cannot create a tensor there ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def float_dtype(name: str, value: object) -> torch.dtype:
    """Return ``value`` if it is a real floating-point torch dtype."""
    if not isinstance(value, torch.dtype):
        raise TypeError(f"{name} must be a torch.dtype, got {type(value).__name__} {value!r}")
    if value not in _FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be a real floating-point dtype (float16, bfloat16, float32, float64), "
            f"got {value}"
        )
    return value


def tensor(name: str, value: object, *, min_dim: int = 0, floating: bool = False) -> torch.Tensor:
    """Check that ``value`` is a strided (dense) tensor with at least ``min_dim`` dimensions."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.layout != torch.strided:
        raise TypeError(
            f"{name} must be a strided (dense) tensor, got layout {value.layout}; "
            "convert it with .to_dense() first"
        )
    if value.dim() < min_dim:
        raise ValueError(
            f"{name} must have at least {min_dim} dimensions, got shape {tuple(value.shape)}"
        )
    if floating and value.dtype not in _FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be a real floating-point tensor (float16, bfloat16, float32, float64), "
            f"got dtype {value.dtype}"
        )
    return value


def finite(name: str, value: torch.Tensor) -> torch.Tensor:
    """Check that a tensor holds no NaN or infinity."""
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        bad = value[~torch.isfinite(value)].flatten()[0].item()
        raise ValueError(f"{name} must be finite, but it contains {bad}")
    return value


MAX_EXACT_POSITION = 2**53
"""The largest integer position (in magnitude) that float64 holds exactly; angles are built
from float64 positions, so integer positions beyond it are refused rather than rounded."""


def integer_positions_exact(name: str, positions: torch.Tensor) -> torch.Tensor:
    """Check that integer positions lie in [-2**53, 2**53], where float64 holds them exactly."""
    if not positions.is_floating_point() and positions.numel() > 0:
        low, high = int(positions.min()), int(positions.max())
        bad = high if high > MAX_EXACT_POSITION else low
        if max(high, -low) > MAX_EXACT_POSITION:
            raise ValueError(
                f"{name} must lie in [-2**53, 2**53] (integers float64 holds exactly, which the "
                f"angles are computed from), got {bad}"
            )
    return positions


def position_offset(name: str, offset: object, length: int) -> int:
    """Return an int offset >= 0 for ``length`` consecutive positions offset .. offset +
    length - 1, requiring the last one to be at most 2**53 (float64 holds it exactly)."""
    offset = non_negative_int(name, offset)
    if offset + max(length, 1) - 1 > MAX_EXACT_POSITION:
        raise ValueError(
            f"{name} must be an integer >= 0 with offset + s - 1 <= 2**53 (the positions are "
            f"converted to float64, which holds integers exactly only up to 2**53), got "
            f"offset {offset} with s = {length}"
        )
    return offset


def as_positions(name: str, positions: object, device: torch.device | None = None) -> torch.Tensor:
    """Turn positions (tensor, sequence or int) into a float64 tensor, checking they are finite.

    Integer positions up to 2**53 in magnitude convert to float64 exactly, so angles built from
    the result carry no error from the positions themselves; larger integers are refused
    (:func:`integer_positions_exact`).
    """
    if isinstance(positions, bool):
        raise TypeError(f"{name} must be a tensor, sequence or number of positions, got bool")
    if isinstance(positions, torch.Tensor):
        if positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"{name} must hold real numbers, got dtype {positions.dtype}")
        finite(name, positions)
        integer_positions_exact(name, positions)
        out = positions.detach()
        if device is not None:
            out = out.to(device)
    else:
        try:
            out = torch.as_tensor(positions, device=device)
            if out.is_floating_point():  # Python floats: keep all 53 bits, not torch's float32
                out = torch.as_tensor(positions, dtype=torch.float64, device=device)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"{name} must be a tensor, sequence or number of positions, got {positions!r}"
            ) from err
        if out.dtype == torch.bool or out.is_complex():
            raise TypeError(f"{name} must hold real numbers, got {positions!r}")
        finite(name, out)
        integer_positions_exact(name, out)
    if out.device.type == "mps":  # no float64 on Apple GPUs: compute on the CPU, move back later
        out = out.cpu()
    return out.to(torch.float64)


def query_key_pair(
    q: object, k: object, head_dim: int, *, unequal_lengths: str
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Check the queries and keys a rotation acts on; return ``(q, k, s)``.

    Both must be floating tensors of at least 2 dims whose last dimension is ``head_dim``,
    with one sequence length ``s`` (dim -2) and on one device. ``unequal_lengths`` ends the
    message for unequal lengths: what the caller should do instead.
    """
    q = tensor("q", q, min_dim=2, floating=True)
    k = tensor("k", k, min_dim=2, floating=True)
    for name, t in (("q", q), ("k", k)):
        if t.shape[-1] != head_dim:
            raise ValueError(
                f"{name} must have last dimension head_dim={head_dim}, got shape {tuple(t.shape)}"
            )
    s = q.shape[-2]
    if k.shape[-2] != s:
        raise ValueError(
            f"q and k must have the same sequence length, got {s} and {k.shape[-2]}; "
            f"{unequal_lengths}"
        )
    if k.device != q.device:
        raise ValueError(f"q and k must be on one device, got {q.device} and {k.device}")
    return q, k, s
