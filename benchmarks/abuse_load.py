"""Hostile bodies against ``POST /v1/aggregate``: time, server memory and /healthz latency meanwhile.

    python benchmarks/abuse_load.py            # starts its own server (SQLite, default settings)
    python benchmarks/abuse_load.py --quick    # the smaller sizes only
    python benchmarks/abuse_load.py --max-body-mib 64   # the server's DARRM_MAX_BODY_BYTES (default 16)

Starts ``uvicorn --factory darrm_opt.api.main:create_app`` (one worker, access log off, a temporary SQLite file,
default limits: DARRM_MAX_BODY_BYTES = 16 MiB, DARRM_MAX_ROWS = 100 000), creates a K = 11 table and a
ledger, then sends each body once while a second thread polls ``GET /healthz`` every 10 ms. For each body
it prints the status, the response time, the server's peak extra RSS (sampled every 5 ms from psutil,
minus the RSS before the request), the server's CPU seconds (user + system) spent on it, and the
/healthz latency (median and worst) while it ran. The goal of issue 11: every body up to the limit
answered in < 1 s with < 100 MB of extra memory, /healthz never stalled > 100 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
KEY = "bench-" + uuid.uuid4().hex[:8]
MiB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(workdir: Path, max_body: int) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env.update({"DARRM_DATABASE_URL": f"sqlite:///{workdir / 'bench.db'}", "DARRM_API_KEYS": KEY,
                "DARRM_MAX_BODY_BYTES": str(max_body),
                "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")})
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "darrm_opt.api.main:create_app", "--factory", "--host",
                             "127.0.0.1", "--port", str(port), "--log-level", "warning", "--no-access-log"],
                            cwd=workdir, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return proc, url
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("the server did not start")


def _sample(url: str, pid: int, ready, stop, out) -> None:  # noqa: ANN001 - multiprocessing primitives
    """In its own process (so the client's upload never competes for its GIL): poll /healthz every 10 ms
    and the server's RSS every 5 ms until ``stop``; put (latencies, peak RSS) on ``out``."""
    proc = psutil.Process(pid)
    peak = [proc.memory_info().rss]
    latencies: list[float] = []

    def rss() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.005)

    t = threading.Thread(target=rss, daemon=True)
    t.start()
    with httpx.Client(base_url=url, timeout=30) as c:
        c.get("/healthz")  # warm-up, not counted
        ready.set()
        while not stop.is_set():
            t0 = time.perf_counter()
            c.get("/healthz")
            latencies.append(time.perf_counter() - t0)
            time.sleep(0.01)
    t.join()
    out.put((latencies, peak[0]))


def _bodies(table_id: str, ledger_id: str, quick: bool, max_body: int) -> list[tuple[str, Callable[[], bytes]]]:
    head = f'{{"table_id":"{table_id}","ledger_id":"{ledger_id}","votes":['.encode()
    row, bad = b"[0,1,1,0,1,0,1,1,0,0,1]", b"[2,2,2,2,2,2,2,2,2,2,2]"
    limit = max_body - 1024

    def rows(r: bytes, n: int) -> Callable[[], bytes]:
        return lambda: head + b",".join([r] * n) + b"]}"

    out = [("valid 10^4 rows", rows(row, 10_000)), ("invalid 10^4 rows", rows(bad, 10_000)),
           ("invalid 10^5 rows (audit: 35 s)", rows(bad, 100_000)), ("valid 10^5 rows", rows(row, 100_000))]
    if quick:
        return out
    n_max = (limit - len(head)) // (len(row) + 1)
    return out + [
        ("invalid 2*10^5 rows (audit: 3.5 GB)", rows(bad, 200_000)),
        ("invalid rows up to the limit", rows(bad, n_max)),
        ("last row invalid, 10^5 rows", lambda: head + b",".join([row] * 99_999 + [bad]) + b"]}"),
        ("string votes up to the limit", rows(b'["0","1","1","0","1","0","1","1","0","0","1"]', n_max // 2)),
        ("whitespace then 10 rows", lambda: head + b" " * (limit - 400) + b",".join([row] * 10) + b"]}"),
        ("junk field up to the limit", lambda: b'{"x":[' + b"0," * (limit // 2 - 400) + b"0]," + head[1:]
         + row + b"]}"),
        ("nested arrays up to the limit", lambda: head + b"[" * (limit // 2 - 200) + b"]" * (limit // 2 - 200)
         + b"]}"),
        ("over the limit (+1 MiB)", lambda: head + b" " * (max_body + MiB) + row + b"]}"),
    ]


def in_process(bodies: list[tuple[str, Callable[[], bytes]]], max_rows: int = 100_000) -> None:
    """The parser alone: each body parsed on a worker thread (as the server does) while this thread sleeps
    1 ms at a time; its worst oversleep is how long the parser kept the GIL (the event loop's stall)."""
    from darrm_opt.api import votes

    print(f"\n{'in-process api.votes.parse':38s} {'MB':>6s} {'result':>6s} {'wall s':>7s} {'CPU s':>6s} "
          f"{'main-thread stall p50 ms':>24s} {'max ms':>7s}")
    for name, make in bodies:
        body = bytearray(make())
        outcome: list[str] = []

        def work(body: bytearray = body, outcome: list[str] = outcome) -> None:
            try:
                votes.parse(body, max_rows)
                outcome.append("ok")
            except (votes.InvalidBody, ValueError):
                outcome.append("422")

        t = threading.Thread(target=work)
        stalls: list[float] = []
        c0, t0 = time.process_time(), time.perf_counter()
        t.start()
        while t.is_alive():
            s0 = time.perf_counter()
            time.sleep(0.001)
            stalls.append(time.perf_counter() - s0 - 0.001)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        t.join()
        stalls = stalls or [0.0]
        print(f"{name:38s} {len(body) / 1e6:6.2f} {outcome[0]:>6s} {wall:7.3f} {cpu:6.3f} "
              f"{1e3 * statistics.median(stalls):24.2f} {1e3 * max(stalls):7.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--max-body-mib", type=int, default=16, help="the server's DARRM_MAX_BODY_BYTES in MiB")
    args = ap.parse_args()
    max_body = args.max_body_mib * MiB
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = _start(Path(tmp), max_body)
        try:
            ps = psutil.Process(proc.pid)
            auth = {"Authorization": f"Bearer {KEY}"}
            with httpx.Client(base_url=url, headers=auth, timeout=120) as c:
                table = c.post("/v1/tables", json={"K": 11, "m": 3, "teacher_delta": 0.0}).json()
                ledger = c.post("/v1/ledgers", json={"name": "bench", "epsilon_budget": 1e9,
                                                     "delta_budget": 0.5}).json()
                print(f"{'body':38s} {'MB':>6s} {'status':>6s} {'wall s':>7s} {'srv CPU s':>9s} "
                      f"{'+RSS MB':>8s} {'healthz p50 ms':>14s} {'max ms':>7s}")
                for name, make in _bodies(table["id"], ledger["id"], args.quick, max_body):
                    body = make()
                    time.sleep(0.3)  # let the previous request's memory settle
                    base_rss = ps.memory_info().rss
                    cpu0 = sum(ps.cpu_times()[:2])
                    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
                    sampler = ctx.Process(target=_sample, args=(url, proc.pid, ready, stop, out))
                    sampler.start()
                    ready.wait(60)
                    t0 = time.perf_counter()
                    r = c.post("/v1/aggregate", content=body, headers={"content-type": "application/json"})
                    wall = time.perf_counter() - t0
                    time.sleep(0.03)  # at least one /healthz after the response
                    stop.set()
                    latencies, peak_rss = out.get(timeout=60)
                    sampler.join()
                    cpu = sum(ps.cpu_times()[:2]) - cpu0
                    lat = latencies or [float("nan")]
                    print(f"{name:38s} {len(body) / 1e6:6.2f} {r.status_code:6d} {wall:7.3f} {cpu:9.3f} "
                          f"{(peak_rss - base_rss) / 1e6:8.1f} {1e3 * statistics.median(lat):14.1f} "
                          f"{1e3 * max(lat):7.1f}", flush=True)
                    del body
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(15)
    print("(client and server on one shared 2-core machine; srv CPU = the server's user+system seconds)")
    in_process([b for b in _bodies("t" * 32, "l" * 32, args.quick, max_body) if "over the limit" not in b[0]])


if __name__ == "__main__":
    main()
