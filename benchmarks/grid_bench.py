"""A grid of certified tables (issue: scale): K ∈ {11, 13, ..., 31} × m ∈ {1..7} with m ≤ K, Δ = 1e-5.

    python benchmarks/grid_bench.py [--dask-scheduler ADDRESS]
"""

from __future__ import annotations

import argparse
import time

from darrm_opt.model.params import Params
from darrm_opt.optimize.grid import solve_grid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dask-scheduler", default=None)
    a = ap.parse_args()
    params = [Params(K, m) for K in range(11, 32, 2) for m in range(1, 8)]
    ex = None
    if a.dask_scheduler:
        from darrm_opt.certify.distributed import DaskSweepExecutor

        ex = DaskSweepExecutor(a.dask_scheduler)
    t = time.perf_counter()
    sols = solve_grid(params, executor=ex)
    dt = time.perf_counter() - t
    print(f"{'K':>3} {'m':>2} {'E[err]':>7} {'slack':>9} {'seconds':>8} certified")
    for s in sols:
        c = s.certificate
        print(f"{s.params.K:>3} {s.params.m:>2g} {s.expected_error:>7.4f} {c.bound - c.max_privacy_cost:>9.2e} "
              f"{s.seconds:>8.3f} {'yes' if c.certified else 'NO'}")
    print(f"{len(sols)} tables, all certified: {all(s.certificate.certified for s in sols)}, total {dt:.1f} s")


if __name__ == "__main__":
    main()
