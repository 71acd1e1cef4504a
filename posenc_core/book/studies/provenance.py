"""Which code computed a study's results, and whether the installed code still does.

Every results file the studies write records a *source key* per module that determines its
numbers; the study's ``is_stale`` compares them with the installed code. A source key is the
SHA-256 of what a file computes: a Python file by its syntax tree without bare-string
statements (docstrings), written by :func:`canonical_tree` so that it is the same under every
supported Python; a C file by its tokens without comments and whitespace. A package counts
with every ``.py`` and ``.c`` file in its folder. Tested in ``tests/book/test_provenance.py``.
"""

from __future__ import annotations

import ast
import hashlib
import math
import pathlib
import platform
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "PACKAGE_ROOT",
    "canonical_tree",
    "c_tokens",
    "changed_modules",
    "code_version",
    "library_versions",
    "module_files",
    "round_floats",
    "source_key",
    "source_keys",
]

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[2]
"""The folder of the installed ``posenc_core`` package; module names are relative to it."""

_SKIPPED_FIELDS = frozenset({"type_comment", "type_params", "kind"})


def module_files(name: str, root: pathlib.Path | None = None) -> list[pathlib.Path]:
    """Source files of ``posenc_core.<name>``: the module's ``.py`` file, or every ``.py`` and
    ``.c`` file of a package folder, sorted by name.

    ``root`` is the folder of the ``posenc_core`` package to read (None: the installed one,
    :data:`PACKAGE_ROOT`).

    Raises:
        ValueError: no such module or package under ``root``.
    """
    root = PACKAGE_ROOT if root is None else pathlib.Path(root)
    path = root.joinpath(*name.split("."))
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".py", ".c"))
    if path.with_suffix(".py").is_file():
        return [path.with_suffix(".py")]
    raise ValueError(f"name: no module or package {name!r} in {root}")


def _is_string_statement(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    """Remove every statement that is a bare string: docstrings of modules, classes and
    functions, and the attribute docstrings Sphinx reads after an assignment. Such a statement
    computes nothing."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and any(_is_string_statement(n) for n in body):
                kept = [n for n in body if not _is_string_statement(n)]
                setattr(node, field, kept or ([ast.Pass()] if field == "body" else []))
    return tree


def canonical_tree(node: Any) -> str:
    """A syntax tree written out with node names and non-empty fields only (no positions, no
    type comments or type parameters), the same text under every supported Python."""
    if isinstance(node, ast.AST):
        fields = []
        for field, value in ast.iter_fields(node):
            if field in _SKIPPED_FIELDS or value is None or value == []:
                continue
            fields.append(f"{field}={canonical_tree(value)}")
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return "[" + ",".join(canonical_tree(item) for item in node) + "]"
    return repr(node)


_C_TOKEN = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)
      | (?P<directive>^[ \t]*\#[^\n]*(?:\\\n[^\n]*)*)
      | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
      | (?P<word>[A-Za-z0-9_.]+)
      | (?P<space>\s+)
      | (?P<punct>.)""",
    re.S | re.M | re.X,
)


def c_tokens(text: str) -> list[str]:
    """The tokens of C source without comments and whitespace; a preprocessor line is one token
    (its inner whitespace collapsed)."""
    tokens = []
    for m in _C_TOKEN.finditer(text):
        kind = m.lastgroup
        if kind in ("comment", "space"):
            continue
        token = m.group()
        if kind == "directive":
            token = " ".join(token.replace("\\\n", " ").split())
        tokens.append(token)
    return tokens


def source_key(path: str | pathlib.Path) -> str:
    """SHA-256 of what one ``.py`` or ``.c`` file computes (see the module docstring).

    Raises:
        ValueError: a file that is neither, or Python that does not parse.
    """
    path = pathlib.Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError as err:
            raise ValueError(f"path: {path} is not valid Python ({err.msg})") from None
        canonical = canonical_tree(_strip_docstrings(tree))
    elif path.suffix == ".c":
        canonical = "\0".join(c_tokens(text))
    else:
        raise ValueError(f"path: expected a .py or .c file, got {path.name!r}")
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def source_keys(modules: Sequence[str], root: pathlib.Path | None = None) -> dict[str, str]:
    """One key per module name (relative to ``posenc_core``): :func:`source_key` of the module,
    or of a package's files by name and key in order."""
    keys = {}
    for name in modules:
        digest = hashlib.sha256()
        for path in module_files(name, root):
            digest.update(f"{path.name}\0{source_key(path)}\n".encode())
        keys[name] = digest.hexdigest()
    return keys


def code_version(keys: Mapping[str, str]) -> str:
    """One SHA-256 over a mapping of :func:`source_keys` (changes when any of them does)."""
    joined = "".join(f"{m}:{h}\n" for m, h in sorted(keys.items()))
    return hashlib.sha256(joined.encode()).hexdigest()


def changed_modules(
    recorded: Mapping[str, str], modules: Sequence[str], root: pathlib.Path | None = None
) -> list[str]:
    """The modules whose key differs from the one ``recorded`` (or that it lacks)."""
    return [m for m, key in source_keys(modules, root).items() if recorded.get(m) != key]


def round_floats(x: Any, digits: int) -> Any:
    """``x`` with every float rounded to ``digits`` decimals (NaN kept), through lists and
    dicts; other values unchanged."""
    if isinstance(x, float):
        return x if math.isnan(x) else round(x, digits)
    if isinstance(x, list):
        return [round_floats(y, digits) for y in x]
    if isinstance(x, dict):
        return {k: round_floats(y, digits) for k, y in x.items()}
    return x


def library_versions(**extra: str) -> dict[str, str]:
    """The versions a results file records: torch, numpy and Python (and any ``extra``)."""
    import numpy as np
    import torch

    return {
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
        **extra,
    }
