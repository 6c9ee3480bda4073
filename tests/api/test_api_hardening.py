"""Issue 11, items 1–6: hostile bodies, size limits, idempotency keys reused for other votes, loose types,
secrets in the access log, air-gapped docs.

What a process shows goes through a real server on loopback (marked slow): the size limits enforced before a
body is read (Content-Length, chunked, 100-continue, clients that send everything first), uvicorn's access
log. What is the application's answer to a request (422s naming the field, nothing spent, replays, the docs'
assets) goes to the same application in process, with the same limits.

Functional outcomes only (status codes, the field named, budget spent, answers released); the timings
and memory of the abuse are shown by ``benchmarks/abuse_load.py``.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

import httpx
import pytest
from svc_helpers import AUTH, Server, in_process_client, make_ledger, make_table, without_key

BODY_LIMIT = 2 * 1024 * 1024
REQUEST_LIMIT = 16 * 1024
MAX_ROWS = 30_000


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """Its own server: access log on (info level), a 2 MiB aggregate limit, a 16 KiB limit elsewhere."""
    d = tmp_path_factory.mktemp("hardened")
    s = Server(d, f"sqlite:///{d / 'darrm.db'}", name="hardened", env={
        "DARRM_MAX_BODY_BYTES": str(BODY_LIMIT),
        "DARRM_MAX_REQUEST_BYTES": str(REQUEST_LIMIT),
        "DARRM_MAX_ROWS": str(MAX_ROWS),
        "DARRM_INLINE_MAX_MULTISETS": "1000",
    })
    s.argv = None
    s.start()
    yield s
    s.stop()


class InProcess:
    """The application in this process, with a Server's ``client()``."""

    def __init__(self, c: httpx.Client) -> None:
        self.c = c

    @contextlib.contextmanager
    def client(self) -> Iterator[httpx.Client]:
        yield self.c


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Iterator[InProcess]:
    """The same limits as ``server``, the application in process."""
    d = tmp_path_factory.mktemp("hardened-app")
    with in_process_client(f"sqlite:///{d / 'darrm.db'}", max_body_bytes=BODY_LIMIT,
                           max_request_bytes=REQUEST_LIMIT, max_rows=MAX_ROWS, inline_max_multisets=1000) as c:
        yield InProcess(c)


@pytest.fixture(scope="module")
def setup(server) -> dict:
    with server.client() as c:
        table = make_table(c, K=5, m=2)
    return {"table": table}


@pytest.fixture(scope="module")
def app_setup(app) -> dict:
    with app.client() as c:
        table = make_table(c, K=5, m=2)
    return {"table": table}


def _ledger(service: Server | InProcess, eps: float = 50.0, delta: float = 1e-3) -> dict:
    with service.client() as c:
        return make_ledger(c, eps, delta, name="hard-" + uuid.uuid4().hex[:6])


def _state(service: Server | InProcess, ledger_id: str) -> dict:
    with service.client() as c:
        return c.get(f"/v1/ledgers/{ledger_id}").json()


# --- item 1: invalid votes in bulk are refused at once, without a generic parse ---------------------------
@pytest.mark.parametrize("row, loc", [
    (b"[2,2,2,2,2]", ["body", "votes", 0]),
    (b'["1","0","1","0","1"]', ["body", "votes"]),  # counted rows over the limit... or the first bad row
    (b"[true,false,true,false,true]", ["body", "votes", 0]),
    (b"[0,\x001,0,1,0]", ["body", "votes", 0]),  # a control character is not whitespace: never dropped
    (b"[0,-0,1,0,1]", ["body", "votes", 0]),
])
def test_bulk_invalid_votes_are_a_422_naming_votes(app, app_setup, row, loc):
    ledger = _ledger(app)
    rows = 25_000
    body = (b'{"table_id":"' + app_setup["table"]["id"].encode() + b'","ledger_id":"' + ledger["id"].encode()
            + b'","votes":[' + b",".join([row] * rows) + b"]}")
    with app.client() as c:
        r = c.post("/v1/aggregate", content=body, headers={"content-type": "application/json"})
        assert c.get("/healthz").status_code == 200
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][:2] == ["body", "votes"]
    assert "answers" not in r.json()
    assert _state(app, ledger["id"])["answers"] == 0


def test_too_many_rows_are_refused_before_parsing(app, app_setup):
    ledger = _ledger(app)
    body = (b'{"table_id":"' + app_setup["table"]["id"].encode() + b'","ledger_id":"' + ledger["id"].encode()
            + b'","votes":[' + b",".join([b"[0,1,0,1,0]"] * (MAX_ROWS + 1)) + b"]}")
    with app.client() as c:
        r = c.post("/v1/aggregate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "votes"]
    assert str(MAX_ROWS) in r.json()["detail"][0]["msg"]
    assert _state(app, ledger["id"])["answers"] == 0


def test_a_large_valid_batch_is_answered_and_paid(app, app_setup):
    ledger = _ledger(app, eps=1e6, delta=0.9)
    rows = 20_000
    body = (b'{"table_id":"' + app_setup["table"]["id"].encode() + b'", "ledger_id": "' + ledger["id"].encode()
            + b'", "votes": [\n' + b",\n".join([b"[0, 1, 1, 0, 1]"] * rows) + b"\n]}")
    with app.client() as c:
        r = c.post("/v1/aggregate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert len(r.json()["answers"]) == rows and set(r.json()["answers"]) <= {0, 1}
    assert _state(app, ledger["id"])["answers"] == rows


# --- item 2: a body-size limit on every endpoint ----------------------------------------------------------
@pytest.mark.slow  # the limit before the body is read: a real server
@pytest.mark.parametrize("path, limit, setting", [
    ("/v1/ledgers", REQUEST_LIMIT, "DARRM_MAX_REQUEST_BYTES"),
    ("/v1/tables", REQUEST_LIMIT, "DARRM_MAX_REQUEST_BYTES"),
    ("/v1/aggregate", BODY_LIMIT, "DARRM_MAX_BODY_BYTES"),
])
def test_oversize_bodies_get_413_with_the_limit_named(server, path, limit, setting):
    doc = b'{"name":"x","epsilon_budget":1,"delta_budget":0}'
    body = b" " * limit + doc  # whitespace, then valid JSON: was 201
    with server.client() as c:
        r = c.post(path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 413, r.text
        assert setting in r.json()["detail"] and str(limit) in r.json()["detail"]

        def chunks():  # no Content-Length: chunked transfer, stopped while streaming
            for _ in range(limit // 4096 + 2):
                yield b" " * 4096
            yield doc

        r2 = c.post(path, content=chunks(), headers={"content-type": "application/json"})
        assert r2.status_code == 413, r2.text
        assert setting in r2.json()["detail"]


@pytest.mark.slow  # chunked bodies through a real server
def test_bodies_under_the_limit_still_work(server, setup):
    with server.client() as c:
        r = c.post("/v1/ledgers", content=b" " * 1000 + b'{"name":"ok","epsilon_budget":1,"delta_budget":0}',
                   headers={"content-type": "application/json"})
        assert r.status_code == 201, r.text
        ledger = _ledger(server, eps=1e6, delta=0.9)
        body = (b'{"table_id":"' + setup["table"]["id"].encode() + b'","ledger_id":"' + ledger["id"].encode()
                + b'","votes":[' + b",".join([b"[1,1,1,0,0]"] * 5000) + b"]}")

        def chunks():  # chunked transfer (no Content-Length), under the limit
            for i in range(0, len(body), 7000):
                yield body[i : i + 7000]

        r = c.post("/v1/aggregate", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    assert len(r.json()["answers"]) == 5000


def _send_all_then_read(server: Server, method: str, path: str, body: bytes) -> tuple[int, dict]:
    """As urllib and requests do: the whole body is sent before the response is read. A server that closes
    with body bytes unread makes the kernel reset the connection, and such a client sees that, not the 413."""
    req = urllib.request.Request(server.url + path, data=body, method=method,
                                 headers={**AUTH, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _limit_setting(path: str) -> str:
    """The setting that bounds a path's body: vote batches (/v1/aggregate, /v1/jobs/{id}/votes) have their own."""
    batch = path == "/v1/aggregate" or (path.startswith("/v1/jobs/") and path.endswith("/votes"))
    return "DARRM_MAX_BODY_BYTES" if batch else "DARRM_MAX_REQUEST_BYTES"


def _every_route(server: Server) -> list[tuple[str, str]]:
    """(method, path) of every operation the service documents, path parameters filled in."""
    with server.client() as c:
        spec = c.get("/openapi.json").json()
    return [(m.upper(), re.sub(r"\{[^}]+\}", "no-such-id", path)) for path, ops in spec["paths"].items() for m in ops]


def test_every_v1_operation_documents_the_413_of_its_body_limit():
    """A client generated from /openapi.json (or a schema fuzzer) meets the 413 on every /v1 operation: it is
    documented there, naming the setting the body-limit middleware applies to that path."""
    from darrm_opt.api.main import create_app
    from darrm_opt.api.settings import Settings

    spec = create_app(Settings(database_url="sqlite:///unused.db", api_keys=[])).openapi()
    seen = set()
    for path, ops in spec["paths"].items():
        if not path.startswith("/v1/"):
            continue
        for method, op in ops.items():
            doc = op["responses"].get("413")
            assert doc is not None, (method, path)
            assert doc["description"] == f"body over {_limit_setting(path)}", (method, path)
            seen.add((method, path))
    assert {("post", "/v1/plans"), ("post", "/v1/aggregate"), ("post", "/v1/ledgers")} <= seen


@pytest.mark.slow  # 80 MB sent to a real server
def test_a_huge_body_gets_its_413_not_a_reset_on_every_endpoint(server):
    """80 MB to POST /v1/ledgers (5000 times its limit) and 8 MB to every other documented operation and to
    an unknown path: each client that sends all before reading receives the 413 naming the limit."""
    routes = _every_route(server)
    assert ("POST", "/v1/ledgers") in routes and ("POST", "/v1/aggregate") in routes and len(routes) >= 12
    huge = b" " * 80_000_000
    status, doc = _send_all_then_read(server, "POST", "/v1/ledgers", huge)
    assert status == 413 and "DARRM_MAX_REQUEST_BYTES" in doc["detail"] and str(REQUEST_LIMIT) in doc["detail"]
    big = memoryview(huge)[:8_000_000].tobytes()
    for method, path in [*routes, ("POST", "/v1/no-such-endpoint")]:
        status, doc = _send_all_then_read(server, method, path, big)
        assert status == 413 and _limit_setting(path) in doc["detail"], (method, path, status, doc)
    with server.client() as c:
        assert c.get("/healthz").status_code == 200


@pytest.mark.slow  # a raw socket to a real server
def test_a_client_that_expects_100_continue_gets_the_413_without_sending_the_body(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /v1/ledgers HTTP/1.1\r\nHost: test\r\nAuthorization: " + AUTH["Authorization"].encode()
                     + b"\r\nContent-Type: application/json\r\nContent-Length: 80000000\r\n"
                     b"Expect: 100-continue\r\n\r\n")
        reply = b""
        while b"}" not in reply:
            chunk = sock.recv(65536)
            if not chunk:
                break
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413") and b"100 Continue" not in head
    assert "DARRM_MAX_REQUEST_BYTES" in json.loads(body)["detail"]


# --- item 3: an idempotency key reused for another request ------------------------------------------------
def test_key_reused_with_other_votes_is_422_spends_nothing_releases_nothing(app, app_setup):
    ledger = _ledger(app)
    body = {"table_id": app_setup["table"]["id"], "ledger_id": ledger["id"], "votes": [[1, 0, 1, 0, 1]] * 4,
            "idempotency_key": "k-1"}
    with app.client() as c:
        first = c.post("/v1/aggregate", json=body)
        assert first.status_code == 200
        spent = _state(app, ledger["id"])
        other = c.post("/v1/aggregate", json={**body, "votes": [[0, 0, 0, 1, 1]] * 4})  # same shape
        assert other.status_code == 422, other.text
        assert other.json()["detail"][0]["loc"] == ["body", "idempotency_key"]
        assert "answers" not in other.text
        big = {**body, "votes": [[0, 1, 0, 1, 0]] * 1000}  # a large body takes the numpy path
        assert c.post("/v1/aggregate", json=big).status_code == 422
        replay = c.post("/v1/aggregate", json=body)
        assert replay.status_code == 200 and replay.json()["replayed"] is True
        assert replay.json()["answers"] == first.json()["answers"]
    after = _state(app, ledger["id"])
    assert after["answers"] == spent["answers"] == 4
    assert after["epsilon_spent"] == spent["epsilon_spent"]


def test_key_reused_with_another_table_is_422(app, app_setup):
    ledger = _ledger(app)
    with app.client() as c:
        t3 = make_table(c, K=3, m=2)
        ok = c.post("/v1/aggregate", json={"table_id": t3["id"], "ledger_id": ledger["id"], "votes": [[1, 0, 1]],
                                           "idempotency_key": "same"})
        assert ok.status_code == 200
        r = c.post("/v1/aggregate", json={"table_id": app_setup["table"]["id"], "ledger_id": ledger["id"],
                                          "votes": [[1, 0, 1, 0, 1]], "idempotency_key": "same"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "idempotency_key"]
    assert _state(app, ledger["id"])["answers"] == 1


# --- item 4: strict types ----------------------------------------------------------------------------------
@pytest.mark.parametrize("path, doc, field", [
    ("/v1/ledgers", {"name": "a", "epsilon_budget": "1", "delta_budget": 0}, "epsilon_budget"),
    ("/v1/ledgers", {"name": "a", "epsilon_budget": True, "delta_budget": 0}, "epsilon_budget"),
    ("/v1/ledgers", {"name": "a", "epsilon_budget": 1, "delta_budget": False}, "delta_budget"),
    ("/v1/ledgers", {"name": 5, "epsilon_budget": 1, "delta_budget": 0}, "name"),
    ("/v1/tables", {"K": True, "m": 1}, "K"),
    ("/v1/tables", {"K": 3, "m": "2"}, "m"),
    ("/v1/tables", {"K": 3.0, "m": 2}, "K"),
    ("/v1/tables", {"K": 3, "m": 2, "epsilon": "0.1"}, "epsilon"),
    ("/v1/tables", {"K": 3, "m": 2, "teacher_delta": False}, "teacher_delta"),
])
def test_loose_types_are_refused(app, path, doc, field):
    with app.client() as c:
        r = c.post(path, json=doc)
    assert r.status_code == 422, r.text
    assert field in r.json()["detail"][0]["loc"]


def test_aggregate_ids_must_be_strings(app, app_setup):
    with app.client() as c:
        r = c.post("/v1/aggregate", json={"table_id": app_setup["table"]["id"], "ledger_id": 7, "votes": [[1] * 5]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "ledger_id"]


# --- item 5: query strings never reach the access log -------------------------------------------------------
@pytest.mark.slow  # a uvicorn process of its own
def test_access_log_never_holds_v1_query_strings(tmp_path):
    secret = "sk-" + uuid.uuid4().hex
    s = Server(tmp_path, f"sqlite:///{tmp_path / 'log.db'}", name="logged")
    s.argv = ["python", "-m", "uvicorn", "darrm_opt.api.main:create_app", "--factory", "--host", "127.0.0.1",
              "--port", str(s.port), "--log-level", "info"]
    import sys

    s.argv[0] = sys.executable
    s.start()
    try:
        with httpx.Client(base_url=s.url, timeout=30) as c:
            assert c.get(f"/v1/ledgers/abc?api_key={secret}").status_code == 401
            assert c.get(f"/v1/tables?api_key={secret}&K=3", headers=AUTH).status_code == 200
            assert c.get(f"/v1/ledgers/abc?token={secret}", headers=AUTH).status_code == 404
            assert c.get(f"/healthz?probe={secret[:6]}").status_code == 200
    finally:
        s.stop()
    log = s.log_path.read_text(errors="replace")
    assert secret not in log
    assert "/v1/tables?[redacted]" in log and "/v1/ledgers/abc?[redacted]" in log  # the access log is on


# --- item 6: the docs work air-gapped ------------------------------------------------------------------------
@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_load_every_asset_from_this_server(app, page):
    with app.client() as c:  # no key: the docs and their assets are open
        r = without_key(c, "GET", page)
        assert r.status_code == 200 and "text/html" in r.headers["content-type"]
        assert "//" not in re.sub(r"<!--.*?-->", "", r.text).replace("'/openapi.json'", "")  # no remote URL
        assets = re.findall(r'(?:src|href)="([^"]+)"', r.text) + re.findall(r"url: '([^']+)'", r.text)
        assert any(a.endswith(".js") for a in assets), assets
        for url in assets:
            assert url.startswith("/"), url
            got = without_key(c, "GET", url)
            assert got.status_code == 200 and len(got.content) > 100, url


@pytest.mark.postgres
def test_key_reuse_on_postgres(pg_database):
    """The same rules on PostgreSQL (the digest column comes from migration 7c1e5a9d2b40), with the
    application in process: the rules are HTTP semantics, not the server's."""
    with in_process_client(pg_database) as c:
        table = make_table(c, K=3, m=2)
        ledger = make_ledger(c, 50.0, 1e-3)
        body = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1, 0, 1]] * 3,
                "idempotency_key": "pg-key"}
        assert c.post("/v1/aggregate", json=body).status_code == 200
        r = c.post("/v1/aggregate", json={**body, "votes": [[0, 0, 1]] * 3})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "idempotency_key"]
        assert c.post("/v1/aggregate", json=body).json()["replayed"] is True
        assert c.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 3


# --- a debit not decided within DARRM_DEBIT_TIMEOUT_S -------------------------------------------------------
def test_a_debit_not_decided_in_time_is_503_and_a_retry_returns_its_answers(tmp_path):
    """The request gives up (503, Retry-After, nothing released); the writer still decides the debit, so the
    ledger may have paid it, and a retry with the same idempotency key (here after a restart with the default
    timeout) returns those answers instead of paying twice."""
    import time

    url = f"sqlite:///{tmp_path / 'slow.db'}"
    with in_process_client(url, debit_timeout_s=1e-6) as c:
        table = make_table(c, K=5, m=2, teacher_delta=0.0)
        ledger = make_ledger(c, epsilon_budget=100.0, delta_budget=1e-6)
        body = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1, 0, 1, 0, 1]] * 3,
                "idempotency_key": "slow-1"}
        r = c.post("/v1/aggregate", json=body)
        assert r.status_code == 503, r.text
        assert r.headers["retry-after"] == "1" and "DARRM_DEBIT_TIMEOUT_S" in r.json()["detail"]
        assert "answers" not in r.json()
        deadline = time.monotonic() + 30
        while c.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert c.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 3  # decided after the request gave up
    with in_process_client(url) as c:
        retry = c.post("/v1/aggregate", json=body)
        assert retry.status_code == 200 and retry.json()["replayed"] is True and len(retry.json()["answers"]) == 3
        assert c.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 3  # paid once
