import numpy as np
import pytest

from darrm_opt import solvers


@pytest.fixture(params=solvers.available_backends())
def backend(request):
    return request.param


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)
