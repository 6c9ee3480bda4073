"""What operators read: a request id on every request, one JSON log line per request, Prometheus metrics.

:class:`RequestLogMiddleware` (the outermost middleware, so a 401, 413 or 429 is logged like a 200):

- takes the client's ``X-Request-ID`` when it is 1 to 128 characters of ``[A-Za-z0-9._:-]``, else issues one
  (32 hex digits), and echoes it in the response's ``X-Request-ID``;
- writes one JSON line per request to the logger ``darrm.access`` (stderr, INFO; ``DARRM_ACCESS_LOG=false``
  turns it off): ``ts``, ``request_id``, ``method``, ``route`` (the route's template, ``/v1/ledgers/{ledger_id}``,
  never ids or query strings), ``status``, ``latency_ms``, ``tenant`` (none before a key was checked) and
  ``pid``;
- counts the request and its latency in the metrics below.

Metrics (``GET /metrics``, Prometheus text format; an admin key unless ``DARRM_METRICS_AUTH=open``):
``darrm_requests_total{method,route,status}``,
``darrm_request_seconds{route}`` (histogram), ``darrm_debits_total{tenant,outcome}`` (outcome: paid, replayed,
over_budget, refused, timeout, error), ``darrm_answers_paid_total{tenant}`` (per-tenant spend in answers),
``darrm_compositions_total`` (exact compositions this process computed), ``darrm_solve_queue`` (solves running
or queued) and ``darrm_body_bytes_held`` (request bodies held). Each server process counts its own; with
``PROMETHEUS_MULTIPROC_DIR`` set (an empty directory, before the server starts) ``/metrics`` sums every
worker's (prometheus_client's multiprocess mode).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import multiprocess as prom_multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from .auth import PRINCIPAL

REQUEST_ID_HEADER = b"x-request-id"
_GOOD_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
#: the scope key holding the request's id
REQUEST_ID = "darrm.request_id"
#: the route of a request no route took (404, a refusal before routing)
UNROUTED = "unrouted"

access_log = logging.getLogger("darrm.access")

REQUESTS = Counter("darrm_requests", "HTTP requests answered", ["method", "route", "status"])
LATENCY = Histogram("darrm_request_seconds", "time from a request's arrival to its answer's last byte",
                    ["route"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
DEBITS = Counter("darrm_debits", "debits decided, by outcome", ["tenant", "outcome"])
ANSWERS_PAID = Counter("darrm_answers_paid", "answers paid for, per tenant (the ledgers' spend in answers)",
                       ["tenant"])
COMPOSITIONS = Counter("darrm_compositions", "exact compositions computed by this process")
SOLVE_QUEUE = Gauge("darrm_solve_queue", "table solves running or queued in this process",
                    multiprocess_mode="livesum")
BODY_BYTES = Gauge("darrm_body_bytes_held", "bytes of request bodies this process holds",
                   multiprocess_mode="livesum")


def record_debit(tenant: str | None, outcome: str, answers: int = 0) -> None:
    """Count a debit's outcome (and, when paid, its answers) for ``tenant``."""
    who = tenant or "-"
    DEBITS.labels(who, outcome).inc()
    if outcome == "paid" and answers:
        ANSWERS_PAID.labels(who).inc(answers)


_compositions_seen = [0]


def count_compositions(computed: int) -> None:
    """Bring ``darrm_compositions_total`` up to ``computed`` (the process's count so far)."""
    if computed > _compositions_seen[0]:
        COMPOSITIONS.inc(computed - _compositions_seen[0])
        _compositions_seen[0] = computed


def install_access_log(enabled: bool) -> None:
    """One handler on ``darrm.access`` writing each record's message (a JSON line) to stderr."""
    access_log.propagate = False
    access_log.setLevel(logging.INFO if enabled else logging.CRITICAL + 1)
    if not any(getattr(h, "darrm_access", False) for h in access_log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler.darrm_access = True  # type: ignore[attr-defined]
        access_log.addHandler(handler)


def _request_id(scope: dict[str, Any]) -> str:
    for name, value in scope["headers"]:
        if name == REQUEST_ID_HEADER:
            if _GOOD_ID.fullmatch(value):
                return value.decode("ascii")
            break
    return uuid.uuid4().hex


class RequestLogMiddleware:
    """Request id, access line and request metrics (module docstring)."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        rid = _request_id(scope)
        scope[REQUEST_ID] = rid
        status = 500

        async def send_with_id(msg: dict[str, Any]) -> None:
            nonlocal status
            if msg["type"] == "http.response.start":
                status = int(msg["status"])
                headers = [(k, v) for k, v in msg.get("headers", []) if k.lower() != REQUEST_ID_HEADER]
                msg = {**msg, "headers": [*headers, (REQUEST_ID_HEADER, rid.encode())]}
            await send(msg)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            route = getattr(scope.get("route"), "path", None) or UNROUTED
            REQUESTS.labels(scope["method"], route, str(status)).inc()
            LATENCY.labels(route).observe(elapsed)
            if access_log.isEnabledFor(logging.INFO):
                who = scope.get(PRINCIPAL)
                access_log.info(json.dumps({
                    "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
                    "request_id": rid, "method": scope["method"], "route": route, "status": status,
                    "latency_ms": round(elapsed * 1000, 3), "tenant": None if who is None else who.tenant,
                    "pid": os.getpid(),
                }, separators=(",", ":")))


def exposition() -> tuple[bytes, str]:
    """The metrics' text (every worker's with ``PROMETHEUS_MULTIPROC_DIR``) and its content type."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        prom_multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(), CONTENT_TYPE_LATEST
