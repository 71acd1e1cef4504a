import pytest
import torch
from hypothesis import settings

settings.register_profile("book", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("book")


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state, so runs are reproducible."""
    torch.manual_seed(0)
