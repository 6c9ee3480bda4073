"""The top-two multi-class rule (darrm-multiclass-top2) against darrm-multiclass and GNMax, K = 250, C = 10.

    python benchmarks/multiclass_top2.py                 # both priors, Q = 1 and Q = 100
    python benchmarks/multiclass_top2.py --only-q1       # the per-answer rows only

Per answer (Q = 1, (ε₀, δ₀) = (1, 1e-5)): the optimal certified table of each kind and GNMax with σ calibrated
by exact Gaussian DP for one answer. Planned (Q = 100, total (2, 1e-5)): each kind's ``plan`` offer (the
per-answer calibration of darrm_opt.planning.multiclass_plan, its ε the ledger's exact composition) and
GNMax-GDP (σ = √Q·σ₁, as benchmarks/job_plan.py). Errors are exact expected errors under the prior
(Pr[answer ≠ true class]); seconds are wall-clock on this machine, RSS the process peak.
"""

from __future__ import annotations

import argparse
import resource
import time

K, C = 250, 10
PRIORS = [("paper", "paper"), ("Dirichlet(9, 1/9…)", f"dirichlet:9,{1 / 9!r}")]


def gdp(Q: int, eps: float, delta: float, prior: str) -> float:
    from darrm_opt.experiments.multiclass_compare import gnmax_error
    from darrm_opt.model.multiclass import MulticlassPrior
    from darrm_opt.privacy.gnmax import gnmax_sigma_over_answers

    return float(gnmax_error(K, C, gnmax_sigma_over_answers(Q, eps, delta), MulticlassPrior.parse(prior)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only-q1", action="store_true")
    ap.add_argument("--cap", type=int, default=None, help="the top-two rule's gap cap G (default: the kind's)")
    args = ap.parse_args()
    from darrm_opt.mechanisms import mechanism
    from darrm_opt.model.multiclass import MulticlassParams
    from darrm_opt.model.top2 import DEFAULT_CAP, Top2Params
    from darrm_opt.optimize.multiclass import solve_multiclass
    from darrm_opt.optimize.top2 import solve_top2
    from darrm_opt.planning.job import Job

    cap = args.cap or DEFAULT_CAP
    print(f"K = {K}, C = {C}, top-two gap cap G = {cap}")
    print(f"{'prior':20s} {'Q':>4s} {'budget':>12s} {'darrm-multiclass':>17s} {'top2':>10s} {'GNMax(GDP)':>11s} "
          f"{'top2 s':>7s} {'top2 rounds/rows':>16s}")
    for name, prior in PRIORS:
        mc = solve_multiclass(MulticlassParams(K, C, 1.0, 1e-5, prior)).expected_error
        t1 = time.perf_counter()
        sol = solve_top2(Top2Params(K, C, 1.0, 1e-5, prior, cap))
        t2 = time.perf_counter()
        print(f"{name:20s} {1:4d} {'(1, 1e-5)':>12s} {mc:17.3e} {sol.expected_error:10.3e} "
              f"{gdp(1, 1.0, 1e-5, prior):11.3e} {t2 - t1:7.1f} {sol.rounds:>7d}/{sol.rows:<8d}", flush=True)
    if args.only_q1:
        return
    for name, prior in PRIORS:
        job = Job(K=K, queries=100, budget_epsilon=2.0, budget_delta=1e-5, classes=C, prior=prior)
        offers = {}
        for kind in ("darrm-multiclass", "darrm-multiclass-top2"):
            t = time.perf_counter()
            o = mechanism(kind).plan(job)
            offers[kind] = (o, time.perf_counter() - t)
        mc, top = offers["darrm-multiclass"], offers["darrm-multiclass-top2"]
        print(f"{name:20s} {100:4d} {'(2, 1e-5)':>12s} {mc[0].expected_error:17.3e} {top[0].expected_error:10.3e} "
              f"{gdp(100, 2.0, 1e-5, prior):11.3e} {top[1]:7.1f}   ε₀ = {top[0].details['epsilon0']:.4g} "
              f"(multiclass ε₀ = {mc[0].details['epsilon0']:.4g}); spent ε = {top[0].epsilon_spent:.4g}", flush=True)
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
