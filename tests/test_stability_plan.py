"""The stability-based release's plan (darrm_opt.planning.stability_plan): the issue's four target jobs at the
parameters the planner chose (their (ε, δ) and exact error recomputed), and the search's own rules on a small
job (within budget, least error among its candidates, least feasible threshold)."""

from __future__ import annotations

import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.planning.stability_plan import distance_law, least_threshold, plan_stability
from darrm_opt.privacy.stability import SvtParams, job_error, ptr_delta, svt_epsilon

#: (classes, Q, ε_B, δ_B, parameters chosen by plan_stability, issue 35's target), K = 250, prior paper
TARGETS = [
    (10, 1000, 2.0, 1e-5, SvtParams(32, 46, 50, 618, 1), 1e-4),
    (10, 100, 2.0, 1e-5, SvtParams(32, 46, 50, 618, 1), 1e-6),
    (10, 1000, 8.0, 1e-6, SvtParams(128, 68, 84, 1248, 2), 1e-10),
    (None, 1000, 8.0, 1e-6, SvtParams(128, 68, 84, 1248, 2), 1e-6),
]


@pytest.mark.parametrize(("classes", "Q", "eps", "delta", "params", "target"), TARGETS)
def test_issue_targets_at_the_planned_parameters(classes, Q, eps, delta, params, target) -> None:
    assert svt_epsilon(params) <= eps
    assert ptr_delta(params, Q) <= delta
    assert ptr_delta(SvtParams(params.scale, params.t_rho, params.t_nu, params.threshold - 1, params.cutoff),
                     Q) > delta  # the least feasible threshold
    figures = job_error(params, distance_law(250, classes, "paper"), Q)
    assert 0 < figures.error <= target
    assert figures.answered == pytest.approx(Q * (1 - figures.bottom_share), rel=1e-9)


def test_plan_on_a_small_job_is_within_budget_and_least_among_its_candidates() -> None:
    plan = plan_stability(25, None, "paper", 40, 1.0, 1e-5, cutoffs=(1, 2, 3))
    assert plan.candidates and all(c.epsilon <= 1.0 and c.delta <= 1e-5 for c in plan.candidates)
    assert plan.expected_error == min(c.figures.error for c in plan.candidates)
    p = plan.best.params
    assert p.threshold == least_threshold(p.scale, p.t_rho, p.t_nu, p.cutoff, 40, 1e-5)
    # a larger threshold (more queries unstable) never errs less
    assert job_error(SvtParams(p.scale, p.t_rho, p.t_nu, p.threshold + 5, p.cutoff),
                     distance_law(25, None, "paper"), 40).error > plan.expected_error


def test_plan_refuses_a_zero_delta() -> None:
    with pytest.raises(InvalidParameter, match="budget_delta"):
        plan_stability(25, None, "paper", 10, 1.0, 0.0)


def test_distance_law_reads_a_job_prior() -> None:
    a, b = distance_law(30, 2, "beta:9,1"), distance_law(30, 2, "labels:dirichlet:9,1")
    assert (a.mass == b.mass).all() and (a.wrong == b.wrong).all() and a.wrong.sum() > 0


@pytest.mark.parametrize("epsilon", [5e-324, 1e-300])
def test_an_epsilon_too_small_for_any_noise_scale_is_refused_naming_it(epsilon):
    with pytest.raises(InvalidParameter, match="budget_epsilon: too small for a stability-based release"):
        plan_stability(5, None, "paper", 1, epsilon, 1e-5)


def test_queries_beyond_the_noise_integers_are_refused_naming_queries():
    with pytest.raises(InvalidParameter, match="queries: a stability-based release takes"):
        plan_stability(5, None, "paper", 2**61, 2.0, 1e-5)
