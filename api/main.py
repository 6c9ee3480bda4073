"""The darrm-opt REST service: ``create_app(settings)`` builds the FastAPI application.

Run it with ``darrm-opt serve`` or ``uvicorn --factory darrm_opt.api.main:create_app`` (settings from ``DARRM_*``).
At start it opens the database, applies the Alembic migrations (once, under a lock, when several
processes start together), starts the debit writer and the solve pool; at shutdown it drains them.
"""

from __future__ import annotations

import gc
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool

from darrm_opt.ledger.children import MachineSlots
from darrm_opt.ledger.db import Database, migrate
from darrm_opt.ledger.keys import env_principals
from darrm_opt.ledger.views import LedgerStore
from darrm_opt.ledger.writer import DebitWriter
from darrm_opt.sampling import RandomBytes, system_random

from . import docs
from .admission import TenantRates
from .auth import BearerKeyMiddleware, KeyRing
from .deps import Services
from .errors import install as install_errors
from .middleware import (
    AllowMiddleware,
    BodyBudget,
    BodyLimitMiddleware,
    install_log_redaction,
    return_large_buffers,
)
from .observability import RequestLogMiddleware, install_access_log
from .routers import aggregate, dd_ledgers, health, jobs, ledgers, means, plans, tables, ui
from .settings import Settings
from .table_service import TableService

log = logging.getLogger("darrm.api")

DESCRIPTION = """Certified DaRRM γ tables, private majority answers and an exact privacy ledger.

Every `/v1` endpoint needs `Authorization: Bearer <key>`. Every key belongs to a tenant: ledgers, their spend
history and idempotency records are the tenant's own (another tenant's ids answer 404); keys of admin scope
also read every tenant's ledgers."""


def create_app(settings: Settings | None = None, *, random_bytes: RandomBytes = system_random) -> FastAPI:
    """The application. ``random_bytes`` is the coin source (the OS CSPRNG; tests may inject one)."""
    settings = settings if settings is not None else Settings()
    keys = KeyRing({**env_principals(list(settings.api_keys)), **env_principals(list(settings.admin_keys), admin=True)})

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_synchronous)
        if settings.migrate_on_start:
            await run_in_threadpool(migrate, db)
        await run_in_threadpool(keys.start, db, settings.key_refresh_s)
        if not len(keys):
            log.warning("no API keys configured (DARRM_API_KEYS, darrm-opt keys add): every /v1 endpoint will "
                        "answer 401 until one is added")
        tables_svc = TableService(db, settings, random_bytes)
        svc = Services(
            settings=settings,
            db=db,
            tables=tables_svc,
            ledgers=LedgerStore(db),
            writer=DebitWriter(db, settings.debit_batch, tables_svc.profile_of, settings.exact_workers,
                               fine_processes=True, share_compositions=True,
                               exact_share=settings.tenant_exact_share,
                               exact_burst_s=settings.tenant_exact_burst_s,
                               composition_slots=MachineSlots(settings.database_url, settings.composition_slots)),
            bodies=BodyBudget(settings.max_body_memory),
        )
        app.state.services = svc
        # the ~160 000 objects of the imported libraries and of start-up are moved out of the collector's
        # reach: a full collection over them takes 50-100 ms with every request of this process waiting, which
        # would set the tail latency (docs/benchmarks.md)
        gc.collect()
        gc.freeze()
        log.info("darrm-opt service ready on %s", db.description)
        try:
            yield
        finally:
            keys.stop()
            svc.writer.stop()
            svc.tables.close()
            db.dispose()

    app = FastAPI(
        title="darrm-opt",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by api.docs from local assets (air-gapped)
        redoc_url=None,
    )
    install_log_redaction()
    return_large_buffers()
    install_access_log(settings.access_log)
    app.add_middleware(BodyLimitMiddleware, aggregate_limit=settings.max_body_bytes,
                       default_limit=settings.max_request_bytes, body_timeout_s=settings.body_timeout_s)
    rates = None if settings.tenant_rate is None else TenantRates(settings.tenant_rate, settings.tenant_burst)
    app.add_middleware(BearerKeyMiddleware, keys=keys, rates=rates,  # 401 (and 429) before all else
                       metrics_admin=settings.metrics_auth == "admin", body_limit=settings.max_request_bytes)
    app.add_middleware(AllowMiddleware, routes_of=app)  # OPTIONS needs no key (the routes are public)
    app.add_middleware(RequestLogMiddleware)  # outermost: every answer carries a request id and is logged
    install_errors(app)
    docs.install(app)
    # jobs before tables: its GET /v1/jobs/{id} answers a labelling job, else hands on to a background solve
    for module in (health, jobs, tables, ledgers, aggregate, ui, plans, dd_ledgers, means):
        app.include_router(module.router)
    app.include_router(ui.page)
    return app
