"""The per-process services the routers use (created in the app's lifespan), and the request's tenant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request, Security

from darrm_opt.ledger.db import Database
from darrm_opt.ledger.keys import Principal
from darrm_opt.ledger.views import LedgerStore
from darrm_opt.ledger.writer import DebitWriter

from .auth import PRINCIPAL, bearer_scheme
from .middleware import BodyBudget
from .schemas import ErrorOut
from .settings import Settings
from .table_service import TableService


@dataclass
class Services:
    settings: Settings
    db: Database
    tables: TableService
    ledgers: LedgerStore
    writer: DebitWriter
    bodies: BodyBudget


def services(request: Request) -> Services:
    return request.app.state.services


def principal(request: Request) -> Principal:
    """The tenant (and scope) of the request's key, set by :class:`darrm_opt.api.auth.BearerKeyMiddleware`."""
    return request.scope[PRINCIPAL]


def readable(who: Principal) -> str | None:
    """The tenant whose ledgers ``who`` may read: its own, or every tenant's (None) with admin scope."""
    return None if who.admin else who.tenant


#: the process's services, as a route dependency
ServicesDep = Annotated[Services, Depends(services)]
#: the request's principal, as a route dependency
PrincipalDep = Annotated[Principal, Depends(principal)]


#: declares the bearer scheme on keyed routes in OpenAPI (the key itself is checked by the middleware)
keyed = [Security(bearer_scheme)]
#: the answers of the key and body-limit middlewares (api.auth, api.middleware) on every keyed route, declared
#: once for every router
KEYED_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut, "description": "missing or invalid API key"},
    429: {"model": ErrorOut, "description": "the tenant is over its request rate (DARRM_TENANT_RATE) or, for a "
                                            "table, its DARRM_SOLVE_QUOTA of background solves; Retry-After"},
    # the body limit (api.middleware) answers on every path; the vote batches' routes name their own setting
    413: {"model": ErrorOut, "description": "body over DARRM_MAX_REQUEST_BYTES"},
}
