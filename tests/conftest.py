import os

import numpy as np
import pytest

from gpuksvm import backend as bk


@pytest.fixture
def gpu():
    """Skip unless CuPy and a CUDA device are present; yields the cupy module."""
    if not bk.cuda_available():
        pytest.skip("needs CuPy and a CUDA device")
    return bk.get_namespace("cuda")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


SHARED_DATASETS = os.environ.get(
    "GPUKSVM_SHARED_DATASETS",
    os.path.join(os.path.dirname(__file__), "..", "..", "shared", "datasets"))


def pytest_collection_modifyitems(config, items):
    if bk.cuda_available():
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
