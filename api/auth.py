"""Bearer-key authentication for every ``/v1`` path, checked before the request is read; the key's tenant.

An ASGI middleware rather than a FastAPI dependency: dependencies run after the body has been parsed, so a
request without a valid key could otherwise learn from a 422 or 404 what it sent wrong. Here it gets 401
and nothing else. A valid key's :class:`darrm_opt.ledger.keys.Principal` (tenant, admin scope) is put in
the request's scope (``darrm.principal``), where :func:`darrm_opt.api.deps.principal` reads it.

The keys (:class:`KeyRing`): those of ``DARRM_API_KEYS`` / ``DARRM_ADMIN_KEYS`` and the unrevoked ones of
the database's ``api_keys`` table, which a thread rereads every ``DARRM_KEY_REFRESH_S`` seconds (keys are
added and revoked without a restart; see docs/tenancy.md). A presented key is hashed (SHA-256) and looked
up by its digest; only digests are held. With no key configured anywhere every keyed endpoint refuses.
"""

from __future__ import annotations

import json
import logging
import math
import threading

from fastapi.security import HTTPBearer

from darrm_opt.ledger.db import Database
from darrm_opt.ledger.keys import Principal, digest, load_keys

from .admission import TenantRates

PROTECTED_PREFIX = "/v1/"
#: the metrics' path: an admin key's with ``DARRM_METRICS_AUTH=admin``
METRICS_PATH = "/metrics"
#: the scope key holding the request's principal
PRINCIPAL = "darrm.principal"

log = logging.getLogger("darrm.api.auth")

#: documents the scheme in OpenAPI; enforcement is the middleware's
bearer_scheme = HTTPBearer(auto_error=False, description="an API key (DARRM_API_KEYS or `darrm-opt keys add`)")

_BODY = json.dumps({"detail": "missing or invalid API key"}).encode()
_NOT_ADMIN = json.dumps({"detail": "GET /metrics needs an admin key (DARRM_ADMIN_KEYS; DARRM_METRICS_AUTH=admin)"}
                        ).encode()


class KeyRing:
    """The keys a process accepts: fixed environment keys and the database's, reread periodically."""

    def __init__(self, env: dict[str, Principal]) -> None:
        self._env = dict(env)
        self._stored: dict[str, Principal] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def lookup(self, key: bytes) -> Principal | None:
        d = digest(key)
        return self._stored.get(d) or self._env.get(d)

    def __len__(self) -> int:
        return len(self._env) + len(self._stored)

    def refresh(self, db: Database) -> None:
        """Reread the database's keys (a failure keeps the keys read before and is logged)."""
        self._stored = load_keys(db)

    def start(self, db: Database, interval_s: float) -> None:
        """Read the database's keys now (errors propagate: the service cannot start without its database),
        then every ``interval_s`` seconds on a thread until :meth:`stop`."""
        self.refresh(db)

        def run() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.refresh(db)
                except Exception as exc:  # noqa: BLE001 - keep the last keys; the database may come back
                    log.warning("could not reread the API keys: %s", type(exc).__name__)

        self._thread = threading.Thread(target=run, name="darrm-keys", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


async def _refuse(send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:  # noqa: ANN001
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


class BearerKeyMiddleware:
    """401 for a ``/v1`` request without a valid key; with ``rates`` (:class:`darrm_opt.api.admission.TenantRates`),
    429 with ``Retry-After`` for a tenant's request over its rate (admin keys are not limited). With
    ``metrics_admin``, ``/metrics`` needs an admin key: 401 without a valid key, 403 with a tenant's."""

    def __init__(self, app, keys: KeyRing, rates: TenantRates | None = None,  # noqa: ANN001
                 metrics_admin: bool = False, body_limit: int | None = None) -> None:
        self.app = app
        self.keys = keys
        self.rates = rates
        self.metrics_admin = metrics_admin
        #: a ``/metrics`` request declaring a body over this is left to the body limit's 413 (which reads the
        #: body first), not refused here with its body unread (the client would see a reset)
        self.body_limit = body_limit

    def _oversize(self, scope) -> bool:  # noqa: ANN001
        if self.body_limit is None:
            return False
        for name, value in scope["headers"]:
            if name == b"content-length":
                return value.isdigit() and int(value) > self.body_limit
        return False

    @staticmethod
    def _header(scope) -> bytes | None:  # noqa: ANN001
        for name, value in scope["headers"]:
            if name == b"authorization":
                return value
        return None

    def _principal(self, header: bytes | None) -> Principal | None:
        if not header:
            return None
        scheme, _, token = header.partition(b" ")
        token = token.strip()
        if scheme.lower() != b"bearer" or not token:
            return None
        return self.keys.lookup(token)

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001
        if (scope["type"] == "http" and self.metrics_admin and scope["path"] == METRICS_PATH
                and not self._oversize(scope)):
            who = self._principal(self._header(scope))
            if who is None:
                await _refuse(send, 401, _BODY, [(b"www-authenticate", b"Bearer")])
                return
            if not who.admin:
                await _refuse(send, 403, _NOT_ADMIN, [])
                return
        if scope["type"] == "http" and (scope["path"] + "/").startswith(PROTECTED_PREFIX):
            who = self._principal(self._header(scope))
            if who is None:
                await _refuse(send, 401, _BODY, [(b"www-authenticate", b"Bearer")])
                return
            rates = self.rates
            wait = 0.0 if rates is None or who.admin else rates.take(who.tenant)
            if rates is not None and wait > 0:
                retry = max(1, math.ceil(wait))
                body = json.dumps({"detail": (
                    f"tenant {who.tenant!r} is over its request rate (DARRM_TENANT_RATE = {rates.rate:g} "
                    f"requests per second per server process, bursts of {rates.burst:g}); retry after "
                    f"{retry} s; nothing was done")}).encode()
                await _refuse(send, 429, body, [(b"retry-after", str(retry).encode())])
                return
            scope[PRINCIPAL] = who
        await self.app(scope, receive, send)
