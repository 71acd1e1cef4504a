"""The explorer itself: one interactive figure with its controls, in a live or a static mode.

:class:`Explorer` holds an explorer's parameters (:class:`Param`), computes its numbers with
posenc_core and draws them; :func:`resolve_mode` says which mode ``mode="auto"`` means here.
The explorers the chapters show are built on it in
:mod:`~posenc_core.book.widgets.closed_form` and :mod:`~posenc_core.book.widgets.measured`.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets

from posenc_core import _validation as check
from posenc_core.book.figures import explorer_frames

__all__ = [
    "Explorer",
    "MODES",
    "Param",
    "SLIDER_TOL",
    "STATIC_ENV",
    "Data",
    "resolve_mode",
]

MODES = ("auto", "live", "static")
STATIC_ENV = "POSENC_STATIC_WIDGETS"
"""The environment variable that, set to ``1``, makes ``mode="auto"`` build static explorers."""

LIVE_DPI = 72
STATIC_DPI = 72
STATIC_COLORS = 64  # palette size of prerendered frames: about a third of a full-colour PNG
SLIDER_TOL = 1e-12
"""How far (relative) a log slider's ``b**x`` may land outside its range and still be accepted."""


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
class Param:
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
"""What an explorer's ``compute`` returns, a dict from names to the numpy arrays and numbers
it plots."""


# --------------------------------------------------------------------------- the explorer


class Explorer:
    """An interactive figure: controls, the figure they select, and the numbers behind it.

    Built by the explorer functions of this module; display it (make it the last expression
    of a cell) to show it.

    Args:
        name: the explorer's name, used in CSS classes.
        params: its parameters (:class:`Param` records: grid, live control, readout format).
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
        params: Sequence[Param],
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
