"""The execution cache follows the code the chapters import (_ext/exec_cache.py).

jupyter-cache keys stored outputs on a notebook's code cells only; the extension clears the
cache and re-reads every notebook when posenc_core (with its data), a library version or a
POSENC_* switch changes. These tests drive its two steps on a scratch folder.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import sys
import types

import pytest
import yaml
from scratch_book import notebook

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("exec_cache", ROOT / "_ext" / "exec_cache.py")
exec_cache = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(exec_cache)


@pytest.fixture
def book(tmp_path):
    """A minimal book folder: a package module and a data file."""
    (tmp_path / "posenc_core").mkdir()
    (tmp_path / "posenc_core" / "rope.py").write_text("BASE = 10000.0\n")
    (tmp_path / "posenc_core" / "book" / "data").mkdir(parents=True)
    (tmp_path / "posenc_core" / "book" / "data" / "study.json").write_text('{"loss": 1.0}\n')
    return tmp_path


def digest(root, **kw):
    return exec_cache.chapter_inputs(root, environ=kw.pop("environ", {}), **kw)["digest"]


def test_the_digest_changes_with_the_package_the_data_and_the_switches(book):
    before = digest(book)
    assert digest(book) == before, "the digest must be deterministic"
    (book / "posenc_core" / "rope.py").write_text("BASE = 500000.0\n")
    after_code = digest(book)
    assert after_code != before
    (book / "posenc_core" / "book" / "data" / "study.json").write_text('{"loss": 2.0}\n')
    after_data = digest(book)
    assert after_data != after_code
    (book / "posenc_core" / "new.py").write_text("")
    assert digest(book) != after_data
    assert digest(book, environ={"POSENC_STATIC_WIDGETS": "1"}) != digest(book)
    assert digest(book, environ={"HOME": "/elsewhere"}) == digest(book), "only POSENC_* counts"
    # where the native kernel is cached changes no output (a fresh clone run with its own
    # cache folder re-executed every chapter before)
    assert digest(book, environ={"POSENC_CACHE_DIR": "/tmp/private"}) == digest(book)
    assert digest(book, environ={"POSENC_NATIVE": "0"}) != digest(book)


def test_a_docstring_or_comment_edit_does_not_count_and_a_constant_does(book):
    """Python sources count by what they compute (provenance.source_key), so editing a
    docstring re-executes no chapter; the data counts byte for byte."""
    rope = book / "posenc_core" / "rope.py"
    rope.write_text('"""RoPE."""\n\nBASE = 10000.0\n')
    before = digest(book)
    rope.write_text('"""Rotary position embedding, reworded."""\n\n# a comment\nBASE = 10000.0\n')
    assert digest(book) == before
    rope.write_text('"""RoPE."""\n\nBASE = 10000.5\n')
    assert digest(book) != before


def test_bytecode_and_checkpoints_do_not_count(book):
    before = digest(book)
    (book / "posenc_core" / "__pycache__").mkdir()
    (book / "posenc_core" / "__pycache__" / "rope.cpython-311.pyc").write_bytes(b"\0\1")
    assert digest(book) == before


def test_a_library_version_counts(book):
    with_numpy = digest(book, distributions=("numpy",))
    with_absent = digest(book, distributions=("numpy", "no-such-distribution-xyz"))
    assert with_numpy != with_absent
    record = exec_cache.chapter_inputs(
        book, distributions=("no-such-distribution-xyz",), environ={}
    )
    assert record["versions"] == {"no-such-distribution-xyz": "absent"}


def test_a_cache_filled_for_other_inputs_is_deleted(book, tmp_path):
    cache = tmp_path / "cache"
    inputs = exec_cache.chapter_inputs(book, environ={})
    assert exec_cache.refresh_cache(cache, inputs) is False  # no cache yet: nothing stale
    (cache / "global.db").write_text("outputs")
    assert exec_cache.refresh_cache(cache, inputs) is False  # same inputs: kept
    assert (cache / "global.db").read_text() == "outputs"
    (book / "posenc_core" / "rope.py").write_text("BASE = 1.0\n")
    changed = exec_cache.chapter_inputs(book, environ={})
    assert exec_cache.refresh_cache(cache, changed) is True
    assert not (cache / "global.db").exists()
    assert json.loads((cache / exec_cache.RECORD).read_text())["digest"] == changed["digest"]


def test_a_cache_without_a_record_is_deleted(book, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "global.db").write_text("outputs of unknown provenance")
    assert exec_cache.refresh_cache(cache, exec_cache.chapter_inputs(book, environ={})) is True
    assert not (cache / "global.db").exists()


def fake_env(stale, dropped=False):
    docs = {
        "intro": "intro.md",
        "chapters/01": "chapters/01.ipynb",
        "chapters/02": "chapters/02.ipynb",
    }
    return types.SimpleNamespace(
        found_docs=set(docs),
        doc2path=docs.__getitem__,
        posenc_cache_stale=stale,
        posenc_cache_dropped=["chapters/02.ipynb"] if dropped else [],
    )


def test_a_stale_cache_marks_every_notebook_outdated():
    assert exec_cache._outdated(None, fake_env(True), set(), set(), set()) == [
        "chapters/01",
        "chapters/02",
    ]
    assert exec_cache._outdated(None, fake_env(False), set(), set(), set()) == []


def test_a_dropped_entry_marks_its_notebook_outdated(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # doc2path gives relative paths here
    env = fake_env(False, dropped=True)
    assert exec_cache._outdated(None, env, set(), set(), set()) == ["chapters/02"]


def test_the_book_loads_the_extension():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["local_extensions"].get("exec_cache") == "_ext/"
    assert config["execute"]["execute_notebooks"] == "cache"


# A damaged entry of the execution cache, on a real build -------------------------------------

SCRIPT = ROOT / "tools" / "build_book.py"


@pytest.fixture
def built(tmp_path):
    """A one-chapter book that loads this extension, built once (its cache holds one entry)."""
    if shutil.which("jupyter-book", path=str(pathlib.Path(sys.executable).parent)) is None:
        pytest.skip("jupyter-book is not installed in this environment")
    real = yaml.safe_load((ROOT / "_config.yml").read_text())
    config = {
        "title": "scratch",
        "execute": real["execute"],
        "only_build_toc_files": True,
        "sphinx": {"local_extensions": {"exec_cache": str(ROOT / "_ext")}},
    }
    (tmp_path / "_config.yml").write_text(yaml.safe_dump(config))
    toc = {"format": "jb-book", "root": "intro", "chapters": [{"file": "chapter"}]}
    (tmp_path / "_toc.yml").write_text(yaml.safe_dump(toc))
    (tmp_path / "intro.md").write_text("# Intro\n")
    (tmp_path / "chapter.ipynb").write_text(json.dumps(notebook("print(6 * 7)\n")))
    first = _build(tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    return tmp_path


def _build(root):
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, timeout=600
    )


def _entry(root) -> pathlib.Path:
    (entry,) = (root / "_build" / ".jupyter_cache" / "executed").glob("*/base.ipynb")
    return entry


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda text: text[: len(text) // 2], id="truncated"),
        pytest.param(lambda text: text.replace("42", "43"), id="edited-still-json"),
    ],
)
def test_a_damaged_cache_entry_is_dropped_and_its_chapter_executes_again(built, damage):
    """A truncated entry used to fail every later build inside nbformat (NotJSONError, naming
    neither file nor fix); an edited one was published as if the chapter had printed it."""
    entry = _entry(built)
    recorded = json.loads((entry.parents[2] / exec_cache.ENTRIES).read_text())
    assert recorded == {entry.parent.name: exec_cache.entry_digest(entry.parent)}
    entry.write_text(damage(entry.read_text()))
    (built / "chapter.ipynb").touch()  # the page is read again, as after any edit
    again = _build(built)
    log = again.stdout + again.stderr
    assert again.returncode == 0, log[-3000:]
    assert log.count("execution cache: dropped the entry of") == 1, log[-3000:]
    assert "chapter.ipynb" in log and "executes again" in log
    assert "Executing notebook" in log, "the chapter was not executed again"
    page = (built / "_build" / "html" / "chapter.html").read_text()
    assert re.findall(r"<pre><span></span>(\d+)", page) == ["42"], "the chapter's output"
    entry = _entry(built)  # the new entry is recorded and used by the next build
    assert json.loads((entry.parents[2] / exec_cache.ENTRIES).read_text()) == {
        entry.parent.name: exec_cache.entry_digest(entry.parent)
    }
    (built / "chapter.ipynb").touch()
    third = _build(built)
    assert third.returncode == 0 and "Executing notebook" not in third.stdout + third.stderr


def test_a_dropped_entry_marks_its_notebook_outdated_even_when_its_source_did_not_change(
    built,
):
    entry = _entry(built)
    entry.write_text("{")
    again = _build(built)  # no source change: Sphinx alone would not read the chapter
    log = again.stdout + again.stderr
    assert again.returncode == 0, log[-3000:]
    assert "dropped the entry of" in log and "Executing notebook" in log
