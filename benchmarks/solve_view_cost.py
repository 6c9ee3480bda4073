"""CPU seconds of `darrm-opt solve` (table view and --format json) against its γ_opt solve alone.

Each command runs in a fresh process (imports included, as a user runs it); CPU = user + system seconds of
that process and its threads. The γ_opt row runs ``darrm_opt.optimize.optimizer.solve`` alone in the same
way. The machine may be shared: CPU seconds are what counts, wall seconds show how much of it the run got.

    python benchmarks/solve_view_cost.py              # K = 41, 101 (m = 3, ε = 0.1, Δ = 1e-5)
    python benchmarks/solve_view_cost.py --K 41 --repeat 3
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

SOLVE_ONLY = ("from darrm_opt.model.params import Params; from darrm_opt.optimize.optimizer import solve; "
              "solve(Params(K={K}, m={m}, epsilon=0.1, teacher_delta=1e-5))")


def measure(cmd: list[str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def best(cmd: list[str], repeat: int) -> tuple[float, float]:
    """The run with the least CPU of ``repeat`` (the others lost time to a shared machine)."""
    return min((measure(cmd) for _ in range(repeat)), key=lambda r: r[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", type=int, nargs="*", default=[41, 101])
    ap.add_argument("--m", type=float, default=3)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    py = sys.executable
    print(f"{'K':>5} {'γ_opt solve':>13} {'solve (table)':>15} {'ratio':>6} {'solve --format json':>20} {'ratio':>6}")
    for K in a.K:
        m = f"{a.m:g}"
        base = best([py, "-c", SOLVE_ONLY.format(K=K, m=m)], a.repeat)
        table = best([py, "-m", "darrm_opt", "solve", "--K", str(K), "--m", m, "-q"], a.repeat)
        js = best([py, "-m", "darrm_opt", "solve", "--K", str(K), "--m", m, "-q", "--format", "json"], a.repeat)
        print(f"{K:>5} {base[0]:>8.2f} CPU-s {table[0]:>10.2f} CPU-s {table[0] / base[0]:>5.2f}× "
              f"{js[0]:>15.2f} CPU-s {js[0] / base[0]:>5.2f}×", flush=True)
        print(f"{'':>5} {base[1]:>8.2f} wall  {table[1]:>10.2f} wall  {'':>6} {js[1]:>15.2f} wall", flush=True)


if __name__ == "__main__":
    main()
