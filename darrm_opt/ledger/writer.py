"""The debit of ledgers on a database, atomic and durable (creating and reading them is
:class:`darrm_opt.ledger.views.LedgerStore`'s).

Each process that pays has one *debit writer* thread (:class:`DebitWriter`). Callers hand it debits and
wait. The writer takes every debit queued so far (group commit: one transaction and one disk flush for
many requests) and, in one transaction:

1. locks the ledgers concerned: SQLite ``BEGIN IMMEDIATE`` (the database's single write lock, shared by
   every process on the file); PostgreSQL ``SELECT … FROM ledgers … ORDER BY id FOR UPDATE`` (row locks,
   taken in id order so two processes cannot deadlock);
2. reads their per-table usage, the idempotency keys of the debits in hand, the ``debit_id`` of each
   (a debit whose id is already stored was committed by an earlier attempt whose acknowledgement was lost)
   and the stored answers of the record ids the debits name (``record_answers``);
3. decides every debit (:func:`darrm_opt.ledger.core.decide`);
4. writes the new ledger state, the usage counts, one ``spends`` row per accepted debit (with its
   ``debit_id``, and with the answers when it has an idempotency key) and one ``record_answers`` row per
   record it paid, and COMMITS.

Debits that name one record of one ledger are decided in separate transactions, in arrival order (the later
one then finds the record stored and is given its answer).

Exact compositions are never computed by the writer: a decision that needs one not cached yet
(:class:`darrm_opt.ledger.core.NeedsExact`) sets its ledger's debits aside and the batch goes on without them;
its :class:`darrm_opt.ledger.scheduler.CompositionScheduler` computes the composition off the writer's thread
(one per ledger at a time, near-budget ones at a lower priority and within each tenant's share) and queues those
debits again, to be decided with the cached composition.

Only after the commit returns are the callers woken, and only accepted callers release answers. A crash
before the commit releases nothing; a crash after it wastes the budget of answers never delivered, never
the reverse. With SQLite ``synchronous=FULL`` (the default) the commit is on disk when it returns;
PostgreSQL's default ``synchronous_commit=on`` gives the same. A commit that fails is retried; the retry
finds the debits a lost acknowledgement hid and charges them nothing more.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from concurrent.futures import Future
from typing import Any

from sqlalchemy import insert, select, tuple_, update
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from darrm_opt.privacy import accounting

from .children import MachineSlots
from .compositions import SharedCompositions
from .core import Debit, DebitResult, LedgerState, NeedsExact, ProfileOf, decide, no_profiles
from .db import Database
from .records import CHUNK
from .scheduler import CompositionScheduler
from .schema import LedgerRecord, LedgerUsage, RecordAnswer, SpendRecord, utcnow
from .views import ledger_row

log = logging.getLogger("darrm.ledger")

RETRIES = 5


def disjoint_records(batch: list[Debit]) -> list[list[Debit]]:
    """``batch`` as consecutive parts in which no two debits name one record of one ledger (arrival order
    kept; a debit goes after every earlier debit it shares a record with)."""
    parts: list[list[Debit]] = []
    claimed: list[set[tuple[str, str]]] = []
    for d in batch:
        mine = set() if d.records is None else {(d.ledger_id, r) for r in d.records}
        at = 0
        for k in range(len(parts)):
            if mine & claimed[k]:
                at = k + 1
        if at == len(parts):
            parts.append([])
            claimed.append(set())
        parts[at].append(d)
        claimed[at] |= mine
    return parts


class DebitWriter:
    """The process's single writer of debits (see the module docstring). The exact compositions its decisions
    need are computed by its :attr:`compositions` (:class:`darrm_opt.ledger.scheduler.CompositionScheduler`:
    ``exact_workers``, ``fine_processes``, ``exact_share``, ``exact_burst_s`` and ``composition_slots`` are its); with
    ``share_compositions`` (the service: several processes on one database) they are shared through the
    database, computed by one process and read by the others."""

    def __init__(self, db: Database, max_batch: int = 512, profile_of: ProfileOf = no_profiles,
                 exact_workers: int = 2, fine_processes: bool = False, share_compositions: bool = False,
                 exact_share: float | None = None, exact_burst_s: float = 2.0,
                 clock: Any = time.monotonic, composition_slots: MachineSlots | None = None) -> None:
        self.db = db
        self.max_batch = max_batch
        self.profile_of = profile_of
        #: new debits; a list is a group of debits set aside for an exact composition, decided as one batch
        self._queue: queue.Queue[Debit | list[Debit] | None] = queue.Queue()
        self.compositions = CompositionScheduler(
            self._queue.put, SharedCompositions(db) if share_compositions else None, exact_workers,
            fine_processes, exact_share, exact_burst_s, clock, composition_slots)
        self._thread = threading.Thread(target=self._run, name="darrm-debit-writer", daemon=True)
        self._stopped = False
        self._thread.start()

    def submit(self, debit: Debit) -> Future:
        if self._stopped:
            raise RuntimeError("the debit writer is stopped")
        self.compositions.saw(debit.tenant)
        self._queue.put(debit)
        return debit.future

    def stop(self, timeout: float = 10.0) -> None:
        self._stopped = True
        self._queue.put(None)
        self._thread.join(timeout)
        self.compositions.stop()

    # --- the writer thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            fresh: list[Debit] = []
            groups: list[list[Debit]] = []
            stop = False
            item: Debit | list[Debit] | None = first
            while True:
                if isinstance(item, list):
                    groups.append(item)
                else:
                    fresh.append(item)  # type: ignore[arg-type]
                if len(fresh) >= self.max_batch:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
            # a group set aside for a composition is decided alone, as it was when it asked (its composition
            # is then in the cache); the new debits together
            for group in groups:
                for part in disjoint_records(self.compositions.divert(group)):
                    self._process(part)
            live = self.compositions.divert([d for d in fresh if d.future.set_running_or_notify_cancel()])
            for part in disjoint_records(live):
                self._process(part)
            if stop:
                return

    def _process(self, batch: list[Debit]) -> None:
        attempt = 0
        while True:
            if not batch:
                return
            try:
                results, ahead = self._transaction(batch)
                break
            except NeedsExact as need:  # rolled back; that ledger's debits wait for it, the others go on
                self.compositions.park(need, [d for d in batch if d.ledger_id == need.ledger_id])
                batch = [d for d in batch if d.ledger_id != need.ledger_id]
            except (OperationalError, IntegrityError, DBAPIError) as exc:
                for d in batch:  # the commit may have gone through: the next attempt looks their ids up
                    d.uncertain = True
                if attempt == RETRIES - 1:
                    log.error("debit transaction failed after %d attempts: %s", RETRIES, type(exc).__name__)
                    for d in batch:
                        d.future.set_exception(exc)
                    return
                time.sleep(0.01 * (2**attempt) * (1 + random.random()))
                attempt += 1
            except BaseException as exc:  # noqa: BLE001 - a bug: fail these debits, keep the writer alive
                log.exception("debit transaction failed")
                for d in batch:
                    d.future.set_exception(exc)
                return
        for d, r in zip(batch, results, strict=True):  # committed: now the answers may leave
            d.future.set_result(r)
        for ledger_id, answers, (parts, delta) in ahead:
            self.compositions.after_commit(ledger_id, answers, parts, delta)

    def _transaction(self, batch: list[Debit]) -> tuple[list[DebitResult], list[tuple[str, int, Any]]]:
        """Decide and commit ``batch``. A debit marked ``uncertain`` was in an attempt that failed in the
        database, perhaps after its COMMIT went through, so the debits such attempts may have paid are looked
        up by ``debit_id`` (a debit in no failed attempt cannot have been paid)."""
        ledger_ids = sorted({d.ledger_id for d in batch})
        keyed = {(d.ledger_id, d.idempotency_key) for d in batch if d.idempotency_key is not None}
        with self.db.write() as conn:
            rows = conn.execute(
                select(LedgerRecord.__table__).where(LedgerRecord.id.in_(ledger_ids)).order_by(LedgerRecord.id).with_for_update()
            ).all()
            states: dict[str, LedgerState] = {}
            for row in rows:
                covers, ahead_by = self.compositions.look_ahead(row.id)
                states[row.id] = LedgerState(
                    row=ledger_row(row), usage={}, answers=int(row.answers),
                    spend=accounting.Spend(row.epsilon_spent, row.delta_spent, row.composition),
                    covers=covers, ahead_by=ahead_by,
                )
            if states:
                for u in conn.execute(
                    select(LedgerUsage.__table__).where(LedgerUsage.ledger_id.in_(list(states)))
                ):
                    states[u.ledger_id].usage[u.table_id] = [u.epsilon0, u.delta0, int(u.answers)]
                    states[u.ledger_id].stored_tables.add(u.table_id)
            seen: dict[tuple[str, str], Any] = {}
            if keyed:
                for s in conn.execute(
                    select(SpendRecord.__table__).where(
                        tuple_(SpendRecord.ledger_id, SpendRecord.idempotency_key).in_(list(keyed))
                    )
                ):
                    seen[(s.ledger_id, s.idempotency_key)] = s
            uncertain = [d.debit_id for d in batch if d.uncertain]
            committed = {s.debit_id: s for s in conn.execute(
                select(SpendRecord.__table__).where(SpendRecord.debit_id.in_(uncertain)))
            } if uncertain else {}

            wanted: dict[str, set[str]] = {}
            for d in batch:
                if d.records is not None and d.ledger_id in states:
                    wanted.setdefault(d.ledger_id, set()).update(d.records)
            stored: dict[tuple[str, str], Any] = {}
            for lid, ids in wanted.items():
                listed = sorted(ids)
                for lo in range(0, len(listed), CHUNK):
                    for rec in conn.execute(select(RecordAnswer.__table__).where(
                            RecordAnswer.ledger_id == lid, RecordAnswer.record_id.in_(listed[lo:lo + CHUNK]))):
                        stored[(lid, rec.record_id)] = rec

            results, new_spends = decide(batch, states, seen, committed, self.profile_of, stored)

            now = utcnow()
            for state in states.values():
                if not state.changed:
                    continue
                lid = state.row.id
                conn.execute(
                    update(LedgerRecord).where(LedgerRecord.id == lid).values(
                        answers=state.answers, epsilon_spent=state.spend.epsilon,
                        delta_spent=state.spend.delta, composition=state.spend.method, updated_at=now,
                    )
                )
                for t in state.dirty_tables:
                    e0, d0, n = state.usage[t]
                    if t in state.stored_tables:
                        conn.execute(
                            update(LedgerUsage)
                            .where(LedgerUsage.ledger_id == lid, LedgerUsage.table_id == t)
                            .values(answers=n)
                        )
                    else:
                        conn.execute(insert(LedgerUsage).values(
                            ledger_id=lid, table_id=t, epsilon0=e0, delta0=d0, answers=n))
            if new_spends:
                conn.execute(insert(SpendRecord), [{**r, "created_at": now} for r in new_spends])
            new_records = [{**r, "created_at": now} for state in states.values() for r in state.new_records]
            if new_records:
                conn.execute(insert(RecordAnswer), new_records)
        return results, [(s.row.id, s.answers, s.ahead) for s in states.values() if s.ahead is not None]
