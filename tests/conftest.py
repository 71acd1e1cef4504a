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
