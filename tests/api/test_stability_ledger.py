"""The stability-based release run through a ledger (darrm_opt.release.release with a kind that keeps state):
the job's (ε, δ) paid once per job, its private state (ρ, the count of unstable answers) kept in the database
so that a restart continues the same job without showing ρ, ⊥ after c unstable answers at no further cost, a
new job (and its payment) only past the quota; on SQLite and, when DARRM_TEST_POSTGRES_URL is set, PostgreSQL.
The end-to-end check: votes drawn from the prior, released through a ledger, the empirical error within the
binomial range of the planned one."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from darrm_opt.ledger.local import Ledger
from darrm_opt.mechanisms import mechanism
from darrm_opt.mechanisms.stability import BOTTOM, StabilityParams
from darrm_opt.privacy import accounting
from darrm_opt.privacy.stability import SvtParams
from darrm_opt.release.release import Aggregator

KIND = mechanism("stability")


@pytest.fixture
def url(database_url: str) -> str:
    """Each ledger test on SQLite and on PostgreSQL (conftest's ``database_url``)."""
    return database_url


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    """The service in this process on its own SQLite file (shared by this module's REST tests)."""
    from svc_helpers import in_process_client

    d = tmp_path_factory.mktemp("stability-svc")
    url = f"sqlite:///{d / 'svc.db'}"
    with in_process_client(url) as c:
        yield c, url


def table(svt: SvtParams, quota: int, K: int = 61, classes: int | None = 3):
    return KIND.certify_table(StabilityParams(K, classes, svt, quota), np.zeros(0))


def unanimous(rows: int, K: int = 61) -> np.ndarray:
    return np.zeros((rows, K), dtype=np.int64)  # d = ⌈K/2⌉ − 1 = 30 for K = 61


def job_spend(t, jobs: int, delta: float) -> float:
    return accounting.exact([(t.profile, jobs)], delta).epsilon


def state_of(book: Ledger, t) -> dict:
    stored = book.job_state(t)
    assert stored.state is not None
    return json.loads(stored.state)


def test_a_restart_mid_job_continues_the_same_job_and_pays_it_once(url):
    t = table(SvtParams(100, 100, 100, 1200, 2), quota=10)  # s·d = 3000: unstable w.p. < 1e-7
    with Ledger(url, "job", epsilon_budget=50.0, delta_budget=1e-3) as book:
        first = Aggregator(t, book)(unanimous(4))
        before = state_of(book, t)
        spent = book.view()["epsilon_spent"]
    assert spent == pytest.approx(job_spend(t, 1, 1e-3), rel=1e-4) and spent <= t.epsilon0  # one job
    assert before["jobs"] == 1 and before["current"]["queries"] == 4
    with Ledger(url, "job") as book:  # a new process: the same state, not a fresh ρ
        assert state_of(book, t) == before
        second = Aggregator(t, book)(unanimous(6))
        after = state_of(book, t)
        view = book.view()
    assert after["current"]["rho"] == before["current"]["rho"] and after["current"]["queries"] == 10
    assert (view["epsilon_spent"], view["answers"]) == (spent, 10)
    assert set(first) | set(second) == {0}
    assert "rho" not in json.dumps(view, default=str)  # the threshold never leaves the server

    with Ledger(url, "job") as book:  # past the quota: a second job, paid
        Aggregator(t, book)(unanimous(1))
        assert state_of(book, t)["jobs"] == 2 and state_of(book, t)["current"]["queries"] == 1
        assert book.view()["epsilon_spent"] == pytest.approx(job_spend(t, 2, 1e-3), rel=1e-4)


def test_after_c_unstable_answers_the_job_answers_bottom_and_pays_nothing_more(url):
    t = table(SvtParams(100, 100, 100, 100_000, 2), quota=50)  # T ≫ s·d: unstable w.p. > 1 − 1e-100
    with Ledger(url, "cut", epsilon_budget=50.0, delta_budget=1e-3) as book:
        out = list(Aggregator(t, book)(unanimous(3)))
        spent = book.view()["epsilon_spent"]
        st = state_of(book, t)
    assert out == [BOTTOM] * 3 and st["current"]["unstable"] == 2
    for _ in range(2):  # restarted: still halted, still ⊥, no further cost
        with Ledger(url, "cut") as book:
            assert list(Aggregator(t, book)(unanimous(5))) == [BOTTOM] * 5
            assert book.view()["epsilon_spent"] == spent
    with Ledger(url, "cut") as book:
        st = state_of(book, t)
        assert (st["jobs"], st["current"]["queries"], st["current"]["answered"]) == (1, 13, 0)
        assert book.view()["answers"] == 13


def test_a_stale_state_is_not_swapped(tmp_path):
    """Two processes answering one job: the one whose state is stale cannot store its next state."""
    t = table(SvtParams(100, 100, 100, 1200, 2), quota=10)
    with Ledger(f"sqlite:///{tmp_path / 'l.db'}", "race", epsilon_budget=50.0, delta_budget=1e-3) as book:
        Aggregator(t, book)(unanimous(2))
        stored = book.job_state(t)
        assert book.swap_job_state(t, stored.version, stored.state) is True
        assert book.swap_job_state(t, stored.version, stored.state) is False  # a stale version
        assert book.swap_job_state(t, 0, stored.state) is False  # a second first state


@pytest.mark.slow  # 6,000 queries through a ledger whose exact composition grows to 300 jobs (~20 s)
def test_planned_jobs_released_through_a_ledger_err_as_planned(tmp_path):
    """The example job (K = 61, C = 3, Q = 20, prior paper, (4, 1e-5)) planned, then N = 300 jobs of votes
    drawn from the prior released through one ledger (calls of 1000 rows: 50 jobs each, each paid once). A
    job's errors are not independent (one threshold, a stop after c unstable queries), but one query of each
    job chosen uniformly at random errs with probability exactly the planned error (the mean over its Q
    queries): N independent such queries are Binomial(N, planned error)."""
    from darrm_opt.planning.job import Job

    job = Job(**KIND.examples()[0].job)  # type: ignore[arg-type]
    offer = KIND.plan(job)  # a job not named thorough: the plan without the GNMax fallback, its error exact
    assert offer.table.params.fallback_sigma is None
    t, Q, jobs = offer.table, job.queries, 300
    assert 0.01 < offer.expected_error < 0.3
    rng = np.random.default_rng(2026)
    # the prior paper: each vote right with probability p ~ U[0.5, 1], else a uniform wrong class
    truth = rng.integers(0, 3, jobs * Q)
    right = rng.uniform(size=(jobs * Q, 61)) < rng.uniform(0.5, 1.0, size=(jobs * Q, 61))
    wrong = (truth[:, None] + rng.integers(1, 3, size=(jobs * Q, 61))) % 3
    votes = np.where(right, truth[:, None], wrong)
    with Ledger(f"sqlite:///{tmp_path / 'e2e.db'}", "e2e", epsilon_budget=1e5, delta_budget=0.5) as book:
        answers = np.concatenate([Aggregator(t, book)(votes[i:i + 50 * Q]) for i in range(0, jobs * Q, 50 * Q)])
        assert state_of(book, t)["jobs"] == jobs
    picked = np.arange(jobs) * Q + rng.integers(0, Q, jobs)
    errors = int(np.sum(answers[picked] != truth[picked]))
    assert stats.binomtest(errors, jobs, offer.expected_error).pvalue > 1e-3


def test_the_service_continues_one_job_across_requests(svc):
    """POST /v1/aggregate on a stability table: the first request opens the ledger's job and pays it, the
    next ones continue it (the same spend) until the quota, then a second job is paid; no response shows ρ."""
    c, _ = svc
    t = table(SvtParams(100, 100, 100, 1200, 2), quota=10)
    c.app.state.services.tables.store(t, solver="closed-form", solve_seconds=0.0, params_key=None)
    lid = c.post("/v1/ledgers", json={"name": "svc", "epsilon_budget": 50.0, "delta_budget": 1e-3}).json()["id"]
    bodies = []
    for rows in (4, 6, 1):
        r = c.post("/v1/aggregate", json={"table_id": t.id, "ledger_id": lid, "votes": unanimous(rows).tolist()})
        assert r.status_code == 200, r.text
        bodies.append(r.json())
    ledger = c.get(f"/v1/ledgers/{lid}").json()
    assert [b["answers"] for b in bodies] == [[0] * 4, [0] * 6, [0]]
    assert bodies[0]["epsilon_spent"] == bodies[1]["epsilon_spent"] < bodies[2]["epsilon_spent"]
    assert [b["ledger_answers"] for b in bodies] == [4, 10, 11]
    assert "rho" not in json.dumps([bodies, ledger])


def test_a_retried_request_replays_its_answers_without_advancing_the_job(svc):
    from darrm_opt.ledger.db import Database
    from darrm_opt.ledger.job_state import JobStates

    c, url = svc
    t = table(SvtParams(100, 100, 100, 100_000, 2), quota=10)  # every query unstable: ⊥, halted after 2
    c.app.state.services.tables.store(t, solver="closed-form", solve_seconds=0.0, params_key=None)
    lid = c.post("/v1/ledgers", json={"name": "r", "epsilon_budget": 50.0, "delta_budget": 1e-3}).json()["id"]
    body = {"table_id": t.id, "ledger_id": lid, "votes": unanimous(3).tolist(), "idempotency_key": "k1"}
    first = c.post("/v1/aggregate", json=body).json()
    db = Database(url)
    try:
        before = JobStates(db).get(lid, t.id)
        again = c.post("/v1/aggregate", json=body).json()
        assert JobStates(db).get(lid, t.id) == before
    finally:
        db.dispose()
    other = c.post("/v1/aggregate", json={**body, "votes": unanimous(2).tolist()})
    assert first["answers"] == again["answers"] == [BOTTOM] * 3 and again["replayed"] is True
    assert other.status_code == 422  # the key reused for other votes


def test_another_tenant_neither_continues_nor_reads_a_job(tmp_path):
    """Bob's request on Alice's ledger is refused as an unknown ledger (404) before the job's state is read:
    Alice's job is where she left it."""
    from test_api_tenants import in_process

    from darrm_opt.ledger.db import Database
    from darrm_opt.ledger.job_state import JobStates

    url = f"sqlite:///{tmp_path / 'tenants.db'}"
    t = table(SvtParams(100, 100, 100, 1200, 2), quota=10)
    with in_process(url) as clients:
        alice, bob = clients["alice"], clients["bob"]
        alice.app.state.services.tables.store(t, solver="closed-form", solve_seconds=0.0, params_key=None)
        lid = alice.post("/v1/ledgers", json={"name": "a", "epsilon_budget": 50.0, "delta_budget": 1e-3}).json()["id"]
        body = {"table_id": t.id, "ledger_id": lid, "votes": unanimous(4).tolist()}
        assert alice.post("/v1/aggregate", json=body).status_code == 200
        db = Database(url)
        try:
            before = JobStates(db).get(lid, t.id)
            r = bob.post("/v1/aggregate", json=body)
            assert r.status_code == 404, r.text
            assert JobStates(db).get(lid, t.id) == before and before.version == 1
        finally:
            db.dispose()
