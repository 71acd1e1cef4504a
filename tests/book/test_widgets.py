"""The interactive explorers, kernel side (no browser): every control over its whole range in
both modes, the static pages' structure (stacks, jslinks, labels, frames, size), mode
selection, and errors. The expected numbers are computed here directly with posenc_core."""

import base64
import html
import itertools
import math
import re

import matplotlib

matplotlib.use("Agg")

import ipywidgets  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from ipywidgets.widgets.widget_link import Link  # noqa: E402

import posenc_core as pc  # noqa: E402
from posenc_core.book import widgets  # noqa: E402
from posenc_core.book.studies import lm_curves

PNG = b"\x89PNG\r\n\x1a\n"
LIMIT_BYTES = 3_000_000  # embedded widget state per page (the widget contract)

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
    return {
        "wavelength": (2 * math.pi / original).numpy(),
        "inv_freq_original": original.numpy(),
        "inv_freq": scaled.numpy(),
        "ratio": (scaled / original).numpy(),
    }


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

    def at(g, rr, cc):
        return g[rr, cc] if rr < n and cc < n else np.nan

    return {
        "axial": axial,
        "raster": raster,
        "below": (at(axial, r + 1, c), at(raster, r + 1, c)),
        "right": (at(axial, r, c + 1), at(raster, r, c + 1)),
    }


EXPLORERS = {
    "sinusoidal": (widgets.sinusoidal_explorer, expected_sinusoidal),
    "base": (widgets.base_explorer, expected_base),
    "unit-circle": (widgets.unit_circle_explorer, expected_unit_circle),
    "rope-decay": (widgets.rope_decay_explorer, expected_rope_decay),
    "rope-scaling": (widgets.rope_scaling_explorer, expected_rope_scaling),
    "patch-scores": (widgets.patch_score_explorer, expected_patch_scores),
}
NAMES = list(EXPLORERS)
# The explorers each chapter page shows: their frames share the page's 3 MB budget.
PAGES = {
    "02_sinusoidal_formula": ["sinusoidal", "unit-circle"],
    "03_the_base": ["base", "rope-decay", "rope-scaling"],
    "09_beyond_one_axis": ["patch-scores"],
}


def assert_data(explorer, values):
    expected = EXPLORERS[explorer.name][1](values)
    assert set(explorer.data) == set(expected), explorer.data.keys()
    for key, want in expected.items():
        np.testing.assert_allclose(
            np.asarray(explorer.data[key], dtype=float),
            np.asarray(want, dtype=float),
            rtol=1e-12,
            atol=1e-12,
            err_msg=f"{explorer.name}: data[{key!r}] at {values}",
        )


def readouts(explorer):
    """What each control shows now: the selected option's label, or the slider's value."""
    out = {}
    for name, control in explorer.controls.items():
        if isinstance(control, (ipywidgets.SelectionSlider, ipywidgets.ToggleButtons)):
            out[name] = control._options_labels[control.index]
        elif isinstance(control, ipywidgets.FloatLogSlider):
            out[name] = f"{control.value:.0f}"  # its readout_format is ".0f"
            assert control.readout_format == ".0f"
        else:
            out[name] = str(control.value)
    return out


def assert_label_shows_controls(explorer, label):
    for name, text in readouts(explorer).items():
        assert f"{explorer.controls[name].description} = {text}" in label, (label, name, text)


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def static():
    """Every explorer in static mode, built once (prerendering all frames is the slow part)."""
    return {name: make(mode="static") for name, (make, _) in EXPLORERS.items()}


@pytest.fixture(scope="module")
def live():
    return {name: make(mode="live") for name, (make, _) in EXPLORERS.items()}


def walk_stacks(widget):
    """All Stack widgets under ``widget``, found by walking the children (not from the
    explorer's lists)."""
    found = []
    todo = [widget]
    while todo:
        w = todo.pop()
        if isinstance(w, ipywidgets.Stack):
            found.append(w)
        todo.extend(getattr(w, "children", ()))
    return found


def outer_stack(explorer):
    stacks = walk_stacks(explorer.widget)
    parents = {id(c) for s in stacks for c in s.children}
    (outer,) = [s for s in stacks if id(s) not in parents]
    return outer


def frame_at(explorer, indices):
    node = outer_stack(explorer)
    for i in indices:
        node = node.children[i]
    return node


def grid_points(explorer):
    names = list(explorer.controls)
    for combo in itertools.product(*(range(len(explorer.grid[n])) for n in names)):
        yield combo, {n: explorer.grid[n][i] for n, i in zip(names, combo)}


# ------------------------------------------------------------------ static mode


@pytest.mark.parametrize("name", NAMES)
def test_static_stacks_have_a_child_per_grid_value_and_frames_as_leaves(static, name):
    e = static[name]
    names = list(e.controls)
    assert e.mode == "static"
    for n in names:
        assert isinstance(e.controls[n], (ipywidgets.SelectionSlider, ipywidgets.ToggleButtons))
        assert [
            v for _, v in zip(e.controls[n]._options_labels, e.controls[n]._options_values)
        ] == e.grid[n]
    level = [outer_stack(e)]
    for n in names:
        assert all(
            isinstance(s, ipywidgets.Stack) and len(s.children) == len(e.grid[n]) for s in level
        )
        level = [c for s in level for c in s.children]
    assert len(level) == math.prod(len(e.grid[n]) for n in names)
    for frame in level:
        assert isinstance(frame, ipywidgets.VBox) and "posenc-frame" in frame._dom_classes
        label, image = frame.children
        assert isinstance(label, ipywidgets.HTML) and "posenc-frame-label" in label._dom_classes
        assert isinstance(image, ipywidgets.Image) and "posenc-frame-image" in image._dom_classes
        assert image.format == "png" and bytes(image.value).startswith(PNG)


@pytest.mark.parametrize("name", NAMES)
def test_static_jslinks_connect_each_control_index_to_its_stacks(static, name):
    e = static[name]
    names = list(e.controls)
    links = [w for w in e.links if isinstance(w, Link)]
    assert len(links) == len(e.links)
    expected = {}  # id(stack) -> the control that must drive it
    level = [outer_stack(e)]
    for n in names:
        for s in level:
            expected[id(s)] = e.controls[n]
        level = [c for s in level for c in s.children]
    assert len(links) == len(expected)
    targets = set()
    for link in links:
        (src, src_trait), (dst, dst_trait) = link.source, link.target
        assert src_trait == "index" and dst_trait == "selected_index"
        assert isinstance(dst, ipywidgets.Stack) and expected[id(dst)] is src
        targets.add(id(dst))
    assert targets == set(expected)  # every stack is driven, each by one link
    # the starting state agrees with what the links will enforce in the browser
    for link in links:
        assert link.target[0].selected_index == link.source[0].index


@pytest.mark.parametrize("name", NAMES)
def test_static_frame_labels_list_every_value_as_the_controls_show_it(static, name):
    e = static[name]
    names = list(e.controls)
    for combo, _ in grid_points(e):
        label = html.unescape(frame_at(e, combo).children[0].value)
        for n, i in zip(names, combo):
            c = e.controls[n]
            assert f"{c.description} = {c._options_labels[i]}" in label, (label, n)


@pytest.mark.parametrize("name", NAMES)
def test_static_neighbouring_frames_differ(static, name):
    e = static[name]
    names = list(e.controls)
    for combo, _ in grid_points(e):
        png = bytes(frame_at(e, combo).children[1].value)
        for axis in range(len(names)):
            if combo[axis] + 1 < len(e.grid[names[axis]]):
                nxt = list(combo)
                nxt[axis] += 1
                assert png != bytes(frame_at(e, nxt).children[1].value), (combo, nxt)


def embedded_png_bytes(explorer):
    frames = [frame_at(explorer, combo) for combo, _ in grid_points(explorer)]
    return sum(4 * math.ceil(len(bytes(f.children[1].value)) / 3) for f in frames)  # base64


@pytest.mark.parametrize("name", NAMES)
def test_static_embedded_frames_fit_the_page_budget(static, name):
    assert embedded_png_bytes(static[name]) <= LIMIT_BYTES


@pytest.mark.parametrize("page", PAGES)
def test_static_frames_of_a_chapter_page_fit_together(static, page):
    """The 3 MB is per page; leave 15% for the widgets' JSON (about 0.35 MB on chapter 2)."""
    assert sum(embedded_png_bytes(static[n]) for n in PAGES[page]) <= 0.85 * LIMIT_BYTES


@pytest.mark.parametrize("name", NAMES)
def test_static_set_reaches_every_grid_point(static, name):
    e = static[name]
    defaults = dict(e.values)
    try:
        for combo, values in grid_points(e):
            e.set(**values)
            assert e.last_error is None
            assert e.values == values
            assert [e.controls[n].index for n in e.controls] == list(combo)
            assert e.figure_png() == bytes(frame_at(e, combo).children[1].value)
            assert_label_shows_controls(e, e.label())
            assert_data(e, values)
    finally:
        e.set(**defaults)


def test_static_values_snap_to_the_grid(static):
    e = static["base"]
    assert e.grid["base"] == [
        10,
        30,
        100,
        300,
        1000,
        3000,
        10000,
        30000,
        100000,
        500000,
        1000000,
        10000000,
    ]
    with pytest.raises(ValueError, match=r"base must be one of 10, 30, .*got 12345"):
        e.set(base=12345)
    e.set(base=500000.0)  # equal to a grid value: accepted
    assert e.values == {"base": 500000}
    e.set(base=10000)


# ------------------------------------------------------------------ live mode


def spread(values, n=9):
    """n values spread over a range, including both ends."""
    idx = sorted({round(j * (len(values) - 1) / (n - 1)) for j in range(n)})
    return [values[i] for i in idx]


@pytest.mark.parametrize("name", NAMES)
def test_live_controls_sweep_their_range(live, name):
    e = live[name]
    assert e.mode == "live"
    defaults = dict(e.values)
    try:
        for n in e.controls:
            e.set(**defaults)
            previous = e.figure_png()
            for value in spread(e.grid[n]):
                if value == e.values[n]:
                    continue
                e.set(**{n: value})
                assert e.last_error is None
                assert e.values == {**defaults, n: value}
                png = e.figure_png()
                assert png.startswith(PNG) and png != previous and png == bytes(e._image.value)
                previous = png
                assert_label_shows_controls(e, html.unescape(e._label.value))
                assert_data(e, e.values)
    finally:
        e.set(**defaults)


def test_live_grids_cover_the_documented_ranges(live):
    g = {name: e.grid for name, e in live.items()}
    assert g["sinusoidal"]["position"] == list(range(100)) and g["sinusoidal"]["d_model"][-1] == 512
    assert math.isclose(g["base"]["base"][0], 10) and math.isclose(g["base"]["base"][-1], 1e7)
    assert g["unit-circle"]["pair"] == list(range(8)) and g["unit-circle"]["offset"] == list(
        range(101)
    )
    assert g["rope-decay"]["distance"][0] == 1 and g["rope-decay"]["distance"][-1] == 100_000
    assert g["rope-scaling"]["method"] == ["linear", "ntk", "dynamic", "yarn", "llama3"]


def test_live_accepts_values_between_grid_points(live):
    e = live["base"]
    e.set(base=500000)  # Llama 3's base, not a step of the log slider
    assert e.values["base"] == 500000 and e.controls["base"].value == 500000
    assert_data(e, {"base": 500000})
    e = live["rope-decay"]
    e.set(distance=4321.4)  # a log slider: the marked distance is rounded to an integer
    assert e.values["distance"] == 4321
    assert_data(e, e.values)
    e.set(base=10000, distance=1000)
    live["base"].set(base=10000)


def test_live_callback_errors_are_recorded_and_set_reraises(live, monkeypatch):
    e = widgets.rope_scaling_explorer(mode="live")

    def broken(values):
        raise RuntimeError("boom")

    monkeypatch.setattr(e, "_compute", broken)
    e.controls["factor"].index = 0  # as a browser would: the callback must not raise
    assert isinstance(e.last_error, RuntimeError) and "boom" in e._label.value
    with pytest.raises(RuntimeError, match="boom"):
        e.set(factor=4)


# ------------------------------------------------------------------ numbers shown make sense


def test_unit_circle_matrix_moves_every_start_to_its_end(static):
    """The figure's 2x2 block is the rotation of the lemma in chapter 2:
    M_k (sin, cos)(p) = (sin, cos)(p+k)."""
    e = static["unit-circle"]
    for _, values in grid_points(e):
        e.set(**values)
        d = e.data
        np.testing.assert_allclose(d["start_points"] @ d["matrix"].T, d["end_points"], atol=1e-12)
        np.testing.assert_allclose(d["matrix"], pc.rotation_matrix(-d["angle"]).numpy(), atol=1e-12)
    e.set(pair=0, offset=3)


def test_scaling_ratios_have_the_documented_shapes(static):
    e = static["rope-scaling"]
    for s in e.grid["factor"]:
        e.set(factor=s, method="linear")
        np.testing.assert_allclose(e.data["ratio"], 1 / s, rtol=1e-12)
        e.set(method="ntk")  # NTK-aware scaling is a base change base * s**(d/(d-2))
        np.testing.assert_allclose(e.data["ratio"], s ** (-np.arange(64) / 63), rtol=1e-12)
        for method in ("yarn", "llama3"):  # fast pairs kept, slow pairs interpolated
            e.set(method=method)
            assert e.data["ratio"][0] == 1 and math.isclose(e.data["ratio"][-1], 1 / s)
    e.set(factor=8, method="linear")


def test_rope_decay_label_gives_the_marked_score(static):
    e = static["rope-decay"]
    e.set(base=500000, distance=30000)
    score = pc.rope_score_vs_distance(30000, 128, base=500000).item()
    assert e.label() == f"base = 500000 · distance = 30000 · score = {score:+.4f}"
    e.set(base=10000, distance=1000)


# ------------------------------------------------------------- display, DOM hooks, modes, errors


@pytest.mark.parametrize("mode", ["static", "live"])
def test_dom_classes_and_descriptions(static, live, mode):
    for name, e in (static if mode == "static" else live).items():
        assert {"posenc-explorer", f"posenc-explorer-{name}"} <= set(e.widget._dom_classes)
        for n, control in e.controls.items():
            assert "posenc-control" in control._dom_classes
            assert control.description and control.description.split()[0] in (n, "pair", "offset")
        frames = [
            w for w in walk_widgets(e.widget) if "posenc-frame" in getattr(w, "_dom_classes", ())
        ]
        assert frames and all(len(f.children) == 2 for f in frames)


def walk_widgets(widget):
    todo, out = [widget], []
    while todo:
        w = todo.pop()
        out.append(w)
        todo.extend(getattr(w, "children", ()))
    return out


def test_display_emits_the_widget_then_a_noscript_image(static, monkeypatch):
    import IPython.display

    e = static["rope-scaling"]
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    e._ipython_display_()
    assert shown[0] is e.widget
    markup = shown[1].data
    m = re.fullmatch(
        r'<noscript><img class="posenc-noscript" alt="([^"]{40,})" '
        r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"></noscript>',
        markup,
    )
    assert m, markup[:200]
    default_frame = frame_at(e, [e.grid["factor"].index(8), e.grid["method"].index("linear")])
    assert base64.b64decode(m.group(2)) == bytes(default_frame.children[1].value)


def test_auto_mode_is_static_only_with_the_variable_and_stack(monkeypatch):
    monkeypatch.delenv(widgets.STATIC_ENV, raising=False)
    assert widgets.resolve_mode() == "live"
    monkeypatch.setenv(widgets.STATIC_ENV, "0")
    assert widgets.resolve_mode("auto") == "live"
    monkeypatch.setenv(widgets.STATIC_ENV, "1")
    assert widgets.resolve_mode("auto") == "static"
    assert widgets.rope_scaling_explorer().mode == "static"
    assert widgets.resolve_mode("live") == "live"
    monkeypatch.delattr(ipywidgets, "Stack")  # Colab's ipywidgets 7
    assert widgets.resolve_mode("auto") == "live"
    assert widgets.rope_scaling_explorer().mode == "live"
    with pytest.raises(ValueError, match="ipywidgets.Stack"):
        widgets.resolve_mode("static")


@pytest.mark.parametrize(
    ("call", "error", "pattern"),
    [
        (lambda: widgets.resolve_mode("browser"), ValueError, r"mode must be one of .*'browser'"),
        (
            lambda: widgets.sinusoidal_explorer(n_positions=1, mode="live"),
            ValueError,
            r"n_positions .* got 1",
        ),
        (
            lambda: widgets.sinusoidal_explorer(n_positions=2.5, mode="live"),
            TypeError,
            r"n_positions .* float 2.5",
        ),
        (
            lambda: widgets.base_explorer(d_model=7, mode="live"),
            ValueError,
            r"d_model .* even .* got 7",
        ),
        (
            lambda: widgets.base_explorer(max_offset=0, mode="live"),
            ValueError,
            r"max_offset .* got 0",
        ),
        (
            lambda: widgets.unit_circle_explorer(starts=(), mode="live"),
            ValueError,
            r"starts .* 1 to 4",
        ),
        (
            lambda: widgets.unit_circle_explorer(base=1, mode="live"),
            ValueError,
            r"base .* greater than 1, got 1",
        ),
        (
            lambda: widgets.unit_circle_explorer(starts=(0, -1), mode="live"),
            ValueError,
            r"starts\[1\] must be an integer in 0\.\.1000000000, got -1",
        ),
        (
            lambda: widgets.unit_circle_explorer(base="10000", mode="live"),
            TypeError,
            r"base must be a real number, got str '10000'",
        ),
        (
            lambda: widgets.rope_decay_explorer(max_distance=5, mode="live"),
            ValueError,
            r"max_distance .* got 5",
        ),
        (
            lambda: widgets.rope_scaling_explorer(head_dim=6.0, mode="live"),
            TypeError,
            r"head_dim .* float 6.0",
        ),
        (lambda: widgets.scaling_setup("su", 2), ValueError, r"method must be one of .*'su'"),
    ],
)
def test_bad_arguments_name_the_argument(call, error, pattern):
    with pytest.raises(error, match=pattern):
        call()


def test_bad_set_calls_name_the_parameter(live):
    e = live["sinusoidal"]
    with pytest.raises(
        TypeError,
        match=r"unknown parameter\(s\) base; the sinusoidal explorer has d_model, position",
    ):
        e.set(base=100)
    with pytest.raises(ValueError, match=r"position must be an integer in 0..99, got 100"):
        e.set(position=100)
    with pytest.raises(TypeError, match=r"position must be an integer in 0..99, got float 1.5"):
        e.set(position=1.5)
    with pytest.raises(
        ValueError, match=r"d_model must be one of 16, 32, 64, 128, 256, 512; got 100"
    ):
        e.set(d_model=100)
    with pytest.raises(ValueError, match=r"base must be a real number in \[10, 1e\+07\], got 5.0"):
        live["base"].set(base=5)
    assert e.values == {"d_model": 128, "position": 40} and e.last_error is None


# ------------------------------------------------------------------ the figures


@pytest.mark.parametrize("name", NAMES)
def test_incremental_redraw_matches_a_full_redraw(live, name):
    """figure_png redraws only the changing artists over a cached background; the picture must
    be the same as drawing everything anew."""
    from posenc_core.book.figures import explorer_frames

    e = live[name]
    defaults = dict(e.values)
    last = list(e.controls)[-1]
    e.set(**{last: e.grid[last][-1]})
    incremental = e.figure_png()
    e._fig._posenc_artists["background"] = None
    assert explorer_frames.figure_png(e._fig, dpi=widgets.explorer.LIVE_DPI) == incremental
    e.set(**defaults)


def test_figures_plot_the_explorers_data(live):
    e = live["base"]
    art = e._fig._posenc_artists
    np.testing.assert_array_equal(art["wave_line"].get_ydata(), e.data["wavelength"])
    np.testing.assert_array_equal(art["sim_line"].get_ydata(), e.data["similarity"])
    np.testing.assert_array_equal(art["im"].get_array(), e.data["table"])
    e = live["rope-scaling"]
    art = e._fig._posenc_artists
    np.testing.assert_array_equal(art["line"].get_xdata(), e.data["wavelength"])
    np.testing.assert_array_equal(art["line"].get_ydata(), e.data["ratio"])
    e = live["sinusoidal"]
    np.testing.assert_array_equal(e._fig._posenc_artists["line"].get_ydata(), e.data["fingerprint"])


def test_figure_png_checks_its_arguments():
    from posenc_core.book.figures import explorer_frames

    fig = explorer_frames.rope_scaling_figure([10.0, 100.0], [1.0, 0.5], factor=2)
    assert explorer_frames.figure_png(fig).startswith(PNG) and explorer_frames.figure_png(
        fig, colors=16
    ).startswith(PNG)
    with pytest.raises(ValueError, match=r"colors must be None or an integer in 2..256, got 300"):
        explorer_frames.figure_png(fig, colors=300)
    with pytest.raises(ValueError, match=r"dpi must be a number in \(0, 600\], got 0"):
        explorer_frames.figure_png(fig, dpi=0)
    with pytest.raises(TypeError, match=r"fig must be a matplotlib Figure, got str"):
        explorer_frames.figure_png("figure")
    with pytest.raises(
        ValueError,
        match=r"fig must be None or a figure returned by explorer_frames.rope_decay_figure",
    ):
        explorer_frames.rope_decay_figure([1.0, 2.0], [1.0, 0.5], marker=(1.0, 1.0), fig=fig)


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


def make_loss_explorer(mode, **kw):
    return widgets.position_loss_explorer(
        loss_curves(),
        train_len=16,
        controls=("method", "factor", "fine-tune steps"),
        reference=("plain", loss_curves(seed=1)[("none", None, None)]),
        default=("a", 4, 0),
        mode=mode,
        **kw,
    )


@pytest.fixture(scope="module")
def loss_static():
    return make_loss_explorer("static")


def expected_loss_key(values):
    """The documented snapping, written out: exact or wildcard match, else reset steps to 0,
    then the factor to 4 (the defaults), else the default key."""
    m, s, n = values["method"], values["factor"], values["fine_tune_steps"]
    keys = list(loss_curves())
    for want in ((m, s, n), (m, s, 0), (m, 4, 0)):
        for k in keys:
            if all(a is None or a == b for a, b in zip(k, want)):
                return k
    return ("a", 4, 0)


def test_loss_explorer_grid_follows_the_keys_and_frames_share_images(loss_static):
    e = loss_static
    assert e.grid == {"method": ["none", "a", "b"], "factor": [4, 8], "fine_tune_steps": [0, 25]}
    assert [c.description for c in e.controls.values()] == ["method", "factor", "fine-tune steps"]
    frames = [frame_at(e, combo) for combo, _ in grid_points(e)]
    assert len(frames) == 3 * 2 * 2
    images = {id(f.children[1]) for f in frames}
    assert len(images) == len(loss_curves())  # one PNG per curve, shared by snapped points
    for (_, values), f in zip(grid_points(e), frames):
        same = [
            g for (_, v), g in zip(grid_points(e), frames)
            if expected_loss_key(v) == expected_loss_key(values)
        ]  # fmt: skip
        assert all(g.children[1] is f.children[1] for g in same)


def test_loss_explorer_data_and_labels_at_every_grid_point(loss_static):
    e = loss_static
    curves = loss_curves()
    try:
        for combo, values in grid_points(e):
            e.set(**values)
            key = expected_loss_key(values)
            a = curves[key]
            assert e.data["shown"] == key
            w = 8  # default bucket; 96 positions = 12 whole buckets
            per_seed = a.reshape(3, 12, w).mean(2)
            np.testing.assert_allclose(e.data["x"], np.arange(12) * w + (w - 1) / 2)
            np.testing.assert_allclose(e.data["mean"], per_seed.mean(0), rtol=1e-12)
            np.testing.assert_allclose(e.data["low"], per_seed.min(0), rtol=1e-12)
            np.testing.assert_allclose(e.data["high"], per_seed.max(0), rtol=1e-12)
            np.testing.assert_allclose(e.data["in_range"], a[:, 8:16].mean(1), rtol=1e-12)
            np.testing.assert_allclose(e.data["beyond"], a[:, 16:].mean(1), rtol=1e-12)
            label = html.unescape(frame_at(e, combo).children[0].value)
            assert_label_shows_controls(e, label)
            assert f"mean over [8, 16): {a[:, 8:16].mean():.3f}" in label
            exact = key == (values["method"], values["factor"], values["fine_tune_steps"])
            if key[0] == "none":
                assert "factor, fine-tune steps: not applicable" in label
            elif not exact:
                assert "no curve for this combination" in label, label
            assert e.figure_png() == bytes(frame_at(e, combo).children[1].value)
    finally:
        e.set(method="a", factor=4, fine_tune_steps=0)


def test_loss_explorer_snaps_missing_combinations_as_documented(loss_static):
    e = loss_static
    e.set(method="b", factor=8, fine_tune_steps=25)  # no fine-tune of b: steps reset first
    assert e.data["shown"] == ("b", 8, 0)
    e.set(method="a", factor=8, fine_tune_steps=25)  # a was fine-tuned at 4 only
    assert e.data["shown"] == ("a", 8, 0)
    e.set(method="none", factor=8, fine_tune_steps=25)  # the wildcard key matches anything
    assert e.data["shown"] == ("none", None, None)
    e.set(method="a", factor=4, fine_tune_steps=0)


def test_loss_explorer_live_shows_the_same_curves(loss_static):
    e = make_loss_explorer("live")
    shown = {}
    for _, values in grid_points(e):
        e.set(**values)
        assert e.last_error is None
        shown.setdefault(e.data["shown"], e.figure_png())
        assert_label_shows_controls(e, html.unescape(e._label.value))
    assert len(set(shown.values())) == len(loss_curves())  # each curve draws differently
    e.set(method="b", factor=8, fine_tune_steps=0)
    incremental = e.figure_png()
    e._fig._posenc_artists["background"] = None
    from posenc_core.book.figures import explorer_frames

    assert explorer_frames.figure_png(e._fig, dpi=widgets.explorer.LIVE_DPI) == incremental
    art = e._fig._posenc_artists
    np.testing.assert_array_equal(art["line"].get_ydata(), e.data["mean"])


def test_loss_explorer_one_control_with_plain_keys():
    curves = {name: c for name, c in zip(("x", "y"), loss_curves().values())}
    e = widgets.position_loss_explorer(curves, train_len=16, mode="static", name="schemes")
    assert e.grid == {"scheme": ["x", "y"]} and "posenc-explorer-schemes" in e.widget._dom_classes
    e.set(scheme="y")
    np.testing.assert_allclose(e.data["beyond"], curves["y"][:, 16:].mean(1))


def test_loss_explorer_draws_each_curves_own_reference():
    """references: a reference per curve (chapter 8: each bug against its correct run); the
    label gives the reference's means and the differences, never as "-0.000"."""
    x, y = list(loss_curves().values())[:2]
    curves = {"x": x, "y": y}
    e = widgets.position_loss_explorer(
        curves, train_len=16, mode="static", references={"x": ("done right", x - 0.1)}
    )
    label = html.unescape(frame_at(e, (0,)).children[0].value)
    assert f"done right: {(x - 0.1)[:, 8:16].mean():.3f}" in label
    assert "difference +0.100 and +0.100" in label
    assert "done right" not in html.unescape(frame_at(e, (1,)).children[0].value)
    same = widgets.position_loss_explorer(
        curves, train_len=16, mode="static", references={"y": ("ref", y + 1e-5)}
    )
    assert "difference +0.000 and +0.000" in html.unescape(frame_at(same, (1,)).children[0].value)
    with pytest.raises(ValueError, match="not a key of curves"):
        widgets.position_loss_explorer(curves, train_len=16, references={"z": ("r", x)})
    with pytest.raises(ValueError, match="same number of positions"):
        widgets.position_loss_explorer(curves, train_len=16, references={"x": ("r", x[:, :40])})


def test_chapter_7_explorer_fits_its_page_with_the_scaling_explorer(static):
    """Chapter 7 shows the rope-scaling explorer and the method explorer built from the
    committed study; their frames share the page's budget."""
    from posenc_core.book.studies import lm_study

    r = lm_study.load_results()
    curves = {("none", None, None): lm_curves.scheme_curves(r, "rope")}
    for m in lm_study.METHODS:
        for s in r["config"]["factors"]:
            curves[m, s, 0] = lm_curves.method_curves(r, m, s)
    for m in r["config"]["finetune_methods"]:
        for n in r["config"]["finetune_steps"]:
            curves[m, 4, n] = lm_curves.finetune_curves(r, m, n)
    e = widgets.position_loss_explorer(
        curves, train_len=64, controls=("method", "factor", "fine-tune steps"), mode="static"
    )
    frames = [frame_at(e, combo) for combo, _ in grid_points(e)]
    images = {id(f.children[1]): f.children[1] for f in frames}
    assert len(frames) == 6 * 2 * 5 and len(images) == len(curves)
    weight = sum(4 * math.ceil(len(bytes(i.value)) / 3) for i in images.values())
    assert weight + embedded_png_bytes(static["rope-scaling"]) <= 0.85 * LIMIT_BYTES


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
    args = {
        "train_len": 16,
        "controls": ("method", "factor", "fine-tune steps"),
        "mode": "live",
        **kwargs,
    }
    with pytest.raises(error, match=pattern):
        widgets.position_loss_explorer(loss_curves(), **args)
    bad = {("a", 4, 0): np.full((2, 40), np.nan)}
    with pytest.raises(ValueError, match=r"curves\[.*\] must be finite"):
        widgets.position_loss_explorer(bad, train_len=16, controls=("m", "f", "s"), mode="live")
