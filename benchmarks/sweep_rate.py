"""Multisets per second of the exhaustive certification sweep (issue: scale).

    python benchmarks/sweep_rate.py [--K 41,61] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from darrm_opt.corners import corners
from darrm_opt.params import Params
from darrm_opt.sweep import SweepProblem, signed_h, sweep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", default="21,41,61")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--pure", action="store_true")
    a = ap.parse_args()
    print(f"{'K':>4} {'Δ':>6} {'threads':>7} {'multisets':>15} {'seconds':>8} {'multisets/s':>12}")
    for K in (int(x) for x in a.K.split(",")):
        p = Params(K, 3, teacher_delta=0.0 if a.pure else 1e-5)
        g = np.random.default_rng(0).random(K + 1)
        g = np.concatenate([g[: (K + 1) // 2], g[: (K + 1) // 2][::-1]])
        prob = SweepProblem(corners(p), signed_h(g), math.exp(p.m * p.epsilon))
        for th in (int(x) for x in a.threads.split(",")):
            t = time.perf_counter()
            r = sweep(prob, workers=th, threshold=p.bound, top=40)
            dt = time.perf_counter() - t
            print(f"{K:>4} {p.teacher_delta:>6g} {th:>7} {r.multisets:>15,} {dt:>8.2f} {r.multisets / dt:>12.3g}",
                  flush=True)


if __name__ == "__main__":
    main()
