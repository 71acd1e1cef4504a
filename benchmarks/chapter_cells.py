"""How long each chapter and its slowest cells take to execute, as the build executes them.

Every chapter runs top to bottom in a fresh kernel (nbclient, with the build's switch
``POSENC_BOOK_BUILD=1``); the script prints the chapter's time
and its slowest cells, from the timestamps nbclient records per cell. The book's rule: no cell
above about 10 s on a 2-core machine, so the 120 s per-cell timeout of ``_config.yml`` leaves a
margin of ten or more on a busy machine; heavy measurements belong in ``make study``.

Usage: ``make bench-chapters`` or ``python benchmarks/chapter_cells.py [CHAPTER.ipynb ...]``
(default: every chapter). A timing script, not a test: it fails nothing.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]
SLOW = 10.0  # seconds: a cell above this belongs in `make study`


def _when(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def cell_seconds(nb) -> list[tuple[float, int, str]]:
    """(seconds, index, first line) of every executed code cell, slowest first."""
    found = []
    for i, cell in enumerate(nb.cells):
        ex = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            took = _when(ex["shell.execute_reply"]) - _when(ex["iopub.execute_input"])
            first = (cell.source.splitlines() or [""])[0][:60]
            found.append((took.total_seconds(), i, first))
    return sorted(found, reverse=True)


def main(argv: list[str]) -> int:
    os.environ.setdefault("POSENC_BOOK_BUILD", "1")
    paths = [pathlib.Path(a) for a in argv[1:]] or sorted((ROOT / "chapters").glob("*.ipynb"))
    slow = 0
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        NotebookClient(
            nb,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(path.parent)}},
        ).execute()
        total = time.perf_counter() - start
        cells = cell_seconds(nb)
        slow += sum(s > SLOW for s, _, _ in cells)
        top = "; ".join(f"cell {i} {s:.1f} s ({first})" for s, i, first in cells[:3])
        print(f"{path.name}: {total:.1f} s; slowest: {top}", flush=True)
    print(f"cells above {SLOW:.0f} s: {slow}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
