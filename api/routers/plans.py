"""Budget plans: the most accurate certified table whose Q answers fit a total (ε, δ), and its ledger."""

from __future__ import annotations

import threading
from typing import Any, Literal

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from darrm_opt.errors import InvalidParameter
from darrm_opt.ledger.dd_store import DataDependentStore
from darrm_opt.mechanisms.registry import MECHANISMS
from darrm_opt.model.neighbours import check_setting_options, setting_note
from darrm_opt.planning.job import Job
from darrm_opt.planning.plan import majority_free

from ..deps import KEYED_RESPONSES, keyed, principal, services
from ..plan_service import PlanService
from ..schemas import (
    ID_PATTERN,
    MAX_K,
    PRIOR_CHARS,
    AnyTableOut,
    ErrorOut,
    HTTPValidationErrorOut,
    LedgerOut,
    PlainText,
    TableOut,
    Teachers,
    when,
)
from .dd_ledgers import DataDependentLedgerOut

router = APIRouter(prefix="/v1", tags=["plans"], dependencies=keyed, responses=KEYED_RESPONSES)
_LOCK = threading.Lock()


class LedgerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: PlainText = Field(..., min_length=1, max_length=200)


class PlanRequestIn(BaseModel):
    """A labelling job: Q answers of K teachers, each (ε, Δ)-DP, within a total (ε_B, δ_B). With teachers
    ``disjoint-nonprivate`` (PATE) the teachers are not private: epsilon and teacher_delta do not apply (a
    422 names them) and the per-answer (ε, δ) is planned; ``disjoint-private``: when the teachers' own
    (ε, Δ) is within the budget the plain majority is free (the answer says so, no table is searched)."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"allOf": [when(
        "teachers", "disjoint-nonprivate",
        {"properties": {"epsilon": {"type": "null"}, "teacher_delta": {"type": "null"}}},
        {"required": ["epsilon", "teacher_delta"],
         "properties": {"epsilon": {"type": "number"}, "teacher_delta": {"type": "number"}}},
    )]})

    K: int = Field(..., ge=1, le=MAX_K, description="number of teachers (odd for DaRRM's 0/1 tables)")
    epsilon: float | None = Field(None, gt=0, allow_inf_nan=False,
                                  description="each teacher's epsilon (required unless disjoint-nonprivate)")
    teacher_delta: float | None = Field(None, ge=0, lt=1,
                                        description="each teacher's delta (Δ) (required unless disjoint-nonprivate)")
    teachers: Teachers = Field("shared", description="shared | disjoint-private | disjoint-nonprivate (PATE)")
    queries: int = Field(..., ge=1, description="number of answers Q the budget must cover")
    budget_epsilon: float = Field(..., gt=0, allow_inf_nan=False, description="total epsilon of the Q answers")
    budget_delta: float = Field(..., gt=0, lt=1, description="total delta of the Q answers")
    prior: PlainText = Field("paper", min_length=1, max_length=PRIOR_CHARS)
    solver: PlainText | None = Field(None, min_length=1, max_length=20)
    create_ledger: LedgerSpec | None = Field(
        None, description="also open a ledger with this plan's budget (its id is returned as ledger.id)")
    classes: int | None = Field(None, ge=2, le=1000, description="C class labels per vote: plan the job over "
                                                                 "every mechanism (teachers default to "
                                                                 "disjoint-nonprivate)")
    mechanism: PlainText | None = Field(None, min_length=1, max_length=40,
                                        description="auto (every mechanism; the default with classes) or one "
                                                    f"kind ({', '.join(MECHANISMS)})")
    subsample: int | None = Field(None, ge=1, le=MAX_K, description=(
        "disjoint-nonprivate teachers: only offers whose answers each read a uniform random subset of this many "
        "of the K teachers (1..K), their cost amplified (darrm-pate for 0/1 votes, gnmax for 0/1 votes and class "
        "labels); default: darrm-pate tries K, K/2 and K/4 itself, and gnmax does when it is the mechanism "
        "named"))
    accounting: Literal["worst-case", "data-dependent"] = Field(
        "worst-case", description="worst-case (default): choose only among offers whose Q answers fit the budget "
                                  "over every dataset (a plain ledger at the budget pays them all); "
                                  "data-dependent: a data-dependent GNMax offer (a sanitised ε, a target and "
                                  "not a cap, run on a data-dependent ledger) may be chosen where it is more "
                                  "accurate. Either way it is listed in alternatives, with its worst case")


class PlanInfo(BaseModel):
    queries: int
    budget_epsilon: float
    budget_delta: float
    spent_epsilon: float = Field(..., description="ε the Q answers spend at budget_delta (exact composition)")
    seconds: float = 0.0
    teachers: Teachers = "shared"
    accounting: str | None = Field(None, description="the bound spent_epsilon comes from (disjoint-nonprivate: "
                                                     "exact or optimal, the ledger's tightest)")
    majority_free: bool = Field(False, description="disjoint-private teachers whose (ε, Δ) is within the budget")
    total_cap: dict[str, float] | None = Field(None, description="disjoint-private: the teachers' (ε, Δ)")
    note: str | None = None
    candidates: list[dict[str, Any]] = Field(
        [], description="every (m, delta) tried (disjoint-nonprivate: (epsilon, delta)): expected error, spent ε "
                        "(screening PLD, an upper bound), fits")


class PlanStatus(BaseModel):
    """Where a plan is: every plan document carries them."""

    status: Literal["queued", "running", "done", "failed"] = Field(
        "done", description="queued | running (poll status_url) | done (the document is the plan) | failed")
    progress: dict[str, Any] = Field({}, description="while queued or running: the last stage reported "
                                                     "(stage and its figures); {} once done")
    table_id: str | None = Field(None, description="the planned table's id once done (none for a plain "
                                                   "majority)")
    ledger_id: str | None = Field(None, description="the last ledger opened with this plan (create_ledger), "
                                                    "shown to its tenant only")


class PlanOut(TableOut, PlanStatus):
    plan_id: str
    plan: PlanInfo
    ledger: LedgerOut | None = None


class JobPlanOut(PlanStatus):
    """A job planned over every mechanism: the chosen one's table (stored and served), its error and spend
    (recomputed from the served table's profile by the ledger's accounting), the other offers."""

    plan_id: str
    mechanism: str = Field(..., description="the kind chosen: the least expected error among the offers the "
                                            "request's accounting allows (worst-case by default)")
    accounting: Literal["data-independent", "data-dependent"] = Field(
        ..., description="data-independent: a worst-case (ε, δ) the plain ledger enforces; data-dependent: a "
                         "sanitised data-dependent ε published by a data-dependent ledger (PATE App. B)")
    guarantee: str = Field(..., description="what the chosen offer guarantees, in words")
    run: dict[str, Any] = Field(..., description="how to run it: the ledger (plain, or data-dependent with its "
                                                 "policy) and the table")
    expected_error: float
    epsilon_spent: float = Field(..., description="data-independent: ε the Q answers spend at budget_delta (the "
                                                  "ledger's exact accounting); data-dependent: the expected "
                                                  "sanitised ε + 2 SD on the job's prior (a target, not a cap)")
    data_independent_epsilon: float = Field(..., description="the worst case: the plain ledger's exact composition "
                                                             "of Q answers of the chosen table")
    sigma: float | None = None
    order: float | None = Field(None, description="data-dependent: the Rényi order λ of the account")
    beta: float | None = Field(None, description="data-dependent: the smoothness β of the release")
    sigma_ss: float | None = Field(None, description="data-dependent: the release's noise σ_SS")
    sigma1: float | None = None
    sigma2: float | None = None
    threshold: float | None = None
    gamma: list[float] | None = Field(None, description="the chosen DaRRM table's γ")
    details: dict[str, Any] = {}
    table: AnyTableOut
    alternatives: list[dict[str, Any]] = Field([], description="every other offer: mechanism, expected_error, "
                                                               "epsilon_spent, table_id and its figures")
    refused: dict[str, str] = Field({}, description="kinds that made no offer, and why")
    plan: dict[str, Any]
    ledger: LedgerOut | DataDependentLedgerOut | None = Field(
        None, description="with create_ledger, once the plan is known: the ledger its run names")


class MajorityFreeOut(PlanStatus):
    """disjoint-private teachers within the budget: the plain majority γ ≡ 1 costs at most their (ε, Δ) in
    total, by parallel composition (no certificate: the guarantee is the theorem's, not a table's)."""

    plan_id: str
    K: int
    teachers: Literal["disjoint-private"]
    prior: str
    gamma: list[float]
    expected_error: float
    note: str
    plan: PlanInfo
    ledger: LedgerOut | None = None


class PlanAccepted(PlanStatus):
    plan_id: str
    status_url: str
    ledger: LedgerOut | None = None


class PlanFailedOut(HTTPValidationErrorOut):
    """422: a plan that failed (plan_id, status and error), or an invalid plan id (detail only)."""

    plan_id: str | None = None
    status: Literal["failed"] | None = None
    error: str | None = None


_COMMON: dict[int | str, dict[str, Any]] = {422: {"model": HTTPValidationErrorOut,
                 "description": "invalid inputs, or a budget no certified table fits (the message gives the "
                                "smallest ε reachable at budget_delta, or the δ the answers must spend)"}}


def _plans(request: Request) -> PlanService:
    state = request.app.state
    with _LOCK:
        if getattr(state, "plans", None) is None:
            state.plans = PlanService(services(request).tables)
        return state.plans


@router.post("/plans", response_model=PlanOut | MajorityFreeOut | JobPlanOut,
             summary="Plan the most accurate table for a total budget",
             responses={202: {"model": PlanAccepted, "description": "planning in the background; poll status_url"},
                        409: {"model": ErrorOut}, **_COMMON})
def post_plan(body: PlanRequestIn, request: Request, response: Response):
    """200 with the planned table (``X-Darrm-Cache``: hit, miss, shared), or 202 while it is planned. With
    ``create_ledger`` a ledger with the budget (budget_epsilon, budget_delta) is opened once the budget is
    known to be feasible (200), or at once with a 202 (the budget is the request's either way)."""
    s = services(request)
    given = [f for f in ("epsilon", "teacher_delta") if getattr(body, f) is not None]
    if body.classes is None:
        check_setting_options(body.teachers, given, target_needed=False)
    if body.classes is not None or body.mechanism is not None or body.teachers == "disjoint-nonprivate":
        return _job_plan(body, request, response)  # every mechanism of PATE's setting makes its offer
    for name in ("epsilon", "teacher_delta"):
        if getattr(body, name) is None:
            raise InvalidParameter(name, f"is required with teachers {body.teachers} (the teachers' privacy)")
    job = _job(body, s, body.teachers)
    cap = None
    if body.teachers == "disjoint-private" and job.epsilon is not None and job.teacher_delta is not None:
        cap = (job.epsilon, job.teacher_delta)
    plans = _plans(request)
    key, status, doc = plans.request(job)
    tenant = principal(request).tenant
    ledger = _ledger(s, body, job, _ledger_cap(job, cap, doc), tenant)
    plans.set_ledger(key, ledger, tenant)
    if cap is not None and doc is not None and not doc["plan"].get("majority_free") and not _pate(doc):
        doc = _with_cap(doc, cap)
    return _answer(plans, key, status, doc, ledger, response)


def _pate(doc: dict[str, Any] | None) -> bool:
    """Whether a plan chose a table of the PATE setting (for disjoint-private teachers: planned on their
    shards alone, :func:`darrm_opt.mechanisms.plan_job`)."""
    if doc is None:
        return False
    return (doc.get("table") or doc).get("teachers") == "disjoint-nonprivate"


def _ledger_cap(job: Job, cap: tuple[float, float] | None, doc: dict[str, Any] | None
                ) -> tuple[float, float] | None:
    """The cap of the ledger a plan opens: the disjoint-private teachers' (ε, Δ) where it can bind, i.e. within
    the budget (the plain majority free), and the plan did not choose a PATE-setting table (which a capped
    ledger refuses). A cap above the budget bounds nothing the budget does not: the ledger is then plain."""
    if cap is None or _pate(doc) or majority_free(job) is None:
        return None
    return cap


def _job(body: PlanRequestIn, s, teachers: str) -> Job:  # noqa: ANN001
    """The job a request asks to plan."""
    return Job(K=body.K, queries=body.queries, budget_epsilon=body.budget_epsilon, budget_delta=body.budget_delta,
               teachers=teachers, classes=body.classes, prior=body.prior, epsilon=body.epsilon,
               teacher_delta=body.teacher_delta, solver=body.solver or s.settings.default_solver,
               accounting=body.accounting, subsample=body.subsample)


def _job_plan(body: PlanRequestIn, request: Request, response: Response):  # noqa: ANN202
    """Every mechanism's offer (or the one named), the most accurate stored and served."""
    s = services(request)
    teachers = body.teachers if "teachers" in body.model_fields_set else (
        "disjoint-nonprivate" if body.classes is not None else "shared")
    job = _job(body, s, teachers)
    kinds = None if body.mechanism in (None, "auto") else [body.mechanism]
    plans = _plans(request)
    key, status, doc = plans.request_job(job, kinds)
    cap = None
    if teachers == "disjoint-private" and body.epsilon is not None and body.teacher_delta is not None:
        cap = (body.epsilon, body.teacher_delta)
    ledger = None
    if body.create_ledger is not None and doc is not None:  # the ledger the chosen offer runs on
        run = doc.get("run", {"ledger": "plain"})  # the plain majority, free: a plain ledger with the cap
        ledger = _RUN_LEDGERS[run["ledger"]](s, body, job, _ledger_cap(job, cap, doc), run,
                                             principal(request).tenant)
    elif body.create_ledger is not None and job.accounting == "worst-case":
        # planned in the background: a worst-case plan runs on a plain ledger with the budget whichever offer
        # wins, so it is opened at once and named in the 202 (as a shared-setting plan's is)
        ledger = _ledger(s, body, job, _ledger_cap(job, cap, doc), principal(request).tenant)
    plans.set_ledger(key, ledger, principal(request).tenant)
    return _answer(plans, key, status, doc, ledger, response)


def _dd_ledger(s, body: PlanRequestIn, job: Job, cap, run: dict, tenant: str) -> dict:  # noqa: ANN001
    return DataDependentStore(s.db).create(body.create_ledger.name, run["policy"], tenant)  # type: ignore[union-attr]


#: how ``create_ledger`` opens the ledger an offer's ``run`` names: a plain ledger with the budget, or a
#: data-dependent ledger with the offer's policy
_RUN_LEDGERS = {"plain": lambda s, body, job, cap, run, tenant: _ledger(s, body, job, cap, tenant),
                "data-dependent": _dd_ledger}


def _answer(plans: PlanService, key: str, status: str, doc: dict[str, Any] | None, ledger: dict | None,  # noqa: ANN202
            response: Response):
    """200 with the plan (``X-Darrm-Cache``: its cache status) and its ledger, or 202 with where to poll."""
    ledger_id = None if ledger is None else ledger.get("id")
    if doc is None:
        row, progress = plans.get(key)
        return _accepted(key, row.status if row is not None else "queued", progress,
                         {"ledger": _json(ledger), "ledger_id": ledger_id}, {"X-Darrm-Cache": "pending"})
    response.headers["X-Darrm-Cache"] = status
    return {**doc, **_done(doc), "ledger": ledger, "ledger_id": ledger_id}


def _done(doc: dict[str, Any]) -> dict[str, Any]:
    table = doc.get("table")
    table_id = table.get("id") if isinstance(table, dict) else (doc.get("id") if "gamma" in doc and "certificate"
                                                                               in doc else None)
    return {"status": "done", "progress": {}, "table_id": table_id}


def _accepted(key: str, status: str, progress: dict[str, Any], extra: dict[str, Any],
              headers: dict[str, str] | None = None) -> JSONResponse:
    """202: the plan is queued or running; poll its status_url."""
    url = f"/v1/plans/{key}"
    status = status if status in ("queued", "running") else "queued"
    return JSONResponse(status_code=202, headers={"Location": url, **(headers or {})},
                        content={"plan_id": key, "status": status, "status_url": url, "progress": progress,
                                 "table_id": None, "ledger_id": None, "ledger": None, **extra})


def _ledger(s, body: PlanRequestIn, req, cap, tenant: str) -> dict | None:  # noqa: ANN001
    """The ledger ``create_ledger`` asks for (the tenant's), with the budget; capped by disjoint-private teachers'
    (ε, Δ)."""
    if body.create_ledger is None:
        return None
    return s.ledgers.create(body.create_ledger.name, req.budget_epsilon, req.budget_delta, cap=cap, tenant=tenant)


def _with_cap(doc: dict[str, Any], cap: tuple[float, float]) -> dict[str, Any]:
    """A composed plan for disjoint-private teachers whose (ε, Δ) does not fit the budget: it says so."""
    note = (f"{setting_note('disjoint-private', *cap).note}; the teachers' (ε={cap[0]:g}, Δ={cap[1]:g}) is not "
            "within the budget, so the answers are composed as for shared teachers")
    plan = {**doc["plan"], "teachers": "disjoint-private", "majority_free": False,
            "total_cap": {"epsilon": cap[0], "delta": cap[1]}, "note": note}
    return {**doc, "plan": plan}


def _json(ledger: dict | None) -> Any:
    return None if ledger is None else LedgerOut.model_validate(ledger).model_dump(mode="json")


@router.get("/plans/{plan_id}", response_model=PlanOut | MajorityFreeOut | JobPlanOut,
            summary="A plan: its table, or where it is (any worker answers)",
            responses={202: {"model": PlanAccepted, "description": "queued or running: poll again"},
                       404: {"model": ErrorOut}, 422: {"model": PlanFailedOut, "description": "the plan failed"}})
def get_plan(request: Request, plan_id: str = Path(..., pattern=ID_PATTERN)):
    """The plan's document once done (200), its status and progress while queued or running (202), its error
    once failed (422). Plans are kept in the database: any worker answers, and a plan whose worker died is
    taken over by the worker that reads it."""
    row, progress = _plans(request).get(plan_id)
    if row is None:
        return JSONResponse(status_code=404, content={"detail": f"plan_id {plan_id!r} not found"})
    ledger_id = row.ledger_id if row.ledger_tenant == principal(request).tenant else None
    if row.status == "done" and row.result is not None:
        return {**row.result, **_done(row.result), "ledger": None, "ledger_id": ledger_id}
    if row.status == "failed" or row.result is None and row.status == "done":
        error = str(row.error or "the plan failed")[:1000]
        return JSONResponse(status_code=422, content={
            "detail": [{"loc": ["body"], "msg": error, "type": "plan_failed"}],
            "plan_id": plan_id, "status": "failed", "error": error})
    return _accepted(plan_id, row.status, progress, {"ledger_id": ledger_id})
