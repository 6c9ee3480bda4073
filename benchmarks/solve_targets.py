"""The solve-side targets of issue 37: CPU seconds and peak RSS of each workload, beside the issue's figure.

Each workload runs in a fresh subprocess; its CPU seconds (user + sys) and peak RSS are that child's own, read
by ``os.wait4`` (the kernel's accounting of the child and its waited descendants), so threads and BLAS are
counted and a loaded machine changes the wall time more than the CPU seconds. Prints one row per workload:

    python benchmarks/solve_targets.py                       # K = 151 json and table (about a minute of CPU)
    python benchmarks/solve_targets.py --all                 # every row of the issue (K = 251, pure 1001: long)
    python benchmarks/solve_targets.py --only k151-json,pure-501
    python benchmarks/solve_targets.py --tree /work/main     # before (that checkout) beside after (this one)

"issue" is the issue's figure (main before this work, the same 2-core machine). With ``--tree`` each workload
runs first in that checkout ("before") and then in the checkout holding this script ("after"), back to back,
so both figures of a row are taken under the same load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

SOLVE = ("from darrm_opt.model.params import Params; from darrm_opt.optimize.optimizer import solve; "
         "s = solve(Params({K}, 3, epsilon=0.1, teacher_delta={td}, delta={delta})); "
         "assert s.certificate.certified")

#: name -> (description, command after the interpreter, issue's CPU-s, issue's RSS MB, target)
WORKLOADS: dict[str, tuple[str, list[str], float, float, str]] = {
    "k151-json": ("K = 151, m = 3, Δ = 1e-5: `darrm-opt solve --format json`",
                  ["-m", "darrm_opt", "solve", "--K", "151", "--m", "3", "--format", "json", "-q",
                   "--out", os.devnull], 31.6, 1020, "≤ 8 CPU-s"),
    "k151-table": ("K = 151, m = 3, Δ = 1e-5: `darrm-opt solve --format table`",
                   ["-m", "darrm_opt", "solve", "--K", "151", "--m", "3", "-q", "--out", os.devnull], 19.0, 0, ""),
    "k251": ("K = 251, m = 3, Δ = 1e-5: `solve()`",
             ["-c", SOLVE.format(K=251, td=1e-5, delta=None)], 200.7, 3600, "≤ 60 CPU-s, ≤ 2 GB"),
    "pure-1001": ("pure DP K = 1001, m = 3: `solve()`",
                  ["-c", SOLVE.format(K=1001, td=0.0, delta=0.0)], 146.8, 2700, "≤ 30 CPU-s"),
    "pure-501": ("pure DP K = 501, m = 3: `solve()`",
                 ["-c", SOLVE.format(K=501, td=0.0, delta=0.0)], 0, 902, "≤ 600 MB"),
}
DEFAULT = ("k151-json", "k151-table")


def measure(cmd: list[str], tree: str | None, timeout: float) -> tuple[float, float, float, int]:
    """(CPU-s, peak RSS MB, wall s, exit status) of ``python cmd`` in a child process."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree
    t0 = time.perf_counter()
    # run in the tree itself: `python -c` and `-m` put the working directory ahead of PYTHONPATH
    proc = subprocess.Popen([sys.executable, *cmd], env=env, cwd=tree or None, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.stderr.write(proc.stderr.read().decode()[-2000:] if proc.stderr else "")
    return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024, wall, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="every workload of the issue")
    ap.add_argument("--only", help="comma-separated workload names: " + ", ".join(WORKLOADS))
    ap.add_argument("--tree", help="another checkout (PYTHONPATH) whose figures are printed beside this one's")
    ap.add_argument("--timeout", type=float, default=3600.0)
    a = ap.parse_args()
    names = a.only.split(",") if a.only else list(WORKLOADS) if a.all else list(DEFAULT)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [("before", a.tree), ("after", here)] if a.tree else [("CPU-s, peak RSS", here)]
    print(f"load average at start: {os.getloadavg()[0]:.2f}; " + "; ".join(f"{n}: {t}" for n, t in trees))
    print("| workload | issue | target | " + " | ".join(n for n, _ in trees) + " |")
    print("|---|---:|---|" + "---:|" * len(trees))
    for name in names:
        desc, cmd, cpu0, rss0, target = WORKLOADS[name]
        cells = []
        for _, tree in trees:
            cpu, rss, wall, rc = measure(cmd, tree, a.timeout)
            cells.append(f"{cpu:.1f} CPU-s, {rss:.0f} MB" + ("" if rc == 0 else f" (exit {rc})"))
        issue = ", ".join(x for x in (f"{cpu0} CPU-s" if cpu0 else "", f"{rss0:.0f} MB" if rss0 else "") if x)
        print(f"| {desc} | {issue or '—'} | {target or '—'} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
