"""Interactive explorers for the chapters, built with ipywidgets.

One function per explorer (:func:`sinusoidal_explorer`, :func:`base_explorer`,
:func:`unit_circle_explorer`, :func:`rope_decay_explorer`, :func:`rope_scaling_explorer`,
:func:`position_loss_explorer`).
Each returns an :class:`Explorer`, which displays itself when it is the last expression of a
notebook cell. It works in one of two modes:

* ``"live"``: real controls (sliders, buttons) whose callbacks recompute the numbers with
  posenc_core and redraw one matplotlib figure, shown as a PNG in an ``ipywidgets.Image``.
  Needs a running kernel (Jupyter, Colab, Binder).
* ``"static"``: every control is an ``ipywidgets.SelectionSlider`` (or ``ToggleButtons`` for a
  choice between names) over a fixed grid of values, documented in each explorer's docstring;
  continuous parameters snap to that grid. The figure for every grid point is drawn in
  advance and stored in an ``ipywidgets.Stack``, and ``ipywidgets.jslink`` connects each
  control's ``index`` to the ``selected_index`` of the stacks it drives, so the pages of the
  built book switch figures in the browser without a kernel. With two controls, the outer
  stack follows the first control and each of its children is an inner stack that follows
  the second.

``mode="auto"`` (the default) is static when the environment variable
``POSENC_STATIC_WIDGETS`` is ``1`` (the book build sets it) and ``ipywidgets.Stack`` exists
(ipywidgets >= 8; Colab's older ipywidgets lacks it), and live otherwise.

Hooks for tests and browsers: the outer container has the CSS classes ``posenc-explorer``
and ``posenc-explorer-<name>``; each control has ``posenc-control`` and a ``description``
naming its parameter; each figure is a ``VBox`` of class ``posenc-frame`` holding an ``HTML``
label of class ``posenc-frame-label`` (the frame's parameter values, written as the controls
show them, e.g. ``base = 10000``, joined by " · ") and an ``Image`` of class
``posenc-frame-image``. After the widget an explorer also displays
``<noscript><img class="posenc-noscript" ...></noscript>`` with the default figure, for a page
read without JavaScript.

This module imports ipywidgets, IPython and matplotlib (through :mod:`posenc_core.book.figures`);
the numerical core never imports it. Arguments are checked with the core's own checks
(``posenc_core._validation``), so a bad value gets the same message here as in the core.
"""

from __future__ import annotations

import base64
import html
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets
import numpy as np
import torch

from posenc_core import _validation as check
from posenc_core.analysis import rope_decay_bound, rope_score_vs_distance, sinusoidal_similarity
from posenc_core.book.figures import explorer_frames
from posenc_core.rope import rope_frequencies
from posenc_core.rotation import shift_matrix
from posenc_core.sinusoidal import (
    sinusoidal_encoding,
    sinusoidal_frequencies,
    sinusoidal_table,
    sinusoidal_wavelengths,
)

__all__ = [
    "Explorer",
    "MODES",
    "STATIC_ENV",
    "BASE_GRID",
    "SCALING_METHODS",
    "base_explorer",
    "position_loss_explorer",
    "resolve_mode",
    "rope_decay_explorer",
    "rope_scaling_explorer",
    "scaling_setup",
    "sinusoidal_explorer",
    "unit_circle_explorer",
]

MODES = ("auto", "live", "static")
STATIC_ENV = "POSENC_STATIC_WIDGETS"
"""The environment variable that, set to ``1``, makes ``mode="auto"`` build static explorers."""

LIVE_DPI = 72
STATIC_DPI = 72
STATIC_COLORS = 64  # palette size of prerendered frames: about a third of a full-colour PNG
SLIDER_TOL = 1e-12  # a log slider's b**x may land this far (relative) outside its range


def resolve_mode(mode: str = "auto") -> str:
    """The mode an explorer built with ``mode`` uses: ``"live"`` or ``"static"``.

    Args:
        mode: ``"auto"``, ``"live"`` or ``"static"``. ``"auto"`` gives ``"static"`` when the
            environment variable ``POSENC_STATIC_WIDGETS`` is ``"1"`` and ``ipywidgets.Stack``
            exists, else ``"live"``.

    Returns:
        ``"live"`` or ``"static"``.
    """
    mode = check.choice("mode", mode, MODES)
    has_stack = getattr(ipywidgets, "Stack", None) is not None
    if mode == "static" and not has_stack:
        raise ValueError(
            "mode='static' needs ipywidgets.Stack (ipywidgets >= 8), but ipywidgets "
            f"{ipywidgets.__version__} lacks it; use mode='live'"
        )
    if mode == "auto":
        return "static" if os.environ.get(STATIC_ENV) == "1" and has_stack else "live"
    return mode


# --------------------------------------------------------------------------- parameters


def _fmt_int(value: Any) -> str:
    return f"{value:.0f}"


@dataclass(frozen=True)
class _Param:
    """One parameter of an explorer and how its control looks in each mode.

    ``live`` is ``("int", lo, hi)`` (IntSlider), ``("log", base, lo_exp, hi_exp, step)``
    (FloatLogSlider, values ``base**x``), ``("select", options)`` (SelectionSlider) or
    ``("buttons", options)`` (ToggleButtons).
    """

    name: str  # keyword of Explorer.set, key of .controls and .grid
    description: str  # the control's description and the name in frame labels
    grid: tuple  # the static grid
    default: Any
    live: tuple
    fmt: Callable[[Any], str] = _fmt_int  # a value as the control shows it
    to_param: Callable[[Any], Any] = field(
        default=lambda v: v
    )  # live control value -> parameter value
    readout_format: str = ".0f"  # FloatLogSlider readout, matching fmt

    @property
    def categorical(self) -> bool:
        return self.live[0] == "buttons"

    def live_values(self) -> list:
        kind = self.live[0]
        if kind == "int":
            return list(range(self.live[1], self.live[2] + 1))
        if kind == "log":
            _, b, lo, hi, step = self.live
            n = int(round((hi - lo) / step))
            values = [self.to_param(float(b ** (lo + j * step))) for j in range(n + 1)]
            return list(dict.fromkeys(values))  # distinct, in order
        return list(self.live[1])

    def check_live(self, value: Any) -> Any:
        kind = self.live[0]
        if kind == "int":
            return check.int_in_range(self.name, value, self.live[1], self.live[2])
        if kind == "log":
            _, b, lo, hi, _ = self.live
            lo, hi = float(b**lo), float(b**hi)
            value = check.real_in_range(self.name, value, lo, hi, rel_tol=SLIDER_TOL)
            return self.to_param(value)
        return check.choice(self.name, value, self.live[1])

    def check_static(self, value: Any) -> Any:
        try:
            return check.choice(self.name, value, self.grid)
        except ValueError as err:
            raise ValueError(
                f"{err} (a static explorer has a figure for each grid value only; build it with "
                "mode='live' for other values)"
            ) from None

    def make_live(self, value: Any) -> ipywidgets.Widget:
        kind = self.live[0]
        common = {"description": self.description, "style": {"description_width": "initial"}}
        if kind == "int":
            return ipywidgets.IntSlider(value=value, min=self.live[1], max=self.live[2], **common)
        if kind == "log":
            _, b, lo, hi, step = self.live
            return ipywidgets.FloatLogSlider(
                value=value,
                base=b,
                min=lo,
                max=hi,
                step=step,
                readout_format=self.readout_format,
                **common,
            )
        options = [(self.fmt(v), v) for v in self.live[1]]
        index = list(self.live[1]).index(value)
        if kind == "select":
            return ipywidgets.SelectionSlider(options=options, index=index, **common)
        return ipywidgets.ToggleButtons(options=options, index=index, **common)

    def make_static(self, value: Any) -> ipywidgets.Widget:
        options = [(self.fmt(v), v) for v in self.grid]
        common = {"description": self.description, "style": {"description_width": "initial"}}
        index = list(self.grid).index(value)
        if self.categorical:
            return ipywidgets.ToggleButtons(options=options, index=index, **common)
        return ipywidgets.SelectionSlider(options=options, index=index, **common)


Data = dict[str, Any]


# --------------------------------------------------------------------------- the explorer


class Explorer:
    """An interactive figure: controls, the figure they select, and the numbers behind it.

    Built by the explorer functions of this module; display it (make it the last expression
    of a cell) to show it.

    Args:
        name: the explorer's name, used in CSS classes.
        params: its parameters (private ``_Param`` records: grid, live control, readout format).
        compute: values -> data, the numbers to plot (computed with posenc_core).
        draw: (data, values, figure or None) -> the figure, drawn anew or updated in place.
        alt: (values, data) -> a description of the figure, for the ``<noscript>`` image.
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see :func:`resolve_mode`).
        extra_label: optional (values, data) -> text appended to the frame labels.
        frame_key: optional values -> a hashable key; in static mode, grid points with equal
            keys share one prerendered image (one PNG in the page), each keeping its own
            label. None: every grid point has its own image.

    Attributes:
        name: the explorer's name, e.g. ``"base"`` (CSS class ``posenc-explorer-base``).
        mode: ``"live"`` or ``"static"``.
        controls: dict parameter name -> control widget.
        grid: dict parameter name -> the values its control can take (the static grid, or
            every value of the live control's range).
        data: dict of the numpy arrays (and numbers) plotted for the current values,
            computed with posenc_core.
        widget: the top-level ipywidgets container.
        last_error: the most recent exception raised while updating (None if none was);
            :meth:`set` re-raises it, callbacks triggered in the browser only record it.
        links: static mode: the ``jslink`` Link widgets, control ``index`` -> stack
            ``selected_index``; empty in live mode.
        stacks: static mode: the Stack widgets per level (``stacks[0]`` = [outer stack],
            ``stacks[1]`` = the inner stacks); empty in live mode.
    """

    def __init__(
        self,
        name: str,
        params: Sequence[_Param],
        compute: Callable[[dict], Data],
        draw: Callable[[Data, dict, Any], Any],
        alt: Callable[[dict, Data], str],
        *,
        mode: str = "auto",
        extra_label: Callable[[dict, Data], str] | None = None,
        frame_key: Callable[[dict], Any] | None = None,
    ) -> None:
        self.name = name
        self._frame_key = frame_key
        self.mode = resolve_mode(mode)
        self._params = {p.name: p for p in params}
        self._compute, self._draw, self._alt, self._extra = compute, draw, alt, extra_label
        self._fig: Any = None
        self._suspend = False
        self.last_error: BaseException | None = None
        self.links: list = []
        self.stacks: list[list] = []
        self.data: Data = {}
        values = {p.name: p.default for p in params}
        if self.mode == "static":
            self._build_static(values)
        else:
            self._build_live(values)
        self._default_values = dict(values)

    # ----------------------------------------------------------------------- public API

    @property
    def values(self) -> dict:
        """The current parameter values (as numbers or names, not as control readouts)."""
        out = {}
        for name, p in self._params.items():
            control = self.controls[name]
            if self.mode == "static":
                out[name] = p.grid[control.index]
            else:
                out[name] = p.to_param(control.value)
        return out

    def label(self) -> str:
        """The label of the figure shown now, e.g. ``"base = 10000"`` (see :meth:`label_for`)."""
        return self.label_for(self.values, self.data)

    def label_for(self, values: Mapping[str, Any], data: Data) -> str:
        """The frame label for ``values`` given the ``data`` computed for them.

        Each parameter is written as its control's readout shows it, ``description = value``,
        joined by " · " (e.g. ``"d_model = 128 · position = 40"``); some explorers append a
        computed value (e.g. the score at the marked distance).

        Returns:
            the label text (plain text; it is HTML-escaped where it is shown).
        """
        text = " · ".join(
            f"{p.description} = {p.fmt(values[p.name])}" for p in self._params.values()
        )
        if self._extra is not None:
            text += " · " + self._extra(dict(values), data)
        return text

    def set(self, **values: Any) -> Explorer:
        """Set controls programmatically and update (live: recompute and redraw; static:
        select the prerendered frame, recompute :attr:`data`).

        Args:
            **values: parameter name -> value, e.g. ``set(base=500000)``. In static mode the
                value must be one of :attr:`grid`'s values.

        Returns:
            the explorer itself.
        """
        unknown = sorted(set(values) - set(self._params))
        if unknown:
            raise TypeError(
                f"set() got unknown parameter(s) {', '.join(unknown)}; the {self.name} explorer "
                f"has {', '.join(self._params)}"
            )
        checked = {}
        for name, value in values.items():
            p = self._params[name]
            checked[name] = p.check_static(value) if self.mode == "static" else p.check_live(value)
        self._suspend = True
        try:
            for name, value in checked.items():
                p, control = self._params[name], self.controls[name]
                if self.mode == "static":
                    control.index = list(p.grid).index(value)
                elif p.live[0] in ("select", "buttons"):
                    control.index = list(p.live[1]).index(value)
                else:
                    control.value = value
        finally:
            self._suspend = False
        self._update(raise_errors=True)
        return self

    def figure_png(self) -> bytes:
        """The PNG bytes of the figure currently shown."""
        if self.mode == "live":
            return bytes(self._image.value)
        return bytes(self._current_frame().children[1].value)

    def noscript_html(self) -> str:
        """``<noscript><img class="posenc-noscript" ...></noscript>`` with the default figure."""
        alt = html.escape(
            self._alt(self._default_values, self._default_data)
            + " (static image: enable JavaScript "
            "to use the controls)",
            quote=True,
        )
        src = "data:image/png;base64," + base64.b64encode(self._default_png).decode("ascii")
        return f'<noscript><img class="posenc-noscript" alt="{alt}" src="{src}"></noscript>'

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(self.widget)
        display(HTML(self.noscript_html()))

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def __repr__(self) -> str:
        return f"<Explorer {self.name!r} ({self.mode}): {self.label()}>"

    # ----------------------------------------------------------------------- building

    def _container(self, controls: list, body: ipywidgets.Widget) -> ipywidgets.Widget:
        for control in controls:
            control.add_class("posenc-control")
        box = ipywidgets.VBox([ipywidgets.VBox(controls), body])
        box.add_class("posenc-explorer")
        box.add_class(f"posenc-explorer-{self.name}")
        return box

    def _render(self, values: dict, *, colors: int | None, dpi: int) -> tuple[bytes, Data]:
        data = self._compute(values)
        self._fig = self._draw(data, values, self._fig)
        return explorer_frames.figure_png(self._fig, dpi=dpi, colors=colors), data

    def _build_live(self, values: dict) -> None:
        self.controls = {name: p.make_live(values[name]) for name, p in self._params.items()}
        self.grid = {name: p.live_values() for name, p in self._params.items()}
        self._label = ipywidgets.HTML()
        self._label.add_class("posenc-frame-label")
        self._image = ipywidgets.Image(format="png")
        self._image.add_class("posenc-frame-image")
        frame = ipywidgets.VBox([self._label, self._image])
        frame.add_class("posenc-frame")
        self.widget = self._container(list(self.controls.values()), frame)
        self._redraw()
        self._default_png = explorer_frames.figure_png(
            self._fig, dpi=STATIC_DPI, colors=STATIC_COLORS
        )  # for <noscript>
        self._default_data = self.data
        for control in self.controls.values():
            control.observe(self._on_change, names="value")

    def _build_static(self, values: dict) -> None:
        params = list(self._params.values())
        for p in params:
            if p.default not in p.grid:
                raise ValueError(
                    f"the default {p.name} = {p.default!r} is not on the static grid {p.grid}"
                )
        self.controls = {p.name: p.make_static(values[p.name]) for p in params}
        self.grid = {p.name: list(p.grid) for p in params}
        # Frames share their Layout and style models: one model each instead of one per frame
        # keeps the state stored in the page small.
        shared = {k: ipywidgets.Layout() for k in ("frame", "label", "image", "stack")}
        label_style = ipywidgets.widgets.widget_string.HTMLStyle()
        self.stacks = [[] for _ in params]
        self._frames: dict[tuple, ipywidgets.Widget] = {}

        images: dict[Any, tuple[ipywidgets.Image, bytes]] = {}  # frame_key -> shared image

        def frame(vals: dict) -> ipywidgets.Widget:
            shared_key = None if self._frame_key is None else self._frame_key(vals)
            if shared_key is not None and shared_key in images:
                data = self._compute(vals)
                image, png = images[shared_key]
            else:
                png, data = self._render(vals, colors=STATIC_COLORS, dpi=STATIC_DPI)
                image = ipywidgets.Image(value=png, format="png", layout=shared["image"])
                image.add_class("posenc-frame-image")
                if shared_key is not None:
                    images[shared_key] = (image, png)
            label = ipywidgets.HTML(
                value=html.escape(self.label_for(vals, data)),
                layout=shared["label"],
                style=label_style,
            )
            label.add_class("posenc-frame-label")
            box = ipywidgets.VBox([label, image], layout=shared["frame"])
            box.add_class("posenc-frame")
            key = tuple(vals[p.name] for p in params)
            self._frames[key] = box
            if key == tuple(values[p.name] for p in params):
                self._default_png, self._default_data = png, data
            return box

        def build(level: int, fixed: dict) -> ipywidgets.Widget:
            p = params[level]
            children = []
            for v in p.grid:
                vals = {**fixed, p.name: v}
                children.append(frame(vals) if level == len(params) - 1 else build(level + 1, vals))
            stack = ipywidgets.Stack(
                children, selected_index=list(p.grid).index(values[p.name]), layout=shared["stack"]
            )
            stack.add_class("posenc-stack")
            self.links.append(
                ipywidgets.jslink((self.controls[p.name], "index"), (stack, "selected_index"))
            )
            self.stacks[level].append(stack)
            return stack

        top = build(0, {})
        self._fig = None  # the prerendered frames hold the pictures; free the figure
        self.widget = self._container(list(self.controls.values()), top)
        self.data = self._compute(values)
        for control in self.controls.values():
            control.observe(self._on_change, names="index")

    # ----------------------------------------------------------------------- updating

    def _on_change(self, change: Any) -> None:
        if not self._suspend:
            self._update()

    def _update(self, raise_errors: bool = False) -> None:
        try:
            if self.mode == "live":
                self._redraw()
            else:
                self._select()
        except Exception as err:  # shown to the reader and kept for tests; .set re-raises
            self.last_error = err
            if self.mode == "live":
                self._label.value = (
                    f'<span style="color:#D55E00">error: {html.escape(repr(err))}</span>'
                )
            if raise_errors:
                raise

    def _redraw(self) -> None:
        values = self.values
        png, data = self._render(values, colors=None, dpi=LIVE_DPI)
        self._image.value = png
        self._label.value = html.escape(self.label_for(values, data))
        self.data = data

    def _select(self) -> None:
        """Static mode, kernel side: do what the jslinks do in the browser, and recompute data."""
        for p, stacks in zip(self._params.values(), self.stacks):
            index = self.controls[p.name].index
            for stack in stacks:
                stack.selected_index = index
        self.data = self._compute(self.values)

    def _current_frame(self) -> ipywidgets.Widget:
        node = self.stacks[0][0]
        while isinstance(node, ipywidgets.Stack):
            node = node.children[node.selected_index]
        return node


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
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see :func:`resolve_mode`).

    Returns:
        an :class:`Explorer` named ``"sinusoidal"``.
    """
    n = check.int_in_range("n_positions", n_positions, 2)
    base = check.base_value("base", base)
    step = max(1, n // 20)
    grid = tuple(range(0, n, step))
    default = max(p for p in grid if p <= min(40, n - 1))
    params = [
        _Param(
            "d_model", "d_model", (32, 64, 128, 256), 128, ("select", (16, 32, 64, 128, 256, 512))
        ),
        _Param("position", "position", grid, default, ("int", 0, n - 1)),
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
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see :func:`resolve_mode`).

    Returns:
        an :class:`Explorer` named ``"base"``.
    """
    d = check.even_int("d_model", d_model)
    n = check.int_in_range("n_positions", n_positions, 2)
    kmax = check.int_in_range("max_offset", max_offset, 1)
    offsets = np.arange(kmax + 1)
    reference = {
        "wavelength": sinusoidal_wavelengths(d, base=10000.0).numpy(),
        "similarity": sinusoidal_similarity(torch.arange(kmax + 1), d, base=10000.0).numpy(),
    }
    params = [_Param("base", "base", BASE_GRID, 10000, ("log", 10, 1, 7, 0.05))]

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
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see :func:`resolve_mode`).

    Returns:
        an :class:`Explorer` named ``"unit-circle"``.
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
        _Param("pair", "pair i", pairs, 0, ("int", 0, d // 2 - 1)),
        _Param("offset", "offset k", (1, 2, 3, 5, 10, 20, 50, 100), 3, ("int", 0, 100)),
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
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see :func:`resolve_mode`).

    Returns:
        an :class:`Explorer` named ``"rope-decay"``.
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
        _Param(
            "base",
            "base",
            (100, 1000, 10000, 100000, 500000, 1000000, 10000000),
            10000,
            ("log", 10, 2, 7, 0.05),
        ),
        _Param(
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
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see :func:`resolve_mode`).

    Returns:
        an :class:`Explorer` named ``"rope-scaling"``.
    """
    hd = check.even_int("head_dim", head_dim)
    if hd < 4:
        raise ValueError(
            f"head_dim must be an even integer >= 4 (dimensions come in pairs), got {hd}"
        )
    params = [
        _Param(
            "factor",
            "factor",
            (2, 4, 8, 16, 32),
            8,
            ("select", (1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32)),
            fmt=lambda s: f"{s:g}",
        ),
        _Param(
            "method", "method", SCALING_METHODS, "linear", ("buttons", SCALING_METHODS), fmt=str
        ),
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


def _control_name(description: str) -> str:
    """The keyword for Explorer.set of a control described as ``description``."""
    name = re.sub(r"\W+", "_", description).strip("_")
    if not name.isidentifier():
        raise ValueError(
            f"controls must be descriptions with a letter or digit, such as 'method', got "
            f"{description!r}"
        )
    return name


def _signed(x: float, digits: int = 3) -> str:
    """``x`` with a sign and ``digits`` decimals, never "-0.000" (a tiny negative is +0)."""
    x = round(float(x), digits)
    return f"{x + 0.0:+.{digits}f}"


def position_loss_explorer(
    curves: Mapping[Any, Any],
    *,
    train_len: int,
    controls: Sequence[str] = ("scheme",),
    reference: tuple[str, Any] | None = None,
    references: Mapping[Any, tuple[str, Any]] | None = None,
    default: Any = None,
    bucket: int = 8,
    ylim: tuple[float, float] | None = None,
    ylabel: str = "held-out loss (nats per byte)",
    name: str = "position-loss",
    mode: str = "auto",
) -> Explorer:
    """A per-position curve over seeds, chosen with one to three categorical controls, beside
    a fixed reference: e.g. loss by position of each positional scheme (chapter 5), or of the
    trained RoPE model under each long-context method, factor and fine-tune (chapter 7).

    Each curve is a ``(S, P)`` stack, one row per seed (such as
    :func:`~posenc_core.book.studies.lm_curves.scheme_curves` returns), drawn as
    :func:`~posenc_core.book.figures.seed_band` gives it: bucketed means, the mean over seeds as a
    line and a min-max band over seeds; [0, L) is shaded, the x ticks are multiples of L and the
    y limits are the same in every frame.

    Controls: one ``ToggleButtons`` per entry of ``controls`` (the description; the keyword for
    :meth:`Explorer.set` is the description with every run of other characters than letters,
    digits and ``_`` replaced by ``_``: ``"fine-tune steps"`` -> ``fine_tune_steps``). A key of
    ``curves`` gives one value per control (a plain value when there is one control, else a
    tuple); the grid of a control is the values its keys use, in order of first appearance.
    A key entry ``None`` means "does not apply": the curve is shown for every value of that
    control (``("none", None, None)``: plain RoPE whatever the factor and fine-tune). Static
    and live mode show the same grid.

    Combinations without a curve snap: the controls after the first are reset to their default
    values, the last control first, until a key matches (and to the default key if none does);
    the frame label then says which curve is shown. Grid points that show the same curve
    share one prerendered image (``frame_key``), so the page stores one PNG per curve.

    The frame label gives the controls' values, the mean over seeds of the curve's mean on
    [L/2, L) (in range, past the first positions' short context) and on [L, P) (beyond L).

    Data: ``shown`` (the key of the curve drawn, as a tuple), ``x``, ``mean``, ``low``,
    ``high`` ``(B,)`` from :func:`~posenc_core.book.figures.seed_band`, ``in_range`` and
    ``beyond`` ``(S,)``: each seed's mean over [L/2, L) and over [L, P).

    Args:
        curves: key -> ``(S, P)`` array-like (``(P,)``: one seed); every curve has the same P,
            P > L, finite values.
        train_len: L.
        controls: 1 to 3 descriptions of the controls, e.g. ``("method", "factor",
            "fine-tune steps")``.
        reference: optional ``(label, (S, P) curves)`` drawn in every frame, black dashed.
        references: optional key of ``curves`` -> ``(label, (S, P) curves)``: a reference of
            its own for that curve (e.g. the same batch handled correctly, for each bug of
            chapter 8), drawn instead of ``reference``; the frame label then also gives the
            reference's means and the difference.
        default: the key shown first (None: the first key of ``curves``).
        bucket: positions per bucket (see :func:`~posenc_core.book.figures.seed_band`).
        ylim: y limits (default: the range of every curve's band, with a margin).
        ylabel: the y axis label.
        name: the explorer's name (CSS class ``posenc-explorer-<name>``).
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see :func:`resolve_mode`).

    Returns:
        an :class:`Explorer`.
    """
    from posenc_core.book import figures

    L = check.positive_int("train_len", train_len)
    bucket = check.positive_int("bucket", bucket)
    if (
        isinstance(controls, str)
        or not isinstance(controls, Sequence)
        or not 1 <= len(controls) <= 3
    ):
        raise ValueError(f"controls must be 1 to 3 descriptions, got {controls!r}")
    descriptions = tuple(str(c) for c in controls)
    names = tuple(_control_name(c) for c in descriptions)
    if len(set(names)) != len(names):
        raise ValueError(f"controls must have distinct names, got {descriptions}")
    n = len(names)
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError(
            f"curves must be a non-empty mapping of key -> (S, P) curves, got {curves!r}"
        )

    def as_key(key: Any) -> tuple:
        t = key if isinstance(key, tuple) else (key,)
        if len(t) != n:
            raise ValueError(
                f"curves key {key!r} must give one value per control {descriptions} "
                f"({n} value{'s' if n > 1 else ''})"
            )
        return t

    def as_curve(label: str, value: Any) -> np.ndarray:
        a = np.asarray(value, dtype=float)
        a = a[None] if a.ndim == 1 else a
        if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] <= L:
            raise ValueError(
                f"{label} must have shape (S, P) with P > train_len = {L}, got {np.shape(value)}"
            )
        if not np.isfinite(a).all():
            raise ValueError(f"{label} must be finite")
        return a

    table = {as_key(k): as_curve(f"curves[{k!r}]", v) for k, v in curves.items()}
    lengths = {a.shape[1] for a in table.values()}
    ref = None
    if reference is not None:
        if not isinstance(reference, tuple) or len(reference) != 2:
            raise ValueError(f"reference must be a (label, curves) pair, got {reference!r}")
        ref = (str(reference[0]), as_curve("reference curves", reference[1]))
        lengths.add(ref[1].shape[1])
    own_refs: dict[tuple, tuple[str, np.ndarray]] = {}
    if references is not None:
        if not isinstance(references, Mapping):
            raise ValueError(f"references must map keys of curves to (label, curves) pairs, "
                             f"got {references!r}")  # fmt: skip
        for k, pair in references.items():
            if as_key(k) not in table:
                raise ValueError(f"references key {k!r} is not a key of curves")
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise ValueError(f"references[{k!r}] must be a (label, curves) pair, got {pair!r}")
            own_refs[as_key(k)] = (str(pair[0]), as_curve(f"references[{k!r}]", pair[1]))
            lengths.add(own_refs[as_key(k)][1].shape[1])
    if len(lengths) != 1:
        raise ValueError(
            f"every curve must have the same number of positions, got {sorted(lengths)}"
        )
    (P,) = lengths
    keys = list(table)
    grids = []
    for i, desc in enumerate(descriptions):
        values = list(dict.fromkeys(k[i] for k in keys if k[i] is not None))
        if not values:
            raise ValueError(f"no key of curves gives a value for the control {desc!r}")
        grids.append(tuple(values))
    default_key = keys[0] if default is None else as_key(default)
    if default_key not in table:
        raise ValueError(f"default {default!r} is not a key of curves")
    start = tuple(g[0] if v is None else v for v, g in zip(default_key, grids))

    def match(v: tuple) -> tuple | None:
        for k in keys:
            if all(a is None or a == b for a, b in zip(k, v)):
                return k
        return None

    def resolve(vals: Mapping[str, Any]) -> tuple:
        v = [vals[nm] for nm in names]
        found = match(tuple(v))
        for i in reversed(range(1, n)):
            if found is not None:
                break
            v[i] = start[i]
            found = match(tuple(v))
        return default_key if found is None else found

    def describe(key: tuple) -> str:
        return " · ".join(f"{d} = {v}" for d, v in zip(descriptions, key) if v is not None)

    bands = {k: figures.seed_band(a, bucket=bucket) for k, a in table.items()}
    ref_band = None if ref is None else figures.seed_band(ref[1], bucket=bucket)
    ref_bands = {k: (lab, figures.seed_band(a, bucket=bucket)) for k, (lab, a) in own_refs.items()}
    all_refs = [b for _, b in ref_bands.values()] + ([ref_band] if ref else [])
    if ylim is None:
        lows = [b[2].min() for b in bands.values()] + [b[2].min() for b in all_refs]
        highs = [b[3].max() for b in bands.values()] + [b[3].max() for b in all_refs]
        lo, hi = float(min(lows)), float(max(highs))
        ylim = (lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
    params = [
        _Param(nm, desc, grid, s, ("buttons", grid), fmt=str)
        for nm, desc, grid, s in zip(names, descriptions, grids, start)
    ]
    seeds = {a.shape[0] for a in table.values()}
    n_seeds = seeds.pop() if len(seeds) == 1 else None

    def compute(v: dict) -> Data:
        key = resolve(v)
        x, mean, low, high = bands[key]
        a = table[key]
        return {
            "shown": key,
            "x": x,
            "mean": mean,
            "low": low,
            "high": high,
            "in_range": a[:, L // 2 : L].mean(1),
            "beyond": a[:, L:].mean(1),
        }

    def reference_of(key: tuple) -> tuple[str, Any] | None:
        if key in ref_bands:
            return ref_bands[key]
        return None if ref is None else (ref[0], ref_band)

    def draw(data: Data, v: dict, fig: Any) -> Any:
        r = reference_of(data["shown"])
        return explorer_frames.position_band_figure(
            data["x"],
            data["mean"],
            data["low"],
            data["high"],
            train_len=L,
            reference=None if r is None else r[1],
            label="selected (mean over seeds)",
            reference_label="reference" if r is None else r[0],
            n_seeds=n_seeds,
            ylim=ylim,
            ylabel=ylabel,
            title=describe(data["shown"]),
            fig=fig,
        )

    def extra(v: dict, data: Data) -> str:
        text = (
            f"mean over [{L // 2}, {L}): {data['in_range'].mean():.3f} · over [{L}, {P}): "
            f"{data['beyond'].mean():.3f}"
        )
        if data["shown"] in own_refs:
            label, a = own_refs[data["shown"]]
            d_in = data["in_range"].mean() - a[:, L // 2 : L].mean()
            d_out = data["beyond"].mean() - a[:, L:].mean()
            text += (
                f" · {label}: {a[:, L // 2 : L].mean():.3f} and {a[:, L:].mean():.3f} "
                f"(difference {_signed(d_in)} and {_signed(d_out)})"
            )
        wanted = tuple(v[nm] for nm in names)
        if match(wanted) is None:
            text += f" · no curve for this combination; shown: {describe(data['shown'])}"
        idle = [d for d, k in zip(descriptions, data["shown"]) if k is None]
        if idle:
            text += f" · {', '.join(idle)}: not applicable"
        return text

    def alt(v: dict, data: Data) -> str:
        r = reference_of(data["shown"])
        return (
            f"Line plot of {ylabel} against position 0 to {P}, the training length {L} shaded: "
            f"{describe(data['shown'])}, mean over seeds with a min-max band"
            + (f", beside {r[0]} dashed in black" if r else "")
        )

    return Explorer(
        name,
        params,
        compute,
        draw,
        alt,
        mode=mode,
        extra_label=extra,
        frame_key=lambda v: resolve(v),
    )


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
        mode: ``"auto"``, ``"live"`` or ``"static"`` (see :func:`resolve_mode`).

    Returns:
        an :class:`Explorer` named ``"patch-scores"``.
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
        _Param("row", "row", tuple(range(n)), n // 2, ("int", 0, n - 1)),
        _Param("col", "col", tuple(range(n)), n // 2, ("int", 0, n - 1)),
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
