"""The book layer's shape: rooms by kind, public names across modules, `__all__` everywhere;
and the one reader of its data entries."""

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BOOK = ROOT / "posenc_core" / "book"
MODULES = sorted(p for p in BOOK.rglob("*.py") if "__pycache__" not in p.parts)
ROOMS = {"figures", "widgets", "models", "studies", "instruments", "sources"}
MAX_LINES = 900
PRIVATE_MODULES = {
    "_validation",
    "_extras",
    "_numerics",
}  # the core's, imported as modules by the book


def tree(path):
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_rooms_are_packages_with_their_modules():
    for room in ROOMS:
        assert (BOOK / room / "__init__.py").exists(), f"posenc_core/book/{room} is not a package"
        assert len(list((BOOK / room).glob("[!_]*.py"))) >= 1, f"{room} holds no module"


def test_every_module_declares_all():
    missing = []
    for path in MODULES:
        names = {
            t.id
            for node in tree(path).body
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        if "__all__" not in names:
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"modules without __all__: {missing}"


def test_no_private_name_is_imported_from_another_module():
    """A helper two modules need is public in one of them (the `_validation` module, imported as
    `check`, is the core's shared argument checking, and `_extras` its check of the extras'
    packages: they count as modules, not names)."""
    found = []
    for path in MODULES:
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module and "posenc_core" in node.module:
                for alias in node.names:
                    if alias.name.startswith("_") and alias.name not in PRIVATE_MODULES:
                        found.append(f"{path.relative_to(ROOT)}: {node.module}.{alias.name}")
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def imported_names(module_tree):
    """Names bound by imports from posenc_core in a module: the modules and objects it uses."""
    names = set()
    for node in ast.walk(module_tree):
        if isinstance(node, ast.ImportFrom) and node.module and "posenc_core" in node.module:
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("posenc_core"):
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def test_no_private_attribute_of_another_module_is_used():
    """`corpus._installed_version()` reaches into another module as surely as an import does."""
    found = []
    for path in MODULES:
        module_tree = tree(path)
        names = imported_names(module_tree)
        for node in ast.walk(module_tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in names
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, "private attributes used across modules:\n" + "\n".join(found)


def test_no_module_is_longer_than_a_reader_can_hold():
    long = {
        str(path.relative_to(ROOT)): n
        for path in MODULES
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_all_names_exist():
    import importlib

    for path in MODULES:
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        module = importlib.import_module(name)
        for public in module.__all__:
            assert hasattr(module, public) or (path.name == "__init__.py"), f"{name}.{public}"


# The committed data: the results files' entries that name a data file ({"file", "sha256"}).
SHA = "0123456789abcdef" * 4


def test_a_data_entry_is_a_file_inside_the_folder_and_a_sha256(tmp_path):
    from posenc_core.book import data_entry

    (tmp_path / "sub").mkdir()
    (tmp_path / "m.bin").write_bytes(b"m")
    got = data_entry({"file": "m.bin", "sha256": SHA.upper()}, where="x['m']", folder=tmp_path)
    assert got == ((tmp_path / "m.bin").resolve(), SHA)
    assert data_entry({"file": "sub/n.bin", "sha256": SHA}, where="x", folder=tmp_path)[0] == (
        (tmp_path / "sub" / "n.bin").resolve()
    )
    (tmp_path / "out.bin").symlink_to("/etc/hostname")
    inside = r"\['file'\] must be a relative file name inside .*"
    cases = [
        ({"file": "m.bin"}, r"x\['m'\] has no 'sha256': .*64 hex digits"),
        ({"sha256": SHA}, r"x\['m'\] has no 'file': .*relative file name inside"),
        ({"file": "../../etc/passwd", "sha256": SHA}, inside + "got '../../etc/passwd'"),
        ({"file": "sub/../../m.bin", "sha256": SHA}, inside + "got 'sub/../../m.bin'"),
        ({"file": "/etc/passwd", "sha256": SHA}, inside + "got '/etc/passwd'"),
        ({"file": "out.bin", "sha256": SHA}, inside + r"got 'out.bin' \(resolves to /etc/"),
        ({"file": "", "sha256": SHA}, inside + "got ''"),
        ({"file": ".", "sha256": SHA}, inside + "got '.'"),
        ({"file": 3, "sha256": SHA}, inside + "got 3"),
        ({"file": "m.bin", "sha256": SHA[:-1]}, r"\['sha256'\] must be 64 hex digits, .*got '0"),
        ({"file": "m.bin", "sha256": "g" * 64}, r"\['sha256'\] must be 64 hex digits"),
        ({"file": "m.bin", "sha256": None}, r"\['sha256'\] must be 64 hex digits, .*got None"),
        (["m.bin", SHA], r"x\['m'\] must be a mapping .*got list"),
    ]
    for entry, message in cases:
        with pytest.raises(ValueError, match=message):
            data_entry(entry, where="x['m']", folder=tmp_path)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"file": "lm_rope_seed0.safetensors"}, r"checkpoints\['rope/0'\] has no 'sha256'"),
        ({"file": "../../../../etc/passwd", "sha256": SHA}, "must be a relative file name"),
        ({"file": "/etc/passwd", "sha256": SHA}, "must be a relative file name inside"),
    ],
)
def test_every_reader_of_the_checkpoint_index_refuses_a_bad_entry(monkeypatch, entry, message):
    """lm_study.load_lm reads an entry's file and SHA-256, evaluations' staleness check its
    SHA-256: neither gives a bare KeyError, nor reads a file outside the data folder."""
    from posenc_core.book.studies import evaluations, lm_study

    res = lm_study.load_results()
    doctored = {**res, "checkpoints": {**res["checkpoints"], "rope/0": entry}}
    with pytest.raises(ValueError, match=message):
        lm_study.load_lm("rope", 0, results=doctored)
    monkeypatch.setattr(lm_study, "load_results", lambda path=None: doctored)
    with pytest.raises(ValueError, match=message):
        evaluations.is_stale(evaluations.load_results())


def test_importing_the_book_layer_warms_up_trigonometry_for_chapters_and_studies():
    # Chapters, studies and instruments call torch.sin/cos directly; the core warms up only
    # before its own calls (tests/core/test_numerics.py), so the book layer does it on import.
    code = (
        "import posenc_core._numerics as n, posenc_core\n"
        "before = n._trig_warm\n"
        "import posenc_core.book\n"
        "print(before, n._trig_warm)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["False", "True"]
