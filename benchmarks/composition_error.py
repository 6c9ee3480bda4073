"""What the proven bound of the composition's float error costs: ε of Q GNMax answers (discrete Gaussian,
shifts (1, 1)) at several δ read off the float64 composition with its bound, and as the ledger states it
(pld.exact_epsilon: redone in long double where the float64 bound exceeds WIDE_SHARE of δ), against the
continuous Gaussian pair of the same μ (exact, closed form: Balle and Wang 2018, Thm 8), with the float64
composition's error bounds and the CPU seconds of the stated ε.

    python benchmarks/composition_error.py [--sigma 40] [--queries 100,1000]
"""

from __future__ import annotations

import argparse
import math
import time

from darrm_opt.privacy import pld
from darrm_opt.privacy.gaussian_profile import GaussianProfile


def continuous_epsilon(mu: float, delta: float) -> float:
    prof = GaussianProfile(1.0, (mu,), discrete=False)
    lo, hi = 0.0, 1.0
    while prof.delta(hi) > delta:
        lo, hi = hi, hi * 2
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if prof.delta(mid) > delta else (lo, mid)
    return hi


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sigma", type=float, default=40.0)
    ap.add_argument("--queries", default="100,1000")
    ap.add_argument("--deltas", default="1e-5,1e-8,1e-10,1e-12")
    args = ap.parse_args()
    prof = GaussianProfile(args.sigma, (1, 1))
    print("| Q | δ | ε float64 + bound | ε stated | ε continuous, same μ | float64 bound: per point / ℓ₁ / ℓ₂ "
          "| CPU s (stated) |")
    print("|---|---|---|---|---|---|---|")
    for q in (int(x) for x in args.queries.split(",")):
        composed = pld._composed(pld.canonical_parts([(prof, q)]), pld.interval_for(q))
        mu = math.sqrt(2 * q) / args.sigma
        for delta in (float(x) for x in args.deltas.split(",")):
            plain = pld.epsilon_at(composed, delta)
            t0 = time.process_time()
            stated = pld.exact_epsilon([(prof, q)], delta)
            spent = time.process_time() - t0
            print(f"| {q} | {delta:g} | {plain:.6f} | {stated:.6f} | {continuous_epsilon(mu, delta):.6f} | "
                  f"{composed.err_inf:.2g} / {composed.err_1:.2g} / {composed.err_2:.2g} | {spent:.2f} |")


if __name__ == "__main__":
    main()
