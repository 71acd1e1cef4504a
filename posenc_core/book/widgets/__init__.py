"""Interactive explorers for the chapters, built with ipywidgets.

One function per explorer: the six of formulas in
:mod:`~posenc_core.book.widgets.closed_form` (``sinusoidal_explorer``, ``base_explorer``,
``unit_circle_explorer``, ``rope_decay_explorer``, ``rope_scaling_explorer``,
``patch_score_explorer``) and the one of the study's measured curves in
:mod:`~posenc_core.book.widgets.measured` (``position_loss_explorer``), all importable from this
package. Each returns an :class:`~posenc_core.book.widgets.explorer.Explorer`, which displays
itself when it is the last expression of a
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

from posenc_core.book.widgets import closed_form, explorer, measured
from posenc_core.book.widgets.closed_form import *  # noqa: F403
from posenc_core.book.widgets.explorer import *  # noqa: F403
from posenc_core.book.widgets.measured import *  # noqa: F403

# Each module's own __all__ says what it offers; the package offers all of them.
__all__ = [name for module in (explorer, closed_form, measured) for name in module.__all__]
