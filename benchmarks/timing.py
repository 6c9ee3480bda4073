"""Does the time of an answer depend on the votes or on the noise drawn? (issue 33, "Time")

    python benchmarks/timing.py                 # every section, about a minute each on 2 cores
    python benchmarks/timing.py --quick         # fewer draws: a smoke run in well under a minute
    python benchmarks/timing.py --sections lib  # lib, cli, rest (comma-separated)

Timing side channels break exact samplers (Jin et al., "Are we there yet? Timing and floating-point attacks
on differential privacy systems", S&P 2022). This script times answers with ``time.perf_counter_ns`` and
tests, path by path, whether the time tells apart

(i)  the *votes* of the answered row: its vote count L (hence γ(L): 1, ½, a non-dyadic ⅓, 3·10⁻⁵ whose
     binary expansion needs more than 64 bits, 0) for a DaRRM table; its histogram (unanimous, a two-way
     tie, a near three-way tie, a clear lead) for GNMax;
(ii) the *noise drawn*: the γ coin's outcome (kept the majority, or not) for DaRRM; Σ_c |Z_c| (the discrete
     Gaussian noise of the row's classes) and whether the noisy counts tied for GNMax.

Paths:

- ``lib``: the library call that releases answers, ``darrm_opt.release.release.Aggregator(table)(votes)``
  (no ledger; it is the kind's sampler: ``prepare`` then ``draw``), one row per call (the service's 1-row
  requests take the same code), for DaRRM also its two steps timed apart (``prepare``: the votes checked and
  counted; ``draw``: the coins) and 64-row batches of one L (the vectorised path). The coin's
  outcome is recomputed from the bytes the call drew from the CSPRNG (a recording wrapper around
  ``system_random``); GNMax's noise is recorded by a wrapper around the sampler's ``noise`` object.
- ``cli``: whole ``darrm-opt aggregate`` runs (a subprocess each) on vote files of one pattern each; the
  noise is not visible there: (ii) is the share of answers that agree with the majority (plurality).
- ``rest``: one-row ``POST /v1/aggregate`` requests to a real ``darrm-opt serve`` on 127.0.0.1 (SQLite with
  DARRM_SQLITE_SYNCHRONOUS=NORMAL, one ledger per table: pure basic composition for DaRRM, the exact one for
  GNMax; one keep-alive connection); (ii) is whether the answer agrees with the majority (plurality).

Draws of every group are interleaved in a random order, so drift of a noisy machine spreads over all groups;
each path also splits its draws at random ("placebo"): what a split that cannot leak scores on this machine.
Times above the path's 99th percentile are clipped to it (winsorised: the scheduler's outliers), then each
group's mean and median are printed with Welch's t against the rest of the path's draws (|t| > 4.5: a
dependence, the TVLA threshold) and Pearson's r between the time and the variable.

Tables: DaRRM K = 11, m = 11 (every γ is certified at m = K), γ = (1, 1, ½, ⅓, 3e-5, 0, 0, 3e-5, ⅓, ½, 1, 1);
GNMax K = 20, C = 3, σ = 3.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from darrm_opt.mechanisms import certify_table, mechanism, table_document  # noqa: E402
from darrm_opt.model.gnmax import GnmaxParams  # noqa: E402
from darrm_opt.model.params import Params  # noqa: E402
from darrm_opt.release.release import Aggregator  # noqa: E402
from darrm_opt.sampling import system_random  # noqa: E402

K = 11
GAMMA = [1.0, 1.0, 0.5, 1 / 3, 3e-5, 0.0, 0.0, 3e-5, 1 / 3, 0.5, 1.0, 1.0]
GAMMA_CLASS = {1.0: "γ=1", 0.5: "γ=1/2 (dyadic)", 1 / 3: "γ=1/3 (53-bit)", 3e-5: "γ=3e-5 (68-bit)", 0.0: "γ=0"}
GK, GC, SIGMA = 20, 3, 3.0
PATTERNS = {"unanimous (20,0,0)": (20, 0, 0), "lead (12,8,0)": (12, 8, 0), "tie (10,10,0)": (10, 10, 0),
            "near 3-way (7,7,6)": (7, 7, 6)}
THRESHOLD_T = 4.5


# --- statistics ------------------------------------------------------------------------------------------
def welch(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 2 or b.size < 2:
        return float("nan")
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return float((a.mean() - b.mean()) / se) if se > 0 else 0.0


def rank_z(a: np.ndarray, b: np.ndarray) -> float:
    """Mann–Whitney's U as a z score (normal approximation, ties averaged): robust to the heavy tail."""
    from scipy.stats import rankdata

    if a.size < 2 or b.size < 2:
        return float("nan")
    ranks = rankdata(np.concatenate([a, b]))
    u = ranks[: a.size].sum() - a.size * (a.size + 1) / 2
    n1, n2 = a.size, b.size
    return float((u - n1 * n2 / 2) / math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12))


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


@dataclass
class Path_:
    """The draws of one path: times (ns) and, per draw, the variables that may leak."""

    name: str
    unit: str = "us"
    times: list[int] = field(default_factory=list)
    labels: dict[str, list] = field(default_factory=dict)
    values: dict[str, list] = field(default_factory=dict)

    def add(self, ns: int, **kv: object) -> None:
        self.times.append(ns)
        for k, v in kv.items():
            (self.values if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
             else self.labels).setdefault(k, []).append(v)


@dataclass
class Row:
    path: str
    variable: str
    group: str
    n: int
    mean: float
    median: float
    t: float
    z: float
    r: float = float("nan")


def analyse(p: Path_) -> list[Row]:
    """Per label variable: each group against the rest of the path's draws; per numeric variable: the draws
    above its median against those at or below it, and Pearson's r of the time and the variable."""
    t = np.asarray(p.times, dtype=np.float64)
    if t.size == 0:
        return []
    t = np.minimum(t, np.percentile(t, 99))
    scale = {"us": 1e3, "ms": 1e6}[p.unit]

    def row(var: str, group: str, sel: np.ndarray, rest: np.ndarray, r: float = float("nan")) -> Row:
        a = t[sel]
        return Row(p.name, var, group, int(a.size), a.mean() / scale if a.size else float("nan"),
                   float(np.median(a)) / scale if a.size else float("nan"), welch(a, t[rest]), rank_z(a, t[rest]), r)

    rows = []
    half = np.random.default_rng(len(p.name)).random(t.size) < 0.5  # a split that cannot leak: the noise floor
    rows += [row("placebo (a random half)", g, sel, ~sel) for g, sel in (("half A", half), ("half B", ~half))]
    for var, labels in p.labels.items():
        lab = np.asarray([str(x) for x in labels])
        known = lab != "None"
        for g in sorted(set(lab[known].tolist())):
            rows.append(row(var, g, known & (lab == g), known & (lab != g)))
    for var, vals in p.values.items():
        v = np.asarray(vals, dtype=np.float64)
        ok = np.isfinite(v)
        med = float(np.median(v[ok])) if ok.any() else 0.0
        hi, lo = ok & (v > med), ok & (v <= med)
        r = pearson(v[ok], t[ok])
        rows += [row(var, f"> median {med:g}", hi, lo, r), row(var, f"<= median {med:g}", lo, hi, r)]
    return rows


def print_table(rows: list[Row], out) -> None:  # noqa: ANN001
    head = (f"{'path':<20} {'variable':<34} {'group':<22} {'n':>7} {'mean':>9} {'median':>9} {'Welch t':>8} "
            f"{'rank z':>7} {'r':>7}")
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in rows:
        flag = " *" if abs(r.t) > THRESHOLD_T or abs(r.z) > THRESHOLD_T else ""
        rr = "" if math.isnan(r.r) else f"{r.r:+.3f}"
        print(f"{r.path:<20} {r.variable:<34} {r.group:<22} {r.n:>7} {r.mean:>9.2f} {r.median:>9.2f} "
              f"{r.t:>8.2f} {r.z:>7.2f} {rr:>7}{flag}", file=out)
    print("(mean, median: µs for lib and rest, ms for cli; Welch t and rank z of the group against the rest of "
          "its path; r: Pearson's r of time and the variable; * |t| or |z| > 4.5)", file=out)


# --- the tables -------------------------------------------------------------------------------------------
def darrm_table():  # noqa: ANN201
    return certify_table(Params(K=K, m=float(K), epsilon=0.1, teacher_delta=0.0), GAMMA)


def gnmax_table():  # noqa: ANN201
    return mechanism("gnmax").certify_table(GnmaxParams(GK, GC, SIGMA), [], teachers="disjoint-nonprivate")


def darrm_row(L: int, rng: random.Random) -> list[int]:
    row = [1] * L + [0] * (K - L)
    rng.shuffle(row)
    return row


def labels_row(h: tuple[int, ...], rng: random.Random) -> list[int]:
    row = [c for c, n in enumerate(h) for _ in range(n)]
    rng.shuffle(row)
    return row


class Tape:
    """``system_random``, recording what each call hands out (the coin is recomputed from it afterwards)."""

    def __init__(self) -> None:
        self.log: list[bytes] = []

    def __call__(self, n: int) -> bytes:
        b = system_random(n)
        self.log.append(b)
        return b


class NoiseTape:
    """The sampler's noise object, recording the values each request takes."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self.inner = inner
        self.sigma = inner.sigma
        self.log: list[np.ndarray] = []

    def sample(self, n: int, random_bytes) -> np.ndarray:  # noqa: ANN001
        z = self.inner.sample(n, random_bytes)
        self.log.append(z)
        return z

    __call__ = sample


def coin_kept(sampler, L: int, drawn: bytes, row: int = 0, rows: int = 1) -> bool:  # noqa: ANN001
    """The γ(L) coin of row ``row`` recomputed from the bytes drawn, as the sampler reads them: a fixed-width
    big-endian U per row against γ·2^W (``coin_bytes`` = W/8), or (before issue 33) a little-endian 64-bit U
    against ⌊γ·2^64⌋ (its 2^-64-probability tie ignored)."""
    g = Fraction(float(sampler.gamma[L]))
    width = getattr(sampler, "coin_bytes", None)
    if width is None:
        u = drawn[8 * row : 8 * row + 8]
        return g == 1 or Fraction(int.from_bytes(u, "little" if rows <= 32 else sys.byteorder), 1 << 64) < g
    u = drawn[width * row : width * row + width]
    return g == 1 or Fraction(int.from_bytes(u, "big"), 1 << (8 * width)) < g


# --- lib ----------------------------------------------------------------------------------------------------
def lib_darrm(draws: int, batches: int, seed: int) -> list[Path_]:
    rng = random.Random(seed)
    table = darrm_table()
    tape = Tape()
    agg = Aggregator(table, random_bytes=tape)
    sampler = agg._sampler
    rows = {L: [darrm_row(L, rng) for _ in range(16)] for L in range(K + 1)}
    one = Path_("lib darrm 1-row")
    order = [rng.randrange(K + 1) for _ in range(draws)]
    for _ in range(2000):  # warm-up
        agg([rows[rng.randrange(K + 1)][0]])
    clock = time.perf_counter_ns
    for i, L in enumerate(order):
        votes = [rows[L][i & 15]]
        tape.log.clear()
        t0 = clock()
        out = agg(votes)
        t1 = clock()
        drawn = b"".join(tape.log)
        g = GAMMA[L]
        kept = coin_kept(sampler, L, drawn)
        one.add(t1 - t0, **{"γ(L) class": GAMMA_CLASS[g], "majority side": "L>=6" if L >= 6 else "L<=5",
                            "answer": str(int(out[0])), "L (ones in the row)": L,
                            "coin (0<γ<1 rows)": ("kept" if kept else "not kept") if 0 < g < 1 else None,
                            "coin at γ=1/2": ("kept" if kept else "not kept") if g == 0.5 else None,
                            "coin at γ=1/3": ("kept" if kept else "not kept") if g == 1 / 3 else None,
                            "γ(L)": g})
    # the same call in its two steps: checking and counting the votes (prepare), then the coins (draw)
    prep, draw = Path_("lib darrm prepare"), Path_("lib darrm draw")
    for i, L in enumerate(order[: draws // 2]):
        votes = [rows[L][i & 15]]
        t0 = clock()
        counts = sampler.prepare(votes)
        t1 = clock()
        tape.log.clear()
        t2 = clock()
        sampler.draw(counts)
        t3 = clock()
        g = GAMMA[L]
        kept = coin_kept(sampler, L, b"".join(tape.log))
        prep.add(t1 - t0, **{"γ(L) class": GAMMA_CLASS[g], "L (ones in the row)": L,
                             "votes mixed (4 <= L <= 7)": "mixed" if 4 <= L <= 7 else "not mixed"})
        draw.add(t3 - t2, **{"γ(L) class": GAMMA_CLASS[g],
                             "coin (0<γ<1 rows)": ("kept" if kept else "not kept") if 0 < g < 1 else None})
    # 64-row batches of one L: the vectorised path
    batch = Path_("lib darrm 64-row")
    blocks = {L: np.array([darrm_row(L, rng) for _ in range(64)], dtype=np.uint8) for L in range(K + 1)}
    for _ in range(200):
        agg(blocks[rng.randrange(K + 1)])
    for _ in range(batches):
        L = rng.randrange(K + 1)
        tape.log.clear()
        t0 = clock()
        agg(blocks[L])
        t1 = clock()
        drawn = b"".join(tape.log)
        g = GAMMA[L]
        kept = sum(coin_kept(sampler, L, drawn, j, 64) for j in range(64))
        batch.add(t1 - t0, **{"γ(L) class": GAMMA_CLASS[g], "coins kept of 64 (0<γ<1)": kept if 0 < g < 1
                              else float("nan")})
    return [one, prep, draw, batch]


def lib_gnmax(draws: int, seed: int) -> list[Path_]:
    rng = random.Random(seed)
    agg = Aggregator(gnmax_table(), random_bytes=system_random)
    sampler = agg._sampler
    tape = NoiseTape(sampler.noise)
    sampler.noise = tape
    names = list(PATTERNS)
    rows = {p: [labels_row(PATTERNS[p], rng) for _ in range(16)] for p in names}
    for _ in range(300):
        agg([rows[names[rng.randrange(len(names))]][0]])
    path = Path_("lib gnmax 1-row")
    clock = time.perf_counter_ns
    for i in range(draws):
        p = names[rng.randrange(len(names))]
        tape.log.clear()
        t0 = clock()
        agg([rows[p][i & 15]])
        t1 = clock()
        z = np.concatenate(tape.log)
        noisy = np.asarray(PATTERNS[p]) + z
        tied = int((noisy == noisy.max()).sum()) > 1
        path.add(t1 - t0, **{"votes (histogram)": p, "noisy counts tied": "tied" if tied else "no tie",
                             "Σ|Z| (noise drawn)": int(np.abs(z).sum())})
    return [path]


# --- cli ----------------------------------------------------------------------------------------------------
def cli(runs: int, rows: int, seed: int, tmp: Path) -> list[Path_]:
    rng = random.Random(seed)
    dt, gt = tmp / "darrm.json", tmp / "gnmax.json"
    dt.write_text(json.dumps(table_document(darrm_table())))
    gt.write_text(json.dumps(table_document(gnmax_table())))
    files = []
    for L in (0, 2, 3, 4, 5):
        f = tmp / f"darrm-L{L}.csv"
        f.write_text("".join(",".join(map(str, darrm_row(L, rng))) + "\n" for _ in range(rows)))
        files.append(("darrm", dt, f, GAMMA_CLASS[GAMMA[L]], int(L >= 6)))
    for name in ("unanimous (20,0,0)", "tie (10,10,0)"):
        f = tmp / f"gnmax-{PATTERNS[name][1]}.csv"
        f.write_text("".join(",".join(map(str, labels_row(PATTERNS[name], rng))) + "\n" for _ in range(rows)))
        files.append(("gnmax", gt, f, name, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-m", "darrm_opt", "aggregate"]
    paths = {"darrm": Path_(f"cli darrm {rows} rows", unit="ms"), "gnmax": Path_(f"cli gnmax {rows} rows", unit="ms")}
    jobs = [j for j in files for _ in range(runs)]
    rng.shuffle(jobs)
    subprocess.run(cmd + ["--table", str(dt), "--votes", str(files[0][2])], env=env, capture_output=True, check=True)
    for kind, table, votes, label, majority in jobs:
        t0 = time.perf_counter_ns()
        done = subprocess.run(cmd + ["--table", str(table), "--votes", str(votes)], env=env, capture_output=True,
                              check=True, text=True)
        t1 = time.perf_counter_ns()
        answers = np.array([int(x) for x in done.stdout.split()[1:]])
        agree = float((answers == majority).mean())
        paths[kind].add(t1 - t0, **{"votes file": label, "share agreeing with majority": agree})
    return list(paths.values())


# --- rest ---------------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(tmp: Path, key: str):  # noqa: ANN201
    """A real ``darrm-opt serve`` on 127.0.0.1 over a fresh SQLite ledger holding both tables."""
    from darrm_opt.ledger.local import Ledger

    url = f"sqlite:///{tmp}/timing.db"
    dtab, gtab = darrm_table(), gnmax_table()
    ledgers = []
    for name, table, delta in (("darrm", dtab, 0.0), ("gnmax", gtab, 1e-6)):  # one table per ledger
        with Ledger(url, f"timing-{name}", epsilon_budget=1e300, delta_budget=delta) as book:
            book.register(table)
            ledgers.append(book.id)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env.update({"DARRM_API_KEYS": key, "DARRM_SQLITE_SYNCHRONOUS": "NORMAL",
                "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")})
    log = open(tmp / "server.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "darrm_opt", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--database-url", url], cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {(tmp / 'server.log').read_text()}")
            with contextlib.suppress(OSError, http.client.HTTPException):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start")
            time.sleep(0.2)
        yield port, ledgers, dtab.id, gtab.id
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def rest(requests: int, gnmax_requests: int, seed: int, tmp: Path) -> list[Path_]:
    rng = random.Random(seed)
    key = uuid.uuid4().hex
    with server(tmp, key) as (port, ledgers, darrm_id, gnmax_id):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        head = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

        def post(table_id: str, row: list[int]) -> tuple[int, int]:
            ledger_id = ledgers[table_id != darrm_id]
            body = json.dumps({"table_id": table_id, "ledger_id": ledger_id, "votes": [row]},
                              separators=(",", ":")).encode()
            t0 = time.perf_counter_ns()
            conn.request("POST", "/v1/aggregate", body, head)
            resp = conn.getresponse()
            data = resp.read()
            t1 = time.perf_counter_ns()
            if resp.status != 200:
                raise RuntimeError(f"{resp.status}: {data[:300]!r}")
            return t1 - t0, json.loads(data)["answers"][0]

        names = list(PATTERNS)
        jobs = [("darrm", rng.randrange(K + 1)) for _ in range(requests)] + \
               [("gnmax", names[rng.randrange(len(names))]) for _ in range(gnmax_requests)]
        rng.shuffle(jobs)
        for kind, _ in jobs[:50]:  # warm-up
            if kind == "darrm":
                post(darrm_id, darrm_row(3, rng))
            else:
                post(gnmax_id, labels_row(PATTERNS[names[0]], rng))
        d, g = Path_("rest darrm 1-row"), Path_("rest gnmax 1-row")
        for kind, what in jobs:
            if kind == "darrm":
                L = int(what)  # type: ignore[arg-type]
                ns, a = post(darrm_id, darrm_row(L, rng))
                gam = GAMMA[L]
                d.add(ns, **{"γ(L) class": GAMMA_CLASS[gam], "answer agrees with majority (0<γ<1)":
                             ("agrees" if a == int(L >= 6) else "differs") if 0 < gam < 1 else None, "γ(L)": gam})
            else:
                h = PATTERNS[str(what)]
                ns, a = post(gnmax_id, labels_row(h, rng))
                g.add(ns, **{"votes (histogram)": what, "answer is a top class":
                             "top" if h[a] == max(h) else "not top"})
        conn.close()
    return [d, g]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="few draws: a smoke run")
    ap.add_argument("--sections", default="lib,cli,rest", help="comma-separated: lib, cli, rest")
    ap.add_argument("--seed", type=int, default=33)
    ap.add_argument("--json", type=Path, help="also write every row here")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    q = args.quick
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        if "lib" in sections:
            t0 = time.monotonic()
            for p in lib_darrm(draws=20_000 if q else 200_000, batches=2_000 if q else 20_000, seed=args.seed):
                rows += analyse(p)
            for p in lib_gnmax(draws=1_000 if q else 10_000, seed=args.seed):
                rows += analyse(p)
            print(f"# lib: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        if "cli" in sections:
            t0 = time.monotonic()
            for p in cli(runs=2 if q else 4, rows=2_000 if q else 20_000, seed=args.seed, tmp=tmp):
                rows += analyse(p)
            print(f"# cli: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
        if "rest" in sections:
            t0 = time.monotonic()
            for p in rest(requests=200 if q else 1_500, gnmax_requests=100 if q else 600, seed=args.seed, tmp=tmp):
                rows += analyse(p)
            print(f"# rest: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    print_table(rows, sys.stdout)
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1))


if __name__ == "__main__":
    main()
