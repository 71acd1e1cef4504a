"""The explorer itself: an anywidget (:class:`ExplorerWidget`) whose ES module
``explorer.js`` computes and draws in the browser; in Python, its parameters (:class:`Param`),
the same numbers from posenc_core (:meth:`Explorer.compute`) and the stand-in figure shown
without JavaScript. Tested in ``tests/book/test_widgets.py``.
"""

from __future__ import annotations

import base64
import html
import math
import pathlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anywidget
import traitlets

from posenc_core import _validation as check
from posenc_core.book.figures import explorer_frames
from posenc_core.book.figures.style import DISPLAY_DPI

__all__ = ["Data", "Explorer", "ExplorerWidget", "KINDS", "Param", "SLIDER_TOL"]

HERE = pathlib.Path(__file__).resolve().parent
KINDS = ("int", "real", "choice")
SLIDER_TOL = 1e-12
"""How far (relative) a value may land outside its control's range and still be accepted."""
NOSCRIPT_DPI = DISPLAY_DPI  # the stand-in is shown as large as the chapters' figures
NOSCRIPT_COLORS = 64  # palette size of the stand-in figure: about a third of a full-colour PNG

Data = dict[str, Any]
"""What an explorer's ``compute`` returns, a dict from names to the numpy arrays and numbers
it plots (the names ``explorer.js`` exposes for the same quantities)."""


@dataclass(frozen=True)
class Param:
    """One control of an explorer.

    ``kind`` is ``"int"`` (every ``step``-th integer from ``lo`` to ``hi``), ``"real"`` (any
    real number from ``lo`` to ``hi``) or ``"choice"`` (one of ``options``, shown as buttons
    labelled ``labels``). ``log`` puts a number's slider on a log scale; the typed value can be
    any allowed number either way. ``upto`` (an ``"int"`` control only) names another ``"int"``
    control whose value is this one's largest (a head shown of ``n_heads``): the browser moves
    the slider's end with it and lowers this value when that one falls below it.
    """

    name: str  # keyword of Explorer.set and key of Explorer.values
    label: str  # what the control says
    kind: str
    default: Any
    lo: float | None = None
    hi: float | None = None
    step: int = 1
    log: bool = False
    options: tuple = ()
    labels: tuple = ()
    upto: str | None = None

    def __post_init__(self) -> None:
        check.choice("kind", self.kind, KINDS)
        if self.upto is not None and self.kind != "int":
            raise ValueError(f"upto applies to an int control, got {self.name} of kind {self.kind}")
        self.check(self.default)

    def check(self, value: Any) -> Any:
        """``value`` if the control can take it (as an int for ``"int"``, a float for
        ``"real"``), else a ``ValueError`` or ``TypeError`` naming the parameter."""
        if self.kind == "choice":
            return check.choice(self.name, value, self.options)
        if self.kind == "int":
            v = check.int_in_range(self.name, value, int(self.lo), int(self.hi))
            if (v - int(self.lo)) % self.step:
                raise ValueError(
                    f"{self.name} must be {self.lo} plus a multiple of {self.step}, got {v}"
                )
            return v
        v = check.real_in_range(self.name, value, self.lo, self.hi, rel_tol=SLIDER_TOL)
        return min(max(float(v), self.lo), self.hi)

    def spec(self) -> dict:
        """What ``explorer.js`` needs to build the control (JSON)."""
        out: dict[str, Any] = {"name": self.name, "label": self.label, "kind": self.kind}
        if self.kind == "choice":
            labels = self.labels or tuple(str(o) for o in self.options)
            out["options"] = [{"value": o, "label": lab} for o, lab in zip(self.options, labels)]
            return out
        out.update(min=self.lo, max=self.hi, step=self.step, log=self.log)
        if self.upto is not None:
            out["upto"] = self.upto
        if self.log:
            # the slider moves on log10 of the value in steps of a thousandth of a decade
            # (0.23 %); typing reaches any value, and the keys step in value (explorer.js)
            out["slider_step"] = 0.001
        return out


class ExplorerWidget(anywidget.AnyWidget):
    """The browser side of an :class:`Explorer`: ``spec`` (what to draw: the explorer's kind,
    its controls and constants) and ``values`` (the controls' values, synced both ways when a
    kernel is attached)."""

    _esm = (HERE / "explorer.js").read_text(encoding="utf-8")
    _css = (HERE / "explorer.css").read_text(encoding="utf-8")
    spec = traitlets.Dict().tag(sync=True)
    values = traitlets.Dict().tag(sync=True)


class Explorer:
    """An interactive figure: controls, the numbers behind it and its drawing, all computed
    in the browser by ``explorer.js`` from ``spec``; display it (make it the last expression of
    a cell) to show it.

    Args:
        kind: which drawing of ``explorer.js`` (e.g. ``"base"``).
        name: the explorer's name, in its CSS class ``posenc-explorer-<name>``.
        title: what it shows, for screen readers and the stand-in's caption.
        params: its controls (:class:`Param`).
        consts: the JSON constants ``explorer.js`` computes from, e.g. ``{"d_model": 128}``.
        compute: checked values -> :data:`Data`, computed with posenc_core.
        figure: (data, values) -> the matplotlib stand-in figure.
        alt: (values, data) -> a description of that figure.
        hint: one line shown above the controls: what to try and what to look for.

    Attributes:
        params: dict name -> :class:`Param`; widget: the :class:`ExplorerWidget` shown.
        data: the numbers for the current values (from Python or the browser).
        last_error: the last exception raised by values from the browser, or None.
    """

    def __init__(
        self,
        kind: str,
        name: str,
        title: str,
        params: Sequence[Param],
        consts: Mapping[str, Any],
        compute: Callable[[dict], Data],
        figure: Callable[[Data, dict], Any],
        alt: Callable[[dict, Data], str],
        hint: str = "",
    ) -> None:
        self.kind, self.name, self.title = kind, name, title
        self.params = {p.name: p for p in params}
        for p in params:
            if p.upto is not None and (
                p.upto not in self.params or self.params[p.upto].kind != "int"
            ):
                raise ValueError(f"{p.name}: upto must name an int control, got {p.upto!r}")
        self._compute, self._figure, self._alt = compute, figure, alt
        self.last_error: BaseException | None = None
        self.defaults = {p.name: p.default for p in params}
        spec = {
            "kind": kind,
            "name": name,
            "title": title,
            "hint": str(hint),
            "params": [p.spec() for p in params],
            "consts": _json_ready(dict(consts)),
        }
        self._checked(self.defaults)
        self.widget = ExplorerWidget(spec=spec, values=dict(self.defaults))
        self.data = self._compute(dict(self.defaults))
        self.widget.observe(self._from_browser, names="values")

    @property
    def values(self) -> dict:
        """The controls' current values."""
        return dict(self.widget.values)

    def compute(self, values: Mapping[str, Any] | None = None) -> Data:
        """The numbers drawn for ``values`` (default: the current ones), from posenc_core.

        Args:
            values: parameter name -> value; missing names take the current values.
        """
        merged = {**self.values, **(values or {})}
        return self._compute(self._checked(merged))

    def set(self, **values: Any) -> Explorer:
        """Set controls; the browser redraws (with a kernel attached) and :attr:`data` follows.

        Args:
            **values: parameter name -> value, e.g. ``set(base=31000)``; any value the control
                allows (see each explorer's docstring), not only a slider's stops.

        Returns:
            the explorer itself.
        """
        unknown = sorted(set(values) - set(self.params))
        if unknown:
            raise TypeError(
                f"set() got unknown parameter(s) {', '.join(unknown)}; the {self.name} explorer "
                f"has {', '.join(self.params)}"
            )
        new = self._checked({**self.values, **values})
        data = self._compute(new)
        self.widget.values = new  # the observer computes again only for values from a browser
        self.data, self.last_error = data, None
        return self

    def figure(self, values: Mapping[str, Any] | None = None) -> Any:
        """A matplotlib figure of ``values`` (default: the current ones), as the stand-in for
        readers without JavaScript draws it."""
        merged = self._checked({**self.values, **(values or {})})
        return self._figure(self._compute(merged), merged)

    def figure_png(self, values: Mapping[str, Any] | None = None) -> bytes:
        """:meth:`figure` as PNG bytes (72 dpi, 64 colours, as in the page)."""
        import matplotlib.pyplot as plt

        fig = self.figure(values)
        try:
            return explorer_frames.figure_png(fig, dpi=NOSCRIPT_DPI, colors=NOSCRIPT_COLORS)
        finally:
            plt.close(fig)

    def noscript_html(self) -> str:
        """``<noscript>`` holding the figure for the default values with its caption."""
        data = self._compute(dict(self.defaults))
        alt = html.escape(self._alt(dict(self.defaults), data), quote=True)
        png = base64.b64encode(self.figure_png(self.defaults)).decode("ascii")
        caption = html.escape(
            f"{self.title}, drawn for the default values. With JavaScript on, the controls "
            "above recompute and redraw it in the page."
        )
        return (
            f'<noscript><figure class="posenc-noscript-figure"><img class="posenc-noscript" '
            f'alt="{alt}" src="data:image/png;base64,{png}"><figcaption>{caption}'
            "</figcaption></figure></noscript>"
        )

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        _colab_custom_widgets()
        display(self.widget)
        display(HTML(self.noscript_html()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.values.items())
        return f"<Explorer {self.name!r}: {shown}>"

    # ----------------------------------------------------------------------- internals

    def _checked(self, values: Mapping[str, Any]) -> dict:
        out = {name: p.check(values[name]) for name, p in self.params.items()}
        for name, p in self.params.items():
            if p.upto is not None and out[name] > out[p.upto]:
                raise ValueError(
                    f"{name} must be at most {p.upto} = {out[p.upto]}, got {out[name]}"
                )
        return out

    def _from_browser(self, change: Any) -> None:
        if change["new"] == change["old"]:
            return
        try:
            new = self._checked(change["new"])
            self.data = self._compute(new)
            self.last_error = None
        except Exception as err:  # kept for the reader and for tests; the browser carries on
            self.last_error = err


_COLAB_READY: list[bool] = []


def _colab_custom_widgets() -> None:
    """On Colab, switch on its widget manager for third-party widgets (anywidget among them),
    once per kernel; elsewhere nothing (there is no ``google.colab`` to import)."""
    if _COLAB_READY:
        return
    _COLAB_READY.append(True)
    try:
        from google.colab import output  # type: ignore[import-not-found]
    except ImportError:
        return
    output.enable_custom_widget_manager()


def _json_ready(value: Any) -> Any:
    """``value`` with numpy arrays, tensors and numpy scalars as lists and numbers; refuses
    non-finite floats (JSON has none)."""
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return _json_ready(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"explorer constants must be finite numbers, got {value!r}")
    return value
