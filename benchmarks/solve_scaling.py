"""Seconds to a certified γ_opt as K grows (issues: core optimiser, scale, scale II).

Each workload runs in a fresh subprocess so that its peak RSS and CPU seconds are its own. Prints a table
with wall and CPU seconds (the machine may be shared: CPU/wall shows how much of it the run got).

    python benchmarks/solve_scaling.py                 # the core issue's workloads
    python benchmarks/solve_scaling.py --scale         # adds K = 61, 101 and pure K = 301, m = 30
    python benchmarks/solve_scaling.py --scale2        # scale II: K = 101 (m, ε variants), 151, pure 501, 1001
    python benchmarks/solve_scaling.py --scale2 --big  # and K = 251 (Δ > 0)
    python benchmarks/solve_scaling.py --quick         # K = 101, Δ = 1e-5 and pure K = 301 only
    python benchmarks/solve_scaling.py --only 41       # a subset (K values, comma-separated)

"obj gap" is Solution.objective_gap: how far the certified γ's objective can be below the exact optimum
(relative, from the last LP's proven dual bound; about 2.9e-8 of it is the LP's tightening of the bound by τ,
the rest the in-out stopping gap and the rows' dropped tiny entries).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve
from darrm_opt.model.corners import n_multisets
args = json.loads(sys.argv[1])
p = Params(args["K"], args["m"], epsilon=args.get("eps", 0.1), teacher_delta=args["td"], delta=args["delta"])
t, c = time.perf_counter(), time.process_time()
s = solve(p, mode=args["mode"], solver=args.get("solver", "highs"))
dt, cpu = time.perf_counter() - t, time.process_time() - c
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
ms = n_multisets(p.K, 4 if p.pure else 8)
print(json.dumps(dict(seconds=dt, cpu=cpu, iterations=s.iterations, active=s.active_constraints, sweeps=s.sweeps,
                      multisets=ms, rss_mb=rss, certified=s.certificate.certified,
                      sweep_seconds=s.sweep_seconds, lp_seconds=s.lp_seconds,
                      slack=s.certificate.bound - s.certificate.max_privacy_cost,
                      error=s.expected_error, gap=s.objective_gap)))
"""


def run(K, m, td, delta, mode, timeout, eps=0.1):
    arg = json.dumps(dict(K=K, m=m, td=td, delta=delta, mode=mode, eps=eps))
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, arg], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode:
        print(out.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def workloads(a) -> list[tuple]:
    """(K, m, Δ, δ, mode, ε) per row."""
    if a.quick:
        return [(101, 3, 1e-5, None, "lazy", 0.1), (301, 3, 0.0, 0.0, "lazy", 0.1)]
    work = [(11, 3, 1e-5, None, "lazy"), (21, 3, 1e-5, None, "lazy"), (31, 3, 1e-5, None, "lazy"),
            (41, 3, 1e-5, None, "lazy"), (101, 3, 0.0, 0.0, "lazy"), (201, 3, 0.0, 0.0, "lazy")]
    work += [(K, 3, 1e-5, None, "full") for K in (5, 7, 9, 11, 13, 15)]
    if a.scale:
        work += [(61, 3, 1e-5, None, "lazy"), (301, 30, 0.0, 0.0, "lazy"), (101, 3, 1e-5, None, "lazy")]
    work = [(*w, 0.1) for w in work]
    if a.scale2:
        work = [(101, 3, 1e-5, None, "lazy", 0.1)]
        work += [(101, m, 1e-5, None, "lazy", 0.1) for m in (1, 2.5, 10)]
        work += [(101, 3, 1e-5, None, "lazy", eps) for eps in (0.01, 1.0)]
        work += [(151, 3, 1e-5, None, "lazy", 0.1), (501, 3, 0.0, 0.0, "lazy", 0.1), (1001, 3, 0.0, 0.0, "lazy", 0.1)]
        if a.big:
            work.append((251, 3, 1e-5, None, "lazy", 0.1))
    if a.only:
        keep = {int(x) for x in a.only.split(",")}
        work = [w for w in work if w[0] in keep]
    return work


def _gap(gap) -> str:
    """The objective gap to the LP relaxation's bound (Solution.objective_gap), or '-'."""
    return "-" if gap is None else f"{gap:.1e}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", action="store_true", help="also the scale issue's workloads")
    ap.add_argument("--scale2", action="store_true", help="the scale II issue's workloads instead")
    ap.add_argument("--big", action="store_true", help="with --scale2: also K = 251")
    ap.add_argument("--quick", action="store_true", help="two workloads only (a smoke test)")
    ap.add_argument("--only", default="", help="comma-separated K values to run")
    ap.add_argument("--timeout", type=float, default=3600)
    a = ap.parse_args()
    print(f"{'K':>4} {'m':>4} {'ε':>5} {'Δ':>6} {'mode':>5} {'multisets':>15} {'wall s':>8} {'CPU s':>8} "
          f"{'sweep s':>8} {'LP s':>7} {'iters':>5} {'active':>6} {'sweeps':>6} {'peak MB':>8} {'slack':>9} "
          f"{'E[err]':>7} {'obj gap':>8} cert", flush=True)
    for K, m, td, delta, mode, eps in workloads(a):
        r = run(K, m, td, delta, mode, a.timeout, eps)
        if r is None:
            print(f"{K:>4} {m:>4g} {eps:>5g} {td:>6g} {mode:>5}  failed or timed out", flush=True)
            continue
        print(f"{K:>4} {m:>4g} {eps:>5g} {td:>6g} {mode:>5} {r['multisets']:>15,} {r['seconds']:>8.2f} "
              f"{r['cpu']:>8.2f} {r['sweep_seconds']:>8.2f} {r['lp_seconds']:>7.2f} {r['iterations']:>5} "
              f"{r['active']:>6} {r['sweeps']:>6} {r['rss_mb']:>8.0f} {r['slack']:>9.2e} {r['error']:>7.4f} "
              f"{_gap(r.get('gap')):>8} {'yes' if r['certified'] else 'NO'}", flush=True)


if __name__ == "__main__":
    main()
