"""Certified γ tables: the database cache, single-flight solves and background solve jobs.

A table's id is :func:`table_key` (a hash of the canonical parameters and, for a binary table outside the
paper's ``shared`` setting, of the teacher setting; ``Params.key()`` for shared tables), so a request for
parameters solved before is answered from the ``gamma_tables`` row. Binary ``disjoint-nonprivate`` (PATE)
tables are solved by the PATE-setting LP (:mod:`darrm_opt.optimize.pate_setting`) and certified over every
(l, l ± 1) pair; ``disjoint-private`` tables are the shared LP's and say that the teachers' (ε, Δ) caps the
total. A table is served only if its stored certificate says ``certified`` for the stored parameters' bound
and γ has K + 1 values in [0, 1]; ``solve`` itself never returns an uncertified table.

Solves run on a small thread pool. Identical concurrent requests share one solve: inside a process through
a map of in-flight futures, across processes through the ``solve_jobs`` row (job id = table id) that one
process claims; a claim whose owner has not reported progress for ``job_stale_s`` is taken over.

200 or 202: a problem with at most ``inline_max_multisets`` corner multisets (K ≤ 25 with Δ > 0, K ≤ 101
pure) is solved while the request waits, up to ``inline_timeout_s``; anything larger, or slower, answers
202 with the job id and keeps solving; ``GET /v1/jobs/{id}`` reports progress and then the table.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError

import solvers
from darrm_opt.errors import DarrmError, InvalidParameter
from darrm_opt.model.corners import n_corners, n_multisets
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior
from darrm_opt.model.neighbours import PateParams, parse_teachers, setting_note
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import Solution, solve
from darrm_opt.optimize.pate_setting import solve_pate
from darrm_opt.privacy.pair_profile import multiclass_profile, pate_profile
from darrm_opt.privacy.profile import PrivacyProfile, privacy_profile
from darrm_opt.release.aggregator import Aggregator, MulticlassAggregator, RandomBytes, system_random

from .db import Database
from .models import GammaTable, SolveJob, utcnow
from .settings import Settings

log = logging.getLogger("darrm.api.table_service")

#: identifies this process as the owner of the solve jobs it claims
OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
CACHE_SIZE = 256
#: a row stored without a privacy profile gets one computed when served only up to this K
PROFILE_ON_READ_MAX_K = 25
PROGRESS_EVERY_S = 1.0
#: the largest K of a binary disjoint-nonprivate table (its LP holds a dense 4K × (K + 1) matrix: 32 MB at 1001)
PATE_MAX_K = 1001
PATE = "disjoint-nonprivate"


class TableNotServable(DarrmError):
    """A stored table failed the re-check before serving (not certified, or inconsistent)."""


def _aware(ts: datetime) -> datetime:
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


#: the parameters of a served table: binary (0/1 votes; shared-data or PATE setting) or multi-class
#: (class-label votes, PATE setting)
TableParams = Params | PateParams | MulticlassParams


def table_key(params: TableParams, teachers: str = "shared") -> str:
    """The table id: ``key()`` of shared-data and multi-class parameters; for a binary table of another
    setting the same hash over its canonical parameters with the setting (a disjoint-private table is
    another row than the shared one; a PATE table's parameters have no m)."""
    teachers = parse_teachers(teachers)
    if isinstance(params, MulticlassParams):
        return params.key()
    if isinstance(params, PateParams) != (teachers == PATE):
        raise InvalidParameter("teachers", "binary disjoint-nonprivate tables (and only they) have PATE parameters")
    if teachers in ("shared", PATE):
        return params.key()  # PATE: the hash of its canonical parameters, which name the setting
    text = json.dumps({**params.canonical(), "teachers": teachers}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ServedTable:
    id: str
    params: TableParams
    solver: str
    gamma: tuple[float, ...]
    certificate: dict
    expected_error: float
    solve_seconds: float
    created_at: datetime
    aggregator: Aggregator | MulticlassAggregator
    profile: PrivacyProfile | None = None  #: the certified privacy profile (exact accounting)
    teachers: str = "shared"  #: the teacher setting (multi-class and PATE tables: disjoint-nonprivate)

    @property
    def classes(self) -> int | None:
        """C of a multi-class table (its votes are class labels 0..C−1); None for a binary table."""
        return self.params.C if isinstance(self.params, MulticlassParams) else None

    @property
    def epsilon0(self) -> float:
        """Per-answer ε: m·ε (binary, shared data), the table's target ε (PATE setting, multi-class)."""
        if isinstance(self.params, (MulticlassParams, PateParams)):
            return self.params.epsilon
        return self.params.m * self.params.epsilon

    @property
    def delta0(self) -> float:
        """Per-answer δ."""
        return float(self.params.delta or 0.0)  # Params always sets delta (it defaults to 1 − (1 − Δ)^m)

    def setting(self) -> dict[str, Any]:
        """The teacher setting and what it implies (disjoint-private: the teachers' (ε, Δ) caps the total)."""
        p = self.params
        if isinstance(p, Params):
            return setting_note(self.teachers, p.epsilon, p.teacher_delta).to_dict()
        return setting_note(PATE).to_dict()

    def to_dict(self) -> dict[str, Any]:
        pate = {"m": None, "teacher_delta": None} if isinstance(self.params, PateParams) else {}
        return {
            "id": self.id,
            **pate,  # a binary PATE table has neither
            **self.params.canonical(),  # a multi-class table: K, classes, teachers, target_epsilon, delta, prior
            "teachers": self.teachers,
            "setting": self.setting(),
            "solver": self.solver,
            "gamma": list(self.gamma),
            "certificate": self.certificate,
            "privacy_profile": self.profile.to_dict() if self.profile is not None else None,
            "expected_error": self.expected_error,
            "solve_seconds": self.solve_seconds,
            "created_at": _aware(self.created_at).isoformat(),
        }


@dataclass(frozen=True)
class Outcome:
    """``status``: hit (cached), miss (solved by this request), shared (joined another's solve), pending."""

    status: str
    job_id: str
    table: ServedTable | None = None


def _row_params(row: Any) -> tuple[TableParams, str]:
    """The parameters of a stored row and its teacher setting (PATE and multi-class rows store m = 1 and
    teacher_delta = 0, their ε the per-answer ε: migrations 0005, 0006)."""
    classes = getattr(row, "classes", None)
    if classes is not None:
        return MulticlassParams(row.K, classes, row.epsilon, row.delta, MulticlassPrior.parse(row.prior)), PATE
    teachers = parse_teachers(getattr(row, "teachers", None) or "shared")
    if teachers == PATE:
        if row.m != 1 or row.teacher_delta != 0:
            raise TableNotServable(f"table {row.id}: a disjoint-nonprivate row must store m = 1, teacher_delta = 0")
        return PateParams(row.K, row.epsilon, row.delta, row.prior), teachers
    return Params(row.K, row.m, row.epsilon, row.teacher_delta, row.delta, row.prior), teachers


def _check_row(row: GammaTable) -> tuple[TableParams, str, tuple[float, ...], dict]:
    """The row's parameters, setting, γ and certificate, checked: parameters hash to the id, K + 1 values in
    [0, 1], a certificate for these parameters (its bound, or for a multi-class table its δ)."""
    params, teachers = _row_params(row)
    if table_key(params, teachers) != row.id:
        raise TableNotServable(f"table {row.id}: stored parameters do not hash to its id")
    gamma = tuple(float(x) for x in json.loads(row.gamma))
    cert = json.loads(row.certificate)
    if len(gamma) != params.K + 1 or not all(0.0 <= g <= 1.0 for g in gamma):
        raise TableNotServable(f"table {row.id}: γ does not have K + 1 values in [0, 1]")
    stated = ("delta", params.delta) if isinstance(params, MulticlassParams) else ("bound", params.bound)
    if cert.get("certified") is not True or cert.get(stated[0]) != stated[1]:
        raise TableNotServable(f"table {row.id}: its certificate does not certify these parameters")
    return params, teachers, gamma, cert


def _row_profile(row: Any, params: TableParams, gamma: tuple[float, ...]) -> PrivacyProfile | None:
    """The stored profile of a row, whatever the table's kind (the ledger composes it exactly); computed
    from γ for binary rows stored before it was kept (its sweeps cost about as much as the certificate's, so
    only small tables are computed here; larger ones serve without exact accounting until re-solved). A
    multi-class row without one gets its exact profile computed (cheap: 0.05 CPU-s at K = 250, C = 10)."""
    text = getattr(row, "privacy_profile", None)
    if text:
        try:
            return PrivacyProfile.from_dict(json.loads(text))
        except (ValueError, TypeError) as exc:
            raise TableNotServable(f"table {row.id}: its stored privacy profile is malformed") from exc
    if isinstance(params, MulticlassParams):
        return multiclass_profile(params, gamma)
    if isinstance(params, PateParams):
        return pate_profile(params, gamma)  # 4K rows: always cheap
    if isinstance(params, Params) and params.K <= PROFILE_ON_READ_MAX_K:
        return privacy_profile(params, gamma)
    return None


def _jsonable(info: dict) -> dict:
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


def _columns(sol: Any, teachers: str, m: float, teacher_delta: float, classes: int | None = None) -> dict[str, Any]:
    """The ``gamma_tables`` columns of a solved table (never an uncertified one; the solvers raise first).
    PATE-setting and multi-class rows store m = 1 and teacher_delta = 0, ``epsilon`` their per-answer ε
    (migrations 0005, 0006), and multi-class rows their number of classes."""
    if not sol.certificate.certified:
        raise TableNotServable("refusing to store an uncertified table")
    p = sol.params
    columns = {"K": p.K, "m": m, "epsilon": p.epsilon, "teacher_delta": teacher_delta, "delta": p.delta,
               "prior": p.prior.spec, "teachers": teachers, "solver": sol.solver,
               "gamma": json.dumps(list(sol.gamma)), "certificate": json.dumps(sol.certificate.to_dict()),
               "expected_error": float(sol.expected_error), "solve_seconds": float(sol.seconds)}
    if classes is not None:
        columns["classes"] = classes
    return columns


def _binary_columns(sol: Solution, teachers: str = "shared") -> dict[str, Any]:
    """The columns of a solved binary shared-data table."""
    return _columns(sol, teachers, sol.params.m, sol.params.teacher_delta)


def _pate_columns(sol: Any) -> dict[str, Any]:
    """The columns of a solved binary PATE-setting table."""
    return _columns(sol, PATE, 1.0, 0.0)


def _solve_multiclass(params: MulticlassParams, solver: str) -> tuple[dict[str, Any], PrivacyProfile | None]:
    """Solve and certify a multi-class table; its ``gamma_tables`` columns (``classes`` = C, ``epsilon`` its
    per-answer ε, m = 1, teacher_delta = 0: migration 0005) and its exact privacy profile (the ledger
    composes it exactly)."""
    from darrm_opt.optimize.multiclass import solve_multiclass

    sol = solve_multiclass(params, solver=solver)  # raises CertificationFailed rather than return uncertified
    return _columns(sol, PATE, 1.0, 0.0, classes=params.C), multiclass_profile(params, sol.gamma)


class TableService:
    def __init__(self, db: Database, settings: Settings, random_bytes: RandomBytes = system_random) -> None:
        self.db = db
        self.settings = settings
        self.random_bytes = random_bytes
        self._cache: collections.OrderedDict[str, ServedTable] = collections.OrderedDict()
        self._lock = threading.RLock()
        self._flights: dict[str, Future] = {}
        self._progress: dict[str, dict] = {}
        self._solver_errors: dict[str, str | None] = {}
        self._executor = ThreadPoolExecutor(settings.solve_workers, thread_name_prefix="darrm-solve")

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    # --- reading ---------------------------------------------------------------------------------------
    def _served(self, row: Any) -> ServedTable:  # a GammaTable row (Core select)
        params, teachers, gamma, cert = _check_row(row)
        return ServedTable(
            teachers=teachers,
            profile=_row_profile(row, params, gamma),
            id=row.id,
            params=params,
            solver=row.solver,
            gamma=gamma,
            certificate=cert,
            expected_error=row.expected_error,
            solve_seconds=row.solve_seconds,
            created_at=_aware(row.created_at),
            aggregator=(MulticlassAggregator(gamma, params.C, self.random_bytes)
                        if isinstance(params, MulticlassParams) else Aggregator(gamma, self.random_bytes)),
        )

    def cached(self, table_id: str) -> ServedTable | None:
        """The table if this process holds it in memory (no database access)."""
        with self._lock:
            return self._cache.get(table_id)

    def get(self, table_id: str) -> ServedTable | None:
        """The certified table ``table_id`` (from memory or the database), None if unknown."""
        with self._lock:
            hit = self._cache.get(table_id)
            if hit is not None:
                self._cache.move_to_end(table_id)
                return hit
        with self.db.read() as conn:
            row = conn.execute(select(GammaTable.__table__).where(GammaTable.id == table_id)).first()
        if row is None:
            return None
        table = self._served(row)
        with self._lock:
            self._cache[table_id] = table
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return table

    def profile_of(self, table_id: str) -> PrivacyProfile | None:
        """The privacy profile of a served table (None when unknown or not servable): exact accounting."""
        try:
            table = self.get(table_id)
        except TableNotServable:
            return None
        return table.profile if table is not None else None

    def list(self, *, filters: dict[str, Any], limit: int, offset: int) -> tuple[list[ServedTable], int]:
        conds = [getattr(GammaTable, name) == value for name, value in filters.items() if value is not None]
        with self.db.read() as conn:
            total = conn.execute(select(func.count()).select_from(GammaTable).where(*conds)).scalar_one()
            rows = conn.execute(
                select(GammaTable.__table__).where(*conds).order_by(GammaTable.created_at, GammaTable.id)
                .limit(limit).offset(offset)
            ).all()
        out = []
        for row in rows:
            try:
                out.append(self._served(row))
            except TableNotServable as exc:
                log.error("not listing %s", exc)
        return out, total

    # --- solving ---------------------------------------------------------------------------------------
    def _inline(self, params: TableParams) -> bool:
        """Whether a solve is awaited by the request (a binary table up to ``inline_max_multisets`` corner
        multisets; a multi-class one always: its LP has K + 1 variables, K = 250, C = 10 in seconds), up to
        ``inline_timeout_s``. Raises InvalidParameter (422) for a binary table over DARRM_MAX_MULTISETS."""
        if isinstance(params, MulticlassParams):
            return True
        if isinstance(params, PateParams):
            if params.K > PATE_MAX_K:
                raise InvalidParameter("K", f"too large for this service: binary disjoint-nonprivate tables take "
                                            f"K <= {PATE_MAX_K}", params.K)
            return True
        size = n_multisets(params.K, n_corners(params))
        if size > self.settings.max_multisets:
            raise InvalidParameter(
                "K",
                f"too large for this service: {size} corner multisets exceed DARRM_MAX_MULTISETS = "
                f"{self.settings.max_multisets}",
                params.K,
            )
        return size <= self.settings.inline_max_multisets

    def request(self, params: TableParams, solver: str, teachers: str = "shared") -> Outcome:
        """A certified table for ``params`` in the setting ``teachers``: cached, solved now, or a pending job
        (see the module doc)."""
        self._check_solver(solver)
        key = table_key(params, teachers)
        cached = self.get(key)
        if cached is not None:
            return Outcome("hit", key, cached)
        inline = self._inline(params)
        future, role = self._flight(key, params, solver, teachers)
        if inline:
            deadline = time.monotonic() + self.settings.inline_timeout_s
            if future is not None:
                wait([future], timeout=self.settings.inline_timeout_s)
                if future.done():
                    return Outcome(role, key, future.result())  # raises the solve's DarrmError
            else:  # another process is solving it: watch the database
                pause = 0.02
                while time.monotonic() < deadline:
                    table = self.get(key)
                    if table is not None:
                        return Outcome("shared", key, table)
                    job = self._job_row(key)
                    if job is not None and job.status == "failed":
                        break
                    time.sleep(pause)
                    pause = min(pause * 2, 0.5)
        return Outcome("pending", key)

    def _check_solver(self, solver: str) -> None:
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

    def _flight(self, key: str, params: TableParams, solver: str, teachers: str) -> tuple[Future | None, str]:
        with self._lock:
            running = self._flights.get(key)
            if running is not None:
                return running, "shared"
            claim = self._claim(key, {**params.canonical(), "teachers": teachers}, solver)
            if claim == "foreign":
                return None, "foreign"
            if claim == "done":
                done: Future = Future()
                table = self.get(key)
                if table is not None:
                    done.set_result(table)
                    return done, "hit"
            future = self._executor.submit(self._solve, key, params, solver, teachers)
            self._flights[key] = future
        future.add_done_callback(lambda _f: self._land(key))
        return future, "miss"

    def _land(self, key: str) -> None:
        with self._lock:
            self._flights.pop(key, None)

    def _claim(self, key: str, canonical: dict, solver: str) -> str:
        """Claim the solve of ``key`` for this process: 'claimed', 'foreign' (live elsewhere) or 'done'."""
        now = utcnow()
        values = {
            "params": json.dumps(canonical),
            "solver": solver,
            "status": "queued",
            "stage": "queued",
            "progress": "{}",
            "error": None,
            "owner": OWNER,
            "updated_at": now,
        }
        for _attempt in range(3):
            try:
                with self.db.write() as conn:
                    row = conn.execute(
                        select(SolveJob.__table__).where(SolveJob.id == key).with_for_update()
                    ).first()
                    if row is None:
                        conn.execute(insert(SolveJob).values(id=key, created_at=now, **values))
                        return "claimed"
                    if row.status == "done":
                        return "done"
                    fresh = (now - _aware(row.updated_at)).total_seconds() < self.settings.job_stale_s
                    if row.status in ("queued", "running") and row.owner != OWNER and fresh:
                        return "foreign"
                    conn.execute(update(SolveJob).where(SolveJob.id == key).values(**values))
                    return "claimed"
            except IntegrityError:  # another process inserted the row first: look again
                continue
        return "foreign"

    def _set_job(self, key: str, **values: Any) -> None:
        values["updated_at"] = utcnow()
        try:
            with self.db.write() as conn:
                conn.execute(update(SolveJob).where(SolveJob.id == key).values(**values))
        except Exception:  # noqa: BLE001 - progress reports are best effort; the solve goes on
            log.warning("could not record progress of job %s", key, exc_info=True)

    def _solve(self, key: str, params: TableParams, solver: str, teachers: str) -> ServedTable:
        self._progress[key] = {"stage": "starting"}
        self._set_job(key, status="running", stage="starting")
        last = [time.monotonic()]

        def progress(stage: str, **info: Any) -> None:
            state = {"stage": stage, **_jsonable(info)}
            self._progress[key] = state
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S:
                last[0] = now
                self._set_job(key, stage=stage[:32], progress=json.dumps(state))

        try:
            if isinstance(params, MulticlassParams):
                self._store_row(key, *_solve_multiclass(params, solver))
            elif isinstance(params, PateParams):
                pate = solve_pate(params, solver=solver)  # raises CertificationFailed rather than uncertified
                self._store_row(key, _pate_columns(pate), pate_profile(params, pate.gamma))
            else:
                solution = solve(params, solver=solver, mode="lazy", progress=progress)
                known = (solution.certificate, solution.sweep) if solution.sweep is not None else None
                profile = privacy_profile(params, solution.gamma, progress=progress, certified=known)  # no 2nd sweep
                self._store(key, solution, profile, teachers)
        except DarrmError as exc:
            self._set_job(key, status="failed", stage="failed", error=str(exc))
            raise
        except Exception as exc:
            log.exception("solve of table %s failed", key)
            self._set_job(key, status="failed", stage="failed", error=f"internal error: {type(exc).__name__}")
            raise
        finally:
            self._progress.pop(key, None)
        table = self.get(key)
        if table is None:  # pragma: no cover - the row was just written
            raise TableNotServable(f"table {key} vanished after it was stored")
        return table

    def _store(self, key: str, sol: Any, profile: PrivacyProfile, teachers: str = "shared") -> None:
        """Store a solved binary table: shared-data (or disjoint-private) Solution, or a PATE-setting one."""
        columns = _pate_columns(sol) if isinstance(sol.params, PateParams) else _binary_columns(sol, teachers)
        self._store_row(key, columns, profile)

    def _store_row(self, key: str, columns: dict[str, Any], profile: PrivacyProfile | None) -> None:
        """Insert a solved table's row (``columns`` from :func:`_binary_columns` or :func:`_solve_multiclass`)
        and mark its job done."""
        row = {"id": key, **columns, "privacy_profile": None if profile is None else json.dumps(profile.to_dict()),
               "created_at": utcnow()}
        with self.db.write() as conn:
            exists = conn.execute(select(GammaTable.id).where(GammaTable.id == key)).first()
            if exists is None:
                conn.execute(insert(GammaTable).values(**row))
            conn.execute(
                update(SolveJob).where(SolveJob.id == key)
                .values(status="done", stage="done", progress="{}", error=None, updated_at=utcnow())
            )

    # --- jobs ------------------------------------------------------------------------------------------
    def _job_row(self, key: str) -> Any:
        with self.db.read() as conn:
            return conn.execute(select(SolveJob.__table__).where(SolveJob.id == key)).first()

    def job(self, job_id: str) -> dict[str, Any] | None:
        row = self._job_row(job_id)
        table = self.get(job_id)
        if row is None and table is None:
            return None
        progress: dict[str, Any]
        if table is not None:
            status, stage, progress, error = "done", "done", {}, None
        else:
            status, stage, error = row.status, row.stage, row.error
            progress = self._progress.get(job_id) or json.loads(row.progress or "{}")
            if status in ("queued", "running"):
                age = (utcnow() - _aware(row.updated_at)).total_seconds()
                if age >= self.settings.job_stale_s and row.owner != OWNER:
                    status, error = "stale", "the process solving this table stopped reporting; POST again"
        return {
            "job_id": job_id,
            "status": status,
            "stage": stage,
            "progress": progress,
            "error": error,
            "table_id": job_id if table is not None else None,
            "table": table.to_dict() if table is not None else None,
        }
