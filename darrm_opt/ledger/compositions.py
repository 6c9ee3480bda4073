"""Exact compositions shared through the database by every process that pays debits.

A ledger's exact composition (:func:`darrm_opt.privacy.pld.exact_epsilon`: 0.4–4 s on the fine grid) depends
only on its tables' profiles, their counts, δ and the grid, never on the process computing it. Each server
process keeps its own in-memory cache; with several processes each would compute the same composition again.
So a process that needs one not in its memory asks the ``compositions`` table first (:meth:`obtain`):

- a stored ε is read (exactly: a float64 column) and used;
- a fresh *claim* (a row without ε, renewed within ``stale_s``) means another process is computing it: this one
  polls the row until the value is stored, the claim goes stale (its process died) or ``wait_s`` passes, then
  computes it itself;
- otherwise it claims the row, computes, and stores the value.

A claim is a lease that dies with its holder (:mod:`darrm_opt.ledger.leases`): while a process computes, a
heartbeat thread renews its claims' ``updated_at`` every :data:`HEARTBEAT_S` seconds, and a claim not renewed
for :data:`STALE_S` seconds is taken over. So a process killed (SIGKILL, OOM) while it holds a claim delays
the others' by at most ``STALE_S`` (not the length of any computation), on SQLite and PostgreSQL alike; a
computation that fails deletes its claim. Freshness compares the renewing process's clock with the reader's:
clocks that disagree by more than a few seconds only make two processes compute the same value (the table
never decides a debit).

The table is a cache: a stored value is :func:`exact_epsilon`'s own result for the key
(:func:`darrm_opt.privacy.pld.composition_key` names the profiles exactly, the counts, δ, the grid and the
accounting version, so a value of another version or grid is never read). Any database error falls back to
computing locally: the shared cache never decides whether a debit is paid, only who computes.
Rows older than ``keep_s`` are deleted now and then (a ledger's counts only grow, so old states are not
asked for again).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from darrm_opt.privacy.pld import cached_exact_epsilon, composition_key, remember_exact_epsilon
from darrm_opt.privacy.profile import Profile

from .db import Database
from .leases import HEARTBEAT_S, STALE_S, Heartbeat, fresh
from .schema import Composition, utcnow

log = logging.getLogger("darrm.ledger")

__all__ = ["HEARTBEAT_S", "STALE_S", "SharedCompositions"]
#: the longest a process waits for a composition another live process is computing
MAX_WAIT_S = 120.0
#: how often a process waiting for another's composition polls its row
POLL_S = 0.01
#: stored compositions are deleted after this many seconds
KEEP_S = 24 * 3600.0
#: old rows are deleted at most this often per process
PRUNE_EVERY_S = 600.0


class SharedCompositions:
    """The ``compositions`` table of ``db`` (see the module docstring)."""

    def __init__(self, db: Database, *, stale_s: float = STALE_S, poll_s: float = POLL_S,
                 keep_s: float = KEEP_S, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.db = db
        self.stale_s = stale_s
        self.heartbeat_s = heartbeat_s
        #: renews the keys this process has claimed and is computing
        self._beat = Heartbeat(self._renew, every_s=heartbeat_s, name="darrm-claims")
        self.poll_s = poll_s
        self.keep_s = keep_s
        self._pruned = time.monotonic()
        self._lock = threading.Lock()
        #: compositions read from the table / computed here (for the benchmarks and tests)
        self.read = 0
        self.computed = 0

    def _fresh(self, at, now) -> bool:  # noqa: ANN001
        return fresh(at, now, self.stale_s)

    def peek(self, key: str) -> tuple[float | None, bool]:
        """(stored ε or None, whether another process holds a fresh claim), read without a write lock; a
        database error reads as absent and unclaimed."""
        try:
            with self.db.read() as conn:
                row = conn.execute(select(Composition.epsilon, Composition.updated_at)
                                   .where(Composition.key == key)).first()
        except SQLAlchemyError as exc:
            log.warning("shared compositions unreadable (%s)", type(exc).__name__)
            return None, False
        if row is None:
            return None, False
        if row.epsilon is not None:
            return float(row.epsilon), False
        return None, self._fresh(row.updated_at, utcnow())

    def _claim(self, key: str) -> tuple[float | None, bool]:
        """(stored ε, whether this process now holds the claim) in one transaction."""
        now = utcnow()
        with self.db.write() as conn:
            row = conn.execute(select(Composition.epsilon, Composition.updated_at)
                               .where(Composition.key == key).with_for_update()).first()
            if row is not None and row.epsilon is not None:
                return float(row.epsilon), False
            if row is None:
                conn.execute(insert(Composition).values(key=key, epsilon=None, updated_at=now))
                return None, True
            if not self._fresh(row.updated_at, now):  # abandoned: take it over
                conn.execute(update(Composition).where(Composition.key == key).values(updated_at=now))
                return None, True
            return None, False

    def claim(self, key: str) -> tuple[float | None, bool]:
        """(stored ε or None, whether to compute it here): a stored value; or the claim, when the key is absent or
        its claim stale; or neither while another process's claim is fresh. A database error: compute here."""
        try:
            return self._claim(key)
        except IntegrityError:  # another process inserted the claim first
            return None, False
        except SQLAlchemyError as exc:
            log.warning("shared compositions unavailable (%s): computing locally", type(exc).__name__)
            return None, True

    def _hold(self, key: str) -> None:
        self._beat.hold(key)

    def _release(self, key: str, *, failed: bool) -> None:
        self._beat.release(key)
        if failed:  # nobody will store it: let another process claim it at once
            try:
                with self.db.write() as conn:
                    conn.execute(delete(Composition).where(Composition.key == key, Composition.epsilon.is_(None)))
            except SQLAlchemyError as exc:
                log.warning("failed claim not deleted (%s)", type(exc).__name__)

    def _renew(self, held: list[str]) -> None:
        """The heartbeat's write: renew the claims this process holds."""
        with self.db.write() as conn:
            conn.execute(update(Composition).where(Composition.key.in_(held), Composition.epsilon.is_(None))
                         .values(updated_at=utcnow()))

    def store(self, key: str, epsilon: float) -> None:
        """Store ``epsilon`` for ``key`` (over a claim, or a new row); errors are logged, never raised."""
        try:
            with self.db.write() as conn:
                done = conn.execute(update(Composition).where(Composition.key == key)
                                    .values(epsilon=float(epsilon), updated_at=utcnow())).rowcount
                if not done:
                    conn.execute(insert(Composition).values(key=key, epsilon=float(epsilon), updated_at=utcnow()))
        except SQLAlchemyError as exc:
            log.warning("shared composition not stored (%s)", type(exc).__name__)
        self._prune()

    def _prune(self) -> None:
        with self._lock:
            if time.monotonic() - self._pruned < PRUNE_EVERY_S:
                return
            self._pruned = time.monotonic()
        try:
            with self.db.write() as conn:
                conn.execute(delete(Composition).where(
                    Composition.updated_at < utcnow() - timedelta(seconds=self.keep_s)))
        except SQLAlchemyError as exc:
            log.warning("old shared compositions not deleted (%s)", type(exc).__name__)

    def obtain(self, parts: Iterable[tuple[Profile, int]], delta: float, coarse: bool,
               compute: Callable[[], float], *, wait_s: float | None = None) -> float | None:
        """The ε of this composition: from this process's memory, the table, another process's computation
        (waited for up to ``wait_s``, default MAX_WAIT_S, while its claim is renewed) or ``compute()`` (then
        stored). It is put in this process's memory. With ``wait_s = 0`` a composition another process is
        computing is not waited for: None is returned."""
        parts = list(parts)
        hit = cached_exact_epsilon(parts, delta, coarse=coarse)
        if hit is not None:
            return hit
        key = composition_key(parts, delta, coarse=coarse)
        deadline = time.monotonic() + (MAX_WAIT_S if wait_s is None else wait_s)
        while True:
            value, busy = self.peek(key)
            mine = False
            if value is None and not busy:
                value, mine = self.claim(key)
            if value is not None:
                self.read += 1
                remember_exact_epsilon(parts, delta, value, coarse=coarse)
                return value
            if mine or time.monotonic() >= deadline:
                break
            time.sleep(self.poll_s)
        if not mine and wait_s == 0:
            return None
        if mine:
            self._hold(key)
        try:
            value = float(compute())
        except BaseException:
            if mine:
                self._release(key, failed=True)
            raise
        self.computed += 1
        remember_exact_epsilon(parts, delta, value, coarse=coarse)
        self.store(key, value)
        if mine:
            self._release(key, failed=False)
        return value
