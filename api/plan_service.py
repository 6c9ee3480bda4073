"""Budget plans in the service: the planned table is stored and served like any table, and the plan is cached.

Every plan is a job (:class:`darrm_opt.planning.job.Job`) planned by the one entry point,
:func:`darrm_opt.mechanisms.plan_job`, on the table service's solve pool; identical concurrent requests
share one run (in-process single flight). A job of shared or disjoint-private teachers (:meth:`PlanService.request`)
answers with the planned table and its plan (its id a hash of its canonical inputs K, ε, Δ, Q, ε_B, δ_B,
prior; for disjoint-private teachers whose (ε, Δ) is within the budget, the plain majority, free); a job of
PATE's setting (``disjoint-nonprivate``), with classes or naming a mechanism (:meth:`PlanService.request_job`)
answers with the most accurate offer and the others beside it. The planned table is stored in ``gamma_tables`` under
its content hash (so ``/v1/tables/{id}``, ``/v1/aggregate`` and ledgers' exact accounting see it; it becomes
the service's solve of its parameters unless they were solved before); the plan itself (its inputs, spent ε
and candidates) is kept in an in-memory LRU, per process. The plan's spent ε is recomputed from the served
table's profile by the ledger's accounting and must fit the budget (else 409).

200 or 202: a plan whose problems have at most ``inline_max_multisets`` corner multisets (or that needs no
search: the plain majority, free) runs while the request waits, up to ``inline_timeout_s``; otherwise 202
with ``/v1/plans/{id}`` to poll.
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any

from darrm_opt.errors import DarrmError, InvalidParameter
from darrm_opt.mechanisms import mechanism, mechanism_for, params_key, plan_job
from darrm_opt.model.corners import n_corners, n_multisets
from darrm_opt.model.params import Params
from darrm_opt.planning.job import Job, Offer
from darrm_opt.planning.plan import check_shared_job, majority_free
from darrm_opt.privacy import accounting
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.release.documents import majority_free_document

from .settings import DEFAULT_MAX_MULTISETS
from .table_service import TableNotServable, TableService, jsonable

CACHE_SIZE = 256


def plan_key(job: Job, teachers: str | None = None) -> str:
    """The plan id of a shared or disjoint-private job: a hash of its canonical inputs (and of ``teachers``
    when given: disjoint-private, the plain majority free)."""
    req = check_shared_job(job)
    canonical = req.canonical() if teachers is None else {**req.canonical(), "teachers": teachers}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(("plan:" + text).encode()).hexdigest()[:32]


def _free_document(key: str, job: Job, best: Offer) -> dict[str, Any]:
    """The plan of disjoint-private teachers whose (ε, Δ) is within the budget: the plain majority, free, with
    the teachers' cap it spends."""
    doc = {**majority_free_document(best, job), "plan_id": key}
    doc["plan"] = {**doc["plan"], "total_cap": {"epsilon": job.epsilon, "delta": job.teacher_delta},
                   "note": doc["note"]}
    return doc


@dataclass
class PlanState:
    """One plan run: its future, its last progress event, and its result or error once done."""

    future: Future
    progress: dict[str, Any] = field(default_factory=dict)


class PlanService:
    def __init__(self, tables: TableService) -> None:
        self.tables = tables
        self._lock = threading.Lock()
        self._done: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self._running: dict[str, PlanState] = {}
        self._failed: dict[str, str] = {}

    def _inline(self, job: Job) -> bool:
        """422 naming the field of an invalid job, or K when the plan's problems are too large for this
        service; True when run inline."""
        req = check_shared_job(job)
        if majority_free(job) is not None:
            return True  # no search
        settings = self.tables.settings
        size = n_multisets(req.K, n_corners(Params(K=req.K, m=1, epsilon=req.epsilon,
                                                    teacher_delta=req.teacher_delta)))
        limit = settings.max_multisets or DEFAULT_MAX_MULTISETS  # a plan solves several problems: not modelled
        if size > limit:
            raise InvalidParameter("K", f"too large for this service: {size} corner multisets exceed "
                                        f"DARRM_MAX_MULTISETS = {limit}", req.K)
        return size <= settings.inline_max_multisets

    def request(self, job: Job) -> tuple[str, str, dict[str, Any] | None]:
        """A job of shared or disjoint-private teachers (``plan_job``): (plan id, cache status 'hit' | 'miss' |
        'shared' | 'pending', the planned table with its plan, or None while it runs)."""
        self.tables.check_solver(job.solver)
        inline = self._inline(job)
        key = plan_key(job, "disjoint-private" if majority_free(job) is not None else None)

        def work(progress: Callable[..., None]) -> dict[str, Any]:
            best, offers, refused = plan_job(job, progress)
            return self._publish(key, job, best, offers, refused)

        return self._single_flight(key, work, inline)

    def _single_flight(self, key: str, work: Callable[[Callable[..., None]], dict[str, Any]], inline: bool = True
                       ) -> tuple[str, str, dict[str, Any] | None]:
        """The plan ``key`` from the cache, from its run in flight, or run now on the solve pool
        (``work(progress)`` gives its document); waited for up to ``inline_timeout_s`` when ``inline``:
        (key, 'hit' | 'miss' | 'shared' | 'pending', the document or None while it runs)."""
        with self._lock:
            hit = self._done.get(key)
            if hit is not None:
                self._done.move_to_end(key)
                return key, "hit", hit
            state = self._running.get(key)
            role = "shared" if state is not None else "miss"
            if state is None:
                self._failed.pop(key, None)
                state = PlanState(Future())
                self._running[key] = state
                state.future = self.tables._executor.submit(self._run, key, work, state)  # the solve pool
        if inline:
            wait([state.future], timeout=self.tables.settings.inline_timeout_s)
            if state.future.done():
                return key, role, state.future.result()  # raises the plan's DarrmError (422)
        return key, "pending", None

    def _run(self, key: str, work: Callable[[Callable[..., None]], dict[str, Any]], state: PlanState
             ) -> dict[str, Any]:
        """Run one plan, reporting its progress in ``state``; its document is cached, its error kept for GET."""
        def progress(stage: str, **info: Any) -> None:
            state.progress = {"stage": stage, **jsonable(info)}

        try:
            doc = work(progress)
        except DarrmError as exc:
            with self._lock:
                self._failed[key] = str(exc)
                self._running.pop(key, None)
            raise
        except Exception:
            with self._lock:
                self._failed[key] = "internal error"
                self._running.pop(key, None)
            raise
        with self._lock:
            self._done[key] = doc
            while len(self._done) > CACHE_SIZE:
                self._done.popitem(last=False)
            self._running.pop(key, None)
        return doc

    def request_job(self, job: Job, kinds: list[str] | None) -> tuple[str, str, dict[str, Any] | None]:
        """A job planned over every mechanism (``plan_job``; only ``kinds`` when given): (plan id, cache
        status, the document or None while it runs). Runs inline up to ``inline_timeout_s``, like a plan."""
        self.tables.check_solver(job.solver)
        for kind in kinds or []:
            mechanism(kind)  # 422 naming kind before anything runs
        text = json.dumps({**job.canonical(), "kinds": kinds}, sort_keys=True, separators=(",", ":"))
        key = hashlib.sha256(("job-plan:" + text).encode()).hexdigest()[:32]

        def work(progress: Callable[..., None]) -> dict[str, Any]:
            best, offers, refused = plan_job(job, progress, kinds)
            return self._publish_offer(key, job, best, offers, refused)

        return self._single_flight(key, work)

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

    def get(self, key: str) -> tuple[str, dict[str, Any] | None, dict[str, Any] | str | None]:
        """('done', table, None) | ('running', None, progress) | ('failed', None, error) | ('unknown', ...)."""
        with self._lock:
            if key in self._done:
                return "done", self._done[key], None
            if key in self._running:
                return "running", None, dict(self._running[key].progress)
            if key in self._failed:
                return "failed", None, self._failed[key]
        return "unknown", None, None

