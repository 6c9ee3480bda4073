"""Liveness and readiness (no key), Prometheus metrics (an admin key unless ``DARRM_METRICS_AUTH=open``;
:mod:`darrm_opt.api.observability`)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from .. import observability
from ..deps import ServicesDep
from ..schemas import ErrorOut, StatusOut

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


@router.get("/metrics", summary="Prometheus metrics (text exposition format)",
            responses={200: {"content": {"text/plain": {}}, "description": "the metrics"},
                       401: {"model": ErrorOut, "description": "no valid key (DARRM_METRICS_AUTH=admin)"},
                       403: {"model": ErrorOut, "description": "a tenant's key, not an admin key"}},
            response_class=Response)
async def metrics(s: ServicesDep) -> Response:
    observability.SOLVE_QUEUE.set(s.tables.in_flight())
    observability.BODY_BYTES.set(s.bodies.held)
    shared = s.writer.compositions.shared
    if shared is not None:
        observability.count_compositions(shared.computed)
    body, content_type = observability.exposition()
    return Response(content=body, media_type=content_type)
