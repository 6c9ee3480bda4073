"""Request hygiene shared by every endpoint: a body-size limit and access logs without query strings.

:class:`BodyLimitMiddleware` answers 413 without passing the request on when the declared
``Content-Length`` is over the path's limit, and stops a body sent without one (chunked) as soon as the
bytes received pass it (the application sees an HTTP 413 error, rendered by :mod:`darrm_opt.api.errors`). The limit
is ``DARRM_MAX_BODY_BYTES`` on ``POST /v1/aggregate`` and ``POST /v1/jobs/{id}/votes`` (vote batches) and
``DARRM_MAX_REQUEST_BYTES`` on every other path (small JSON parameter objects).

A client that sends its whole body before reading (urllib, requests) must find the 413 when it reads: if
the server closed the connection with body bytes still unread, the kernel answers them with a reset and
the client sees "connection reset" instead. So the declared body is read and discarded first (up to
DRAIN_BYTES; it is never stored), then the 413 is sent and the connection closed; a client that asked
``Expect: 100-continue`` has sent no body yet and gets the 413 at once.

A body must arrive whole within ``DARRM_BODY_TIMEOUT_S`` seconds (60) of its headers: a body (or the
discarded rest of an over-limit one) still arriving then is answered 408 and the connection closed, so a
client that declares a large body and sends nothing, or sends it a byte at a time, holds its connection no
longer than that. The headers have their own deadline (:mod:`darrm_opt.api.protocol`).

Bodies are never buffered from a header: :func:`read_body` reads a body as its chunks arrive (the server
holds at most one flow-control window of unread bytes per connection), the limit above is enforced on the
bytes received, and :class:`BodyBudget` bounds the bytes of bodies one process holds at once (a body that
would pass it is refused with 503 and ``Retry-After``). So a connection costs what it sent, whatever its
``Content-Length`` claims.

:class:`RedactQueryFilter` rewrites uvicorn's access-log records so that the query string of a ``/v1``
call is never written (a key or id sent as ``?api_key=...`` would otherwise land in the log verbatim).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

AGGREGATE_PATH = "/v1/aggregate"
#: a job's vote batches (POST /v1/jobs/{id}/votes) have the vote batches' limit too
JOBS_PATH = "/v1/jobs/"
REDACTED = "[redacted]"
#: an over-limit body declared up to this size is read and discarded before the 413 (see the module docstring);
#: a larger one is answered at once, and a client still sending it may see the connection reset
DRAIN_BYTES = 1 << 30


#: glibc's mallopt parameter: allocations of at least this many bytes get their own mapping
M_MMAP_THRESHOLD = -3
#: bodies and the buffers read from them are at least this large when they matter
LARGE_BUFFER = 1 << 20


def return_large_buffers() -> None:
    """Make every allocation of at least :data:`LARGE_BUFFER` bytes its own mapping, unmapped when freed (glibc).

    By default glibc raises its mapping threshold to the size of the largest block freed (up to 32 MiB), so
    after one large body the next ones come from the heap, whose freed pages stay with the process: a server
    that read a few 16 MiB bodies kept their memory. A fixed threshold returns them. Elsewhere: nothing."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, LARGE_BUFFER)
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return


class BodyBudget:
    """The bytes of request bodies held at once by this process, at most ``limit`` (used on the event loop's
    thread only, so without a lock)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, n: int) -> bool:
        if self.held + n > self.limit:
            return False
        self.held += n
        return True

    def give(self, n: int) -> None:
        self.held -= n


class BodyBudgetExceeded(Exception):
    """The process holds as many body bytes as ``DARRM_MAX_BODY_MEMORY`` allows: try again shortly."""


async def read_body(receive_chunks: Any, budget: BodyBudget, taken: list[int]) -> bytearray:
    """A body from its chunks (an async iterator, e.g. ``request.stream()``) into one buffer grown as bytes
    arrive (never sized from ``Content-Length``); every byte is counted against ``budget`` first, and the
    count added to ``taken[0]`` (the caller gives it back when done with the body, whatever happened).
    Raises :class:`BodyBudgetExceeded` when the budget is spent."""
    buf = bytearray()
    async for chunk in receive_chunks:
        if not chunk:
            continue
        if not budget.take(len(chunk)):
            raise BodyBudgetExceeded
        taken[0] += len(chunk)
        buf += chunk
    return buf


def too_large_message(limit: int, setting: str) -> str:
    return f"request body too large: at most {limit} bytes on this endpoint ({setting})"


class BodyLimitMiddleware:
    """413 for bodies over the limit of their path (see the module docstring)."""

    def __init__(self, app: Callable[..., Awaitable[None]], *, aggregate_limit: int, default_limit: int,
                 body_timeout_s: float = 60.0) -> None:
        self.app = app
        self.aggregate_limit = aggregate_limit
        self.default_limit = default_limit
        self.body_timeout_s = body_timeout_s

    def _limit(self, path: str) -> tuple[int, str]:
        path = path.rstrip("/")
        if path == AGGREGATE_PATH or (path.startswith(JOBS_PATH) and path.endswith("/votes")):
            return self.aggregate_limit, "DARRM_MAX_BODY_BYTES"
        return self.default_limit, "DARRM_MAX_REQUEST_BYTES"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, setting = self._limit(scope["path"])
        message = too_large_message(limit, setting)
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is not None and not declared.strip().isdigit():
            await _answer(send, 400, "invalid Content-Length header")
            return
        deadline = asyncio.get_running_loop().time() + self.body_timeout_s
        late = (f"the request body did not arrive within DARRM_BODY_TIMEOUT_S = {self.body_timeout_s:g} s; "
                "nothing was done")
        if declared is not None and int(declared) > limit:
            expect = next((v for k, v in scope["headers"] if k == b"expect"), b"")
            if expect.strip().lower() != b"100-continue" and int(declared) <= DRAIN_BYTES:
                try:
                    await _discard_body(receive, deadline)
                except TimeoutError:
                    await _answer(send, 408, late)
                    return
            await _answer(send, 413, message)
            return
        received = 0
        complete = False

        async def limited() -> Message:
            nonlocal received, complete
            if complete:  # the body is read: this waits for the client's disconnect, without a deadline
                return await receive()
            try:
                msg = await asyncio.wait_for(receive(), max(0.0, deadline - asyncio.get_running_loop().time()))
            except TimeoutError:
                raise HTTPException(status_code=408, detail=late, headers={"Connection": "close"}) from None
            if msg["type"] == "http.request":
                received += len(msg.get("body", b""))
                if received > limit:
                    raise HTTPException(status_code=413, detail=message)
                complete = not msg.get("more_body", False)
            else:
                complete = True
            return msg

        await self.app(scope, limited, send)


async def _discard_body(receive: Receive, deadline: float) -> None:
    """Read the request body to its end (or the client's disconnect), keeping none of it; TimeoutError when it
    has not ended by ``deadline`` (the event loop's clock)."""
    loop = asyncio.get_running_loop()
    while True:
        msg = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
        if msg["type"] != "http.request" or not msg.get("more_body", False):
            return


async def _answer(send: Send, status: int, detail: str) -> None:
    """A JSON ``{"detail": ...}`` answer that closes the connection."""
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class RedactQueryFilter(logging.Filter):
    """Drops the query string of ``/v1`` paths from uvicorn access-log records (args[2] is the path)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path, sep, _query = args[2].partition("?")
            if sep and (path + "/").startswith("/v1/"):
                record.args = (*args[:2], f"{path}?{REDACTED}", *args[3:])
        return True


def install_log_redaction(logger_name: str = "uvicorn.access") -> None:
    """Add :class:`RedactQueryFilter` to the access logger once per process."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, RedactQueryFilter) for f in logger.filters):
        logger.addFilter(RedactQueryFilter())


#: the methods whose routes :class:`AllowMiddleware` looks for
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


class AllowMiddleware:
    """``OPTIONS`` answers 204 with ``Allow`` (every method some route of the path takes, and OPTIONS; 404 for a
    path no route takes), before the key is checked (the routes are public in ``/openapi.json``); a 405
    names in ``Allow`` every method of the path, not only the first matching route's."""

    def __init__(self, app: Callable[..., Awaitable[None]], *, routes_of: Any) -> None:
        self.app = app
        self.routes_of = routes_of  # the FastAPI application, whose router's routes are matched

    def allowed(self, scope: Scope) -> list[str]:
        from starlette.routing import Match

        out = []
        for method in METHODS:
            probe = {**scope, "method": method}
            if any(route.matches(probe)[0] == Match.FULL for route in self.routes_of.router.routes):
                out.append(method)
        return out

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":
            methods = self.allowed(scope)
            if not methods:
                await _answer(send, 404, "Not Found")
                return
            await send({"type": "http.response.start", "status": 204,
                        "headers": [(b"allow", ", ".join([*methods, "OPTIONS"]).encode())]})
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_allow(msg: Message) -> None:
            if msg["type"] == "http.response.start" and msg["status"] == 405:
                allow = ", ".join([*self.allowed(scope), "OPTIONS"]).encode()
                msg = {**msg, "headers": [(k, v) for k, v in msg.get("headers", []) if k.lower() != b"allow"]
                       + [(b"allow", allow)]}
            await send(msg)

        await self.app(scope, receive, send_allow)
