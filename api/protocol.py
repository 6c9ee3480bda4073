"""uvicorn's HTTP protocol (httptools) with a deadline for a request's headers.

uvicorn closes an idle keep-alive connection, but a connection that has sent part of a request line or of
its headers is held for as long as the client keeps it: a thousand such connections hold a thousand
sockets. :class:`HeaderTimeoutProtocol` closes a connection whose request headers are not complete
``DARRM_HEADER_TIMEOUT_S`` seconds (10) after the connection opened or after its request's first byte.
The body has its own deadline (``DARRM_BODY_TIMEOUT_S``, :class:`darrm_opt.api.middleware.BodyLimitMiddleware`).

``darrm-opt serve`` runs uvicorn with this protocol; under uvicorn itself pass
``--http darrm_opt.api.protocol:HeaderTimeoutProtocol``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

#: seconds a connection has to complete its request's headers (DARRM_HEADER_TIMEOUT_S)
DEFAULT_HEADER_TIMEOUT_S = 10.0


def header_timeout_s() -> float:
    """``DARRM_HEADER_TIMEOUT_S`` (a positive number of seconds), or the default."""
    try:
        value = float(os.environ.get("DARRM_HEADER_TIMEOUT_S", DEFAULT_HEADER_TIMEOUT_S))
    except ValueError:
        return DEFAULT_HEADER_TIMEOUT_S
    return value if value > 0 else DEFAULT_HEADER_TIMEOUT_S


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """httptools' protocol, closing a connection whose headers do not arrive in time (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._header_timeout_s = header_timeout_s()

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(self._header_timeout_s, self._headers_late)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()  # idle until the next request: uvicorn's keep-alive timeout closes it
