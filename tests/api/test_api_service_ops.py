"""Issue 38: the service audit's defects, each on a real server on loopback (uvicorn in a subprocess).

- item 5: bodies that raised inside the application (a vectors array nested 100 000 deep, noise scales of
  5e-324 in a data-dependent policy) are 422s naming the field;
- item 6: the text ``vectors`` inside a value of a votes body (an idempotency key) does not reroute it;
- item 8: ``X-Request-ID`` echoed (or issued), one JSON log line per request, ``/metrics`` scraped,
  idempotency keys on vector means;
- item 4: no child process outlives its server (SIGTERM, and SIGKILL of a worker).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from svc_helpers import Server, make_ledger, make_table

pytestmark = pytest.mark.slow

GAUSSIAN = {"queries": 80, "epsilon": 8.0, "delta": 1e-3, "K": 3, "dim": 2, "radius": 1.0}
POLICY = {"aggregator": "confident-gnmax", "K": 100, "classes": 3, "sigma": 40.0, "order": 10.0, "beta": 0.01,
          "sigma_ss": 1.0, "delta": 1e-5, "quota": 10, "threshold": 50.0, "sigma1": 40.0}


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    d = tmp_path_factory.mktemp("service-ops")
    s = Server(d, f"sqlite:///{d / 'darrm.db'}", name="ops", env={"DARRM_LOG_FORMAT": "json"}).start()
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
