"""Issue 37's planning rows: CPU seconds (user + sys) and peak RSS of each plan, run in a fresh process.

    python benchmarks/plan_targets.py                    # every row
    python benchmarks/plan_targets.py --only 0,5         # some rows (0-based)
    python benchmarks/plan_targets.py --values out.json  # also every offer's values, to compare two commits

Each row runs in its own interpreter (``os.wait4`` gives that process's user + sys seconds and peak RSS,
imports included): the toy row is the CLI itself (``darrm-opt plan ... --format json``), the others call
:func:`darrm_opt.mechanisms.plan_job`. ``before`` is the figure issue 37 measured on this 2-core machine;
wall time is not shown (the machine is shared). ``--values`` writes each offer's mechanism, expected error,
ε spent and details (floats as :meth:`float.hex`), so that two commits can be compared bit for bit.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TOY = ["plan", "--K", "11", "--teachers", "disjoint-nonprivate", "--queries", "100", "--budget", "8,1e-3",
       "--format", "json"]

#: (name, Job fields or None for the CLI toy row, before: CPU-s and peak MB, target)
ROWS: list[tuple[str, dict[str, Any] | None, str, str]] = [
    ("toy plan K=11 Q=100 (CLI)", None, "24.5–27 CPU-s, 1.86 GB", "≤ 3 CPU-s, ≤ 300 MB"),
    ("K=250 binary, paper, Q=100", dict(K=250, queries=100, budget_epsilon=2.0, budget_delta=1e-5),
     "4.8–28 CPU-s, 0.16–1.5 GB", "≤ 5 CPU-s, ≤ 500 MB"),
    ("K=250 binary, Beta(9,1), Q=100", dict(K=250, classes=2, queries=100, budget_epsilon=2.0, budget_delta=1e-5,
                                            prior="dirichlet:9,1"), "4.8–28 CPU-s, 0.16–1.5 GB", "≤ 5 CPU-s, ≤ 500 MB"),
    ("K=250 C=10, paper, Q=100", dict(K=250, classes=10, queries=100, budget_epsilon=2.0, budget_delta=1e-5),
     "4.8–28 CPU-s, 0.16–1.5 GB", "≤ 5 CPU-s, ≤ 500 MB"),
    ("K=250 C=10, Dirichlet, Q=1000", dict(K=250, classes=10, queries=1000, budget_epsilon=8.0, budget_delta=1e-6,
                                           prior=f"dirichlet:3,{1 / 9!r}"),
     "4.8–28 CPU-s, 0.16–1.5 GB", "≤ 5 CPU-s, ≤ 500 MB"),
    ("K=250 binary, paper, Q=1", dict(K=250, queries=1, budget_epsilon=2.0, budget_delta=1e-5),
     "4.8–28 CPU-s, 0.16–1.5 GB", "≤ 5 CPU-s, ≤ 500 MB"),
    ("K=5 binary PATE, Q=10, (8, 1e-3)", dict(K=5, queries=10, budget_epsilon=8.0, budget_delta=1e-3,
                                               teachers="disjoint-nonprivate"), "97 CPU-s, 1.8 GB (e51f6a9)", "—"),
    ("shared K=101 Q=100 (MNIST ε, Δ)", dict(K=101, queries=100, budget_epsilon=15.044, budget_delta=0.03,
                                              teachers="shared", epsilon=0.0892, teacher_delta=1e-4),
     "119 CPU-s, 959 MB", "≤ 20 CPU-s"),
]


def _exact(value: Any) -> Any:
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_exact(v) for v in value]
    return value


def _timeless(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def child(i: int) -> None:
    from darrm_opt.mechanisms import plan_job
    from darrm_opt.planning.job import Job

    _, offers, refused = plan_job(Job(**ROWS[i][1]))  # type: ignore[arg-type]
    out = [{"mechanism": o.label, "expected_error": o.expected_error, "epsilon_spent": o.epsilon_spent,
            "details": o.details, "plan": _timeless(o.plan)} for o in offers]
    print(json.dumps({"offers": _exact(out), "refused": sorted(refused)}))


def run(i: int) -> dict[str, Any]:
    """Row ``i`` in a fresh process under ``/usr/bin/time`` (user and sys seconds, peak RSS)."""
    if ROWS[i][1] is None:
        cmd = [sys.executable, "-m", "darrm_opt", *TOY]
    else:
        cmd = [sys.executable, __file__, "--child", str(i)]
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        proc = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", t.name, *cmd], capture_output=True,
                              text=True)
        if proc.returncode:
            raise SystemExit(f"row {i} failed:\n{proc.stderr[-2000:]}")
        user, sys_s, kb = t.read().split()[-3:]
    doc = json.loads(proc.stdout)
    if ROWS[i][1] is None:  # the chosen table's document with its alternatives, less the seconds taken
        doc = _exact(_timeless(doc))
    return {"cpu": float(user) + float(sys_s), "user": float(user), "sys": float(sys_s), "rss_mb": int(kb) / 1024,
            "values": doc}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="comma-separated row numbers (0-based)")
    ap.add_argument("--values", type=Path, help="write every offer's values (floats in hex) here")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        child(a.child)
        return
    rows = [int(x) for x in a.only.split(",")] if a.only else range(len(ROWS))
    print("| row | before (issue 37) | now: CPU-s (user + sys) | peak RSS | target |")
    print("|---|---|---|---|---|")
    values = {}
    for i in rows:
        r = run(i)
        values[ROWS[i][0]] = r["values"]
        print(f"| {ROWS[i][0]} | {ROWS[i][2]} | {r['cpu']:.1f} ({r['user']:.1f} + {r['sys']:.1f}) | "
              f"{r['rss_mb']:.0f} MB | {ROWS[i][3]} |", flush=True)
    if a.values:
        a.values.write_text(json.dumps(values, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
