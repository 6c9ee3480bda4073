"""Ledgers on a database: creating and reading them, and the debit, atomic and durable.

Each process that pays has one *debit writer* thread (:class:`DebitWriter`). Callers hand it debits and
wait. The writer takes every debit queued so far (group commit: one transaction and one disk flush for
many requests) and, in one transaction:

1. locks the ledgers concerned: SQLite ``BEGIN IMMEDIATE`` (the database's single write lock, shared by
   every process on the file); PostgreSQL ``SELECT … FROM ledgers … ORDER BY id FOR UPDATE`` (row locks,
   taken in id order so two processes cannot deadlock);
2. reads their per-table usage, the idempotency keys of the debits in hand and the ``debit_id`` of each
   (a debit whose id is already stored was committed by an earlier attempt whose acknowledgement was lost);
3. decides every debit (:func:`darrm_opt.ledger.core.decide`);
4. writes the new ledger state, the usage counts and one ``spends`` row per accepted debit (with its
   ``debit_id``, and with the answers when it has an idempotency key), and COMMITS.

Exact compositions are never computed by the writer: a decision that needs one not cached yet
(:class:`darrm_opt.ledger.core.NeedsExact`) sets its ledger's debits aside, the batch goes on without them,
and the composition is computed on a small pool of its own (``exact_workers`` threads, one computation per
ledger at a time); the debits set aside, and any that arrive for that ledger meanwhile, are then queued again
and decided with the cached composition. So a ledger near its budget, whose every debit asks for a new
composition at its actual count (on the coarse grid, 0.02–0.3 s, and on the fine grid, 0.4–4 s, only when the
coarse one does not fit), delays only its own debits, never another ledger's. Those near-budget compositions
run at a lower CPU priority (Linux nice +10, :data:`FINE_NICE`): in the service in child processes (so they do
not take the server process's interpreter lock either), else on threads of their own; so on a busy machine
they take the CPU that the requests and the compositions of ledgers within their budgets leave. A tenant has
at most one near-budget composition under way per process, so its ledgers never hold every slot of the pool;
with ``exact_share`` (the service: ``DARRM_TENANT_EXACT_SHARE``), while another tenant's debits are being
served, its near-budget compositions also run at most that fraction of the time in each process (a duty
cycle, a :class:`darrm_opt.ledger.buckets.TenantBuckets` of seconds): a CPU priority alone does not keep them
from slowing the other tenants' requests, which share the cores' caches and the memory bandwidth with them.
In the service the compositions are shared between processes through the database
(:class:`darrm_opt.ledger.compositions.SharedCompositions`): one process computes each, the others read it.

Only after the commit returns are the callers woken, and only accepted callers release answers. A crash
before the commit releases nothing; a crash after it wastes the budget of answers never delivered, never
the reverse. With SQLite ``synchronous=FULL`` (the default) the commit is on disk when it returns;
PostgreSQL's default ``synchronous_commit=on`` gives the same. A commit that fails is retried; the retry
finds the debits a lost acknowledgement hid and charges them nothing more.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import os
import queue
import random
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sqlalchemy import func, insert, select, tuple_, update
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from darrm_opt.privacy import accounting
from darrm_opt.privacy.parallel import capped, check_cap
from darrm_opt.privacy.pld import cached_exact_epsilon, canonical_parts, exact_epsilon, remember_exact_epsilon

from .buckets import TenantBuckets
from .children import child_pool, end_pool
from .compositions import SharedCompositions
from .core import (
    Debit,
    DebitResult,
    LedgerRow,
    LedgerState,
    NeedsExact,
    ProfileOf,
    decide,
    no_profiles,
)
from .db import Database
from .schema import DEFAULT_TENANT, Ledger, LedgerUsage, SpendRecord, aware, utcnow

log = logging.getLogger("darrm.ledger")

#: niceness added to the threads computing fine compositions (those of ledgers near their budgets)
FINE_NICE = 10

RETRIES = 5
#: a debit set aside this many times for exact compositions of its ledger fails (never reached in practice:
#: a decision needs O(log n) compositions)
EXACT_ROUNDS = 64


def ledger_row(row: Any) -> LedgerRow:
    """The decision's view of a ``ledgers`` row."""
    cap = None if row.cap_epsilon is None else (row.cap_epsilon, row.cap_delta)
    return LedgerRow(row.id, row.epsilon_budget, row.delta_budget, cap, row.tenant)


@lru_cache(maxsize=4096)
def _bounds(groups: tuple[tuple[float, float, int], ...], delta_budget: float,
            cap: tuple[float, float] | None) -> dict[str, dict[str, float | None]]:
    """Every generic method's bound of a ledger's answers (cached per ledger state: the same answers give
    the same bounds, and listing many ledgers must not recompute them)."""
    acc = capped(accounting.account(list(groups), delta_budget, adaptive=True), cap, delta_budget)
    return {name: {"epsilon": s.epsilon if math.isfinite(s.epsilon) else None, "delta": s.delta}
            for name, s in acc.bounds.items()}


def ledger_view(row: Any, usage: Sequence[Any]) -> dict[str, Any]:
    """The public view of a ledger: budgets, the stated spend (ε at the fixed δ target, the ledger's δ
    budget; monotone in the answers, see :mod:`darrm_opt.ledger.core`), the method that gave it, and the
    generic bounds of its answers (cheap; the exact composition is evaluated by debits that need it)."""
    cap = ledger_row(row).cap
    groups = tuple((float(u.epsilon0), float(u.delta0), int(u.answers)) for u in usage)
    bounds = dict(_bounds(groups, float(row.delta_budget), cap))
    answers = int(row.answers)
    epsilon = float(row.epsilon_spent) if answers else 0.0
    method = row.composition if answers else accounting.BASIC
    bounds.setdefault(method, {"epsilon": epsilon, "delta": row.delta_budget})
    return {
        "id": row.id,
        "name": row.name,
        "tenant": row.tenant,
        "epsilon_budget": row.epsilon_budget,
        "delta_budget": row.delta_budget,
        "answers": answers,
        "epsilon_spent": epsilon,
        "delta_target": row.delta_budget,
        "epsilon_remaining": max(row.epsilon_budget - epsilon, 0.0),
        "composition": method,
        "bounds": bounds,
        "groups": [
            {"table_id": u.table_id, "epsilon0": u.epsilon0, "delta0": u.delta0, "answers": int(u.answers)}
            for u in usage
        ],
        "created_at": aware(row.created_at),
        "teachers": "shared" if cap is None else "disjoint-private",
        "total_cap": None if cap is None else {"epsilon": cap[0], "delta": cap[1]},
    }


def insert_ledger(conn: Any, name: str, epsilon_budget: float, delta_budget: float,
                  cap: tuple[float, float] | None = None, tenant: str = DEFAULT_TENANT) -> str:
    """Insert a new, empty ledger of ``tenant`` in ``conn``'s transaction; its id. ``cap``: the (ε_T, Δ_T) of
    private teachers on disjoint shards, which caps the ledger's total (parallel composition)."""
    now = utcnow()
    ledger_id = uuid.uuid4().hex
    conn.execute(insert(Ledger).values(
        id=ledger_id, name=name, epsilon_budget=epsilon_budget, delta_budget=delta_budget,
        answers=0, epsilon_spent=0.0, delta_spent=0.0, composition=accounting.BASIC,
        created_at=now, updated_at=now, tenant=tenant,
        **({} if cap is None else dict(zip(("cap_epsilon", "cap_delta"), check_cap(*cap)))),
    ))
    return ledger_id


def _of(tenant: str | None) -> list[Any]:
    """The condition that a ledger belongs to ``tenant`` (none for None: every tenant's, an admin's view)."""
    return [] if tenant is None else [Ledger.tenant == tenant]


class LedgerStore:
    """Creating and reading ledgers (the debit is :class:`DebitWriter`'s). Every read takes the tenant whose
    ledgers it may see (None: every tenant's); another tenant's ledger reads as absent."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, name: str, epsilon_budget: float, delta_budget: float,
               cap: tuple[float, float] | None = None, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        """Create a ledger of ``tenant``; its view."""
        with self.db.write() as conn:
            ledger_id = insert_ledger(conn, name, epsilon_budget, delta_budget, cap, tenant)
        return self.get(ledger_id)  # type: ignore[return-value]

    def list(self, limit: int, offset: int, tenant: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """The views of ``limit`` ledgers of ``tenant`` from ``offset`` (oldest first, each with ``updated_at``)
        and the number of its ledgers."""
        mine = _of(tenant)
        with self.db.read() as conn:
            total = conn.execute(select(func.count()).select_from(Ledger).where(*mine)).scalar_one()
            rows = conn.execute(select(Ledger.__table__).where(*mine).order_by(Ledger.created_at, Ledger.id)
                                .limit(limit).offset(offset)).all()
            usage: dict[str, list[Any]] = {r.id: [] for r in rows}
            if rows:
                for u in conn.execute(select(LedgerUsage.__table__).where(LedgerUsage.ledger_id.in_(list(usage)))
                                      .order_by(LedgerUsage.table_id)):
                    usage[u.ledger_id].append(u)
        return [{**ledger_view(r, usage[r.id]), "updated_at": aware(r.updated_at)} for r in rows], int(total)

    def spends(self, ledger_id: str, limit: int, tenant: str | None = None) -> dict[str, Any] | None:
        """The ledger's statement after each of its last ``limit`` paid requests (oldest first); None for an
        unknown ledger or one of another tenant."""
        with self.db.read() as conn:
            ledger = conn.execute(select(Ledger.__table__).where(Ledger.id == ledger_id, *_of(tenant))).first()
            if ledger is None:
                return None
            rows = conn.execute(
                select(SpendRecord.created_at, SpendRecord.rows, SpendRecord.epsilon_spent, SpendRecord.composition)
                .where(SpendRecord.ledger_id == ledger_id).order_by(SpendRecord.id.desc()).limit(limit + 1)
            ).all()
        items = [{"at": aware(r.created_at), "rows": r.rows, "epsilon_spent": r.epsilon_spent,
                  "composition": r.composition} for r in reversed(rows[:limit])]
        return {"ledger_id": ledger_id, "epsilon_budget": ledger.epsilon_budget,
                "delta_budget": ledger.delta_budget, "created_at": aware(ledger.created_at), "items": items,
                "truncated": len(rows) > limit}

    def get(self, ledger_id: str, tenant: str | None = None) -> dict[str, Any] | None:
        """A ledger's view; None for an unknown ledger or one of another tenant."""
        with self.db.read() as conn:
            row = conn.execute(select(Ledger.__table__).where(Ledger.id == ledger_id, *_of(tenant))).first()
            if row is None:
                return None
            usage = conn.execute(
                select(LedgerUsage.__table__).where(LedgerUsage.ledger_id == ledger_id).order_by(LedgerUsage.table_id)
            ).all()
        return ledger_view(row, usage)


#: a busy ledger's next composition is computed for the answers it will have this many seconds later (at its
#: recent pace), so it needs about one composition per LOOKAHEAD_S whatever its rate
LOOKAHEAD_S = 1.0
#: the pace of a ledger is its answers per second over windows of this many seconds
PACE_WINDOW_S = 0.25
#: ledgers whose pace the writer keeps (the least recently paid are forgotten)
PACED_LEDGERS = 4096


@dataclass
class _Pace:
    since: float
    answers: int
    rate: float = 0.0
    covers: collections.deque = field(default_factory=lambda: collections.deque(maxlen=4))


def _lower_process_priority() -> None:
    """Set this (child) process's niceness to its parent's + FINE_NICE where the system allows it (a child
    inherits the niceness of the thread that started it, which may already be lowered)."""
    with contextlib.suppress(AttributeError, OSError):
        parent = os.getpriority(os.PRIO_PROCESS, os.getppid())
        os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), min(19, parent + FINE_NICE)))


def _lower_priority() -> None:
    """Raise this thread's niceness by FINE_NICE (Linux schedules threads by their own nice value; elsewhere,
    or when refused, the thread keeps its priority)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + FINE_NICE)
    except (AttributeError, OSError):
        pass


#: another tenant whose debit came within this many seconds is being served (see :meth:`DebitWriter._share_wait`)
CONTENDED_S = 1.0


class DebitWriter:
    """The process's single writer of debits (see the module docstring); ``exact_workers``: threads that
    compute exact compositions for it; ``fine_processes``: the fine compositions run in child processes (at
    most ``exact_workers``, started when first needed, at niceness +FINE_NICE), so that they take neither
    this process's interpreter lock nor more than their share of the CPU from the requests it serves.
    A tenant has at most one fine composition computed at a time per process (the others it needs wait in its
    backlog), so a tenant whose ledgers sit at their budgets takes one of the ``exact_workers`` slots, never all,
    and another tenant's ledger near its budget is not queued behind them. With ``exact_share`` a tenant's
    near-budget compositions run at most that fraction of the time while another tenant's debits come
    (averaged; the first ``exact_burst_s`` seconds of them at once; see :meth:`_share_wait`); a tenant alone
    is not held back."""

    def __init__(self, db: Database, max_batch: int = 512, profile_of: ProfileOf = no_profiles,
                 exact_workers: int = 2, fine_processes: bool = False, share_compositions: bool = False,
                 exact_share: float | None = None, exact_burst_s: float = 2.0,
                 clock: Any = time.monotonic) -> None:
        if exact_share is not None and not 0 < exact_share <= 1:
            raise ValueError(f"exact_share must be in (0, 1], got {exact_share}")
        self.db = db
        self._clock = clock
        #: each tenant's time on near-budget compositions while another is served, in seconds (``exact_share``)
        self._shares = (TenantBuckets(exact_share, exact_burst_s, clock) if exact_share is not None else None)
        #: near-budget compositions waiting for their tenant's share, started by a timer
        self._timers: set[threading.Timer] = set()
        #: (tenant, time) of the latest debit submitted, and of the latest submitted by another tenant
        self._seen: tuple[tuple[Any, float], tuple[Any, float]] = ((None, -math.inf), (None, -math.inf))
        #: with ``share_compositions`` (the service: several processes on one database) exact compositions are
        #: shared through the database, computed by one process and read by the others
        self.shared = SharedCompositions(db) if share_compositions else None
        #: tenant -> the fine compositions it asked for while one of its own was being computed (see :meth:`_park`)
        self._fine_backlog: dict[str | None, collections.deque[NeedsExact]] = {}
        self.max_batch = max_batch
        self.profile_of = profile_of
        #: new debits; a list is a group of debits set aside for an exact composition, decided as one batch
        self._queue: queue.Queue[Debit | list[Debit] | None] = queue.Queue()
        self._exact = ThreadPoolExecutor(exact_workers, thread_name_prefix="darrm-exact")
        self._exact_fine = ThreadPoolExecutor(exact_workers, thread_name_prefix="darrm-exact-fine",
                                              initializer=_lower_priority)
        self._fine_processes = (child_pool(exact_workers, initializer=_lower_process_priority)
                                if fine_processes else None)
        #: compositions of the next buckets, computed before a debit needs them (one thread: it never waits); with
        #: ``fine_processes`` the thread hands each to a child process of normal priority, so that it does not
        #: hold this process's interpreter lock while requests wait
        self._ahead = ThreadPoolExecutor(1, thread_name_prefix="darrm-exact-ahead")
        self._ahead_process = child_pool(1) if fine_processes else None
        self._ahead_running: dict[tuple[Any, float], Future] = {}
        self._ahead_wanted: collections.OrderedDict[str, tuple[Any, float]] = collections.OrderedDict()
        #: ledger id -> its pace (answers per second) and the compositions computed in advance for it
        self._pace: collections.OrderedDict[str, _Pace] = collections.OrderedDict()
        #: ledger id -> (the debits whose decision asked for the composition being computed, the debits of that
        #: ledger that arrived meanwhile)
        self._warming: dict[str, tuple[list[Debit], list[Debit]]] = {}
        self._warm_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="darrm-debit-writer", daemon=True)
        self._stopped = False
        self._thread.start()

    def submit(self, debit: Debit) -> Future:
        if self._stopped:
            raise RuntimeError("the debit writer is stopped")
        if self._shares is not None:
            self._saw(debit.tenant)
        self._queue.put(debit)
        return debit.future

    def stop(self, timeout: float = 10.0) -> None:
        self._stopped = True
        self._queue.put(None)
        self._thread.join(timeout)
        self._exact.shutdown(wait=False, cancel_futures=True)
        self._exact_fine.shutdown(wait=False, cancel_futures=True)
        if self._fine_processes is not None:
            end_pool(self._fine_processes)
        with self._warm_lock:
            timers, self._timers = self._timers, set()
        for t in timers:
            t.cancel()
        self._ahead.shutdown(wait=False, cancel_futures=True)
        if self._ahead_process is not None:
            end_pool(self._ahead_process)
        with self._warm_lock:
            waiting = [d for asked, late in self._warming.values() for d in asked + late]
            self._warming.clear()
        for d in waiting:
            if not d.future.done():
                d.future.set_exception(RuntimeError("the debit writer stopped"))

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
                self._process(self._wait_for_warm(group))
            live = self._wait_for_warm([d for d in fresh if d.future.set_running_or_notify_cancel()])
            if live:
                self._process(live)
            if stop:
                return

    def _wait_for_warm(self, batch: list[Debit]) -> list[Debit]:
        """``batch`` less the debits of ledgers whose exact composition is being computed (they join that
        ledger's debits set aside, decided once it is cached)."""
        with self._warm_lock:
            if not self._warming:
                return batch
            rest = []
            for d in batch:
                waiting = self._warming.get(d.ledger_id)
                if waiting is None:
                    rest.append(d)
                else:
                    waiting[1].append(d)
            return rest

    def _process(self, batch: list[Debit]) -> None:
        attempt = 0
        while True:
            if not batch:
                return
            try:
                results, ahead = self._transaction(batch)
                break
            except NeedsExact as need:  # rolled back; that ledger's debits wait for it, the others go on
                self._park(need, [d for d in batch if d.ledger_id == need.ledger_id])
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
            self._paced(ledger_id, answers, parts)
            self._compute_ahead(ledger_id, parts, delta)

    def _paced(self, ledger_id: str, answers: int, ahead: Any) -> None:
        """Record that ``ledger_id`` has ``answers`` answers and will need the composition ``ahead``."""
        now = time.monotonic()
        pace = self._pace.get(ledger_id)
        if pace is None:
            pace = self._pace[ledger_id] = _Pace(now, answers)
            while len(self._pace) > PACED_LEDGERS:
                self._pace.popitem(last=False)
        self._pace.move_to_end(ledger_id)
        if now - pace.since >= PACE_WINDOW_S:
            pace.rate = (answers - pace.answers) / (now - pace.since)
            pace.since, pace.answers = now, answers
        if ahead not in pace.covers:
            pace.covers.append(ahead)

    def _compute_ahead(self, ledger_id: str, parts: Any, delta: float) -> None:
        """Compute the coarse composition of ``parts`` on the look-ahead thread unless it is cached or
        being computed (a debit that needs it meanwhile waits for it, :meth:`_warm`). Only the latest one
        asked for a ledger is computed: one queued before it and not started yet is dropped."""
        key = (canonical_parts(parts), delta)
        if not key[0] or cached_exact_epsilon(key[0], delta, coarse=True) is not None:
            return
        with self._warm_lock:
            self._ahead_wanted[ledger_id] = key
            while len(self._ahead_wanted) > PACED_LEDGERS:
                self._ahead_wanted.popitem(last=False)
            if key in self._ahead_running:
                return

            def run() -> None:
                try:
                    with self._warm_lock:
                        latest = self._ahead_wanted.get(ledger_id) == key
                    if latest:  # a composition another process is computing is not waited for here
                        self._composition(key[0], delta, True, self._ahead_process, wait_s=0)
                finally:
                    with self._warm_lock:
                        self._ahead_running.pop(key, None)

            try:
                self._ahead_running[key] = self._ahead.submit(run)
            except RuntimeError:  # the pool is shut down: the writer is stopping
                pass

    def _park(self, need: NeedsExact, debits: list[Debit]) -> None:
        """Set ``debits`` (of ledger ``need.ledger_id``) aside and compute the composition they need on the
        exact pool; they are queued again when it is cached."""
        keep = []
        for d in debits:
            d.parked += 1
            if d.parked > EXACT_ROUNDS:
                d.future.set_exception(RuntimeError("too many exact compositions"))
            else:
                keep.append(d)
        with self._warm_lock:
            waiting = self._warming.get(need.ledger_id)
            if waiting is not None:  # one computation per ledger at a time: wait for the running one
                waiting[1].extend(keep)
                return
            self._warming[need.ledger_id] = (keep, [])
            if need.near:
                need.tenant = next((d.tenant for d in keep), None)
                backlog = self._fine_backlog.get(need.tenant)
                if backlog is not None:  # one of this tenant's is being computed: this one waits its turn
                    backlog.append(need)
                    return
                self._fine_backlog[need.tenant] = collections.deque()
        self._start(need)

    def _start(self, need: NeedsExact) -> None:
        if need.near and self._shares is not None:
            wait = self._share_wait(need.tenant)
            if wait > 0:  # looked at again within CONTENDED_S: the other tenants may have gone
                timer = threading.Timer(min(wait, CONTENDED_S), self._start_delayed, (need,))
                timer.daemon = True
                with self._warm_lock:
                    if self._stopped:
                        return
                    self._timers.add(timer)
                timer.start()
                return
        try:
            (self._exact_fine if need.near else self._exact).submit(self._warm_and_requeue, need)
        except RuntimeError as exc:  # the pool is shut down: the writer is stopping
            self._release(need.ledger_id, exc)
            if need.near:
                self._next_fine(need.tenant)

    def _start_delayed(self, need: NeedsExact) -> None:
        with self._warm_lock:
            self._timers = {t for t in self._timers if t.is_alive() and t is not threading.current_thread()}
        self._start(need)

    def _saw(self, tenant: str | None) -> None:
        """Note that ``tenant`` submitted a debit now."""
        latest, other = self._seen
        now = self._clock()
        self._seen = ((tenant, now), other) if tenant == latest[0] else ((tenant, now), latest)

    def _contended(self, tenant: str | None, since: float) -> bool:
        """Whether a tenant other than ``tenant`` submitted a debit after ``since``."""
        latest, other = self._seen
        return (other if latest[0] == tenant else latest)[1] > since

    def _share_wait(self, tenant: str | None) -> float:
        """Seconds until ``tenant``'s share lets its next near-budget composition start: until its bucket of
        seconds (refilled at ``exact_share`` per second up to ``exact_burst_s``, each composition run while
        another tenant's debits came costing its wall time, so more when the machine is busy) is out of debt;
        0 whenever no other tenant submitted a debit in the last :data:`CONTENDED_S`."""
        assert self._shares is not None
        if not self._contended(tenant, self._clock() - CONTENDED_S):
            return 0.0
        return self._shares.wait(tenant)

    def _charge(self, tenant: str | None, started: float) -> None:
        """Debit the near-budget composition ``tenant`` ran since ``started`` from its share, if another tenant
        submitted a debit meanwhile."""
        assert self._shares is not None
        if self._contended(tenant, started - CONTENDED_S):
            self._shares.spend(tenant, self._clock() - started)

    def _next_fine(self, tenant: str | None) -> None:
        """Start the next fine composition ``tenant`` asked for, or note that it has none running."""
        with self._warm_lock:
            backlog = self._fine_backlog.get(tenant)
            nxt = backlog.popleft() if backlog else None
            if nxt is None:
                self._fine_backlog.pop(tenant, None)
        if nxt is not None:
            self._start(nxt)

    def _warm_and_requeue(self, need: NeedsExact) -> None:
        with self._warm_lock:
            ahead = (self._ahead_running.get((canonical_parts(need.parts), need.delta))
                     if need.coarse and not need.near else None)
        if ahead is not None:  # being computed in advance: wait for it (the look-ahead thread never waits)
            with contextlib.suppress(Exception):
                ahead.result()
        started = self._clock()
        try:
            error = self._warm(need)
            if error is not None:
                log.error("exact accounting failed for ledger %s: %s", need.ledger_id, error)
            self._release(need.ledger_id, error)
        finally:
            if need.near:
                if self._shares is not None:
                    self._charge(need.tenant, started)
                self._next_fine(need.tenant)

    def _release(self, ledger_id: str, error: BaseException | None) -> None:
        """Queue the debits set aside for ``ledger_id`` again (those that asked for the composition as one
        group, decided as they were; those that came meanwhile as the next), or fail them with ``error``."""
        with self._warm_lock:
            asked, late = self._warming.pop(ledger_id, ([], []))
        if error is not None:
            for d in asked + late:
                d.future.set_exception(error)
            return
        for group in (asked, late):
            if group:
                self._queue.put(group)

    def _warm(self, need: NeedsExact) -> BaseException | None:
        """Compute (and cache) the exact composition a decision asked for; the error if it failed."""
        try:
            self._composition(need.parts, need.delta, need.coarse, self._fine_processes if need.near else None)
        except Exception as exc:  # noqa: BLE001 - fail the debits that need it, keep the writer alive
            return exc
        return None

    def _composition(self, parts: Any, delta: float, coarse: bool, child: ProcessPoolExecutor | None,
                     wait_s: float | None = None) -> float | None:
        """:func:`exact_epsilon` of ``parts`` (now in this process's cache): from the cache, from the database
        (another process computed it, or is computing it: waited for up to ``wait_s``, see
        :meth:`SharedCompositions.obtain`) or computed, on this thread or in the ``child`` process."""
        def compute() -> float:
            if child is None:
                return exact_epsilon(parts, delta, coarse=coarse)
            return child.submit(exact_epsilon, parts, delta, coarse=coarse).result()

        if self.shared is not None:  # it looks in this process's cache first
            return self.shared.obtain(parts, delta, coarse, compute, wait_s=wait_s)
        hit = cached_exact_epsilon(parts, delta, coarse=coarse)
        if hit is not None:
            return hit
        value = compute()
        remember_exact_epsilon(parts, delta, value, coarse=coarse)
        return value

    def _transaction(self, batch: list[Debit]) -> tuple[list[DebitResult], list[tuple[str, int, Any]]]:
        """Decide and commit ``batch``. A debit marked ``uncertain`` was in an attempt that failed in the
        database, perhaps after its COMMIT went through, so the debits such attempts may have paid are looked
        up by ``debit_id`` (a debit in no failed attempt cannot have been paid)."""
        ledger_ids = sorted({d.ledger_id for d in batch})
        keyed = {(d.ledger_id, d.idempotency_key) for d in batch if d.idempotency_key is not None}
        with self.db.write() as conn:
            rows = conn.execute(
                select(Ledger.__table__).where(Ledger.id.in_(ledger_ids)).order_by(Ledger.id).with_for_update()
            ).all()
            states: dict[str, LedgerState] = {}
            for row in rows:
                pace = self._pace.get(row.id, _Pace(0.0, 0))
                states[row.id] = LedgerState(
                    row=ledger_row(row), usage={}, answers=int(row.answers),
                    spend=accounting.Spend(row.epsilon_spent, row.delta_spent, row.composition),
                    covers=tuple(pace.covers), ahead_by=max(1, int(pace.rate * LOOKAHEAD_S)),
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

            results, new_spends = decide(batch, states, seen, committed, self.profile_of)

            now = utcnow()
            for state in states.values():
                if not state.changed:
                    continue
                lid = state.row.id
                conn.execute(
                    update(Ledger).where(Ledger.id == lid).values(
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
        return results, [(s.row.id, s.answers, s.ahead) for s in states.values() if s.ahead is not None]
