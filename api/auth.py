"""Bearer-key authentication for every ``/v1`` path, checked before the request is read.

An ASGI middleware rather than a FastAPI dependency: dependencies run after the body has been parsed, so a
request without a valid key could otherwise learn from a 422 or 404 what it sent wrong. Here it gets 401
and nothing else. Keys are compared by SHA-256 digest with ``hmac.compare_digest`` against every
configured key (no early exit). With no keys configured every keyed endpoint refuses.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from fastapi.security import HTTPBearer

PROTECTED_PREFIX = "/v1/"

#: documents the scheme in OpenAPI; enforcement is the middleware's
bearer_scheme = HTTPBearer(auto_error=False, description="an API key from DARRM_API_KEYS")

_BODY = json.dumps({"detail": "missing or invalid API key"}).encode()


def _digest(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()


class BearerKeyMiddleware:
    def __init__(self, app, keys: list[str]) -> None:  # noqa: ANN001
        self.app = app
        self._digests = [_digest(k.encode()) for k in keys]

    def _valid(self, header: bytes | None) -> bool:
        if not header or not self._digests:
            return False
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            return False
        got = _digest(token.strip())
        ok = False
        for d in self._digests:
            ok |= hmac.compare_digest(got, d)
        return ok

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001
        if scope["type"] == "http" and (scope["path"] + "/").startswith(PROTECTED_PREFIX):
            header = None
            for name, value in scope["headers"]:
                if name == b"authorization":
                    header = value
                    break
            if not self._valid(header):
                await send({
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(_BODY)).encode()),
                        (b"www-authenticate", b"Bearer"),
                    ],
                })
                await send({"type": "http.response.body", "body": _BODY})
                return
        await self.app(scope, receive, send)
