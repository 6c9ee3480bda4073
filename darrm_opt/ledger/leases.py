"""Leases that die with their holder: database rows a process claims and keeps fresh by a heartbeat.

A claim row carries ``updated_at``; while this process works on it, a :class:`Heartbeat` thread renews the
rows it holds every :data:`HEARTBEAT_S` seconds, and any process reads a claim not renewed for
:data:`STALE_S` seconds as abandoned (its holder died: SIGKILL, OOM) and may take it over. So a crash delays
the others by seconds, not by the length of the work, on SQLite and PostgreSQL alike. Freshness compares the
renewing process's clock with the reader's. Used by the shared compositions
(:mod:`darrm_opt.ledger.compositions`), the service's solve jobs and its plans.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError

from .schema import aware

log = logging.getLogger("darrm.ledger")

#: a claim not renewed for this many seconds is taken to be abandoned (its process died)
STALE_S = 3.0
#: how often a process renews the claims it holds
HEARTBEAT_S = 0.5


def fresh(at: datetime, now: datetime, stale_s: float = STALE_S) -> bool:
    """Whether a claim renewed at ``at`` is still held at ``now``."""
    return now - aware(at) <= timedelta(seconds=stale_s)


class Heartbeat:
    """Renews the claims this process holds: ``renew(keys)`` (one write that sets their ``updated_at``) every
    ``every_s`` seconds from a daemon thread that runs while any key is held. A database error is logged and
    the next beat tries again."""

    def __init__(self, renew: Callable[[list[str]], None], *, every_s: float = HEARTBEAT_S,
                 name: str = "darrm-leases") -> None:
        self._renew_rows = renew
        self.every_s = every_s
        self.name = name
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(self, key: str) -> None:
        with self._lock:
            self._held.add(key)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()

    def release(self, key: str) -> None:
        with self._lock:
            self._held.discard(key)

    def holds(self, key: str) -> bool:
        with self._lock:
            return key in self._held

    def _run(self) -> None:
        while True:
            time.sleep(self.every_s)
            with self._lock:
                held = sorted(self._held)
                if not held:
                    self._thread = None
                    return
            try:
                self._renew_rows(held)
            except SQLAlchemyError as exc:
                log.warning("%s: claims not renewed (%s)", self.name, type(exc).__name__)
