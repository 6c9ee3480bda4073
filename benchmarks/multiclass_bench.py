"""Multi-class DaRRM (PATE setting) against GNMax at equal per-answer (ε, δ): solve + certify time and
exact expected errors.

    python benchmarks/multiclass_bench.py [--K 250] [--classes 10] [--delta 1e-5] [--eps 0.1,0.5,1]
                                          [--priors 'paper;iid-uniform:0.2,0.6;dirichlet:3,0.3'] [--no-confident]

Priors are separated by ';'. Confident-GNMax gets GNMax's budget split between its threshold check and
its answer (best of a small grid of splits and thresholds; ⊥ answered by a random class).
Errors are exact expected errors evaluated in float64 with ~1e-17 absolute precision; values below
1e-15 print as <1e-15. Times are wall and
process CPU of solve + certify (the machine may be shared).
"""

from __future__ import annotations

import argparse
import time

from darrm_opt.experiments.multiclass_compare import (
    best_confident_gnmax,
    calibrate_gaussian_sigma,
    gnmax_error,
    rdp_sigma,
)
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior
from darrm_opt.optimize.multiclass import solve_multiclass

#: Errors below this are below the absolute precision of the computation (differences of probabilities and
#: FFT convolutions carry ~1e-17 absolute noise) and print as <1e-15.
FLOOR = 1e-15


def _err(e: float | None, floor: float = FLOOR) -> str:
    if e is None:
        return "n/a"
    return f"<{floor:.0e}" if floor and e < floor else f"{e:.3e}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", type=int, default=250)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--eps", default="0.1,0.5,1")
    ap.add_argument("--priors", default="paper;iid-uniform:0.2,0.6;dirichlet:3,0.3")
    ap.add_argument("--no-confident", action="store_true", help="skip Confident-GNMax (slow at large K)")
    a = ap.parse_args()
    print(f"K={a.K} C={a.classes} delta={a.delta:g}")
    print(f"{'prior':<22} {'eps':>5} {'DaRRM err':>10} {'GNMax err':>10} {'Conf err':>10} {'sigma':>8} "
          f"{'sigma_RDP':>9} {'types':>5} {'wall s':>7} {'cpu s':>6} certified")
    for spec in a.priors.split(";"):
        prior = MulticlassPrior.parse(spec)
        for eps in (float(x) for x in a.eps.split(",")):
            params = MulticlassParams(a.K, a.classes, eps, a.delta, prior)
            w0, c0 = time.perf_counter(), time.process_time()
            sol = solve_multiclass(params)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            sigma = calibrate_gaussian_sigma(eps, a.delta)
            gn = gnmax_error(a.K, a.classes, sigma, prior) if sigma is not None else None
            rs = rdp_sigma(eps, a.delta)
            conf = None if a.no_confident or sigma is None else best_confident_gnmax(a.K, a.classes, sigma, prior)
            print(f"{prior.spec:<22} {eps:>5g} {_err(sol.expected_error):>10} {_err(gn):>10} "
                  f"{_err(1.0 - conf.accuracy if conf else None):>10} "
                  f"{sigma or float('nan'):>8.4f} {rs or float('nan'):>9.4f} {sol.pair_types:>5} {wall:>7.2f} "
                  f"{cpu:>6.2f} {'yes' if sol.certificate.certified else 'NO'}")


if __name__ == "__main__":
    main()
