"""Tenants: a key's tenant alone reads and spends its ledgers, their spend history and idempotency records.

One scenario, run against the application in process (SQLite), a real server on loopback (SQLite) and a
real server on a fresh PostgreSQL database: tenants alice (an environment key ``alice:KEY``), bob (a key in
the database, made by ``darrm_opt.ledger.keys.add_key``), a plain environment key (tenant ``default``) and
an operator (``DARRM_ADMIN_KEYS``). Every attempt of one tenant on another's ledger must answer exactly as
for an id that does not exist (404), and nothing of the other tenant may appear in any answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from svc_helpers import ROOT, Server, make_table

from darrm_opt.ledger.core import Debit, LedgerRow, LedgerState, decide
from darrm_opt.ledger.db import Database, migrate
from darrm_opt.ledger.keys import DEFAULT_TENANT, Principal, add_key, digest, env_principals, list_keys, revoke_key
from darrm_opt.privacy import accounting

ALICE = "alice-" + uuid.uuid4().hex
PLAIN = "plain-" + uuid.uuid4().hex
OPS = "ops-" + uuid.uuid4().hex
VOTES = [[1, 1, 1, 0, 0], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1]]
UNKNOWN = "0" * 32

#: every /v1 path of the service, and how the scenario covers it (a new path fails this test until it is
#: classified and, if it touches a ledger, checked below)
PATHS = {
    "/v1/tables": "shared", "/v1/tables/{table_id}": "shared", "/v1/tables/{table_id}/baselines": "shared",
    "/v1/jobs/{job_id}": "ledger-read",  # a labelling job is its tenant's; a background solve is shared
    "/v1/jobs": "ledger-create", "/v1/jobs/{job_id}/votes": "ledger-spend",
    "/v1/plans": "ledger-create", "/v1/plans/{plan_id}": "shared",
    "/v1/ledgers": "ledger-list", "/v1/ledgers/{ledger_id}": "ledger-read",
    "/v1/ledgers/{ledger_id}/spends": "ledger-read", "/v1/aggregate": "ledger-spend",
    "/v1/gaussian-tables": "shared",
    "/v1/data-dependent-ledgers": "ledger-create", "/v1/data-dependent-ledgers/{ledger_id}": "ledger-read",
    "/v1/data-dependent-ledgers/{ledger_id}/record": "ledger-spend",
    "/v1/data-dependent-ledgers/{ledger_id}/publish": "ledger-spend",
    "/v1/data-dependent-ledgers/{ledger_id}/answer": "ledger-spend",
}


def env() -> dict[str, str]:
    return {"DARRM_API_KEYS": f"alice:{ALICE},{PLAIN}", "DARRM_ADMIN_KEYS": f"ops:{OPS}",
            "DARRM_KEY_REFRESH_S": "0.2", "DARRM_INLINE_MAX_MULTISETS": "1000"}


def bob_key(database_url: str) -> str:
    db = Database(database_url)
    try:
        migrate(db)
        return add_key(db, "bob", name="test")[1]
    finally:
        db.dispose()


def scenario(clients: dict[str, httpx.Client]) -> dict[str, int]:
    """Run the cross-tenant matrix; counts of cross-tenant attempts and of answers that leaked anything."""
    alice, bob, plain, ops = clients["alice"], clients["bob"], clients["plain"], clients["ops"]
    table = make_table(alice, K=5, m=2)
    la = alice.post("/v1/ledgers", json={"name": "alice-job", "epsilon_budget": 3.0, "delta_budget": 1e-3})
    assert la.status_code == 201 and la.json()["tenant"] == "alice", la.text
    la = la.json()
    lb = bob.post("/v1/ledgers", json={"name": "bob-job", "epsilon_budget": 2.0, "delta_budget": 1e-3}).json()
    lp = plain.post("/v1/ledgers", json={"name": "plain-job", "epsilon_budget": 2.0, "delta_budget": 1e-3}).json()
    assert (lb["tenant"], lp["tenant"]) == ("bob", DEFAULT_TENANT)
    paid = alice.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": la["id"], "votes": VOTES,
                                             "idempotency_key": "job-1"})
    assert paid.status_code == 200, paid.text
    before = alice.get(f"/v1/ledgers/{la['id']}").json()
    assert before["answers"] == 3

    attempts = leaks = 0

    def foreign(owner: dict, c: httpx.Client, method: str, path: str, **kw) -> None:
        """``c`` (another tenant) on ``owner``'s ledger: exactly the answer for an unknown id."""
        nonlocal attempts, leaks
        attempts += 1
        got = c.request(method, path.replace("{id}", owner["id"]), **_swap(kw, owner["id"]))
        ref = c.request(method, path.replace("{id}", UNKNOWN), **_swap(kw, UNKNOWN))
        same = (got.status_code == ref.status_code == 404
                and got.text.replace(owner["id"], UNKNOWN) == ref.text)
        if not same or owner["name"] in got.text:
            leaks += 1

    spend = {"json": {"table_id": table["id"], "ledger_id": "{id}", "votes": VOTES, "idempotency_key": "job-1"}}
    fresh = {"json": {"table_id": table["id"], "ledger_id": "{id}", "votes": VOTES[:1]}}
    for owner, others in ((la, (bob, plain)), (lb, (alice, plain)), (lp, (alice, bob))):
        for c in others:
            foreign(owner, c, "GET", "/v1/ledgers/{id}")
            foreign(owner, c, "GET", "/v1/ledgers/{id}/spends")
            foreign(owner, c, "POST", "/v1/aggregate", **spend)  # a replay of alice's key: never her answers
            foreign(owner, c, "POST", "/v1/aggregate", **fresh)
    # data-dependent ledgers: the same scoping (read, record and publish are another tenant's unknown id)
    policy = {"aggregator": "gnmax", "K": 12, "classes": 3, "sigma": 2.0, "order": 2.0, "beta": 0.1, "sigma_ss": 3.0,
              "delta": 1e-5, "quota": 3}
    da = alice.post("/v1/data-dependent-ledgers", json={"name": "alice-dd", "policy": policy})
    assert da.status_code == 201 and da.json()["tenant"] == "alice", da.text
    da = da.json()
    for c in (bob, plain):
        foreign(da, c, "GET", "/v1/data-dependent-ledgers/{id}")
        foreign(da, c, "POST", "/v1/data-dependent-ledgers/{id}/record", json={"votes": [[12, 0, 0]]})
        foreign(da, c, "POST", "/v1/data-dependent-ledgers/{id}/publish")
        foreign(da, c, "POST", "/v1/data-dependent-ledgers/{id}/answer", json={"votes": [[12, 0, 0]]})
    foreign(da, ops, "POST", "/v1/data-dependent-ledgers/{id}/record", json={"votes": [[12, 0, 0]]})
    assert alice.get(f"/v1/data-dependent-ledgers/{da['id']}").json()["queries"] == 0  # nobody else recorded
    assert ops.get(f"/v1/data-dependent-ledgers/{da['id']}").status_code == 200  # an admin reads it
    # an admin reads every tenant's ledgers but spends only from its own tenant's
    foreign(la, ops, "POST", "/v1/aggregate", **spend)
    foreign(lb, ops, "POST", "/v1/aggregate", **fresh)

    for c, mine in ((alice, la), (bob, lb), (plain, lp)):
        listed = c.get("/v1/ledgers").json()
        attempts += 1
        if [x["id"] for x in listed["items"]] != [mine["id"]] or listed["total"] != 1:
            leaks += 1
        other = "bob" if mine is not lb else "alice"
        attempts += 1
        if c.get("/v1/ledgers", params={"tenant": other}).json()["total"] != 0:
            leaks += 1

    assert alice.get(f"/v1/ledgers/{la['id']}").json() == before  # nothing was spent by anyone else
    assert alice.get(f"/v1/ledgers/{la['id']}/spends").json()["items"][0]["rows"] == 3
    # the owner's replay still works
    again = alice.post("/v1/aggregate", json=spend["json"] | {"ledger_id": la["id"]})
    assert again.status_code == 200 and again.json()["replayed"] and again.json()["answers"] == paid.json()["answers"]

    admin_view = ops.get(f"/v1/ledgers/{la['id']}")
    assert admin_view.status_code == 200 and admin_view.json() == before
    assert ops.get(f"/v1/ledgers/{lb['id']}/spends").status_code == 200
    everyone = ops.get("/v1/ledgers").json()
    assert {x["id"] for x in everyone["items"]} == {la["id"], lb["id"], lp["id"]} and everyone["total"] == 3
    only_bob = ops.get("/v1/ledgers", params={"tenant": "bob"}).json()
    assert [x["id"] for x in only_bob["items"]] == [lb["id"]]
    return {"attempts": attempts, "leaks": leaks}


def _swap(kw: dict, ledger_id: str) -> dict:
    if "json" not in kw:
        return kw
    return {**kw, "json": {k: (ledger_id if v == "{id}" else v) for k, v in kw["json"].items()}}


def check_paths(spec: dict) -> None:
    assert {p for p in spec["paths"] if p.startswith("/v1/")} == set(PATHS)


# --- the scenario on three deployments ----------------------------------------------------------------------


@contextlib.contextmanager
def in_process(database_url: str) -> Iterator[dict[str, httpx.Client]]:
    from fastapi.testclient import TestClient

    from darrm_opt.api.main import create_app
    from darrm_opt.api.settings import Settings

    class Given(Settings):
        @classmethod
        def settings_customise_sources(cls, settings_cls, init_settings, **other_sources):
            return (init_settings,)

    bob = bob_key(database_url)
    app = create_app(Given(database_url=database_url, api_keys=[f"alice:{ALICE}", PLAIN], admin_keys=[f"ops:{OPS}"],
                           inline_max_multisets=1000))
    keys = {"alice": ALICE, "bob": bob, "plain": PLAIN, "ops": OPS}
    with TestClient(app) as life:
        clients = {name: TestClient(app, headers={"Authorization": f"Bearer {k}"}) for name, k in keys.items()}
        check_paths(life.get("/openapi.json").json())
        yield clients


@contextlib.contextmanager
def served(tmp_path, database_url: str) -> Iterator[dict[str, httpx.Client]]:
    bob = bob_key(database_url)
    server = Server(tmp_path, database_url, workers=2, env=env(), name="tenants").start()
    keys = {"alice": ALICE, "bob": bob, "plain": PLAIN, "ops": OPS}
    clients = {name: httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {k}"}, timeout=60)
               for name, k in keys.items()}
    try:
        yield clients
    finally:
        for c in clients.values():
            c.close()
        server.stop()


def test_no_cross_tenant_read_in_process(tmp_path):
    with in_process(f"sqlite:///{tmp_path / 'darrm.db'}") as clients:
        counts = scenario(clients)
    assert counts == {"attempts": 41, "leaks": 0}


@pytest.mark.slow
def test_no_cross_tenant_read_on_a_real_server_sqlite(tmp_path):
    with served(tmp_path, f"sqlite:///{tmp_path / 'darrm.db'}") as clients:
        counts = scenario(clients)
    assert counts == {"attempts": 41, "leaks": 0}


@pytest.mark.slow
@pytest.mark.postgres
def test_no_cross_tenant_read_on_a_real_server_postgres(tmp_path, empty_pg_database):
    with served(tmp_path, empty_pg_database) as clients:
        counts = scenario(clients)
    assert counts == {"attempts": 41, "leaks": 0}


# --- keys: added and revoked without a restart; the CLI --------------------------------------------------------


def cli(*args: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    return subprocess.run([sys.executable, "-m", "darrm_opt", "keys", *args], capture_output=True, text=True,
                          env=environ, cwd=ROOT, timeout=120)


def _status_within(c: httpx.Client, key: str, want: int, seconds: float = 10.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if c.get("/v1/ledgers", headers={"Authorization": f"Bearer {key}"}).status_code == want:
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"key did not answer {want} within {seconds} s")


@pytest.mark.slow
def test_keys_added_and_revoked_with_the_cli_on_a_running_server(tmp_path):
    url = f"sqlite:///{tmp_path / 'darrm.db'}"
    server = Server(tmp_path, url, workers=2, env=env(), name="keys").start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as c:
            made = cli("add", "--tenant", "carol", "--name", "laptop", "--database-url", url, "--format", "json")
            assert made.returncode == 0, made.stderr
            doc = json.loads(made.stdout)
            assert doc["tenant"] == "carol" and doc["scope"] == "tenant" and doc["key"].startswith("darrm_")
            assert len(doc["key"]) == len("darrm_") + 43  # 256 random bits
            _status_within(c, doc["key"], 200)
            ledger = c.post("/v1/ledgers", headers={"Authorization": f"Bearer {doc['key']}"},
                            json={"name": "carol", "epsilon_budget": 1.0, "delta_budget": 0.0}).json()
            assert ledger["tenant"] == "carol"

            listed = cli("list", "--database-url", url, "--format", "json")
            assert listed.returncode == 0, listed.stderr
            rows = json.loads(listed.stdout)
            assert [(r["id"], r["tenant"], r["name"], r["revoked_at"]) for r in rows] == [
                (doc["id"], "carol", "laptop", None)]
            assert doc["key"] not in listed.stdout and digest(doc["key"]) not in listed.stdout

            gone = cli("revoke", doc["id"], "--database-url", url)
            assert gone.returncode == 0, gone.stderr
            _status_within(c, doc["key"], 401)
            assert cli("revoke", doc["id"], "--database-url", url).returncode == 1  # revoked already
            assert json.loads(cli("list", "--database-url", url, "--format", "json").stdout) == []
            # an environment key of the same server kept working throughout
            assert c.get("/v1/ledgers", headers={"Authorization": f"Bearer {ALICE}"}).status_code == 200
    finally:
        server.stop()


def test_keys_are_stored_only_as_digests(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'k.db'}")
    try:
        migrate(db)
        key_id, key = add_key(db, "acme", scope="admin", name="ops")
        raw = b"".join(f.read_bytes() for f in tmp_path.glob("k.db*"))  # the file and its WAL
        assert key.encode() not in raw and digest(key).encode() in raw
        from darrm_opt.ledger.keys import load_keys

        assert load_keys(db) == {digest(key): Principal("acme", True, key_id)}
        assert [k["scope"] for k in list_keys(db)] == ["admin"]
        assert revoke_key(db, key_id) and load_keys(db) == {} and not revoke_key(db, key_id)
        assert [k["id"] for k in list_keys(db, revoked=True)] == [key_id]
        from darrm_opt.errors import InvalidParameter

        for bad in ("", "a b", "x" * 65, "-lead"):
            with pytest.raises(InvalidParameter):
                add_key(db, bad)
    finally:
        db.dispose()


def test_environment_keys_map_to_tenants():
    got = env_principals(["plain", "acme:secret", "not a tenant:rest", "trailing:"], admin=False)
    assert got[digest("plain")] == Principal(DEFAULT_TENANT, False, "env:" + digest("plain")[:8])
    assert got[digest("secret")].tenant == "acme"
    assert got[digest("not a tenant:rest")].tenant == DEFAULT_TENANT  # not a tenant name: all of it is the key
    assert got[digest("trailing:")].tenant == DEFAULT_TENANT
    assert env_principals(["ops:k"], admin=True)[digest("k")] == Principal("ops", True, "env:" + digest("k")[:8])


# --- the decision: the tenant is checked in the debit's own transaction ---------------------------------------


def test_a_debit_of_another_tenant_is_no_ledger_and_never_replays():
    spend = accounting.Spend(0.5, 1e-3, accounting.BASIC)

    def state() -> LedgerState:
        return LedgerState(row=LedgerRow("L", 3.0, 1e-3, None, "alice"), usage={"T": [0.1, 0.0, 5]}, answers=5,
                           spend=spend)

    class Stored:
        ledger_id, table_id, rows, idempotency_key = "L", "T", 1, "k"
        answers, request_digest, epsilon_spent, composition = "1", "d", 0.5, accounting.BASIC

    def debit(tenant: str | None) -> Debit:
        return Debit("L", "T", 0.1, 0.0, 1, "shared", idempotency_key="k", request_digest="d", tenant=tenant)

    for tenant, status in (("bob", "no_ledger"), ("alice", "replayed"), (None, "replayed")):
        s = state()
        results, records = decide([debit(tenant)], {"L": s}, {("L", "k"): Stored()})
        assert [r.status for r in results] == [status] and records == [] and s.answers == 5
    fresh = Debit("L", "T", 0.1, 0.0, 1, "shared", tenant="bob")
    results, records = decide([fresh], {"L": state()}, {})
    assert results[0].status == "no_ledger" and results[0].detail == "ledger_id 'L' not found" and not records
