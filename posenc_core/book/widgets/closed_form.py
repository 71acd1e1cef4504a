"""The explorers of closed-form quantities: a table of sines, a rotation, the base, RoPE's
decay, a scaled frequency spectrum and a 2-D score grid.

Each computes in the browser (``explorer.js``) and here with posenc_core
(:meth:`Explorer.compute <posenc_core.book.widgets.explorer.Explorer.compute>`); the tests
compare both with independent references. Every number control takes any value of its range.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from posenc_core import _validation as check
from posenc_core.analysis import rope_decay_bound, rope_score_vs_distance, sinusoidal_similarity
from posenc_core.book import figures
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
    "SCALING_METHODS",
    "base_explorer",
    "patch_score_explorer",
    "rope_decay_explorer",
    "rope_scaling_explorer",
    "scaling_setup",
    "sinusoidal_explorer",
    "unit_circle_explorer",
]


def sinusoidal_explorer(*, n_positions: int = 100, base: float = 10000.0) -> Explorer:
    """The sinusoidal table as a heatmap, one position's row (its fingerprint) outlined and
    plotted underneath.

    Controls: ``d_model``, even integers 2..512 (default 128); ``position``, 0..n_positions - 1
    (default 40, or the last row).

    Data: ``table`` ``(n_positions, d_model)`` from
    :func:`~posenc_core.sinusoidal.sinusoidal_table` in float64, ``fingerprint`` = its row.

    Args:
        n_positions: rows of the table, an integer >= 2.
        base: frequency base, finite and > 1.

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"sinusoidal"``.
    """
    n = check.int_in_range("n_positions", n_positions, 2)
    base = check.base_value("base", base)
    params = [
        Param("d_model", "d_model", "int", 128, 2, 512, step=2),
        Param("position", "position", "int", min(40, n - 1), 0, n - 1),
    ]

    def compute(v: dict) -> Data:
        table = sinusoidal_table(n, v["d_model"], base=base, dtype=torch.float64).numpy()
        return {"table": table, "fingerprint": table[v["position"]].copy()}

    def figure(data: Data, v: dict) -> Any:
        return figures.sinusoidal_heatmap(n, v["d_model"], base=base, highlight=v["position"])

    def alt(v: dict, data: Data) -> str:
        return (
            f"Heatmap of the sinusoidal encoding, {n} positions by {v['d_model']} dimensions, red "
            "for +1 and blue for -1, fast stripes on the left and nearly constant columns on the "
            f"right; the row of position {v['position']} is outlined and plotted underneath as a "
            "line"
        )

    title = "The sinusoidal table and one position's fingerprint"
    consts = {"n_positions": n, "base": base}
    consts["args"] = dict(consts)  # the factory's arguments, for the browser tests
    return Explorer("sinusoidal", "sinusoidal", title, params, consts, compute, figure, alt)


def base_explorer(
    *, d_model: int = 128, n_positions: int = 100, max_offset: int = 1000
) -> Explorer:
    """The base b of the sinusoidal encoding in three views, each beside base 10000: the table,
    the wavelength 2*pi/omega_i of every pair, and the similarity s(k) of encodings k apart.

    Controls: ``base``, any real in [10, 1e7] (log slider or typed; default 10000).

    Data: ``table`` ``(n_positions, d_model)``, ``wavelength`` ``(d_model/2,)``, ``offsets``
    0..max_offset, ``similarity``, and ``wavelength_reference``, ``similarity_reference`` for
    base 10000 (:func:`~posenc_core.sinusoidal.sinusoidal_wavelengths`,
    :func:`~posenc_core.analysis.sinusoidal_similarity`).

    Args:
        d_model: width, a positive even integer.
        n_positions: rows of the heatmap, an integer >= 2.
        max_offset: largest offset k of the similarity curve, an integer >= 1.

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
    params = [Param("base", "base", "real", 10000.0, 10.0, 1e7, log=True)]

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

    def figure(data: Data, v: dict) -> Any:
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
        )

    def alt(v: dict, data: Data) -> str:
        return (
            f"Three panels for base {v['base']:.0f} and d_model {d}: a heatmap of the sinusoidal "
            f"table ({n} positions), the wavelength of each pair on a log scale rising from 2 pi "
            f"to {data['wavelength'][-1]:,.0f}, and the similarity of two encodings against their "
            "offset, each next to base 10000 in dashed grey"
        )

    title = "The base of the sinusoidal encoding: table, wavelengths and similarity"
    consts = {"d_model": d, "n_positions": n, "max_offset": kmax}
    consts["args"] = dict(consts)
    return Explorer("base", "base", title, params, consts, compute, figure, alt)


def unit_circle_explorer(
    *, d_model: int = 16, base: float = 10000.0, starts: Sequence[int] = (0, 10, 25)
) -> Explorer:
    """One (sin, cos) pair on the unit circle: positions p and p + k for a few starts p, the
    turn omega_i * k between them (the same for every p), and the block of M_k.

    Controls: ``pair`` (pair i, 0..d_model/2 - 1, default 0); ``offset`` (k, 0..100, default 3).

    Data: ``omega``, ``angle`` = omega * k, ``starts`` ``(S,)``, ``start_points`` and
    ``end_points`` ``(S, 2)`` (dims 2i, 2i+1 of
    :func:`~posenc_core.sinusoidal.sinusoidal_encoding` at p and p + k), ``matrix`` ``(2, 2)``
    (that pair's block of :func:`~posenc_core.rotation.shift_matrix`), float64.

    Args:
        d_model: width, a positive even integer.
        base: frequency base, finite and > 1.
        starts: 1 to 4 start positions p, integers in 0..10**6.

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
    starts = tuple(check.int_in_range(f"starts[{i}]", p, 0, 10**6) for i, p in enumerate(starts))
    params = [
        Param("pair", "pair i", "int", 0, 0, d // 2 - 1),
        Param("offset", "offset k", "int", 3, 0, 100),
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

    def figure(data: Data, v: dict) -> Any:
        shown = min(max(starts) + v["offset"], 199) + 1  # positions drawn on the circle
        k = v["offset"]
        return figures.unit_circle_figure([data["omega"]], shown, shift=k, starts=starts, labels=())

    def alt(v: dict, data: Data) -> str:
        return (
            f"Unit circle of pair {v['pair']} of a {d}-dimensional sinusoidal encoding, positions "
            f"as points coloured by position; arrows join positions "
            f"{', '.join(str(s) for s in starts)} to the positions {v['offset']} further on, all "
            f"turning by the same angle {data['angle']:.3g} radians"
        )

    title = f"One pair of a {d}-dimensional sinusoidal encoding on the unit circle"
    consts = {"d_model": d, "base": base, "starts": list(starts)}
    consts["args"] = dict(consts)
    return Explorer("unit-circle", "unit-circle", title, params, consts, compute, figure, alt)


def rope_decay_explorer(
    *, head_dim: int = 128, max_distance: int = 100_000, n_points: int = 600
) -> Explorer:
    """The RoPE score against relative distance for q = k = all ones (RoFormer's decay
    argument), beside RoFormer's bound, with the score at one distance reported.

    Controls: ``base`` (rope_theta, any real in [100, 1e7], default 10000); ``distance``
    (1..max_distance, log slider, default 1000).

    Data: ``distances`` (about n_points log-spaced integers in 1..max_distance), ``score``
    (:func:`~posenc_core.analysis.rope_score_vs_distance`), ``bound``
    (:func:`~posenc_core.analysis.rope_decay_bound` over its value at 0), ``marker``
    = [distance, score there].

    Args:
        head_dim: per-head width, a positive even integer.
        max_distance: largest distance plotted, an integer >= 10.
        n_points: log-spaced sample points before removing repeats, >= 10.

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"rope-decay"``.
    """
    hd = check.even_int("head_dim", head_dim)
    dmax = check.int_in_range("max_distance", max_distance, 10)
    npts = check.int_in_range("n_points", n_points, 10)
    distances = np.unique(np.round(np.logspace(0, math.log10(dmax), npts)).astype(np.int64))
    dist_t = torch.from_numpy(distances)
    params = [
        Param("base", "base", "real", 10000.0, 100.0, 1e7, log=True),
        Param("distance", "distance", "int", min(1000, dmax), 1, dmax, log=True),
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

    def figure(data: Data, v: dict) -> Any:
        name = f"base {v['base']:,.0f}"
        m, s = data["marker"]
        return figures.paired_curves_figure(
            data["distances"],
            {name: data["score"]},
            {name: data["bound"]},
            solid_label="score, q = k = ones",
            dashed_label="bound ÷ value at 0",
            logx=True,
            xlabel="relative distance |m − n|",
            ylabel="score / head_dim",
            title=f"RoPE, head_dim {hd}: score {s:+.4f} at distance {m:.0f}",
        )

    def alt(v: dict, data: Data) -> str:
        return (
            f"Line plot, log distance axis from 1 to {dmax}: the RoPE score for all-ones query and "
            f"key with base {v['base']:.0f} starts at 1 and decays with ripples towards 0; "
            f"RoFormer's bound is dashed; at distance {v['distance']} the score is "
            f"{data['marker'][1]:+.4f}"
        )

    title = f"The RoPE score against relative distance, head_dim {hd}"
    consts = {"head_dim": hd, "max_distance": dmax, "distances": distances}
    consts["args"] = {"head_dim": hd, "max_distance": dmax, "n_points": npts}
    return Explorer("rope-decay", "rope-decay", title, params, consts, compute, figure, alt)


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
    """The model setting of the scaling explorer for ``method`` and ``factor``.

    linear, ntk, dynamic and yarn: base 10000, original context L0 = 4096 (Llama 2), dynamic
    evaluated at factor * L0, yarn with beta_fast 32 and beta_slow 1; llama3: base 500000,
    L0 = 8192, low_freq_factor 1, high_freq_factor 4 (Llama 3.1).

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


def rope_scaling_explorer(*, head_dim: int = 128) -> Explorer:
    """How each context-extension method rescales RoPE's frequencies: scaled over original
    theta_i against the original wavelength. 1 = kept, 1/factor = interpolated.

    Controls: ``factor`` (s, any real in [1, 32], default 8); ``method`` (linear, ntk,
    dynamic, yarn, llama3; default linear), with the settings of :func:`scaling_setup`.

    Data: ``wavelength`` ``(head_dim/2,)``, ``inv_freq_original`` and ``inv_freq``
    (:func:`~posenc_core.rope.rope_frequencies` without and with the scaling), ``ratio``.

    Args:
        head_dim: per-head width, an even integer >= 4.

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"rope-scaling"``.
    """
    hd = check.even_int("head_dim", head_dim)
    if hd < 4:
        raise ValueError(
            f"head_dim must be an even integer >= 4 (dimensions come in pairs), got {hd}"
        )
    params = [
        Param("factor", "factor", "real", 8.0, 1.0, 32.0, log=True),
        Param("method", "method", "choice", "linear", options=SCALING_METHODS),
    ]

    def compute(v: dict) -> Data:
        base, scaling, seq_len, _ = scaling_setup(v["method"], v["factor"])
        original = rope_frequencies(hd, base=base)
        scaled = rope_frequencies(hd, base=base, scaling=scaling, seq_len=seq_len)
        return {
            "wavelength": (2 * math.pi / original).numpy(),
            "inv_freq_original": original.numpy(),
            "inv_freq": scaled.numpy(),
            "ratio": (scaled / original).numpy(),
        }

    def figure(data: Data, v: dict) -> Any:
        base, _, _, l0 = scaling_setup(v["method"], v["factor"])
        s = v["factor"]
        lines = {f"L0 = {l0}": l0, f"s·L0 = {s * l0:.0f}": s * l0}
        r = data["ratio"]
        kept = int(np.isclose(r, 1.0, rtol=1e-9, atol=0).sum())
        interp = int(np.isclose(r, 1.0 / s, rtol=1e-9, atol=0).sum())
        title = (
            f"{v['method']}, factor s = {s:g} (base {base:.0f}, L0 = {l0})\n"
            f"{hd // 2} pairs: {kept} kept, {interp} interpolated, {r.size - kept - interp} "
            "in between"
        )
        return figures.marked_curves_figure(
            data["wavelength"],
            {v["method"]: r},
            logx=True,
            logy=True,
            markers=True,
            xlim=(3.0, 1e7),
            ylim=(4e-4, 2.0),
            hlines={"kept (1)": 1.0, f"interpolated (1/{s:g})": 1 / s},
            vlines=lines,
            xlabel="original wavelength 2π/θ_i (positions)",
            ylabel="scaled θ_i / original θ_i",
            title=title,
        )

    def alt(v: dict, data: Data) -> str:
        return (
            "Log-log plot of scaled over original RoPE frequency against original wavelength for "
            f"{v['method']} scaling with factor {v['factor']:g}: ratio 1 means a pair is kept, "
            f"1/{v['factor']:g} means it is interpolated; vertical lines mark the original and "
            "extended context"
        )

    title = f"How each long-context method rescales RoPE's frequencies, head_dim {hd}"
    consts = {"head_dim": hd, "models": {m: list(t) for m, t in _SCALING_MODELS.items()}}
    consts["args"] = {"head_dim": hd}
    return Explorer("rope-scaling", "rope-scaling", title, params, consts, compute, figure, alt)


def patch_score_explorer(
    *, grid: int = 8, head_dim: int = 32, base: float = 100.0, seed: int = 0
) -> Explorer:
    """A query patch's scores against every patch of a grid, under axial 2-D RoPE
    (:func:`~posenc_core.multi_axis.axial_score_grid`) and 1-D RoPE on the raster order
    (:func:`~posenc_core.multi_axis.raster_score_grid`); every patch holds one seeded vector.

    Controls: ``row`` and ``col``, 0..grid - 1 (default the centre).

    Data: ``axial``, ``raster`` ``(grid, grid)`` float64; ``below``, ``right``: [axial, raster]
    scores of the next patch down and right, ``[None, None]`` on the last row or column.

    Args:
        grid: patches per side, 2..12.
        head_dim: a multiple of 4.
        base: rope_theta; seed: the content vector's seed.

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
    q = torch.randn(hd, generator=g, dtype=torch.float64)  # one content everywhere, q = k
    params = [
        Param("row", "row", "int", n // 2, 0, n - 1),
        Param("col", "col", "int", n // 2, 0, n - 1),
    ]

    def grids(r: int, c: int) -> tuple[np.ndarray, np.ndarray]:
        a = axial_score_grid(n, n, r, c, hd, base=base, q=q, k=q).numpy()
        b = raster_score_grid(n, n, r, c, hd, base=base, q=q, k=q).numpy()
        return a, b

    every = [grids(r, c) for r in range(n) for c in range(n)]
    vlim = (
        float(min(x.min() for pair in every for x in pair)),
        float(max(x.max() for pair in every for x in pair)),
    )

    def compute(v: dict) -> Data:
        r, c = v["row"], v["col"]
        a, b = grids(r, c)

        def at(rr: int, cc: int) -> list | None:
            return [float(a[rr, cc]), float(b[rr, cc])] if rr < n and cc < n else None

        below, right = at(r + 1, c), at(r, c + 1)
        return {
            "axial": a,
            "raster": b,
            "below": below or [None, None],
            "right": right or [None, None],
        }

    def figure(data: Data, v: dict) -> Any:
        return explorer_frames.patch_scores_figure(
            [data["axial"], data["raster"]],
            (v["row"], v["col"]),
            titles=["axial 2-D RoPE", "1-D RoPE on the raster order"],
            vlim=vlim,
            title=f"query patch at row {v['row']}, column {v['col']}",
        )

    def alt(v: dict, data: Data) -> str:
        return (
            f"Two {n} by {n} heat maps of the scores of the query patch at row {v['row']}, "
            f"column {v['col']} against every patch: axial 2-D RoPE on the left, 1-D RoPE on "
            "the raster order on the right"
        )

    title = f"Scores of one query patch on a {n} × {n} grid, axial against raster RoPE"
    consts = {"grid": n, "head_dim": hd, "base": base, "q": q.numpy(), "vlim": list(vlim)}
    consts["args"] = {"grid": n, "head_dim": hd, "base": base, "seed": seed}
    return Explorer("patch-scores", "patch-scores", title, params, consts, compute, figure, alt)
