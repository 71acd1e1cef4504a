"""The book layer's shape: rooms by kind, public names across modules, `__all__` everywhere."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
BOOK = ROOT / "posenc_core" / "book"
MODULES = sorted(p for p in BOOK.rglob("*.py") if "__pycache__" not in p.parts)
ROOMS = {"figures", "widgets", "models", "studies", "instruments", "sources"}
MAX_LINES = 900


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
    `check`, is the core's shared argument checking and counts as a module, not a name)."""
    found = []
    for path in MODULES:
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module and "posenc_core" in node.module:
                for alias in node.names:
                    if alias.name.startswith("_") and alias.name != "_validation":
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
