"""Issue 35's jobs: the stability-based release with a sparse-vector test against today's best worst-case offer.

    python benchmarks/contested.py                 # every job: the stability release's planned figures
    python benchmarks/contested.py --only 5        # one job (0-based index in JOBS)
    python benchmarks/contested.py --compare       # and today's best worst-case offer (plan_job; slow)

Jobs (K = 250): {0/1 votes with the ``paper`` prior, class labels C = 2 with Dirichlet(9, 1) (the issue's
Beta(9, 1)), C = 10 with ``paper``, C = 10 with Dirichlet(3, 1/9…)} × Q ∈ {1, 100, 1000} × (ε_B, δ_B) ∈ {(1, 1e-5),
(2, 1e-5), (8, 1e-6)}, and the weak-agreement job (0/1 votes, 90 % of queries with L = 225 of 250, the rest
uniform over L = 126..224) at Q = 100 and 1000, (2, 1e-5), where GNMax calibrated by PLD errs 0.00938 and 0.0743
(the issue's figures).

Each job runs in a fresh interpreter (its peak RSS is the row's memory, today's planning included with
--compare; CPU s is the stability plan's, today's in brackets). The stability release's figures are
exact (:func:`darrm_opt.privacy.stability.job_error`, ⊥ counted as an error), for the parameters that
:func:`darrm_opt.planning.stability_plan.plan_stability` chose within the budget (ε, δ of the whole job).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

K = 250
VOTES = [("binary paper", None, "paper"), ("C=2 Dirichlet(9,1)", 2, "dirichlet:9,1"),
         ("C=10 paper", 10, "paper"), ("C=10 Dirichlet(3,1/9)", 10, f"dirichlet:3,{1 / 9!r}")]
BUDGETS = [(1.0, 1e-5), (2.0, 1e-5), (8.0, 1e-6)]
#: (name, C or None, prior, Q, ε_B, δ_B)
JOBS = [(name, C, prior, Q, e, d) for name, C, prior in VOTES for Q in (1, 100, 1000) for e, d in BUDGETS]
JOBS += [("weak agreement", None, "weak", Q, 2.0, 1e-5) for Q in (100, 1000)]


def weak_law():
    """The weak-agreement job's law of d (0/1 votes): L = 225 w.p. 0.9, else uniform on 126..224."""
    import numpy as np

    from darrm_opt.privacy.stability import law_from_gaps

    alpha = np.zeros(K + 1)
    alpha[225] = 0.9
    alpha[126:225] += 0.1 / 99
    gaps = np.abs(2 * np.arange(K + 1) - K)
    return law_from_gaps(np.bincount(gaps, weights=alpha, minlength=K + 1), np.zeros(K + 1))


def one(i: int, compare: bool) -> dict:
    name, C, prior, Q, eps, delta = JOBS[i]
    t0, c0 = time.perf_counter(), time.process_time()
    if prior == "weak":
        from darrm_opt.planning import stability_plan

        law = weak_law()
        original = stability_plan.distance_law
        stability_plan.distance_law = lambda *a: law  # type: ignore[assignment]
        try:
            plan = stability_plan.plan_stability(K, C, prior, Q, eps, delta)
        finally:
            stability_plan.distance_law = original
    else:
        from darrm_opt.planning.stability_plan import plan_stability

        plan = plan_stability(K, C, prior, Q, eps, delta)
    row = {"name": name, "Q": Q, "budget": [eps, delta], "stability": plan.best.to_dict(),
           "cpu": time.process_time() - c0, "wall": time.perf_counter() - t0}
    if compare and prior != "weak":
        from darrm_opt.mechanisms import plan_job
        from darrm_opt.planning.job import Job

        c1 = time.process_time()
        try:
            best, _, _ = plan_job(Job(K=K, queries=Q, budget_epsilon=eps, budget_delta=delta, classes=C,
                                      prior=prior))
            row["today"] = [best.mechanism, best.expected_error]
        except Exception as exc:  # a job no kind serves is reported, not fatal to the table
            row["today"] = [f"none ({type(exc).__name__})", None]
        row["today_cpu"] = time.process_time() - c1
    row["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", type=int)
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(one(a.child, a.compare)))
        return
    rows = [a.only] if a.only is not None else range(len(JOBS))
    print(f"{'job':<22} {'Q':>5} {'(ε, δ)':>10} {'stability':>10} {'c':>3} {'answered':>10} {'⊥ share':>9} "
          f"{'today (CPU s)':>30} {'CPU s':>6} {'peak MB':>8}")
    for i in rows:
        cmd = [sys.executable, __file__, "--child", str(i)] + (["--compare"] if a.compare else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(f"{JOBS[i][0]}: failed\n{r.stderr[-2000:]}")
            continue
        d = json.loads(r.stdout.strip().splitlines()[-1])
        s = d["stability"]
        today = d.get("today")
        shown = "–" if today is None else (f"{today[0]} {today[1]:.3g}" if today[1] is not None else today[0])
        if today is not None:
            shown += f" ({d['today_cpu']:.0f})"
        print(f"{d['name']:<22} {d['Q']:>5} {str(tuple(d['budget'])):>10} {s['expected_error']:>10.3g} "
              f"{s['cutoff']:>3} {s['expected_answered']:>10.6g} {s['bottom_share']:>9.3g} {shown:>30} "
              f"{d['cpu']:>6.1f} {d['rss_mb']:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
