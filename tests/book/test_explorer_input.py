"""What the explorers make of typed values and of values set from a kernel, checked in node.

explorer_input.test.mjs beside this file imports explorer.js (posenc_core/book/widgets) and
checks its input rules without a browser: parse_number and read_number against a table of
typed texts (2,5 is refused, not read as 25; 1 6, 0x10 and 1e-400 are refused; −5 is -5; a
100,000-character text gets a short message), check_values against values a kernel might
set, and the module's own render() in a small fake DOM (typed field, slider, buttons, a
model standing for the kernel). The same in a real browser is in tests/built/test_explorers.py.
"""

from __future__ import annotations

import pathlib

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "explorer_input.test.mjs"


def test_explorer_js_reads_typed_and_kernel_values_as_its_rules_say(node_test):
    # EXPLORER_JS removed: the module in this tree
    node_test(SCRIPT, {"EXPLORER_JS": None}, "the explorer's input rules")
