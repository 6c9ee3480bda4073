"""The backends' own row scaling, chosen per problem (``session(..., own_scaling=False)`` for pure DP).

HiGHS with its simplex scaling off must give the same certified optimum as with it on (the rows keep their
exact power-of-two scaling either way); the optimiser asks for it off exactly when Δ = 0.
"""

from __future__ import annotations

import numpy as np
import pytest

from darrm_opt import solvers
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import own_scaling, solve

highs = solvers.get_backend("highs")


class Recording:
    """A backend that forwards to HiGHS and records the keywords its sessions were asked for."""

    name = "highs"

    def __init__(self) -> None:
        self.kwargs: list[dict] = []

    def available(self) -> bool:
        return True

    def solve(self, lp, **kw):
        return highs.solve(lp, **kw)

    def session(self, c, lb, ub, **kw):
        self.kwargs.append(kw)
        return highs.session(c, lb, ub, **kw)


def test_own_scaling_is_off_for_pure_dp_only():
    assert own_scaling(Params(11, 3, epsilon=0.1, teacher_delta=1e-5)) is True
    assert own_scaling(Params(11, 3, epsilon=0.1, teacher_delta=0.0, delta=0.0)) is False


@pytest.mark.parametrize("td, delta, asked", [(0.0, 0.0, {"own_scaling": False}), (1e-5, None, {})])
def test_the_optimiser_asks_per_problem_and_gets_the_same_table(td, delta, asked):
    params = Params(21, 3, epsilon=0.1, teacher_delta=td, delta=delta)
    rec = Recording()
    got = solve(params, solver=rec)
    assert rec.kwargs == [{"feasibility_tol": 1e-9, **asked}]
    plain = solve(params)  # the default backend by name: the same choice
    assert got.certificate.certified and plain.certificate.certified
    assert got.gamma == plain.gamma


def test_highs_without_its_scaling_solves_the_same_lp():
    rng = np.random.default_rng(7)
    n = 6
    c = -rng.uniform(0.1, 1.0, n)
    A = rng.uniform(-1.0, 1.0, (40, n)) * np.logspace(-6, 3, 40)[:, None]  # rows over nine magnitudes
    b = np.abs(A).sum(axis=1) * 0.3
    out = {}
    for flag in (True, False):
        sess = highs.session(c, 0.0, 1.0, feasibility_tol=1e-9, own_scaling=flag)
        assert (highs._option(sess.h, "simplex_scale_strategy") != 0) is flag
        sess.add_rows(A, b)
        res = sess.solve()
        assert res.status is solvers.Status.OPTIMAL
        out[flag] = res
    assert abs(out[True].objective - out[False].objective) <= 1e-9 * max(1.0, abs(out[True].objective))
    lp = solvers.LP(c, A, b, np.zeros(n), np.ones(n))
    one = highs.solve(lp, own_scaling=False)
    assert one.status is solvers.Status.OPTIMAL
    assert abs(one.objective - out[True].objective) <= 1e-9 * max(1.0, abs(one.objective))


def test_a_session_without_scaling_retries_with_it():
    """The last fallback of an unscaled session is HiGHS's own scaling (not "scaling off" once more)."""
    from darrm_opt.solvers.highs import FALLBACKS, SCALED, _fallbacks

    on = highs.session(np.ones(2), 0.0, 1.0)
    off = highs.session(np.ones(2), 0.0, 1.0, own_scaling=False)
    assert _fallbacks(on.h) == FALLBACKS and FALLBACKS[-1] == ({"simplex_scale_strategy": 0}, "cold")
    assert _fallbacks(off.h)[:-1] == FALLBACKS[:-1]
    assert _fallbacks(off.h)[-1] == ({"simplex_scale_strategy": SCALED}, "cold")
