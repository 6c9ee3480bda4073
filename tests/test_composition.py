"""Composition values of the paper's Tables 2, 3 and 5 (as given in the notes)."""

import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.baselines import const_parameters
from darrm_opt.model.composition import (
    allowance_from_subsampling,
    general_composition,
    simple_composition,
)
from darrm_opt.model.params import Params


@pytest.mark.parametrize(
    "eps,delta,Q,expected_eps,expected_delta",
    [
        (0.2676, 3e-4, 20, 5.352, 0.006),
        (0.2676, 3e-4, 50, 9.901, 0.015),
        (0.2676, 3e-4, 100, 15.044, 0.030),
        (0.2556, 3e-4, 20, 5.112, None),
        (0.2556, 3e-4, 50, 9.382, None),
        (0.2556, 3e-4, 100, 14.219, None),
        (0.0892, 1e-4, 20, 1.704, None),
        (0.0892, 1e-4, 50, 2.837, None),
        (0.0892, 1e-4, 100, 4.202, None),
    ],
)
def test_tables_2_and_5(eps, delta, Q, expected_eps, expected_delta):
    g = general_composition(eps, delta, Q, 1e-4)
    assert round(g.epsilon, 3) == expected_eps
    if expected_delta is not None:
        assert round(g.delta, 3) == expected_delta


@pytest.mark.parametrize(
    "M,m,delta", [(10, 6.4521, 0.1001), (13, 7.5742, 0.1001), (15, 8.2708, 0.1001), (20, 9.8823, 0.1002)]
)
def test_table_3(M, m, delta):
    got_m, got_delta = allowance_from_subsampling(0.1, 1e-5, M, 0.1)
    assert got_m == pytest.approx(m, abs=1e-4)
    assert round(got_delta, 4) == delta


def test_table_3_tau_lambda():
    params = Params(35, 6.4521, teacher_delta=1e-5, delta=0.1001)
    tau, lam = const_parameters(params, "general", 0.1)
    assert tau == pytest.approx(14.0328, abs=1e-4)
    assert lam == pytest.approx(0.1003, abs=1e-4)


def test_simple_composition():
    g = simple_composition(0.1, 1e-5, 3)
    assert g.epsilon == pytest.approx(0.3)
    assert g.delta == pytest.approx(1 - (1 - 1e-5) ** 3, rel=1e-12)
    assert g.delta <= 3e-5


def test_bad_composition_input():
    with pytest.raises(InvalidParameter, match="delta_prime"):
        general_composition(0.1, 1e-5, 3, 0.0)
