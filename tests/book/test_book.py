"""Static checks of the book's sources: they run before the build."""

import ast
import io
import json
import pathlib
import re
import tokenize

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def toc_files():
    """Every page of the table of contents in reading order, a chapter's sub-pages after it."""

    def walk(entries):
        for entry in entries:
            yield entry["file"]
            yield from walk(entry.get("sections", []))

    files = [TOC["root"]]
    for part in TOC.get("parts", []):
        files += walk(part["chapters"])
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


def first_cell(path: pathlib.Path) -> str:
    return "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])


def test_every_chapter_opens_with_the_same_install_cell():
    """One install cell, so that what one page's readers get, every page's readers get
    (tests/book/test_extras.py runs it against installs with a package missing)."""
    cells = {path.name: first_cell(path) for path in CHAPTERS}
    assert len(set(cells.values())) == 1, f"first cells differ: {cells}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_first_cell_installs_from_the_configured_repository(path):
    """Colab runs a chapter in a stock environment; its first cell installs posenc_core from
    the same repository (and branch) that the launch buttons point at, with the book layer's
    extras; where posenc_core is installed, only the extras that are missing, and it stops
    with the command to run if one still is."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    first = first_cell(path)
    repo, branch = CONFIG["repository"]["url"], CONFIG["repository"]["branch"]
    assert "from posenc_core import _extras" in first and "except ModuleNotFoundError" in first
    repos = re.findall(r'^\s*REPO = "(\S+)"$', first, re.M)
    installs = re.findall(r"%pip install .*git\+\{REPO\}@(\w[\w.-]*)\"", first)
    assert (repos, installs) == ([repo], [branch]), (
        f"{path.name} installs from {repos}@{installs}, _config.yml says {repo}@{branch}"
    )
    # with the book layer's extras: the explorers are anywidgets, which Colab does not ship
    assert '"posenc_core[book] @ git+{REPO}' in first, f"{path.name}: install posenc_core[book]"
    assert '_extras.missing("book")' in first and first.endswith('_extras.ensure("book")')
    assert len(first.splitlines()) <= 12 and first.startswith("# "), "short, and says what"
    # The page is read where posenc_core is already installed: the cell stays in the notebook
    # (Colab and Jupyter run it first) and is removed from the HTML, where it was a collapsed
    # "Show code cell content" bar above the chapter's title.
    assert nb["cells"][0].get("metadata", {}).get("tags") == [HIDDEN], (
        f"{path.name}: tag the install cell {HIDDEN!r} and nothing else"
    )


def test_launch_buttons_are_configured():
    repo = CONFIG["repository"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repo["url"])
    assert repo["branch"], "set the branch explicitly (Jupyter Book defaults to master)"
    buttons = CONFIG["launch_buttons"]
    assert buttons["binderhub_url"].startswith("https://") and buttons["colab_url"].startswith(
        "https://"
    )


def test_binder_environment_pins_cpu_torch_like_the_readers():
    binder = (ROOT / "binder" / "requirements.txt").read_text()
    readers = (ROOT / "requirements.txt").read_text()
    pin = re.search(r"^torch==([\w.]+)", readers, re.M).group(1)
    assert re.search(rf"^torch=={re.escape(pin)}\+cpu$", binder, re.M)
    assert "download.pytorch.org/whl/cpu" in binder


# The chapters' code, as a reader sees it. A cell tagged remove-cell is plumbing that the book
# hides: it carries numbers into the prose with glue() and does nothing else. The one other
# removed cell is each chapter's first, the install cell (checked above).
HIDDEN = "remove-cell"
MAX_STATEMENTS = 15  # per visible cell, nested statements counted
MAX_LINE = 80  # characters per code line: the code column holds about 85 at 1280 px


def python_of(source: str) -> str:
    """Cell source as Python (IPython magics such as %pip become function calls)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def code_cells():
    for path in CHAPTERS:
        nb = json.loads(path.read_text(encoding="utf-8"))
        for k, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "code":
                hidden = k > 0 and HIDDEN in cell.get("metadata", {}).get("tags", [])
                yield f"{path.name} cell {k}", "".join(cell["source"]), hidden


def is_glue_call(node) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "glue"
    )


def glue_calls(tree) -> int:
    return sum(
        isinstance(n, ast.Call) and getattr(n.func, "id", None) == "glue" for n in ast.walk(tree)
    )


def test_visible_cells_are_short_and_glue_nothing():
    """Chapters hold narrative and short cells (library code belongs in posenc_core); the glue
    plumbing sits in the last hidden cell of the section (a figure's glue before the next
    figure is built), one glue call per cell."""
    problems = []
    for where, source, hidden in code_cells():
        if hidden:
            continue
        tree = ast.parse(python_of(source))
        statements = sum(isinstance(n, ast.stmt) for n in ast.walk(tree))
        if statements > MAX_STATEMENTS:
            problems.append(f"{where}: {statements} statements (at most {MAX_STATEMENTS})")
        if glue_calls(tree):
            problems.append(f"{where}: calls glue(); move it to a hidden cell")
    assert not problems, "\n".join(problems)


def test_hidden_cells_only_glue():
    """A hidden cell may hold glue() calls, loops over them and assignments feeding them: no
    computation a reader would need to see, and no output."""
    problems = []
    for where, source, hidden in code_cells():
        if not hidden:
            continue
        tree = ast.parse(python_of(source))
        if not glue_calls(tree):
            problems.append(f"{where}: a hidden cell that glues nothing")
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in {
                "print",
                "display",
            }:
                problems.append(f"{where}: a hidden cell prints (the reader would never see it)")
        for stmt in tree.body:
            if not (is_glue_call(stmt) or isinstance(stmt, ast.For)):
                problems.append(f"{where}: {ast.unparse(stmt)[:60]!r} is not a glue() call")
    assert not problems, "\n".join(problems)


def test_one_statement_per_line():
    """No `;` chains: each line does one thing. (A `;` that ends a line, IPython's way of
    hiding a value, chains nothing.)"""
    problems = []
    ends = {tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.ENDMARKER}
    for where, source, _ in code_cells():
        tokens = list(tokenize.generate_tokens(io.StringIO(python_of(source)).readline))
        for t, after in zip(tokens, tokens[1:]):
            if t.type == tokenize.OP and t.string == ";" and after.type not in ends:
                problems.append(f"{where} line {t.start[0]}")
    assert not problems, f"cells chaining statements with ';': {problems}"


def test_code_lines_fit_the_column():
    """At 1280 px the code column holds about 85 characters; longer lines scroll sideways."""
    problems = []
    for where, source, _ in code_cells():
        for n, line in enumerate(source.splitlines(), start=1):
            if len(line) > MAX_LINE:
                problems.append(f"{where} line {n}: {len(line)} characters: {line.strip()[:50]}")
    assert not problems, f"{len(problems)} lines over {MAX_LINE} characters:\n" + "\n".join(
        problems
    )


def test_chapters_are_formatted_by_ruff():
    """`ruff format chapters/` (80 columns, chapters/ruff.toml) leaves nothing to change."""
    import shutil
    import subprocess
    import sys

    pinned = pathlib.Path(sys.executable).parent / "ruff"  # requirements-test.txt's version
    ruff = str(pinned) if pinned.exists() else shutil.which("ruff")
    assert ruff, "ruff is not installed (requirements-test.txt)"
    run = subprocess.run(
        [ruff, "format", "--check", "--diff", str(ROOT / "chapters")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-1000:]


def _assigns_fig(tree) -> bool:
    return any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "fig" for t in n.targets)
        for n in ast.walk(tree)
    )


def _glued_figures(tree) -> list[str]:
    names = []
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.Call)
            and getattr(n.func, "id", None) == "glue"
            and len(n.args) >= 2
            and isinstance(n.args[1], ast.Name)
            and n.args[1].id == "fig"
            and isinstance(n.args[0], ast.Constant)
        ):
            names.append(n.args[0].value)
    return names


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_figure_a_cell_builds_is_shown(path):
    """A figure built into ``fig`` is glued by the hidden cell after it and shown by a
    ``{glue:figure}`` block (with its alt text and caption); one that is built and never glued
    would be computed and silently left out of the page."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    pending, problems = None, []
    for k, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse(python_of("".join(cell["source"])))
        if HIDDEN in cell.get("metadata", {}).get("tags", []):
            for name in _glued_figures(tree):
                pending = None
                if f"{{glue:figure}} {name}" not in text:
                    problems.append(f"cell {k}: figure {name!r} is glued but never shown")
        elif _assigns_fig(tree):
            if pending is not None:
                problems.append(f"cell {pending}: its figure is never glued")
            pending = k
    if pending is not None:
        problems.append(f"cell {pending}: its figure is never glued")
    assert not problems, "\n".join(problems)
