"""Gaussian mean releases in the service: calibrate and store a ``gaussian-mean`` table, and answer a batch of
teachers' vectors (``POST /v1/aggregate`` with ``vectors``; see :func:`aggregate_vectors`).

A vectors request is ``{"table_id", "ledger_id", "vectors": [[[y_1, …, y_l] × K] × N], "idempotency_key"?}`` with
every value a
number in [0, 1]; the body's size is bounded by DARRM_MAX_BODY_BYTES like every aggregate request (16 MiB:
about 8·10⁵ values written with 17 significant digits, N × K × l up to that), N by DARRM_MAX_ROWS and
N × K × l by :data:`MAX_VECTOR_VALUES`. Each teacher's vector is
clipped to the table's radius here, on the server; bad shapes, NaN and values outside [0, 1] are a 422 naming
``vectors`` and the first bad row; nothing is spent then. The debit is priced by the table's exact profile
like every other kind's, and the noisy means are returned only after it is committed. The noisy lattice sums
are drawn before the debit and stored with it under the idempotency key (the client's, or one the server
issues and names in a 503): the same request with the key returns the same means and spends nothing.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import numpy as np
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from darrm_opt.errors import InvalidParameter
from darrm_opt.ledger.core import Debit
from darrm_opt.mechanisms import mechanism

from .. import vectors_io
from ..debits import issued_key, pay, refusal
from ..deps import KEYED_RESPONSES, Services, ServicesDep, principal
from ..errors import invalid

log = logging.getLogger("darrm.api.means")

router = APIRouter(prefix="/v1", tags=["gaussian mean"], responses=KEYED_RESPONSES)

#: the most values (N × K × l) one vectors request may hold
MAX_VECTOR_VALUES = 1 << 21


class GaussianTableRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    queries: int = Field(..., ge=1, le=10**9, description="N: the answers the total budget must cover")
    epsilon: float = Field(..., gt=0, description="total ε of the N answers")
    delta: float = Field(..., gt=0, lt=1, description="total δ of the N answers")
    K: int = Field(..., ge=1, le=1 << 20, description="teachers (on disjoint shards)")
    dim: int = Field(..., ge=1, le=1 << 16, description="l: the length of each teacher's vector")
    radius: float = Field(1.0, gt=0, description="the clip radius R of each teacher's vector (L2)")


@router.post("/gaussian-tables", status_code=201, summary="Calibrate and store a Gaussian mean table")
def post_gaussian_table(body: GaussianTableRequest, s: ServicesDep) -> dict[str, Any]:
    """σ for N answers within a total (ε, δ) by exact composition (the paper's eq. 15 σ beside it), the table
    of the release (lattice, discrete noise, certificate, privacy profile), stored: its ``id`` is the
    ``table_id`` of ``POST /v1/aggregate`` with ``vectors``."""
    from darrm_opt.mechanisms.gaussian_mean import gaussian_mean_table
    from darrm_opt.privacy.gaussian_mean import calibrate

    t = time.perf_counter()
    cal = calibrate(body.queries, body.epsilon, body.delta, K=body.K, radius=body.radius, dim=body.dim,
                    verify_ledger=False)  # the closed form: the ledger's PLD may cost seconds per request
    table = gaussian_mean_table(cal.params)
    s.tables.store(table, solver="closed-form", solve_seconds=time.perf_counter() - t, params_key=None)
    served = s.tables.get(table.id)
    if served is None:  # pragma: no cover - stored just above
        raise InvalidParameter("table", "was not stored")
    return {"table": served.to_dict(), "calibration": cal.to_dict()}


def vectors_digest(table_id: str, ledger_id: str, vectors: np.ndarray) -> str:
    """SHA-256 (hex) of a vectors request: table, ledger, the shape and every value (float64, bit for bit)."""
    arr = np.ascontiguousarray(vectors, dtype="<f8")
    h = hashlib.sha256(f"darrm-vectors-v1\0{table_id}\0{ledger_id}\0{'x'.join(map(str, arr.shape))}\0".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def _invalid(exc: InvalidParameter) -> JSONResponse:
    return invalid("body", exc.parameter, message=exc.rule)


async def aggregate_vectors(request: Request, s: Services, body: bytes | bytearray) -> Response:
    """The noisy means of a vectors request (module docstring), paid before they leave from a ledger of the
    key's tenant (another tenant's ledger is an unknown one)."""
    try:
        table_id, ledger_id, key, vectors = await run_in_threadpool(vectors_io.parse, body, MAX_VECTOR_VALUES)
    except InvalidParameter as exc:
        return _invalid(exc)
    if vectors.ndim >= 1 and vectors.shape[0] > s.settings.max_rows:
        return invalid("body", "vectors", message=f"at most {s.settings.max_rows} rows per request (DARRM_MAX_ROWS)")
    table = s.tables.cached(table_id) or await run_in_threadpool(s.tables.get, table_id)
    if table is None:
        return JSONResponse(status_code=404, content={"detail": f"table_id {table_id!r} not found"})
    if mechanism(table.table.kind).votes_file != "npy":
        return invalid("body", "vectors", message=f"table {table_id} takes votes, not vectors")
    sampler: Any = table.aggregator
    try:
        prepared = await run_in_threadpool(sampler.prepare, vectors)  # checked and clipped on the server
    except InvalidParameter as exc:
        return invalid("body", "vectors", message=f"{exc.rule} (table {table_id})")
    digest = await run_in_threadpool(vectors_digest, table.id, ledger_id, vectors)
    del vectors
    sums = await run_in_threadpool(sampler.noisy_sums, prepared)  # drawn, not released until paid
    debit = Debit.of(ledger_id, table, sampler.rows(prepared), answers=sums,
                     idempotency_key=key if key is not None else issued_key(), request_digest=digest,
                     tenant=principal(request).tenant)
    result = await pay(s, debit)
    if isinstance(result, Response):
        return result
    if result.status not in ("paid", "replayed"):
        return refusal(result)
    means = await run_in_threadpool(sampler.means, result.answers)
    return JSONResponse(content={"answers": means.tolist(), "epsilon_spent": result.epsilon_spent,
                                 "delta_target": result.delta_target, "composition": result.composition,
                                 "ledger_answers": result.ledger_answers, "replayed": result.status == "replayed"})
