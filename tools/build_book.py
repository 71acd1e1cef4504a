"""Build the book so that a failed build is never published, and never reused by the next one.

``make book`` runs ``python tools/build_book.py`` (with the environment's Python). Sphinx alone
does not guarantee it: after a build whose chapter failed to execute (or raised a warning), a
second ``jupyter-book build`` with no source change re-reads nothing ("0 added, 0 changed"),
raises no warning and exits 0 over the failed pages. This script wraps the build in three steps:

1. If the marker ``_build/.book-build-incomplete`` exists, the last build failed or was
   interrupted: delete Sphinx's saved environment (``_build/.doctrees``), so that every page is
   read again. Chapters whose execution succeeded come back from the execution cache (a failed
   execution is never cached), so only the failed ones execute again, and fail again until
   they are fixed.
2. Write the marker, run ``jupyter-book build -W -n --keep-going`` (warnings are errors).
3. On success, remove the marker and print where the pages are. On failure, move the pages to
   ``_build/html.failed`` (for a look, not for reading) so that ``_build/html`` never holds a
   failed build, keep the marker, and exit with the build's status.

Usage: ``python tools/build_book.py [BOOK_ROOT]`` (default: the folder above this file).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import time

MARKER = ".book-build-incomplete"


def build(root: pathlib.Path, jupyter_book: str) -> int:
    """Build the book at ``root`` with the ``jupyter-book`` executable; return its exit status."""
    out = root / "_build"
    marker = out / MARKER
    if marker.exists():
        print(
            "build_book: the last build failed or was interrupted; every page is read again "
            "(chapters that executed cleanly come from the execution cache)",
            flush=True,
        )
        shutil.rmtree(out / ".doctrees", ignore_errors=True)
    out.mkdir(exist_ok=True)
    marker.write_text("a book build started and has not finished cleanly\n", encoding="utf-8")
    start = time.monotonic()
    status = subprocess.call([jupyter_book, "build", "-W", "-n", "--keep-going", str(root)])
    seconds = time.monotonic() - start
    html = out / "html"
    if status != 0:
        failed = out / "html.failed"
        shutil.rmtree(failed, ignore_errors=True)
        if html.exists():
            html.rename(failed)
        print(
            f"build_book: the build failed (exit {status}) after {seconds:.0f} s; nothing is "
            f"published in {html} (the failed pages are in {failed}); the next build reads "
            "every page again",
            file=sys.stderr,
        )
        return status
    marker.unlink()
    print(f"Built in {seconds:.0f} s. Open file://{html / 'index.html'}")
    return 0


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).parents[1]).resolve()
    jupyter_book = (
        shutil.which("jupyter-book", path=os.path.dirname(sys.executable)) or "jupyter-book"
    )
    return build(root, jupyter_book)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
