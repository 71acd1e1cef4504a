"""The explorers' Python side (posenc_core.book.widgets): the numbers each one computes with
posenc_core, checked against independent references written from the definitions; the spec and
widget state the browser receives; argument checks; the no-JavaScript stand-in. What the
browser computes and draws from that state is checked in tests/built/test_explorers.py.
"""

from __future__ import annotations

import json
import math
import re

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import posenc_core as pc  # noqa: E402
from posenc_core.book import figures, widgets  # noqa: E402
from posenc_core.book.widgets import explorer as explorer_module  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"

# ------------------------------------------------------------------ expected data, from posenc_core


def expected_sinusoidal(v):
    table = pc.sinusoidal_table(100, v["d_model"], dtype=torch.float64).numpy()
    return {"table": table, "fingerprint": table[v["position"]]}


def expected_base(v):
    b = float(v["base"])
    k = torch.arange(1001)
    return {
        "table": pc.sinusoidal_table(100, 128, base=b, dtype=torch.float64).numpy(),
        "wavelength": pc.sinusoidal_wavelengths(128, base=b).numpy(),
        "offsets": np.arange(1001),
        "similarity": pc.sinusoidal_similarity(k, 128, base=b).numpy(),
        "wavelength_reference": pc.sinusoidal_wavelengths(128, base=10000).numpy(),
        "similarity_reference": pc.sinusoidal_similarity(k, 128, base=10000).numpy(),
    }


STARTS = (0, 10, 25)


def expected_unit_circle(v):
    i, k = v["pair"], v["offset"]
    starts = torch.tensor(STARTS, dtype=torch.float64)
    omega = pc.sinusoidal_frequencies(16)[i].item()
    return {
        "omega": omega,
        "angle": omega * k,
        "starts": np.array(STARTS),
        "start_points": pc.sinusoidal_encoding(starts, 16, dtype=torch.float64)[
            :, 2 * i : 2 * i + 2
        ].numpy(),
        "end_points": pc.sinusoidal_encoding(starts + k, 16, dtype=torch.float64)[
            :, 2 * i : 2 * i + 2
        ].numpy(),
        "matrix": pc.shift_matrix(k, 16, dtype=torch.float64)[
            2 * i : 2 * i + 2, 2 * i : 2 * i + 2
        ].numpy(),
    }


DISTANCES = np.unique(np.round(np.logspace(0, 5, 600)).astype(np.int64))


def expected_rope_decay(v):
    b, m = float(v["base"]), v["distance"]
    d = torch.from_numpy(DISTANCES)
    return {
        "distances": DISTANCES,
        "score": pc.rope_score_vs_distance(d, 128, base=b).numpy(),
        "bound": (
            pc.rope_decay_bound(d, 128, base=b) / pc.rope_decay_bound(0, 128, base=b)
        ).numpy(),
        "marker": np.array([m, pc.rope_score_vs_distance(m, 128, base=b).item()]),
    }


def expected_rope_scaling(v):
    s, method = v["factor"], v["method"]
    # the settings documented in rope_scaling_explorer: Llama 2 for four methods, Llama 3.1 for
    # llama3
    setups = {
        "linear": (10000, {"rope_type": "linear", "factor": s}, None),
        "ntk": (10000, {"rope_type": "ntk", "factor": s}, None),
        "dynamic": (
            10000,
            {"rope_type": "dynamic", "factor": s, "original_max_position_embeddings": 4096},
            round(s * 4096),
        ),
        "yarn": (
            10000,
            {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": 4096},
            None,
        ),
        "llama3": (
            500000,
            {
                "rope_type": "llama3",
                "factor": s,
                "original_max_position_embeddings": 8192,
                "low_freq_factor": 1,
                "high_freq_factor": 4,
            },
            None,
        ),
    }
    base, scaling, seq_len = setups[method]
    original = pc.rope_frequencies(128, base=base)
    scaled = pc.rope_frequencies(128, base=base, scaling=scaling, seq_len=seq_len)
    train_len = 8192 if method == "llama3" else 4096
    before, after = (2 * math.pi / original).numpy(), (2 * math.pi / scaled).numpy()
    return {
        "wavelength": before,
        "inv_freq_original": original.numpy(),
        "inv_freq": scaled.numpy(),
        "ratio": (scaled / original).numpy(),
        "wavelength_scaled": after,
        # a pair that turned at least once within the training length and no longer does
        "crosses": np.array([b <= train_len < a for b, a in zip(before, after)]),
        "train_len": train_len,
    }


def alibi_slopes_by_hand(n):
    """Press et al.'s rule written out in exact exponents: for c the largest power of two <= n,
    2**(-8h/c) for h = 1..c, then 2**(-8(2k-1)/(2c)) for k = 1..n-c (every other of 2c)."""
    c = 1 << (n.bit_length() - 1)
    exps = [-8 * h / c for h in range(1, c + 1)]
    exps += [-8 * (2 * k - 1) / (2 * c) for k in range(1, n - c + 1)]
    return np.array([2.0**e for e in exps])


def expected_alibi(v):
    slopes = alibi_slopes_by_hand(v["heads"])
    m, n = slopes[v["head"] - 1], v["length"]
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    causal = v["variant"] == "causal"
    allowed = (j <= i) if causal else np.ones((n, n), dtype=bool)
    bias = -m * (i - j) if causal else -m * np.abs(i - j)
    return {"slopes": slopes, "slope": m, "bias": np.where(allowed, bias, 0.0), "allowed": allowed}


def expected_patch_scores(v):
    """Written out from the definitions, not from posenc_core.multi_axis: every patch holds the
    same content q = k, so each pair contributes (q_j**2 + q_{j+d/2}**2) cos(theta * offset);
    under axial RoPE pairs 0..d/4-1 take the row offset and d/4..d/2-1 the column offset, with
    theta_j = base**(-4 (j mod d/4) / d); under the raster order the offset is the 1-D index
    difference and theta_i = base**(-2i/d)."""
    n, d, base = 8, 32, 100.0
    q = torch.randn(d, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    weight = (q[: d // 2] ** 2 + q[d // 2 :] ** 2).numpy()  # (d/2,)
    r, c = v["row"], v["col"]
    rows, cols = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    quarter = d // 4
    th = base ** (-4 * (np.arange(d // 2) % quarter) / d)
    offset = np.where(np.arange(d // 2) < quarter, 1, 0)[:, None, None]
    delta = offset * (rows - r)[None] + (1 - offset) * (cols - c)[None]  # (d/2, n, n)
    axial = (weight[:, None, None] * np.cos(th[:, None, None] * delta)).sum(0)
    th1 = base ** (-2 * np.arange(d // 2) / d)
    raster_delta = (rows * n + cols) - (r * n + c)
    raster = (weight[:, None, None] * np.cos(th1[:, None, None] * raster_delta[None])).sum(0)

    def at(rr, cc):
        return [axial[rr, cc], raster[rr, cc]] if rr < n and cc < n else [None, None]

    return {"axial": axial, "raster": raster, "below": at(r + 1, c), "right": at(r, c + 1)}


def sinusoid_rows(positions, d, base):
    """PE(p) from the definition: sin(p w_i), cos(p w_i) on dims 2i, 2i+1, w_i = base**(-2i/d)."""
    w = base ** (-np.arange(0, d, 2) / d)
    angle = np.asarray(positions, dtype=float)[:, None] * w
    return np.stack([np.sin(angle), np.cos(angle)], -1).reshape(len(angle), d)


def shift_matrices():
    """The three A of the shift explorer, as its docstring builds them: seeded Gaussian W_Q,
    W_K (16 x 4) / sqrt(16), A = W_Q W_K^T / sqrt(4); its commuting part keeps each diagonal
    2 x 2 block [[a, b], [-b, a]], a = (A00 + A11)/2, b = (A01 - A10)/2."""
    w_q, w_k = torch.randn(
        2, 16, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64
    )
    a = (w_q @ w_k.T).numpy() / 16 / 2
    comm = np.zeros_like(a)
    for i in range(0, 16, 2):
        x, y = (a[i, i] + a[i + 1, i + 1]) / 2, (a[i, i + 1] - a[i + 1, i]) / 2
        comm[i : i + 2, i : i + 2] = [[x, y], [-y, x]]
    return {"identity": np.eye(16), "commuting": comm, "random": a}


def expected_shift(v):
    """PE(p + k) computed directly stands for M_k PE(p) (the theorem the explorer shows)."""
    p, k = v["position"], v["offset"]
    table, shifted = sinusoid_rows(range(64), 16, 1e4), sinusoid_rows(np.arange(64) + k, 16, 1e4)
    scores = np.einsum("pi,ij,pj->p", table, shift_matrices()[v["projection"]], shifted)
    return {
        "encoding": table[p],
        "shifted": shifted[p],
        "rotated": shifted[p],
        "positions": np.arange(64),
        "scores": scores,
        "score": scores[p],
    }


def rope_by_hand(x, m, layout, base=100.0):
    """x turned to position m pair by pair with 2 x 2 rotations: pairs (2i, 2i+1) interleaved,
    (i, i + d/2) half; layout None leaves x as it is."""
    if layout is None:
        return x.copy()
    d = len(x)
    out = x.copy()
    for i in range(d // 2):
        a, b = (2 * i, 2 * i + 1) if layout == "interleaved" else (i, i + d // 2)
        t = m * base ** (-2 * i / d)
        out[a] = x[a] * math.cos(t) - x[b] * math.sin(t)
        out[b] = x[b] * math.cos(t) + x[a] * math.sin(t)
    return out


ROPE_PAIR_LAYOUTS = {
    "correct": ("interleaved", "interleaved"),
    "layouts-mixed": ("half", "half"),
    "key-unrotated": ("interleaved", None),
}


def expected_rope_pair(v):
    q, k = torch.randn(2, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    q, k = q.numpy(), k.numpy()
    m, n = v["m"], v["n"]

    def along(rotation):
        lq, lk = ROPE_PAIR_LAYOUTS[rotation]
        return np.array([
            rope_by_hand(q, m + t, lq) @ rope_by_hand(k, n + t, lk) for t in range(64)
        ])  # fmt: skip

    lq, lk = ROPE_PAIR_LAYOUTS[v["rotation"]]
    q_rot, k_rot = rope_by_hand(q, m, lq), rope_by_hand(k, n, lk)
    return {
        "q_rot": q_rot,
        "k_rot": k_rot,
        "score": q_rot @ k_rot,
        "shifts": np.arange(64),
        "scores": along(v["rotation"]),
        "scores_correct": along("correct"),
    }


EXPLORERS = {
    "sinusoidal": (widgets.sinusoidal_explorer, expected_sinusoidal),
    "base": (widgets.base_explorer, expected_base),
    "unit-circle": (widgets.unit_circle_explorer, expected_unit_circle),
    "rope-decay": (widgets.rope_decay_explorer, expected_rope_decay),
    "rope-scaling": (widgets.rope_scaling_explorer, expected_rope_scaling),
    "rope-spectrum": (
        lambda: widgets.rope_scaling_explorer(view="spectrum"),
        expected_rope_scaling,
    ),
    "patch-scores": (widgets.patch_score_explorer, expected_patch_scores),
    "alibi": (widgets.alibi_explorer, expected_alibi),
    "rope-pair": (widgets.rope_pair_explorer, expected_rope_pair),
    "shift": (widgets.shift_explorer, expected_shift),
}
NAMES = list(EXPLORERS)
KIND = {"rope-spectrum": "rope-scaling"}  # an explorer named otherwise than its drawing
# Values for each explorer: off the round numbers a slider would stop at
# (base 31000, position 37, d_model 130, factor 5.5, distance 1234), and the ends of each range.
VALUES = {
    "rope-pair": [
        {"m": 5, "n": 2, "rotation": "correct"},
        {"m": 63, "n": 0, "rotation": "layouts-mixed"},
        {"m": 0, "n": 63, "rotation": "key-unrotated"},
        {"m": 37, "n": 37, "rotation": "correct"},
        {"m": 11, "n": 29, "rotation": "layouts-mixed"},
    ],
    "shift": [
        {"position": 10, "offset": 5, "projection": "random"},
        {"position": 63, "offset": -32, "projection": "identity"},
        {"position": 0, "offset": 32, "projection": "commuting"},
        {"position": 37, "offset": 0, "projection": "random"},
        {"position": 21, "offset": -7, "projection": "commuting"},
    ],
    "sinusoidal": [
        {"d_model": 128, "position": 40},
        {"d_model": 130, "position": 37},
        {"d_model": 2, "position": 0},
        {"d_model": 512, "position": 99},
        {"d_model": 18, "position": 73},
    ],
    "base": [{"base": b} for b in (10000.0, 31000.0, 10.0, 1e7, 123.456, 2718281.8)],
    "unit-circle": [
        {"pair": 0, "offset": 3},
        {"pair": 7, "offset": 100},
        {"pair": 3, "offset": 0},
        {"pair": 5, "offset": 37},
        {"pair": 1, "offset": 64},
    ],
    "rope-decay": [
        {"base": 10000.0, "distance": 1000},
        {"base": 31000.0, "distance": 1234},
        {"base": 100.0, "distance": 1},
        {"base": 1e7, "distance": 100000},
        {"base": 500000.0, "distance": 77777},
    ],
    "rope-scaling": [
        {"factor": f, "method": m}
        for f, m in [
            (8.0, "linear"),
            (5.5, "ntk"),
            (1.0, "dynamic"),
            (32.0, "yarn"),
            (3.3, "llama3"),
            (12.7, "yarn"),
        ]
    ],
    "rope-spectrum": [
        {"factor": f, "method": m}
        for f, m in [
            (8.0, "linear"),
            (2.5, "ntk"),
            (32.0, "yarn"),
            (1.0, "llama3"),
            (5.5, "dynamic"),
        ]
    ],
    "alibi": [
        {"heads": 8, "head": 1, "length": 16, "variant": "causal"},
        {"heads": 12, "head": 9, "length": 33, "variant": "symmetric"},
        {"heads": 1, "head": 1, "length": 2, "variant": "causal"},
        {"heads": 64, "head": 64, "length": 48, "variant": "symmetric"},
        {"heads": 37, "head": 35, "length": 7, "variant": "causal"},
    ],
    "patch-scores": [
        {"row": 4, "col": 4},
        {"row": 7, "col": 7},
        {"row": 0, "col": 7},
        {"row": 7, "col": 0},
        {"row": 2, "col": 5},
    ],
}


@pytest.fixture(scope="module")
def built():
    return {name: make() for name, (make, _) in EXPLORERS.items()}


def assert_data(name, data, values):
    expected = EXPLORERS[name][1](values)
    assert set(data) == set(expected), data.keys()
    for key, want in expected.items():
        got = data[key]
        if key in ("below", "right") and want[0] is None:
            assert got == [None, None], (key, got)
            continue
        np.testing.assert_allclose(
            np.asarray(got, dtype=float),
            np.asarray(want, dtype=float),
            rtol=1e-12,
            atol=1e-12,
            err_msg=f"{name}: data[{key!r}] at {values}",
        )


# ------------------------------------------------------------------ the numbers


@pytest.mark.parametrize("name", NAMES)
def test_compute_matches_the_definitions_at_any_value(built, name):
    e = built[name]
    for values in VALUES[name]:
        assert_data(name, e.compute(values), values)
        e.set(**values)
        assert e.values == values and e.last_error is None
        assert_data(name, e.data, values)
    e.set(**e.defaults)


def test_rope_pair_score_is_relative_unless_the_key_is_left_unrotated(built):
    """Chapter 6: with RoPE the score of two tokens moved on together does not change; with the
    layouts mixed it is still relative but another score; a key left unrotated breaks it."""
    e = built["rope-pair"]
    spread = {}
    for rotation in ROPE_PAIR_LAYOUTS:
        data = e.compute({"m": 21, "n": 4, "rotation": rotation})
        spread[rotation] = np.ptp(data["scores"]) / np.abs(data["scores_correct"]).max()
        np.testing.assert_allclose(np.linalg.norm(data["q_rot"]), np.linalg.norm(
            widgets.rope_pair_explorer().compute({"m": 0, "n": 0, "rotation": "key-unrotated"})[
                "q_rot"]), rtol=1e-14)  # fmt: skip
    assert spread["correct"] < 1e-13 and spread["layouts-mixed"] < 1e-13
    assert spread["key-unrotated"] > 0.5
    mixed = e.compute({"m": 21, "n": 4, "rotation": "layouts-mixed"})
    assert abs(mixed["score"] - mixed["scores_correct"][0]) > 0.1


def test_shift_rings_sit_on_the_line_and_only_a_commuting_a_keeps_the_term_relative(built):
    """Chapter 4: M_k PE(p) = PE(p + k) for every p and k; PE(p)^T A PE(p + k) is the same for
    every p when A = I or A commutes with the shifts, not for a random head."""
    e = built["shift"]
    for p, k in ((0, 0), (63, -32), (17, 32), (40, -1)):
        data = e.compute({"position": p, "offset": k, "projection": "random"})
        np.testing.assert_allclose(data["rotated"], data["shifted"], atol=1e-14)
    for projection, flat in (("identity", True), ("commuting", True), ("random", False)):
        scores = e.compute({"position": 3, "offset": 9, "projection": projection})["scores"]
        assert (np.ptp(scores) < 1e-12 * np.abs(scores).max()) == flat, projection


def test_patch_scores_at_the_edge_are_none_not_nan(built):
    e = built["patch-scores"]
    data = e.compute({"row": 7, "col": 3})
    assert data["below"] == [None, None] and data["right"][0] is not None
    assert json.dumps(explorer_module._json_ready(data["below"])) == "[null, null]"


def test_values_from_the_browser_update_data_and_bad_ones_are_recorded(built):
    e = built["base"]
    e.widget.values = {"base": 31000.0}  # what the front end sends when a reader types 31000
    assert e.last_error is None
    np.testing.assert_allclose(
        e.data["wavelength"], pc.sinusoidal_wavelengths(128, base=31000.0).numpy(), rtol=1e-15
    )
    e.widget.values = {"base": 5.0}
    assert isinstance(e.last_error, ValueError) and "base" in str(e.last_error)
    np.testing.assert_allclose(
        e.data["wavelength"], pc.sinusoidal_wavelengths(128, base=31000.0).numpy(), rtol=1e-15
    )
    e.set(base=10000.0)
    assert e.last_error is None or e.values == {"base": 10000.0}


def test_bad_set_calls_name_the_parameter(built):
    e = built["sinusoidal"]
    with pytest.raises(
        TypeError,
        match=r"unknown parameter\(s\) base; the sinusoidal explorer has d_model, position",
    ):
        e.set(base=100)
    with pytest.raises(ValueError, match=r"position must be an integer in 0..99, got 100"):
        e.set(position=100)
    with pytest.raises(TypeError, match=r"position must be an integer in 0..99, got float 1.5"):
        e.set(position=1.5)
    with pytest.raises(ValueError, match=r"d_model must be 2 plus a multiple of 2, got 129"):
        e.set(d_model=129)
    with pytest.raises(ValueError, match=r"base must be a real number in \[10, 1e\+07\], got 5.0"):
        built["base"].set(base=5)
    with pytest.raises(ValueError, match=r"method must be one of .*'rope'"):
        built["rope-scaling"].set(method="rope")
    assert e.values == {"d_model": 128, "position": 40} and e.last_error is None


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda: widgets.sinusoidal_explorer(n_positions=1), ValueError, r"n_positions .* got 1"),
        (
            lambda: widgets.sinusoidal_explorer(n_positions=2.5),
            TypeError,
            r"n_positions .* float 2.5",
        ),
        (lambda: widgets.base_explorer(d_model=7), ValueError, r"d_model .* even .* got 7"),
        (lambda: widgets.base_explorer(max_offset=0), ValueError, r"max_offset .* got 0"),
        (lambda: widgets.unit_circle_explorer(starts=()), ValueError, r"starts .* 1 to 4"),
        (
            lambda: widgets.unit_circle_explorer(base=1),
            ValueError,
            r"base .* greater than 1, got 1",
        ),
        (
            lambda: widgets.unit_circle_explorer(starts=(0, -1)),
            ValueError,
            r"starts\[1\] must be an integer in 0\.\.1000000, got -1",
        ),
        (
            lambda: widgets.unit_circle_explorer(base="10000"),
            TypeError,
            r"base must be a real number, got str '10000'",
        ),
        (lambda: widgets.rope_decay_explorer(max_distance=5), ValueError, r"max_distance .* got 5"),
        (lambda: widgets.rope_scaling_explorer(head_dim=6.0), TypeError, r"head_dim .* float 6.0"),
        (lambda: widgets.patch_score_explorer(head_dim=30), ValueError, r"multiple of 4 .* 30"),
        (lambda: widgets.scaling_setup("su", 2), ValueError, r"method must be one of .*'su'"),
        (
            lambda: widgets.Param("x", "x", "slider", 1),
            ValueError,
            r"kind must be one of 'int', 'real', 'choice'",
        ),
    ],
)
def test_bad_arguments_name_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


# ------------------------------------------------------------------ what the browser receives


@pytest.mark.parametrize("name", NAMES)
def test_widget_state_carries_the_module_the_spec_and_the_values(built, name):
    e = built[name]
    state = e.widget.get_state()
    source = (explorer_module.HERE / "explorer.js").read_text(encoding="utf-8")
    assert state["_esm"] == source and "export default { render }" in source
    assert state["_css"] == (explorer_module.HERE / "explorer.css").read_text(encoding="utf-8")
    assert state["values"] == e.defaults
    spec = json.loads(json.dumps(state["spec"], allow_nan=False))  # JSON, no NaN
    assert spec["name"] == name and spec["kind"] == KIND.get(name, name)
    assert len(spec["hint"]) > 40  # a line on what to try
    assert [p["name"] for p in spec["params"]] == list(e.params)
    for p in spec["params"]:
        param = e.params[p["name"]]
        if param.kind == "choice":
            assert [o["value"] for o in p["options"]] == list(param.options)
        else:
            assert (p["min"], p["max"], p["step"], p["log"]) == (
                param.lo,
                param.hi,
                param.step,
                param.log,
            )


def test_the_kinds_of_explorer_js_are_the_explorers_and_its_formulas_name_core_functions():
    source = (explorer_module.HERE / "explorer.js").read_text(encoding="utf-8")
    kinds = set(re.findall(r'^  "?([a-z-]+)"?: \{$', source, re.M))
    assert kinds == {KIND.get(n, n) for n in NAMES} | {"position-loss"}
    exported = re.findall(r"^export function (\w+)\(", source, re.M)
    assert len(exported) >= 8
    modules = [pc, pc.analysis, pc.multi_axis, pc.rotation]
    for fn in exported:
        mirrored = fn.removesuffix("_block")  # shift_matrix_block: one block of shift_matrix
        assert any(hasattr(m, mirrored) for m in modules), fn


def test_display_emits_the_widget_then_a_noscript_figure_with_caption(built, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    e = built["rope-decay"]
    e._ipython_display_()
    assert shown[0] is e.widget
    html_text = shown[1].data
    assert html_text.startswith("<noscript><figure") and "<figcaption>" in html_text
    src = re.search(r'src="data:image/png;base64,([^"]+)"', html_text).group(1)
    import base64

    assert base64.b64decode(src).startswith(PNG)
    assert "RoPE score" in re.search(r'alt="([^"]+)"', html_text).group(1)


def test_on_colab_the_custom_widget_manager_is_switched_on_once(built, monkeypatch):
    import sys
    import types

    calls = []
    colab = types.ModuleType("google.colab")
    colab.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: calls.append(1))
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(explorer_module, "_COLAB_READY", [])
    monkeypatch.setattr("IPython.display.display", lambda obj: None)
    built["patch-scores"]._ipython_display_()
    built["rope-scaling"]._ipython_display_()
    assert calls == [1]


@pytest.mark.parametrize("name", NAMES)
def test_the_stand_in_figure_differs_with_the_values(built, name):
    e = built[name]
    a, b = e.figure_png(VALUES[name][0]), e.figure_png(VALUES[name][1])
    assert a.startswith(PNG) and b.startswith(PNG) and a != b


def test_the_sinusoidal_stand_in_is_chapter_2s_figure(built):
    """Chapter 2 draws figures.sinusoidal_heatmap(100, 128, highlight=40): the explorer's
    defaults, so the stand-in is the same picture."""
    from posenc_core.book.figures import explorer_frames

    fig = figures.sinusoidal_heatmap(100, 128, highlight=40)
    chapter = explorer_frames.figure_png(
        fig, dpi=explorer_module.NOSCRIPT_DPI, colors=explorer_module.NOSCRIPT_COLORS
    )
    assert built["sinusoidal"].figure_png() == chapter


# each explorer whose quantity a chapter also draws -> the chapter's figure function
CHAPTER_FIGURES = {
    "sinusoidal": "sinusoidal_heatmap",
    "unit-circle": "unit_circle_figure",
    "rope-decay": "paired_curves_figure",
    "rope-scaling": "marked_curves_figure",
    "rope-spectrum": "marked_curves_figure",
    "alibi": "masked_matrices_figure",
    "position-loss": "position_loss_figure",
}


@pytest.mark.parametrize("name", CHAPTER_FIGURES)
def test_the_stand_in_is_drawn_by_the_chapters_figure_function(built, name, monkeypatch):
    real, calls = getattr(figures, CHAPTER_FIGURES[name]), []

    def spy(*args, **kwargs):
        calls.append((args, kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(figures, CHAPTER_FIGURES[name], spy)
    e = make_loss_explorer() if name == "position-loss" else built[name]
    assert e.figure_png().startswith(PNG)
    assert len(calls) == 1
    args, kwargs = calls[0]
    if name == "position-loss":  # the shown curve and its reference, as (S, P) stacks
        ((curves,),) = [p.values() for p in args[0].values()]
        np.testing.assert_array_equal(curves, loss_curves()[("a", 4, 0)])
        np.testing.assert_array_equal(kwargs["reference"]["plain"], loss_curves(seed=1)[
            ("none", None, None)])  # fmt: skip


# ------------------------------------------------------------------ the position-loss explorer


def loss_curves(seed=0, n_seeds=3, positions=96):
    """Synthetic per-seed curves keyed (method, factor, steps), with wildcard and missing keys."""
    g = np.random.default_rng(seed)
    base = np.linspace(2.0, 1.0, positions)

    def c(offset):
        return base + offset + 0.01 * g.standard_normal((n_seeds, positions))

    return {
        ("none", None, None): c(0.0),
        ("a", 4, 0): c(0.1),
        ("a", 8, 0): c(0.2),
        ("a", 4, 25): c(0.3),
        ("b", 4, 0): c(0.4),
        ("b", 8, 0): c(0.5),
    }


def make_loss_explorer(**kw):
    return widgets.position_loss_explorer(
        loss_curves(),
        train_len=16,
        controls=("method", "factor", "fine-tune steps"),
        reference=("plain", loss_curves(seed=1)[("none", None, None)]),
        default=("a", 4, 0),
        **kw,
    )


def expected_loss_key(values):
    """The documented fallback, written out: exact or wildcard match, else reset steps to 0,
    then the factor to 4 (the defaults), else the default key."""
    m, s, n = values["method"], values["factor"], values["fine_tune_steps"]
    keys = list(loss_curves())
    for want in ((m, s, n), (m, s, 0), (m, 4, 0)):
        for k in keys:
            if all(a is None or a == b for a, b in zip(k, want)):
                return k
    return ("a", 4, 0)


def every_combination(e):
    import itertools

    names = list(e.params)
    for combo in itertools.product(*(e.params[n].options for n in names)):
        yield dict(zip(names, combo))


def test_loss_explorer_controls_follow_the_keys():
    e = make_loss_explorer()
    assert {n: p.options for n, p in e.params.items()} == {
        "method": ("none", "a", "b"),
        "factor": (4, 8),
        "fine_tune_steps": (0, 25),
    }
    assert [p.label for p in e.params.values()] == ["method", "factor", "fine-tune steps"]
    assert e.values == {"method": "a", "factor": 4, "fine_tune_steps": 0}


def test_loss_explorer_data_at_every_combination_and_the_page_copy_is_exact():
    e = make_loss_explorer()
    curves = loss_curves()
    spec = e.widget.spec["consts"]
    for values in every_combination(e):
        key = expected_loss_key(values)
        wanted = tuple(values.values())
        assert widgets.resolve_curve(list(curves), ("a", 4, 0), wanted, ("a", 4, 0)) == key
        data = e.compute(values)
        assert tuple(data["shown"]) == key
        a = curves[key]
        w = 8  # default bucket; 96 positions = 12 whole buckets
        per_seed = a.reshape(3, 12, w).mean(2)
        np.testing.assert_allclose(data["x"], np.arange(12) * w + (w - 1) / 2)
        np.testing.assert_allclose(data["mean"], per_seed.mean(0), rtol=1e-12)
        np.testing.assert_allclose(data["low"], per_seed.min(0), rtol=1e-12)
        np.testing.assert_allclose(data["high"], per_seed.max(0), rtol=1e-12)
        np.testing.assert_allclose(data["in_range"], a[:, 8:16].mean(1), rtol=1e-12)
        np.testing.assert_allclose(data["beyond"], a[:, 16:].mean(1), rtol=1e-12)
        (entry,) = [c for c in spec["curves"] if tuple(c["key"]) == key]
        for name in ("x", "mean", "low", "high", "in_range", "beyond"):
            assert entry[name] == np.asarray(data[name]).tolist(), name  # exactly, as floats


def test_loss_explorer_falls_back_as_documented():
    e = make_loss_explorer()
    assert e.compute({"method": "b", "factor": 8, "fine_tune_steps": 25})["shown"] == ["b", 8, 0]
    assert e.compute({"method": "a", "factor": 8, "fine_tune_steps": 25})["shown"] == ["a", 8, 0]
    none = e.compute({"method": "none", "factor": 8, "fine_tune_steps": 25})
    assert none["shown"] == ["none", None, None]


def test_loss_explorer_references_are_stored_once_with_their_means():
    x, y = list(loss_curves().values())[:2]
    e = widgets.position_loss_explorer(
        {"x": x, "y": y}, train_len=16, references={"x": ("done right", x - 0.1)}, name="bugs"
    )
    spec = e.widget.spec
    assert spec["name"] == "bugs" and spec["kind"] == "position-loss"
    consts = spec["consts"]
    assert [c["reference"] for c in consts["curves"]] == [0, None]
    (ref,) = consts["references"]
    assert ref["label"] == "done right"
    assert ref["in_range_mean"] == float((x - 0.1)[:, 8:16].mean())
    assert ref["beyond_mean"] == float((x - 0.1)[:, 16:].mean())
    band = figures.seed_band(x - 0.1, bucket=8)
    assert ref["mean"] == band[1].tolist() and ref["low"] == band[2].tolist()
    shared = make_loss_explorer().widget.spec["consts"]
    assert len(shared["references"]) == 1
    assert {c["reference"] for c in shared["curves"]} == {0}
    with pytest.raises(ValueError, match="not a key of curves"):
        widgets.position_loss_explorer({"x": x}, train_len=16, references={"z": ("r", x)})
    with pytest.raises(ValueError, match="same number of positions"):
        widgets.position_loss_explorer({"x": x}, train_len=16, references={"x": ("r", x[:, :40])})


def test_chapter_7_explorer_carries_every_curve_of_the_study_in_a_small_state():
    from posenc_core.book.studies import lm_curves, lm_study

    r = lm_study.load_results()
    curves = {("none", None, None): lm_curves.scheme_curves(r, "rope")}
    for m in lm_study.METHODS:
        for s in r["config"]["factors"]:
            curves[m, s, 0] = lm_curves.method_curves(r, m, s)
    for m in r["config"]["finetune_methods"]:
        for n in r["config"]["finetune_steps"]:
            curves[m, 4, n] = lm_curves.finetune_curves(r, m, n)
    e = widgets.position_loss_explorer(
        curves, train_len=64, controls=("method", "factor", "fine-tune steps")
    )
    consts = e.widget.spec["consts"]
    assert len(consts["curves"]) == len(curves)
    size = len(json.dumps(e.widget.get_state()["spec"]))
    assert size < 400_000, size  # numbers, not images


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"controls": ()}, ValueError, r"controls must be 1 to 3 descriptions"),
        ({"controls": ("method", "factor")}, ValueError, r"curves key .* one value per control"),
        ({"train_len": 96}, ValueError, r"must have shape \(S, P\) with P > train_len = 96"),
        ({"default": ("c", 4, 0)}, ValueError, r"default .* is not a key of curves"),
        ({"controls": ("a b", "a-b", "c")}, ValueError, r"controls must have distinct names"),
        ({"reference": ("r", np.ones((2, 50)))}, ValueError, r"same number of positions"),
        ({"train_len": 0}, ValueError, r"train_len"),
    ],
)
def test_loss_explorer_bad_arguments_name_the_argument(kwargs, error, pattern):
    args = {"train_len": 16, "controls": ("method", "factor", "fine-tune steps"), **kwargs}
    with pytest.raises(error, match=pattern):
        widgets.position_loss_explorer(loss_curves(), **args)
    bad = {("a", 4, 0): np.full((2, 40), np.nan)}
    with pytest.raises(ValueError, match=r"curves\[.*\] must be finite"):
        widgets.position_loss_explorer(bad, train_len=16, controls=("m", "f", "s"))
