"""Data-dependent ledgers: one job of GNMax-family or γ-table answers whose privacy is published only as a
sanitised ε (darrm_opt.ledger.dd_account; docs/data-dependent.md).

The ε such a ledger publishes is a differentially private, noisy estimate of the privacy loss of *this*
dataset, not a worst case; every view also carries ``data_independent_epsilon``, the worst case of the quota."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from darrm_opt.errors import BudgetExceeded
from darrm_opt.ledger.dd_store import DataDependentStore
from darrm_opt.mechanisms.dd_answers import drawer

from ..deps import KEYED_RESPONSES, PrincipalDep, ServicesDep, keyed, readable
from ..schemas import ID_PATTERN, ErrorOut, HTTPValidationErrorOut, PlainText

router = APIRouter(prefix="/v1", tags=["data-dependent ledgers"], dependencies=keyed, responses=KEYED_RESPONSES)

GUARANTEE = ("sanitised_epsilon is a noisy, differentially private estimate of the (ε, δ) bound that holds for "
             "this dataset, including the cost of its release; it is not a worst case and can fall below the "
             "true value. data_independent_epsilon is the worst case of the whole quota.")


class PolicyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    aggregator: Literal["gnmax", "confident-gnmax", "interactive-gnmax", "table"]
    K: int = Field(..., ge=1, le=2000)
    classes: int = Field(..., ge=2, le=100)
    sigma: float | None = Field(None, gt=0, le=1e6, allow_inf_nan=False, description="GNMax σ (σ₂); none for a "
                                                                                     "table")
    order: float = Field(..., gt=1, le=1000, allow_inf_nan=False, description="Rényi order λ")
    beta: float = Field(..., gt=0, lt=0.5, allow_inf_nan=False, description="smoothness β, λ < 1/(2β)")
    sigma_ss: float = Field(..., gt=0, le=1e6, allow_inf_nan=False, description="GNSS noise σ_SS")
    delta: float = Field(..., ge=1e-300, lt=1)
    quota: int = Field(..., ge=1, le=10_000_000, description="the most queries of the job")
    threshold: float | None = Field(None, ge=0, le=1e6, allow_inf_nan=False)
    sigma1: float | None = Field(None, gt=0, le=1e6, allow_inf_nan=False)
    grid: float = Field(1e-4, ge=1e-9, le=1.0, allow_inf_nan=False)
    conversion: Literal["thm5", "improved"] = "thm5"
    gamma: list[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]] | None = Field(None, max_length=2001)
    confidence: float | None = Field(None, ge=0, lt=1, allow_inf_nan=False,
                                     description="interactive-gnmax: the student's label is given when its top "
                                                 "probability exceeds this (PATE Alg. 2's γ)")


class DataDependentLedgerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: PlainText = Field(..., min_length=1, max_length=200)
    policy: PolicyIn


class RecordRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    votes: list[list[Annotated[int, Field(ge=0, le=2000)]]] = Field(..., min_length=1, max_length=1000,
                                                                    description="one histogram per query")
    answered: list[bool] | None = Field(None, description="Confident-/Interactive-GNMax: which the teachers "
                                                          "answered (the check's public outcome)")
    student: Student | None = Field(None, max_length=1000,
                                    description="interactive-gnmax (optional): the student's class "
                                                "probabilities per query; given, the check is charged "
                                                "data-dependently, else at its worst case λ/(2σ₁²)")


#: the student's class probabilities: one vector per query (checked in the library: length, sign, sum)
Student = list[list[Annotated[float, Field(allow_inf_nan=False)]]]


class AnswerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    votes: list[list[Annotated[int, Field(ge=0, le=2000)]]] = Field(..., min_length=1, max_length=1000,
                                                                    description="one histogram per query")
    student: Student | None = Field(None, max_length=1000,
                                    description="interactive-gnmax (required there): the student's class "
                                                "probabilities per query, each non-negative and summing to 1")
    idempotency_key: PlainText | None = Field(
        None, min_length=1, max_length=200,
        description="repeating a key (one of the ledger's last 64) with the same votes and student returns the "
                    "stored answers and records nothing; with another request it is a 422 naming it")


class DataDependentLedgerOut(BaseModel):
    id: str
    name: str
    tenant: str = Field(..., description="the tenant whose ledger it is (another tenant gets 404)")
    mode: str
    policy: dict[str, Any]
    queries: int
    answered: int
    quota: int
    delta: float
    fixed_epsilon: float = Field(..., description="ε_GNSS(λ) + the RDP → DP term")
    data_independent_epsilon: float = Field(..., description="the worst case of the whole quota")
    sealed: bool
    sanitised_epsilon: float | None = Field(None, description=GUARANTEE)
    guarantee: str
    created_at: str
    updated_at: str


_COMMON: dict[int | str, dict[str, Any]] = {
    422: {"model": HTTPValidationErrorOut, "description": "invalid body (the field is named)"},
}
_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut, "description": "unknown ledger_id"}, **_COMMON}


def _missing(ledger_id: str) -> JSONResponse:
    return JSONResponse(status_code=404, content={"detail": f"ledger_id {ledger_id!r} not found"})


@router.post("/data-dependent-ledgers", response_model=DataDependentLedgerOut, status_code=201,
             summary="Open a data-dependent ledger (one job; publishes a sanitised ε)", responses=_COMMON)
async def post_dd_ledger(body: DataDependentLedgerRequest, s: ServicesDep, who: PrincipalDep):
    policy = body.policy.model_dump()
    return await run_in_threadpool(DataDependentStore(s.db).create, body.name, policy, who.tenant)


@router.get("/data-dependent-ledgers/{ledger_id}", response_model=DataDependentLedgerOut,
            summary="A data-dependent ledger's public view (never its unsanitised account)", responses=_FOUND)
async def get_dd_ledger(s: ServicesDep, who: PrincipalDep, ledger_id: str = Path(..., pattern=ID_PATTERN)):
    view = await run_in_threadpool(DataDependentStore(s.db).get, ledger_id, readable(who))
    return _missing(ledger_id) if view is None else view


@router.post("/data-dependent-ledgers/{ledger_id}/record", response_model=DataDependentLedgerOut,
             summary="Account the job's next queries", responses={
                 409: {"model": ErrorOut, "description": "over the quota, or the ledger is sealed (nothing "
                                                         "recorded)"}, **_FOUND})
async def record_dd(body: RecordRequest, s: ServicesDep, who: PrincipalDep,
                    ledger_id: str = Path(..., pattern=ID_PATTERN)):
    try:
        view = await run_in_threadpool(DataDependentStore(s.db).record, ledger_id, body.votes, body.answered,
                                       who.tenant, body.student)
    except BudgetExceeded as exc:
        return JSONResponse(status_code=409, content={"detail": str(exc)})
    return _missing(ledger_id) if view is None else view


class AnswersOut(DataDependentLedgerOut):
    answers: list[int] = Field(..., description="one label per query; −1 is ⊥ (no answer)")
    replayed: bool = Field(False, description="the answers of an earlier request with this idempotency_key")


@router.post("/data-dependent-ledgers/{ledger_id}/answer", response_model=AnswersOut,
             summary="Answer the job's next queries (GNMax, Confident- or Interactive-GNMax) and account them",
             responses={409: {"model": ErrorOut, "description": "over the quota, or the ledger is sealed (nothing "
                                                                "answered)"}, **_FOUND})
async def answer_dd(body: AnswerRequest, s: ServicesDep, who: PrincipalDep,
                    ledger_id: str = Path(..., pattern=ID_PATTERN)):
    """The ledger draws the answers itself with exact discrete Gaussian noise from the service's CSPRNG and
    accounts them in the same transaction. Interactive-GNMax (PATE Alg. 2) takes the student's class
    probabilities per query: the teachers answer where a noisy check finds the student disagreeing, the
    student's own label is returned where it agrees and its top probability exceeds the policy's confidence,
    ⊥ (−1) otherwise."""
    try:
        view = await run_in_threadpool(DataDependentStore(s.db).answer, ledger_id, body.votes,
                                       drawer(s.tables.random_bytes), body.student, who.tenant,
                                       body.idempotency_key)
    except BudgetExceeded as exc:
        return JSONResponse(status_code=409, content={"detail": str(exc)})
    return _missing(ledger_id) if view is None else view


@router.post("/data-dependent-ledgers/{ledger_id}/publish", response_model=DataDependentLedgerOut,
             summary="Publish the sanitised ε (once; the ledger is sealed after)", responses=_FOUND)
async def publish_dd(s: ServicesDep, who: PrincipalDep, ledger_id: str = Path(..., pattern=ID_PATTERN)):
    view = await run_in_threadpool(DataDependentStore(s.db).publish, ledger_id, s.tables.random_bytes, who.tenant)
    return _missing(ledger_id) if view is None else view
