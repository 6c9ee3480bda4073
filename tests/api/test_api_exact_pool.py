"""The exact composition is computed off the debit writer's thread: a ledger whose debit needs a slow fine
composition delays only itself; another ledger's debits are decided and committed meanwhile."""

from __future__ import annotations

import time

import pytest
from svc_helpers import in_process_client, make_ledger, make_table

from darrm_opt.ledger.core import Debit
from darrm_opt.privacy.pld import cached_exact_epsilon


def test_a_slow_exact_composition_delays_only_its_own_ledger(tmp_path):
    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}") as c:
        s = c.app.state.services
        table = s.tables.get(make_table(c, K=5, m=2)["id"])
        assert table is not None and table.profile is not None
        busy = make_ledger(c, 1.0, 0.0517, name="busy")  # 1000 answers: generic bounds over it: fine grid (~2 s)
        calm = make_ledger(c, 5.0, 1e-3, name="calm")
        assert cached_exact_epsilon([(table.profile, 1000)], 0.0517) is None

        slow = s.writer.submit(Debit.of(busy["id"], table, 1000))
        start = time.monotonic()
        for _ in range(5):
            r = s.writer.submit(Debit.of(calm["id"], table, 1)).result(timeout=60)
            assert r.status == "paid"
            assert not slow.done(), "the calm ledger waited for the busy ledger's composition"
        calm_s = time.monotonic() - start
        busy_result = slow.result(timeout=120)
        busy_s = time.monotonic() - start
        assert busy_result.status in ("paid", "over_budget")
        assert cached_exact_epsilon([(table.profile, 1000)], 0.0517) is not None  # computed, and cached
        assert calm_s < busy_s
        assert c.get(f"/v1/ledgers/{calm['id']}").json()["answers"] == 5


@pytest.mark.slow  # a few hundred exact compositions
def test_debits_set_aside_for_compositions_are_each_paid_once(tmp_path):
    """Debits on three ledgers (two needing exact compositions, one capped small) from 8 threads: every paid
    debit is in its ledger's answers and spend records exactly once, every refused one in neither."""
    from concurrent.futures import ThreadPoolExecutor

    from sqlalchemy import func, select

    from darrm_opt.ledger.schema import SpendRecord

    with in_process_client(f"sqlite:///{tmp_path / 'darrm.db'}") as c:
        s = c.app.state.services
        table = s.tables.get(make_table(c, K=5, m=2)["id"])
        ledgers = [make_ledger(c, 50.0, 1e-3, name="big")["id"], make_ledger(c, 2.0, 1e-3, name="tight")["id"],
                   make_ledger(c, 50.0, 0.0, name="generic")["id"]]

        def pay(i: int) -> tuple[str, int, str]:
            lid = ledgers[i % 3]
            rows = 1 + i % 4
            return lid, rows, s.writer.submit(Debit.of(lid, table, rows)).result(timeout=120).status

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(pay, range(120)))
        assert {st for _, _, st in results} <= {"paid", "over_budget"}
        assert any(st == "over_budget" for lid, _, st in results if lid == ledgers[1])
        with s.db.read() as conn:
            for lid in ledgers:
                paid = sum(rows for l2, rows, st in results if l2 == lid and st == "paid")
                stored = conn.execute(select(func.coalesce(func.sum(SpendRecord.rows), 0))
                                      .where(SpendRecord.ledger_id == lid)).scalar_one()
                assert c.get(f"/v1/ledgers/{lid}").json()["answers"] == paid == stored
