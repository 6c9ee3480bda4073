"""Private majority answers, paid from a ledger before they leave (see :mod:`darrm_opt.ledger.writer`).

Only a ledger of the key's tenant pays (an admin key's too): another tenant's ledger id answers 404 as an
unknown one, and its idempotency records are never replayed (the tenant is checked in the debit's own
transaction, :func:`darrm_opt.ledger.core.decide`). The body is read as it arrives, within the process's
budget of body bytes (:class:`darrm_opt.api.middleware.BodyBudget`)."""

from __future__ import annotations

import json
import logging

import numpy as np
from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.requests import ClientDisconnect

from darrm_opt.ledger.core import Debit, request_digest

from .. import vectors_io
from .. import votes as votes_io
from ..debits import issued_key, pay, refusal
from ..deps import KEYED_RESPONSES, principal, services
from ..errors import invalid, validation_detail
from ..middleware import BodyBudgetExceeded, read_body
from ..schemas import AggregateOut, BudgetExceededOut, ErrorOut, HTTPValidationErrorOut
from . import means

log = logging.getLogger("darrm.api.aggregate")

#: no per-request security dependency on this hot path: the middleware checks the key; OpenAPI says so
router = APIRouter(prefix="/v1", tags=["aggregate"], responses=KEYED_RESPONSES)

#: batches above this many rows are answered on a worker thread, not the event loop
THREAD_ROWS = 2_000


def _request_schema() -> dict:
    schema = votes_io.AggregateRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return schema


@router.post(
    "/aggregate",
    response_model=AggregateOut,
    summary="Answer a batch of vote rows with DaRRM and pay for it from a ledger",
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/json": {"schema": _request_schema()}}},
        "security": [{"HTTPBearer": []}],
    },
    responses={
        404: {"model": ErrorOut, "description": "unknown table_id or ledger_id"},
        409: {"model": BudgetExceededOut,
              "description": "the batch would exceed the ledger's budget (nothing released)"},
        413: {"model": ErrorOut, "description": "body over DARRM_MAX_BODY_BYTES"},
        422: {"model": HTTPValidationErrorOut,
              "description": "invalid body (the field is named), or the idempotency_key was already used "
                             "for a different request (nothing spent, nothing released)"},
        503: {"model": ErrorOut, "description": "the ledger database is unavailable, the server holds as many "
                                               "request bodies as it may, or the debit was not decided within "
                                               "DARRM_DEBIT_TIMEOUT_S (Retry-After; the body names "
                                               "the idempotency_key that returns the answers if it was paid, "
                                               "one the server issued when the request had none); nothing "
                                               "was released"},
    },
)
async def aggregate(request: Request) -> Response:
    """Answers, one per row, in order: for each row DaRRM outputs its majority with probability γ(L),
    L = Σ votes, otherwise a fair coin; for a multi-class table (votes are class labels 0..C−1) the plurality
    class (ties split uniformly) with probability γ(g), g the gap between the top two counts, otherwise a
    uniformly random class. The answers are returned only after the ledger's debit for them is
    committed. A repeated ``idempotency_key`` (per ledger) with the same table and votes returns the stored
    answers and spends nothing; with a different request it is a 422 naming ``idempotency_key``."""
    s = services(request)
    taken = [0]
    try:
        return await _aggregate(request, s, taken)
    except BodyBudgetExceeded:
        return JSONResponse(status_code=503, headers={"Retry-After": "1", "Connection": "close"}, content={
            "detail": "the server is reading as many request bodies as it may (DARRM_MAX_BODY_MEMORY); try again"})
    except ClientDisconnect:  # the client left mid-body: nobody reads an answer, nothing was spent
        log.info("client disconnected before its body arrived")
        return Response(status_code=400)
    finally:
        s.bodies.give(taken[0])


async def _aggregate(request: Request, s, taken: list[int]) -> Response:  # noqa: ANN001
    body = await read_body(request.stream(), s.bodies, taken)
    if vectors_io.is_vectors_request(body):  # teachers' vectors for a gaussian-mean table
        return await means.aggregate_vectors(request, s, body)
    try:
        if len(body) > votes_io.SMALL_BODY:  # numpy path: off the event loop
            table_id, ledger_id, key, votes = await run_in_threadpool(votes_io.parse, body, s.settings.max_rows)
        else:
            table_id, ledger_id, key, votes = votes_io.parse(body, s.settings.max_rows)
    except ValidationError as exc:
        return JSONResponse(status_code=422, content={"detail": validation_detail(exc.errors(), ("body",))})
    except votes_io.InvalidBody as exc:
        return JSONResponse(status_code=422, content={"detail": exc.detail})
    del body
    s.bodies.give(taken[0])  # parsed: the body's bytes are gone
    taken[0] = 0

    table = s.tables.cached(table_id) or await run_in_threadpool(s.tables.get, table_id)
    if table is None:
        return JSONResponse(status_code=404, content={"detail": f"table_id {table_id!r} not found"})
    n_rows = len(votes)
    if n_rows > s.settings.max_rows:
        return invalid("body", "votes", message=f"at most {s.settings.max_rows} rows per request (DARRM_MAX_ROWS)")
    bad = votes_io.check_labels(votes, table.params.K, table.classes)
    if bad is not None:
        return invalid("body", "votes", bad[0], message=f"{bad[1]} (table {table_id})")

    if table.mechanism.keeps_state:
        return await _aggregate_job(request, s, table, ledger_id, key, votes)
    if n_rows > THREAD_ROWS:
        answers = await run_in_threadpool(table.aggregator, votes)
    else:
        answers = table.aggregator(votes)
    key = key if key is not None else issued_key()  # a 503 names it: a debit paid late is never lost
    digest = (await run_in_threadpool(request_digest, table.id, ledger_id, votes) if n_rows > THREAD_ROWS
              else request_digest(table.id, ledger_id, votes))
    del votes
    debit = Debit.of(ledger_id, table, len(answers), answers=answers, idempotency_key=key, request_digest=digest,
                     tenant=principal(request).tenant,
                     units=table.mechanism.units(table.params, len(answers)))
    result = await pay(s, debit)
    return result if isinstance(result, Response) else _response(result)


async def _aggregate_job(request: Request, s, table, ledger_id: str, key: str | None, votes) -> Response:  # noqa: ANN001
    """A kind that keeps state (darrm_opt.release.release): the ledger's job of this table continues across
    requests. A first debit (no answers) pays the jobs the rows open, or none, and proves the ledger is this
    tenant's before its state is read; the answers are drawn from the stored state, the next state is stored by
    compare and swap (a stale one: read again, pay again), and the rows are then recorded with the answers
    (no further units) under the idempotency key before they are released. ρ never leaves the server."""
    from darrm_opt.ledger.job_state import JobStates
    from darrm_opt.release.release import STATE_TRIES

    tenant = principal(request).tenant
    m, states = table.mechanism, JobStates(s.db)
    prepared = await run_in_threadpool(table.aggregator.prepare, votes)
    rows = int(prepared.shape[0])
    digest = await run_in_threadpool(request_digest, table.id, ledger_id, votes)
    del votes
    if key is not None and await run_in_threadpool(states.key_used, ledger_id, key):
        # a retry: the writer replays the answers stored with the key (or refuses a conflict) for the tenant
        # that owns the ledger; the job is not touched
        result = await pay(s, Debit.of(ledger_id, table, rows, idempotency_key=key, request_digest=digest,
                                       tenant=tenant, units=0))
        if isinstance(result, Response):
            return result
        if result.status == "paid":  # pragma: no cover - a spend record is never deleted
            return JSONResponse(status_code=503, content={"detail": "no answer was released"})
        return _response(result)
    key = key if key is not None else issued_key()
    for _ in range(STATE_TRIES):
        stored = await run_in_threadpool(states.get, ledger_id, table.id)
        opened = await pay(s, Debit.of(ledger_id, table, 0, tenant=tenant,
                                       units=m.job_units(table.params, stored.state, rows)))
        if isinstance(opened, Response):
            return opened
        if opened.status != "paid":
            return refusal(opened)
        answers, state = await run_in_threadpool(m.run_job, table.params, stored.state, prepared,
                                                 s.tables.random_bytes)
        if await run_in_threadpool(states.swap, ledger_id, table.id, stored.version, state):
            break
    else:
        return JSONResponse(status_code=503, content={"detail": "the job was advanced by other requests meanwhile; "
                                                                "no answer was released"})
    result = await pay(s, Debit.of(ledger_id, table, rows, answers=answers, idempotency_key=key,
                                   request_digest=digest, tenant=tenant, units=0))
    return result if isinstance(result, Response) else _response(result)


def _response(result) -> Response:
    """The HTTP answer for a debit's result: the answers once paid (or replayed), else why not."""
    if result.status in ("paid", "replayed"):
        tail = json.dumps({
            "epsilon_spent": result.epsilon_spent,
            "delta_target": result.delta_target,
            "composition": result.composition,
            "ledger_answers": result.ledger_answers,
            "replayed": result.status == "replayed",
        }).encode()
        content = b'{"answers":[' + votes_io.render_answers(np.asarray(result.answers)) + b"]," + tail[1:]
        return Response(content=content, media_type="application/json")
    return refusal(result)
