"""Budget planning against the paper's fixed per-answer choice, on the paper's own total budgets.

    python benchmarks/plan_budget.py            # MNIST, Fashion-MNIST (Table 2) and Table 5 budgets, K = 11
    python benchmarks/plan_budget.py --k41      # also the MNIST Q = 100 budget at K = 41 (timing goal < 60 s)

For each setting (K teachers each (ε, Δ)-DP, Q answers, the paper's total (ε_B, δ_B) from general
composition of its per-answer choice) it prints the paper's choice (m, δ = 1 − (1 − Δ)^m), the ε its Q
answers really spend at δ_B by exact composition of its certified profile, and its expected error; then the
plan (darrm_opt.plan_job, the darrm offer): chosen (m, δ), spent ε at δ_B, expected error, candidates tried, wall and
CPU seconds of the plan.
"""

from __future__ import annotations

import argparse
import time

from darrm_opt.mechanisms import plan_job
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve
from darrm_opt.planning.job import Job
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.profile import privacy_profile

#: (name, K, ε, Δ, Q, ε_B, δ_B, paper's m): notes/darrm-math.md "Composition" (Tables 2 and 5)
SETTINGS = [
    ("MNIST", 11, 0.0892, 1e-4, 20, 5.352, 0.006, 3),
    ("MNIST", 11, 0.0892, 1e-4, 50, 9.901, 0.015, 3),
    ("MNIST", 11, 0.0892, 1e-4, 100, 15.044, 0.030, 3),
    ("Fashion", 11, 0.0852, 1e-4, 100, 14.219, 0.030, 3),
    ("Table 5", 11, 0.0892, 1e-4, 100, 4.202, 0.0101, 1),
]
K41 = [("MNIST K=41", 41, 0.0892, 1e-4, 100, 15.044, 0.030, 3)]


def row(name, K, eps, tdelta, Q, be, bd, m_paper) -> str:
    params = Params(K=K, m=m_paper, epsilon=eps, teacher_delta=tdelta)
    sol = solve(params)
    paper_spent = exact_epsilon([(privacy_profile(params, sol.gamma), Q)], bd)
    t0, c0 = time.perf_counter(), time.process_time()
    p, _, _ = plan_job(Job(K=K, queries=Q, budget_epsilon=be, budget_delta=bd, teachers="shared", epsilon=eps,
                           teacher_delta=tdelta))
    chosen = p.table.params
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return (f"{name:<11} {K:>3} {Q:>4} ({be:g}, {bd:g})  paper m={m_paper} δ={params.delta:.3g}: "
            f"ε={paper_spent:.3f} err={sol.expected_error:.3g}  |  plan m={chosen.m:.4g} δ={chosen.delta:.3g}: "
            f"ε={p.epsilon_spent:.3f} err={p.expected_error:.3g}  [{len(p.plan['candidates'])} cand, "
            f"{wall:.1f} s wall, {cpu:.1f} s CPU]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k41", action="store_true", help="also plan at K = 41")
    args = ap.parse_args()
    print("setting       K    Q  budget (ε_B, δ_B)  | paper's choice: spent ε at δ_B, E[error] | plan")
    for s in SETTINGS + (K41 if args.k41 else []):
        print(row(*s), flush=True)


if __name__ == "__main__":
    main()
