"""Certified γ tables and their solve jobs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Query, Response
from fastapi.responses import JSONResponse

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import kind_for
from darrm_opt.model.neighbours import check_setting_options

from ..deps import KEYED_RESPONSES, PrincipalDep, ServicesDep, keyed
from ..schemas import (
    ID_PATTERN,
    PRIOR_QUERY_CHARS,
    AnyTableOut,
    ErrorOut,
    HTTPValidationErrorOut,
    JobAccepted,
    PlainText,
    TableListOut,
    TableRequest,
    Teachers,
)

router = APIRouter(prefix="/v1", tags=["tables"], dependencies=keyed, responses=KEYED_RESPONSES)

_INVALID: dict[int | str, dict[str, Any]] = {
    422: {"model": HTTPValidationErrorOut, "description": "invalid parameters (the field is named)"},
}


def table_params(body: TableRequest) -> tuple[Any, str]:
    """The problem of a request and its teacher setting: the kind serving ``teachers`` (default shared) and
    the vote type (class labels when ``classes`` is given; teachers disjoint-nonprivate) reads its
    parameters from the request. The options a setting does not take, or a missing one, are a 422 naming
    the field, by the one rule (:func:`darrm_opt.model.neighbours.check_setting_options`)."""
    fields = ("m", "epsilon", "teacher_delta", "target_epsilon")
    given = [f for f in fields if f in body.model_fields_set and getattr(body, f) is not None]
    if body.classes is not None and body.teachers != "disjoint-nonprivate":
        raise InvalidParameter("teachers", "is required with classes: 'disjoint-nonprivate' (the only setting of "
                               "a multi-class table)", body.teachers)
    teachers = check_setting_options(body.teachers or "shared", given, m_needed=True)
    kind = kind_for(teachers, body.classes)
    data = body.model_dump(exclude={"solver", "teachers"})
    kind.refuse_subsample(data)
    return kind.params_from(data), teachers


@router.post(
    "/tables",
    response_model=AnyTableOut,
    summary="Get the certified optimal γ table for these parameters",
    responses={
        202: {"model": JobAccepted, "description": "solving in the background; poll status_url"},
        409: {"model": ErrorOut, "description": "the stored table failed its re-check"},
        429: {"model": ErrorOut, "description": "the tenant has DARRM_SOLVE_QUOTA background solves under way, "
                                                "or is over its request rate (DARRM_TENANT_RATE); Retry-After"},
        **_INVALID,
    },
)
def post_table(body: TableRequest, s: ServicesDep, who: PrincipalDep, response: Response):
    """200 with the table when it is cached or solves quickly (``X-Darrm-Cache``: ``hit``, ``miss`` = solved
    by this request, ``shared`` = joined an identical request's solve); otherwise 202 with a job id."""
    params, teachers = table_params(body)
    outcome = s.tables.request(params, body.solver or s.settings.default_solver, teachers, who.tenant)
    if outcome.table is None:
        url = f"/v1/jobs/{outcome.job_id}"
        return JSONResponse(
            status_code=202,
            content={"job_id": outcome.job_id, "status": "pending", "status_url": url},
            headers={"Location": url, "X-Darrm-Cache": "pending"},
        )
    response.headers["X-Darrm-Cache"] = outcome.status
    return outcome.table.to_dict()


@router.get(
    "/tables/{table_id}",
    response_model=AnyTableOut,
    summary="One certified table",
    responses={404: {"model": ErrorOut, "description": "unknown table_id"}, 409: {"model": ErrorOut},
               **_INVALID},
)
def get_table(s: ServicesDep, table_id: str = Path(..., pattern=ID_PATTERN)):
    table = s.tables.get(table_id)
    if table is None:
        return JSONResponse(status_code=404, content={"detail": f"table_id {table_id!r} not found"})
    return table.to_dict()


@router.get(
    "/tables",
    response_model=TableListOut,
    summary="Certified tables, filtered",
    responses={**_INVALID},
)
def list_tables(
    s: ServicesDep,
    K: int | None = Query(None, ge=1, le=1_000_000),
    m: float | None = Query(None, allow_inf_nan=False),
    epsilon: float | None = Query(None, allow_inf_nan=False),
    teacher_delta: float | None = Query(None, allow_inf_nan=False),
    delta: float | None = Query(None, allow_inf_nan=False),
    prior: PlainText | None = Query(None, max_length=PRIOR_QUERY_CHARS),
    teachers: Teachers | None = Query(None),
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=1_000_000_000),
):
    filters = {"K": K, "m": m, "epsilon": epsilon, "teacher_delta": teacher_delta, "delta": delta,
               "prior": prior, "teachers": teachers}
    items, total = s.tables.list(filters=filters, limit=limit, offset=offset)
    return {"items": [t.to_dict() for t in items], "total": total, "limit": limit, "offset": offset}


def solve_job(s: Any, job_id: str) -> Any:
    """The progress of a background solve, then its table (``GET /v1/jobs/{job_id}``, served by
    :mod:`darrm_opt.api.routers.jobs`, whose labelling jobs share the path); 404 for an unknown id."""
    job = s.tables.job(job_id)
    if job is None:
        return JSONResponse(status_code=404, content={"detail": f"job_id {job_id!r} not found"})
    return job
