"""Issue 37's server row: RSS of every process of ``darrm-opt serve --workers 2`` idle and after a minute of 1-row load.

    python benchmarks/serve_memory.py                 # SQLite, 2 workers, 60 s of POST /v1/aggregate (1 row)
    python benchmarks/serve_memory.py --seconds 20

The server (``darrm-opt serve``, a fresh SQLite file) and its children (workers, composition children) are summed
by psutil: idle 5 s after it answers /readyz, the peak sampled every 0.5 s during the load (benchmarks/serve_load.py's
client: a pure-DP K = 11 table, one ledger composing every debit exactly, 32 keep-alive connections), and at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import ROOT, free_port, measure  # noqa: E402

BEFORE = {"idle": "346 MB (issue 37: 450–580 MB)", "load": "1.18 GB (issue 37: 1.2–1.4 GB)"}
TARGET = {"idle": "≤ 400 MB", "load": "≤ 1 GB"}


def tree_rss_mb(pid: int) -> float:
    proc = psutil.Process(pid)
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    key = uuid.uuid4().hex
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
        env.update({"DARRM_API_KEYS": key, "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")})
        log = open(Path(tmp) / "server.log", "wb")  # noqa: SIM115
        proc = subprocess.Popen([sys.executable, "-m", "darrm_opt", "serve", "--workers", str(a.workers), "--port",
                                 str(port), "--database-url", f"sqlite:///{tmp}/bench.db"], cwd=tmp, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                        break
                time.sleep(0.5)
            time.sleep(5.0)
            idle = tree_rss_mb(proc.pid)
            peak = [idle]
            stop = threading.Event()

            def sample() -> None:
                while not stop.wait(0.5):
                    peak[0] = max(peak[0], tree_rss_mb(proc.pid))

            t = threading.Thread(target=sample, daemon=True)
            t.start()
            out = measure(url, key, rows=1, connections=32, seconds=a.seconds, warmup=2.0)
            stop.set()
            t.join()
            end = tree_rss_mb(proc.pid)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
            log.close()
    print("| server (--workers 2, SQLite) | before | now | target |")
    print("|---|---|---|---|")
    print(f"| RSS idle | {BEFORE['idle']} | {idle:.0f} MB | {TARGET['idle']} |")
    print(f"| RSS after {a.seconds:g} s of 1-row load (peak during it) | {BEFORE['load']} | {end:.0f} MB "
          f"({peak[0]:.0f} MB) | {TARGET['load']} |")
    print(f"({out['requests_per_s']:.0f} requests/s, p99 {out['p99_ms']:.1f} ms, codes {out['codes']})")


if __name__ == "__main__":
    main()
