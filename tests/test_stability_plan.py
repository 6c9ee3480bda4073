"""The stability-based release's plan (darrm_opt.planning.stability_plan): the issue's four target jobs at the
parameters the planner chose (their (ε, δ) and exact error recomputed), and the search's own rules on a small
job (within budget, least error among its candidates, least feasible threshold)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.planning.stability_plan import SCALE, distance_law, least_threshold, plan_stability
from darrm_opt.privacy.stability import SvtParams, job_error, ptr_delta, svt_epsilon

#: (classes, Q, ε_B, δ_B, parameters chosen by plan_stability, issue 35's target), K = 250, prior paper
TARGETS = [
    (10, 1000, 2.0, 1e-5, SvtParams(32, 48, 48, 615, 1), 1e-4),
    (10, 100, 2.0, 1e-5, SvtParams(32, 48, 48, 615, 1), 1e-6),
    (10, 1000, 8.0, 1e-6, SvtParams(128, 65, 85, 1248, 2), 1e-10),
    (None, 1000, 8.0, 1e-6, SvtParams(128, 65, 85, 1248, 2), 1e-6),
]
#: the planned errors of TARGETS' jobs (exact figures at those parameters)
PLANNED = [3.623109555180557e-15, 3.82416815743275e-16, 7.365070622639526e-29, 1.394652347921084e-12]


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
    plan = plan_stability(25, None, "paper", 40, 1.0, 1e-5, cutoffs=(1, 2, 3), fallback=False)
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


@pytest.mark.slow  # plans four K = 250 jobs (about 19 CPU s)
@pytest.mark.parametrize(("classes", "Q", "eps", "delta", "params", "target", "planned"),
                         [(*t, e) for t, e in zip(TARGETS, PLANNED, strict=True)])
def test_the_planner_chooses_the_target_parameters(classes, Q, eps, delta, params, target, planned) -> None:
    plan = plan_stability(250, classes, "paper", Q, eps, delta, fallback=False)
    assert plan.best.params == params
    assert plan.expected_error == pytest.approx(planned, rel=1e-12) and plan.expected_error <= target
    assert plan.best.epsilon <= eps and plan.best.delta <= delta


def _grid_scan(K, classes, prior, Q, eps, delta):  # noqa: ANN001, ANN202
    """The least exact error over c = 1..8 and ε splits f = 0.05, 0.10, …, 0.95 with the textbook noise scales
    t_ρ = ⌈s/(f·ε_B)⌉, t_ν = ⌈2cs/((1 − f)·ε_B)⌉ and the least threshold within δ_B."""
    law, s = distance_law(K, classes, prior), SCALE * math.ceil(eps)
    best = math.inf
    for c in range(1, 9):
        for f in np.arange(1, 20) / 20:
            t_rho, t_nu = math.ceil(s / (f * eps)), math.ceil(2 * c * s / ((1 - f) * eps))
            p = SvtParams(s, t_rho, t_nu, least_threshold(s, t_rho, t_nu, c, Q, delta), c)
            assert svt_epsilon(p) <= eps
            best = min(best, job_error(p, law, Q).error)
    return best


#: (K, classes, prior, Q, ε_B, δ_B), the planner's exact error, the grid scan's
SMALL = [
    ((81, None, "counts:78=0.95,41..77=0.05", 40, 8.0, 1e-6), 0.02840508617204335, 0.02846021155285896),
    ((81, None, "paper", 40, 8.0, 1e-6), 0.007871138713294087, 0.008240349148135897),
]


@pytest.mark.parametrize(("job", "planned", "scanned"), SMALL)
def test_the_search_is_no_worse_than_a_grid_scan(job, planned, scanned) -> None:
    """The planner (cut-offs grown until the error grows twice, the split by a grid and golden-section steps,
    the queries' noise from all of the budget the threshold's leaves) against a brute-force scan of a grid."""
    plan = plan_stability(*job, fallback=False)
    assert plan.expected_error == pytest.approx(planned, rel=1e-12)
    assert _grid_scan(*job) == pytest.approx(scanned, rel=1e-12)
    assert plan.expected_error <= scanned
    assert all(c.epsilon <= job[4] and c.delta <= job[5] for c in plan.candidates)


def test_a_budget_too_small_for_any_threshold_noise_is_refused_naming_it():
    """At ε_B = 2e-8 every split needs t_ρ far over MAX_T_RHO (the exact error's sums would need terabytes):
    refused as the budget, before any array is made."""
    from darrm_opt.planning.stability_plan import MAX_T_RHO

    with pytest.raises(InvalidParameter) as e:
        plan_stability(25, 3, "paper", 10, 2e-8, 1e-5)
    assert e.value.parameter == "budget_epsilon" and str(MAX_T_RHO) in str(e.value)


def test_a_named_kind_asked_for_teachers_it_does_not_serve_is_refused_naming_teachers(tmp_path) -> None:
    """`plan --mechanism stability --teachers shared`: exit 2 and the kind's rule (one record, one vote), not a
    budget error; in Python the same InvalidParameter naming teachers."""
    from cli_helpers import run_cli

    from darrm_opt.mechanisms import plan_job
    from darrm_opt.planning.job import Job

    done = run_cli("plan", "--K", "21", "--queries", "10", "--budget", "2,1e-5", "--teachers", "shared",
                   "--epsilon", "0.1", "--teacher-delta", "1e-4", "--mechanism", "stability", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "invalid teachers" in done.stderr and "one record changes one teacher's vote" in done.stderr
    assert "Traceback" not in done.stderr
    job = Job(K=21, queries=10, budget_epsilon=2.0, budget_delta=1e-5, teachers="shared", epsilon=0.1,
              teacher_delta=1e-4)
    with pytest.raises(InvalidParameter) as err:
        plan_job(job, kinds=["stability"])
    assert err.value.parameter == "teachers"
