"""Liveness and readiness (no key needed)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from ..deps import ServicesDep
from ..schemas import StatusOut

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=StatusOut, summary="Liveness: the process answers")
async def healthz() -> dict:
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=StatusOut,
    summary="Readiness: the database answers",
    responses={503: {"model": StatusOut, "description": "the database is unreachable"}},
)
async def readyz(s: ServicesDep):
    ok = await run_in_threadpool(s.db.ping)
    if ok:
        return {"status": "ready"}
    return JSONResponse(status_code=503, content={"status": "unavailable"})
