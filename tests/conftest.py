import subprocess
import sys

import pytest
import torch
from hypothesis import settings

settings.register_profile("book", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("book")


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state, so runs are reproducible."""
    torch.manual_seed(0)


LAYERS = {"core": "core", "book": "book", "tooling": "tooling", "built": "built"}


def pytest_collection_modifyitems(config, items):
    """Mark each test by the folder it sits in: tests/core (the numerical core), tests/book (the
    book layer and the chapters' sources), tests/tooling (the site's build tools) and
    tests/built (the built book, in a browser too), so that `pytest -m core` (or book,
    tooling, built) selects one layer."""
    for item in items:
        parts = item.path.parts
        for folder, marker in LAYERS.items():
            if folder in parts[parts.index("tests") + 1 : parts.index("tests") + 2]:
                item.add_marker(getattr(pytest.mark, marker))


def pytest_configure(config):
    """With pytest-xdist (`-n`), build apply_rope's native kernel once in the controlling
    process, before the workers start: two workers' first calls would otherwise race for the
    build lock in the shared cache (~/.cache/posenc_core), and the one that waits longer than
    LOCK_WAIT_S would run on the eager path (posenc_core/rope/native.py), skipping the kernel's
    tests. A failure here is left to the tests to report."""
    if getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput"):
        subprocess.run(
            [sys.executable, "-c", "from posenc_core.rope import native; native.kernel.library()"],
            capture_output=True,
            timeout=300,
            check=False,
        )
