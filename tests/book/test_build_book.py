"""A failed build is never published (tools/build_book.py, which `make book` runs).

Sphinx alone would publish one: after a build whose chapter failed to execute, a second
`jupyter-book build` with no source change reads nothing again and exits 0 over the failed
page. These tests build a one-chapter book in a scratch folder, with the execution settings of
the real `_config.yml`, through the same script `make book` uses.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "build_book.py"
pytestmark = pytest.mark.skipif(
    shutil.which("jupyter-book", path=str(pathlib.Path(sys.executable).parent)) is None,
    reason="jupyter-book is not installed in this environment",
)


def _notebook(source: str) -> dict:
    return {
        "cells": [
            {"cell_type": "markdown", "id": "c0", "metadata": {}, "source": ["# A chapter\n"]},
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "c1",
                "metadata": {},
                "outputs": [],
                "source": [source],
            },
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.fixture
def book(tmp_path):
    """A book whose one chapter fails while the file `fail` exists beside it."""
    real = yaml.safe_load((ROOT / "_config.yml").read_text())
    config = {"title": "scratch", "execute": real["execute"], "only_build_toc_files": True}
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    toc = {"format": "jb-book", "root": "intro", "chapters": [{"file": "chapter"}]}
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump(toc))
    (tmp_path / "intro.md").write_text("# Intro\n")
    code = (
        "import pathlib\nassert not pathlib.Path('fail').exists(), 'told to fail'\nprint(6 * 7)\n"
    )
    (tmp_path / "chapter.ipynb").write_text(json.dumps(_notebook(code)))
    return tmp_path


def build(root: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, timeout=600
    )


def test_a_failed_chapter_fails_every_build_until_it_is_fixed(book):
    (book / "fail").touch()
    html = book / "_build" / "html"
    first = build(book)
    assert first.returncode != 0, first.stdout[-2000:]
    assert not html.exists(), "a failed build must not leave pages in _build/html"
    assert (book / "_build" / "html.failed" / "chapter.html").exists()
    second = build(book)  # nothing changed: Sphinx alone would read nothing and exit 0
    assert second.returncode != 0, second.stdout[-2000:]
    assert "every page is read again" in second.stdout
    assert "Executing notebook failed" in second.stdout + second.stderr  # it ran again
    assert not html.exists()
    (book / "fail").unlink()
    third = build(book)
    assert third.returncode == 0, third.stdout[-3000:] + third.stderr[-3000:]
    assert "42" in (html / "chapter.html").read_text()
    assert not (book / "_build" / ".book-build-incomplete").exists()
    fourth = build(book)  # a clean build stays clean, from the cache
    assert fourth.returncode == 0 and "every page is read again" not in fourth.stdout


def test_a_kernel_that_dies_fails_the_build_at_once_not_at_the_cell_timeout(book):
    """nbclient notices a dead kernel (DeadKernelError) without waiting for the cell timeout."""
    nb = _notebook("import os\nos._exit(1)\n")
    (book / "chapter.ipynb").write_text(json.dumps(nb))
    done = build(book)
    log = done.stdout + done.stderr
    assert done.returncode != 0
    assert "DeadKernelError" in log, log[-3000:]
    assert "CellTimeoutError" not in log
