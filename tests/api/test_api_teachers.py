"""The teacher settings in the service (issue 14): PATE-setting tables (disjoint-nonprivate) and
disjoint-private tables through POST /v1/tables and POST /v1/plans, certified, cached under their own id,
usable by /v1/aggregate and ledgers; the options a setting does not take are a 422 naming the field.
The application in process (the shared SQLite one, and PostgreSQL), real HiGHS."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
from svc_helpers import ROOT, in_process_client, settled

from darrm_opt.certify.pairs import certify_pairs
from darrm_opt.mechanisms import plan_job
from darrm_opt.model.neighbours import PateParams
from darrm_opt.planning.job import Job
from darrm_opt.privacy import accounting
from darrm_opt.privacy.pair_profile import pate_profile
from darrm_opt.privacy.pld import bucketed, exact_epsilon
from darrm_opt.privacy.profile import PrivacyProfile

PATE = {"K": 11, "teachers": "disjoint-nonprivate", "target_epsilon": 0.2676, "delta": 3e-4}


def _cli_solve_gamma() -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "darrm_opt", "solve", "--K", "11", "--teachers", "disjoint-nonprivate",
                        "--target-epsilon", "0.2676", "--delta", "3e-4", "--format", "json"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["gamma"]


def _loc(r) -> list:
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    return err["loc"]


def test_pate_table_is_certified_cached_and_equals_the_cli(client):
    r = client.post("/v1/tables", json=PATE)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["teachers"] == "disjoint-nonprivate" and doc["m"] is None and doc["teacher_delta"] is None
    assert (doc["epsilon"], doc["delta"]) == (0.2676, 3e-4)
    assert round(doc["expected_error"], 4) == 0.2209
    assert doc["gamma"] == _cli_solve_gamma()  # the service and the command line give the same γ
    params = PateParams(11, 0.2676, 3e-4)
    assert doc["certificate"]["pairs_checked"] == 44 and certify_pairs(params, doc["gamma"]).certified
    assert PrivacyProfile.from_dict(doc["privacy_profile"]) == pate_profile(params, doc["gamma"])
    assert "l → l ± 1" in doc["setting"]["note"] and doc["setting"]["total_cap"] is None
    again = client.post("/v1/tables", json=PATE)
    assert again.headers["X-Darrm-Cache"] == "hit" and again.json()["id"] == doc["id"]
    assert client.get(f"/v1/tables/{doc['id']}").json()["gamma"] == doc["gamma"]
    listed = client.get("/v1/tables", params={"teachers": "disjoint-nonprivate", "K": 11}).json()
    assert doc["id"] in [t["id"] for t in listed["items"]]
    assert all(t["teachers"] == "disjoint-nonprivate" for t in listed["items"])
    shown = client.get(f"/v1/tables/{doc['id']}/baselines").json()  # the dashboard's view: no shared-data baselines
    assert shown["gamma"]["opt"] == doc["gamma"] and shown["gamma"]["sub"] is None and shown["gamma"]["const"] is None
    assert shown["expected_error"]["opt"] == doc["expected_error"]


def test_pate_table_answers_into_a_ledger_with_its_own_accounting(client):
    table = client.post("/v1/tables", json=PATE).json()
    ledger = client.post("/v1/ledgers", json={"name": "pate", "epsilon_budget": 5.0, "delta_budget": 1e-2}).json()
    votes = [[1] * 8 + [0] * 3, [0] * 11, [1] * 11]
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"], "votes": votes * 4})
    assert r.status_code == 200, r.text
    state = client.get(f"/v1/ledgers/{ledger['id']}").json()
    assert state["groups"] == [{"table_id": table["id"], "epsilon0": 0.2676, "delta0": 3e-4, "answers": 12}]
    prof = PrivacyProfile.from_dict(table["privacy_profile"])
    expected = accounting.account([(0.2676, 3e-4, 12)], 1e-2, profiles=[(prof, 12)], coarse=True)  # far from ε = 5
    assert state["epsilon_spent"] == expected.spend.epsilon <= accounting.tightest([(0.2676, 3e-4, 12)], 1e-2).epsilon
    # a ledger capped by private teachers' (ε, Δ) refuses answers of non-private teachers
    capped = client.post("/v1/ledgers", json={"name": "cap", "epsilon_budget": 5.0, "delta_budget": 1e-2,
                                              "teachers": "disjoint-private", "teacher_epsilon": 0.1,
                                              "teacher_delta": 1e-5}).json()
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": capped["id"], "votes": votes})
    assert _loc(r) == ["body", "table_id"] and "disjoint-nonprivate" in r.text
    assert client.get(f"/v1/ledgers/{capped['id']}").json()["answers"] == 0


def test_disjoint_private_table_states_its_cap_under_its_own_id(client):
    shared = client.post("/v1/tables", json={"K": 5, "m": 2}).json()
    private = client.post("/v1/tables", json={"K": 5, "m": 2, "teachers": "disjoint-private"})
    assert private.status_code == 200, private.text
    doc = private.json()
    assert doc["id"] != shared["id"] and doc["gamma"] == shared["gamma"] and doc["certificate"]["certified"]
    assert doc["teachers"] == "disjoint-private" and doc["setting"]["total_cap"] == {"epsilon": 0.1, "delta": 1e-5}
    assert "plain majority" in doc["setting"]["note"]
    assert shared["teachers"] == "shared" and shared["setting"]["total_cap"] is None


def test_options_a_setting_does_not_take_are_422_naming_them(client):
    for extra in ({"m": 3}, {"epsilon": 0.1}, {"teacher_delta": 1e-5}):
        r = client.post("/v1/tables", json={**PATE, **extra})
        assert _loc(r) == ["body", next(iter(extra))] and "disjoint-nonprivate" in r.text
    r = client.post("/v1/tables", json={"K": 11, "teachers": "disjoint-nonprivate", "delta": 3e-4})
    assert _loc(r) == ["body", "target_epsilon"] and "required" in r.text
    for teachers in ("shared", "disjoint-private"):
        r = client.post("/v1/tables", json={"K": 11, "m": 3, "teachers": teachers, "target_epsilon": 0.3})
        assert _loc(r) == ["body", "target_epsilon"] and "only with teachers disjoint-nonprivate" in r.text
    assert _loc(client.post("/v1/tables", json={"K": 11})) == ["body", "m"]
    assert _loc(client.post("/v1/tables", json={**PATE, "K": 1003})) == ["body", "K"]
    r = client.post("/v1/plans", json={"K": 11, "teachers": "disjoint-nonprivate", "epsilon": 0.1, "queries": 10,
                                       "budget_epsilon": 2.0, "budget_delta": 1e-3})
    assert _loc(r) == ["body", "epsilon"]
    r = client.post("/v1/plans", json={"K": 11, "queries": 10, "budget_epsilon": 2.0, "budget_delta": 1e-3})
    assert _loc(r) == ["body", "epsilon"] and "required" in r.text


def test_pate_plan_matches_the_library_and_fits_its_ledger(client):
    """A PATE-setting plan asks every mechanism of the setting; with ``mechanism`` darrm-pate it is the
    library's per-answer plan, and its ledger charges what the plan says."""
    body = {"K": 11, "teachers": "disjoint-nonprivate", "queries": 10, "budget_epsilon": 2.0, "budget_delta": 1e-3}
    r = client.post("/v1/plans", json={**body, "mechanism": "darrm-pate", "create_ledger": {"name": "pate plan"}})
    assert r.status_code == 200, r.text
    doc = r.json()
    lib, _, _ = plan_job(Job(K=11, queries=10, budget_epsilon=2.0, budget_delta=1e-3), kinds=["darrm-pate"])
    table = doc["table"]
    assert doc["mechanism"] == "darrm-pate" and doc["gamma"] == list(lib.solution.gamma)
    assert table["epsilon"] == lib.table.params.epsilon
    assert table["teachers"] == "disjoint-nonprivate" and doc["plan"]["teachers"] == "disjoint-nonprivate"
    assert doc["plan"]["spent_epsilon"] <= 2.0 and abs(doc["plan"]["spent_epsilon"] - lib.epsilon_spent) < 1e-9
    assert certify_pairs(PateParams(11, table["epsilon"], table["delta"]), doc["gamma"]).certified
    votes = np.tile([1] * 7 + [0] * 4, (10, 1)).tolist()
    paid = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": doc["ledger"]["id"],
                                              "votes": votes})
    assert paid.status_code == 200, paid.text
    # the ledger states the plan's composition, or the same at the answers' bucket on the coarse grid (an
    # upper bound of it, within the budget the plan fits)
    prof = pate_profile(PateParams(11, table["epsilon"], table["delta"]), doc["gamma"])
    at_bucket = exact_epsilon(bucketed([(prof, 10)]), 1e-3, coarse=True)
    assert paid.json()["epsilon_spent"] in (doc["plan"]["spent_epsilon"], at_bucket)
    assert doc["plan"]["spent_epsilon"] <= paid.json()["epsilon_spent"] <= 2.0
    r = client.post("/v1/plans", json=body)  # every mechanism: the most accurate offer is chosen
    r = settled(client, r)  # planned in the background: its status URL polled
    assert r.status_code == 200, r.text
    auto = r.json()
    errors = [auto["expected_error"], *(a["expected_error"] for a in auto["alternatives"])]
    assert auto["expected_error"] == min(errors) <= doc["expected_error"]
    assert {auto["mechanism"], *(a["mechanism"] for a in auto["alternatives"])} >= {"darrm-pate", "gnmax"}


def test_disjoint_private_plan_says_the_majority_is_free(client):
    body = {"K": 5, "epsilon": 0.2, "teacher_delta": 1e-4, "queries": 20, "teachers": "disjoint-private"}
    r = client.post("/v1/plans", json={**body, "budget_epsilon": 3.0, "budget_delta": 0.01,
                                       "create_ledger": {"name": "free"}})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["plan"]["majority_free"] is True and doc["gamma"] == [1.0] * 6 and doc["expected_error"] == 0.0
    assert doc["plan"]["total_cap"] == {"epsilon": 0.2, "delta": 1e-4} and "plain majority" in doc["note"]
    assert doc["ledger"]["total_cap"] == {"epsilon": 0.2, "delta": 1e-4}
    assert client.get(f"/v1/plans/{doc['plan_id']}").json()["plan"]["majority_free"] is True
    # the same job with the kind named: the same entry point, the same free plan and capped ledger
    named = client.post("/v1/plans", json={**body, "budget_epsilon": 3.0, "budget_delta": 0.01, "mechanism": "darrm",
                                           "create_ledger": {"name": "free named"}})
    assert named.status_code == 200, named.text
    assert named.json()["plan"]["majority_free"] is True and named.json()["gamma"] == [1.0] * 6
    assert named.json()["ledger"]["total_cap"] == {"epsilon": 0.2, "delta": 1e-4}
    # a budget ε below the teachers' ε: one answer composed as for shared teachers (its profile at δ_B = 0.05
    # spends less than 0.2), and the plan says why
    r = client.post("/v1/plans", json={**body, "queries": 1, "budget_epsilon": 0.15, "budget_delta": 0.05})
    assert r.status_code == 200, r.text
    plan = r.json()["plan"]
    assert plan["majority_free"] is False and plan["spent_epsilon"] <= 0.15 and "not within the budget" in plan["note"]
    assert r.json()["teachers"] == "shared" and plan["total_cap"] == {"epsilon": 0.2, "delta": 1e-4}


def test_pate_tables_on_postgres(pg_database):
    """The same table and ledger round trip on PostgreSQL (migration 0005 there; PATE rows and their ids), with
    the application in process."""
    with in_process_client(pg_database) as c:
        test_pate_table_is_certified_cached_and_equals_the_cli(c)
        test_pate_table_answers_into_a_ledger_with_its_own_accounting(c)


def test_disjoint_private_teachers_above_the_budget_plan_a_pate_table_on_a_plain_ledger(client):
    """Teachers each (3, 1e-6)-DP on disjoint shards, budget (1, 1e-5): composed as for shared teachers the job
    needs ε ≥ 30, but the PATE setting's table serves it (each record is in one shard). The plan names that
    table, the ledger it opens is plain (a cap above the budget binds nothing, and a capped ledger refuses
    PATE tables), and that ledger pays its answers."""
    body = {"K": 15, "queries": 10, "budget_epsilon": 1.0, "budget_delta": 1e-5, "teachers": "disjoint-private",
            "epsilon": 3.0, "teacher_delta": 1e-6, "mechanism": "darrm-pate", "create_ledger": {"name": "shards"}}
    r = settled(client, client.post("/v1/plans", json=body))
    assert r.status_code == 200, r.text
    doc = r.json()
    pate, _, _ = plan_job(Job(K=15, queries=10, budget_epsilon=1.0, budget_delta=1e-5), kinds=["darrm-pate"])
    table = doc["table"]
    assert doc["mechanism"] == "darrm-pate" and table["teachers"] == "disjoint-nonprivate"
    assert table["id"] == pate.table.id and doc["expected_error"] == pate.expected_error
    ledger = doc["ledger"]
    assert ledger["total_cap"] is None and ledger["epsilon_budget"] == 1.0
    votes = [[1] * 15, [0] * 14 + [1]]
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"], "votes": votes})
    assert r.status_code == 200, r.text
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 2
