"""The exact composition is computed off the debit writer's thread: a ledger whose debit needs a slow fine
composition delays only itself; another ledger's debits are decided and committed meanwhile."""

from __future__ import annotations

import time

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
