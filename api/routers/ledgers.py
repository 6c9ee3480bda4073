"""Privacy ledgers: a budget and the exact account of what the answers paid from it spent.

A ledger belongs to the tenant of the key that opened it; another tenant's key is told it does not exist
(404, as for an unknown id), except that a key of admin scope reads every tenant's."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from ..deps import KEYED_RESPONSES, PrincipalDep, ServicesDep, keyed, readable
from ..schemas import (
    ID_PATTERN,
    ErrorOut,
    HTTPValidationErrorOut,
    LedgerOut,
    LedgerRequest,
)

router = APIRouter(prefix="/v1", tags=["ledgers"], dependencies=keyed, responses=KEYED_RESPONSES)

_COMMON: dict[int | str, dict[str, Any]] = {
    422: {"model": HTTPValidationErrorOut, "description": "invalid body (the field is named)"},
}


@router.post("/ledgers", response_model=LedgerOut, status_code=201, summary="Open a ledger", responses=_COMMON)
def post_ledger(body: LedgerRequest, s: ServicesDep, who: PrincipalDep):
    cap = None
    if body.teachers == "disjoint-private" and body.teacher_epsilon is not None and body.teacher_delta is not None:
        cap = (body.teacher_epsilon, body.teacher_delta)  # the schema requires both for disjoint-private
    return s.ledgers.create(body.name, body.epsilon_budget, body.delta_budget, cap=cap, tenant=who.tenant)


@router.get(
    "/ledgers/{ledger_id}",
    response_model=LedgerOut,
    summary="A ledger's budget and spend (the composition used and every method's bound)",
    responses={404: {"model": ErrorOut, "description": "unknown ledger_id"}, **_COMMON},
)
def get_ledger(s: ServicesDep, who: PrincipalDep, ledger_id: str = Path(..., pattern=ID_PATTERN)):
    ledger = s.ledgers.get(ledger_id, readable(who))
    if ledger is None:
        return JSONResponse(status_code=404, content={"detail": f"ledger_id {ledger_id!r} not found"})
    return ledger
