"""Time and memory of one solve as the service runs it, for every kind solved by an LP, by the size its cost
grows with: the table behind the service's cost model (:mod:`darrm_opt.mechanisms.cost`).

Each solve runs in a fresh process (``Mechanism.solve``: the optimal table, its certificate and its privacy
profile, solver highs, the kind's first teachers' setting), after its imports: wall seconds of the solve and the
peak RSS the process reaches above its RSS after the imports (MB). Each case is placed on its kind's curve at its
size (``Mechanism.solve_cost_key``: K; K³·C for darrm-multiclass; K·slopes for darrm-pate-shaped, ...). The
machine may be shared: the wall seconds then include time lost to other processes (each case keeps the largest
of its repeats, so the model errs towards refusing).

    python benchmarks/solve_cost.py                     # every curve's default cases (~19 min on 2 cores)
    python benchmarks/solve_cost.py --kinds darrm-pate darrm-multiclass --repeat 2
    python benchmarks/solve_cost.py --cases darrm:K=201 darrm-multiclass-top2:K=51,gap_cap=64

A case is KIND:FIELD=VALUE,... in the fields of the kind's table documents; the fields not given are the kind's
defaults below (:data:`DEFAULTS`: darrm m = 3, ε = 0.1, Δ = 1e-5; the PATE-setting kinds a per-answer ε = 1;
the multi-class kinds C = 10; the shaped kinds the planner's target β = 3, scale 4, 120 slopes up to the slope
where the target is 1e-10). The default cases measure the PATE-setting kinds at δ = 0 and 10⁻⁵ (both kept on
their curve; the top-two rule has a curve for each). The kinds whose solve is no LP (gnmax, confident-gnmax,
gaussian-mean) have no curve: their release is defined by their parameters.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

#: the fields of a case not given, by kind
DEFAULTS: dict[str, dict[str, Any]] = {
    "darrm": {"m": 3, "epsilon": 0.1, "teacher_delta": 1e-5},
    "darrm-pate": {"target_epsilon": 1.0, "delta": 1e-5},
    "darrm-multiclass": {"classes": 10, "target_epsilon": 1.0, "delta": 1e-5},
    "darrm-pate-shaped": {"beta": 3.0, "target_scale": 4.0, "slopes": 120},
    "darrm-multiclass-shaped": {"classes": 10, "beta": 3.0, "target_scale": 4.0, "slopes": 120},
    "darrm-multiclass-top2": {"classes": 10, "target_epsilon": 1.0, "delta": 1e-5},
}

#: the default cases: enough sizes per curve to interpolate, each solve under ~1 min on 2 shared cores but the
#: top-two rule's K = 101 at δ = 0, stopped at --timeout (a lower bound the model reads as measured)
CASES: dict[str, list[str]] = {
    "darrm": ["K=51,teacher_delta=0", "K=101,teacher_delta=0", "K=201,teacher_delta=0", "K=401,teacher_delta=0",
              "K=11", "K=25", "K=51", "K=101"],
    "darrm-pate": [f"K={K},delta={d}" for K in (101, 251, 501, 1001) for d in (0, 1e-5)],
    "darrm-multiclass": [f"{case},delta={d}" for case in ("K=101", "K=250", "K=250,classes=100", "K=1000",
                                                           "K=2000,classes=12", "K=464,classes=1000")
                         for d in (0, 1e-5)] + ["K=1500,delta=0"],
    "darrm-pate-shaped": ["K=101", "K=251", "K=501", "K=501,slopes=2000"],
    "darrm-multiclass-shaped": ["K=51", "K=101", "K=101,classes=100", "K=250", "K=501", "K=101,slopes=1000",
                                "K=250,slopes=1000"],
    "darrm-multiclass-top2": [f"{case},delta={d}" for d in (1e-5, 0)
                              for case in ("K=25", "K=51", "K=101,classes=5", "K=75", "K=51,gap_cap=64", "K=101")]
                             + ["K=125,delta=1e-5"],
}

CHILD = """
import json, resource, sys, time
from darrm_opt.mechanisms import mechanism
from darrm_opt.model.shaped import slope_cap

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

kind, fields = sys.argv[1], json.loads(sys.argv[2])
if "slopes" in fields and "slope_max" not in fields:
    fields["slope_max"] = slope_cap(fields["beta"], fields["target_scale"], 1e-10)
m = mechanism(kind)
params = m.params_from(fields)
key = m.solve_cost_key(params)
base = rss_mb()
print(json.dumps({"curve": key.curve, "size": key.size, "feature": key.feature, "base_mb": base}), flush=True)
t0 = time.perf_counter()
m.solve(params, solver="highs", teachers=m.settings[0])
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": wall, "memory_mb": max(peak - base, 0.0)}), flush=True)
"""


def parse(case: str) -> tuple[str, dict[str, Any]]:
    """KIND:FIELD=VALUE,... as (kind, the fields with the kind's defaults)."""
    kind, _, spec = case.partition(":")
    if kind not in DEFAULTS:
        raise SystemExit(f"{case}: the kind must be one of {', '.join(DEFAULTS)}")
    fields = dict(DEFAULTS[kind])
    for item in filter(None, spec.split(",")):
        name, _, value = item.partition("=")
        fields[name] = json.loads(value)
    return kind, fields


def run(kind: str, fields: dict[str, Any], timeout: float) -> dict:
    """One solve in a fresh process; one still running after ``timeout`` seconds is stopped and reported at
    ``timeout`` seconds and its peak RSS so far (``timed_out``: lower bounds, which the model takes as they are)."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, kind, json.dumps(fields)], stdout=subprocess.PIPE,
                             text=True)
    assert child.stdout is not None
    head = json.loads(child.stdout.readline())
    try:
        child.wait(timeout)
    except subprocess.TimeoutExpired:
        with open(f"/proc/{child.pid}/status") as f:
            peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024
        child.kill()
        child.wait()
        return {**head, "seconds": float(timeout), "memory_mb": max(peak - head["base_mb"], 0.0), "timed_out": True}
    if child.returncode != 0:
        raise SystemExit(f"{kind} {fields}: the solve failed (exit {child.returncode})")
    return {**head, **json.loads(child.stdout.read().strip().splitlines()[-1]), "timed_out": False}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kinds", nargs="*", default=list(CASES), help="the kinds whose default cases run")
    ap.add_argument("--cases", nargs="*", help="these cases instead (KIND:FIELD=VALUE,...)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=330.0,
                    help="seconds after which a solve is stopped and reported as taking at least that long")
    a = ap.parse_args()
    cases = a.cases if a.cases is not None else [f"{k}:{c}" for k in a.kinds for c in CASES[k]]
    print("| kind | case | curve | size | seconds (wall) | memory (MB above imports) |")
    print("|---|---|---|---|---|---|")
    curves: dict[str, list[tuple[float, float, float]]] = {}
    stopped: dict[str, list[float]] = {}
    for case in cases:
        kind, fields = parse(case)
        runs = [run(kind, fields, a.timeout) for _ in range(a.repeat)]
        r = runs[0]
        seconds, mb = max(x["seconds"] for x in runs), max(x["memory_mb"] for x in runs)
        at_least = "≥ " if any(x["timed_out"] for x in runs) else ""
        curves.setdefault(r["curve"], []).append((r["size"], round(seconds, 2), round(mb)))
        if at_least:
            stopped.setdefault(r["curve"], []).append(r["size"])
        print(f"| {kind} | {case.partition(':')[2]} | {r['curve']} | {r['feature']} = {r['size']:.4g} | "
              f"{at_least}{seconds:.2f} | {at_least}{mb:.0f} |", flush=True)
    print("\nas the model's constants (darrm_opt.mechanisms.cost.MEASURED: curve -> [(size, seconds, MB)]):")
    for curve, points in curves.items():
        shown = ", ".join(f"({size:.6g}, {s}, {mb})" for size, s, mb in sorted(points))
        note = "".join(f"  # at {size:.6g}: at least (stopped at --timeout)" for size in stopped.get(curve, []))
        print(f"    {curve!r}: [{shown}],{note}")


if __name__ == "__main__":
    main()
