"""Composition-shaped tables against GNMax for jobs of many answers (issue 22).

    python benchmarks/shaped_tables.py            # K = 250, Q = 100, (2, 1e-5), paper and Beta(9, 1) priors
    python benchmarks/shaped_tables.py --K 101 --queries 50 --epsilon 1.5

Part 1, the target at GNMax's own scale, uncalibrated (α₀ = √2·√Q/μ_B: the Gaussian curve whose Q-fold
composition is exactly (ε_B, δ_B)): the shaped LP with 12 and 120 slopes, its error and the *exact* composed
ε of its certified table (the profile meets the target only at the slopes, so few slopes overshoot).

Part 2, per prior: the shaped table of each shape β calibrated by exact PLD composition
(darrm_opt.planning.shaped_plan.calibrate_shaped), its error (Pr[answer ≠ label] − Pr[majority ≠ label],
the objective) and absolute error (Pr[answer ≠ label], the issue's figures), its exact composed ε at δ_B
(≤ ε_B), the seconds it took; beside GNMax-GDP at the same budget (σ from √Q·μ-GDP composition,
Dong–Roth–Su): its error. Every shaped table is certified; every ε is the ledger's exact composition.

Part 3 (``--classes C``, default 10; 0 skips it): the same for multi-class tables (rule MC-1) under each of
``--mc-priors``, beside GNMax-GDP over C classes at the same budget (σ = √Q·σ₁, its exact error:
darrm_opt.experiments.multiclass_compare.gnmax_error).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from darrm_opt.model.objective import expected_error, expected_pmf
from darrm_opt.model.params import Prior
from darrm_opt.model.shaped import ShapedPateParams, slope_cap
from darrm_opt.optimize.shaped import solve_shaped
from darrm_opt.planning.shaped_plan import FLOOR, calibrate_shaped, shaped_profile
from darrm_opt.privacy.gaussian_profile import gdp_mu
from darrm_opt.privacy.gnmax import gnmax_gamma
from darrm_opt.privacy.pld import exact_epsilon


def majority_error(K: int, prior: Prior) -> float:
    """Pr[majority ≠ label] (label 1; a tie of an even K broken uniformly)."""
    alpha = expected_pmf(K, prior)
    l = np.arange(K + 1)
    return float(alpha[2 * l < K].sum() + 0.5 * alpha[2 * l == K].sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", type=int, default=250)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--epsilon", type=float, default=2.0)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--priors", default="paper,beta:9,1", help="';'-separated, or the default pair")
    ap.add_argument("--betas", default="2,3", help="target shapes to calibrate")
    ap.add_argument("--classes", type=int, default=10, help="C of the multi-class rows (0: none)")
    ap.add_argument("--mc-priors", default="paper", help="';'-separated multi-class priors")
    args = ap.parse_args()
    K, Q, eB, dB = args.K, args.queries, args.epsilon, args.delta
    priors = ["paper", "beta:9,1"] if args.priors == "paper,beta:9,1" else args.priors.split(";")
    betas = [float(b) for b in args.betas.split(",")]

    mu = gdp_mu(eB, dB) / math.sqrt(Q)
    sigma = math.sqrt(2.0) / mu  # GNMax: 2L − K + N(0, 2σ²) has sensitivity 2, so μ = 2/(√2σ)
    alpha0 = math.sqrt(2.0) / mu
    print(f"job: binary PATE setting, K = {K}, Q = {Q}, budget ({eB:g}, {dB:g}); GNMax-GDP σ = {sigma:.6g}")
    print()
    print("Gaussian target at GNMax's scale (not calibrated), paper prior")
    print(f"{'slopes':>7} {'error':>11} {'composed eps':>13} {'seconds':>8}")
    for J in (12, 120):
        t0 = time.perf_counter()
        params = ShapedPateParams(K, 2.0, alpha0, J, slope_cap(2.0, alpha0, FLOOR))
        sol = solve_shaped(params)
        eps = exact_epsilon([(shaped_profile(params, sol.gamma), Q)], dB)
        print(f"{J:>7} {sol.expected_error:>11.4e} {eps:>13.4f} {time.perf_counter() - t0:>8.1f}")
    print()
    print(f"{'prior':<10} {'mechanism':<22} {'error':>11} {'abs error':>11} {'composed eps':>13} {'seconds':>8}")
    for spec in priors:
        prior = Prior.parse(spec)
        base = majority_error(K, prior)
        gn = expected_error(gnmax_gamma(K, sigma), prior)
        print(f"{spec:<10} {'GNMax-GDP':<22} {gn:>11.4e} {gn + base:>11.4e} {eB:>13.4f} {'':>8}")
        warm = None
        for beta in betas:
            t0 = time.perf_counter()
            plan = calibrate_shaped(K, Q, eB, dB, prior, beta=beta, warm=warm)
            warm = plan.solution.active
            err = plan.solution.expected_error
            name = f"shaped beta={beta:g} ({plan.tried} scales)"
            print(f"{spec:<10} {name:<22} {err:>11.4e} {err + base:>11.4e} {plan.epsilon_spent:>13.4f} "
                  f"{time.perf_counter() - t0:>8.1f}")
    if args.classes:
        C = args.classes
        from darrm_opt.experiments.multiclass_compare import gnmax_error
        from darrm_opt.model.multiclass import MulticlassPrior
        from darrm_opt.privacy.gnmax import gnmax_sigma_over_answers

        print()
        print(f"multi-class, C = {C} (rule MC-1; error = Pr[answer ≠ true class])")
        print(f"{'prior':<18} {'mechanism':<26} {'error':>11} {'composed eps':>13} {'seconds':>8}")
        s_mc = gnmax_sigma_over_answers(Q, eB, dB)
        for spec in args.mc_priors.split(";"):
            mprior = MulticlassPrior.parse(spec)
            print(f"{spec:<18} {'GNMax-GDP':<26} {gnmax_error(K, C, s_mc, mprior):>11.4e} {eB:>13.4f} {'':>8}")
            warm = None
            for beta in betas:
                t0 = time.perf_counter()
                plan = calibrate_shaped(K, Q, eB, dB, mprior, beta=beta, warm=warm, classes=C)
                warm = plan.solution.active
                name = f"shaped beta={beta:g} ({plan.tried} scales)"
                print(f"{spec:<18} {name:<26} {plan.solution.expected_error:>11.4e} {plan.epsilon_spent:>13.4f} "
                      f"{time.perf_counter() - t0:>8.1f}")


if __name__ == "__main__":
    main()
