"""Rows per second of DaRRM Algorithm 1 in process (moved here from a test that asserted a rate).

    python benchmarks/aggregator_rate.py [--rows 1000000] [--repeats 3]

Prints wall and CPU time of the best of ``repeats`` batches for K = 11 and K = 101 (numpy path) and for
32-row batches (the plain-Python path used by small requests). Timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from darrm_opt.mechanisms.vote_samplers import BinarySampler


def best_of(fn, repeats: int) -> tuple[float, float]:
    best = (float("inf"), float("inf"))
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        best = min(best, (time.perf_counter() - w, time.process_time() - c))
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'K':>4} {'batch':>9} {'batches':>8} {'wall s':>8} {'cpu s':>8} {'rows/s (wall)':>14}")
    for K in (11, 101):
        gamma = np.linspace(1.0, 0.5, K // 2 + 1)
        agg = BinarySampler(np.concatenate([gamma, gamma[::-1]]))
        votes = rng.integers(0, 2, (a.rows, K), dtype=np.uint8)
        wall, cpu = best_of(lambda agg=agg, votes=votes: agg(votes), a.repeats)
        print(f"{K:>4} {a.rows:>9,} {1:>8} {wall:>8.3f} {cpu:>8.3f} {a.rows / wall:>14,.0f}")
        small = votes[:32].tolist()
        n = max(1, a.rows // 320)
        wall, cpu = best_of(lambda agg=agg, small=small, n=n: [agg(small) for _ in range(n)], a.repeats)
        print(f"{K:>4} {32:>9,} {n:>8,} {wall:>8.3f} {cpu:>8.3f} {32 * n / wall:>14,.0f}")


if __name__ == "__main__":
    main()
