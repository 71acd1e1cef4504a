"""Only a complete, successful build is published (tools/build_book.py, which `make book` runs).

Sphinx alone would publish others: it writes pages into the site as it goes, so an interrupted
build leaves a mix of old and new pages, and after a build whose chapter failed to execute, a
second `jupyter-book build` with no source change reads nothing again and exits 0 over the
failed page. These tests build a small book in a scratch folder, with the execution settings of
the real `_config.yml`, through the same script `make book` uses, and interrupt it while it
writes pages.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml
from scratch_book import notebook as _notebook

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "build_book.py"
pytestmark = pytest.mark.skipif(
    shutil.which("jupyter-book", path=str(pathlib.Path(sys.executable).parent)) is None,
    reason="jupyter-book is not installed in this environment",
)


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
        "import os, pathlib\nassert not pathlib.Path('fail').exists(), 'told to fail'\n"
        "print(6 * 7, 'threads', os.environ.get('OMP_NUM_THREADS'))\n"
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
    assert "42 threads 1" in (html / "chapter.html").read_text(), "kernels get one thread"
    assert not (book / "_build" / ".book-build-incomplete").exists()
    assert not (book / "_build" / "html.failed").exists(), "a good build clears the failed pages"
    fourth = build(book)  # a clean build stays clean, from the cache
    assert fourth.returncode == 0 and "every page is read again" not in fourth.stdout
    assert "42" in (html / "chapter.html").read_text(), "every page is in the new site"


def test_a_failed_build_leaves_the_last_good_site_in_place(book):
    assert build(book).returncode == 0
    html = book / "_build" / "html"
    good = _site(html)
    (book / "intro.md").write_text("# Intro, changed\n")
    (book / "chapter.ipynb").write_text(json.dumps(_notebook("assert False, 'told to fail'\n")))
    failed = build(book)
    assert failed.returncode != 0
    assert _site(html) == good, "the failed build changed the published site"
    assert "the last good site is still in" in failed.stderr
    assert "changed" in (book / "_build" / "html.failed" / "intro.html").read_text()


def _site(html: pathlib.Path) -> dict[str, bytes]:
    return {p.relative_to(html).as_posix(): p.read_bytes() for p in html.rglob("*") if p.is_file()}


# A scratch extension that writes each page slowly and says when it has written three, so a
# test can interrupt Sphinx while it writes pages. It records the build process's pid.
SLOW_PAGES = """
import os, pathlib, time

def _page(app, pagename, templatename, context, doctree):
    folder = pathlib.Path(app.srcdir)
    (folder / "build.pid").write_text(str(os.getpid()))
    written = folder / "written"
    count = int(written.read_text()) + 1 if written.exists() else 1
    written.write_text(str(count))
    time.sleep(0.4)

def setup(app):
    app.connect("html-page-context", _page)
    return {"parallel_read_safe": True}
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_build_leaves_the_last_good_site_intact(book, signum):
    """Ctrl-C (SIGINT to the wrapper) or SIGTERM while pages are written: the published site
    is the previous one, byte for byte; the unfinished pages are aside; the build stopped."""
    pages = [f"page{i:02d}" for i in range(12)]
    for name in pages:
        (book / f"{name}.md").write_text(f"# {name}, first\n")
    toc = yaml.safe_load((book / "_toc.yml").read_text())
    toc["chapters"] += [{"file": name} for name in pages]
    (book / "_toc.yml").write_text(yaml.safe_dump(toc))
    assert build(book).returncode == 0
    html = book / "_build" / "html"
    good = _site(html)
    assert len([k for k in good if k.startswith("page")]) == len(pages)

    (book / "_ext").mkdir()
    (book / "_ext" / "slow_pages.py").write_text(SLOW_PAGES)
    config = yaml.safe_load((book / "_config.yml").read_text())
    config["sphinx"] = {"local_extensions": {"slow_pages": "_ext/"}}
    (book / "_config.yml").write_text(yaml.safe_dump(config))
    for name in pages:
        (book / f"{name}.md").write_text(f"# {name}, second\n")
    wrapper = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(book)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    written = book / "written"
    deadline = time.monotonic() + 300
    while not (written.exists() and int(written.read_text() or 0) >= 3):
        assert wrapper.poll() is None, wrapper.communicate()
        assert time.monotonic() < deadline, "the build never started writing pages"
        time.sleep(0.05)
    wrapper.send_signal(signum)
    out, err = wrapper.communicate(timeout=120)
    assert wrapper.returncode == 128 + signum, out[-2000:] + err[-2000:]
    assert _site(html) == good, "pages of the interrupted build reached the published site"
    assert "was interrupted" in err and "the last good site is still in" in err
    unfinished = book / "_build" / "html.failed"
    written = [p.name for p in unfinished.glob("*.html") if p.name in good]
    assert 1 <= len(written) < len(pages), f"it was stopped while it wrote pages: {written}"
    builder = int((book / "build.pid").read_text())
    with pytest.raises(ProcessLookupError):  # the build itself did not outlive the wrapper
        for _ in range(50):
            os.kill(builder, 0)
            time.sleep(0.1)
    (book / "_config.yml").write_text(yaml.safe_dump({**config, "sphinx": {}}))
    again = build(book)  # the next build reads every page and publishes the new site whole
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "every page is read again" in again.stdout
    assert all("second" in (html / f"{name}.html").read_text() for name in pages)
    assert not unfinished.exists()


def test_a_kernel_that_dies_fails_the_build_at_once_not_at_the_cell_timeout(book):
    """nbclient notices a dead kernel (DeadKernelError) without waiting for the cell timeout."""
    nb = _notebook("import os\nos._exit(1)\n")
    (book / "chapter.ipynb").write_text(json.dumps(nb))
    done = build(book)
    log = done.stdout + done.stderr
    assert done.returncode != 0
    assert "DeadKernelError" in log, log[-3000:]
    assert "CellTimeoutError" not in log
