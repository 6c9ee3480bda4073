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

from darrm_opt.ledger.core import Debit, DebitResult, request_digest, row_digests

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
            table_id, ledger_id, key, votes, records = await run_in_threadpool(votes_io.parse, body,
                                                                               s.settings.max_rows)
        else:
            table_id, ledger_id, key, votes, records = votes_io.parse(body, s.settings.max_rows)
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

    if records is not None and table.mechanism.votes_file != "csv":  # pragma: no cover - vectors go to means
        return invalid("body", "records", message="apply to vote rows")
    if table.mechanism.keeps_state:
        return await _aggregate_job(request, s, table, ledger_id, key, votes, records)
    if n_rows > THREAD_ROWS:
        answers = await run_in_threadpool(table.aggregator, votes)
    else:
        answers = table.aggregator(votes)
    key = key if key is not None else issued_key()  # a 503 names it: a debit paid late is never lost
    digest = (await run_in_threadpool(request_digest, table.id, ledger_id, votes) if n_rows > THREAD_ROWS
              else request_digest(table.id, ledger_id, votes))
    digests = None if records is None else await run_in_threadpool(row_digests, votes)
    del votes
    m, params = table.mechanism, table.params
    debit = Debit.of(ledger_id, table, len(answers), answers=answers, idempotency_key=key, request_digest=digest,
                     tenant=principal(request).tenant, units=m.units(params, len(answers)), records=records,
                     record_digests=digests, units_of=None if records is None else (lambda n: m.units(params, n)))
    result = await pay(s, debit)
    return result if isinstance(result, Response) else _response(result)


async def run_job_rows(s, table, ledger_id: str, tenant: str | None, votes, key: str | None,  # noqa: ANN001
                       records: list[str] | None, stored_form=lambda a: a) -> DebitResult | Response:  # noqa: ANN001
    """The answers of ``votes`` continuing the ledger's job of ``table``, a kind that keeps state
    (darrm_opt.release.release): the paid result, or the response that refuses them.

    A first debit pays the jobs the rows open, or none, and proves the ledger is this tenant's before its state
    is read (with ``records``: a debit of nothing proves it first, and only the rows whose record the ledger
    has not answered run in the job); the answers are drawn from the stored state, the next state is stored by
    compare and swap (a stale one: read again, pay again), and the rows are then recorded with the answers (no
    further units; ``stored_form`` of them: what the ledger keeps) under the idempotency key and the records
    before they are released. ρ never leaves the server."""
    from darrm_opt.ledger.job_state import JobStates
    from darrm_opt.ledger.records import answered
    from darrm_opt.release.release import STATE_TRIES, new_rows

    m, states = table.mechanism, JobStates(s.db)
    prepared = await run_in_threadpool(table.aggregator.prepare, votes)
    rows = int(prepared.shape[0])
    digest = await run_in_threadpool(request_digest, table.id, ledger_id, votes)
    digests = None if records is None else await run_in_threadpool(row_digests, votes)
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
        return result
    fresh = list(range(rows))
    if records is not None:
        proof = await pay(s, Debit.of(ledger_id, table, 0, tenant=tenant, units=0))
        if isinstance(proof, Response):
            return proof
        if proof.status != "paid":
            return refusal(proof)
    answers = np.zeros(rows, dtype=np.int16)
    for _ in range(STATE_TRIES):
        if records is not None:
            fresh = new_rows(records, await run_in_threadpool(answered, s.db, ledger_id, records))
            if not fresh:
                break
        stored = await run_in_threadpool(states.get, ledger_id, table.id)
        opened = await pay(s, Debit.of(ledger_id, table, 0, tenant=tenant,
                                       units=m.job_units(table.params, stored.state, len(fresh))))
        if isinstance(opened, Response):
            return opened
        if opened.status != "paid":
            return refusal(opened)
        drawn, state = await run_in_threadpool(m.run_job, table.params, stored.state, prepared[fresh],
                                               s.tables.random_bytes)
        if await run_in_threadpool(states.swap, ledger_id, table.id, stored.version, state):
            answers[fresh] = drawn
            break
    else:
        return JSONResponse(status_code=503, content={"detail": "the job was advanced by other requests meanwhile; "
                                                                "no answer was released"})
    return await pay(s, Debit.of(ledger_id, table, rows, answers=stored_form(answers),
                                 idempotency_key=key if key is not None else issued_key(), request_digest=digest,
                                 tenant=tenant, units=0, records=records, record_digests=digests))


async def _aggregate_job(request: Request, s, table, ledger_id: str, key: str | None, votes,  # noqa: ANN001
                         records: list[str] | None) -> Response:
    """A kind that keeps state: the ledger's job of this table continues across requests (:func:`run_job_rows`)."""
    result = await run_job_rows(s, table, ledger_id, principal(request).tenant, votes, key, records)
    if isinstance(result, Response):
        return result
    return _response(result) if result.status in ("paid", "replayed") else refusal(result)


def _response(result) -> Response:
    """The HTTP answer for a debit's result: the answers once paid (or replayed), else why not."""
    if result.status in ("paid", "replayed"):
        tail = json.dumps({
            "epsilon_spent": result.epsilon_spent,
            "delta_target": result.delta_target,
            "composition": result.composition,
            "ledger_answers": result.ledger_answers,
            "replayed": result.status == "replayed",
            "reanswered": list(result.reanswered),
            "changed": list(result.changed),
        }).encode()
        content = b'{"answers":[' + votes_io.render_answers(np.asarray(result.answers)) + b"]," + tail[1:]
        return Response(content=content, media_type="application/json")
    return refusal(result)
