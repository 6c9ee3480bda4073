"""The disjoint-private ledger cap (issue 14): teachers on disjoint shards, each (ε_T, Δ_T)-DP, cap the total
by parallel composition, so the answers beyond the composed budget are paid at the cap. The application in
process, on SQLite and on PostgreSQL (when DARRM_TEST_POSTGRES_URL is set)."""

from __future__ import annotations

import pytest
from svc_helpers import in_process_client, make_table

from darrm_opt.privacy import accounting
from darrm_opt.privacy.profile import PrivacyProfile


def _ledger(c, **body):
    return c.post("/v1/ledgers", json={"name": "cap", **body})


def _check_cap(c):
    table = make_table(c, K=5, m=2, teacher_delta=0.0)  # pure: (0.2, 0) per answer
    capped = _ledger(c, epsilon_budget=1.0, delta_budget=1e-4, teachers="disjoint-private",
                     teacher_epsilon=0.1, teacher_delta=1e-5)
    assert capped.status_code == 201, capped.text
    assert capped.json()["total_cap"] == {"epsilon": 0.1, "delta": 1e-5}
    assert capped.json()["teachers"] == "disjoint-private"
    shared = _ledger(c, epsilon_budget=1.0, delta_budget=1e-4).json()
    assert shared["teachers"] == "shared" and shared["total_cap"] is None
    votes = {"table_id": table["id"], "votes": [[1, 1, 1, 0, 0]] * 40}
    r = c.post("/v1/aggregate", json={**votes, "ledger_id": capped.json()["id"]})
    assert r.status_code == 200, r.text
    assert (r.json()["epsilon_spent"], r.json()["delta_target"], r.json()["composition"]) == (0.1, 1e-4,
                                                                                               "parallel-cap")
    # the shared ledger composes: 40 answers of (0.2, 0) exceed ε = 1 by any rule, so nothing is released
    refused = c.post("/v1/aggregate", json={**votes, "ledger_id": shared["id"]})
    assert refused.status_code == 409 and not isinstance(refused.json().get("answers"), list)
    assert c.get(f"/v1/ledgers/{shared['id']}").json()["answers"] == 0
    assert accounting.account([(0.2, 0.0, 40)], 1e-4).spend.epsilon > 1.0
    # any number of further answers is free under the cap
    for _ in range(3):
        assert c.post("/v1/aggregate", json={**votes, "ledger_id": capped.json()["id"]}).status_code == 200
    state = c.get(f"/v1/ledgers/{capped.json()['id']}").json()
    assert state["answers"] == 160 and state["epsilon_spent"] == 0.1 and state["composition"] == "parallel-cap"
    assert state["bounds"]["parallel-cap"] == {"epsilon": 0.1, "delta": 1e-5}
    assert state["bounds"]["basic"]["epsilon"] == pytest.approx(160 * 0.2)


def test_disjoint_private_ledger_is_capped(client):
    _check_cap(client)


def test_cap_not_taken_when_looser_or_over_delta(client):
    table = make_table(client, K=5, m=2, teacher_delta=0.0)
    loose = _ledger(client, epsilon_budget=5.0, delta_budget=1e-6, teachers="disjoint-private",
                    teacher_epsilon=3.0, teacher_delta=1e-5).json()  # the cap's Δ exceeds the ledger's δ
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": loose["id"],
                                           "votes": [[1, 0, 0, 0, 0]] * 2})
    assert r.status_code == 200 and r.json()["composition"] != "parallel-cap"
    prof = PrivacyProfile.from_dict(table["privacy_profile"])
    tightest = accounting.account([(0.2, 0.0, 2)], 1e-6, profiles=[(prof, 2)], coarse=True).spend
    assert (r.json()["epsilon_spent"], r.json()["composition"]) == (tightest.epsilon, tightest.method)


@pytest.mark.parametrize("body, field", [
    ({"teachers": "disjoint-private", "teacher_epsilon": 0.1}, "teacher_epsilon and teacher_delta"),
    ({"teacher_epsilon": 0.1, "teacher_delta": 0.0}, "only apply"),
    ({"teachers": "disjoint-private", "teacher_epsilon": -1, "teacher_delta": 0.0}, "teacher_epsilon"),
    ({"teachers": "disjoint-nonprivate"}, "teachers"),
])
def test_bad_cap_bodies_are_422(client, body, field):
    r = _ledger(client, epsilon_budget=1.0, delta_budget=1e-4, **body)
    assert r.status_code == 422 and field in r.text


def test_ledger_cap_on_postgres(pg_database):
    with in_process_client(pg_database) as c:
        _check_cap(c)
