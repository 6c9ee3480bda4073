"""Data-dependent ledgers on PostgreSQL: the quota holds under concurrent recording; only public values are
served (needs DARRM_TEST_POSTGRES_URL; a fresh database per test)."""

from __future__ import annotations

import json
import os
import threading

import pytest

from darrm_opt.errors import BudgetExceeded
from darrm_opt.ledger.db import Database, migrate
from darrm_opt.ledger.dd_account import DataDependentPolicy
from darrm_opt.ledger.dd_store import DataDependentStore

pytestmark = pytest.mark.postgres


def test_quota_holds_under_concurrent_records(empty_pg_database):
    db = Database(empty_pg_database)
    try:
        migrate(db)
        store = DataDependentStore(db)
        policy = DataDependentPolicy("gnmax", 12, 3, 2.0, 2.0, 0.1, 3.0, 1e-5, quota=10)
        lid = store.create("race", policy)["id"]
        paid, refused = [], []

        def worker() -> None:
            for _ in range(5):
                try:
                    store.record(lid, [[12, 0, 0]])
                    paid.append(1)
                except BudgetExceeded:
                    refused.append(1)

        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        view = store.get(lid)
        assert view is not None
        assert len(paid) == 10 and len(refused) == 10 and view["queries"] == 10
        view = store.publish(lid, os.urandom)
        assert view["sealed"] and view["sanitised_epsilon"] is not None
        assert set(json.loads(json.dumps(view))) == set(store.get(lid))
    finally:
        db.dispose()
