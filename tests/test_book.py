"""Static checks of the book's sources: they run before the build."""

import json
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def toc_files():
    files = [TOC["root"]]
    for part in TOC.get("parts", []):
        files += [entry["file"] for entry in part["chapters"]]
    return files


def test_every_chapter_is_in_the_toc_in_order():
    listed = [f for f in toc_files() if f.startswith("chapters/")]
    assert listed == [f"chapters/{p.stem}" for p in CHAPTERS]
    for f in toc_files():
        matches = list(ROOT.glob(f + ".*"))
        assert len(matches) == 1, f"{f}: expected one source file, found {matches}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_notebooks_are_committed_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell.get("outputs", []) == [], f"{path.name} has stored outputs"
            assert cell.get("execution_count") is None, f"{path.name} has an execution count"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_first_cell_installs_from_the_configured_repository(path):
    """Colab runs a chapter in a stock environment; its first cell installs posenc_core from
    the same repository (and branch) that the launch buttons point at."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    first = "".join(nb["cells"][0]["source"])
    repo, branch = CONFIG["repository"]["url"], CONFIG["repository"]["branch"]
    assert "import posenc_core" in first and "except ImportError" in first
    urls = re.findall(r"git\+(\S+?)@(\w[\w.-]*)\"", first)
    assert urls == [(repo, branch)], f"{path.name} installs from {urls}, _config.yml says {repo}@{branch}"


def test_launch_buttons_are_configured():
    repo = CONFIG["repository"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repo["url"])
    assert repo["branch"], "set the branch explicitly (Jupyter Book defaults to master)"
    buttons = CONFIG["launch_buttons"]
    assert buttons["binderhub_url"].startswith("https://") and buttons["colab_url"].startswith("https://")


def test_binder_environment_pins_cpu_torch_like_the_readers():
    binder = (ROOT / "binder" / "requirements.txt").read_text()
    readers = (ROOT / "requirements.txt").read_text()
    pin = re.search(r"^torch==([\w.]+)", readers, re.M).group(1)
    assert re.search(rf"^torch=={re.escape(pin)}\+cpu$", binder, re.M)
    assert "download.pytorch.org/whl/cpu" in binder


def test_cells_are_short():
    """Chapters hold narrative and short cells; library code belongs in posenc_core."""
    for path in CHAPTERS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for k, cell in enumerate(nb["cells"][1:], start=1):
            if cell["cell_type"] == "code":
                lines = [ln for ln in "".join(cell["source"]).splitlines() if ln.strip()]
                assert len(lines) <= 16, f"{path.name} cell {k} has {len(lines)} lines"
