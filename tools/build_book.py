"""Build the book so that only a complete, successful build is ever published.

``make book`` runs ``python tools/build_book.py [BOOK_ROOT]``. Sphinx alone guarantees neither
half: it writes pages into ``_build/html`` as it goes (an interrupted or failed build leaves a
mix of old and new pages), and after a failed build a second build with no source change reads
nothing ("0 added, 0 changed") and exits 0 over the failed pages. This wrapper:

1. If the marker ``_build/.book-build-incomplete`` exists, the last build failed or was
   interrupted: it deletes Sphinx's saved environment (``_build/.doctrees``) so every page is
   read again (chapters that executed cleanly come back from the execution cache; a failed
   execution is never cached). It writes the marker.
2. Runs the build in a child process (Jupyter Book's ``build_sphinx``, the function behind
   ``jupyter-book build -W -n --keep-going``) whose HTML goes to a fresh folder,
   ``_build/html.staging``, with the doctrees and the execution cache in their usual places,
   and ``OMP_NUM_THREADS=1`` unless it is set (:data:`KERNEL_THREADS`).
   The child is the leader of its own process group; SIGINT, SIGTERM and SIGHUP sent to the
   wrapper are passed to that group as SIGINT (Sphinx and nbclient then stop and shut their
   kernels down), and the wrapper waits for the child, killing the group after
   :data:`GRACE_SECONDS`.
3. On success, swaps the new folder into ``_build/html`` (two renames on one file system),
   removes the previous site and any old ``_build/html.failed``, removes the marker and prints
   where the pages are. On failure or interruption, ``_build/html`` is left as it was (the last
   good site), the new pages move to ``_build/html.failed`` for a look, the marker stays, and
   the exit status is the child's (128 + the signal's number when interrupted).

Tested in ``tests/tooling/test_build_book.py``.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

MARKER = ".book-build-incomplete"
STAGING = "html.staging"
FAILED = "html.failed"
PREVIOUS = "html.previous"
GRACE_SECONDS = 60  # after a forwarded signal, how long the build may take to shut down
# The chapters' kernels run PyTorch with one intra-op thread unless OMP_NUM_THREADS is set: the
# book's models are tiny, and on a machine whose cores are taken PyTorch's OpenMP threads
# spin-wait for each other. Measured on chapter 8b (2-core AMD EPYC): 24.7 s with two threads and
# 9.3 s with one, quiet; 87.8 s and 22.7 s with two busy processes, where one cell took 40.4 s
# (past 120 s in one busy build, failing it) and 4.1 s.
KERNEL_THREADS = "1"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def sphinx_command(root: pathlib.Path, outdir: pathlib.Path) -> list[str]:
    """The child that builds ``root``'s HTML into ``outdir``: this script with ``--sphinx``."""
    return [
        sys.executable,
        str(pathlib.Path(__file__).resolve()),
        "--sphinx",
        str(root),
        str(outdir),
    ]


def run_sphinx(root: pathlib.Path, outdir: pathlib.Path) -> int:
    """In the child: what ``jupyter-book build -W -n --keep-going ROOT`` does, into ``outdir``.

    The doctrees (``_build/.doctrees``), the execution cache (``_build/.jupyter_cache``) and
    MyST-NB's outputs (``_build/jupyter_execute``) sit beside ``outdir``, as they do beside
    ``_build/html``, so the cache and the incremental reads carry over between builds.
    """
    from jupyter_book.sphinx import build_sphinx

    result = build_sphinx(
        root,
        outdir,
        use_external_toc=True,
        noconfig=True,
        path_config=str(root / "_config.yml"),
        confoverrides={
            "external_toc_path": (root / "_toc.yml").as_posix(),
            "latex_individualpages": False,
            "nitpicky": True,
        },
        doctreedir=outdir.parent / ".doctrees",
        builder="html",
        warningiserror=True,
        keep_going=True,
    )
    if isinstance(result, KeyboardInterrupt):
        return 128 + signal.SIGINT
    return result if isinstance(result, int) else 1


def _swap_in(new: pathlib.Path, html: pathlib.Path) -> None:
    """Make ``new`` the published ``html``; the previous site is removed after the swap."""
    previous = html.parent / PREVIOUS
    shutil.rmtree(previous, ignore_errors=True)
    if html.exists():
        html.rename(previous)
    new.rename(html)
    shutil.rmtree(previous, ignore_errors=True)


def _recover(out: pathlib.Path) -> None:
    """Put back a site that a killed wrapper left between the two renames of a swap."""
    html, previous = out / "html", out / PREVIOUS
    if previous.exists() and not html.exists():
        previous.rename(html)
    shutil.rmtree(previous, ignore_errors=True)


def build(root: pathlib.Path, command: list[str] | None = None) -> int:
    """Build the book at ``root``; publish ``root/_build/html`` only if the build succeeds.

    Args:
        root: the book's source folder.
        command: the child to run (default :func:`sphinx_command`); it must write the site into
            ``root/_build/html.staging`` and exit 0 on success. Tests pass their own.

    Returns:
        0 on success, else the child's exit status (128 + signal number if interrupted).
    """
    out = root / "_build"
    out.mkdir(exist_ok=True)
    _recover(out)
    html, staging, failed, marker = out / "html", out / STAGING, out / FAILED, out / MARKER
    if marker.exists():
        print(
            "build_book: the last build failed or was interrupted; every page is read again "
            "(chapters that executed cleanly come from the execution cache)",
            flush=True,
        )
        shutil.rmtree(out / ".doctrees", ignore_errors=True)
    marker.write_text("a book build started and has not finished cleanly\n", encoding="utf-8")
    shutil.rmtree(staging, ignore_errors=True)
    start = time.monotonic()
    status, signum = _run_child(command or sphinx_command(root, staging))
    seconds = time.monotonic() - start
    if status == 0 and signum is None and (staging / "index.html").is_file():
        _swap_in(staging, html)
        shutil.rmtree(failed, ignore_errors=True)
        marker.unlink()
        print(f"Built in {seconds:.0f} s. Open file://{html / 'index.html'}", flush=True)
        return 0
    if status == 0 and signum is None:
        status = 1  # the child said success but wrote no site: never publish that
    shutil.rmtree(failed, ignore_errors=True)
    if staging.exists():
        staging.rename(failed)
    how = (
        f"was interrupted ({signal.Signals(signum).name})" if signum else f"failed (exit {status})"
    )
    kept = f"the last good site is still in {html}" if html.exists() else f"{html} is empty"
    print(
        f"build_book: the build {how} after {seconds:.0f} s; nothing was published: {kept}; "
        f"the unfinished pages are in {failed}; the next build reads every page again",
        file=sys.stderr,
        flush=True,
    )
    return 128 + signum if signum else status


def _run_child(command: list[str]) -> tuple[int, int | None]:
    """Run ``command`` in its own process group, passing signals on; return (status, signal).

    ``signal`` is the first signal the wrapper received while the child ran (None if none).
    """
    received: list[int] = []
    started: list[subprocess.Popen] = []

    def forward(signum, _frame):
        received.append(signum)
        if started:
            try:
                os.killpg(started[0].pid, signal.SIGINT)
            except ProcessLookupError:
                pass

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    env = {**os.environ}
    env.setdefault("OMP_NUM_THREADS", KERNEL_THREADS)
    child = subprocess.Popen(command, start_new_session=True, env=env)
    started.append(child)
    if received:  # a signal came while the child was starting
        _kill_group(child.pid)
    deadline = None  # set at the first forwarded signal
    try:
        while True:
            try:
                status = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if received and deadline is None:
                    deadline = time.monotonic() + GRACE_SECONDS
                if deadline is not None and time.monotonic() > deadline:
                    print(
                        f"build_book: the build did not stop within {GRACE_SECONDS} s; killing it",
                        file=sys.stderr,
                    )
                    _kill_group(child.pid)
                    deadline = float("inf")
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if received:
        _kill_group(child.pid)  # whatever the interrupted build left running in its group
    return status, (received[0] if received else None)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[1] == "--sphinx":
        signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop as on Ctrl-C
        return run_sphinx(pathlib.Path(argv[2]).resolve(), pathlib.Path(argv[3]).resolve())
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).parents[1]).resolve()
    return build(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
