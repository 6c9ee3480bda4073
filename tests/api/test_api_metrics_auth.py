"""Who may scrape ``/metrics`` (it names tenants and their spend): an admin key by default
(``DARRM_METRICS_AUTH=admin``: 401 without a valid key, 403 with a tenant's), anyone with ``open``."""

from __future__ import annotations

import pytest
from svc_helpers import AUTH, in_process_client, without_key

ADMIN = {"Authorization": "Bearer metrics-admin-key"}


@pytest.mark.parametrize("mode", ["admin", "open"])
def test_metrics_need_an_admin_key_unless_open(tmp_path, mode):
    with in_process_client(f"sqlite:///{tmp_path / 'm.db'}", admin_keys=["metrics-admin-key"],
                           metrics_auth=mode) as c:
        assert c.get("/v1/tables").status_code == 200  # something counted
        admin = c.get("/metrics", headers=ADMIN)
        assert admin.status_code == 200 and admin.headers["content-type"].startswith("text/plain")
        assert 'darrm_requests_total{method="GET",route="/v1/tables",status="200"}' in admin.text
        nokey, tenant = without_key(c, "GET", "/metrics"), c.get("/metrics", headers=AUTH)
        wrong = c.get("/metrics", headers={"Authorization": "Bearer wrong"})
        if mode == "open":
            assert (nokey.status_code, tenant.status_code, wrong.status_code) == (200, 200, 200)
            assert "darrm_requests_total" in nokey.text
            return
        assert (nokey.status_code, wrong.status_code) == (401, 401)
        assert nokey.json() == {"detail": "missing or invalid API key"}
        assert nokey.headers["www-authenticate"] == "Bearer"
        assert tenant.status_code == 403 and "admin key" in tenant.json()["detail"]
        assert "darrm_" not in nokey.text + tenant.text
        assert c.get("/healthz", headers={}).status_code == 200  # liveness and readiness stay open
