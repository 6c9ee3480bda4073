"""Many tenants and a hostile one: throughput, tail latency, the ledger list and idle connections' memory.

    python benchmarks/service_tenants.py                      # SQLite and PostgreSQL (if reachable), 2 workers
    python benchmarks/service_tenants.py --configs sqlite:2 --seconds 5

For each configuration the script starts ``uvicorn --factory darrm_opt.api.main:create_app`` (access log off)
with two tenants' keys (``DARRM_API_KEYS=victim:…,hostile:…``) and measures, with the client of
``serve_load.py`` in a separate process (keep-alive connections, 32 for 1-row and 8 for 100-row requests):

1. the victim alone: requests/s, p50 and p99 of ``POST /v1/aggregate`` with 1-row and with 100-row batches
   (a pure-DP K = 11 table, a new ledger per run that never runs out), each connection sending as soon as it
   has its answer (closed loop: the server saturated, so p99 includes its queue), after a run that warms the
   caches, in a run before and one after each hostile run of 2. (``--repeat`` of them, 3 by default: the
   victim's share is its throughput with the hostile tenant over the mean of the two runs around it, printed
   for the median run and for every run; a run alone varies by ±10 % a few minutes apart); and 1-row
   requests offered at a fixed ``--rate`` (default 800 req/s, the target's rate) on a fixed schedule,
   latency counted from each request's due time (open loop);
2. the same while the hostile tenant saturates its own ledger from another process (8 connections of 1-row
   requests on a ledger whose generic bounds are over its budget and whose exact composition is not, so
   every debit needs a fresh fine composition, 2–6 s each; each run on a table of its own, a pure-DP
   K = 11 table at an ε no earlier run used, so that no composition it needs was computed before): the
   victim's share of its own throughput, and the hostile's answers (200 paid, 409 over its budget, 429
   over its request rate with ``--tenant-rate``); and, 1-row only, while the hostile tenant floods the service
   with requests on a ledger that pays none (each refused, 409, or 429 with ``--tenant-rate``);
3. ``GET /v1/ledgers?limit=1000`` over 1000 ledgers of one tenant, each paid once (first call and best of 3);
4. the server's peak RSS (parent and workers, sampled every 0.5 s) over the runs above, and its RSS before and
   with 1000 idle slow connections, each having sent its headers (``Content-Length: 16000000``) and 30 bytes of
   body, then nothing.

Targets (issue 26; 2 cores, 2 workers, PostgreSQL): 1-row ≥ 800 req/s with p99 ≤ 100 ms; the victim keeps
≥ 80 % of its throughput; 1000 slow connections add < 200 MB; the ledger list of 1000 ledgers in < 1 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_load import (  # noqa: E402 - the sibling script, found through the path set above
    DEFAULT_PG,
    Server,
    _run_load,
    http_request,
    measure,
    postgres_database,
    postgres_reachable,
)

VICTIM = "v" + uuid.uuid4().hex
HOSTILE = "h" + uuid.uuid4().hex
TABLE = {"K": 11, "m": 3, "teacher_delta": 0.0}


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


_RUNS = iter(range(1, 10**6))


def hostile_request(url: str, flood: bool = False) -> bytes:
    """A 1-row request on a hostile ledger: 100 answers paid, budget ε = 14 at δ = 1e-5 (the exact
    composition of 100 answers is about 12, the generic bounds over 14), so every further debit needs a new
    fine composition. Each call makes a table of its own (ε = 0.1 + k·1e-6 for the k-th call). ``flood``: a
    ledger whose budget (ε = 0.1) no answer fits, so every request is refused (409) as fast as the server can."""
    with httpx.Client(base_url=url, headers=_auth(HOSTILE), timeout=600) as c:
        r = c.post("/v1/tables", json={**TABLE, "epsilon": 0.1 + next(_RUNS) * 1e-6})
        assert r.status_code == 200, r.text
        table = r.json()
        ledger = c.post("/v1/ledgers", json={"name": "hostile", "epsilon_budget": 0.1 if flood else 14.0,
                                             "delta_budget": 1e-5}).json()
        r = c.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"],
                                          "votes": [[1] * 11] * 100})
        if flood:
            assert r.status_code == 409, r.text
        else:
            assert r.status_code == 200 and r.json()["composition"] == "exact", r.text
    body = json.dumps({"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1] * 11]}).encode()
    host, port = url.split("//", 1)[1].split(":")
    return http_request(host, int(port), HOSTILE, body)


def with_hostile(url: str, fn, seconds: float, flood: bool = False):  # noqa: ANN001, ANN201
    """``fn()`` while the hostile tenant's 8 connections hammer its ledger from another process."""
    host, port = url.split("//", 1)[1].split(":")
    request = hostile_request(url, flood)
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        pending = pool.apply_async(_run_load, ((host, int(port), request, 8, seconds, 0.0),))
        time.sleep(1.0)  # the hostile load is on
        out = fn()
        hostile = pending.get(timeout=seconds + 600)
    return out, hostile["codes"]


def mean_of(a: dict, b: dict) -> dict:
    """The victim alone: the mean of its runs before and after the hostile one (the machine may drift)."""
    return {k: (a[k] + b[k]) / 2 for k in ("requests_per_s", "rows_per_s", "p50_ms", "p99_ms")}


def ledger_list(url: str, n: int) -> tuple[float, float]:
    """Seconds of GET /v1/ledgers?limit=n over n ledgers of one tenant, each paid once: first call, best of 3."""
    with httpx.Client(base_url=url, headers=_auth(VICTIM), timeout=600) as c:
        table = c.post("/v1/tables", json=TABLE).json()
        have = c.get("/v1/ledgers", params={"limit": 1}).json()["total"]
        for i in range(have, n):
            lid = c.post("/v1/ledgers", json={"name": f"l{i}", "epsilon_budget": 10.0, "delta_budget": 1e-6}).json()
            c.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": lid["id"], "votes": [[1] * 11]})
        times = []
        for _ in range(4):
            t0 = time.perf_counter()
            r = c.get("/v1/ledgers", params={"limit": n})
            times.append(time.perf_counter() - t0)
            assert r.status_code == 200 and len(r.json()["items"]) >= n * 0.99, r.text[:200]
    return times[0], min(times[1:])


def _rss(pid: int) -> int:
    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])


class PeakRss:
    """The largest summed RSS of a process and its children, sampled every ``every`` seconds in a thread."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        self.pid, self.every, self.peak = pid, every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, _rss(self.pid))
            self._stop.wait(self.every)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def idle_connections(url: str, pid: int, n: int) -> tuple[float, float]:
    """(RSS before, RSS with ``n`` idle slow connections) of the server's processes, in MB."""
    host, port = url.split("//", 1)[1].split(":")
    head = (f"POST /v1/aggregate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 16000000"
            f"\r\nAuthorization: Bearer {VICTIM}\r\n\r\n").encode() + b'{"table_id":"' + b"a" * 17
    before = _rss(pid)
    socks = []
    peak = before
    try:
        for _ in range(n):
            s = socket.create_connection((host, int(port)))
            s.sendall(head)
            socks.append(s)
        for _ in range(20):  # every request is in the application, waiting for the rest of its body
            time.sleep(0.25)
            peak = max(peak, _rss(pid))
        with httpx.Client(base_url=url, timeout=10) as c:
            assert c.get("/healthz").status_code == 200
    finally:
        for s in socks:
            with contextlib.suppress(OSError):
                s.close()
    return before / 2**20, peak / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--postgres-url", default=os.environ.get("DARRM_TEST_POSTGRES_URL", DEFAULT_PG))
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--ledgers", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--configs", default="sqlite:2,postgresql:2", help="database:workers pairs")
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument("--rate", type=float, default=800.0, help="the offered rate of the open-loop 1-row run")
    ap.add_argument("--tenant-rate", type=float, help="run the servers with DARRM_TENANT_RATE (requests/s per "
                                                      "tenant and process; the default: unlimited)")
    ap.add_argument("--repeat", type=int, default=3, help="hostile runs per batch size, each between two runs of "
                                                          "the victim alone (the median is printed)")
    ap.add_argument("--exact-share", type=float, help="run the servers with DARRM_TENANT_EXACT_SHARE (the fraction "
                                                      "of the time a tenant's near-budget compositions run while "
                                                      "another is served; 1: no limit; the default: the setting's)")
    args = ap.parse_args()

    configs = [(c.split(":")[0], int(c.split(":")[1])) for c in args.configs.split(",")]
    if not postgres_reachable(args.postgres_url):
        print(f"PostgreSQL at {args.postgres_url} is unreachable: SQLite only", file=sys.stderr)
        configs = [c for c in configs if c[0] != "postgresql"]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for backend, workers in configs:
            with contextlib.ExitStack() as stack:
                db = (f"sqlite:///{tmp}/tenants-{workers}.db" if backend == "sqlite"
                      else stack.enter_context(postgres_database(args.postgres_url)))
                env = {} if args.tenant_rate is None else {"DARRM_TENANT_RATE": str(args.tenant_rate)}
                if args.exact_share is not None:
                    env["DARRM_TENANT_EXACT_SHARE"] = str(args.exact_share)
                server = Server(db, workers, f"victim:{VICTIM},hostile:{HOSTILE}", Path(tmp), env=env)
                stack.callback(server.stop)
                row = {"backend": backend, "workers": workers}
                peak = stack.enter_context(PeakRss(server.proc.pid))

                def victim(rows: int, url: str = server.url) -> dict:
                    return measure(url, VICTIM, rows=rows, connections=32 if rows == 1 else 8,
                                   seconds=args.seconds, warmup=args.warmup)

                for rows in (1, 100):
                    victim(rows)  # a run to warm the caches: the runs below pay the same compositions
                    alone, runs = [victim(rows)], []
                    for _ in range(args.repeat):  # alone, hostile, alone, hostile, …, alone
                        runs.append(with_hostile(server.url, lambda rows=rows: victim(rows),
                                                 args.seconds + args.warmup))
                        alone.append(victim(rows))
                    kept = [h["requests_per_s"] / mean_of(a, b)["requests_per_s"] if mean_of(a, b)["requests_per_s"]
                            else float("nan") for (h, _), a, b in zip(runs, alone, alone[1:])]
                    mid = sorted(range(len(kept)), key=kept.__getitem__)[len(kept) // 2]  # the median run
                    row[f"hostile_{rows}"], row[f"hostile_codes_{rows}"] = runs[mid]
                    row[f"alone_{rows}"] = mean_of(alone[mid], alone[mid + 1])
                    row[f"kept_{rows}"] = kept
                row["flood_1"], row["flood_codes_1"] = with_hostile(
                    server.url, lambda: victim(1), args.seconds + args.warmup, flood=True)
                row["paced_1"] = measure(server.url, VICTIM, rows=1, connections=32, seconds=args.seconds,
                                         warmup=args.warmup, rate=args.rate)
                row["list_first_s"], row["list_best_s"] = ledger_list(server.url, args.ledgers)
                row["rss_peak_load_mb"] = peak.peak / 2**20  # the load runs: before the idle connections
                row["rss_before_mb"], row["rss_idle_mb"] = idle_connections(server.url, server.proc.pid, args.idle)
                results.append(row)
                print(json.dumps(row), flush=True)

    print()
    print("| database | workers | batch | victim alone req/s | p50 ms | p99 ms | with hostile req/s | p50 ms | "
          "p99 ms | kept (median run) | kept, every run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        for rows in (1, 100):
            a, h, kept = r[f"alone_{rows}"], r[f"hostile_{rows}"], r[f"kept_{rows}"]
            print(f"| {r['backend']} | {r['workers']} | {rows} | {a['requests_per_s']:.0f} | {a['p50_ms']:.1f} | "
                  f"{a['p99_ms']:.1f} | {h['requests_per_s']:.0f} | {h['p50_ms']:.1f} | {h['p99_ms']:.1f} | "
                  f"{100 * sorted(kept)[len(kept) // 2]:.0f} % | {', '.join(f'{100 * k:.0f} %' for k in kept)} |")
    print()
    print("| database | workers | 1-row, the hostile tenant flooding: victim req/s | p99 ms | kept | "
          "hostile's answers |")
    print("|---|---|---|---|---|---|")
    for r in results:
        f, a = r["flood_1"], r["alone_1"]
        print(f"| {r['backend']} | {r['workers']} | {f['requests_per_s']:.0f} | {f['p99_ms']:.1f} | "
              f"{100 * f['requests_per_s'] / a['requests_per_s']:.0f} % | {r['flood_codes_1']} |")
    print()
    print(f"| database | workers | 1-row offered at {args.rate:.0f} req/s (open loop): served req/s | p50 ms | "
          "p99 ms |")
    print("|---|---|---|---|---|")
    for r in results:
        p = r["paced_1"]
        print(f"| {r['backend']} | {r['workers']} | {p['requests_per_s']:.0f} | {p['p50_ms']:.1f} | "
              f"{p['p99_ms']:.1f} |")
    print()
    print(f"| database | GET /v1/ledgers, {args.ledgers} ledgers: first | best of 3 | RSS before | "
          f"RSS with {args.idle} idle connections | added | peak RSS under the load runs |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['backend']} | {r['list_first_s']:.3f} s | {r['list_best_s']:.3f} s | {r['rss_before_mb']:.0f} MB "
              f"| {r['rss_idle_mb']:.0f} MB | {r['rss_idle_mb'] - r['rss_before_mb']:.0f} MB "
              f"| {r['rss_peak_load_mb']:.0f} MB |")
    for r in results:
        print(f"hostile tenant's answers ({r['backend']}): 1-row run {r['hostile_codes_1']}, "
              f"100-row run {r['hostile_codes_100']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
