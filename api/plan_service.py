"""Budget plans in the service: the planned table is stored and served like any table, the plan in the database.

Every plan is a job (:class:`darrm_opt.planning.job.Job`) planned by the one entry point,
:func:`darrm_opt.mechanisms.plan_job`, on the table service's solve pool. A job of shared or disjoint-private
teachers (:meth:`PlanService.request`) answers with the planned table and its plan (its id a hash of its
canonical inputs K, ε, Δ, Q, ε_B, δ_B, prior; for disjoint-private teachers whose (ε, Δ) is within the budget,
the plain majority, free); a job of PATE's setting (``disjoint-nonprivate``), with classes or naming a mechanism
(:meth:`PlanService.request_job`) answers with the most accurate offer and the others beside it. The planned
table is stored in ``gamma_tables`` under its content hash (so ``/v1/tables/{id}``, ``/v1/aggregate`` and
ledgers' exact accounting see it; it becomes the service's solve of its parameters unless they were solved
before). The plan itself (the request that rebuilds its work, status, progress, document or error) is a
``plans`` row (:class:`api.plan_store.PlanStore`): any process answers it, and one process runs it under a
heartbeated lease, so the same plan posted to several processes at once is computed once, and a plan whose
process died is taken over by the next process that reads or posts it. The plan's spent ε is recomputed from
the served table's profile by the ledger's accounting and must fit the budget (else 409).

A shared-setting plan is admitted or refused by the solve cost model of ``/v1/tables``
(:meth:`TableService.admit`, on its largest problem: K teachers at the teachers' (ε, Δ)). 200 or 202: a plan
whose problems are solved inline as tables are (or that needs no search: the plain majority, free) runs while
the request waits, up to ``inline_timeout_s``; otherwise 202 with ``/v1/plans/{id}`` to poll.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any

from darrm_opt.errors import DarrmError, InvalidParameter
from darrm_opt.mechanisms import mechanism, mechanism_for, params_key, plan_job
from darrm_opt.model.params import Params
from darrm_opt.planning.job import Job, Offer
from darrm_opt.planning.plan import check_shared_job, majority_free
from darrm_opt.privacy import accounting
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.release.documents import majority_free_document

from .plan_store import PlanRow, PlanStore
from .table_service import PROGRESS_EVERY_S, TableNotServable, TableService, jsonable

log = logging.getLogger("darrm.api.plans")

def plan_key(job: Job, teachers: str | None = None) -> str:
    """The plan id of a shared or disjoint-private job: a hash of its canonical inputs (and of ``teachers``
    when given: disjoint-private, the plain majority free)."""
    req = check_shared_job(job)
    canonical = req.canonical() if teachers is None else {**req.canonical(), "teachers": teachers}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(("plan:" + text).encode()).hexdigest()[:32]


def job_plan_key(job: Job, kinds: list[str] | None) -> str:
    """The plan id of a job planned over every mechanism (or ``kinds``): a hash of its canonical inputs."""
    text = json.dumps({**job.canonical(), "kinds": kinds}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(("job-plan:" + text).encode()).hexdigest()[:32]


def _free_document(key: str, job: Job, best: Offer) -> dict[str, Any]:
    """The plan of disjoint-private teachers whose (ε, Δ) is within the budget: the plain majority, free, with
    the teachers' cap it spends."""
    doc = {**majority_free_document(best, job), "plan_id": key}
    doc["plan"] = {**doc["plan"], "total_cap": {"epsilon": job.epsilon, "delta": job.teacher_delta},
                   "note": doc["note"]}
    return doc


class PlanFailed(DarrmError):
    """A plan that failed (in any process): its error, answered 422."""


@dataclass
class PlanState:
    """One plan run in this process: its future and its last progress event."""

    future: Future
    progress: dict[str, Any] = field(default_factory=dict)


Work = Callable[[Callable[..., None]], dict[str, Any]]


def _table_id(doc: dict[str, Any]) -> str | None:
    """The planned table's id in a plan's document (a shared-setting plan is its table; a job plan names it)."""
    table = doc.get("table")
    if isinstance(table, dict):
        return table.get("id")
    return doc.get("id") if "gamma" in doc and "certificate" in doc else None


class PlanService:
    def __init__(self, tables: TableService, store: PlanStore | None = None) -> None:
        self.tables = tables
        self.store = store or PlanStore(tables.db)
        self._lock = threading.Lock()
        self._running: dict[str, PlanState] = {}

    def _inline(self, job: Job) -> bool:
        """422 naming the field of an invalid job, or the rule's parameter when a table of the plan's largest
        problem (K teachers at (ε, Δ)) would be refused by the solve cost model of ``/v1/tables``; True when
        run inline."""
        req = check_shared_job(job)
        if majority_free(job) is not None:
            return True  # no search
        return self.tables.admit(Params(K=req.K, m=1, epsilon=req.epsilon, teacher_delta=req.teacher_delta))

    def request(self, job: Job) -> tuple[str, str, dict[str, Any] | None]:
        """A job of shared or disjoint-private teachers (``plan_job``): (plan id, cache status 'hit' | 'miss' |
        'shared' | 'pending', the planned table with its plan, or None while it runs)."""
        self.tables.check_solver(job.solver)
        inline = self._inline(job)
        key = plan_key(job, "disjoint-private" if majority_free(job) is not None else None)
        return self._single_flight(key, {"kind": "shared", "job": job.canonical()}, inline)

    def _shared_work(self, key: str, spec: dict[str, Any]) -> Work:
        job = Job(**spec["job"])
        return lambda progress: self._publish(key, job, *plan_job(job, progress))

    def _work(self, key: str, spec: dict[str, Any]) -> Work:
        """The work a stored plan request names (any process rebuilds it from its row)."""
        return {"shared": self._shared_work, "job": self._job_work}[spec["kind"]](key, spec)

    def _single_flight(self, key: str, spec: dict[str, Any], inline: bool = True
                       ) -> tuple[str, str, dict[str, Any] | None]:
        """The plan ``key`` from the database, from its run in flight (here or in another process), or run now
        on the solve pool (``spec`` names its work); waited for up to ``inline_timeout_s`` when ``inline``:
        (key, 'hit' | 'miss' | 'shared' | 'pending', the document or None while it runs)."""
        with self._lock:
            state = self._running.get(key)
            role = "shared"
            if state is None:
                claim, row = self.store.claim(key, spec)
                if claim == "done":
                    return key, "hit", row.result  # type: ignore[union-attr]
                if claim == "claimed":
                    role = "miss"
                    state = self._start(key, spec)
        deadline = time.monotonic() + self.tables.settings.inline_timeout_s
        if state is not None:
            if inline:
                wait([state.future], timeout=self.tables.settings.inline_timeout_s)
                if state.future.done():
                    return key, role, state.future.result()  # raises the plan's DarrmError (422)
            return key, "pending", None
        pause = 0.02
        while inline and time.monotonic() < deadline:  # another process runs it: watch its row
            seen = self.store.get(key)
            if seen is not None and seen.status == "done":
                return key, "shared", seen.result
            if seen is not None and seen.status == "failed":
                raise PlanFailed(seen.error or "the plan failed")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)
        return key, "pending", None

    def _start(self, key: str, spec: dict[str, Any]) -> PlanState:
        """Run a plan this process has claimed on the solve pool (under ``self._lock``)."""
        state = PlanState(Future())
        self._running[key] = state
        try:
            work = self._work(key, spec)
            state.future = self.tables._executor.submit(self._run, key, work, state)  # the solve pool
        except BaseException as exc:
            self._running.pop(key, None)
            self.store.fail(key, str(exc) if isinstance(exc, DarrmError) else "internal error")
            raise
        return state

    def _run(self, key: str, work: Work, state: PlanState) -> dict[str, Any]:
        """Run one plan, reporting its progress in ``state`` and its row; its document or error is stored."""
        self.store.report(key, status="running")
        last = [time.monotonic()]

        def progress(stage: str, **info: Any) -> None:
            state.progress = {"stage": stage, **jsonable(info)}
            now = time.monotonic()
            if now - last[0] >= PROGRESS_EVERY_S:
                last[0] = now
                self.store.report(key, progress=state.progress)

        try:
            doc = work(progress)
        except DarrmError as exc:
            message = str(exc)
            self._end(key, lambda: self.store.fail(key, message))
            raise
        except Exception:
            log.exception("plan %s failed", key)
            self._end(key, lambda: self.store.fail(key, "internal error"))
            raise
        self._end(key, lambda: self.store.finish(key, doc, _table_id(doc)))
        return doc

    def _end(self, key: str, record: Callable[[], None]) -> None:
        try:
            record()
        finally:
            with self._lock:
                self._running.pop(key, None)

    def request_job(self, job: Job, kinds: list[str] | None) -> tuple[str, str, dict[str, Any] | None]:
        """A job planned over every mechanism (``plan_job``; only ``kinds`` when given): (plan id, cache
        status, the document or None while it runs). Runs inline up to ``inline_timeout_s``, like a plan."""
        self.tables.check_solver(job.solver)
        for kind in kinds or []:
            mechanism(kind)  # 422 naming kind before anything runs
        if job.classes is None and job.epsilon is not None and job.teacher_delta is not None:
            self.tables.admit(Params(K=job.K, m=1, epsilon=job.epsilon, teacher_delta=job.teacher_delta))
        return self._single_flight(job_plan_key(job, kinds), {"kind": "job", "job": job.canonical(), "kinds": kinds})

    def _job_work(self, key: str, spec: dict[str, Any]) -> Work:
        job, kinds = Job(**spec["job"]), spec["kinds"]

        def work(progress: Callable[..., None]) -> dict[str, Any]:
            best, offers, refused = plan_job(job, progress, kinds)
            return self._publish_offer(key, job, best, offers, refused)

        return work

    def _publish_offer(self, key: str, job: Job, best: Any, offers: list[Any], refused: dict[str, str]
                       ) -> dict[str, Any]:
        """Store and serve the chosen table; its spend is recomputed from the served table's profile by the
        ledger's accounting and must fit the budget (the plain majority, free: no table)."""
        if best.majority_free:
            return _free_document(key, job, best)
        table = best.table
        self.tables.store(table, solver=job.solver, solve_seconds=best.seconds,
                          params_key=params_key(table.params, table.teachers))
        served = self.tables.get(table.id)
        if served is None or served.profile is None:  # pragma: no cover - just stored, with a profile
            raise TableNotServable(f"planned table {table.id} could not be served")
        q, bd = job.queries, job.budget_delta
        n = mechanism(table.kind).units(table.params, q)  # times the ledger composes the profile for Q answers
        spend = accounting.account([(served.epsilon0, served.delta0, n)], bd, profiles=[(served.profile, n)]).spend
        try:
            if spend.delta > bd:
                raise InvalidParameter("budget_delta", f"δ {spend.delta:g} > {bd:g}")
            spent = best.served(spend.epsilon, job)  # the offer says what its spend is and whether it must fit
        except InvalidParameter as exc:
            raise TableNotServable(f"the planned table {table.id} does not fit the budget ({exc}); not served as "
                                   "this plan") from None
        figures = {k: v for k, v in best.details.items()
                   if k in ("sigma", "sigma1", "sigma2", "threshold", "order", "beta", "sigma_ss")}
        if served.gamma:
            figures["gamma"] = list(served.gamma)
        info = {"queries": q, "budget_epsilon": job.budget_epsilon, "budget_delta": bd,
                "spent_epsilon": spent["epsilon_spent"], "accounting": spend.method, "seconds": best.seconds,
                "teachers": job.teachers}
        return {"plan_id": key, **jsonable(best.summary()), "run": best.run(), **spent, **figures,
                "details": jsonable(dict(best.details)),
                "table": served.to_dict(),
                "alternatives": [{**jsonable(o.to_dict()), "run": o.run()} for o in offers if o is not best],
                "refused": refused, "plan": info}

    def _served(self, offer: Offer):  # noqa: ANN202 - a ServedTable
        """Store the planned table as a shared-setting table (unless stored already) and serve it."""
        sol, params = offer.solution, offer.table.params
        table = mechanism_for(params).table(params, sol.gamma, sol.certificate, "shared", offer.table.profile)
        self.tables.store(table, solver=sol.solver, solve_seconds=sol.seconds,
                          params_key=params_key(params, "shared"))
        served = self.tables.get(table.id)
        if served is None or served.profile is None:  # pragma: no cover - just stored, with a profile
            raise TableNotServable(f"planned table {table.id} could not be served")
        return served

    def _publish(self, key: str, job: Job, best: Offer, offers: list[Offer], refused: dict[str, str]
                 ) -> dict[str, Any]:
        """Store and serve the planned table, with its plan; its spend is recomputed from its profile. The
        plain majority, free, with the teachers' cap it spends; another kind's offer as a job plan."""
        if best.majority_free:
            return _free_document(key, job, best)
        if best.solution is None or best.mechanism != "darrm":
            return self._publish_offer(key, job, best, offers, refused)
        table = self._served(best)
        spent = exact_epsilon([(table.profile, job.queries)], job.budget_delta)
        if spent > job.budget_epsilon:
            raise TableNotServable(f"the planned table {table.id} spends {spent:.6g} > budget "
                                   f"{job.budget_epsilon:g}; not served as this plan")
        info = {**best.plan, "spent_epsilon": spent}
        return {**table.to_dict(), "plan_id": key, "plan": info}

    def get(self, key: str) -> tuple[PlanRow | None, dict[str, Any]]:
        """The plan's row (None if unknown) and its live progress. A plan whose process died (its lease
        stale) is taken over here: claimed and run again on this process's solve pool."""
        row = self.store.get(key)
        if row is None or row.status not in ("queued", "running"):
            return row, {}
        with self._lock:
            state = self._running.get(key)
            if state is None and not row.live and row.request.get("kind") in ("shared", "job"):
                claim, _seen = self.store.claim(key, row.request, retry_failed=False)
                if claim == "claimed":
                    log.warning("plan %s: its process stopped renewing its lease; taken over", key)
                    state = self._start(key, row.request)
        if state is not None:
            return row, dict(state.progress) or row.progress
        return row, row.progress

    def set_ledger(self, key: str, ledger: dict[str, Any] | None, tenant: str) -> None:
        """Name the ledger just opened with plan ``key`` in its row."""
        if ledger is not None and ledger.get("id"):
            self.store.set_ledger(key, ledger["id"], tenant)
