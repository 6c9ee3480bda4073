"""Certified γ tables: the database cache, single-flight solves and background solve jobs.

Tables of every kind are solved, certified and read back through their mechanism
(:mod:`darrm_opt.mechanisms`). A table's id is the hash of its content
(:func:`darrm_opt.privacy.table.table_id`: kind, parameters, setting and γ). The service's solve of a
parameter set is found by its ``params_key`` (:func:`darrm_opt.mechanisms.params_key`), which is also the
solve job's id, so a request for parameters solved before is answered from the ``gamma_tables`` row. A
table is served only if its stored kind, parameters and γ hash to its id and its stored certificate
certifies these parameters; a solve never returns an uncertified table.

Solves run on a small thread pool. Identical concurrent requests share one solve: inside a process through
a map of in-flight futures, across processes through the ``solve_jobs`` row (job id = params key) that one
process claims under a heartbeated lease; a claim not renewed for ``job_stale_s`` (3 s: its process died) is
taken over by the next request for it.

Two pools: problems solved inline (below) on ``small_solve_workers`` threads of their own, so a small table
never waits behind a large solve; the others on ``solve_workers`` threads, where each tenant may have at
most ``solve_quota`` solves started in this process running or queued (another one is refused with 429
until one finishes; joining a solve already under way is always allowed).

200 or 202: a problem with at most ``inline_max_multisets`` corner multisets (K ≤ 25 with Δ > 0, K ≤ 101
pure) is solved while the request waits, up to ``inline_timeout_s``; anything larger, or slower, answers
202 with the job id and keeps solving; ``GET /v1/jobs/{id}`` reports progress and then the table.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from darrm_opt import solvers
from darrm_opt.errors import DarrmError, InvalidParameter
from darrm_opt.ledger.db import Database
from darrm_opt.ledger.schema import aware
from darrm_opt.ledger.tables import TableNotServable, table_columns
from darrm_opt.mechanisms import Mechanism, cost, mechanism, mechanism_for, params_key, table_from_row
from darrm_opt.privacy.profile import Profile
from darrm_opt.privacy.table import CertifiedTable
from darrm_opt.sampling import RandomBytes, system_random

from .repositories import JobCoordinator, TableRepository
from .settings import DEFAULT_MAX_MULTISETS, Settings

log = logging.getLogger("darrm.api.table_service")

CACHE_SIZE = 256
PROGRESS_EVERY_S = 1.0
@dataclass(frozen=True)
class ServedTable:
    """A stored certified table as the service serves it: the table, how it was solved, its sampler."""

    table: CertifiedTable
    solver: str
    solve_seconds: float
    created_at: datetime
    aggregator: Any  #: the kind's sampler (prepare, rows, draw; callable on votes)

    @property
    def id(self) -> str:
        return self.table.id

    @property
    def mechanism(self) -> Mechanism:
        return mechanism(self.table.kind)

    @property
    def params(self) -> Any:
        return self.table.params

    @property
    def gamma(self) -> tuple[float, ...]:
        return self.table.gamma

    @property
    def certificate(self) -> dict:
        return self.table.certificate_dict()

    @property
    def profile(self) -> Profile | None:
        return self.table.profile

    @property
    def teachers(self) -> str:
        return self.table.teachers

    @property
    def classes(self) -> int | None:
        return self.table.classes

    @property
    def epsilon0(self) -> float:
        return self.table.epsilon0

    @property
    def delta0(self) -> float:
        return self.table.delta0

    @property
    def expected_error(self) -> float:
        return self.table.expected_error

    def setting(self) -> dict[str, Any]:
        """The teacher setting and what it implies (disjoint-private: the teachers' (ε, Δ) caps the total)."""
        return self.mechanism.setting_note(self.params, self.teachers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.table.kind,
            **dict.fromkeys(self.mechanism.absent_fields),  # fields of the table schema this kind has not
            **self.params.canonical(),
            "teachers": self.teachers,
            "setting": self.setting(),
            "solver": self.solver,
            "gamma": list(self.gamma),
            "certificate": self.certificate,
            "privacy_profile": self.profile.to_dict() if self.profile is not None else None,
            "expected_error": self.expected_error,
            "solve_seconds": self.solve_seconds,
            "created_at": aware(self.created_at).isoformat(),
        }


@dataclass(frozen=True)
class Outcome:
    """``status``: hit (cached), miss (solved by this request), shared (joined another's solve), pending."""

    status: str
    job_id: str
    table: ServedTable | None = None


def _profile_on_read(m: Mechanism, params: Any, gamma: tuple[float, ...]) -> Profile | None:
    """The profile of a row stored without one, where the kind's profile is cheap enough to compute when
    read (larger tables serve without exact accounting until re-solved)."""
    if m.profile_on_read_max_K is not None and params.K > m.profile_on_read_max_K:
        return None
    return m.profile(params, np.asarray(gamma, dtype=np.float64))


def jsonable(info: dict) -> dict:
    out: dict[str, Any] = {}
    for k, v in info.items():
        if isinstance(v, (bool, int, str)) or v is None:
            out[k] = v
        else:
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                continue
    return out


class SolveQuotaExceeded(Exception):
    """A tenant has as many background solves running or queued in this process as ``solve_quota``."""

    def __init__(self, tenant: str, quota: int) -> None:
        super().__init__(f"tenant {tenant!r} has {quota} background solve(s) under way (DARRM_SOLVE_QUOTA); "
                         "poll them (GET /v1/jobs/{id}) and try again when one is done")


class TableService:
    def __init__(self, db: Database, settings: Settings, random_bytes: RandomBytes = system_random) -> None:
        self.db = db
        self.settings = settings
        self.random_bytes = random_bytes
        self._cache: collections.OrderedDict[str, ServedTable] = collections.OrderedDict()
        self._solved: dict[str, str] = {}  # params_key -> table id of the service's solve
        self._lock = threading.RLock()
        self._flights: dict[str, Future] = {}
        self._progress: dict[str, dict] = {}
        self._solver_errors: dict[str, str | None] = {}
        self._executor = ThreadPoolExecutor(settings.solve_workers, thread_name_prefix="darrm-solve")
        self._small = ThreadPoolExecutor(settings.small_solve_workers, thread_name_prefix="darrm-solve-small")
        self._by_tenant: dict[str, set[str]] = {}  # tenant -> keys of the background solves it started here
        self.rows = TableRepository(db)
        self.jobs = JobCoordinator(db, settings.job_stale_s)

    def in_flight(self) -> int:
        """Solves running or queued in this process."""
        with self._lock:
            return len(self._flights)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._small.shutdown(wait=False, cancel_futures=True)

    # --- reading ---------------------------------------------------------------------------------------
    def _served(self, row: Any) -> ServedTable:  # a GammaTable row (Core select)
        table = table_from_row(row, _profile_on_read)
        return ServedTable(
            table=table,
            solver=row.solver,
            solve_seconds=row.solve_seconds,
            created_at=aware(row.created_at),
            aggregator=mechanism(table.kind).sampler(table, self.random_bytes),
        )

    def cached(self, table_id: str) -> ServedTable | None:
        """The table if this process holds it in memory (no database access)."""
        with self._lock:
            return self._cache.get(table_id)

    def _remember(self, table: ServedTable) -> None:
        with self._lock:
            self._cache[table.id] = table
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)

    def get(self, table_id: str) -> ServedTable | None:
        """The certified table ``table_id`` (its content hash; from memory or the database), None if unknown."""
        with self._lock:
            hit = self._cache.get(table_id)
            if hit is not None:
                self._cache.move_to_end(table_id)
                return hit
        row = self.rows.by_id(table_id)
        if row is None:
            return None
        table = self._served(row)
        self._remember(table)
        return table

    def solved(self, key: str) -> ServedTable | None:
        """The service's own solve of the parameters with ``params_key`` ``key``, None if not solved yet."""
        with self._lock:
            table_id = self._solved.get(key)
        if table_id is not None:
            return self.get(table_id)
        row = self.rows.by_params_key(key)
        if row is None:
            return None
        table = self._served(row)
        self._remember(table)
        with self._lock:
            self._solved[key] = table.id
        return table

    def profile_of(self, table_id: str) -> Profile | None:
        """The privacy profile of a served table (None when unknown or not servable): exact accounting."""
        try:
            table = self.get(table_id)
        except TableNotServable:
            return None
        return table.profile if table is not None else None

    def list(self, *, filters: dict[str, Any], limit: int, offset: int) -> tuple[list[ServedTable], int]:
        rows, total = self.rows.page(filters, limit, offset)
        out = []
        for row in rows:
            try:
                out.append(self._served(row))
            except TableNotServable as exc:
                log.error("not listing %s", exc)
        return out, total

    # --- solving ---------------------------------------------------------------------------------------
    def _inline(self, params: Any) -> bool:
        """Whether a solve is awaited by the request (its kind's ``solve_size`` up to
        ``inline_max_multisets``), up to ``inline_timeout_s``. Raises InvalidParameter (422) naming K for K over
        the kind's ``max_K``; naming the parameter its cost grows with (the kind's ``solve_cost_key``) for a
        predicted wall time or memory (:mod:`darrm_opt.mechanisms.cost`) over DARRM_MAX_SOLVE_SECONDS or
        DARRM_MAX_SOLVE_MEMORY_MB; naming K for a size over DARRM_MAX_MULTISETS (by default only for an LP
        the cost model has no measured solves of)."""
        m = mechanism_for(params)
        if m.max_K is not None and params.K > m.max_K:
            raise InvalidParameter("K", f"too large for this service: {m.kind} tables take K <= {m.max_K}", params.K)
        predicted = cost.predict(params)
        if predicted is not None and predicted.key is not None:
            self._admit(m.kind, predicted.key, predicted)
        size = m.solve_size(params)
        limit = self.settings.max_multisets
        if limit is None and predicted is None:
            limit = DEFAULT_MAX_MULTISETS
        if limit is not None and size > limit:
            raise InvalidParameter(
                "K",
                f"too large for this service: {size} privacy constraints (corner multisets) exceed "
                f"DARRM_MAX_MULTISETS = {limit}",
                params.K,
            )
        return size <= self.settings.inline_max_multisets

    def admit(self, params: Any) -> bool:
        """The solve cost model's decision on ``params`` (:meth:`_inline`): InvalidParameter naming the rule
        when refused, else whether it is solved inline. Plans are admitted by it too."""
        return self._inline(params)

    def _admit(self, kind: str, key: cost.SolveCostKey, predicted: cost.Cost) -> None:
        """InvalidParameter naming ``key``'s parameter when the predicted cost is over a limit."""
        s = self.settings
        over = [f"{predicted.seconds:.3g} s over DARRM_MAX_SOLVE_SECONDS = {s.max_solve_seconds:g}"
                for _ in range(predicted.seconds > s.max_solve_seconds)]
        over += [f"{predicted.memory_mb:.3g} MB over DARRM_MAX_SOLVE_MEMORY_MB = {s.max_solve_memory_mb:g}"
                 for _ in range(predicted.memory_mb > s.max_solve_memory_mb)]
        if over:
            size = "" if key.feature == key.parameter else f" at {key.feature} = {key.size:.4g}"
            raise InvalidParameter(key.parameter, f"too large for this service: the {kind} solve{size} is "
                                                  f"predicted to take {predicted.seconds:.3g} s and "
                                                  f"{predicted.memory_mb:.3g} MB ({'; '.join(over)})", key.value)

    def request(self, params: Any, solver: str, teachers: str = "shared", tenant: str | None = None) -> Outcome:
        """A certified table for ``params`` in the setting ``teachers``: cached, solved now, or a pending job
        (see the module doc); ``tenant``: whose quota of background solves a new one counts against."""
        self.check_solver(solver)
        key = params_key(params, teachers)
        cached = self.solved(key)
        if cached is not None:
            return Outcome("hit", key, cached)
        inline = self._inline(params)
        future, role = self._flight(key, params, solver, teachers, inline, tenant)
        if inline:
            deadline = time.monotonic() + self.settings.inline_timeout_s
            if future is not None:
                wait([future], timeout=self.settings.inline_timeout_s)
                if future.done():
                    return Outcome(role, key, future.result())  # raises the solve's DarrmError
            else:  # another process is solving it: watch the database
                pause = 0.02
                while time.monotonic() < deadline:
                    table = self.solved(key)
                    if table is not None:
                        return Outcome("shared", key, table)
                    job = self.jobs.row(key)
                    if job is not None and job.status == "failed":
                        break
                    time.sleep(pause)
                    pause = min(pause * 2, 0.5)
        return Outcome("pending", key)

    def check_solver(self, solver: str) -> None:
        """422 naming ``solver`` unless it is a backend available here (availability checked once)."""
        if solver not in solvers.BACKENDS:
            raise InvalidParameter("solver", f"must be one of {', '.join(solvers.BACKENDS)}", solver)
        if solver not in self._solver_errors:
            try:
                solvers.get_backend(solver)
                self._solver_errors[solver] = None
            except solvers.SolverUnavailableError as exc:
                self._solver_errors[solver] = str(exc)
        error = self._solver_errors[solver]
        if error is not None:
            raise InvalidParameter("solver", error)

    def _flight(self, key: str, params: Any, solver: str, teachers: str, inline: bool = True,
                tenant: str | None = None) -> tuple[Future | None, str]:
        with self._lock:
            running = self._flights.get(key)
            if running is not None:
                return running, "shared"
            mine = None if inline or tenant is None else self._by_tenant.setdefault(tenant, set())
            if mine is not None and len(mine) >= self.settings.solve_quota:
                raise SolveQuotaExceeded(tenant or "", self.settings.solve_quota)
            claim = self.jobs.claim(key, {**params.canonical(), "teachers": teachers}, solver)
            if claim == "foreign":
                return None, "foreign"
            if claim == "done":
                done: Future = Future()
                table = self.solved(key)
                if table is not None:
                    done.set_result(table)
                    return done, "hit"
            future = (self._small if inline else self._executor).submit(self._solve, key, params, solver, teachers)
            self._flights[key] = future
            if mine is not None:
                mine.add(key)
        future.add_done_callback(lambda _f: self._land(key))
        return future, "miss"

    def _land(self, key: str) -> None:
        with self._lock:
            self._flights.pop(key, None)
            for keys in self._by_tenant.values():
                keys.discard(key)

    def _solve(self, key: str, params: Any, solver: str, teachers: str) -> ServedTable:
        self._progress[key] = {"stage": "starting"}
        self.jobs.report(key, status="running", stage="starting")
        last = [time.monotonic()]

        def progress(stage: str, **info: Any) -> None:
            state = {"stage": stage, **jsonable(info)}
            self._progress[key] = state
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S:
                last[0] = now
                self.jobs.report(key, stage=stage[:32], progress=json.dumps(state))

        try:
            solved = mechanism_for(params).solve(params, solver=solver, teachers=teachers, progress=progress)
            self.store(solved.table, solver=solved.solver, solve_seconds=solved.seconds, params_key=key)
        except DarrmError as exc:
            self.jobs.report(key, status="failed", stage="failed", error=str(exc))
            raise
        except Exception as exc:
            log.exception("solve of table %s failed", key)
            self.jobs.report(key, status="failed", stage="failed", error=f"internal error: {type(exc).__name__}")
            raise
        finally:
            self._progress.pop(key, None)
            self.jobs.release(key)
        served = self.solved(key)
        if served is None:  # pragma: no cover - the row was just written
            raise TableNotServable(f"the solve of {key} vanished after it was stored")
        return served

    def store(self, table: CertifiedTable, *, solver: str, solve_seconds: float, params_key: str | None) -> None:
        """Store a certified table (unless a row with its content is stored) and, with ``params_key``, make
        it the service's solve of those parameters and mark that job done. A parameter set solved already
        keeps its table (the new one is stored without the key)."""
        columns = table_columns(table, solver=solver, solve_seconds=solve_seconds, params_key=params_key)
        self.rows.insert(columns, done_job=params_key)

    # --- jobs ------------------------------------------------------------------------------------------
    def job(self, job_id: str) -> dict[str, Any] | None:
        """A solve job as clients see it (``job_id`` is the parameters' key), with its table once done."""
        # the job row first, then the table: a solve stores its table and marks its job done in one
        # transaction, so a job read as unfinished is reported with its table if that has landed since
        state = self.jobs.state(job_id, self._progress.get(job_id))
        table = self.solved(job_id)
        progress: dict[str, Any]
        if table is not None:
            status, stage, progress, error = "done", "done", {}, None
        elif state is None or state[0] == "done":  # unknown, or done by a table that is not servable here
            return None if state is None else {"job_id": job_id, "status": "failed", "stage": "failed",
                                               "progress": {}, "error": "the stored table failed its re-check",
                                               "table_id": None, "table": None}
        else:
            status, stage, progress, error = state
        return {
            "job_id": job_id,
            "status": status,
            "stage": stage,
            "progress": progress,
            "error": error,
            "table_id": table.id if table is not None else None,
            "table": table.to_dict() if table is not None else None,
        }
