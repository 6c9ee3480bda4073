"""The dashboard at ``/ui`` and the keyed read endpoints it draws from.

``GET /ui`` and its two assets (``/ui/app.js``, ``/ui/app.css``, served from ``api/static``; nothing from a
CDN) hold no data and need no key. The page shows its key form at once and says how to link it with a key
(``/ui#key=…``: the fragment is never sent to the server; the page moves it to the tab's ``sessionStorage``,
gone when the tab closes, and erases it from the address) and sends the key as ``Authorization: Bearer`` on
every ``/v1`` request, which the middleware checks as for any client. It shows each ledger's share of its ε
budget and its spend against the answers paid, each table's γ(l) against the baselines (labelled axes, legends
as wrapping HTML), and creates ledgers and tables through ``POST /v1/ledgers`` and ``POST /v1/tables`` (a
long solve is followed through ``GET /v1/jobs/{id}``). A strict Content-Security-Policy allows scripts,
styles and requests to this origin only (no inline script or style attribute).

Keyed JSON endpoints added here: ``GET /v1/ledgers`` (every ledger with what remains),
``GET /v1/ledgers/{id}/spends`` (the spend after each paid request, for the plot over time) and
``GET /v1/tables/{id}/baselines`` (the closed-form baselines γ_Sub, γ_DSub, γ_const next to a table's γ,
for display only: nothing is released with them).
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path as FilePath

from fastapi import APIRouter, Path, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, Field

from ..deps import KEYED_RESPONSES, PrincipalDep, ServicesDep, keyed, readable
from ..schemas import ID_PATTERN, ErrorOut, LedgerSpend, PlainText

STATIC = FilePath(__file__).resolve().parent.parent / "static"
ASSETS = {"app.js": "text/javascript", "app.css": "text/css"}
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                               "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

page = APIRouter(tags=["dashboard"], include_in_schema=False)
router = APIRouter(prefix="/v1", tags=["dashboard"], dependencies=keyed, responses=KEYED_RESPONSES)


@page.get("/ui")
def dashboard() -> FileResponse:
    return FileResponse(STATIC / "ui.html", media_type="text/html", headers=HEADERS)


@page.get("/ui/{asset}")
def dashboard_asset(asset: str):
    if asset not in ASSETS:
        return JSONResponse(status_code=404, content={"detail": "not found"})
    return FileResponse(STATIC / asset, media_type=ASSETS[asset], headers=HEADERS)


class LedgerSummary(LedgerSpend):
    updated_at: datetime


class LedgerListOut(BaseModel):
    items: list[LedgerSummary]
    total: int
    limit: int
    offset: int


class SpendOut(BaseModel):
    at: datetime
    rows: int = Field(..., description="answers paid by this request")
    epsilon_spent: float = Field(..., description="the ledger's ε after this request, at its fixed δ target")
    composition: str


class SpendListOut(BaseModel):
    ledger_id: str
    epsilon_budget: float
    delta_budget: float
    created_at: datetime
    items: list[SpendOut]
    truncated: bool = Field(..., description="true when only the most recent `limit` spends are listed")


class BaselinesOut(BaseModel):
    table_id: str
    gamma: dict[str, list[float] | None] = Field(..., description="opt, sub, dsub, const (None: undefined)")
    expected_error: dict[str, float | None]


@router.get("/ledgers", response_model=LedgerListOut,
            summary="The tenant's ledgers (an admin key: every tenant's): budgets, spend and what remains")
def list_ledgers(svc: ServicesDep, who: PrincipalDep, limit: int = Query(100, ge=1, le=1000),
                 offset: int = Query(0, ge=0, le=1_000_000_000),
                 tenant: PlainText | None = Query(None, max_length=64,
                                                  description="only this tenant's ledgers (of those the key reads)")):
    mine = readable(who)
    if tenant is not None and mine is not None and tenant != mine:  # no ledger of another tenant is readable
        return {"items": [], "total": 0, "limit": limit, "offset": offset}
    # the same view as GET /v1/ledgers/{id}: the stated spend
    items, total = svc.ledgers.list(limit, offset, tenant if tenant is not None else mine)
    return {"items": items, "total": total, "limit": limit, "offset": offset}


@router.get("/ledgers/{ledger_id}/spends", response_model=SpendListOut,
            summary="A ledger's spend after each paid request (oldest first)",
            responses={404: {"model": ErrorOut, "description": "unknown ledger_id"}})
def ledger_spends(svc: ServicesDep, who: PrincipalDep, ledger_id: str = Path(..., pattern=ID_PATTERN),
                  limit: int = Query(1000, ge=1, le=10_000)):
    history = svc.ledgers.spends(ledger_id, limit, readable(who))
    if history is None:
        return JSONResponse(status_code=404, content={"detail": f"ledger_id {ledger_id!r} not found"})
    return history


def _baselines(params, gamma: tuple[float, ...]) -> dict:
    """γ_opt and its kind's closed-form baselines with their exact expected errors (the keys sub, dsub and
    const are always there: None where a baseline is undefined or the kind has none)."""
    import numpy as np

    from darrm_opt.mechanisms import mechanism_for

    m = mechanism_for(params)
    curves: dict[str, np.ndarray | None] = {"opt": np.asarray(gamma), "sub": None, "dsub": None, "const": None}
    curves.update(m.baselines(params))

    def finite(values) -> list[float]:
        return [float(x) if math.isfinite(x) else 0.0 for x in values]

    return {
        "gamma": {k: (finite(v) if v is not None else None) for k, v in curves.items()},
        "expected_error": {k: (m.expected_error(params, v) if v is not None else None) for k, v in curves.items()},
    }


@router.get("/tables/{table_id}/baselines", response_model=BaselinesOut,
            summary="A table's γ next to the closed-form baselines (display only)",
            responses={404: {"model": ErrorOut, "description": "unknown table_id"}})
async def table_baselines(s: ServicesDep, table_id: str = Path(..., pattern=ID_PATTERN)):
    table = s.tables.cached(table_id) or await run_in_threadpool(s.tables.get, table_id)
    if table is None:
        return JSONResponse(status_code=404, content={"detail": f"table_id {table_id!r} not found"})
    return {"table_id": table_id, **await run_in_threadpool(_baselines, table.params, table.gamma)}
