"""The job planner on issue 22's targets: every mechanism's offer, the chosen one, seconds and peak memory.

    python benchmarks/job_plan.py              # the four targets (and binary K = 251, where darrm-pate offers)
    python benchmarks/job_plan.py --only 3     # one row (0-based)

Each job runs in a fresh interpreter (its peak RSS is the row's memory): ``plan_job`` (darrm_opt.mechanisms)
asks every kind for its most accurate certified table whose Q answers fit (ε_B, δ_B) by the ledger's exact
composition. GNMax-GDP is the issue's reference: continuous Gaussian noise calibrated by exact Gaussian DP
(σ = √Q·σ₁(ε_B, δ_B), Balle–Wang), its error computed in closed form (binary 0/1 prior: DaRRM's error of
γ(l) = erf(|2l − K|/(2σ)); otherwise darrm_opt.experiments.multiclass_compare.gnmax_error).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

#: (name, K, C or None, Q, ε_B, δ_B, prior)
JOBS = [
    ("binary, paper prior", 250, None, 100, 2.0, 1e-5, "paper"),
    ("binary, Beta(9, 1) prior", 250, 2, 100, 2.0, 1e-5, "dirichlet:9,1"),
    ("C = 10, paper prior", 250, 10, 100, 2.0, 1e-5, "paper"),
    ("C = 10, Dirichlet(3, 1/9…)", 250, 10, 1000, 8.0, 1e-6, f"dirichlet:3,{1 / 9!r}"),
    ("binary K = 251, paper prior", 251, None, 100, 2.0, 1e-5, "paper"),
]
TARGETS = ["≤ 1.0e-3", "≤ 4.68e-3", "≤ 4.0e-5", "≤ 0.083", "–"]


def gdp_error(K: int, C: int | None, Q: int, eps: float, delta: float, prior: str) -> float:
    from darrm_opt.privacy.gnmax import gnmax_sigma_over_answers

    sigma = gnmax_sigma_over_answers(Q, eps, delta)
    if C is None:
        from darrm_opt.model.objective import expected_error
        from darrm_opt.model.params import Prior
        from darrm_opt.privacy.gnmax import gnmax_gamma

        return float(expected_error(gnmax_gamma(K, sigma), Prior.parse(prior)))
    from darrm_opt.experiments.multiclass_compare import gnmax_error
    from darrm_opt.model.multiclass import MulticlassPrior

    return float(gnmax_error(K, C, sigma, MulticlassPrior.parse(prior)))


def one(i: int) -> dict:
    from darrm_opt.mechanisms import plan_job
    from darrm_opt.planning.job import Job

    name, K, C, Q, eps, delta, prior = JOBS[i]
    t0, c0 = time.perf_counter(), time.process_time()
    best, offers, refused = plan_job(Job(K=K, queries=Q, budget_epsilon=eps, budget_delta=delta, classes=C,
                                         prior=prior))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"name": name, "gdp": gdp_error(K, C, Q, eps, delta, prior), "chosen": best.mechanism,
            "offers": [(o.mechanism, o.expected_error, o.epsilon_spent, o.seconds) for o in offers],
            "refused": refused, "wall": wall, "cpu": cpu, "rss_mb": rss}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", type=int)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(one(a.child)))
        return
    rows = [a.only] if a.only is not None else range(len(JOBS))
    print(f"{'job':<30} {'GNMax-GDP':>10} {'target':>10} {'chosen':>16} {'wall s':>7} {'CPU s':>6} {'peak MB':>8}")
    for i in rows:
        r = subprocess.run([sys.executable, __file__, "--child", str(i)], capture_output=True, text=True)
        if r.returncode:
            print(f"{JOBS[i][0]}: failed\n{r.stderr[-2000:]}")
            continue
        d = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"{d['name']:<30} {d['gdp']:>10.4g} {TARGETS[i]:>10} {d['chosen']:>16} {d['wall']:>7.1f} "
              f"{d['cpu']:>6.1f} {d['rss_mb']:>8.0f}")
        for kind, err, spent, secs in d["offers"]:
            print(f"    {kind:<18} E[error] {err:<10.4g} ε spent {spent:<9.6g} ({secs:.1f} s)")
        for kind, why in d["refused"].items():
            print(f"    {kind:<18} no offer: {why[:90]}")


if __name__ == "__main__":
    main()
