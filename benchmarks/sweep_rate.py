"""Multisets per second of one exhaustive certification sweep (issue: scale), by method and threads.

    python benchmarks/sweep_rate.py [--K 41,61,101] [--threads 1,2] [--methods structured,matrix]
    python benchmarks/sweep_rate.py --K 101,251 --threads 2 --methods structured --gamma paper-like

Reports wall and CPU seconds (the machine may be shared). ``--gamma paper-like`` sweeps a fixed symmetric
table (no solve first, for large K); the default sweeps the certified optimum. DARRM_NO_NUMBA=1 times the
numpy block scan instead of the compiled one.

"structured" is the O(K⁵) prefix-minimum sweep for Δ > 0; "matrix" the generic matrix-product sweep
(halved by the reflection symmetry). γ is the certified optimum for each K (m = 3, ε = 0.1, Δ = 1e-5).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from darrm_opt.certify.problems import make_problem
from darrm_opt.certify.sweep import signed_h, sweep
from darrm_opt.model.corners import corners
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", default="21,41,61,101")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--methods", default="structured,matrix")
    ap.add_argument("--matrix-max-K", type=int, default=61, help="skip the matrix sweep above this K")
    ap.add_argument("--gamma", choices=("optimum", "paper-like"), default="optimum")
    a = ap.parse_args()
    print(f"{'K':>4} {'method':>10} {'threads':>7} {'multisets':>16} {'wall s':>8} {'CPU s':>8} {'multisets/s':>12} "
          "max cost")
    for K in (int(x) for x in a.K.split(",")):
        p = Params(K, 3)
        if a.gamma == "optimum":
            g = np.array(solve(p).gamma)
        else:  # a fixed symmetric table, γ(l) rising with |2l − K|
            half = np.linspace(0.05, 1.0, (K + 1) // 2)
            g = np.concatenate([half[::-1], half])
        h = signed_h(g)
        for method in a.methods.split(","):
            if method == "matrix" and K > a.matrix_max_K:
                continue
            prob = make_problem(corners(p), h, math.exp(p.m * p.epsilon), method)
            for th in (int(x) for x in a.threads.split(",")):
                t, c = time.perf_counter(), time.process_time()
                r = sweep(prob, workers=th, threshold=p.bound, top=40, near=p.bound - 1e-12)
                dt, cpu = time.perf_counter() - t, time.process_time() - c
                print(f"{K:>4} {method:>10} {th:>7} {r.multisets:>16,} {dt:>8.2f} {cpu:>8.2f} "
                      f"{r.multisets / dt:>12.3g} {r.max_cost:.12f}", flush=True)


if __name__ == "__main__":
    main()
