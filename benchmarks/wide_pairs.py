"""Compositions of wide pairs: the grid the ledger picks, the ε, CPU seconds and peak memory.

    python benchmarks/wide_pairs.py            # the widened grid (what the ledger and planner use)
    python benchmarks/wide_pairs.py --fine     # also the base grid interval_for(Q), where it still runs

A Gaussian pair of large μ (GNMax at a small σ, as a large budget over few answers asks for) spans tens of loss
units; on the base grid (1e-5 up to 100 answers) its composition's window holds 10⁷–10⁸ points.
darrm_opt.privacy.pld.grid_interval doubles the interval until the window holds at most MAX_WINDOW points.
Each row runs in its own process (CPU seconds and peak RSS from os.wait4); ``exact`` is the closed form of the
continuous Gaussian pair (√Q/σ-GDP), which the discrete pair's ε approaches from above as σ grows.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys

#: (σ, Q, δ) of GNMax's pair N_Z(0, σ²) against N_Z(1, σ²) on two counts (the plan at K = 5, ε = 8 calibrates
#: σ ≈ 2.1; its subsampled candidates need σ ≈ 0.9-1.2)
CASES = [(2.0, 10, 1e-3), (1.0, 10, 1e-3), (0.5, 10, 1e-3), (0.3, 10, 1e-3), (1.0, 100, 1e-5)]
#: the cases also run on the base grid with --fine (its window: 1.3·10⁷ and 2.6·10⁷ points; the others hold
#: 5·10⁷ to 10⁸ and need gigabytes)
FINE = {(2.0, 10), (1.0, 10)}

CHILD = r"""
import json, math, sys, time
from darrm_opt.privacy import pld
from darrm_opt.privacy.gaussian_profile import GaussianProfile
sigma, q, delta, fine = float(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
if fine:
    pld.MAX_WINDOW = 1 << 60
prof = GaussianProfile(sigma, (1, 1))
parts = pld.canonical_parts([(prof, q)])
grid = pld.grid_interval(parts)
eps = pld.exact_epsilon([(prof, q)], delta)
print(json.dumps({"grid": grid, "points": pld._window(parts, grid * pld.PROBE) / grid, "eps": eps}))
"""


def run(sigma: float, q: int, delta: float, fine: bool) -> dict:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(sigma), str(q), str(delta), "1" if fine else "0"],
                            stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    if status != 0:
        raise SystemExit(f"case σ={sigma}, Q={q} failed with status {status}")
    doc = json.loads(out)
    doc["cpu"] = usage.ru_utime + usage.ru_stime
    doc["rss_mb"] = usage.ru_maxrss / 1024
    return doc


def gdp_epsilon(mu: float, delta: float) -> float:
    from scipy import optimize, stats

    def f(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2)) - delta
    return optimize.brentq(f, 0.0, mu * mu / 2 + 12 * mu + 5, xtol=1e-14, rtol=1e-14)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fine", action="store_true", help="also compose the FINE cases on the base grid")
    args = ap.parse_args()
    print(f"{'σ':>5} {'Q':>4} {'δ':>7} {'grid':>9} {'window pts':>11} {'ε':>12} {'exact (cont.)':>13} "
          f"{'CPU s':>7} {'peak MB':>8}")
    for sigma, q, delta in CASES:
        for fine in (False, True) if args.fine and (sigma, q) in FINE else (False,):
            doc = run(sigma, q, delta, fine)
            print(f"{sigma:>5} {q:>4} {delta:>7.0e} {doc['grid']:>9.2e} {doc['points']:>11.3g} {doc['eps']:>12.6f} "
                  f"{gdp_epsilon(math.sqrt(2 * q) / sigma, delta):>13.6f} {doc['cpu']:>7.1f} {doc['rss_mb']:>8.0f}")


if __name__ == "__main__":
    main()
