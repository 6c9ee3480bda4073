"""With data-dependent accounting a job plan weighs data-dependent GNMax (PATE App. B, a sanitised ε on public
histograms of the job's prior) against the data-independent offers and picks the more accurate: the consensus
rows of benchmarks/data_dependent.py (K = 250, C = 10, Dirichlet(9, 1/9, …)), through plan_job and the CLI
(``--accounting data-dependent``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli

from darrm_opt.ledger.dd_account import DataDependentPolicy
from darrm_opt.ledger.dd_local import DataDependentRecorder as DataDependentLedger
from darrm_opt.mechanisms import mechanism, plan_job
from darrm_opt.model.gnmax import gnmax_error, parse_prior
from darrm_opt.model.multiclass import MulticlassPrior
from darrm_opt.planning.data_dependent import plan_from_prior, prior_histograms
from darrm_opt.planning.job import Job
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.pld import exact_epsilon

pytestmark = pytest.mark.slow  # each consensus job plans every kind (about 20 s)

ROOT = Path(__file__).resolve().parents[1]
PRIOR = "dirichlet:9,0.1111111111111111"
K, C = 250, 10


def job(queries: int, accounting: str = "data-dependent") -> Job:
    """The consensus job; planned with data-dependent accounting (worst-case, the default, never chooses the
    data-dependent offer: tests/test_plan_default_recipe.py)."""
    return Job(K=K, queries=queries, budget_epsilon=2.0, budget_delta=1e-5, classes=C, prior=PRIOR,
               accounting=accounting)


@pytest.fixture(scope="module")
def q100():
    return plan_job(job(100))


@pytest.fixture(scope="module")
def q1000():
    return plan_job(job(1000))


def test_data_dependent_wins_the_tight_consensus_job(q100):
    best, offers, refused = q100
    assert (best.mechanism, best.accounting) == ("gnmax", "data-dependent") and refused == {}
    assert best.expected_error <= 7e-4  # the benchmark's target
    prior = parse_prior(PRIOR, C)
    sigma = best.details["sigma"]
    assert best.expected_error == best.table.expected_error == gnmax_error(K, C, sigma, prior)
    assert best.epsilon_spent <= 2.0
    # the planning target is what plan_from_prior expects on the public histograms, and is not the worst case
    plan = plan_from_prior(prior, K, C, 100, 2.0, 1e-5)
    assert best.epsilon_spent == plan.total and sigma == plan.sigma
    worst = exact_epsilon([(GaussianProfile(sigma, (1, 1)), 100)], 1e-5)
    assert best.details["data_independent_epsilon"] == worst > 2.0
    # the data-independent GNMax offer is there, less accurate, and within the budget by the ledger
    plain = next(o for o in offers if (o.mechanism, o.accounting) == ("gnmax", "data-independent"))
    assert plain.expected_error > best.expected_error and plain.epsilon_spent <= 2.0


def test_data_independent_gnmax_wins_the_long_job(q1000):
    best, offers, _ = q1000
    assert (best.mechanism, best.accounting) == ("gnmax", "data-independent") and best.policy is None
    dd = next(o for o in offers if o.accounting == "data-dependent")
    assert dd.expected_error > best.expected_error and dd.epsilon_spent <= 2.0
    assert best.epsilon_spent == exact_epsilon([(GaussianProfile(best.details["sigma"], (1, 1)), 1000)], 1e-5) <= 2


def test_offers_say_which_guarantee_and_how_to_run(q100):
    best, offers, _ = q100
    run = best.run()
    assert run["ledger"] == "data-dependent" and "not a plain ledger" in run["how"]
    assert "not a cap" in best.guarantee and "sanitised" in best.guarantee
    policy = DataDependentPolicy.from_mapping(run["policy"])
    d = best.details
    assert (policy.aggregator, policy.K, policy.classes, policy.quota, policy.delta) == ("gnmax", K, C, 100, 1e-5)
    assert (policy.sigma, policy.order, policy.beta, policy.sigma_ss) == (d["sigma"], d["order"], d["beta"],
                                                                         d["sigma_ss"])
    plain = next(o for o in offers if o.accounting == "data-independent")
    assert plain.run() == {**plain.run(), "ledger": "plain", "table_id": plain.table.id}
    assert "worst case" in plain.guarantee
    # served: a data-independent offer's spend must fit; a data-dependent one keeps its target
    assert best.served(5.0, job(100)) == {"epsilon_spent": best.epsilon_spent, "data_independent_epsilon": 5.0}
    with pytest.raises(Exception, match="budget"):
        plain.served(2.5, job(100))


def test_the_planned_policy_runs_on_a_data_dependent_ledger(q100, tmp_path):
    best, _, _ = q100
    votes = prior_histograms(MulticlassPrior.parse(PRIOR), K, C, 100, seed=7)  # the job's own votes
    with DataDependentLedger(f"sqlite:///{tmp_path / 'dd.db'}", "job", best.run()["policy"]) as ledger:
        view = ledger.record(votes.tolist())
        assert view["queries"] == 100 and view["mode"] == "data-dependent"
        eps = ledger.publish()
    assert 0 < eps < 2.5  # one draw of the sanitised ε around the expected ≈ 1.7


def test_prior_histograms_follow_the_prior():
    for spec, share in (("dirichlet:9,0.1111111111111111", 9 / (9 + 3 / 9)), ("paper", 0.75),
                        ("iid-uniform:0.6,0.8", 0.7)):
        h = prior_histograms(MulticlassPrior.parse(spec), 50, 4, 4000, seed=3)
        assert h.shape == (4000, 4) and np.all(h.sum(axis=1) == 50)
        assert abs(h[:, 0].mean() / 50 - share) < 0.01, spec
    same = prior_histograms(MulticlassPrior(), 9, 3, 5, 1)
    assert np.array_equal(same, prior_histograms(MulticlassPrior(), 9, 3, 5, 1))


def test_no_data_dependent_offer_for_0_1_votes_or_outside_pate():
    gnmax = mechanism("gnmax")
    assert gnmax.plan_data_dependent(Job(K=11, queries=10, budget_epsilon=2.0, budget_delta=1e-5)) is None
    assert gnmax.plan_data_dependent(Job(K=11, queries=10, budget_epsilon=2.0, budget_delta=1e-5,
                                         teachers="disjoint-nonprivate")) is None
    assert mechanism("darrm-multiclass").plan_data_dependent(job(100)) is None


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, timeout=600)


@pytest.mark.parametrize("queries, accounting", [(100, "data-dependent"), (1000, "data-independent")])
def test_cli_json_states_the_chosen_accounting(tmp_path, queries, accounting):
    r = cli("plan", "--K", str(K), "--classes", str(C), "--prior", PRIOR, "--queries", str(queries), "--budget",
            "2,1e-5", "--accounting", "data-dependent", "--format", "json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["mechanism"] == doc["kind"] == "gnmax" and doc["accounting"] == accounting
    assert doc["epsilon_spent"] <= 2.0 and doc["plan"]["spent_epsilon"] == doc["epsilon_spent"]
    other = [a for a in doc["alternatives"] if a["mechanism"] == "gnmax"]
    assert len(other) == 1 and other[0]["accounting"] != accounting
    assert other[0]["expected_error"] > doc["expected_error"]
    if accounting == "data-dependent":
        assert doc["expected_error"] <= 7e-4
        assert doc["run"]["ledger"] == "data-dependent" and doc["run"]["policy"]["sigma"] == doc["sigma"]
        DataDependentPolicy.from_mapping(doc["run"]["policy"])
    else:
        assert doc["run"] == {**doc["run"], "ledger": "plain", "table_id": doc["id"]}
