"""GNMax answers with exact discrete Gaussian noise from the OS CSPRNG: rows per second.

    python benchmarks/gnmax_sampler.py          # 10⁴ answers of K = 250, C = 10 (and 10⁵), GNMax and Confident

Prints, per case, the wall and CPU seconds of ``Aggregator(table)(votes)`` (labels checked, histograms
formed, N_ℤ(0, σ²) per class by Canonne–Kamath–Steinke's exact samplers, ties split uniformly), the best of
three runs. Votes: the paper prior (each teacher right with probability 0.75, else a uniform class).
"""

from __future__ import annotations

import time

import numpy as np

from darrm_opt.mechanisms import mechanism
from darrm_opt.model.gnmax import ConfidentGnmaxParams, GnmaxParams
from darrm_opt.release.release import Aggregator


def main() -> None:
    K, C = 250, 10
    rng = np.random.default_rng(0)
    cases = [("gnmax σ = 28.2", mechanism("gnmax"), GnmaxParams(K, C, 28.21)),
             ("gnmax σ = 3", mechanism("gnmax"), GnmaxParams(K, C, 3.0)),
             ("confident σ₁ = 89, σ₂ = 29, T = 150", mechanism("confident-gnmax"),
              ConfidentGnmaxParams(K, C, 150.0, 89.2, 28.9))]
    print(f"{'case':<36} {'rows':>7} {'wall s':>8} {'CPU s':>7} {'rows/s':>9}")
    for name, m, params in cases:
        agg = Aggregator(m.solve(params, solver="highs").table)
        for rows in (10_000, 100_000):
            y = rng.integers(0, C, size=(rows, 1))  # the paper prior: each teacher right with probability 0.75
            votes = np.where(rng.random((rows, K)) < 0.75, y, rng.integers(0, C, size=(rows, K))).astype(np.uint8)
            best = (float("inf"), 0.0)
            for _ in range(3):
                t0, c0 = time.perf_counter(), time.process_time()
                out = agg(votes)
                best = min(best, (time.perf_counter() - t0, time.process_time() - c0))
            assert out.shape == (rows,)
            print(f"{name:<36} {rows:>7} {best[0]:>8.3f} {best[1]:>7.3f} {rows / best[0]:>9.0f}")


if __name__ == "__main__":
    main()
