"""Solves: small tables have a pool of their own (never behind a large solve), and each tenant may have at most
DARRM_SOLVE_QUOTA background solves under way in a process (429 beyond, others unaffected)."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from svc_helpers import in_process_client


@pytest.mark.slow  # a background solve of K = 21 runs to its end
def test_small_tables_never_wait_and_each_tenant_has_its_quota(tmp_path):
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}", inline_max_multisets=1000, solve_quota=1,
                           solve_workers=1, admin_keys=["other:other-key"]) as c:
        big = c.post("/v1/tables", json={"K": 21, "m": 5})
        assert big.status_code == 202, big.text
        job = big.json()["status_url"]
        other = c.post("/v1/tables", json={"K": 21, "m": 7})
        assert other.status_code == 429 and other.headers["retry-after"] == "10", other.text
        assert "DARRM_SOLVE_QUOTA" in other.json()["detail"]
        again = c.post("/v1/tables", json={"K": 21, "m": 5})  # joining the solve under way is not a new one
        assert again.status_code == 202 and again.json()["job_id"] == big.json()["job_id"]
        small = c.post("/v1/tables", json={"K": 3, "m": 1})
        assert small.status_code == 200, small.text
        assert c.get(job).json()["status"] in ("queued", "running"), "the small table waited for the large solve"
        other_tenant = TestClient(c.app, headers={"Authorization": "Bearer other-key"})  # the app's lifespan
        theirs = other_tenant.post("/v1/tables", json={"K": 21, "m": 9})
        assert theirs.status_code == 202  # its own quota
        assert other_tenant.post("/v1/tables", json={"K": 21, "m": 11}).status_code == 429
        for url in (job, theirs.json()["status_url"]):  # both finish; then the quota is free again
            wait_done(c, url)
        freed = c.post("/v1/tables", json={"K": 21, "m": 7})
        assert freed.status_code == 202, freed.text
        wait_done(c, freed.json()["status_url"])


def wait_done(c, url: str) -> None:  # noqa: ANN001
    deadline = time.monotonic() + 300
    while c.get(url).json()["status"] != "done":
        assert time.monotonic() < deadline, url
        time.sleep(0.2)
