"""Budget planning of the shared setting (plan_job's darrm offer, `darrm-opt plan`): certified, within budget, no
worse than a grid."""

from __future__ import annotations

import json
import math
import re

import pytest
from typer.testing import CliRunner

from darrm_opt.certify.certificate import certify
from darrm_opt.cli import app
from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import plan_job
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve
from darrm_opt.planning.job import Job
from darrm_opt.planning.plan import BudgetInfeasible
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.profile import (
    FULL_ROUNDS,
    MARGIN,
    PrivacyProfile,
    privacy_profile,
    profile_and_certificate,
)

SMALL = (5, 0.2, 1e-4, 20, 3.0, 0.01)  # K, ε, Δ, Q, ε_B, δ_B: the optimum is an interior m


def plan(K, epsilon, teacher_delta, queries, budget_epsilon, budget_delta, prior="paper"):  # noqa: ANN001, ANN201
    """The chosen offer of a shared-setting job (the darrm kind's: the only kind of that setting)."""
    best, offers, _ = plan_job(Job(K=K, queries=queries, budget_epsilon=budget_epsilon, budget_delta=budget_delta,
                                   teachers="shared", prior=prior, epsilon=epsilon, teacher_delta=teacher_delta))
    assert best.mechanism == "darrm" and offers == [best]
    return best


@pytest.fixture(scope="module")
def small_plan():
    return plan(*SMALL)


@pytest.fixture(scope="module")
def mnist_plan():
    return plan(11, 0.0892, 1e-4, 100, 15.044, 0.030)


def _check_plan(p, queries: int, budget_epsilon: float, budget_delta: float) -> None:
    """Certified γ; the stored profile is the certified one (and not below the fully confirmed hull); the
    Q-fold exact composition of the profile recomputed from γ fits the budget and is the reported one."""
    params = p.table.params
    assert certify(params, p.solution.gamma).certified and p.table.gamma == p.solution.gamma
    profile, cert = profile_and_certificate(params, p.solution.gamma)
    assert cert.certified and profile == p.table.profile
    assert p.table.profile.dominates(privacy_profile(params, p.solution.gamma, rounds=FULL_ROUNDS), tol=MARGIN)
    spent = exact_epsilon([(profile, queries)], budget_delta)
    assert spent == p.epsilon_spent == p.plan["spent_epsilon"] <= budget_epsilon


@pytest.mark.slow  # a plan over K = 11 tables
def test_mnist_budget_buys_a_far_better_table(mnist_plan):
    """The paper's MNIST setting: Q = 100 answers within (15.044, 0.030), which the paper spends on m = 3."""
    p = mnist_plan
    _check_plan(p, 100, 15.044, 0.030)
    assert p.expected_error < 1e-4
    paper = solve(Params(K=11, m=3, epsilon=0.0892, teacher_delta=1e-4))
    assert paper.expected_error > 0.04 > 400 * p.expected_error
    assert p.table.params.m >= 6 and p.table.params.delta <= 0.030 / 100
    cands = p.plan["candidates"]
    assert all(c["fits"] == (c["spent_epsilon"] is not None and c["spent_epsilon"] <= 15.044) for c in cands)
    assert any(not c["fits"] for c in cands)  # the search met the budget's edge


@pytest.mark.slow  # a grid of 15 solves
def test_small_plan_fits_and_beats_a_grid_search(small_plan):
    K, eps, tdelta, Q, be, bd = SMALL
    p = small_plan
    _check_plan(p, Q, be, bd)
    assert 1 < p.table.params.m < K
    best = math.inf
    for delta in (tdelta, bd / Q, 2 * bd / Q):
        for m in (1, 1.25, 1.5, 2, 3):
            params = Params(K=K, m=m, epsilon=eps, teacher_delta=tdelta, delta=delta)
            sol = solve(params)
            if exact_epsilon([(privacy_profile(params, sol.gamma), Q)], bd) <= be:
                best = min(best, sol.expected_error)
    assert best < 0.2  # the grid found fitting tables
    assert p.expected_error <= best


@pytest.mark.slow  # three plans
def test_budget_just_below_feasibility_is_refused():
    K, eps, tdelta, Q, _, bd = SMALL
    with pytest.raises(BudgetInfeasible) as info:
        plan(K, eps, tdelta, Q, 0.5, bd)
    least = info.value.smallest_epsilon
    assert least is not None and 0.5 < least < 3.0
    assert "smallest epsilon reachable" in str(info.value) and f"{least:.6g}" in str(info.value)
    with pytest.raises(BudgetInfeasible, match="smallest epsilon reachable"):
        plan(K, eps, tdelta, Q, least * 0.999, bd)
    ok = plan(K, eps, tdelta, Q, least * 1.001, bd)  # just above: m = 1 (or barely more) fits
    assert ok.epsilon_spent <= least * 1.001 and ok.table.params.m < 1.1


def test_delta_below_what_the_answers_must_spend_is_refused():
    """δ_B below what Q answers spend on the infinite-loss atom at any ε. The m = 1 table (γ_Sub shrunk below 1
    by the LP's tightening) has no output of probability 0 under a neighbour, so its true infinite-loss mass is
    0 and its certified profile's is MARGIN (1e-13): 20 answers need δ ≥ 2e-12."""
    with pytest.raises(BudgetInfeasible, match="below what 20 answers must spend") as info:
        plan(5, 0.2, 1e-4, 20, 100.0, 1e-12)
    assert info.value.smallest_epsilon is None
    assert isinstance(info.value, InvalidParameter) and info.value.parameter == "budget"


@pytest.mark.parametrize("kwargs, name", [
    ({"queries": 0}, "queries"), ({"queries": True}, "queries"), ({"queries": 2.5}, "queries"),
    ({"budget_epsilon": -1.0}, "budget_epsilon"), ({"budget_epsilon": math.inf}, "budget_epsilon"),
    ({"budget_delta": 0.0}, "budget_delta"), ({"budget_delta": 1.0}, "budget_delta"),
    ({"K": 4}, "K"), ({"epsilon": 0.0}, "epsilon"), ({"prior": "nope"}, "prior"),
])
def test_bad_inputs_name_the_parameter(kwargs, name):
    args = {"K": 5, "epsilon": 0.2, "teacher_delta": 1e-4, "queries": 20, "budget_epsilon": 3.0,
            "budget_delta": 0.01, "prior": "paper", **kwargs}
    with pytest.raises(InvalidParameter) as info:
        plan(**args)
    assert info.value.parameter == name


def _cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_cli_json_is_a_table_that_verify_and_budget_accept(tmp_path, small_plan):
    K, eps, tdelta, Q, be, bd = SMALL
    out = tmp_path / "plan.json"
    res = _cli("plan", "--K", str(K), "--epsilon", str(eps), "--teacher-delta", str(tdelta), "--queries", str(Q),
               "--budget", f"{be},{bd}", "--format", "json", "--out", str(out))
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    for key in ("K", "m", "epsilon", "teacher_delta", "delta", "gamma", "certificate", "privacy_profile",
                "expected_error"):
        assert key in doc
    assert doc["m"] == small_plan.table.params.m and doc["gamma"] == list(small_plan.solution.gamma)
    assert doc["expected_error"]["opt"] == small_plan.expected_error
    assert doc["expected_error"]["opt"] <= doc["expected_error"]["const_opt"]  # as solve: baselines beside
    assert PrivacyProfile.from_dict(doc["privacy_profile"]) == small_plan.table.profile
    assert doc["plan"]["queries"] == Q and doc["plan"]["spent_epsilon"] <= be
    assert doc["plan"]["budget_epsilon"] == be and doc["plan"]["budget_delta"] == bd
    assert len(doc["plan"]["candidates"]) == len(small_plan.plan["candidates"])
    assert _cli("verify", str(out)).exit_code == 0
    res = _cli("budget", "--table", str(out), "--queries", str(Q), "--delta-total", str(bd), "--format", "json",
               "-q")
    assert res.exit_code == 0, res.output
    exact = next(r for r in json.loads(res.stdout) if r["method"] == "exact")
    assert exact["epsilon"] == doc["plan"]["spent_epsilon"]


def test_cli_table_view_and_progress(small_plan):
    K, eps, tdelta, Q, be, bd = SMALL
    res = _cli("plan", "--K", str(K), "--epsilon", str(eps), "--teacher-delta", str(tdelta), "--queries", str(Q),
               "--budget", f"{be},{bd}")
    assert res.exit_code == 0, res.output
    assert "γ_plan" in res.stdout and f"m={small_plan.table.params.m:.6g}" in res.stdout
    assert re.search(r"plan: #1 m=1 δ=", res.stderr)


@pytest.mark.parametrize("args, needle", [
    (("--budget", "0.5,0.01"), "smallest epsilon reachable"),
    (("--budget", "3"), "invalid budget"),
    (("--budget", "3,0.01", "--queries", "0"), "invalid queries"),
])
def test_cli_refusals_exit_2(args, needle):
    base = {"--K": "5", "--epsilon": "0.2", "--teacher-delta": "1e-4", "--queries": "20"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    res = _cli("plan", "-q", *[x for kv in base.items() for x in kv])
    assert res.exit_code == 2
    assert needle in res.stderr and "Traceback" not in res.output
