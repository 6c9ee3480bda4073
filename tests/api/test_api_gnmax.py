"""POST /v1/plans with classes (or a mechanism): the chosen table (GNMax here) is stored, served, paid and
released like any table; the ledger prices its answers by its exact Gaussian pair."""

from __future__ import annotations

import pytest
from svc_helpers import settled

from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.pld import exact_epsilon

pytestmark = pytest.mark.slow  # each job plan runs three mechanisms' calibrations

JOB = {"K": 40, "classes": 3, "queries": 30, "budget_epsilon": 2.0, "budget_delta": 1e-5}


def test_job_plan_is_served_paid_and_released(client):
    r = client.post("/v1/plans", json={**JOB, "create_ledger": {"name": "gnmax job"}})
    ledger = r.json().get("ledger")  # opened with the request, named in its first answer
    r = settled(client, r)  # planned in the background: its status URL polled
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["mechanism"] == "gnmax" and doc["table"]["kind"] == "gnmax" and doc["table"]["gamma"] == []
    spent = exact_epsilon([(GaussianProfile(doc["sigma"], (1, 1)), 30)], 1e-5)
    assert doc["epsilon_spent"] == doc["plan"]["spent_epsilon"] == spent <= 2.0
    assert doc["plan"]["accounting"] == "exact"
    assert doc["accounting"] == "data-independent" and doc["run"]["ledger"] == "plain"
    assert doc["data_independent_epsilon"] == doc["epsilon_spent"]
    assert {(a["mechanism"], a["accounting"]) for a in doc["alternatives"]} == {
        ("confident-gnmax", "data-independent"), ("darrm-multiclass", "data-independent"),
        ("gnmax", "data-dependent"), ("stability", "data-independent")}
    # (at K = 20, Q = 10 multi-class DaRRM wins: the planner does pick per job)
    assert all(a["expected_error"] >= doc["expected_error"] for a in doc["alternatives"])

    table = client.get(f"/v1/tables/{doc['table']['id']}").json()
    assert table["sigma"] == doc["sigma"] and table["certificate"]["certified"]
    assert table["privacy_profile"]["type"] == "gaussian"
    again = client.post("/v1/plans", json=JOB)
    assert again.headers["X-Darrm-Cache"] == "hit" and again.json()["table"]["id"] == table["id"]
    assert client.get(f"/v1/plans/{doc['plan_id']}").json()["mechanism"] == "gnmax"

    ledger = doc.get("ledger") or ledger
    votes = [[0] * 24 + [1] * 10 + [2] * 6] * 30
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"], "votes": votes})
    assert r.status_code == 200, r.text
    assert len(r.json()["answers"]) == 30 and set(r.json()["answers"]) <= {0, 1, 2}
    state = client.get(f"/v1/ledgers/{ledger['id']}").json()
    assert state["answers"] == 30 and state["epsilon_spent"] <= spent
    assert state["bounds"]["exact"]["epsilon"] == spent
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"], "votes": votes[:1]})
    assert r.status_code == 409, r.text  # a 31st answer does not fit the plan's budget


def test_one_mechanism_on_request_and_bad_names(client):
    r = client.post("/v1/plans", json={**JOB, "mechanism": "confident-gnmax"})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["mechanism"] == "confident-gnmax" and doc["alternatives"] == []
    assert doc["table"]["threshold"] == doc["threshold"] and doc["sigma1"] > doc["sigma2"]
    r = client.post("/v1/plans", json={**JOB, "mechanism": "nonsense"})
    assert r.status_code == 422 and "kind" in r.text


@pytest.mark.parametrize("body, needle", [({**JOB, "classes": 1}, "classes"),
                                          ({**JOB, "prior": "dirichlet:0,1"}, "prior")])
def test_job_plan_refusals_are_422(client, body, needle):
    r = client.post("/v1/plans", json=body)
    assert r.status_code == 422 and needle in r.text, r.text


DD_JOB = {"K": 100, "classes": 3, "prior": "dirichlet:9,0.1", "queries": 300, "budget_epsilon": 4.0,
          "budget_delta": 1e-5, "mechanism": "gnmax"}


def test_a_data_dependent_plan_opens_a_data_dependent_ledger(client):
    """With accounting data-dependent, where data-dependent GNMax is the more accurate offer the plan says so,
    states its guarantee, and create_ledger opens a data-dependent ledger with its policy (not a plain ledger
    with the budget)."""
    body = {**DD_JOB, "accounting": "data-dependent", "create_ledger": {"name": "dd job"}}
    r = client.post("/v1/plans", json=body)
    if r.status_code == 202:  # planned in the background (a loaded machine): the ledger opens on the repeat
        assert r.json()["ledger"] is None
        assert settled(client, r).status_code == 200
        r = client.post("/v1/plans", json=body)
        assert r.headers["X-Darrm-Cache"] == "hit"
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["mechanism"] == "gnmax" and doc["accounting"] == "data-dependent"
    assert "not a cap" in doc["guarantee"] and doc["run"]["ledger"] == "data-dependent"
    policy = doc["run"]["policy"]
    assert policy["sigma"] == doc["sigma"] == doc["table"]["sigma"] and policy["quota"] == 300
    assert (doc["order"], doc["beta"], doc["sigma_ss"]) == (policy["order"], policy["beta"], policy["sigma_ss"])
    assert doc["epsilon_spent"] <= 4.0 < doc["data_independent_epsilon"]
    assert doc["data_independent_epsilon"] == exact_epsilon([(GaussianProfile(doc["sigma"], (1, 1)), 300)], 1e-5)
    (plain,) = doc["alternatives"]
    assert plain["accounting"] == "data-independent" and plain["expected_error"] > doc["expected_error"]
    ledger = doc["ledger"]
    assert ledger["mode"] == "data-dependent" and ledger["policy"] == policy
    votes = [[95, 3, 2]] * 10
    rec = client.post(f"/v1/data-dependent-ledgers/{ledger['id']}/record", json={"votes": votes})
    assert rec.status_code == 200 and rec.json()["queries"] == 10


def test_the_default_plan_runs_on_a_plain_ledger_at_its_budget(client):
    """Issue 33: by default (worst-case accounting) the same job chooses the offer that fits the budget over
    every dataset; create_ledger opens a plain ledger with the budget, which pays all Q answers and states the
    ε the plan stated. The data-dependent offer is listed beside it, with its worst case."""
    r = client.post("/v1/plans", json={**DD_JOB, "create_ledger": {"name": "worst-case job"}})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["mechanism"] == "gnmax" and doc["accounting"] == "data-independent"
    assert doc["run"]["ledger"] == "plain" and doc["epsilon_spent"] == doc["data_independent_epsilon"] <= 4.0
    (dd,) = doc["alternatives"]
    assert dd["accounting"] == "data-dependent" and dd["expected_error"] < doc["expected_error"]
    assert dd["data_independent_epsilon"] > 4.0 and dd["run"]["ledger"] == "data-dependent"
    ledger = doc["ledger"]
    assert "policy" not in ledger and (ledger["epsilon_budget"], ledger["delta_budget"]) == (4.0, 1e-5)
    votes = [[0] * 95 + [1] * 3 + [2] * 2] * 300  # 300 rows of K = 100 class labels
    r = client.post("/v1/aggregate", json={"table_id": doc["table"]["id"], "ledger_id": ledger["id"], "votes": votes})
    assert r.status_code == 200, r.text
    assert len(r.json()["answers"]) == 300
    state = client.get(f"/v1/ledgers/{ledger['id']}").json()
    assert state["answers"] == 300 and f"{state['epsilon_spent']:.6g}" == f"{doc['epsilon_spent']:.6g}"
    bad = client.post("/v1/plans", json={**DD_JOB, "accounting": "optimistic"})
    assert bad.status_code == 422 and "accounting" in bad.text
