"""posenc_core._extras and the chapters' first cell: the book layer's packages, checked.

A reader may have posenc_core without its book extras (installed alone, or with ``--no-deps``),
or with one of them too old. ``import posenc_core.book`` must then stop at once, naming what is
missing and the one command that installs it, and a chapter's first cell must install exactly
what is missing. Each case runs in a fresh interpreter whose ``sys.meta_path`` starts with a
finder that makes some packages not installed (``import`` raises ModuleNotFoundError for them),
or whose ``sys.path`` starts with a folder holding an old version of one.
"""

import json
import pathlib
import subprocess
import sys

import pytest

from posenc_core import _extras

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
BOOK = ["matplotlib", "ipywidgets", "anywidget>=0.11", "safetensors", "pygments"]
GIT = '"posenc_core[book] @ git+https://github.com/posenc-book/positional-encoding@main"'

PRELUDE = """\
import importlib.abc, json, sys
sys.path[:0] = {path!r}

class Hide(importlib.abc.MetaPathFinder):
    \"\"\"The named top-level packages, and their modules, are not installed.\"\"\"

    def __init__(self, names):
        self.names = set(names)

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

HIDDEN = Hide({hide!r})
sys.meta_path.insert(0, HIDDEN)
"""


def run(code: str, *, hide=(), path=()) -> dict:
    """Run ``code`` after the prelude in a fresh interpreter; return the JSON it prints last."""
    source = PRELUDE.format(hide=list(hide), path=[str(p) for p in path]) + code
    done = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


IMPORT_BOOK = """
try:
    import posenc_core.book
    error = None
except ImportError as e:
    error = {"type": type(e).__name__, "name": e.name, "message": str(e)}
from posenc_core import _extras
heavy = ["matplotlib", "ipywidgets", "anywidget", "safetensors", "pygments"]
print(json.dumps({
    "error": error,
    "missing": _extras.missing("book"),
    "command": _extras.install_command("book"),
    "loaded": [m for m in heavy if m in sys.modules],
}))
"""


def old_anywidget(folder: pathlib.Path) -> pathlib.Path:
    """A folder holding anywidget 0.9.0 (its module and its metadata), older than the 0.11
    the book extra asks for."""
    (folder / "anywidget").mkdir(parents=True)
    (folder / "anywidget" / "__init__.py").write_text("__version__ = '0.9.0'\n")
    info = folder / "anywidget-0.9.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: anywidget\nVersion: 0.9.0\n")
    return folder


def test_with_every_extra_installed_nothing_is_missing_and_nothing_heavy_loads():
    """The check reads module lookups and metadata: import posenc_core.book imports none of
    the extras' packages."""
    assert _extras.missing("book") == [] and _extras.install_command("book") == ""
    assert _extras.ensure("book") is None
    got = run(IMPORT_BOOK)
    assert got == {"error": None, "missing": [], "command": "", "loaded": []}


@pytest.mark.parametrize(
    "hidden, requirement, command",
    [
        ("anywidget", "anywidget>=0.11", 'pip install "anywidget>=0.11"'),
        ("matplotlib", "matplotlib", "pip install matplotlib"),
    ],
)
def test_importing_the_book_layer_without_an_extra_names_it_and_the_command(
    hidden, requirement, command
):
    got = run(IMPORT_BOOK, hide=[hidden])
    error = got["error"]
    assert error["type"] == "ModuleNotFoundError" and error["name"] == hidden
    assert f"{requirement} (not installed)" in error["message"]
    assert error["message"].endswith("\n    " + command), error["message"]
    assert got["missing"] == [requirement] and got["command"] == command


def test_two_missing_extras_are_named_together_with_one_command():
    got = run(IMPORT_BOOK, hide=["anywidget", "pygments", "matplotlib"])
    assert got["missing"] == ["matplotlib", "anywidget>=0.11", "pygments"]
    assert got["command"] == 'pip install matplotlib "anywidget>=0.11" pygments'
    assert got["error"]["message"].endswith(got["command"])


def test_a_version_too_old_counts_as_missing(tmp_path):
    got = run(IMPORT_BOOK, path=[old_anywidget(tmp_path)])
    assert got["missing"] == ["anywidget>=0.11"]
    assert got["command"] == 'pip install "anywidget>=0.11"'
    assert "anywidget>=0.11 (0.9.0 is installed)" in got["error"]["message"]


def test_the_requirements_are_pyprojects_from_the_metadata_or_the_copy(monkeypatch):
    tomllib = pytest.importorskip("tomllib")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["optional-dependencies"]["book"] == BOOK
    assert list(_extras.REQUIREMENTS["book"]) == BOOK
    assert _extras.requirements("book") == BOOK  # posenc_core's installed metadata

    def not_installed(name):
        raise _extras.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_extras.importlib.metadata, "requires", not_installed)
    assert _extras.requirements("book") == BOOK  # the copy, for an uninstalled checkout
    with pytest.raises(ValueError, match="posenc_core has no extra 'plots'; it has book"):
        _extras.requirements("plots")


def test_requirements_are_quoted_for_the_shell_where_they_hold_more_than_a_name():
    assert _extras.quoted(["anywidget>=0.11", "matplotlib", "a[b]"]) == (
        '"anywidget>=0.11" matplotlib "a[b]"'
    )


@pytest.mark.parametrize(
    "version, specifier, met",
    [
        ("0.9.0", ">=0.11", False),
        ("0.11.0", ">=0.11", True),
        ("0.11.0rc1", ">=0.11", True),  # release numbers only
        ("0.10.9", ">0.10", True),
        ("1.5", ">=1,<2", True),
        ("2.0", ">=1, <2", False),
        ("1.2", "==1.2.0", True),
        ("1.2.3", "==1.2.*", True),
        ("1.3", "==1.2.*", False),
        ("1.0.1", "!=1.0", True),
        ("1.0", "!=1.0.0", False),
        ("1.2.5", "~=1.2.0", True),
        ("1.3.0", "~=1.2.0", False),
        ("2.0", "~=1.2", False),
        ("1.0", "<=1.0", True),
    ],
)
def test_versions_compare_by_release(version, specifier, met):
    assert _extras._satisfies(version, specifier) is met


# The chapters' first cell, run as a notebook runs it: in IPython, its %pip replaced by a
# recorder that either does what pip would (the hidden packages become installed) or nothing
# (pip failed).
RUN_FIRST_CELL = """
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()
calls = []

def pip(line):
    calls.append(line)
    if {works!r}:
        HIDDEN.names.clear()

shell.register_magic_function(pip, "line", "pip")
result = shell.run_cell({source!r})
error = result.error_in_exec
print(json.dumps({{
    "calls": calls,
    "error": None if error is None else f"{{type(error).__name__}}: {{error}}",
}}))
"""


def run_first_cell(*, hide=(), path=(), works=True) -> dict:
    pytest.importorskip("IPython")
    source = "".join(json.loads(CHAPTERS[0].read_text(encoding="utf-8"))["cells"][0]["source"])
    return run(RUN_FIRST_CELL.format(works=works, source=source), hide=hide, path=path)


def test_the_first_cell_installs_nothing_where_everything_is_installed():
    assert run_first_cell() == {"calls": [], "error": None}


def test_the_first_cell_installs_only_the_missing_extra_and_keeps_posenc_core():
    got = run_first_cell(hide=["anywidget"])
    assert got == {"calls": ['install --quiet "anywidget>=0.11"'], "error": None}


def test_the_first_cell_installs_an_extra_too_old(tmp_path):
    got = run_first_cell(path=[old_anywidget(tmp_path)], works=False)
    assert got["calls"] == ['install --quiet "anywidget>=0.11"']
    assert "anywidget>=0.11 (0.9.0 is installed)" in got["error"]


def test_the_first_cell_stops_with_the_command_when_the_install_fails():
    got = run_first_cell(hide=["anywidget", "safetensors"], works=False)
    assert got["calls"] == ['install --quiet "anywidget>=0.11" safetensors']
    assert got["error"].startswith("ModuleNotFoundError: posenc_core[book] needs packages")
    assert got["error"].endswith('pip install "anywidget>=0.11" safetensors')


def test_the_first_cell_installs_posenc_core_with_its_extras_from_the_repository():
    assert run_first_cell(hide=["posenc_core"]) == {
        "calls": [f"install --quiet {GIT}"],
        "error": None,
    }
    got = run_first_cell(hide=["posenc_core"], works=False)
    assert got["calls"] == [f"install --quiet {GIT}"]
    assert got["error"] == "ModuleNotFoundError: No module named 'posenc_core'"
