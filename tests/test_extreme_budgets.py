"""Budgets at float64's edge: every kind makes an offer or refuses with a named parameter, never a float error."""

from __future__ import annotations

import numpy as np
import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import plan_job
from darrm_opt.optimize.optimizer import rescue_after_sweep
from darrm_opt.planning.job import Job
from darrm_opt.planning.shaped_plan import calibrate_shaped


def test_a_level_at_or_below_zero_is_met_by_the_fair_coin_alone():
    g = np.array([1.0, 0.5, 1.0])
    assert rescue_after_sweep(g, 0.0, -1e-300).tolist() == [0.0, 0.0, 0.0]
    assert rescue_after_sweep(g, 2.0, 1.0).tolist() == pytest.approx([0.5, 0.25, 0.5])
    assert rescue_after_sweep(g, 2.0, 1.0)[0] < 0.5  # rounded down


@pytest.mark.parametrize("eps, delta", [(5e-324, 5e-324), (1e-12, 5e-324)])
def test_a_job_no_kind_can_serve_is_refused_naming_the_budget(eps, delta):
    with pytest.raises(InvalidParameter) as e:
        plan_job(Job(K=1, queries=1, budget_epsilon=eps, budget_delta=delta, teachers="disjoint-nonprivate"))
    assert e.value.parameter == "budget_epsilon"


@pytest.mark.parametrize("eps, delta, name", [(0.01, 1e-200, "budget_delta"), (1e-9, 1e-5, "budget_epsilon"),
                                              (0.01, 1e-99, "budget_epsilon")])
def test_a_shaped_table_outside_its_float_range_is_refused(eps, delta, name):
    with pytest.raises(InvalidParameter) as e:
        calibrate_shaped(1, 1, eps, delta)
    assert e.value.parameter == name
