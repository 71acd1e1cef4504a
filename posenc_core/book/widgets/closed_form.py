"""The explorers of closed-form quantities: a table of sines, a rotation, the base, RoPE's
decay, a scaled frequency spectrum, a 2-D score grid, the shift matrix behind a projection and
RoPE's rotation of one query and one key.

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
from posenc_core.rope import apply_rope, rope_cos_sin, rope_frequencies
from posenc_core.rotation import shift_matrix
from posenc_core.sinusoidal import (
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_table,
    sinusoidal_wavelengths,
)

__all__ = [
    "SCALING_METHODS",
    "alibi_explorer",
    "base_explorer",
    "patch_score_explorer",
    "rope_decay_explorer",
    "rope_pair_explorer",
    "rope_scaling_explorer",
    "scaling_setup",
    "shift_explorer",
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
    hint = (
        "Try: move the position and watch the fast stripes on the left change while the right "
        "barely moves; then halve d_model."
    )
    return Explorer("sinusoidal", "sinusoidal", title, params, consts, compute, figure, alt, hint)


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
    hint = (
        "Try: base 100 and base 1e6 against 10000: the longest wavelength follows the base, and "
        "the similarity curve drops faster or slower."
    )
    return Explorer("base", "base", title, params, consts, compute, figure, alt, hint)


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
    hint = (
        "Try: change the offset k: every start turns by the same angle, whatever p; a higher "
        "pair i turns more slowly."
    )
    return Explorer("unit-circle", "unit-circle", title, params, consts, compute, figure, alt, hint)


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
    hint = (
        "Try: raise the base and watch the score stay high to longer distances; move the "
        "distance marker into the ripples."
    )
    return Explorer("rope-decay", "rope-decay", title, params, consts, compute, figure, alt, hint)


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


def rope_scaling_explorer(*, head_dim: int = 128, view: str = "ratio") -> Explorer:
    """How each context-extension method rescales RoPE's frequencies, in one of two views:
    ``"ratio"`` draws scaled over original theta_i against the original wavelength (1 = kept,
    1/factor = interpolated); ``"spectrum"`` every pair's wavelength before and after against
    the pair index, the wavelengths that cross L0 (at most L0 before, more after) marked.

    Controls: ``factor`` (s, any real in [1, 32], default 8); ``method`` (linear, ntk,
    dynamic, yarn, llama3; default linear), with the settings of :func:`scaling_setup`.

    Data: ``wavelength`` ``(head_dim/2,)``, ``inv_freq_original`` and ``inv_freq``
    (:func:`~posenc_core.rope.rope_frequencies` without and with the scaling), ``ratio``,
    ``wavelength_scaled`` = 2 pi / inv_freq, ``crosses`` (bool: wavelength <= L0 <
    wavelength_scaled) and ``train_len`` (L0 of the method).

    Args:
        head_dim: per-head width, an even integer >= 4.
        view: ``"ratio"`` (chapter 3) or ``"spectrum"`` (chapter 7b).

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"rope-scaling"``
        (``"rope-spectrum"`` for the spectrum view).
    """
    hd = check.even_int("head_dim", head_dim)
    if hd < 4:
        raise ValueError(
            f"head_dim must be an even integer >= 4 (dimensions come in pairs), got {hd}"
        )
    view = check.choice("view", view, ("ratio", "spectrum"))
    params = [
        Param("factor", "factor", "real", 8.0, 1.0, 32.0, log=True),
        Param("method", "method", "choice", "linear", options=SCALING_METHODS),
    ]

    def compute(v: dict) -> Data:
        base, scaling, seq_len, l0 = scaling_setup(v["method"], v["factor"])
        original = rope_frequencies(hd, base=base)
        scaled = rope_frequencies(hd, base=base, scaling=scaling, seq_len=seq_len)
        wavelength, scaled_wavelength = 2 * math.pi / original, 2 * math.pi / scaled
        return {
            "wavelength": wavelength.numpy(),
            "inv_freq_original": original.numpy(),
            "inv_freq": scaled.numpy(),
            "ratio": (scaled / original).numpy(),
            "wavelength_scaled": scaled_wavelength.numpy(),
            "crosses": ((wavelength <= l0) & (scaled_wavelength > l0)).numpy(),
            "train_len": l0,
        }

    def figure(data: Data, v: dict) -> Any:
        base, _, _, l0 = scaling_setup(v["method"], v["factor"])
        s = v["factor"]
        if view == "spectrum":
            return spectrum_figure(data, v, base, l0)
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

    def spectrum_figure(data: Data, v: dict, base: float, l0: int) -> Any:
        s, n = v["factor"], int(data["crosses"].sum())
        curves = {"original": data["wavelength"], f"s = {s:g}": data["wavelength_scaled"]}
        title = f"{v['method']}, s = {s:g} (base {base:.0f}): {n} wavelengths cross L0"
        return figures.marked_curves_figure(np.arange(hd // 2), curves, logy=True, markers=True,
            hlines={f"L0 = {l0}": l0}, xlabel="pair i", ylabel="wavelength 2π/θ_i (positions)",
            title=title)  # fmt: skip

    def alt(v: dict, data: Data) -> str:
        if view == "spectrum":
            return (f"Log plot of each pair's RoPE wavelength before and after {v['method']} "
                    f"scaling by {v['factor']:g}; {int(data['crosses'].sum())} of them cross the "
                    f"training length {data['train_len']}, drawn as a horizontal line")  # fmt: skip
        return (
            "Log-log plot of scaled over original RoPE frequency against original wavelength for "
            f"{v['method']} scaling with factor {v['factor']:g}: ratio 1 means a pair is kept, "
            f"1/{v['factor']:g} means it is interpolated; vertical lines mark the original and "
            "extended context"
        )

    title, hint = {
        "spectrum": (f"RoPE's wavelengths before and after scaling, head_dim {hd}",
                     "Try: raise the factor and watch wavelengths rise past the training length "
                     "L0; compare linear (all move) with yarn and llama3 (the short ones stay)."),
        "ratio": (f"How each long-context method rescales RoPE's frequencies, head_dim {hd}",
                  "Try: switch methods at factor 8: linear divides every pair, ntk mostly the "
                  "slow ones, yarn and llama3 keep the fast pairs (ratio 1)."),
    }[view]  # fmt: skip
    models = {m: list(t) for m, t in _SCALING_MODELS.items()}
    consts = {
        "head_dim": hd,
        "view": view,
        "models": models,
        "args": {"head_dim": hd, "view": view},
    }
    name = "rope-spectrum" if view == "spectrum" else "rope-scaling"
    return Explorer("rope-scaling", name, title, params, consts, compute, figure, alt, hint)


def alibi_explorer(*, max_heads: int = 64, max_len: int = 48) -> Explorer:
    """ALiBi's slope of every head for any head count (Press et al.'s rule for a count that is
    not a power of two, as :func:`~posenc_core.alibi.alibi_slopes` computes it) and the bias
    matrix of one head, causal or symmetric (:func:`~posenc_core.alibi.alibi_bias`).

    Controls: ``heads`` (n, 1..max_heads, default 8); ``head`` (the head shown, 1..n, default
    1); ``length`` (queries = keys, 2..max_len, default 16); ``variant`` (``"causal"``:
    -m (i - j) with the keys after the query masked; ``"symmetric"``: -m abs(i - j)).

    Data: ``slopes`` ``(n,)`` float64; ``slope`` of the head shown; ``bias`` ``(length,
    length)`` of that head, 0 where masked; ``allowed`` ``(length, length)`` bool, False where
    the causal mask hides the key (the bias is -inf there).

    Args:
        max_heads: largest head count offered, 1..1024.
        max_len: largest length offered, 2..256.

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"alibi"``.
    """
    from posenc_core.alibi import alibi_bias, alibi_slopes

    top = check.int_in_range("max_heads", max_heads, 1, 1024)
    n_max = check.int_in_range("max_len", max_len, 2, 256)
    params = [
        Param("heads", "heads n", "int", min(8, top), 1, top),
        Param("head", "head shown", "int", 1, 1, top, upto="heads"),
        Param("length", "length", "int", min(16, n_max), 2, n_max),
        Param("variant", "variant", "choice", "causal", options=("causal", "symmetric")),
    ]

    def full(v: dict) -> torch.Tensor:
        n, causal = v["length"], v["variant"] == "causal"
        return alibi_bias(v["heads"], n, n, causal=causal, dtype=torch.float64)[v["head"] - 1]

    def compute(v: dict) -> Data:
        slopes = alibi_slopes(v["heads"], dtype=torch.float64).numpy()
        bias = full(v).numpy()
        allowed = np.isfinite(bias)
        return {
            "slopes": slopes,
            "slope": float(slopes[v["head"] - 1]),
            "bias": np.where(allowed, bias, 0.0),
            "allowed": allowed,
        }

    def figure(data: Data, v: dict) -> Any:
        name = f"head {v['head']} of {v['heads']}, m = {data['slope']:.4g} ({v['variant']})"
        return figures.masked_matrices_figure({name: full(v)}, colorbar_label="bias")

    def alt(v: dict, data: Data) -> str:
        shape = "masked above it" if v["variant"] == "causal" else "the same on both sides"
        return (f"Heat map of ALiBi's bias for head {v['head']} of {v['heads']} (slope "
                f"{data['slope']:.4g}) over {v['length']} queries and keys: zero on the "
                f"diagonal, {shape}, falling by the slope with every step of distance")  # fmt: skip

    hint = (
        "Try: 8 heads, then 12 (not a power of two: 4 slopes slot in between); show head 1 and "
        "then the last; switch causal and symmetric."
    )
    title = "ALiBi: each head's slope and the bias matrix of one head"
    consts = {"args": {"max_heads": top, "max_len": n_max}}
    return Explorer("alibi", "alibi", title, params, consts, compute, figure, alt, hint)


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
    hint = (
        "Try: move the query patch along a row: on the right the patch below scores like a far "
        "one (raster order); on the left, the neighbours in both directions score alike."
    )
    return Explorer(
        "patch-scores", "patch-scores", title, params, consts, compute, figure, alt, hint
    )


# --------------------------------------------------------------- chapters 4 and 6 (issue 39)

SHIFT_PROJECTIONS = ("identity", "commuting", "random")
ROPE_PAIR_MODES = ("correct", "layouts-mixed", "key-unrotated")


def _commuting_part(a: torch.Tensor) -> torch.Tensor:
    """The part of ``a`` (d x d) that commutes with every shift matrix M_k (chapter 4,
    Proposition "When the position–position term is relative"): each diagonal 2 x 2 block
    replaced by [[x, y], [-y, x]] with x = (a00 + a11)/2, y = (a01 - a10)/2, zeros elsewhere."""
    out = torch.zeros_like(a)
    for i in range(0, a.shape[0], 2):
        x = (a[i, i] + a[i + 1, i + 1]) / 2
        y = (a[i, i + 1] - a[i + 1, i]) / 2
        out[i : i + 2, i : i + 2] = torch.stack((torch.stack((x, y)), torch.stack((-y, x))))
    return out


def shift_explorer(
    *,
    d_model: int = 16,
    base: float = 10000.0,
    n_positions: int = 64,
    max_offset: int = 32,
    head_dim: int = 4,
    seed: int = 0,
) -> Explorer:
    """The shift matrix M_k: PE(p + k) beside M_k PE(p) (equal for every p), and the
    position–position term PE(p)^T A PE(p + k) for every p behind a matrix A between the two
    encodings: constant in p when A commutes with the shifts, not for a random head.

    Controls: ``position`` (p, 0..n_positions - 1, default 10); ``offset`` (k, -max_offset..
    max_offset, default 5); ``projection``: ``"identity"`` (A = I), ``"random"`` (A = W_Q W_K^T /
    sqrt(head_dim), W_Q and W_K seeded Gaussian over sqrt(d_model), shape (d_model, head_dim),
    as in chapter 4) or ``"commuting"``
    (the part of that A that commutes with every M_k, as in chapter 4).

    Data: ``encoding`` PE(p), ``shifted`` PE(p + k), ``rotated`` M_k PE(p) (each ``(d_model,)``,
    :func:`~posenc_core.sinusoidal.sinusoidal_encoding`,
    :func:`~posenc_core.rotation.shift_matrix`); ``positions`` 0..n_positions - 1 and
    ``scores`` PE(p')^T A PE(p' + k) at each; ``score`` the one at p. All float64.

    Args:
        d_model: width, an even integer in 2..64.
        base: frequency base, finite and > 1.
        n_positions: positions p' of the score curve, 2..1024.
        max_offset: largest abs(k), 1..1024.
        head_dim: width of the random head, 1..d_model.
        seed: the random head's seed.

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"shift"``.
    """
    d = check.even_int("d_model", d_model)
    if d > 64:
        raise ValueError(f"d_model must be an even integer in 2..64, got {d}")
    base = check.base_value("base", base)
    n = check.int_in_range("n_positions", n_positions, 2, 1024)
    kmax = check.int_in_range("max_offset", max_offset, 1, 1024)
    hd = check.int_in_range("head_dim", head_dim, 1, d)
    g = torch.Generator().manual_seed(check.non_negative_int("seed", seed))
    w_q, w_k = torch.randn(2, d, hd, generator=g, dtype=torch.float64) / math.sqrt(d)
    a_random = w_q @ w_k.T / math.sqrt(hd)
    matrices = {
        "identity": torch.eye(d, dtype=torch.float64),
        "commuting": _commuting_part(a_random),
        "random": a_random,
    }
    params = [
        Param("position", "position p", "int", min(10, n - 1), 0, n - 1),
        Param("offset", "offset k", "int", min(5, kmax), -kmax, kmax),
        Param(
            "projection",
            "A between PE(p) and PE(p + k)",
            "choice",
            "random",
            options=SHIFT_PROJECTIONS,
            labels=("A = I", "commuting part", "random head"),
        ),
    ]
    positions = torch.arange(n, dtype=torch.float64)
    table = sinusoidal_encoding(positions, d, base=base, dtype=torch.float64)  # (n, d)

    def scores(a: torch.Tensor, k: int) -> torch.Tensor:
        shifted = sinusoidal_encoding(positions + k, d, base=base, dtype=torch.float64)
        return ((table @ a) * shifted).sum(-1)  # (n,)

    # the score axis of each A: every p' and k the controls reach, so a flat curve looks flat
    ylim = {}
    for name, a in matrices.items():
        every = torch.stack([scores(a, k) for k in range(-kmax, kmax + 1)])
        lo, hi = every.min().item(), every.max().item()
        pad = 0.06 * (hi - lo) or 0.5
        ylim[name] = [lo - pad, hi + pad]

    def compute(v: dict) -> Data:
        p, k = v["position"], v["offset"]
        pe = sinusoidal_encoding(torch.tensor([p, p + k], dtype=torch.float64), d, base=base,
                                 dtype=torch.float64)  # fmt: skip
        curve = scores(matrices[v["projection"]], k)
        return {
            "encoding": pe[0].numpy(),
            "shifted": pe[1].numpy(),
            "rotated": (shift_matrix(k, d, base=base, dtype=torch.float64) @ pe[0]).numpy(),
            "positions": positions.numpy(),
            "scores": curve.numpy(),
            "score": float(curve[p]),
        }

    def figure(data: Data, v: dict) -> Any:
        return explorer_frames.shift_figure(
            data["shifted"],
            data["rotated"],
            data["positions"],
            data["scores"],
            position=v["position"],
            offset=v["offset"],
            projection=_SHIFT_LABELS[v["projection"]],
            ylim=tuple(ylim[v["projection"]]),
        )

    def alt(v: dict, data: Data) -> str:
        p, k = v["position"], v["offset"]
        flat = "constant" if v["projection"] != "random" else "changing"
        return (
            f"Top: the {d} entries of PE({p + k}) as a line and of M_{k} PE({p}) as rings, which "
            f"sit on it. Bottom: the position-position term PE(p) A PE(p + {k}) for p from 0 to "
            f"{n - 1} with {_SHIFT_LABELS[v['projection']]}, {flat} along p"
        )

    hint = (
        "Try: move p with k fixed: the rings stay on the line, and the bottom curve is flat "
        "for A = I and the commuting part, not for the random head."
    )
    title = f"The shift matrix M_k on a {d}-dimensional sinusoidal encoding, and behind a head"
    consts = {"d_model": d, "base": base, "n_positions": n, "ylim": ylim}
    consts["matrices"] = {name: a.numpy() for name, a in matrices.items()}
    consts["args"] = {"d_model": d, "base": base, "n_positions": n, "max_offset": kmax,
                      "head_dim": hd, "seed": seed}  # fmt: skip
    return Explorer("shift", "shift", title, params, consts, compute, figure, alt, hint)


_SHIFT_LABELS = {
    "identity": "A = I",
    "commuting": "the commuting part of a random head",
    "random": "a random head",
}


def rope_pair_explorer(
    *, head_dim: int = 8, base: float = 100.0, max_position: int = 63, seed: int = 0
) -> Explorer:
    """One query and one key (seeded, trained with the interleaved layout) rotated pair by
    pair at positions m and n, their score, and the score of the same two tokens with both
    positions moved by t = 0..max_position: constant in t with RoPE, also with the layouts
    mixed (another relative score), not with the key left unrotated.

    Controls: ``m`` and ``n`` (0..max_position; default 5 and 2); ``rotation``:
    ``"correct"`` (both rotated with ``layout="interleaved"``), ``"layouts-mixed"`` (both with
    the half-split rotation, ``layout="half"``, as interleaved weights run unconverted in a
    half-split implementation) or ``"key-unrotated"`` (the query rotated, the key not).

    Data: ``q_rot``, ``k_rot`` ``(head_dim,)``
    (:func:`~posenc_core.rope.apply_rope` with :func:`~posenc_core.rope.rope_cos_sin`,
    float64), ``score`` their dot product; ``shifts`` 0..max_position, ``scores`` the score
    at (m + t, n + t) and ``scores_correct`` the same with correct RoPE.

    Args:
        head_dim: an even integer in 2..16.
        base: rope_theta, finite and > 1 (100: every pair turns visibly within 64 positions).
        max_position: largest m, n and shift t, 1..1024.
        seed: the seed of q and k.

    Returns:
        an :class:`~posenc_core.book.widgets.explorer.Explorer` named ``"rope-pair"``.
    """
    hd = check.even_int("head_dim", head_dim)
    if hd > 16:
        raise ValueError(f"head_dim must be an even integer in 2..16, got {hd}")
    base = check.base_value("base", base)
    top = check.int_in_range("max_position", max_position, 1, 1024)
    g = torch.Generator().manual_seed(check.non_negative_int("seed", seed))
    q, k = torch.randn(2, hd, generator=g, dtype=torch.float64)
    layouts = {  # rotation -> (the query's layout, the key's; None: not rotated)
        "correct": ("interleaved", "interleaved"),
        "layouts-mixed": ("half", "half"),
        "key-unrotated": ("interleaved", None),
    }
    params = [
        Param("m", "m (query)", "int", min(5, top), 0, top),
        Param("n", "n (key)", "int", min(2, top), 0, top),
        Param(
            "rotation",
            "rotation",
            "choice",
            "correct",
            options=ROPE_PAIR_MODES,
            labels=("correct RoPE", "layouts mixed", "key not rotated"),
        ),
    ]
    shifts = torch.arange(top + 1, dtype=torch.float64)

    def rotate(x: torch.Tensor, positions: torch.Tensor, layout: str | None) -> torch.Tensor:
        rows = x.expand(len(positions), hd)
        if layout is None:
            return rows.clone()
        cos, sin = rope_cos_sin(positions, hd, base=base, layout=layout, dtype=torch.float64)
        return apply_rope(rows, cos, sin, layout=layout)

    def along(m: int, n: int, rotation: str) -> torch.Tensor:
        lq, lk = layouts[rotation]
        return (rotate(q, m + shifts, lq) * rotate(k, n + shifts, lk)).sum(-1)

    def compute(v: dict) -> Data:
        m, n = v["m"], v["n"]
        lq, lk = layouts[v["rotation"]]
        q_rot = rotate(q, torch.tensor([float(m)]), lq)[0]
        k_rot = rotate(k, torch.tensor([float(n)]), lk)[0]
        return {
            "q_rot": q_rot.numpy(),
            "k_rot": k_rot.numpy(),
            "score": float(q_rot @ k_rot),
            "shifts": shifts.numpy(),
            "scores": along(m, n, v["rotation"]).numpy(),
            "scores_correct": along(m, n, "correct").numpy(),
        }

    def figure(data: Data, v: dict) -> Any:
        return explorer_frames.rope_pair_figure(
            q.numpy(),
            k.numpy(),
            data["q_rot"],
            data["k_rot"],
            data["shifts"],
            {"this rotation": data["scores"], "correct RoPE": data["scores_correct"]},
            title=f"m = {v['m']}, n = {v['n']}, {v['rotation']}: score {data['score']:+.3f}",
            bound=bound,
        )

    def alt(v: dict, data: Data) -> str:
        s = data["scores"]
        return (
            f"{hd // 2} small panels, one per pair of a {hd}-dimensional query and key, each with "
            f"the query turned to position {v['m']} and the key to position {v['n']} "
            f"({v['rotation']}); below, their score as both positions move on together, from "
            f"{s.min():+.3f} to {s.max():+.3f}"
        )

    bound = float(q.norm() * k.norm())  # |<x, y>| <= |x| |y|, and rotations keep lengths
    hint = (
        "Try: move m and n together (same m − n): the score stays with correct RoPE; then pick "
        "key not rotated, and layouts mixed (flat again, but another score)."
    )
    title = f"RoPE on one query and one key, head_dim {hd}, base {base:g}"
    consts = {"head_dim": hd, "base": base, "q": q.numpy(), "k": k.numpy(), "bound": bound}
    consts["layouts"] = {mode: list(pair) for mode, pair in layouts.items()}
    consts["args"] = {"head_dim": hd, "base": base, "max_position": top, "seed": seed}
    return Explorer("rope-pair", "rope-pair", title, params, consts, compute, figure, alt, hint)
