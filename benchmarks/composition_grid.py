"""The exact composition's grid: how far above the true ε, and how fast, for each discretisation.

    python benchmarks/composition_grid.py

For a randomised-response pair ((ε₀, δ₀)-DP, the canonical pair of Kairouz, Oh and Viswanath), Q answers
have an exact ε at δ (darrm_opt.privacy.accounting.optimal_epsilon). Each row composes the pair's PLD
Q times on the grid the ledger uses for Q answers (interval_for(Q) scaled to the base interval named) by
privacy buckets (dp_accounting's pessimistic rounding of each loss up to the grid) and by connect-the-dots
(darrm_opt.privacy.pld.pair_pld), and prints ε − exact and the seconds the composition took. A DaRRM table
(K = 11, m = 3, ε = 0.1, Δ = 1e-5; δ = 1 − (1 − Δ)^Q (1 − 1e-4)) has no closed form: its rows print ε
against connect-the-dots at base 1e-6.
"""

from __future__ import annotations

import math
import time

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pl

from darrm_opt.privacy import accounting, pld

BASES = (1e-5, 1e-4)
RR = [(0.3, 0.0, 100, 1e-6), (0.1, 1e-6, 1000, 1e-3), (0.05, 0.0, 5000, 1e-5)]


def buckets(atoms, infinite_mass: float, interval: float):
    upper = {i: math.log(p) for i, (p, _) in enumerate(atoms) if p > 0}
    lower = {i: math.log(q) for i, (_, q) in enumerate(atoms) if q > 0}
    if infinite_mass > 0:
        upper["inf"] = math.log(infinite_mass)
    return pl.from_two_probability_mass_functions(lower, upper, pessimistic_estimate=True,
                                                  value_discretization_interval=interval, symmetric=True)


def timed(build, q: int, delta: float) -> tuple[float, float]:
    t0 = time.perf_counter()
    eps = float(build().self_compose(q).get_epsilon_for_delta(delta))
    return eps, time.perf_counter() - t0


def main() -> None:
    print(f"{'pair':<28} {'Q':>5} {'base Δ':>7} {'buckets: ε − ref':>17} {'s':>6} {'c-t-d: ε − ref':>15} "
          f"{'s':>6}")
    for eps0, d0, q, delta in RR:
        hi, lo = (1 - d0) / (1 + math.exp(-eps0)), (1 - d0) / (1 + math.exp(eps0))
        atoms = [(hi, lo), (lo, hi), (0.0, d0)]
        ref = accounting.optimal_epsilon(eps0, d0, q, delta)
        for base in BASES:
            iv = base * max(1.0, math.sqrt(q / 100))
            b, tb = timed(lambda a=atoms, d=d0, i=iv: buckets(a, d, i), q, delta)
            c, tc = timed(lambda a=atoms, d=d0, i=iv: pld.pair_pld(a, d, i), q, delta)
            print(f"{f'RR ({eps0}, {d0:g}) at δ {delta:g}':<28} {q:>5} {base:>7.0e} {b - ref:>17.2e} {tb:>6.2f} "
                  f"{c - ref:>15.2e} {tc:>6.2f}")
    from darrm_opt.model.params import Params
    from darrm_opt.optimize.optimizer import solve
    from darrm_opt.privacy.profile import privacy_profile

    params = Params(11, 3, 0.1, 1e-5)
    prof = privacy_profile(params, np.array(solve(params).gamma))
    for q in (20, 100):
        delta = -math.expm1(q * math.log1p(-params.delta) + math.log1p(-1e-4))
        ref = float(pld.pair_pld(prof.atoms, prof.infinite_mass, 1e-6).self_compose(q).get_epsilon_for_delta(delta))
        for base in BASES:
            iv = base * max(1.0, math.sqrt(q / 100))
            b, tb = timed(lambda i=iv: buckets(prof.atoms, prof.infinite_mass, i), q, delta)
            c, tc = timed(lambda i=iv: pld.pair_pld(prof.atoms, prof.infinite_mass, i), q, delta)
            print(f"{f'DaRRM K=11 m=3 at δ {delta:.2g}':<28} {q:>5} {base:>7.0e} {b - ref:>17.2e} {tb:>6.2f} "
                  f"{c - ref:>15.2e} {tc:>6.2f}")


if __name__ == "__main__":
    main()
