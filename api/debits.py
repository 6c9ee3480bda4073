"""Paying a debit from a request handler: the one way every aggregate path submits to the ledger writer and
answers a debit that was not paid (the handlers draw and render what was paid)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from fastapi import Response
from fastapi.responses import JSONResponse

from darrm_opt.ledger.core import Debit, DebitResult

from .errors import invalid
from .observability import record_debit

log = logging.getLogger("darrm.api.aggregate")


def issued_key() -> str:
    """An idempotency key the server gives a debit sent without one, so that a debit paid after its request
    gave up (a 503 naming the key) is never paid and lost: the same request with the key returns its answers."""
    return "server-" + uuid.uuid4().hex


async def pay(s: Any, debit: Debit) -> DebitResult | Response:
    """The debit's result from the process's writer, or a 503 when the ledger's database fails or the debit
    is not decided within ``debit_timeout_s`` (nothing is released; a debit decided after its request gave
    up may be paid, and a retry with the idempotency key the 503 names, the client's or :func:`issued_key`'s,
    returns its answers)."""
    try:
        future = s.writer.submit(debit)
        result = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), s.settings.debit_timeout_s)
    except TimeoutError:
        record_debit(debit.tenant, "timeout")
        return JSONResponse(status_code=503, headers={"Retry-After": "1"}, content={
            "detail": f"the debit was not decided within DARRM_DEBIT_TIMEOUT_S = {s.settings.debit_timeout_s:g} s "
                      "(a ledger near its budget waits for exact compositions, longer while other tenants are "
                      "served); no answer was released; the same request with this idempotency_key returns "
                      "the answers if it was paid, and pays once if it was not",
            "idempotency_key": debit.idempotency_key})
    except Exception as exc:  # noqa: BLE001 - the database failed: nothing is released
        record_debit(debit.tenant, "error")
        log.error("debit failed (%s): nothing released", type(exc).__name__)
        return JSONResponse(status_code=503, content={"detail": "the ledger database is unavailable; "
                                                                "no answer was released"})
    outcome = result.status if result.status in ("paid", "replayed", "over_budget") else "refused"
    record_debit(debit.tenant, outcome, debit.rows)
    return result


def refusal(result: DebitResult) -> Response:
    """The answer for a debit that was not paid: 409 over the budget, 404 for a ledger the key cannot see,
    422 for a teachers' setting the ledger refuses or an idempotency key reused with another request."""
    if result.status == "over_budget":
        return JSONResponse(status_code=409, content={
            "detail": result.detail, "epsilon_spent": result.epsilon_spent, "delta_target": result.delta_target,
            "composition": result.composition, "answers": result.ledger_answers,
        })
    if result.status == "no_ledger":
        return JSONResponse(status_code=404, content={"detail": result.detail})
    if result.status == "setting_conflict":
        return invalid("body", "table_id", message=result.detail, type_="teacher_setting_conflict")
    return invalid("body", "idempotency_key", message=result.detail, type_="idempotency_key_reused")
