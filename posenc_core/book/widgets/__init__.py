"""Interactive explorers for the chapters, computed and drawn in the reader's browser.

One function per explorer: six of formulas in :mod:`~posenc_core.book.widgets.closed_form`,
:func:`~posenc_core.book.widgets.measured.position_loss_explorer` of the studies' curves and
:func:`~posenc_core.book.widgets.mixing.mixing_explorer` of the mixing study's.
The model lab, :func:`~posenc_core.book.widgets.lab.model_lab`, runs the trained byte models
themselves in the browser; it needs torch and the studies, so it is imported on its own
(``from posenc_core.book.widgets import lab``). Each explorer function returns an
:class:`~posenc_core.book.widgets.explorer.Explorer`, an anywidget whose ES
module ``explorer.js`` holds the controls, the formulas (float64, named after the core
functions they mirror) and the drawing, so the static book runs without a kernel. With a
kernel, ``values`` is synced both ways (:meth:`Explorer.set
<posenc_core.book.widgets.explorer.Explorer.set>`). Without JavaScript a page shows
``<noscript>`` with the figure for the default values.

Hooks for tests: the root element has the classes ``posenc-explorer`` and
``posenc-explorer-<name>``; each control has ``posenc-control`` and ``data-param``; the line
``posenc-frame-label`` says what is drawn; the root's ``posenc`` property holds ``values``,
``data`` (the names :meth:`Explorer.compute
<posenc_core.book.widgets.explorer.Explorer.compute>` returns) and ``draws``.
"""

from posenc_core.book.widgets import closed_form, explorer, measured, mixing
from posenc_core.book.widgets.closed_form import *  # noqa: F403
from posenc_core.book.widgets.explorer import *  # noqa: F403
from posenc_core.book.widgets.measured import *  # noqa: F403
from posenc_core.book.widgets.mixing import *  # noqa: F403

# Each module's own __all__ says what it offers; the package offers all of them.
__all__ = [name for module in (explorer, closed_form, measured, mixing) for name in module.__all__]
