"""POST /v1/plans takes a ``counts:`` prior (the law of the count of 1-votes) like the CLI and Python, and
refuses one beyond K with a 422 naming ``prior``."""

from __future__ import annotations

import time

from darrm_opt.mechanisms import plan_job
from darrm_opt.planning.job import Job

JOB = {"K": 11, "teachers": "disjoint-nonprivate", "queries": 10, "budget_epsilon": 2.0, "budget_delta": 1e-5}
PRIOR = "counts:10=0.9,6..9=0.1"


def test_plan_with_a_counts_prior(client):
    r = client.post("/v1/plans", json={**JOB, "prior": PRIOR})
    if r.status_code == 202:  # planned in the background: poll its status URL (bounded in time)
        url, deadline = r.json()["status_url"], time.monotonic() + 300
        while r.status_code == 202 and time.monotonic() < deadline:
            time.sleep(0.2)
            r = client.get(url)
    assert r.status_code == 200, r.text
    doc = r.json()
    chosen, _, _ = plan_job(Job(K=11, queries=10, budget_epsilon=2.0, budget_delta=1e-5, prior=PRIOR))
    assert (doc["mechanism"], doc["expected_error"]) == (chosen.mechanism, chosen.expected_error)


def test_counts_beyond_K_are_a_422_naming_prior(client):
    r = client.post("/v1/plans", json={**JOB, "prior": "counts:12=1"})
    assert r.status_code == 422, r.text
    assert "prior" in r.text and "K = 11" in r.text
