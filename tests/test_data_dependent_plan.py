"""Planning a data-dependent GNMax job (darrm_opt.planning.data_dependent)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from darrm_opt.experiments.pate_votes import dirichlet_votes
from darrm_opt.planning.data_dependent import _Pool, plan_data_dependent
from darrm_opt.planning.plan import BudgetInfeasible

K, C = 60, 4
POOL = dirichlet_votes(K, C, 9.0, 1 / 9, 40, seed=5)


def test_plan_fits_the_budget_and_is_the_smallest_sigma_at_its_order():
    plan = plan_data_dependent(POOL, K, 20, 3.0, 1e-5, orders=(5.0, 8.0), jobs=10, steps=10)
    assert plan.total <= 3.0
    assert plan.total == pytest.approx(plan.rdp + plan.gnss + plan.tail + 2 * plan.sigma_ss * plan.ss, rel=1e-12)
    assert plan.tail == pytest.approx(math.log1p(-1 / plan.order) - (math.log(1e-5) + math.log(plan.order))
                                      / (plan.order - 1), rel=1e-12)
    # σ_SS minimises ε_GNSS + 2σ_SS·SS (the first term of Thm. 23 in σ_SS)
    lam, b = plan.order, plan.beta
    assert plan.sigma_ss == pytest.approx((lam * math.exp(2 * b) / plan.ss) ** (1 / 3), rel=1e-12)
    # a σ 5 % smaller misses the budget or App. B's conditions at that order (the bisection's precision is
    # (log 2000)/2^10 ≈ 0.7 %)
    search = _Pool(POOL, K, 20, 3.0, 1e-5, 10, (0.2, 0.3, 0.4, 0.45), "improved", 0)
    smaller = search.evaluate(plan.sigma * 0.95, plan.order)
    assert smaller is None or smaller.total > 3.0
    again = search.evaluate(plan.sigma, plan.order)
    assert again is not None and again.total == pytest.approx(plan.total, rel=1e-12)
    assert set(plan.policy_fields()) == {"sigma", "order", "beta", "sigma_ss"}


def test_a_budget_too_small_is_infeasible():
    with pytest.raises(BudgetInfeasible):
        plan_data_dependent(POOL, K, 20, 0.2, 1e-5, orders=(5.0, 8.0), jobs=5, steps=4)
    with pytest.raises(Exception, match="K = 61"):
        plan_data_dependent(POOL, 61, 20, 3.0, 1e-5, jobs=5, steps=4)
    assert np.all(POOL.sum(axis=1) == K)
