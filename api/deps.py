"""The per-process services the routers use (created in the app's lifespan)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Security

from darrm_opt.ledger.db import Database
from darrm_opt.ledger.store import DebitWriter, LedgerStore

from .auth import bearer_scheme
from .settings import Settings
from .table_service import TableService


@dataclass
class Services:
    settings: Settings
    db: Database
    tables: TableService
    ledgers: LedgerStore
    writer: DebitWriter


def services(request: Request) -> Services:
    return request.app.state.services


#: the process's services, as a route dependency
ServicesDep = Annotated[Services, Depends(services)]


#: declares the bearer scheme on keyed routes in OpenAPI (the key itself is checked by the middleware)
keyed = [Security(bearer_scheme)]
