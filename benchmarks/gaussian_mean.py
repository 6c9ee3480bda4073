"""Gaussian mean release (issue 24): calibration agreement, eq. 15 against exact σ, and the aggregate rate.

    python benchmarks/gaussian_mean.py            # every table
    python benchmarks/gaussian_mean.py --repeat 5 # the rate as the best of 5 runs

Prints three tables:

1. calibration agreement: for N in {1, 10, 100, 1000, 10000} answers of a Gaussian mean with K = 250, R = 1
   (L2 sensitivity 2/K) at total (1, 1e-5): σ by this package's exact composition (bisection on Balle–Wang's
   δ), by dp_accounting's PLD accountant (``calibrate_dp_mechanism``, a GaussianDpEvent self-composed N
   times, discretisation 1e-4), the released σ on its lattice, and their relative differences (target:
   within 1e-3);
2. eq. 15 (the paper, RDP) against the exact σ at several budgets, and the paper's experiment (K = 8, N = 80,
   autoencoded, (8, 1e-3): 1.283 by eq. 15);
3. the aggregate rate: 10⁴ queries of K = 250 teachers' vectors of l = 64 numbers (checked, clipped, rounded
   onto the lattice, summed, exact discrete Gaussian noise from the OS CSPRNG), the whole ``Aggregator`` call
   without a ledger (target: < 2 s on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def _dp_accounting_sigma(N: int, eps: float, delta: float, S: float, guess: float) -> float:
    import dp_accounting

    def event(sigma: float):
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma / S), N)

    return dp_accounting.calibrate_dp_mechanism(
        lambda: dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4), event, eps, delta,
        dp_accounting.ExplicitBracketInterval(0.9 * guess, 1.1 * guess), tol=1e-7 * guess)


def calibration_table() -> None:
    from darrm_opt.privacy.gaussian_mean import calibrate

    eps, delta, K = 1.0, 1e-5, 250
    print(f"1. calibration, K = {K}, R = 1, total (ε, δ) = ({eps:g}, {delta:g})")
    print(f"{'N':>6} {'σ exact':>12} {'σ dp_accounting':>16} {'rel. diff':>10} {'σ released':>12} "
          f"{'rel. diff':>10} {'ε verified':>11} {'ε ledger PLD':>12} {'seconds':>8}")
    for N in (1, 10, 100, 1000, 10_000):
        t = time.perf_counter()
        cal = calibrate(N, eps, delta, K=K, dim=64)
        seconds = time.perf_counter() - t
        ref = _dp_accounting_sigma(N, eps, delta, 2 / K, cal.sigma_exact)
        ledger = "—" if cal.epsilon_ledger is None else f"{cal.epsilon_ledger:.6f}"
        print(f"{N:>6} {cal.sigma_exact:>12.8f} {ref:>16.8f} {cal.sigma_exact / ref - 1:>10.1e} {cal.sigma:>12.8f} "
              f"{cal.sigma / ref - 1:>10.1e} {cal.epsilon_spent:>11.6f} {ledger:>12} {seconds:>8.2f}")


def eq15_table() -> None:
    from darrm_opt.privacy.gaussian_mean import eq15_sigma, exact_sigma

    print("\n2. eq. 15 (RDP, the paper) against the exact composition (σ per unit sensitivity · √N; the ratio "
          "does not depend on N)")
    print(f"{'(ε, δ)':>14} {'N':>6} {'σ eq. 15':>10} {'σ exact':>10} {'ratio':>7}")
    for eps, delta, N, S in ((8.0, 1e-3, 80, 2 / 8), (8.0, 1e-3, 1000, 1.0), (2.0, 1e-5, 1000, 1.0),
                             (1.0, 1e-5, 1000, 1.0), (1.0, 1e-5, 10_000, 1.0)):
        a, b = eq15_sigma(N, eps, delta, S), exact_sigma(N, eps, delta, S)
        note = "  (the paper's experiment: K = 8, autoencoded)" if N == 80 else ""
        print(f"{f'({eps:g}, {delta:g})':>14} {N:>6} {a:>10.4f} {b:>10.4f} {a / b:>7.3f}{note}")


def rate_table(repeat: int) -> None:
    from darrm_opt.mechanisms.gaussian_mean import gaussian_mean_table
    from darrm_opt.privacy.gaussian_mean import calibrate
    from darrm_opt.release.release import Aggregator

    N, K, dim = 10_000, 250, 64
    cal = calibrate(N, 1.0, 1e-5, K=K, dim=dim)
    table = gaussian_mean_table(cal.params)
    outputs = np.random.default_rng(0).random((N, K, dim)) * 0.2
    agg = Aggregator(table)
    runs = []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        means = agg(outputs)
        runs.append((time.perf_counter() - w, time.process_time() - c))
    sampler = agg._sampler
    w, c = time.perf_counter(), time.process_time()
    prepared = sampler.prepare(outputs)
    prep = (time.perf_counter() - w, time.process_time() - c)
    w, c = time.perf_counter(), time.process_time()
    sampler.draw(prepared)
    draw = (time.perf_counter() - w, time.process_time() - c)
    best = min(runs)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"\n3. aggregate rate: {N} queries × K = {K} × l = {dim} ({outputs.nbytes / 2**20:.0f} MiB of float64), "
          f"σ = {cal.sigma:.4g}, noise n = {cal.params.noise}; {os.cpu_count()} CPUs visible, load average "
          f"{load:.1f} (CPU seconds: this process's user + system time, unaffected by others' load)")
    print(f"{'call':>30} {'wall s':>8} {'CPU s':>8}")
    print(f"{'Aggregator(table)(outputs)':>30} {best[0]:>8.3f} {best[1]:>8.3f}   (best of {repeat})")
    print(f"{'  prepare (check, clip, sum)':>30} {prep[0]:>8.3f} {prep[1]:>8.3f}")
    print(f"{'  draw (N·l discrete Gauss.)':>30} {draw[0]:>8.3f} {draw[1]:>8.3f}")
    print(f"queries per second: {N / best[0]:,.0f}; check: std of (release − mean) / σ = "
          f"{float(np.std(means - outputs.mean(axis=1)) / cal.sigma):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    calibration_table()
    eq15_table()
    rate_table(args.repeat)


if __name__ == "__main__":
    main()
