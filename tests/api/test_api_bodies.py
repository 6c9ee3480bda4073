"""Bodies of POST /v1/aggregate are read as they arrive: a Content-Length header reserves nothing, the process
holds at most DARRM_MAX_BODY_MEMORY bytes of bodies, a client that leaves mid-body costs no traceback, and
many idle connections that announced 16 MB each add little to the server's memory."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import tracemalloc
from pathlib import Path

import pytest
from svc_helpers import AUTH, KEY, Server, in_process_client, make_ledger, make_table

DECLARED = 16_000_000  # under the default 16 MiB limit: the request is let in


def _scope(declared: int) -> dict:
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/v1/aggregate", "raw_path": b"/v1/aggregate", "query_string": b"", "root_path": "",
        "client": ("127.0.0.1", 5), "server": ("127.0.0.1", 80),
        "headers": [(b"host", b"test"), (b"content-type", b"application/json"),
                    (b"content-length", str(declared).encode()), (b"authorization", f"Bearer {KEY}".encode())],
    }


def _call(app, declared: int, chunks: list[bytes], then_disconnect: bool) -> tuple[list[dict], int]:
    """Run one request through the whole application (middleware, auth, route); its messages and the peak of
    Python allocations during it."""
    messages = [{"type": "http.request", "body": c, "more_body": True} for c in chunks]
    if then_disconnect:
        messages.append({"type": "http.disconnect"})
    else:
        messages[-1]["more_body"] = False
    sent: list[dict] = []

    async def receive() -> dict:
        if messages:
            return messages.pop(0)
        await asyncio.sleep(3600)  # pragma: no cover - the app never waits past the last message here
        return {"type": "http.disconnect"}

    async def send(msg: dict) -> None:
        sent.append(msg)

    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        asyncio.run(app(_scope(declared), receive, send))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return sent, peak


def test_a_declared_length_allocates_nothing_and_a_disconnect_logs_no_error(tmp_path, caplog):
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}") as c:
        app = c.app
        caplog.set_level(logging.INFO)
        sent, peak = _call(app, DECLARED, [b'{"table_id": "'], then_disconnect=True)
        assert peak < 1_000_000, peak  # the 16 MB announced are never reserved
        assert sent[0]["status"] == 400
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
        assert "client disconnected" in caplog.text
        assert app.state.services.bodies.held == 0


def test_the_body_budget_refuses_with_503_and_is_given_back(tmp_path):
    limit = 64 * 1024
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", max_body_memory=limit) as c:
        table = make_table(c, K=5, m=2)
        ledger = make_ledger(c, 5.0, 1e-3)
        held = c.app.state.services.bodies
        body = (b'{"table_id":"%s","ledger_id":"%s","votes":[' % (table["id"].encode(), ledger["id"].encode())
                + b",".join([b"[1,1,1,0,0]"] * 10_000) + b"]}")
        assert len(body) > limit
        r = c.post("/v1/aggregate", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
        assert held.held == 0
        assert c.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 0  # nothing spent
        small = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1, 1, 1, 0, 0]] * 10}
        r = c.post("/v1/aggregate", json=small)
        assert r.status_code == 200 and len(r.json()["answers"]) == 10
        assert held.held == 0


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.mark.slow
def test_idle_connections_that_announce_16_mb_add_little_memory(tmp_path):
    server = Server(tmp_path, f"sqlite:///{tmp_path / 'darrm.db'}", name="idle").start()  # one process
    n = 300
    socks: list[socket.socket] = []
    try:
        with server.client() as c:
            table = make_table(c, K=5, m=2)
            ledger = make_ledger(c, 5.0, 1e-3)
        before = _rss_kb(server.proc.pid)
        head = (f"POST /v1/aggregate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {DECLARED}\r\nAuthorization: {AUTH['Authorization']}\r\n\r\n").encode()
        start = (b'{"table_id":"%s","ledger_id":"%s","votes":[[1,1,' % (table["id"].encode(), ledger["id"].encode()))
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(head + start)
            socks.append(s)
        time.sleep(2.0)  # every request is in the application, waiting for the rest of its body
        grown_mb = (_rss_kb(server.proc.pid) - before) / 1024
        with server.client() as c:
            assert c.get("/healthz", timeout=5).status_code == 200
        assert grown_mb < 60, f"{n} idle connections took {grown_mb:.0f} MB"  # 16 MB each if reserved
    finally:
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
        server.stop()
    assert "Traceback" not in server.log()
