"""Issue 38: the service audit's defects, each on a real server on loopback (uvicorn in a subprocess).

- item 5: bodies that raised inside the application (a vectors array nested 100 000 deep, noise scales of
  5e-324 in a data-dependent policy) are 422s naming the field;
- item 6: the text ``vectors`` inside a value of a votes body (an idempotency key) does not reroute it;
- item 8: ``X-Request-ID`` echoed (or issued), one JSON log line per request, ``/metrics`` scraped,
  idempotency keys on vector means;
- item 4: no child process outlives its server (SIGTERM, and SIGKILL of a worker);
- item 1: a debit answered 503 names a key that returns its answers (composition leases:
  test_shared_compositions.py);
- item 2: a 16 MiB vectors body adds < 64 MB and gives it back;
- item 7: deadlines for headers (the connection is closed) and bodies (408).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from svc_helpers import Server, make_ledger, make_table

pytestmark = pytest.mark.slow

ADMIN_KEY = "ops-admin-" + uuid.uuid4().hex[:12]
GAUSSIAN = {"queries": 80, "epsilon": 8.0, "delta": 1e-3, "K": 3, "dim": 2, "radius": 1.0}
POLICY = {"aggregator": "confident-gnmax", "K": 100, "classes": 3, "sigma": 40.0, "order": 10.0, "beta": 0.01,
          "sigma_ss": 1.0, "delta": 1e-5, "quota": 10, "threshold": 50.0, "sigma1": 40.0}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    d = tmp_path_factory.mktemp("service-ops")
    s = Server(d, f"sqlite:///{d / 'darrm.db'}", name="ops", env={"DARRM_ADMIN_KEYS": ADMIN_KEY}).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def c(server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


# item 5 ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field", ["sigma", "sigma1", "sigma_ss", "beta"])
def test_a_data_dependent_policy_with_a_subnormal_scale_is_a_422_naming_it(c, field):
    r = c.post("/v1/data-dependent-ledgers", json={"name": "tiny", "policy": {**POLICY, field: 5e-324}})
    if field == "beta":  # β → 0 is a valid smoothness (order < 1/(2β) holds): the ledger opens
        assert r.status_code == 201, r.text
        assert r.json()["policy"]["beta"] == 5e-324
        return
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", field]
    assert "noise scale in [1e-100, 1e+100]" in r.json()["detail"][0]["msg"]


def test_a_vectors_body_nested_100000_deep_is_a_422_naming_vectors(c):
    body = b'{"table_id":"t","ledger_id":"l","vectors":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    r = c.post("/v1/aggregate", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "vectors"]


# item 6 ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["vectors", '"vectors": [[[0.5]]]', 'a"vectors"'])
def test_the_word_vectors_inside_a_votes_body_does_not_reroute_it(c, key):
    table = make_table(c, K=5, m=2)
    ledger = make_ledger(c, 10.0, 1e-3, name="substring")
    body = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1, 1, 1, 0, 0]], "idempotency_key": key}
    r = c.post("/v1/aggregate", json=body)
    assert r.status_code == 200, r.text
    first = r.json()
    assert len(first["answers"]) == 1 and first["replayed"] is False
    again = c.post("/v1/aggregate", json=body)
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["answers"] == first["answers"]


# item 8 ------------------------------------------------------------------------------------------------------

def _scrape(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics`` (fetched with the admin key) by (name, sorted labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    r = httpx.get(server.url + "/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain"), r.text[:200]
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def _access_lines(server: Server) -> list[dict]:
    lines = []
    for line in server.log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def test_a_request_id_is_echoed_or_issued_and_logged_as_one_json_line(server, c):
    rid = "trace-" + uuid.uuid4().hex[:8]
    r = c.post("/v1/ledgers", json={"name": "logged", "epsilon_budget": 1.0, "delta_budget": 1e-6},
               headers={"X-Request-ID": rid})
    assert r.status_code == 201 and r.headers["x-request-id"] == rid
    issued = c.get("/v1/ledgers/" + r.json()["id"], headers={"X-Request-ID": "not a valid id"})
    assert issued.status_code == 200 and re.fullmatch(r"[0-9a-f]{32}", issued.headers["x-request-id"])
    refused = httpx.get(server.url + "/v1/ledgers", headers={"X-Request-ID": rid + "-nokey"})
    assert refused.status_code == 401 and refused.headers["x-request-id"] == rid + "-nokey"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        by_id = {line["request_id"]: line for line in _access_lines(server)}
        if {rid, rid + "-nokey", issued.headers["x-request-id"]} <= set(by_id):
            break
        time.sleep(0.1)
    line = by_id[rid]
    assert (line["method"], line["route"], line["status"], line["tenant"]) == ("POST", "/v1/ledgers", 201, "default")
    assert 0 < line["latency_ms"] < 60_000 and line["pid"] > 0
    got = by_id[issued.headers["x-request-id"]]
    assert (got["route"], got["status"]) == ("/v1/ledgers/{ledger_id}", 200)  # the template, never the id
    nokey = by_id[rid + "-nokey"]
    assert (nokey["status"], nokey["tenant"]) == (401, None)


def test_metrics_count_requests_debits_and_the_tenants_answers(server, c):
    table = make_table(c, K=5, m=2)
    ledger = make_ledger(c, 10.0, 1e-3, name="metered")
    before = _scrape(server)
    paid = c.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"],
                                         "votes": [[1, 1, 1, 0, 0]] * 7})
    assert paid.status_code == 200, paid.text
    poor = make_ledger(c, 1e-9, 1e-12, name="poor")
    over = c.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": poor["id"], "votes": [[1] * 5]})
    assert over.status_code == 409, over.text
    after = _scrape(server)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("darrm_debits_total", tenant="default", outcome="paid") == 1
    assert delta("darrm_debits_total", tenant="default", outcome="over_budget") == 1
    assert delta("darrm_answers_paid_total", tenant="default") == 7
    assert delta("darrm_requests_total", method="POST", route="/v1/aggregate", status="200") == 1
    assert delta("darrm_requests_total", method="POST", route="/v1/aggregate", status="409") == 1
    assert delta("darrm_request_seconds_count", route="/v1/aggregate") == 2
    assert after[("darrm_solve_queue", ())] == 0
    assert after[("darrm_body_bytes_held", ())] == 0
    assert ("darrm_compositions_total", ()) in after


# item 4 ------------------------------------------------------------------------------------------------------

def _gone(pids: list[int], within: float) -> list[int]:
    """The processes of ``pids`` still running (zombies are gone) after waiting up to ``within`` seconds."""
    import psutil

    deadline = time.monotonic() + within
    while True:
        alive = []
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


BUSY_PARENT = """
import sys, time
from darrm_opt.ledger.children import child_pool, pool_pids
pool = child_pool(2)
futures = [pool.submit(time.sleep, 120) for _ in range(2)]
while len(pool_pids(pool)) < 2:
    time.sleep(0.05)
time.sleep(1.0)  # both have started their task
print(*pool_pids(pool), flush=True)
time.sleep(120)
"""


def test_busy_composition_children_die_within_seconds_of_a_sigkill_of_their_parent(tmp_path):
    import psutil

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    parent = subprocess.Popen([sys.executable, "-c", BUSY_PARENT], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = parent.stdout.readline()  # type: ignore[union-attr]
        kids = [int(p) for p in line.split()]
        assert len(kids) == 2 and all(psutil.Process(k).ppid() == parent.pid for k in kids)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert _gone(kids, 5.0) == []
    finally:
        parent.kill()
        parent.wait(10)


def test_no_process_outlives_its_server_after_a_worker_is_killed_and_after_sigterm(tmp_path):
    import psutil

    s = Server(tmp_path, f"sqlite:///{tmp_path / 'darrm.db'}", workers=2, name="children").start()
    try:
        with s.client() as c:
            table = make_table(c, K=5, m=2)
            ledger = make_ledger(c, 3.0, 1e-3, name="children")
            deadline = time.monotonic() + 120
            grandchildren: dict[int, list[int]] = {}
            while not grandchildren and time.monotonic() < deadline:
                r = c.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"],
                                                  "votes": [[1, 1, 1, 0, 0]] * 5})
                assert r.status_code == 200, r.text
                for worker in psutil.Process(s.proc.pid).children():
                    kids = [k.pid for k in worker.children(recursive=True)]
                    if kids:
                        grandchildren[worker.pid] = kids
            assert grandchildren, "no composition child was started"
        worker, kids = next(iter(grandchildren.items()))
        os.kill(worker, signal.SIGKILL)
        assert _gone(kids, 5.0) == []
        assert httpx.get(s.url + "/healthz", timeout=10).status_code == 200  # the other worker serves on
    finally:
        tree = [p.pid for p in psutil.Process(s.proc.pid).children(recursive=True)] if s.proc.poll() is None else []
        os.killpg(s.proc.pid, signal.SIGTERM)
        s.proc.wait(30)
    assert _gone(tree, 10.0) == []


def test_vector_means_take_an_idempotency_key_and_replay_the_same_means(c):
    r = c.post("/v1/gaussian-tables", json=GAUSSIAN)
    assert r.status_code == 201, r.text
    table_id = r.json()["table"]["id"]
    ledger = make_ledger(c, 8.0, 1e-3, name="vector-keys")
    vectors = [[[0.25, 0.5], [0.75, 0.125], [0.5, 0.5]]] * 3
    body = {"table_id": table_id, "ledger_id": ledger["id"], "vectors": vectors, "idempotency_key": "means-1"}
    first = c.post("/v1/aggregate", json=body)
    assert first.status_code == 200, first.text
    assert first.json()["replayed"] is False and len(first.json()["answers"]) == 3
    again = c.post("/v1/aggregate", json=body)
    assert again.status_code == 200, again.text
    assert again.json()["replayed"] is True and again.json()["answers"] == first.json()["answers"]
    assert again.json()["ledger_answers"] == first.json()["ledger_answers"] == 3  # paid once
    other = c.post("/v1/aggregate", json={**body, "vectors": [[[0.25, 0.5], [0.75, 0.125], [0.5, 0.25]]] * 3})
    assert other.status_code == 422 and other.json()["detail"][0]["loc"] == ["body", "idempotency_key"]
    assert c.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 3


# item 1: a debit answered 503 is never paid and lost ----------------------------------------------------------

@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_debit_answered_503_names_a_key_that_returns_its_answers_and_pays_once(tmp_path, request, backend):
    """Server A gives up on every debit after 1 ms (503) while its writer decides it; the 503 names a key the
    server issued; the same request with that key, sent to server B on the same database, returns the answers
    (replayed when A paid them) and the ledger has paid for them once."""
    url = (f"sqlite:///{tmp_path / 'darrm.db'}" if backend == "sqlite"
           else request.getfixturevalue("empty_pg_database"))
    a = Server(tmp_path, url, name="impatient", env={"DARRM_DEBIT_TIMEOUT_S": "0.001"}).start()
    try:
        b = Server(tmp_path, url, name="patient").start()
        try:
            with a.client() as ca, b.client() as cb:
                table = make_table(cb, K=5, m=2)
                ledger = make_ledger(cb, 10.0, 1e-3, name="late")
                body = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1, 1, 0, 0, 1]] * 4}
                r = ca.post("/v1/aggregate", json=body)
                assert r.status_code == 503, r.text
                key = r.json()["idempotency_key"]
                assert re.fullmatch(r"server-[0-9a-f]{32}", key)
                time.sleep(1.0)  # A's writer decides it meanwhile
                retry = cb.post("/v1/aggregate", json={**body, "idempotency_key": key})
                assert retry.status_code == 200, retry.text
                assert retry.json()["replayed"] is True and len(retry.json()["answers"]) == 4
                assert cb.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 4
                gaussian = cb.post("/v1/gaussian-tables", json=GAUSSIAN).json()["table"]["id"]
                means = {"table_id": gaussian, "ledger_id": ledger["id"], "vectors": [[[0.5, 0.5]] * 3] * 2}
                r = ca.post("/v1/aggregate", json=means)
                assert r.status_code == 503, r.text
                time.sleep(1.0)
                retry = cb.post("/v1/aggregate", json={**means, "idempotency_key": r.json()["idempotency_key"]})
                assert retry.status_code == 200 and retry.json()["replayed"] is True, retry.text
                assert len(retry.json()["answers"]) == 2 and len(retry.json()["answers"][0]) == 2
        finally:
            b.stop()
    finally:
        a.stop()


# item 2 ------------------------------------------------------------------------------------------------------

def _rss_while(server: Server, send) -> tuple[float, float, float]:  # noqa: ANN001
    """(before, peak, after) resident MB of the server process around ``send()`` (sampled every 5 ms)."""
    import threading

    import psutil

    proc = psutil.Process(server.proc.pid)  # one process: uvicorn runs the application in it
    before = proc.memory_info().rss / 1e6
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss / 1e6)
            time.sleep(0.005)

    t = threading.Thread(target=sample)
    t.start()
    try:
        send()
    finally:
        done.set()
        t.join()
    time.sleep(0.5)
    return before, peak[0], proc.memory_info().rss / 1e6


def test_a_16_mib_vectors_body_adds_under_64_mb_and_returns_it(server, c):
    table_id = c.post("/v1/gaussian-tables", json=GAUSSIAN).json()["table"]["id"]
    ledger = make_ledger(c, 8.0, 1e-3, name="memory")
    head = b'{"table_id":"' + table_id.encode() + b'","ledger_id":"' + ledger["id"].encode() + b'","vectors":['
    rows = (16 * 1024 * 1024 - 200) // 11
    body = head + b",".join([b"[[0.1875]]"] * rows) + b"]}"
    assert 15 * 1024 * 1024 < len(body) <= 16 * 1024 * 1024

    def send() -> None:
        r = c.post("/v1/aggregate", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 422, r.text  # read whole: rows over DARRM_MAX_ROWS (or K = 1 of a K = 3 table)
        assert r.json()["detail"][0]["loc"] == ["body", "vectors"]

    send()  # warm: the first vectors request imports and allocates what every later one reuses
    before, peak, after = _rss_while(server, send)
    assert peak - before < 64, (before, peak, after)
    assert after - before < 16, (before, peak, after)


# item 7 ------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def timed(tmp_path_factory) -> Iterator[Server]:
    """A server with the header deadline of ``darrm-opt serve`` (1 s here) and a 2 s body deadline."""
    d = tmp_path_factory.mktemp("timed")
    s = Server(d, f"sqlite:///{d / 'darrm.db'}", name="timed",
               env={"DARRM_HEADER_TIMEOUT_S": "1", "DARRM_BODY_TIMEOUT_S": "2"})
    port = s.port
    s.argv = [sys.executable, "-m", "uvicorn", "darrm_opt.api.main:create_app", "--factory", "--host", "127.0.0.1",
              "--port", str(port), "--http", "darrm_opt.api.protocol:HeaderTimeoutProtocol", "--log-level", "warning"]
    s.start()
    yield s
    s.stop()


def _connect(server: Server):  # noqa: ANN202
    import socket

    return socket.create_connection(("127.0.0.1", server.port), timeout=15)


def _read_until_closed(sock, within: float) -> tuple[bytes, float]:  # noqa: ANN001
    """Everything the server sends until it closes the connection, and the seconds that took."""
    t = time.monotonic()
    sock.settimeout(within)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data, time.monotonic() - t
        data += chunk


def test_a_connection_without_complete_headers_is_closed_at_the_header_deadline(timed):
    socks = [_connect(timed) for _ in range(200)]
    try:
        for i, sock in enumerate(socks):
            sock.sendall(b"POST /v1/ledgers HTTP/1.1\r\nHost: x\r\n" if i % 2 else b"GET /heal")
        assert httpx.get(timed.url + "/healthz", timeout=10).status_code == 200  # served meanwhile
        started = time.monotonic()
        for sock in socks:
            data, _ = _read_until_closed(sock, 15)
            assert data == b""  # closed, nothing answered
        assert time.monotonic() - started < 8
    finally:
        for sock in socks:
            sock.close()


def test_a_body_declared_and_not_sent_is_a_408_at_the_body_deadline(timed):
    from svc_helpers import KEY

    for declared in (1 << 30, 100):  # over the limit (drained before a 413) and within it
        sock = _connect(timed)
        try:
            sock.sendall(b"POST /v1/ledgers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
                         + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(declared).encode()
                         + b"\r\n\r\n{\"na")
            data, took = _read_until_closed(sock, 15)
        finally:
            sock.close()
        assert data.startswith(b"HTTP/1.1 408 "), data[:200]
        assert b"DARRM_BODY_TIMEOUT_S" in data and 1.5 < took < 8


def test_a_body_sent_a_byte_at_a_time_is_a_408_at_the_body_deadline(timed):
    from svc_helpers import KEY

    body = json.dumps({"name": "slow", "epsilon_budget": 1.0, "delta_budget": 1e-6}).encode()
    sock = _connect(timed)
    try:
        sock.sendall(b"POST /v1/ledgers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode()
                     + b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode()
                     + b"\r\n\r\n")
        t = time.monotonic()
        sock.settimeout(0.3)
        data = b""
        for byte in body:
            try:
                sock.sendall(bytes([byte]))
                data += sock.recv(65536)
                break
            except TimeoutError:
                continue
            except OSError:
                break
        data += _read_until_closed(sock, 15)[0]
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 408 "), data[:200]
    assert time.monotonic() - t < 8


def test_data_dependent_answers_take_an_idempotency_key(c):
    policy = {**POLICY, "aggregator": "gnmax", "quota": 4}
    del policy["threshold"], policy["sigma1"]
    r = c.post("/v1/data-dependent-ledgers", json={"name": "dd-keys", "policy": policy})
    assert r.status_code == 201, r.text
    lid = r.json()["id"]
    body = {"votes": [[60, 30, 10], [10, 10, 80]], "idempotency_key": "dd-1"}
    first = c.post(f"/v1/data-dependent-ledgers/{lid}/answer", json=body)
    assert first.status_code == 200, first.text
    assert first.json()["replayed"] is False and first.json()["queries"] == 2
    again = c.post(f"/v1/data-dependent-ledgers/{lid}/answer", json=body)
    assert again.status_code == 200, again.text
    assert again.json()["replayed"] is True and again.json()["answers"] == first.json()["answers"]
    assert again.json()["queries"] == 2  # recorded once
    other = c.post(f"/v1/data-dependent-ledgers/{lid}/answer", json={**body, "votes": [[60, 30, 10]]})
    assert other.status_code == 422 and other.json()["detail"][0]["loc"] == ["body", "idempotency_key"]
    unkeyed = c.post(f"/v1/data-dependent-ledgers/{lid}/answer", json={"votes": [[60, 30, 10]]})
    assert unkeyed.status_code == 200 and unkeyed.json()["queries"] == 3 and unkeyed.json()["replayed"] is False
