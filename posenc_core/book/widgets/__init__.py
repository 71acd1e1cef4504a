"""Interactive explorers for the chapters, computed and drawn in the reader's browser.

One function per explorer: the six of formulas in
:mod:`~posenc_core.book.widgets.closed_form` (``sinusoidal_explorer``, ``base_explorer``,
``unit_circle_explorer``, ``rope_decay_explorer``, ``rope_scaling_explorer``,
``patch_score_explorer``) and the one of the study's measured curves in
:mod:`~posenc_core.book.widgets.measured` (``position_loss_explorer``), all importable from this
package. Each returns an :class:`~posenc_core.book.widgets.explorer.Explorer`, which displays
itself when it is the last expression of a notebook cell.

An explorer is an `anywidget <https://anywidget.dev>`_: its ES module, ``explorer.js``, holds
the controls (a slider and a typed value per number, a row of buttons per choice), the formulas
in float64, each named after the posenc_core function it mirrors, and the drawing on a canvas.
The module and the explorer's constants travel in the saved widget state, so the static book
computes and draws on every input event without a kernel, and JupyterLab, Colab and VS Code run
the same module. With a kernel attached, ``values`` is synced both ways: moving a control
updates :attr:`Explorer.data <posenc_core.book.widgets.explorer.Explorer.data>` in Python, and
:meth:`Explorer.set <posenc_core.book.widgets.explorer.Explorer.set>` moves the controls. No
control needs Python: the measured explorer carries its curves as numbers.

Hooks for tests and browsers: the explorer's root element has the CSS classes
``posenc-explorer`` and ``posenc-explorer-<name>``; each control has ``posenc-control`` and a
``data-param`` naming its parameter; the line of class ``posenc-frame-label`` says what is
drawn; the root's ``posenc`` property holds ``values`` and ``data``, the numbers drawn (the
names :meth:`Explorer.compute <posenc_core.book.widgets.explorer.Explorer.compute>` returns),
and ``draws``, the number of drawings so far. After the widget an explorer also displays
``<noscript>`` with the figure for the default values, drawn with matplotlib, and a caption.

This module imports anywidget, ipywidgets, IPython and matplotlib (through
:mod:`posenc_core.book.figures`); the numerical core never imports it. Arguments are checked
with the core's own checks (``posenc_core._validation``), so a bad value gets the same message
here as in the core.
"""

from posenc_core.book.widgets import closed_form, explorer, measured
from posenc_core.book.widgets.closed_form import *  # noqa: F403
from posenc_core.book.widgets.explorer import *  # noqa: F403
from posenc_core.book.widgets.measured import *  # noqa: F403

# Each module's own __all__ says what it offers; the package offers all of them.
__all__ = [name for module in (explorer, closed_form, measured) for name in module.__all__]
