"""Shared by the book layer's tests: running a node --test script of this folder."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def node_test():
    """Run ``node --test script`` from the repository root with ``env`` added to this process's
    environment (a key mapped to None is removed); skip when node is not on PATH."""

    def run(script: pathlib.Path, env: dict[str, str | None], why: str) -> None:
        node = shutil.which("node")
        if node is None:
            pytest.skip(f"node is not on PATH: {why} are checked with node --test")
        full = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
        done = subprocess.run(
            [node, "--test", str(script)],
            cwd=ROOT,
            env=full,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]

    return run
