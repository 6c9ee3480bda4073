"""Labelling jobs: the service's ``darrm-opt label`` (:mod:`darrm_opt.release.label`, the same steps).

``POST /v1/jobs`` plans the job (every mechanism's offer, worst-case accounting, on the plan service's pool:
200 when planned within ``inline_timeout_s``, else 202 to poll) and opens its ledger with the budget; a second
POST with the name resumes the job. ``POST /v1/jobs/{id}/votes`` answers a batch of votes ((n, K) labels or
(n, C) counts, read and checked as the CLI reads them) with the client's record ids: the ledger keeps each
record's label (:mod:`darrm_opt.ledger.core`), so a record sent again gets its stored label and pays nothing
(a resent batch pays nothing; a batch overlapping earlier ones pays its new records only). A job of a kind
that keeps state (the stability-based release) continues the ledger's job across batches, as
``/v1/aggregate`` does. ``GET /v1/jobs/{id}``: the
job's status (planning, ready, failed), answered count, spend and the statement ``label`` gives. Jobs live in
the database (``label_jobs``): after a restart a job still planning is planned again.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, Literal

import numpy as np
from fastapi import APIRouter, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import ClientDisconnect

from darrm_opt.errors import DarrmError, InvalidParameter
from darrm_opt.ledger.core import Debit, request_digest, row_digests
from darrm_opt.ledger.jobs import LabelJobStore
from darrm_opt.release.label import LabelResult, check_fits, draw, make_job, statement
from darrm_opt.release.votes import votes_from_array

from ..debits import pay, refusal
from ..deps import KEYED_RESPONSES, keyed, principal, readable, services
from ..errors import invalid, validation_detail
from ..middleware import BodyBudgetExceeded, read_body
from ..plan_service import job_plan_key
from ..schemas import (
    ID_PATTERN,
    MAX_K,
    PRIOR_CHARS,
    ErrorOut,
    HTTPValidationErrorOut,
    PlainText,
    RecordId,
    Teachers,
)
from ..schemas import JobOut as SolveJobOut
from . import tables
from .aggregate import run_job_rows
from .plans import _plans

router = APIRouter(prefix="/v1", tags=["jobs"], dependencies=keyed, responses=KEYED_RESPONSES)
_LOCK = threading.Lock()


class JobIn(BaseModel):
    """A labelling job: Q answers of K teachers' votes over C classes within a total budget (ε, δ)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: PlainText | None = Field(None, min_length=1, max_length=200,
                                   description="the job's name (and its ledger's); a POST with a name the "
                                               "tenant used before resumes that job (same inputs)")
    budget: list[float] = Field(..., min_length=2, max_length=2,
                                description="[EPS, DELTA]: the total budget of the whole job")
    classes: int = Field(2, ge=2, le=1000, description="C classes")
    K: int | None = Field(None, ge=1, le=MAX_K, description="K teachers (or give shape)")
    queries: int | None = Field(None, ge=1, description="Q answers the plan covers (or give shape)")
    shape: list[int] | None = Field(None, min_length=2, max_length=2,
                                    description="[N, K] of the votes to come: Q = N and K")
    teachers: Teachers = Field("disjoint-nonprivate", description="disjoint-nonprivate (PATE, the default) | "
                                                                 "shared | disjoint-private")
    epsilon: float | None = Field(None, gt=0, allow_inf_nan=False, description="each teacher's ε (shared, "
                                                                                "disjoint-private)")
    teacher_delta: float | None = Field(None, ge=0, lt=1, description="each teacher's Δ (shared, "
                                                                      "disjoint-private)")
    prior: PlainText = Field("paper", min_length=1, max_length=PRIOR_CHARS)
    solver: PlainText | None = Field(None, min_length=1, max_length=20)
    mechanism: PlainText | None = Field(None, min_length=1, max_length=40,
                                        description="plan over this kind only (default: every kind)")


class VotesIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    records: list[RecordId] = Field(..., min_length=1, description="the client's id of each row (1 to 200 "
                                                                   "printable characters, or an integer): a row "
                                                                   "whose record the job answered before gets "
                                                                   "its stored label and pays nothing")
    votes: list[list[int]] = Field(..., min_length=1, description="(n, K) class labels or (n, C) vote counts")
    form: Literal["auto", "labels", "counts"] = Field("auto", description="auto: rows of C numbers summing to K "
                                                                         "are counts")


class LabelJobOut(BaseModel):
    id: str
    name: str
    status: Literal["planning", "ready", "failed"]
    status_url: str
    K: int
    classes: int
    queries: int
    budget: list[float]
    ledger_id: str
    table_id: str | None = None
    mechanism: str | None = None
    answered: int = Field(..., description="answers paid and released so far")
    spent: dict[str, float] = Field(..., description="the ledger's (epsilon, delta) for all its answers")
    statement: dict[str, Any] | None = Field(None, description="the publishable statement (as darrm-opt label "
                                                               "gives it), once ready")
    text: str | None = None
    progress: dict[str, Any] = {}
    error: str | None = None


class BatchOut(BaseModel):
    job_id: str
    records: list[int | str]
    labels: list[int] = Field(..., description="one label per row (−1: ⊥, Confident-GNMax's abstention)")
    replayed: bool = Field(..., description="every record of the batch was answered before: their stored "
                                            "labels, nothing paid")
    reanswered: list[int] = Field([], description="rows whose record was answered before (or earlier in the "
                                                  "batch): the stored label, nothing paid")
    changed: list[int] = Field([], description="of the reanswered rows, those whose votes differ from the ones "
                                               "their record was answered for")
    statement: dict[str, Any]
    text: str


_COMMON: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut}, 409: {"model": ErrorOut},
    422: {"model": HTTPValidationErrorOut, "description": "invalid input, naming the parameter (and row)"}}


def _store(request: Request) -> LabelJobStore:
    state = request.app.state
    with _LOCK:
        if getattr(state, "label_jobs", None) is None:
            state.label_jobs = LabelJobStore(services(request).db)
        return state.label_jobs


def _plan(request: Request, job: dict[str, Any], refuse: bool = False) -> dict[str, Any]:
    """The job with its table once its plan is known (asking the plan service, which runs it once; after a
    restart it runs again), else with ``progress``; a plan that failed is recorded (and its error raised
    when ``refuse``: the POST that asked for it answers 4xx)."""
    if job["table_id"] is not None or job["error"] is not None:
        return job
    store, plans, r = _store(request), _plans(request), job["request"]
    spec = make_job(r["K"], r["classes"], tuple(r["budget"]), r["queries"], teachers=r["teachers"],
                    epsilon=r["epsilon"], teacher_delta=r["teacher_delta"], prior=r["prior"], solver=r["solver"])
    row, progress = plans.get(job_plan_key(spec, r["kinds"]))  # the plan's row, in any process
    info: Any = progress
    state = "unknown" if row is None else row.status if row.status in ("done", "failed") else "running"
    doc = None if row is None else row.result
    if row is not None and row.status == "failed":
        info = row.error or "the plan failed"
    if state == "unknown":
        try:
            _, _, doc = plans.request_job(spec, r["kinds"])
        except DarrmError as exc:
            store.planned(job["id"], None, str(exc))
            if refuse:
                raise
            return {**job, "error": str(exc)}
        state, info = ("done" if doc is not None else "running"), {}
    if state == "failed":
        store.planned(job["id"], None, str(info))
        return {**job, "error": str(info)}
    if state == "done":
        assert doc is not None
        store.planned(job["id"], doc["table"]["id"])
        return {**job, "table_id": doc["table"]["id"]}
    return {**job, "progress": info or {}}


def _out(request: Request, job: dict[str, Any]) -> dict[str, Any]:
    s, r = services(request), job["request"]
    view = s.ledgers.get(job["ledger_id"])
    assert view is not None  # ledgers are never deleted
    status = "failed" if job["error"] is not None else ("ready" if job["table_id"] is not None else "planning")
    out = {"id": job["id"], "name": job["name"], "status": status, "status_url": f"/v1/jobs/{job['id']}",
           "K": r["K"], "classes": r["classes"], "queries": r["queries"], "budget": r["budget"],
           "ledger_id": job["ledger_id"], "table_id": job["table_id"], "answered": view["answers"],
           "spent": {"epsilon": view["epsilon_spent"], "delta": view["delta_target"]},
           "progress": job.get("progress", {}), "error": job["error"]}
    if status == "ready":
        served = s.tables.get(job["table_id"])
        assert served is not None  # stored by its plan
        said = statement(view, served.table, K=r["K"], classes=r["classes"], teachers=r["teachers"],
                         labels=view["answers"], now=0, before=view["answers"])
        out.update(mechanism=served.table.kind, statement=said, text=LabelResult(np.zeros(0), said).text)
    return out


def _answer(request: Request, job: dict[str, Any], response: Response, created: bool) -> Any:
    out = _out(request, job)
    if out["status"] == "planning":
        return JSONResponse(status_code=202, headers={"Location": out["status_url"]},
                            content=LabelJobOut.model_validate(out).model_dump(mode="json"))
    response.status_code = 201 if created else 200
    return out


@router.post("/jobs", response_model=LabelJobOut, status_code=201, summary="Open (or resume) a labelling job",
             responses={200: {"model": LabelJobOut, "description": "the job existed: resumed"},
                        202: {"model": LabelJobOut, "description": "planning in the background; poll status_url"},
                        **_COMMON})
def post_job(body: JobIn, request: Request, response: Response) -> Any:
    """Plan the most accurate certified table whose Q answers fit the budget in the worst case (every
    mechanism), as ``darrm-opt label`` does, and open the job's ledger with the budget: 201 (200 when the name
    resumes a job) once planned, 202 while planning (poll ``status_url``)."""
    s = services(request)
    eps, delta = body.budget
    if not (eps > 0 and eps < float("inf")) or not (0 < delta < 1):
        raise InvalidParameter("budget", "must be [EPS, DELTA] with EPS > 0 finite and 0 < DELTA < 1",
                               list(body.budget))
    K, queries = body.K, body.queries
    if body.shape is not None:
        n, k = body.shape
        if (K is not None and K != k) or (queries is not None and queries != n):
            raise InvalidParameter("shape", "contradicts K or queries", list(body.shape))
        K, queries = k, queries or n
    if K is None or queries is None:
        raise InvalidParameter("K" if K is None else "queries", "is required (or give shape [N, K])")
    if body.teachers == "disjoint-nonprivate" and (body.epsilon is not None or body.teacher_delta is not None):
        raise InvalidParameter("epsilon" if body.epsilon is not None else "teacher_delta",
                               "does not apply to disjoint-nonprivate teachers (PATE: the teachers are not private)")
    request_doc = {"K": K, "classes": body.classes, "queries": queries, "budget": [eps, delta],
                   "teachers": body.teachers, "epsilon": body.epsilon, "teacher_delta": body.teacher_delta,
                   "prior": body.prior, "solver": body.solver or s.settings.default_solver,
                   "kinds": None if body.mechanism in (None, "auto") else [body.mechanism]}
    name = body.name or f"job-{uuid.uuid4().hex[:12]}"
    job, created = _store(request).open(principal(request).tenant, name, request_doc)
    return _answer(request, _plan(request, job, refuse=True), response, created)


@router.get("/jobs/{job_id}", response_model=LabelJobOut | SolveJobOut,
            summary="A job: a labelling job's status, spend and statement, or a background solve's progress",
            responses={202: {"model": LabelJobOut}, **_COMMON,
                       404: {"model": ErrorOut, "description": "unknown job_id"}})
def get_job(request: Request, response: Response, job_id: str = Path(..., pattern=ID_PATTERN)) -> Any:
    """A labelling job (``POST /v1/jobs``): 200 once planned, 202 while planning; or else the background solve
    of a table (``POST /v1/tables``) with that id."""
    job = _store(request).get(job_id, readable(principal(request)))
    if job is None:
        return tables.solve_job(services(request), job_id)
    return _answer(request, _plan(request, job), response, False)


def _votes_schema() -> dict[str, Any]:
    schema = VotesIn.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return schema


@router.post("/jobs/{job_id}/votes", response_model=BatchOut, summary="Answer a batch of a job's votes",
             openapi_extra={"requestBody": {"required": True,
                                            "content": {"application/json": {"schema": _votes_schema()}}}},
             responses={413: {"model": ErrorOut, "description": "body over DARRM_MAX_BODY_BYTES"},
                        503: {"model": ErrorOut}, **_COMMON})
async def post_votes(request: Request, job_id: str = Path(..., pattern=ID_PATTERN)) -> Any:
    """The labels of a batch of votes ((n, K) class labels or (n, C) vote counts, one record id per row), paid
    from the job's ledger before they are released; the same batch (its record ids) again returns its stored
    labels and pays nothing. 409 while planning or over the budget; 422 naming the rule a row breaks."""
    s = services(request)
    taken = [0]
    try:
        body = await read_body(request.stream(), s.bodies, taken)
        try:
            batch = VotesIn.model_validate_json(body)
        except ValidationError as exc:
            return JSONResponse(status_code=422, content={"detail": validation_detail(exc.errors(), ("body",))})
        del body
        return await _batch(request, s, job_id, batch)
    except BodyBudgetExceeded:
        return JSONResponse(status_code=503, headers={"Retry-After": "1", "Connection": "close"}, content={
            "detail": "the server is reading as many request bodies as it may (DARRM_MAX_BODY_MEMORY); try again"})
    except ClientDisconnect:
        return Response(status_code=400)
    finally:
        s.bodies.give(taken[0])


async def _batch(request: Request, s: Any, job_id: str, batch: VotesIn) -> Any:
    who = principal(request)
    job = await run_in_threadpool(_store(request).get, job_id, who.tenant)
    if job is None:
        return JSONResponse(status_code=404, content={"detail": f"job {job_id!r} not found"})
    job = await run_in_threadpool(_plan, request, job)
    if job["table_id"] is None:
        why = f"planning failed: {job['error']}" if job["error"] else "is still planning; poll GET /v1/jobs/{id}"
        return JSONResponse(status_code=409, content={"detail": f"job {job_id!r} {why}"})
    n = len(batch.votes)
    if n > s.settings.max_rows:
        return invalid("body", "votes", message=f"at most {s.settings.max_rows} rows per request (DARRM_MAX_ROWS)")
    if len(batch.records) != n:
        return invalid("body", "records", message=f"one record id per row: {len(batch.records)} ids for {n} rows")
    empty = next((i for i, row in enumerate(batch.votes) if not row), None)
    if empty is not None:
        return invalid("body", "votes", empty, message="every row must hold K class labels or C vote counts")
    r = job["request"]
    votes = votes_from_array(batch.votes, K=r["K"], classes=r["classes"], form=batch.form, name="votes")
    served = s.tables.cached(job["table_id"]) or await run_in_threadpool(s.tables.get, job["table_id"])
    assert served is not None  # stored by its plan
    check_fits(served.table, votes)
    assert votes.N == n
    records = [str(x) for x in batch.records]
    m, params = served.mechanism, served.params
    if m.keeps_state:  # the ledger's job of the table continues across batches, as /v1/aggregate's does
        result = await run_job_rows(s, served, job["ledger_id"], who.tenant, votes.labels, None, records,
                                    stored_form=lambda a: (a + 1).astype(np.uint16))
    else:
        drawn = await run_in_threadpool(draw, served.table, votes.labels)
        digest = request_digest(served.id, job["ledger_id"], votes.counts)
        digests = await run_in_threadpool(row_digests, votes.labels)
        result = await pay(s, Debit.of(job["ledger_id"], served, n, answers=(drawn + 1).astype(np.uint16),
                                       request_digest=digest, tenant=who.tenant, units=m.units(params, n),
                                       records=records, record_digests=digests,
                                       units_of=lambda k: m.units(params, k)))
    if isinstance(result, Response):
        return result
    if result.status != "paid":
        return refusal(result)
    labels = np.asarray(result.answers).astype(np.int16) - 1  # stored shifted by one (⊥ = −1 as 0)
    view = await run_in_threadpool(s.ledgers.get, job["ledger_id"])
    now = n - len(result.reanswered)
    said = statement(view, served.table, K=r["K"], classes=r["classes"], teachers=r["teachers"],
                     labels=n, now=now, before=view["answers"] - now)
    return {"job_id": job_id, "records": batch.records, "labels": [int(x) for x in labels],
            "replayed": now == 0, "reanswered": list(result.reanswered), "changed": list(result.changed),
            "statement": said, "text": LabelResult(labels, said).text}
