"""Subsampled teachers on issue 35's jobs: does reading m < K teachers per answer beat the full ensemble?

    python benchmarks/subsample.py                       # K = 250, prior paper, (2, 1e-5), Q = 100 and 1000
    python benchmarks/subsample.py --queries 100 --ms 250,125
    python benchmarks/subsample.py --before /work/main   # also the whole plan on another tree (no subsampling)

For each job, one fresh interpreter per row (``os.wait4``: user + sys CPU seconds and peak RSS, imports
included): the ``darrm-pate`` plan with each fixed m (``Job.subsample``; m = K is the table of every teacher),
its expected error against the majority of all K, ε spent by the ledger's accounting and the table's own ε;
then the whole plan (every kind, ``plan_job``) on this tree, where darrm-pate searches m itself, and with
``--before`` on another tree, back to back.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

FIXED = """
import json, sys
from darrm_opt.mechanisms import mechanism
from darrm_opt.planning.job import Job
K, Q, m = {K}, {Q}, {m}
offer = mechanism("darrm-pate").plan(Job(K, Q, 2.0, 1e-5, subsample=m))
p = offer.table.params
print(json.dumps(dict(m=p.m, error=offer.expected_error, spent=offer.epsilon_spent, table_epsilon=p.epsilon,
                      table_delta=p.delta)))
"""

WHOLE = """
import json
from darrm_opt.mechanisms import plan_job
from darrm_opt.planning.job import Job
best, offers, refused = plan_job(Job({K}, {Q}, 2.0, 1e-5))
pate = [o for o in offers if o.mechanism == "darrm-pate"]
m = getattr(pate[0].table.params, "subsample", None) if pate else None
print(json.dumps(dict(mechanism=best.mechanism, error=best.expected_error, spent=best.epsilon_spent,
                      pate_error=pate[0].expected_error if pate else None, pate_m=m or {K})))
"""


def child(code: str, tree: Path) -> tuple[dict, float, float]:
    """Run ``code`` in a fresh interpreter on ``tree``: (its JSON line, CPU seconds, peak RSS in MB), read by
    ``os.wait4`` of the child (stderr to a file, so that no pipe fills while it runs)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env["PYTHONPATH"] = str(tree)
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=err, env=env,
                                text=True)
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"child failed: {err.read()[-2000:]}")
    return json.loads(out.strip().splitlines()[-1]), ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--K", type=int, default=250)
    ap.add_argument("--queries", default="100,1000")
    ap.add_argument("--ms", default=None, help="the m to try (default K, K/2, K/4, K/8)")
    ap.add_argument("--before", type=Path, default=None, help="another tree for the whole plan (before)")
    a = ap.parse_args()
    K = a.K
    ms = [int(x) for x in a.ms.split(",")] if a.ms else [K, round(K / 2), round(K / 4), round(K / 8)]
    print(f"K = {K}, prior paper, budget (2, 1e-5); darrm-pate with m of K teachers per answer")
    print("| Q | m | table ε | expected error | ε spent | CPU-s | peak MB |")
    print("|---|---|---|---|---|---|---|")
    for Q in (int(q) for q in a.queries.split(",")):
        for m in ms:
            r, cpu, mb = child(FIXED.format(K=K, Q=Q, m=m), HERE)
            print(f"| {Q} | {r['m']} | {r['table_epsilon']:.5g} | {r['error']:.5g} | {r['spent']:.5f} | {cpu:.1f} | "
                  f"{mb:.0f} |", flush=True)
    print()
    print("whole plan (every kind): chosen mechanism and error; darrm-pate's offer and its m")
    print("| Q | tree | chosen | error | darrm-pate error | its m | CPU-s | peak MB |")
    print("|---|---|---|---|---|---|---|---|")
    for Q in (int(q) for q in a.queries.split(",")):
        trees = [("after", HERE)] + ([("before", a.before)] if a.before else [])
        for name, tree in trees:
            r, cpu, mb = child(WHOLE.format(K=K, Q=Q), tree)
            print(f"| {Q} | {name} | {r['mechanism']} | {r['error']:.5g} | {r['pate_error']:.5g} | {r['pate_m']} | "
                  f"{cpu:.1f} | {mb:.0f} |", flush=True)


if __name__ == "__main__":
    main()
