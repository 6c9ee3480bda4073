"""Plans kept in the database, on a real 2-worker server (SQLite, and PostgreSQL when
``DARRM_TEST_POSTGRES_URL`` is set): every poll from any worker answers, the same plan posted 4 times at once
is run once, and a plan whose worker is killed (kill -9) is taken over by the other worker and finished.

Every request opens its own connection, so the two workers share the requests as the kernel hands them out.
Every wait is bounded.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import signal
import threading
import time

import httpx
import pytest
from sqlalchemy import create_engine, text
from svc_helpers import AUTH, Server

from darrm_opt.certify.certificate import certify
from darrm_opt.ledger.db import normalize_url
from darrm_opt.ledger.leases import STALE_S
from darrm_opt.model.params import Params

pytestmark = pytest.mark.slow  # real server processes, kill -9

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
# background plans (DARRM_INLINE_MAX_MULTISETS = 0): a few seconds, and some 10-40 s
QUICK = {"K": 11, "epsilon": 0.1, "teacher_delta": 1e-5, "queries": 50, "budget_epsilon": 3.0,
         "budget_delta": 0.01}
LONG = {**QUICK, "K": 25}
WAIT_S = 180.0


@pytest.fixture(scope="module", params=BACKENDS)
def two_workers(request, tmp_path_factory):
    if request.param == "postgres":
        url = request.getfixturevalue("pg_database")
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('plans-db') / 'plans.db'}"
    server = Server(tmp_path_factory.mktemp(f"plans-{request.param}"), url, workers=2,
                    env={"DARRM_INLINE_MAX_MULTISETS": "0"}, name=f"plans-{request.param}")
    server.start()
    try:
        yield url, server
    finally:
        server.stop()


def plan_row(url: str, plan_id: str) -> dict:
    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            row = conn.execute(text("SELECT status, owner, attempts, table_id FROM plans WHERE id = :i"),
                               {"i": plan_id}).first()
            return {} if row is None else dict(row._mapping)
    finally:
        engine.dispose()


def owner_pid(owner: str) -> int:
    return int(owner.split(":")[-2])


def fresh_get(server: Server, path: str) -> httpx.Response:
    """One GET on a connection of its own (either worker may take it)."""
    return httpx.get(server.url + path, headers=AUTH, timeout=60)


def poll_done(server: Server, plan_id: str, timeout: float = WAIT_S) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = fresh_get(server, f"/v1/plans/{plan_id}")
        assert r.status_code in (200, 202), r.text
        doc = r.json()
        assert doc["plan_id"] == plan_id
        if r.status_code == 200:
            return doc
        assert doc["status"] in ("queued", "running") and doc["table_id"] is None, doc
        time.sleep(0.2)
    raise AssertionError(f"plan {plan_id} not done after {timeout} s:\n{server.log()}")


def test_the_same_plan_posted_4_times_runs_once_and_every_poll_from_any_worker_answers(two_workers):
    url, server = two_workers
    barrier = threading.Barrier(4)

    def post(_i: int) -> httpx.Response:
        barrier.wait(10)
        return httpx.post(server.url + "/v1/plans", json=QUICK, headers=AUTH, timeout=60)

    with cf.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(post, range(4)))
    assert [r.status_code for r in answers] == [202] * 4, [r.text for r in answers]
    [plan_id] = {r.json()["plan_id"] for r in answers}
    assert {r.json()["status"] for r in answers} <= {"queued", "running"}

    polls = [fresh_get(server, f"/v1/plans/{plan_id}") for _ in range(12)]
    assert [r.status_code in (200, 202) and r.json()["plan_id"] == plan_id for r in polls] == [True] * 12, \
        [r.text for r in polls]

    doc = poll_done(server, plan_id)
    params = Params(doc["K"], doc["m"], doc["epsilon"], doc["teacher_delta"], doc["delta"], doc["prior"])
    assert doc["status"] == "done" and doc["progress"] == {} and doc["table_id"] == doc["id"]
    assert doc["K"] == 11 and certify(params, doc["gamma"]).certified and doc["plan"]["spent_epsilon"] <= 3.0
    after = [fresh_get(server, f"/v1/plans/{plan_id}") for _ in range(12)]
    assert [r.status_code for r in after] == [200] * 12
    assert all(r.json()["gamma"] == doc["gamma"] for r in after)
    row = plan_row(url, plan_id)
    assert row["status"] == "done" and row["attempts"] == 1 and row["table_id"] == doc["id"]
    again = httpx.post(server.url + "/v1/plans", json=QUICK, headers=AUTH, timeout=60)
    assert again.status_code == 200 and again.headers["x-darrm-cache"] == "hit" and again.json()["id"] == doc["id"]
    assert plan_row(url, plan_id)["attempts"] == 1


def test_a_plan_whose_worker_is_killed_is_taken_over_and_finished_by_the_other(two_workers):
    url, server = two_workers
    r = httpx.post(server.url + "/v1/plans", json=LONG, headers=AUTH, timeout=60)
    assert r.status_code == 202, r.text
    plan_id = r.json()["plan_id"]
    deadline = time.monotonic() + 60
    while plan_row(url, plan_id).get("status") != "running":
        assert time.monotonic() < deadline, server.log()
        time.sleep(0.1)
    time.sleep(1.0)
    first = plan_row(url, plan_id)
    assert first["status"] == "running" and first["attempts"] == 1
    victim = owner_pid(first["owner"])
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()

    taken = None
    while taken is None:  # the surviving worker takes it over when a poll reads the stale lease
        assert time.monotonic() - killed < 30, server.log()
        r = fresh_get(server, f"/v1/plans/{plan_id}")
        assert r.status_code in (200, 202), r.text
        row = plan_row(url, plan_id)
        if row["attempts"] == 2:
            taken = time.monotonic() - killed
        time.sleep(0.1)
    print(f"plan taken over {taken:.2f} s after kill -9 of its worker")
    assert taken <= STALE_S + 2.0, taken
    assert owner_pid(row["owner"]) != victim

    doc = poll_done(server, plan_id)
    assert doc["K"] == 25 and doc["certificate"]["certified"] is True and doc["table_id"] == doc["id"]
    row = plan_row(url, plan_id)
    assert row["status"] == "done" and row["attempts"] == 2 and owner_pid(row["owner"]) != victim
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as c:
        assert c.get(f"/v1/tables/{doc['id']}").json()["gamma"] == doc["gamma"]
