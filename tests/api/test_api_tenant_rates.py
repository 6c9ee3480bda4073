"""Per-tenant request rates (DARRM_TENANT_RATE): the token bucket's arithmetic, and a real server on loopback
that answers a tenant's request over its rate 429 with Retry-After, before reading its body, while another
tenant and an operator are served, and keeps the connection usable."""

from __future__ import annotations

import socket
import time
import uuid

import httpx
import pytest
from svc_helpers import Server

from darrm_opt.api.admission import TenantRates

A, B, OPS = ("a-" + uuid.uuid4().hex, "b-" + uuid.uuid4().hex, "ops-" + uuid.uuid4().hex)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_bucket_gives_a_burst_then_the_rate():
    clock = Clock()
    rates = TenantRates(2.0, 3, clock=clock)
    assert [rates.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]  # the burst
    assert rates.take("a") == pytest.approx(0.5)  # one token at 2 per second
    assert rates.take("b") == 0.0  # another tenant's bucket is its own
    clock.t += 0.25
    assert rates.take("a") == pytest.approx(0.25)  # half a token so far: 0.25 s more
    clock.t += 0.25
    assert rates.take("a") == 0.0 and rates.take("a") == pytest.approx(0.5)
    clock.t += 60
    assert [rates.take("a") for _ in range(4)][-1] > 0  # refilled to the burst, never beyond
    assert TenantRates(0.5).burst == 1.0  # at least one request
    with pytest.raises(ValueError, match="rate"):
        TenantRates(0.0)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rates")
    s = Server(tmp, f"sqlite:///{tmp / 'r.db'}", env={
        "DARRM_API_KEYS": f"a:{A},b:{B}", "DARRM_ADMIN_KEYS": f"ops:{OPS}",
        "DARRM_TENANT_RATE": "1", "DARRM_TENANT_BURST": "3"}, name="rates").start()
    yield s
    s.stop()


def _get(server: Server, key: str) -> httpx.Response:
    return httpx.get(server.url + "/v1/ledgers", headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_a_tenant_over_its_rate_gets_429_and_the_others_are_served(server):
    codes = [_get(server, A).status_code for _ in range(3)]
    over = _get(server, A)
    assert codes == [200, 200, 200] and over.status_code == 429
    assert over.headers["retry-after"] == "1"
    assert "DARRM_TENANT_RATE = 1" in over.json()["detail"] and "'a'" in over.json()["detail"]
    assert _get(server, B).status_code == 200
    assert [_get(server, OPS).status_code for _ in range(6)] == [200] * 6  # operators are not limited
    time.sleep(1.1)
    assert _get(server, A).status_code == 200  # a token again after Retry-After


def test_a_refused_request_is_answered_before_its_body_and_a_connection_goes_on(server):
    """A 429 answers a POST whose body never comes (so it was not read); on one keep-alive connection, requests
    refused with 429 are followed by served ones."""
    for _ in range(4):
        _get(server, B)
    host, port = server.url.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall((f"POST /v1/ledgers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {B}\r\n"
                   "Content-Type: application/json\r\nContent-Length: 50000\r\n\r\n").encode())
        head = s.recv(4096).decode()
        assert head.startswith("HTTP/1.1 429") and "retry-after: 1" in head.lower()
    time.sleep(3.1)  # the bucket full again: a burst of 3
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {B}"}, timeout=30) as c:
        codes = [c.post("/v1/ledgers", json={"name": "x", "epsilon_budget": 1.0, "delta_budget": 1e-6}).status_code
                 for _ in range(5)]
        time.sleep(1.1)
        assert codes == [201] * 3 + [429] * 2 and c.get("/v1/ledgers").status_code == 200


@pytest.mark.parametrize(("name", "value", "field", "rule"), [
    ("DARRM_TENANT_RATE", "0", "tenant_rate", "greater than 0"),
    ("DARRM_TENANT_EXACT_SHARE", "1.5", "tenant_exact_share", "less than or equal to 1"),
])
def test_serve_refuses_a_tenant_limit_out_of_range(tmp_path, name, value, field, rule):
    """``darrm-opt serve`` with a tenant's limit out of its range exits 2 naming the setting and its rule, as a
    user runs it."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env.update({name: value, "DARRM_DATABASE_URL": f"sqlite:///{tmp_path / 'r.db'}"})
    serve = subprocess.run([sys.executable, "-m", "darrm_opt", "serve", "--port", "1"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
    assert serve.returncode == 2
    assert "invalid DARRM_ setting" in serve.stderr and field in serve.stderr
    assert rule in serve.stderr and "Traceback" not in serve.stderr
