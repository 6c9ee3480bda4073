"""Time and memory of one solve as the service runs it, by kind and size: the table behind the service's
cost model (``darrm_opt.mechanisms.cost``).

Each solve runs in a fresh process (``Mechanism.solve``: the optimal γ, its certificate and its privacy
profile, with the default solver), after its imports: wall seconds of the solve and the peak RSS the process
reaches above its RSS after the imports (MB). The machine may be shared: the wall seconds then include time
lost to other processes (the model keeps the largest of repeated runs, so it errs towards refusing).

    python benchmarks/solve_cost.py                                   # the model's table (several minutes)
    python benchmarks/solve_cost.py --cases darrm:0:51 darrm:1e-5:25 --repeat 2

A case is KIND:TEACHER_DELTA:K (kind darrm, m = 3, ε = 0.1; TEACHER_DELTA 0 is pure DP).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

DEFAULT = ["darrm:0:51", "darrm:0:101", "darrm:0:201", "darrm:0:401",
           "darrm:1e-5:11", "darrm:1e-5:25", "darrm:1e-5:51", "darrm:1e-5:101"]

CHILD = """
import json, resource, sys, time
from darrm_opt.mechanisms import mechanism_for
from darrm_opt.model.params import Params

def rss_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024

params = Params({K}, 3, 0.1, {delta})
base = rss_mb()
t0 = time.perf_counter()
mechanism_for(params).solve(params, solver="highs", teachers="shared")
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"seconds": wall, "memory_mb": max(peak - base, 0.0)}}))
"""


def run(kind: str, delta: str, K: int) -> dict:
    assert kind == "darrm", "only the binary DaRRM kind is modelled"
    out = subprocess.run([sys.executable, "-c", CHILD.format(K=K, delta=float(delta))], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="*", default=DEFAULT)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    print("| kind | teachers' Δ | K | seconds (wall) | memory (MB above imports) |")
    print("|---|---|---|---|---|")
    rows = []
    for case in a.cases:
        kind, delta, K = case.split(":")
        runs = [run(kind, delta, int(K)) for _ in range(a.repeat)]
        worst = {"seconds": max(r["seconds"] for r in runs), "memory_mb": max(r["memory_mb"] for r in runs)}
        rows.append((kind, float(delta) > 0, int(K), round(worst["seconds"], 2), round(worst["memory_mb"])))
        print(f"| {kind} | {delta} | {K} | {worst['seconds']:.2f} | {worst['memory_mb']:.0f} |", flush=True)
    print("\nas the model's constants (kind, approximate, K, seconds, MB):")
    for r in rows:
        print(f"    {r},")


if __name__ == "__main__":
    main()
