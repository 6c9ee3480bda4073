"""Load benchmark of the darrm-opt service: POST /v1/aggregate from a separate client process.

    python benchmarks/serve_load.py                       # SQLite and PostgreSQL (if reachable), 1 and 2 workers
    python benchmarks/serve_load.py --url http://127.0.0.1:8000 --key KEY   # a server already running

For each configuration the script starts the server (``uvicorn --factory darrm_opt.api.main:create_app``, access log
off, SQLite in WAL with synchronous=FULL, or a fresh PostgreSQL database dropped afterwards), creates a
pure-DP table (K = 11, m = 3) and one ledger with a budget that never runs out (δ budget 1e-6, so the
optimal composition is computed on every debit), and measures, from one asyncio client process with
keep-alive connections:

- requests/s with 1 row per request (``--connections`` concurrent connections, default 32);
- rows/s with batches of 10 000 rows (4 connections);
- p50 / p99 latency of each.

It also measures in-process aggregation (rows/s of ``BinarySampler`` on 1 M rows). Targets: ≥ 500
requests/s and ≥ 200 000 rows/s with one worker on SQLite; ≥ 5 M rows/s in process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/test"


# --- a minimal HTTP/1.1 keep-alive client (cheap on the client's CPU) -----------------------------------------
async def _connection(host: str, port: int, request: bytes, stop_at: float, latencies: list, codes: dict,
                      record_from: float, period: float | None = None, offset: float = 0.0) -> None:
    """Requests one after another on one keep-alive connection; with ``period``, open loop: the k-th request
    is due at record_from − warm-up + offset + k·period and its latency counts from that due time (a late
    send counts as waiting, so a slow server cannot hide its queue by slowing the client)."""
    reader, writer = await asyncio.open_connection(host, port)
    due = time.perf_counter() + offset
    try:
        while True:
            t0 = time.perf_counter()
            if period is not None:
                if due > t0:
                    await asyncio.sleep(due - t0)
                t0, due = due, due + period
            if t0 >= stop_at:
                return
            writer.write(request)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            t1 = time.perf_counter()
            if t0 >= record_from:
                latencies.append(t1 - t0)
                codes[status] = codes.get(status, 0) + 1
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def _run_load(args: tuple) -> dict:
    """In the client process: ``connections`` connections for ``seconds`` (after ``warmup``); with ``rate``
    (requests per second in all), each connection sends on a fixed schedule (open loop)."""
    host, port, request, connections, seconds, warmup, rate = (*args, None)[:7]
    period = None if rate is None else connections / rate

    async def main() -> dict:
        latencies: list[float] = []
        codes: dict[int, int] = {}
        start = time.perf_counter()
        record_from = start + warmup
        stop_at = record_from + seconds
        await asyncio.gather(*[
            _connection(host, port, request, stop_at, latencies, codes, record_from, period,
                        0.0 if period is None else i * period / connections) for i in range(connections)
        ])
        return {"latencies": latencies, "codes": codes, "seconds": seconds}

    return asyncio.run(main())


def http_request(host: str, port: int, key: str, body: bytes) -> bytes:
    return (
        f"POST /v1/aggregate HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def measure(url: str, key: str, rows: int, connections: int, seconds: float, warmup: float,
            rate: float | None = None) -> dict:
    host, port = url.split("//", 1)[1].split(":")
    port = int(port.rstrip("/"))
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=300) as c:
        r = c.post("/v1/tables", json={"K": 11, "m": 3, "teacher_delta": 0.0})
        r.raise_for_status()
        table = r.json()
        ledger = c.post("/v1/ledgers", json={"name": f"bench-{uuid.uuid4().hex[:6]}",
                                             "epsilon_budget": 1e300, "delta_budget": 1e-6}).json()
    votes = np.random.default_rng(1).integers(0, 2, (rows, 11)).tolist()
    body = json.dumps({"table_id": table["id"], "ledger_id": ledger["id"], "votes": votes},
                      separators=(",", ":")).encode()
    request = http_request(host, port, key, body)
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:  # the load comes from a second process
        out = pool.apply(_run_load, ((host, port, request, connections, seconds, warmup, rate),))
    lat = sorted(out["latencies"])
    ok = out["codes"].get(200, 0)
    return {
        "requests_per_s": ok / seconds,
        "rows_per_s": ok * rows / seconds,
        "p50_ms": 1e3 * statistics.median(lat) if lat else float("nan"),
        "p99_ms": 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan"),
        "codes": out["codes"],
    }


# --- servers ------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, database_url: str, workers: int, key: str, workdir: Path, env: dict | None = None) -> None:
        env_extra = env
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
        env.update({"DARRM_DATABASE_URL": database_url, "DARRM_API_KEYS": key,
                    "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""), **(env_extra or {})})
        self.log = open(workdir / f"server-{self.port}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "darrm_opt.api.main:create_app", "--factory", "--host", "127.0.0.1",
             "--port", str(self.port), "--workers", str(workers), "--no-access-log", "--log-level", "warning"],
            cwd=workdir, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {(workdir / f'server-{self.port}.log').read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            self.stop()
            raise RuntimeError("server did not start")
        time.sleep(1.0 if workers > 1 else 0.0)  # let every worker finish starting

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


@contextlib.contextmanager
def postgres_database(admin_url: str):
    import psycopg

    name = "darrm_bench_" + uuid.uuid4().hex[:10]
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _db = admin_url.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def postgres_reachable(url: str) -> bool:
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
        return True
    except Exception:  # noqa: BLE001
        return False


def in_process_rows_per_s() -> float:
    sys.path.insert(0, str(ROOT))
    from darrm_opt.mechanisms.vote_samplers import BinarySampler

    agg = BinarySampler([1.0, 0.97, 1.0, 1.0, 0.54, 0.94, 0.94, 0.54, 1.0, 1.0, 0.97, 1.0])
    votes = np.random.default_rng(0).integers(0, 2, (1_000_000, 11), dtype=np.uint8)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        agg(votes)
        best = min(best, time.perf_counter() - t0)
    return 1_000_000 / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a running server (skip starting servers)")
    ap.add_argument("--key", help="its API key")
    ap.add_argument("--postgres-url", default=os.environ.get("DARRM_TEST_POSTGRES_URL", DEFAULT_PG))
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--configs", default="sqlite:1,sqlite:2,postgresql:1,postgresql:2",
                    help="database:workers pairs to run (PostgreSQL ones are skipped when it is unreachable)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()

    results = []

    def run(label: str, backend: str, workers: int | str, url: str, key: str) -> None:
        single = measure(url, key, rows=1, connections=args.connections, seconds=args.seconds, warmup=args.warmup)
        batch = measure(url, key, rows=10_000, connections=4, seconds=args.seconds, warmup=args.warmup)
        results.append({"config": label, "backend": backend, "workers": workers, "single": single, "batch": batch})
        print(f"{label}: {single['requests_per_s']:.0f} req/s (p50 {single['p50_ms']:.1f} ms, p99 "
              f"{single['p99_ms']:.1f} ms); {batch['rows_per_s']:.0f} rows/s (p50 {batch['p50_ms']:.0f} ms, "
              f"p99 {batch['p99_ms']:.0f} ms); codes {single['codes']} {batch['codes']}", flush=True)

    if args.url:
        run(args.url, "?", "?", args.url.rstrip("/"), args.key or "")
    else:
        key = uuid.uuid4().hex
        configs = [(c.split(":")[0], int(c.split(":")[1])) for c in args.configs.split(",")]
        if not postgres_reachable(args.postgres_url):
            configs = [c for c in configs if c[0] != "postgresql"]
        with tempfile.TemporaryDirectory() as tmp:
            for backend, workers in configs:
                with contextlib.ExitStack() as stack:
                    if backend == "sqlite":
                        db = f"sqlite:///{tmp}/bench-{workers}.db"
                    else:
                        db = stack.enter_context(postgres_database(args.postgres_url))
                    server = Server(db, workers, key, Path(tmp))
                    stack.callback(server.stop)
                    run(f"{backend}, {workers} worker(s)", backend, workers, server.url, key)

    inproc = in_process_rows_per_s()
    print()
    print("| database | workers | 1-row requests/s | p50 ms | p99 ms | rows/s (10 000-row batches) | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        s, b = r["single"], r["batch"]
        print(f"| {r['backend']} | {r['workers']} | {s['requests_per_s']:.0f} | {s['p50_ms']:.1f} | {s['p99_ms']:.1f} "
              f"| {b['rows_per_s']:.0f} | {b['p50_ms']:.0f} | {b['p99_ms']:.0f} |")
    print(f"\nin-process aggregation: {inproc / 1e6:.1f} M rows/s (K = 11, 1 M rows)")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "in_process_rows_per_s": inproc}, indent=2))


if __name__ == "__main__":
    main()
