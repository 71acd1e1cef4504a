"""Execute chapters top to bottom with nbclient and write the executed notebooks.

Run by ``tests/built/test_installed.py`` with the Python of a fresh environment in which
``posenc_core`` was installed from a wheel (no checkout on the path), from a folder outside
the checkout, as a reader on Colab runs a chapter. Standard library, nbformat and nbclient only.

Usage: ``python run_chapters.py OUT NOTEBOOK...``; prints one line per chapter, writes each
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


def main(argv: list[str]) -> int:
    out = pathlib.Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name in argv[2:]:
        path = pathlib.Path(name)
        nb = nbformat.read(path, as_version=4)
        glue_file = out / f"{path.stem}.glue.jsonl"
        glue_file.write_text("")
        os.environ["POSENC_TEST_GLUE_FILE"] = str(glue_file)  # inherited by the kernel
        start = time.perf_counter()
        client = NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(out)}}
        )
        try:
            client.execute()
            status = "executed"
        except Exception as err:  # noqa: BLE001 - reported per chapter, then the next one
            (out / f"{path.stem}.error.txt").write_text(f"{type(err).__name__}: {err}\n")
            status, failed = "FAILED", failed + 1
        nbformat.write(nb, out / path.name)
        print(f"{path.name}: {status} in {time.perf_counter() - start:.1f} s", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
