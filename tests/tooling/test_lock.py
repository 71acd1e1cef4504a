"""The lock (constraints.txt, written by tools/lock.sh): complete, in agreement with the
requirements files, used by every install, and what this environment holds."""

from __future__ import annotations

import importlib.metadata
import pathlib
import re
import sysconfig

ROOT = pathlib.Path(__file__).resolve().parents[2]
LOCK = ROOT / "constraints.txt"
REQUIREMENTS = ["requirements.txt", "requirements-build.txt", "requirements-test.txt"]


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: pathlib.Path) -> dict[str, str]:
    """name -> version of every ``name==version`` line (local labels such as +cpu dropped)."""
    found = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#+]+)", line.strip())
        if m:
            found[_name(m.group(1))] = m.group(2)
    return found


LOCKED = pins(LOCK)


def test_every_pinned_requirement_agrees_with_the_lock():
    files = [ROOT / f for f in REQUIREMENTS] + [ROOT / "binder" / "requirements.txt"]
    problems = [
        f"{path.relative_to(ROOT)}: {name}=={version}, lock has {LOCKED.get(name)}"
        for path in files
        for name, version in pins(path).items()
        if LOCKED.get(name) != version
    ]
    assert not problems, "\n".join(problems)


def test_this_environment_is_the_lock_and_the_lock_is_complete():
    """make test runs in the environment make book created with the lock: every installed
    distribution (transitive ones included) is locked, at the installed version."""
    # the environment's own site-packages: not the copies that packages vendor and put on
    # sys.path (setuptools adds setuptools/_vendor, with its own .dist-info folders)
    site = sorted({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
    installed = {
        _name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions(path=site)
    }
    ours = {"posenc-core", "pip"}
    missing = sorted(n for n in installed if n not in LOCKED and n not in ours)
    assert not missing, f"installed but not locked (run `make lock`): {missing}"
    wrong = sorted(
        f"{n}: installed {v}, locked {LOCKED[n]}"
        for n, v in installed.items()
        if n in LOCKED and v.split("+")[0] != LOCKED[n]
    )
    assert not wrong, "\n".join(wrong)
    for stack in ("ipykernel", "jupyter-client", "pyzmq", "nbclient", "tornado", "jupyter-cache"):
        assert stack in LOCKED, stack


def test_every_install_uses_the_lock():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^LOCK := -c constraints\.txt$", makefile, re.M)
    installs = [ln for ln in makefile.splitlines() if re.search(r"\$\(PIP\) install", ln)]
    assert installs and all("$(LOCK)" in ln for ln in installs), installs
    binder = (ROOT / "binder" / "requirements.txt").read_text()
    assert re.search(r"^-c \.\./constraints\.txt$", binder, re.M)
    post = (ROOT / "binder" / "postBuild").read_text()
    assert all("-c constraints.txt" in ln for ln in post.splitlines() if "pip install" in ln)
