"""POST /v1/plans takes a ``counts:`` prior (the law of the count of 1-votes) like the CLI and Python, and
refuses one beyond K with a 422 naming ``prior``; one written out over every L is kept whole (tables, plans, SQLite
and PostgreSQL)."""

from __future__ import annotations

import tempfile

from svc_helpers import in_process_client, settled

from darrm_opt.mechanisms import plan_job
from darrm_opt.planning.job import Job

JOB = {"K": 11, "teachers": "disjoint-nonprivate", "queries": 10, "budget_epsilon": 2.0, "budget_delta": 1e-5}
PRIOR = "counts:10=0.9,6..9=0.1"


def test_plan_with_a_counts_prior(client):
    r = client.post("/v1/plans", json={**JOB, "prior": PRIOR})
    r = settled(client, r)  # planned in the background: its status URL polled
    assert r.status_code == 200, r.text
    doc = r.json()
    chosen, _, _ = plan_job(Job(K=11, queries=10, budget_epsilon=2.0, budget_delta=1e-5, prior=PRIOR))
    assert (doc["mechanism"], doc["expected_error"]) == (chosen.mechanism, chosen.expected_error)


def test_counts_beyond_K_are_a_422_naming_prior(client):
    r = client.post("/v1/plans", json={**JOB, "prior": "counts:12=1"})
    assert r.status_code == 422, r.text
    assert "prior" in r.text and "K = 11" in r.text


#: a counts prior over K = 41 with every L written out: far longer than 100 characters
LONG_K = 41
LONG_PRIOR = "counts:" + ",".join(f"{L}={w!r}" for L, w in zip(range(LONG_K + 1), [0.5 / 40] * 40 + [0.25, 0.25]))


def _table_round_trip(c):
    body = {"K": LONG_K, "teachers": "disjoint-nonprivate", "target_epsilon": 1.0, "prior": LONG_PRIOR}
    r = c.post("/v1/tables", json=body)
    assert r.status_code == 200, r.text
    table = r.json()
    assert table["prior"] == LONG_PRIOR
    listed = c.get("/v1/tables", params={"prior": LONG_PRIOR, "K": LONG_K})
    assert listed.status_code == 200, listed.text
    assert [t["id"] for t in listed.json()["items"]] == [table["id"]]
    assert c.get(f"/v1/tables/{table['id']}").json()["prior"] == LONG_PRIOR


def test_a_long_counts_prior_is_stored_whole():
    """A counts prior written out over every L is kept whole in the table store (SQLite here)."""
    assert len(LONG_PRIOR) > 400
    with tempfile.TemporaryDirectory() as d, in_process_client(f"sqlite:///{d}/darrm.db") as c:
        _table_round_trip(c)


def test_a_long_counts_prior_is_stored_whole_on_postgres(pg_database):
    """PostgreSQL enforces column lengths: the prior column is text (migration 0015)."""
    with in_process_client(pg_database) as c:
        _table_round_trip(c)


def test_plan_with_a_long_counts_prior(client):
    job = {**JOB, "K": LONG_K, "prior": LONG_PRIOR}
    r = client.post("/v1/plans", json=job)
    r = settled(client, r)  # planned in the background: its status URL polled
    assert r.status_code == 200, r.text
    chosen, _, _ = plan_job(Job(K=LONG_K, queries=10, budget_epsilon=2.0, budget_delta=1e-5, prior=LONG_PRIOR))
    assert (r.json()["mechanism"], r.json()["expected_error"]) == (chosen.mechanism, chosen.expected_error)
