"""Error responses: every domain error and bad request becomes a 4xx JSON ``{"detail": ...}``.

- a body that cannot be read as JSON text, and request validation (pydantic) → 422
  ``{"detail": [{"loc", "msg", "type"}, ...]}`` (at most 20 entries, never echoing the input, so votes
  never come back in an error);
- :class:`~darrm_opt.errors.InvalidParameter` → 422 in the same shape, ``loc = ["body", parameter]``;
- other :class:`~darrm_opt.errors.DarrmError` (solver unavailable or failed, certification failed) → 422
  with a message; a stored table that fails its re-check → 409;
- a tenant over its quota of background solves → 429 with ``Retry-After``;
- the database failing (SQLAlchemy's errors) → 503 ``{"detail": ...}`` with ``Retry-After`` (logged by
  type only; nothing was written that the answer does not report);
- a client that disconnects before its body arrived → logged at INFO without a traceback (no one reads
  the answer);
- anything else is a bug: logged (with its traceback, never the request body) and answered 500.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from darrm_opt.errors import DarrmError, InvalidParameter

from .table_service import SolveQuotaExceeded, TableNotServable

log = logging.getLogger("darrm.api")

MAX_ERRORS = 20


def validation_detail(errors, prefix: tuple = ()) -> list[dict]:  # noqa: ANN001
    out = []
    for e in list(errors)[:MAX_ERRORS]:
        loc = [*prefix, *e.get("loc", ())]
        out.append({"loc": [x if isinstance(x, (str, int)) else str(x) for x in loc],
                    "msg": str(e.get("msg", "invalid")), "type": str(e.get("type", "value_error"))})
    return out


def invalid(*loc: str | int, message: str, type_: str = "value_error") -> JSONResponse:
    """A 422 in FastAPI's validation shape for the field at ``loc`` (e.g. "body", "votes", 3)."""
    return JSONResponse(status_code=422, content={"detail": [{"loc": list(loc), "msg": message, "type": type_}]})


def install(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI could not read the body (e.g. not UTF-8): a bad body, 422
            return JSONResponse(status_code=422, content={"detail": [
                {"loc": ["body"], "msg": "the body is not valid JSON text", "type": "json_invalid"}
            ]})
        return JSONResponse(status_code=exc.status_code, content={"detail": exc.detail},
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": validation_detail(exc.errors())})

    @app.exception_handler(InvalidParameter)
    async def _invalid(_request: Request, exc: InvalidParameter) -> JSONResponse:
        shown = "" if exc.value is None else f" (got {exc.value!r})"
        return invalid("body", exc.parameter, message=f"{exc.rule}{shown}"[:500], type_="invalid_parameter")

    @app.exception_handler(TableNotServable)
    async def _not_servable(_request: Request, exc: TableNotServable) -> JSONResponse:
        log.error("refused to serve a table: %s", exc)
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    @app.exception_handler(DarrmError)
    async def _domain(_request: Request, exc: DarrmError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": [
            {"loc": ["body"], "msg": str(exc)[:1000], "type": type(exc).__name__}
        ]})

    @app.exception_handler(SolveQuotaExceeded)
    async def _quota(_request: Request, exc: SolveQuotaExceeded) -> JSONResponse:
        return JSONResponse(status_code=429, headers={"Retry-After": "10"}, content={"detail": str(exc)})

    @app.exception_handler(SQLAlchemyError)
    async def _database(request: Request, exc: SQLAlchemyError) -> JSONResponse:
        log.error("database error on %s %s: %s", request.method, request.url.path, type(exc).__name__)
        return JSONResponse(status_code=503, headers={"Retry-After": "1"},
                            content={"detail": "the database is unavailable; try again"})

    @app.exception_handler(ClientDisconnect)
    async def _gone(request: Request, _exc: ClientDisconnect) -> Response:
        log.info("client disconnected before its request body arrived (%s %s)", request.method, request.url.path)
        return Response(status_code=400)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
        return JSONResponse(status_code=500, content={"detail": "internal server error"})
