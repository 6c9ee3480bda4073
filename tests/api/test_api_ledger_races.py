"""The ledger under concurrency and crashes, on SQLite and (when DARRM_TEST_POSTGRES_URL is set) PostgreSQL,
always with two server processes sharing the database."""

from __future__ import annotations

import concurrent.futures as cf
import threading
import time

import httpx
import pytest
from svc_helpers import AUTH, Server, make_ledger, make_table

from darrm_opt.model.params import Params
from darrm_opt.privacy import accounting
from darrm_opt.privacy.profile import PrivacyProfile

# slow tier: two real server processes per backend, racing clients and kill -9
pytestmark = pytest.mark.slow

N = 60  # answers the raced ledgers can pay for (32 clients race for them: most are refused at the end)
CLIENTS = 32
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def database_url(request, tmp_path_factory, backend: str) -> tuple[str, object]:
    if backend == "postgres":
        return request.getfixturevalue("pg_database"), None
    d = tmp_path_factory.mktemp("ledger-sqlite")
    return f"sqlite:///{d / 'ledger.db'}", d


@pytest.fixture(scope="module", params=BACKENDS)
def servers(request, tmp_path_factory):
    url, _ = database_url(request, tmp_path_factory, request.param)
    workdir = tmp_path_factory.mktemp(f"servers-{request.param}")
    pair = [Server(workdir, url, name=f"{request.param}-{i}") for i in range(2)]
    try:
        for s in pair:
            s.start()
        yield pair
    finally:
        for s in pair:
            s.stop()


def race(servers, body_for, *, max_requests: int, seconds: float = 120) -> int:
    """CLIENTS threads, alternating between the two servers, each posting ``body_for(i)`` until a 409, the
    request cap or the deadline; returns the number of answers released."""
    deadline = time.monotonic() + seconds

    def client(i: int) -> int:
        got = 0
        with servers[i % 2].client() as cl:
            for _ in range(max_requests):
                if time.monotonic() > deadline:
                    break
                r = cl.post("/v1/aggregate", json=body_for(i))
                if r.status_code == 409:
                    break
                assert r.status_code == 200, r.text
                got += len(r.json()["answers"])
        return got

    with cf.ThreadPoolExecutor(CLIENTS) as pool:
        return sum(pool.map(client, range(CLIENTS)))


def budget_for_exactly(n: int, eps0: float, delta0: float, delta_budget: float, profile=None) -> float:
    """An ε budget between the spend of n and n + 1 answers (tightest composition, exact included when the
    table's ``profile`` is given)."""
    lo = accounting.account([(eps0, delta0, n)], delta_budget, profiles=_parts(profile, n)).spend
    hi = accounting.account([(eps0, delta0, n + 1)], delta_budget, profiles=_parts(profile, n + 1)).spend
    assert lo.delta <= delta_budget and lo.epsilon < hi.epsilon
    return (lo.epsilon + hi.epsilon) / 2


def _parts(profile, n: int):
    return None if profile is None else [(profile, n)]


@pytest.mark.parametrize("teacher_delta,delta_budget", [(0.0, 0.0), (1e-5, 5e-3)], ids=["pure", "approx"])
def test_racing_clients_release_exactly_what_the_budget_pays(servers, teacher_delta, delta_budget):
    with servers[0].client() as c:
        table = make_table(c, K=5, m=2, teacher_delta=teacher_delta)
        params = Params(5, 2, 0.1, teacher_delta)
        profile = PrivacyProfile.from_dict(table["privacy_profile"]) if delta_budget > 0 else None
        eps_budget = budget_for_exactly(N, 0.2, params.delta, delta_budget, profile)
        ledger = make_ledger(c, eps_budget, delta_budget, name="race")
    body = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1, 0, 1, 0, 1]]}
    released = race(servers, lambda i: body, max_requests=N + 2)
    assert released == N
    for s in servers:
        with s.client() as c:
            state = c.get(f"/v1/ledgers/{ledger['id']}").json()
        assert state["answers"] == N
        assert state["epsilon_spent"] <= eps_budget and state["delta_target"] == delta_budget
    # the statement is the tightest bound of the N answers, or an earlier statement that is larger (monotone)
    expected = accounting.account([(0.2, params.delta, N)], delta_budget, profiles=_parts(profile, N)).spend
    assert expected.epsilon <= state["epsilon_spent"] <= eps_budget and state["composition"] == expected.method
    if delta_budget > 0:  # the exact composition pays for more than the optimal generic one
        assert state["composition"] == "exact"
        assert accounting.optimal_epsilon(0.2, params.delta, N, delta_budget) > eps_budget


def test_racing_batches_never_overspend(servers):
    with servers[1].client() as c:
        table = make_table(c, K=5, m=2, teacher_delta=0.0)
        ledger = make_ledger(c, (N + 0.5) * 0.2, 0.0, name="batches")  # exactly N answers
    released = race(servers, lambda i: {"table_id": table["id"], "ledger_id": ledger["id"],
                                        "votes": [[1, 1, 1, 0, 0]] * (1 + i % 7)}, max_requests=N)
    with servers[0].client() as c:
        state = c.get(f"/v1/ledgers/{ledger['id']}").json()
    assert released == state["answers"] <= N
    assert released >= N - 6  # a client stops only when its batch no longer fits
    assert state["epsilon_spent"] <= (N + 0.5) * 0.2


def test_concurrent_idempotent_requests_spend_once(servers):
    with servers[0].client() as c:
        table = make_table(c, K=5, m=2)
        ledger = make_ledger(c, 1000.0, 0.5, name="idem")
    body = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[0, 1, 1, 0, 1]] * 9,
            "idempotency_key": "job-42/batch-7"}

    def client(i: int) -> list[int]:
        with servers[i % 2].client() as cl:
            r = cl.post("/v1/aggregate", json=body)
            assert r.status_code == 200, r.text
            return r.json()["answers"]

    with cf.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(client, range(16)))
    assert all(a == answers[0] for a in answers)
    with servers[1].client() as c:
        assert c.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 9


# --- crash ---------------------------------------------------------------------------------------------------
def ledger_totals(url: str, ledger_id: str) -> tuple[int, int, int]:
    """(ledgers.answers, Σ spends.rows, Σ ledger_usage.answers) read straight from the database."""
    from sqlalchemy import create_engine, text

    from darrm_opt.ledger.db import normalize_url

    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            a = conn.execute(text("SELECT answers FROM ledgers WHERE id = :i"), {"i": ledger_id}).scalar_one()
            s = conn.execute(text("SELECT COALESCE(SUM(rows), 0) FROM spends WHERE ledger_id = :i"),
                             {"i": ledger_id}).scalar_one()
            u = conn.execute(text("SELECT COALESCE(SUM(answers), 0) FROM ledger_usage WHERE ledger_id = :i"),
                             {"i": ledger_id}).scalar_one()
        return int(a), int(s), int(u)
    finally:
        engine.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_kill_9_under_load_never_delivers_unpaid_answers(request, tmp_path_factory, backend):
    url, _ = database_url(request, tmp_path_factory, backend)
    workdir = tmp_path_factory.mktemp(f"crash-{backend}")
    server = Server(workdir, url, name=f"crash-{backend}").start()
    try:
        with server.client() as c:
            table = make_table(c, K=5, m=2)
            ledger = make_ledger(c, 1e9, 0.9, name="crash")
        body = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1, 0, 1, 1, 0]] * 3}
        delivered = [0]
        lock = threading.Lock()
        stop = threading.Event()
        loaded = threading.Event()  # 16 batches delivered: every client is in its request loop

        def client(_i: int) -> None:
            with httpx.Client(base_url=server.url, headers=AUTH,
                              timeout=10) as cl:
                end = time.monotonic() + 60
                while not stop.is_set() and time.monotonic() < end:
                    try:
                        r = cl.post("/v1/aggregate", json=body)
                    except httpx.HTTPError:
                        break  # the server is gone
                    if r.status_code == 200:
                        n = len(r.json()["answers"])
                        with lock:
                            delivered[0] += n
                            if delivered[0] >= 16 * 3:
                                loaded.set()

        with cf.ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(client, i) for i in range(16)]
            assert loaded.wait(60), server.log()
            server.kill9()  # mid-load: some debits are committed and not yet answered
            stop.set()
            for f in futures:
                f.result(timeout=30)
    finally:
        server.kill9()
    assert delivered[0] > 0
    paid, spent_rows, usage = ledger_totals(url, ledger["id"])
    assert paid == spent_rows == usage  # the debit is atomic
    assert delivered[0] <= paid

    restarted = Server(workdir, url, name=f"crash-{backend}-restart").start()
    try:
        with restarted.client() as c:
            state = c.get(f"/v1/ledgers/{ledger['id']}").json()
            assert state["answers"] == paid >= delivered[0]
            again = c.post("/v1/aggregate", json=body)
            assert again.status_code == 200
    finally:
        restarted.stop()
