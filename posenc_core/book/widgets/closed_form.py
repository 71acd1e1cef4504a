"""The explorers of closed-form quantities: a table of sines, a rotation, the base bound, RoPE's
decay, a scaled frequency spectrum and a 2-D score grid, each computed with posenc_core.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from posenc_core import _validation as check
from posenc_core.analysis import rope_decay_bound, rope_score_vs_distance, sinusoidal_similarity
from posenc_core.book.figures import explorer_frames
from posenc_core.book.widgets.explorer import SLIDER_TOL, Data, Explorer, Param
from posenc_core.rope import rope_frequencies
from posenc_core.rotation import shift_matrix
from posenc_core.sinusoidal import (
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_table,
    sinusoidal_wavelengths,
)

__all__ = [
    "BASE_GRID",
    "SCALING_METHODS",
    "base_explorer",
    "patch_score_explorer",
    "rope_decay_explorer",
    "rope_scaling_explorer",
    "scaling_setup",
    "sinusoidal_explorer",
    "unit_circle_explorer",
]

# --------------------------------------------------------------------------- explorers


def sinusoidal_explorer(
    *, n_positions: int = 100, base: float = 10000.0, mode: str = "auto"
) -> Explorer:
    """The sinusoidal table as a heatmap, with one position's row (its fingerprint) outlined
    and plotted underneath.

    Controls:
        ``d_model``: the width. Static grid 32, 64, 128, 256; live 16, 32, 64, 128, 256, 512.
        ``position``: the highlighted row. Static grid 0, 5, 10, ..., 95 (every 5th row of
        ``n_positions`` = 100; in general ``range(0, n_positions, max(1, n_positions // 20))``);
        live every row 0 .. n_positions - 1.
        Defaults: d_model = 128, position = 40 (the last grid row at or below 40).

    Data: ``table`` (n_positions, d_model), ``fingerprint`` (d_model,) = ``table[position]``,
    from :func:`~posenc_core.sinusoidal.sinusoidal_table` in float64.

    Args:
        n_positions: rows of the table, an integer >= 2.
        base: frequency base, finite and > 1.
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see
            :func:`~posenc_core.book.widgets.explorer.resolve_mode`).

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"sinusoidal"``.
    """
    n = check.int_in_range("n_positions", n_positions, 2)
    base = check.base_value("base", base)
    step = max(1, n // 20)
    grid = tuple(range(0, n, step))
    default = max(p for p in grid if p <= min(40, n - 1))
    params = [
        Param(
            "d_model", "d_model", (32, 64, 128, 256), 128, ("select", (16, 32, 64, 128, 256, 512))
        ),
        Param("position", "position", grid, default, ("int", 0, n - 1)),
    ]

    def compute(v: dict) -> Data:
        table = sinusoidal_table(n, v["d_model"], base=base, dtype=torch.float64).numpy()
        return {"table": table, "fingerprint": table[v["position"]].copy()}

    def draw(data: Data, v: dict, fig: Any) -> Any:
        title = f"Sinusoidal encoding: {n} positions × {v['d_model']} dimensions, base {base:g}"
        return explorer_frames.fingerprint_figure(
            data["table"], v["position"], title=title, fig=fig
        )

    def alt(v: dict, data: Data) -> str:
        return (
            f"Heatmap of the sinusoidal encoding, {n} positions by {v['d_model']} dimensions, red "
            "for +1 and blue for -1, fast stripes on the left and nearly constant columns on the "
            f"right; the row of position {v['position']} is outlined and plotted underneath as a "
            "line"
        )

    return Explorer("sinusoidal", params, compute, draw, alt, mode=mode)


BASE_GRID = (10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000, 500000, 1000000, 10000000)


def base_explorer(
    *, d_model: int = 128, n_positions: int = 100, max_offset: int = 1000, mode: str = "auto"
) -> Explorer:
    """Three views of the base b of the sinusoidal encoding: the table (heatmap), the
    wavelength 2*pi/omega_i of every pair (log scale), and the similarity s(k) of two
    encodings k positions apart, each compared with base 10000 (dashed grey).

    Controls:
        ``base`` (log scale). Static grid 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000,
        500000, 1000000, 10000000; live 10**1 .. 10**7 in steps of 10**0.05. Default 10000.

    Data: ``table`` (n_positions, d_model), ``wavelength`` (d_model/2,), ``offsets``
    (0..max_offset), ``similarity`` (max_offset + 1,), and the same two curves for base 10000
    (``wavelength_reference``, ``similarity_reference``); from
    :func:`~posenc_core.sinusoidal.sinusoidal_table`,
    :func:`~posenc_core.sinusoidal.sinusoidal_wavelengths`
    and :func:`~posenc_core.analysis.sinusoidal_similarity`.

    Args:
        d_model: width, a positive even integer.
        n_positions: rows of the heatmap, an integer >= 2.
        max_offset: largest offset k of the similarity curve, an integer >= 1.
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see
            :func:`~posenc_core.book.widgets.explorer.resolve_mode`).

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"base"``.
    """
    d = check.even_int("d_model", d_model)
    n = check.int_in_range("n_positions", n_positions, 2)
    kmax = check.int_in_range("max_offset", max_offset, 1)
    offsets = np.arange(kmax + 1)
    reference = {
        "wavelength": sinusoidal_wavelengths(d, base=10000.0).numpy(),
        "similarity": sinusoidal_similarity(torch.arange(kmax + 1), d, base=10000.0).numpy(),
    }
    params = [Param("base", "base", BASE_GRID, 10000, ("log", 10, 1, 7, 0.05))]

    def compute(v: dict) -> Data:
        b = float(v["base"])
        return {
            "table": sinusoidal_table(n, d, base=b, dtype=torch.float64).numpy(),
            "wavelength": sinusoidal_wavelengths(d, base=b).numpy(),
            "offsets": offsets,
            "similarity": sinusoidal_similarity(torch.arange(kmax + 1), d, base=b).numpy(),
            "wavelength_reference": reference["wavelength"],
            "similarity_reference": reference["similarity"],
        }

    def draw(data: Data, v: dict, fig: Any) -> Any:
        longest = data["wavelength"][-1]
        title = f"base {v['base']:.0f}, d_model = {d}: longest wavelength {longest:,.0f} positions"
        return explorer_frames.base_figure(
            data["table"],
            data["wavelength"],
            data["offsets"],
            data["similarity"],
            reference=reference,
            reference_label="base 10000",
            title=title,
            fig=fig,
        )

    def alt(v: dict, data: Data) -> str:
        return (
            f"Three panels for base {v['base']:.0f} and d_model {d}: a heatmap of the sinusoidal "
            f"table ({n} positions), the wavelength of each pair on a log scale rising from 2 pi "
            f"to {data['wavelength'][-1]:,.0f}, and the similarity of two encodings against their "
            "offset, each next to base 10000 in dashed grey"
        )

    return Explorer("base", params, compute, draw, alt, mode=mode)


def unit_circle_explorer(
    *,
    d_model: int = 16,
    base: float = 10000.0,
    starts: Sequence[int] = (0, 10, 25),
    mode: str = "auto",
) -> Explorer:
    """One (sin, cos) pair of the sinusoidal encoding on the unit circle: positions p and
    p + k for a few starts p, the turn omega_i * k between them (the same for every p), and
    the 2x2 block of the shift matrix M_k with PE(p + k) = M_k PE(p).

    Controls:
        ``pair`` (description "pair i"): the pair index i. Static grid and live range
        0 .. d_model/2 - 1 (0..7 for d_model = 16). Default 0.
        ``offset`` (description "offset k"): the shift k. Static grid 1, 2, 3, 5, 10, 20, 50,
        100; live 0..100. Default 3.

    Data: ``omega`` (omega_i, from :func:`~posenc_core.sinusoidal.sinusoidal_frequencies`),
    ``angle`` (omega_i * k), ``starts`` (S,), ``start_points`` and ``end_points`` (S, 2): the pair's
    (sin, cos) entries, dims (2i, 2i+1) of :func:`~posenc_core.sinusoidal.sinusoidal_encoding`
    at p and p + k, and ``matrix`` (2, 2): that pair's block of
    :func:`~posenc_core.rotation.shift_matrix` (k, d_model), all float64.

    Args:
        d_model: width, a positive even integer (16 gives 8 pairs).
        base: frequency base, finite and > 1.
        starts: 1 to 4 non-negative start positions p.
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see
            :func:`~posenc_core.book.widgets.explorer.resolve_mode`).

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"unit-circle"``.
    """
    d = check.even_int("d_model", d_model)
    base = check.base_value("base", base)
    if (
        isinstance(starts, (str, bytes))
        or not isinstance(starts, Sequence)
        or not 1 <= len(starts) <= 4
    ):
        raise ValueError(
            f"starts must be a sequence of 1 to 4 non-negative integers, got {starts!r}"
        )
    starts = tuple(check.int_in_range(f"starts[{i}]", p, 0, 10**9) for i, p in enumerate(starts))
    pairs = tuple(range(d // 2))
    params = [
        Param("pair", "pair i", pairs, 0, ("int", 0, d // 2 - 1)),
        Param("offset", "offset k", (1, 2, 3, 5, 10, 20, 50, 100), 3, ("int", 0, 100)),
    ]
    omegas = sinusoidal_frequencies(d, base=base)

    def compute(v: dict) -> Data:
        i, k = v["pair"], v["offset"]
        p = torch.tensor(starts, dtype=torch.float64)
        pe = sinusoidal_encoding(torch.cat((p, p + k)), d, base=base, dtype=torch.float64)[
            :, 2 * i : 2 * i + 2
        ]
        omega = float(omegas[i])
        return {
            "omega": omega,
            "angle": omega * k,
            "starts": np.array(starts),
            "start_points": pe[: len(starts)].numpy(),
            "end_points": pe[len(starts) :].numpy(),
            "matrix": shift_matrix(k, d, base=base, dtype=torch.float64)[
                2 * i : 2 * i + 2, 2 * i : 2 * i + 2
            ].numpy(),
        }

    def draw(data: Data, v: dict, fig: Any) -> Any:
        return explorer_frames.circle_shift_figure(
            data["start_points"],
            data["end_points"],
            omega=data["omega"],
            shift=v["offset"],
            starts=starts,
            matrix=data["matrix"],
            pair=v["pair"],
            fig=fig,
        )

    def alt(v: dict, data: Data) -> str:
        return (
            f"Unit circle of pair {v['pair']} of a {d}-dimensional sinusoidal encoding: positions "
            f"{', '.join(str(s) for s in starts)} and the positions {v['offset']} further on, "
            f"joined by arcs that all turn by the same angle {data['angle']:.3g} radians, with the "
            "2 by 2 rotation block printed beside it"
        )

    return Explorer("unit-circle", params, compute, draw, alt, mode=mode)


def rope_decay_explorer(
    *, head_dim: int = 128, max_distance: int = 100_000, n_points: int = 600, mode: str = "auto"
) -> Explorer:
    """The RoPE score against relative distance for q = k = all ones (the case of
    RoFormer's decay argument), with one distance marked and RoFormer's bound for comparison.

    Controls:
        ``base`` (rope_theta, log scale). Static grid 100, 1000, 10000, 100000, 500000,
        1000000, 10000000; live 10**2 .. 10**7 in steps of 10**0.05. Default 10000.
        ``distance``: the marked relative distance. Static grid 1, 3, 10, 30, 100, 300, 1000,
        3000, 10000, 30000, 100000 (those <= max_distance); live 1 .. max_distance on a log
        slider, rounded to an integer. Default 1000.
        The frame label also gives the score at the marked distance.

    Data: ``distances`` (about n_points integers spaced evenly on a log scale from 1 to
    max_distance), ``score`` = :func:`~posenc_core.analysis.rope_score_vs_distance` there,
    ``bound`` = :func:`~posenc_core.analysis.rope_decay_bound` there divided by its value at
    distance 0, and ``marker`` = [distance, score at that distance].

    Args:
        head_dim: per-head width, a positive even integer.
        max_distance: largest distance plotted, an integer >= 10.
        n_points: number of log-spaced sample points (before removing repeats), >= 10.
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see
            :func:`~posenc_core.book.widgets.explorer.resolve_mode`).

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"rope-decay"``.
    """
    hd = check.even_int("head_dim", head_dim)
    dmax = check.int_in_range("max_distance", max_distance, 10)
    npts = check.int_in_range("n_points", n_points, 10)
    distances = np.unique(np.round(np.logspace(0, math.log10(dmax), npts)).astype(np.int64))
    dist_t = torch.from_numpy(distances)
    dist_grid = tuple(
        x for x in (1, 3, 10, 30, 100, 300, 1000, 3000, 10000, 30000, 100000) if x <= dmax
    )
    params = [
        Param(
            "base",
            "base",
            (100, 1000, 10000, 100000, 500000, 1000000, 10000000),
            10000,
            ("log", 10, 2, 7, 0.05),
        ),
        Param(
            "distance",
            "distance",
            dist_grid,
            min(1000, dist_grid[-1]),
            ("log", 10, 0, math.log10(dmax), 0.05),
            to_param=lambda x: int(round(x)),
        ),
    ]

    def compute(v: dict) -> Data:
        b, m = float(v["base"]), int(v["distance"])
        bound = rope_decay_bound(dist_t, hd, base=b) / rope_decay_bound(0, hd, base=b)
        return {
            "distances": distances,
            "score": rope_score_vs_distance(dist_t, hd, base=b).numpy(),
            "bound": bound.numpy(),
            "marker": np.array([m, rope_score_vs_distance(m, hd, base=b).item()]),
        }

    def draw(data: Data, v: dict, fig: Any) -> Any:
        title = f"RoPE, head_dim {hd}, base {v['base']:.0f}"
        return explorer_frames.rope_decay_figure(
            data["distances"],
            data["score"],
            marker=tuple(data["marker"]),
            bound=data["bound"],
            title=title,
            fig=fig,
        )

    def extra(v: dict, data: Data) -> str:
        return f"score = {data['marker'][1]:+.4f}"

    def alt(v: dict, data: Data) -> str:
        return (
            f"Line plot, log distance axis from 1 to {dmax}: the RoPE score for all-ones query and "
            f"key with base {v['base']:.0f} starts at 1 and decays with ripples towards 0; "
            f"RoFormer's bound is dashed; distance {v['distance']} is marked at score "
            f"{data['marker'][1]:+.4f}"
        )

    return Explorer("rope-decay", params, compute, draw, alt, mode=mode, extra_label=extra)


SCALING_METHODS = ("linear", "ntk", "dynamic", "yarn", "llama3")

# method -> (base, original context L0, extra keys of the Hugging Face-style scaling dict)
_SCALING_MODELS: dict[str, tuple[float, int, dict]] = {
    "linear": (10000.0, 4096, {}),
    "ntk": (10000.0, 4096, {}),
    "dynamic": (10000.0, 4096, {"original_max_position_embeddings": 4096}),
    "yarn": (10000.0, 4096, {"original_max_position_embeddings": 4096}),
    "llama3": (
        500000.0,
        8192,
        {"original_max_position_embeddings": 8192, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
    ),
}


def scaling_setup(method: str, factor: float) -> tuple[float, dict, int | None, int]:
    """The model setting the scaling explorer uses for ``method`` and ``factor``.

    linear, ntk, dynamic and yarn use base 10000 and an original context L0 = 4096 (Llama 2);
    llama3 uses base 500000, L0 = 8192, low_freq_factor 1 and high_freq_factor 4 (Llama 3.1).
    Dynamic NTK is evaluated at a sequence length of factor * L0; yarn uses its defaults
    beta_fast = 32 and beta_slow = 1.

    Args:
        method: one of ``"linear"``, ``"ntk"``, ``"dynamic"``, ``"yarn"``, ``"llama3"``.
        factor: the context-extension factor s >= 1.

    Returns:
        ``(base, scaling, seq_len, L0)`` for :func:`~posenc_core.rope.rope_frequencies`
        (``seq_len`` is None except for dynamic).
    """
    method = check.choice("method", method, SCALING_METHODS)
    factor = check.real_in_range("factor", factor, 1.0, 1e6, rel_tol=SLIDER_TOL)
    base, l0, extra = _SCALING_MODELS[method]
    scaling = {"rope_type": method, "factor": factor, **extra}
    seq_len = int(round(factor * l0)) if method == "dynamic" else None
    return base, scaling, seq_len, l0


def rope_scaling_explorer(*, head_dim: int = 128, mode: str = "auto") -> Explorer:
    """How each context-extension method rescales RoPE's frequencies: scaled theta_i divided
    by the original theta_i, against the original wavelength (log scales). 1 = kept,
    1/factor = interpolated, in between = smoothed (or, for NTK and dynamic, a changed base).

    Settings (see :func:`scaling_setup`): linear (position interpolation), ntk, dynamic (at
    sequence length factor * L0) and yarn use base 10000 and L0 = 4096 (Llama 2); llama3 uses
    base 500000, L0 = 8192, low_freq_factor 1, high_freq_factor 4 (Llama 3.1).

    Controls:
        ``factor``: the context-extension factor s. Static grid 2, 4, 8, 16, 32; live 1.5, 2,
        3, 4, 6, 8, 12, 16, 24, 32. Default 8.
        ``method``: buttons linear, ntk, dynamic, yarn, llama3 (both modes). Default linear.
        The frame label also counts the pairs kept, interpolated and in between.

    Data: ``wavelength`` (head_dim/2,) original wavelengths, ``inv_freq_original`` and
    ``inv_freq`` from :func:`~posenc_core.rope.rope_frequencies` without and with the scaling
    dict, and ``ratio`` = inv_freq / inv_freq_original.

    Args:
        head_dim: per-head width, an even integer >= 4.
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see
            :func:`~posenc_core.book.widgets.explorer.resolve_mode`).

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"rope-scaling"``.
    """
    hd = check.even_int("head_dim", head_dim)
    if hd < 4:
        raise ValueError(
            f"head_dim must be an even integer >= 4 (dimensions come in pairs), got {hd}"
        )
    params = [
        Param(
            "factor",
            "factor",
            (2, 4, 8, 16, 32),
            8,
            ("select", (1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32)),
            fmt=lambda s: f"{s:g}",
        ),
        Param("method", "method", SCALING_METHODS, "linear", ("buttons", SCALING_METHODS), fmt=str),
    ]

    def compute(v: dict) -> Data:
        base, scaling, seq_len, _ = scaling_setup(v["method"], v["factor"])
        original = rope_frequencies(hd, base=base)
        scaled = rope_frequencies(hd, base=base, scaling=scaling, seq_len=seq_len)
        ratio = (scaled / original).numpy()
        return {
            "wavelength": (2 * math.pi / original).numpy(),
            "inv_freq_original": original.numpy(),
            "inv_freq": scaled.numpy(),
            "ratio": ratio,
        }

    def counts(v: dict, data: Data) -> tuple[int, int, int]:
        r = data["ratio"]
        kept = int(np.isclose(r, 1.0, rtol=1e-9, atol=0).sum())
        interp = int(np.isclose(r, 1.0 / v["factor"], rtol=1e-9, atol=0).sum())
        return kept, interp, r.size - kept - interp

    def draw(data: Data, v: dict, fig: Any) -> Any:
        base, scaling, seq_len, l0 = scaling_setup(v["method"], v["factor"])
        s = v["factor"]
        lines = {f"L0 = {l0}": l0, f"s·L0 = {s * l0:.0f}": s * l0}
        if v["method"] == "yarn":
            lines = {"L0/β_fast": l0 / 32, f"L0 = {l0}": l0, f"s·L0 = {s * l0:.0f}": s * l0}
        elif v["method"] == "llama3":
            lines = {
                "L0/high_freq_factor": l0 / 4,
                f"L0 = {l0}": l0,
                f"s·L0 = {s * l0:.0f}": s * l0,
            }
        kept, interp, between = counts(v, data)
        title = (
            f"{v['method']}, factor s = {s:g} (base {base:.0f}, L0 = {l0})\n"
            f"{hd // 2} pairs: {kept} kept, {interp} interpolated, {between} in between"
        )
        return explorer_frames.rope_scaling_figure(
            data["wavelength"], data["ratio"], factor=s, lines=lines, title=title, fig=fig
        )

    def extra(v: dict, data: Data) -> str:
        kept, interp, between = counts(v, data)
        return f"kept {kept}, interpolated {interp}, in between {between}"

    def alt(v: dict, data: Data) -> str:
        return (
            "Log-log plot of scaled over original RoPE frequency against original wavelength for "
            f"{v['method']} scaling with factor {v['factor']:g}: ratio 1 means a pair is kept, "
            f"1/{v['factor']:g} means it is interpolated; vertical lines mark the original and "
            "extended context"
        )

    return Explorer("rope-scaling", params, compute, draw, alt, mode=mode, extra_label=extra)


def patch_score_explorer(
    *,
    grid: int = 8,
    head_dim: int = 32,
    base: float = 100.0,
    seed: int = 0,
    mode: str = "auto",
) -> Explorer:
    """Move a query patch across an image grid and see its scores against every patch, under
    axial 2-D RoPE and under 1-D RoPE on the raster order (chapter 9).

    Every patch carries the same content, one seeded random vector used as query and key (so
    the pattern is not symmetric), and the scores show what position alone does: under axial RoPE
    (:func:`~posenc_core.multi_axis.axial_score_grid`) the pattern moves rigidly with the query,
    since scores depend only on the 2-D offset; under the raster order
    (:func:`~posenc_core.multi_axis.raster_score_grid`) the patch below is ``grid`` positions
    away and the end of a row is next to the start of the following one.

    Controls: ``row`` and ``col``, sliders 0 .. grid - 1 (the static page holds every
    combination). Default: the centre.

    Data: ``axial`` and ``raster`` ``(grid, grid)`` float64 scores, ``below`` and ``right``:
    ``(axial, raster)`` scores of the patch below and to the right (NaN at the edge).

    Args:
        grid: patches per side, 2 .. 12.
        head_dim: a multiple of 4 (axial RoPE splits the pairs between the two axes).
        base: rope_theta (100: fast enough that the pattern varies over a few patches).
        seed: the content vector's seed.
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see
            :func:`~posenc_core.book.widgets.explorer.resolve_mode`).

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"patch-scores"``.
    """
    from posenc_core.multi_axis import axial_score_grid, raster_score_grid

    n = check.int_in_range("grid", grid, 2, 12)
    hd = check.positive_int("head_dim", head_dim)
    if hd % 4:
        raise ValueError(f"head_dim must be a multiple of 4 for axial 2-D RoPE, got {hd}")
    base = check.base_value("base", base)
    g = torch.Generator().manual_seed(check.non_negative_int("seed", seed))
    q = k = torch.randn(hd, generator=g, dtype=torch.float64)  # one content everywhere
    params = [
        Param("row", "row", tuple(range(n)), n // 2, ("int", 0, n - 1)),
        Param("col", "col", tuple(range(n)), n // 2, ("int", 0, n - 1)),
    ]

    def grids(r: int, c: int) -> tuple[np.ndarray, np.ndarray]:
        a = axial_score_grid(n, n, r, c, hd, base=base, q=q, k=k).numpy()
        b = raster_score_grid(n, n, r, c, hd, base=base, q=q, k=k).numpy()
        return a, b

    every = [grids(r, c) for r in range(n) for c in range(n)]
    vlim = (
        min(x.min() for pair in every for x in pair),
        max(x.max() for pair in every for x in pair),
    )

    def compute(v: dict) -> Data:
        r, c = v["row"], v["col"]
        a, b = grids(r, c)

        def at(grid_: np.ndarray, rr: int, cc: int) -> float:
            return float(grid_[rr, cc]) if rr < n and cc < n else float("nan")

        return {
            "axial": a,
            "raster": b,
            "below": (at(a, r + 1, c), at(b, r + 1, c)),
            "right": (at(a, r, c + 1), at(b, r, c + 1)),
        }

    def draw(data: Data, v: dict, fig: Any) -> Any:
        return explorer_frames.patch_scores_figure(
            [data["axial"], data["raster"]],
            (v["row"], v["col"]),
            titles=["axial 2-D RoPE", "1-D RoPE on the raster order"],
            vlim=vlim,
            title=f"query patch at row {v['row']}, column {v['col']}",
            fig=fig,
        )

    def extra(v: dict, data: Data) -> str:
        (ab, rb), (ar, rr) = data["below"], data["right"]
        return (
            f"patch below: axial {ab:.2f}, raster {rb:.2f} · patch to the right: axial "
            f"{ar:.2f}, raster {rr:.2f}"
        )

    def alt(v: dict, data: Data) -> str:
        return (
            f"Two {n} by {n} heat maps of the scores of the query patch at row {v['row']}, "
            f"column {v['col']} against every patch: axial 2-D RoPE on the left, 1-D RoPE on "
            "the raster order on the right"
        )

    return Explorer("patch-scores", params, compute, draw, alt, mode=mode, extra_label=extra)
