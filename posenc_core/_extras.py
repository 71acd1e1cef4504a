"""Whether an optional extra of posenc_core is installed (standard library only).

``posenc_core[book]`` adds what the book layer needs beyond torch and numpy (matplotlib,
ipywidgets, anywidget, ...). ``import posenc_core.book`` calls :func:`ensure` so that a missing
package surfaces at once, named, with the one command that installs it; the chapters' first
cell calls :func:`missing` to install only what is missing (an installed posenc_core is kept).

An extra's requirements are read from posenc_core's installed metadata
(``importlib.metadata.requires``, the lines marked ``extra == "<extra>"``); where posenc_core
has none (its sources on ``sys.path`` without an install) from :data:`REQUIREMENTS`, a copy of
pyproject.toml's (a test keeps the two equal). A requirement is met when its module can be
found (``importlib.util.find_spec``: nothing is imported) and, if it gives versions, when the
installed distribution's version satisfies them; a version too old counts as missing. Versions
compare by their release numbers (``0.11.0rc1`` as ``0.11.0``); markers other than the extra
are not evaluated, and a specifier this module does not understand is taken as met.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import re

__all__ = [
    "DISTRIBUTION",
    "REQUIREMENTS",
    "requirements",
    "missing",
    "quoted",
    "install_command",
    "ensure",
]

DISTRIBUTION = "posenc_core"

REQUIREMENTS = {
    "book": ("matplotlib", "ipywidgets", "anywidget>=0.11", "safetensors", "pygments"),
}
"""pyproject.toml's ``[project.optional-dependencies]`` that the package needs at run time,
for an uninstalled checkout (an installed posenc_core's own metadata takes precedence)."""

_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[^\]]*\])?\s*")
_EXTRA = re.compile(r"""\bextra\s*==\s*(['"])(.*?)\1""")
_CLAUSE = re.compile(r"(~=|===|==|!=|<=|>=|<|>)\s*([^\s,]+)")
_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(extra: str) -> list[str]:
    """The requirements of posenc_core's ``extra``, e.g. ``["matplotlib", "anywidget>=0.11"]``.

    Args:
        extra: the extra's name, e.g. ``"book"``.

    Returns:
        each requirement as written in the package's metadata, its marker removed.

    Raises:
        ValueError: posenc_core has no such extra.
    """
    try:
        lines = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        lines = []
    found = []
    for line in lines:
        requirement, _, marker = line.partition(";")
        extras = {_normalize(m.group(2)) for m in _EXTRA.finditer(marker)}
        if _normalize(extra) in extras:
            found.append(requirement.strip())
    if found:
        return found
    if extra in REQUIREMENTS:
        return list(REQUIREMENTS[extra])
    raise ValueError(f"posenc_core has no extra {extra!r}; it has {', '.join(REQUIREMENTS)}")


def _release(version: str) -> tuple[int, ...] | None:
    m = _RELEASE.match(version)
    return tuple(int(part) for part in m.group(1).split(".")) if m else None


def _satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` meets every clause of ``specifier`` (e.g. ``">=0.11,<2"``)."""
    have = _release(version)
    for op, want in _CLAUSE.findall(specifier):
        prefix = want.endswith(".*")
        need = _release(want[:-2] if prefix else want)
        if have is None or need is None:
            continue  # not a version this module reads: taken as met
        n = max(len(have), len(need))
        a, b = have + (0,) * (n - len(have)), need + (0,) * (n - len(need))
        if op in ("==", "===", "!="):
            equal = (have + (0,) * len(need))[: len(need)] == need if prefix else a == b
            ok = equal if op != "!=" else not equal
        elif op == "~=":  # >= need, and the same release up to need's last part but one
            ok = a >= b and a[: len(need) - 1] == b[: len(need) - 1]
        else:
            ok = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        if not ok:
            return False
    return True


def _problem(requirement: str) -> str | None:
    """Why ``requirement`` is not met (``"not installed"``, ``"0.9.0 is installed"``), or
    None when it is."""
    m = _NAME.match(requirement)
    if m is None:
        return None  # not a requirement this module reads: taken as met
    name, specifier = m.group(1), requirement[m.end() :].strip().strip("()")
    try:  # a distribution's module is its name, lowercase with "_" (true of every extra here)
        spec = importlib.util.find_spec(name.lower().replace("-", "_").replace(".", "_"))
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return "not installed"
    if not specifier or specifier.startswith("@"):
        return None
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None  # importable without metadata (a copy on sys.path): cannot tell
    return None if _satisfies(version, specifier) else f"{version} is installed"


def missing(extra: str) -> list[str]:
    """The requirements of ``extra`` that are not met: not installed, or at a version the
    extra does not allow (empty: everything is there).

    Args:
        extra: the extra's name, e.g. ``"book"``.

    Returns:
        the unmet requirements as :func:`requirements` gives them, e.g. ``["anywidget>=0.11"]``.
    """
    return [r for r in requirements(extra) if _problem(r) is not None]


def quoted(items: list[str]) -> str:
    """Requirements as shell words for ``pip install``: double-quoted where they hold more than
    a name (``"anywidget>=0.11" matplotlib``; double quotes work in POSIX shells and Windows'
    alike)."""
    return " ".join(r if re.fullmatch(r"[\w.-]+", r) else f'"{r}"' for r in items)


def install_command(extra: str) -> str:
    """The one command that installs what ``extra`` is missing, e.g.
    ``pip install "anywidget>=0.11"`` (only the missing requirements: an installed posenc_core
    is left alone); ``""`` when nothing is missing."""
    needed = missing(extra)
    return f"pip install {quoted(needed)}" if needed else ""


def ensure(extra: str) -> None:
    """Return if every requirement of ``extra`` is met; else raise.

    Raises:
        ModuleNotFoundError: naming each unmet requirement (not installed, or the version
            installed) and the command that installs them.
    """
    needed = missing(extra)
    if needed:  # look again past the import system's caches (a package installed just now)
        importlib.invalidate_caches()
        needed = missing(extra)
    if not needed:
        return
    why = ", ".join(f"{r} ({_problem(r)})" for r in needed)
    m = _NAME.match(needed[0])
    raise ModuleNotFoundError(
        f"posenc_core[{extra}] needs packages that are missing: {why}. Install them with this "
        f"command (in a notebook, %pip instead of pip), then restart the kernel if one of them "
        f"was already imported:\n    pip install {quoted(needed)}",
        name=m.group(1) if m else None,
    )
