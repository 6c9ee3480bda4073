"""Issue 35's jobs: every offer ``plan_job`` makes, the chosen one, and the stability release's figures.

    python benchmarks/contested.py                   # every job (slow: minutes per C = 10 job)
    python benchmarks/contested.py --only 21,36      # some jobs (0-based indices in JOBS, ranges A..B allowed)
    python benchmarks/contested.py --match weak      # the jobs whose name contains a text
    python benchmarks/contested.py --kinds stability,gnmax   # only these kinds' offers
    python benchmarks/contested.py --list            # the jobs and their indices

Jobs (K = 250, PATE's teachers): {0/1 votes with the ``paper`` prior, class labels C = 2 with Dirichlet(9, 1)
(the issue's Beta(9, 1)), C = 10 with ``paper``, C = 10 with Dirichlet(3, 1/9)} × Q ∈ {1, 100, 1000} ×
(ε_B, δ_B) ∈ {(1, 1e-5), (2, 1e-5), (8, 1e-6)}, and the weak-agreement job, 0/1 votes with the prior
``counts:225=0.9,126..224=0.1`` (90 % of queries with L = 225 of 250, the rest uniform over L = 126..224), at
Q = 100 and 1000, (2, 1e-5), where GNMax calibrated by PLD errs 0.00938 and 0.0743 (the issue's figures).

Each job runs ``plan_job`` in a fresh interpreter: its CPU seconds (user + sys of that process) and peak RSS
are the row's. Every offer's expected error is listed (``*`` marks the chosen one, ``(dd)`` a data-dependent
offer, whose ε is a sanitised target rather than a worst-case cap, never chosen under worst-case
accounting); for the stability release, the expected number of answered queries and the share of ⊥ (exact:
:func:`darrm_opt.privacy.stability.job_error`, ⊥ counted as an error).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys

K = 250
WEAK = "counts:225=0.9,126..224=0.1"
VOTES = [("binary paper", None, "paper"), ("C=2 Dirichlet(9,1)", 2, "dirichlet:9,1"),
         ("C=10 paper", 10, "paper"), ("C=10 Dirichlet(3,1/9)", 10, f"dirichlet:3,{1 / 9!r}")]
BUDGETS = [(1.0, 1e-5), (2.0, 1e-5), (8.0, 1e-6)]
#: (name, C or None, prior, Q, ε_B, δ_B)
JOBS = [(name, C, prior, Q, e, d) for name, C, prior in VOTES for Q in (1, 100, 1000) for e, d in BUDGETS]
JOBS += [("weak agreement", None, WEAK, Q, 2.0, 1e-5) for Q in (100, 1000)]


def one(i: int, kinds: list[str] | None) -> dict:
    from darrm_opt.mechanisms import plan_job
    from darrm_opt.planning.job import Job

    name, C, prior, Q, eps, delta = JOBS[i]
    row: dict = {"name": name, "Q": Q, "budget": [eps, delta]}
    try:
        best, found, refused = plan_job(Job(K=K, queries=Q, budget_epsilon=eps, budget_delta=delta, classes=C,
                                            prior=prior), kinds=kinds)
        row["chosen"] = best.label
        row["offers"] = [[o.label, o.expected_error, o.worst_case] for o in found]
        row["refused"] = refused
        stab = [o for o in found if o.mechanism == "stability"]
        if stab:
            row["stability"] = {k: stab[0].details[k] for k in ("expected_answered", "bottom_share", "cutoff")}
    except Exception as exc:  # a job no kind serves is reported, not fatal to the table
        row["chosen"] = f"none ({type(exc).__name__}: {exc})"
        row["offers"], row["refused"] = [], {}
    ru = resource.getrusage(resource.RUSAGE_SELF)
    row["cpu"] = ru.ru_utime + ru.ru_stime
    row["rss_mb"] = ru.ru_maxrss / 1024
    return row


def indices(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, dots, hi = part.strip().partition("..")
        out.extend(range(int(lo), int(hi) + 1) if dots else [int(lo)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="job indices, e.g. 21,36 or 0..8")
    ap.add_argument("--match", help="only jobs whose name contains this text")
    ap.add_argument("--kinds", help="only these kinds' offers (comma-separated)")
    ap.add_argument("--list", action="store_true", help="list the jobs and exit")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    kinds = a.kinds.split(",") if a.kinds else None
    if a.child is not None:
        print(json.dumps(one(a.child, kinds)))
        return
    rows = indices(a.only) if a.only else list(range(len(JOBS)))
    if a.match:
        rows = [i for i in rows if a.match in JOBS[i][0]]
    if a.list:
        for i in rows:
            print(i, *JOBS[i])
        return
    print(f"{'#':>2} {'job':<22} {'Q':>5} {'(ε, δ)':>10} {'chosen':>22} {'answered':>8} {'⊥ share':>9} "
          f"{'CPU s':>6} {'peak MB':>7}  offers (expected error; * chosen, (dd) data-dependent)")
    for i in rows:
        cmd = [sys.executable, __file__, "--child", str(i)] + (["--kinds", a.kinds] if a.kinds else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(f"{i:>2} {JOBS[i][0]}: failed\n{r.stderr[-2000:]}")
            continue
        d = json.loads(r.stdout.strip().splitlines()[-1])
        s = d.get("stability")
        ans = "–" if s is None else f"{s['expected_answered']:.6g}"
        bot = "–" if s is None else f"{s['bottom_share']:.3g}"
        offers = "; ".join(f"{'*' if lab == d['chosen'] else ''}{lab.replace(' (data-dependent)', ' (dd)')} "
                           f"{err:.3g}" for lab, err, _ in d["offers"])
        chosen = d["chosen"] if d["offers"] else d["chosen"][:60]
        e, dl = d["budget"]
        print(f"{i:>2} {d['name']:<22} {d['Q']:>5} {f'({e:g}, {dl:g})':>10} {chosen:>22} {ans:>8} {bot:>9} "
              f"{d['cpu']:>6.1f} {d['rss_mb']:>7.0f}  {offers}", flush=True)


if __name__ == "__main__":
    main()
