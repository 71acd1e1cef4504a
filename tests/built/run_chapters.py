"""Execute chapters top to bottom with nbclient and write the executed notebooks.

Run by ``tests/built/test_installed.py`` with the Python of a fresh environment in which
``posenc_core`` was installed from a wheel (no checkout on the path), from a folder outside
the checkout, as a reader on Colab runs a chapter. Standard library, nbformat and nbclient only.

Usage: ``python run_chapters.py OUT NOTEBOOK...``; runs two chapters at a time, prints one
line per chapter, writes each
executed notebook to OUT (with ``NAME.error.txt`` beside it for a chapter that failed) and exits
non-zero if any failed. ``POSENC_TEST_GLUE_FILE`` is set to ``OUT/NAME.glue.jsonl`` for each
chapter's kernel, for the test's glue recorder (an IPython startup file of its own).
"""

from __future__ import annotations

import os
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

JOBS = 2  # chapters at a time: each runs in its own kernel process


def run_one(path: pathlib.Path, out: pathlib.Path) -> tuple[str, bool]:
    """Execute one chapter; its kernel gets ``POSENC_TEST_GLUE_FILE`` in its own environment."""
    nb = nbformat.read(path, as_version=4)
    glue_file = out / f"{path.stem}.glue.jsonl"
    glue_file.write_text("")
    env = {**os.environ, "POSENC_TEST_GLUE_FILE": str(glue_file)}
    env.setdefault("OMP_NUM_THREADS", "1")  # as the book's build runs them (tools/build_book.py)
    start = time.perf_counter()
    client = NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(out)}}
    )
    try:
        client.execute(env=env)  # passed on to the kernel manager's start_kernel
        status, ok = "executed", True
    except Exception as err:  # noqa: BLE001 - reported per chapter, then the next one
        (out / f"{path.stem}.error.txt").write_text(f"{type(err).__name__}: {err}\n")
        status, ok = "FAILED", False
    nbformat.write(nb, out / path.name)
    return f"{path.name}: {status} in {time.perf_counter() - start:.1f} s", ok


def main(argv: list[str]) -> int:
    from concurrent.futures import ThreadPoolExecutor

    out = pathlib.Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    paths = [pathlib.Path(name) for name in argv[2:]]
    # Two kernels at a time; each chapter's numbers do not depend on what else runs (every
    # kernel has the thread count the build's kernels had), and the test compares them with
    # the build's value by value.
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        results = list(pool.map(lambda p: run_one(p, out), paths))
    for line, _ in results:
        print(line, flush=True)
    return 0 if all(ok for _, ok in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
