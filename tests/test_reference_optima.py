"""The reference optima of the notes, from every installed backend and both modes."""

import numpy as np
import pytest

from darrm_opt import solvers
from darrm_opt.errors import SolverLimitExceeded
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve

REFERENCE = [
    (dict(K=11, m=3, teacher_delta=1e-5), [1, 0.977696, 1, 1, 0.54234, 0.939241]),
    (dict(K=11, m=3, teacher_delta=0.0, delta=0.0), [1, 0.977332, 1, 1, 0.54209, 0.939703]),
    (dict(K=11, m=5, teacher_delta=0.0, delta=0.0), [1, 1, 0.995998, 0.984443, 1, 1]),
]


@pytest.mark.parametrize("mode", ["lazy", "full"])
@pytest.mark.parametrize("args,expected", REFERENCE)
def test_reference_optimum(backend, mode, args, expected):
    params = Params(**args)
    try:
        sol = solve(params, solver=backend, mode=mode)
    except SolverLimitExceeded:
        # Gurobi's pip licence: the full approximate-DP LP at K = 11 has 31,824 rows (> 2000)
        assert backend == "gurobi" and mode == "full" and not params.pure
        return
    g = np.array(sol.gamma)
    assert sol.certificate.certified
    assert sol.certificate.max_privacy_cost <= sol.certificate.bound
    np.testing.assert_allclose(g[:6], expected, atol=2e-6)
    np.testing.assert_array_equal(g, g[::-1])


def test_reference_expected_error():
    sol = solve(Params(11, 3))
    assert sol.expected_error == pytest.approx(0.0413, abs=5e-5)


def test_gurobi_full_too_large_is_a_clear_error():
    if "gurobi" not in solvers.available_backends():
        pytest.skip("gurobi not available")
    with pytest.raises(SolverLimitExceeded, match="lazy"):
        solve(Params(11, 3), solver="gurobi", mode="full")


@pytest.mark.parametrize("K,m", [(K, m) for K in (1, 3, 5, 7, 9) for m in (1, 2, 2.5, 3) if m <= K])
@pytest.mark.parametrize("teacher_delta", [0.0, 1e-5])
def test_lazy_equals_full_objective(K, m, teacher_delta):
    params = Params(K, m, teacher_delta=teacher_delta)
    lazy = solve(params, mode="lazy")
    full = solve(params, mode="full")
    assert lazy.certificate.certified and full.certificate.certified
    assert lazy.expected_error == pytest.approx(full.expected_error, abs=1e-7)


@pytest.mark.parametrize("K,m", [(7, 2), (9, 3), (13, 4)])
def test_backends_agree(K, m):
    values = {b: solve(Params(K, m), solver=b).expected_error for b in solvers.available_backends()}
    ref = values["highs"]
    for b, v in values.items():
        assert v == pytest.approx(ref, abs=1e-7), b


def test_priors_change_the_optimum():
    paper = solve(Params(11, 3))
    d13 = solve(Params(11, 3, prior="iid-uniform:0.7,1"))
    common = solve(Params(11, 3, prior="common-uniform:0.5,1"))
    assert d13.certificate.certified and common.certificate.certified
    assert d13.gamma != paper.gamma or common.gamma != paper.gamma
    # γ_opt optimised for a prior is no worse under that prior than γ_opt of another prior
    from darrm_opt.model.objective import expected_error
    from darrm_opt.model.params import Prior

    pr = Prior.parse("iid-uniform:0.7,1")
    assert d13.expected_error <= expected_error(np.array(paper.gamma), pr) + 1e-9
