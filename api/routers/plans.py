"""Budget plans: the most accurate certified table whose Q answers fit a total (ε, δ), and its ledger."""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from darrm_opt.optimize.plan import PlanRequest

from ..deps import keyed, services
from ..plan_service import PlanService
from ..schemas import ID_PATTERN, ErrorOut, HTTPValidationErrorOut, LedgerOut, PlainText, TableOut

router = APIRouter(prefix="/v1", tags=["plans"], dependencies=keyed)
_LOCK = threading.Lock()


class LedgerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: PlainText = Field(..., min_length=1, max_length=200)


class PlanRequestIn(BaseModel):
    """A labelling job: Q answers of K teachers, each (ε, Δ)-DP, within a total (ε_B, δ_B)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    K: int = Field(..., ge=1, description="number of teachers (odd)")
    epsilon: float = Field(..., gt=0, allow_inf_nan=False, description="each teacher's epsilon")
    teacher_delta: float = Field(..., ge=0, lt=1, description="each teacher's delta (Δ)")
    queries: int = Field(..., ge=1, description="number of answers Q the budget must cover")
    budget_epsilon: float = Field(..., gt=0, allow_inf_nan=False, description="total epsilon of the Q answers")
    budget_delta: float = Field(..., gt=0, lt=1, description="total delta of the Q answers")
    prior: PlainText = Field("paper", min_length=1, max_length=100)
    solver: PlainText | None = Field(None, min_length=1, max_length=20)
    create_ledger: LedgerSpec | None = Field(
        None, description="also open a ledger with this plan's budget (its id is returned as ledger.id)")


class PlanInfo(BaseModel):
    queries: int
    budget_epsilon: float
    budget_delta: float
    spent_epsilon: float = Field(..., description="ε the Q answers spend at budget_delta (exact composition)")
    seconds: float
    candidates: list[dict[str, Any]] = Field(
        ..., description="every (m, delta) tried: expected error, spent ε (screening PLD, an upper bound), fits")


class PlanOut(TableOut):
    plan_id: str
    plan: PlanInfo
    ledger: LedgerOut | None = None


class PlanAccepted(BaseModel):
    plan_id: str
    status: str
    status_url: str
    progress: dict[str, Any] = {}
    ledger: LedgerOut | None = None


_COMMON: dict[int | str, dict[str, Any]] = {401: {"model": ErrorOut, "description": "missing or invalid API key"},
           422: {"model": HTTPValidationErrorOut,
                 "description": "invalid inputs, or a budget no certified table fits (the message gives the "
                                "smallest ε reachable at budget_delta, or the δ the answers must spend)"}}


def _plans(request: Request) -> PlanService:
    state = request.app.state
    with _LOCK:
        if getattr(state, "plans", None) is None:
            state.plans = PlanService(services(request).tables)
        return state.plans


@router.post("/plans", response_model=PlanOut, summary="Plan the most accurate table for a total budget",
             responses={202: {"model": PlanAccepted, "description": "planning in the background; poll status_url"},
                        409: {"model": ErrorOut}, **_COMMON})
def post_plan(body: PlanRequestIn, request: Request, response: Response):
    """200 with the planned table (``X-Darrm-Cache``: hit, miss, shared), or 202 while it is planned. With
    ``create_ledger`` a ledger with the budget (budget_epsilon, budget_delta) is opened once the budget is
    known to be feasible (200), or at once with a 202 (the budget is the request's either way)."""
    s = services(request)
    req = PlanRequest.make(body.K, body.epsilon, body.teacher_delta, body.queries, body.budget_epsilon,
                           body.budget_delta, body.prior)
    key, status, doc = _plans(request).request(req, body.solver or s.settings.default_solver)
    ledger = (s.ledgers.create(body.create_ledger.name, req.budget_epsilon, req.budget_delta)
              if body.create_ledger is not None else None)
    if doc is None:
        url = f"/v1/plans/{key}"
        return JSONResponse(status_code=202, headers={"Location": url, "X-Darrm-Cache": "pending"},
                            content={"plan_id": key, "status": "pending", "status_url": url, "progress": {},
                                     "ledger": _json(ledger)})
    response.headers["X-Darrm-Cache"] = status
    return {**doc, "ledger": ledger}


def _json(ledger: dict | None) -> Any:
    return None if ledger is None else LedgerOut.model_validate(ledger).model_dump(mode="json")


@router.get("/plans/{plan_id}", response_model=PlanOut, summary="A plan: its table, or its progress",
            responses={202: {"model": PlanAccepted}, 404: {"model": ErrorOut}, **_COMMON})
def get_plan(request: Request, plan_id: str = Path(..., pattern=ID_PATTERN)):
    status, doc, info = _plans(request).get(plan_id)
    if status == "done":
        return {**doc, "ledger": None}  # type: ignore[dict-item]
    if status == "running":
        url = f"/v1/plans/{plan_id}"
        return JSONResponse(status_code=202, content={"plan_id": plan_id, "status": "running", "status_url": url,
                                                      "progress": info})
    if status == "failed":
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": ["body"], "msg": str(info)[:1000], "type": "plan_failed"}]})
    return JSONResponse(status_code=404, content={"detail": f"plan_id {plan_id!r} not found (plans are kept "
                                                            "in memory per process)"})
