"""What a ledger's statement costs: the exact composition on the coarse and the fine grid, and a debit.

    python benchmarks/ledger_statement_cost.py                 # K = 5, 11, 41 (m = 3), Q = 10, 100, 1000
    python benchmarks/ledger_statement_cost.py --K 11 --Q 100 --delta 1e-3  # one case

While the generic bounds fit the budget a ledger states its spend with the exact composition of its tables'
profiles on the coarse grid (darrm_opt.privacy.pld.COARSE times the fine interval); near the budget it
decides on the fine grid. For each (K, Q) this prints both ε at δ_target (default 1e-2) with their wall time (a
fresh process cache: each composition is computed once), the generic bound (the best of the classical
composition theorems) and the wall time of a local ledger's debit of Q answers of the table, which
states its spend with the coarse composition.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from darrm_opt.errors import BudgetExceeded
from darrm_opt.ledger.local import Ledger
from darrm_opt.mechanisms import certify_table
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve
from darrm_opt.privacy import accounting, pld


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", type=int, nargs="+", default=[5, 11, 41])
    ap.add_argument("--Q", type=int, nargs="+", default=[10, 100, 1000])
    ap.add_argument("--delta", type=float, default=1e-2, help="the ledger's δ target")
    args = ap.parse_args()
    delta = args.delta
    print(f"{'K':>4} {'Q':>5} {'generic ε':>10} {'fine ε':>10} {'fine s':>7} {'coarse ε':>10} {'coarse s':>8} "
          f"{'debit s':>8}")
    for K in args.K:
        params = Params(K, 3)
        table = certify_table(params, solve(params).gamma)
        assert table.profile is not None
        for Q in args.Q:
            generic = accounting.account([(table.epsilon0, table.delta0, Q)], delta).spend.epsilon
            t = time.perf_counter()
            fine = pld.exact_epsilon([(table.profile, Q)], delta)
            t_fine = time.perf_counter() - t
            t = time.perf_counter()
            coarse = pld.exact_epsilon([(table.profile, Q)], delta, coarse=True)
            t_coarse = time.perf_counter() - t
            with tempfile.TemporaryDirectory() as d, Ledger(str(Path(d) / "l.db"), "bench",
                                                            epsilon_budget=10 * generic, delta_budget=delta) as book:
                book.register(table)
                pld._EXACT.clear()  # the debit composes afresh
                t = time.perf_counter()
                try:
                    book.pay(table, Q)
                    debit = f"{time.perf_counter() - t:>8.3f}"
                except BudgetExceeded:  # no bound meets δ_target (the profile's infinite-loss mass × Q)
                    debit = f"{'refused':>8}"
            print(f"{K:>4} {Q:>5} {generic:>10.4f} {fine:>10.4f} {t_fine:>7.3f} {coarse:>10.4f} {t_coarse:>8.3f} "
                  f"{debit}")


if __name__ == "__main__":
    main()
