"""Labelling jobs (/v1/jobs): the service's ``darrm-opt label`` — planned once, batches of votes paid once by
their record ids, the same statement as ``darrm_opt.label`` on the same votes, the rules of a batch as 422s
naming them, and a job that survives a restart of a real server. (The issue's PATE job at K = 250 runs as
one REST job in tests/test_label.py, beside the CLI's.)"""

from __future__ import annotations

import time

import numpy as np
import pytest
from svc_helpers import Server, in_process_client

import darrm_opt

pytest.importorskip("sqlalchemy")

JOB = {"budget": [2, 1e-5], "K": 11, "queries": 20, "mechanism": "darrm-pate"}


def teachers_votes(N, K, C, seed=1, right=0.8):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, C, N)
    correct = rng.random((N, K)) < right
    return np.where(correct, truth[:, None], rng.integers(0, C, (N, K)))


def counts_of(labels, C):
    return np.stack([(labels == c).sum(axis=1) for c in range(C)], axis=1)


def ready(c, r, timeout=600.0):
    """The job of a POST /v1/jobs answer, polled until it is no longer planning (bounded in time)."""
    deadline = time.monotonic() + timeout
    while r.status_code == 202:
        assert r.json()["status"] == "planning" and time.monotonic() < deadline, r.text
        time.sleep(0.2)
        r = c.get(r.headers["Location"])
    assert r.status_code in (200, 201), r.text
    return r.json()


def without_run(statement):
    return {k: v for k, v in statement.items() if k not in ("ledger", "answered_now", "answered_before", "labels")}


@pytest.mark.slow  # two plans (K = 11): the job's and darrm_opt.label's
def test_job_pays_each_batch_once_states_as_label_and_names_bad_rows(tmp_path):
    votes = teachers_votes(20, 11, 2, seed=5)
    with in_process_client(f"sqlite:///{tmp_path / 's.db'}") as c:
        job = ready(c, c.post("/v1/jobs", json={**JOB, "name": "pate-small"}))
        assert (job["status"], job["answered"], job["K"], job["classes"], job["queries"]) == ("ready", 0, 11, 2, 20)
        assert job["mechanism"] == "darrm-pate" and job["spent"] == {"epsilon": 0.0, "delta": 1e-5}
        url = f"/v1/jobs/{job['id']}/votes"

        first = c.post(url, json={"records": [f"q{i}" for i in range(10)], "votes": votes[:10].tolist()})
        assert first.status_code == 200, first.text
        a = first.json()
        assert len(a["labels"]) == 10 and set(a["labels"]) <= {0, 1} and not a["replayed"]
        assert (a["statement"]["answered_now"], a["statement"]["ledger"]["answers"]) == (10, 10)
        # the same batch resent (as counts this time): its stored labels, nothing paid
        again = c.post(url, json={"records": [f"q{i}" for i in range(10)],
                                  "votes": counts_of(votes[:10], 2).tolist(), "form": "counts"})
        assert again.status_code == 200, again.text
        assert again.json()["labels"] == a["labels"] and again.json()["replayed"]
        assert (again.json()["reanswered"], again.json()["changed"]) == (list(range(10)), [])  # counts = labels
        assert again.json()["statement"]["epsilon"] == a["statement"]["epsilon"]
        got = c.get(f"/v1/jobs/{job['id']}")
        assert got.status_code == 200, (got.text, job['id'])
        assert got.json()['answered'] == 10
        # the same record ids with other votes: their stored labels (nothing paid), the changed rows reported
        other = votes[:10].copy()
        other[0] = 1 - other[0]
        r = c.post(url, json={"records": [f"q{i}" for i in range(10)], "votes": other.tolist()})
        assert r.status_code == 200, r.text
        assert (r.json()["labels"], r.json()["reanswered"], r.json()["changed"]) == (a["labels"], list(range(10)), [0])
        assert r.json()["statement"]["epsilon"] == a["statement"]["epsilon"]
        # a batch overlapping an earlier one pays its new records only
        part = c.post(url, json={"records": ["q9", "q10"], "votes": votes[9:11].tolist()})
        assert part.status_code == 200, part.text
        assert (part.json()["labels"][0], part.json()["reanswered"], part.json()["statement"]["ledger"]["answers"]) \
            == (a["labels"][9], [0], 11)

        bad_sum = counts_of(votes[10:12], 2)
        bad_sum[1, 0] += 1
        for body, loc, msg in (
            ({"records": [1, 2], "votes": bad_sum.tolist(), "form": "counts"}, ["body", "votes"],
             "votes[1]: a count row sums to 12; every count row must sum to K = 11 (the number of "
             "teachers)"),
            ({"records": [1], "votes": [[0] * 10 + [2]]}, ["body", "votes"],
             "votes[0]: every vote must be a class label, an integer in [0, 1] (C = 2 classes; "
             "got 2)"),
            ({"records": [1], "votes": [[0] * 7]}, ["body", "votes"],
             "has 7 columns: (N, K = 11) labels or (N, C = 2) counts were expected (the table's K and C)"),
            ({"records": [1, 2], "votes": [[0] * 11]}, ["body", "records"], "one record id per row: 2 ids for 1 rows"),
            ({"records": [1], "votes": [[]]}, ["body", "votes", 0], "every row must hold K class labels or C vote "
                                                                     "counts"),
        ):
            r = c.post(url, json=body)
            assert r.status_code == 422, r.text
            assert (r.json()["detail"][0]["loc"], r.json()["detail"][0]["msg"]) == (loc, msg)

        done = c.post(url, json={"records": [f"q{i}" for i in range(10, 20)], "votes": votes[10:].tolist()})
        assert done.status_code == 200, done.text
        assert done.json()["reanswered"] == [0] and done.json()["labels"][0] == part.json()["labels"][1]
        status = c.get(f"/v1/jobs/{job['id']}").json()
        assert status["answered"] == 20 and status["statement"]["labels"] == 20
        assert status["spent"]["epsilon"] == status["statement"]["epsilon"] <= 2
        assert c.post(url, json={"records": ["late"], "votes": votes[:1].tolist()}).status_code == 409  # over Q
        # a POST with the name resumes the job; with other inputs it is refused, naming the name
        assert c.post("/v1/jobs", json={**JOB, "name": "pate-small"}).json()["id"] == job["id"]
        r = c.post("/v1/jobs", json={**JOB, "queries": 30, "name": "pate-small"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "name"]
        assert c.get("/v1/jobs/" + "0" * 32).status_code == 404

    python = darrm_opt.label(votes, budget=(2, 1e-5), ledger_db=str(tmp_path / "p.db"), kinds=["darrm-pate"])
    assert without_run(status["statement"]) == without_run(python.statement)
    assert a["labels"] + done.json()["labels"] != [] and python.statement["labels"] == 20


def test_job_inputs_are_checked_naming_the_parameter(client):
    for body, loc in (({"budget": [2, 1e-5], "queries": 5}, "K"), ({"budget": [0, 1e-5], "K": 3, "queries": 5},
                                                                    "budget"),
                      ({"budget": [2, 1e-5], "shape": [5, 3], "K": 4}, "shape"),
                      ({"budget": [2, 1e-5], "K": 3, "queries": 5, "epsilon": 1.0}, "epsilon")):
        r = client.post("/v1/jobs", json=body)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", loc], r.text


@pytest.mark.slow  # real server processes, a plan
def test_job_survives_a_restart(tmp_path):
    """A job still planning when its server stops is planned again by the next; a ready one keeps its table,
    ledger and answers (a resent batch is replayed)."""
    db = f"sqlite:///{tmp_path / 'd.db'}"
    votes = teachers_votes(6, 5, 2, seed=2)
    batch = {"records": list(range(6)), "votes": votes.tolist()}
    job = {"budget": [2, 1e-5], "shape": [6, 5], "name": "kept", "mechanism": "darrm-pate"}
    server = Server(tmp_path, db, env={"DARRM_INLINE_TIMEOUT_S": "0.001"}).start()
    try:
        with server.client() as c:
            r = c.post("/v1/jobs", json=job)
            assert r.status_code == 202 and r.json()["status"] == "planning", r.text
            job_id = r.json()["id"]
    finally:
        server.kill9()
    for name in ("again", "third"):
        server = Server(tmp_path, db, name=name).start()
        try:
            with server.client() as c:
                status = ready(c, c.get(f"/v1/jobs/{job_id}"))
                assert status["status"] == "ready" and status["mechanism"] == "darrm-pate"
                answer = c.post(f"/v1/jobs/{job_id}/votes", json=batch).json()
                if name == "again":
                    first, spent = answer, c.get(f"/v1/jobs/{job_id}").json()["spent"]
                    assert status["answered"] == 0 and not first["replayed"]
                else:
                    assert (status["answered"], status["spent"]) == (6, spent)
                    assert answer["replayed"] and answer["labels"] == first["labels"]
                assert c.post("/v1/jobs", json=job).json()["id"] == job_id  # the name resumes it
        finally:
            server.stop()


def test_a_job_no_mechanism_fits_is_refused_and_then_failed(client):
    body = {"budget": [1e-9, 1e-9], "K": 3, "queries": 5, "name": "too-tight", "mechanism": "darrm-pate"}
    r = client.post("/v1/jobs", json=body)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "budget_epsilon"], r.text
    again = client.post("/v1/jobs", json=body)  # the name finds the job: failed, with the plan's refusal
    assert again.status_code == 200 and again.json()["status"] == "failed", again.text
    assert again.json()["error"].startswith("invalid budget_epsilon: no mechanism fits the job's budget")
    job = client.get(again.json()["status_url"]).json()
    assert (job["status"], job["error"], job["answered"]) == ("failed", again.json()["error"], 0)
    r = client.post(again.json()["status_url"] + "/votes", json={"records": [0], "votes": [[0, 0, 1]]})
    assert r.status_code == 409 and "planning failed: invalid budget_epsilon" in r.json()["detail"]
