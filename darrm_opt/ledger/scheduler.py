"""The exact compositions a debit writer needs, computed off its thread: one per ledger at a time, near-budget
ones at a lower CPU priority and within each tenant's share.

Exact compositions are never computed by the writer (:class:`darrm_opt.ledger.writer.DebitWriter`): a decision
that needs one not cached yet (:class:`darrm_opt.ledger.core.NeedsExact`) sets its ledger's debits aside
(:meth:`CompositionScheduler.park`), the batch goes on without them, and the composition is computed on a small
pool of its own (``exact_workers`` threads, one computation per ledger at a time); the debits set aside, and any
that arrive for that ledger meanwhile (:meth:`CompositionScheduler.divert`), are then queued again and decided
with the cached composition. So a ledger near its budget, whose every debit asks for a new composition at its
actual count (on the coarse grid, 0.02–0.3 s, and on the fine grid, 0.4–4 s, only when the coarse one does not
fit), delays only its own debits, never another ledger's.

Those near-budget compositions run at a lower CPU priority (Linux nice +10, :data:`FINE_NICE`): in the service
in child processes (so they do not take the server process's interpreter lock either), else on threads of their
own; so on a busy machine they take the CPU that the requests and the compositions of ledgers within their
budgets leave. A tenant has at most one near-budget composition under way per process, so its ledgers never
hold every slot of the pool; with ``exact_share`` (the service: ``DARRM_TENANT_EXACT_SHARE``), while another
tenant's debits are being served, its near-budget compositions also run at most that fraction of the time in
each process (a duty cycle, a :class:`darrm_opt.ledger.buckets.TenantBuckets` of seconds): a CPU priority alone
does not keep them from slowing the other tenants' requests, which share the cores' caches and the memory
bandwidth with them.

A busy ledger's next composition is computed before a debit needs it (:meth:`CompositionScheduler.after_commit`):
the one for the answers it will have :data:`LOOKAHEAD_S` later at its recent pace. In the service the
compositions are shared between processes through the database
(:class:`darrm_opt.ledger.compositions.SharedCompositions`): one process computes each, the others read it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from darrm_opt.privacy.pld import cached_exact_epsilon, canonical_parts, exact_epsilon, remember_exact_epsilon

from .buckets import TenantBuckets
from .children import FINE_NICE, IdlePool, MachineSlots, child_epsilon, lower_process_priority
from .compositions import SharedCompositions
from .core import Debit, NeedsExact

log = logging.getLogger("darrm.ledger")


#: a debit set aside this many times for exact compositions of its ledger fails (never reached in practice:
#: a decision needs O(log n) compositions)
EXACT_ROUNDS = 64

#: a busy ledger's next composition is computed for the answers it will have this many seconds later (at its
#: recent pace), so it needs about one composition per LOOKAHEAD_S whatever its rate
LOOKAHEAD_S = 1.0
#: the pace of a ledger is its answers per second over windows of this many seconds
PACE_WINDOW_S = 0.25
#: ledgers whose pace the scheduler keeps (the least recently paid are forgotten)
PACED_LEDGERS = 4096

#: another tenant whose debit came within this many seconds is being served (see
#: :meth:`CompositionScheduler._share_wait`)
CONTENDED_S = 1.0


@dataclass
class _Pace:
    since: float
    answers: int
    rate: float = 0.0
    covers: collections.deque = field(default_factory=lambda: collections.deque(maxlen=4))


def _lower_priority() -> None:
    """Raise this thread's niceness by FINE_NICE (Linux schedules threads by their own nice value; elsewhere,
    or when refused, the thread keeps its priority)."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + FINE_NICE)
    except (AttributeError, OSError):
        pass


class CompositionScheduler:
    """Computes the exact compositions that a debit writer's decisions ask for (module docstring) and hands the
    debits that waited for them back through ``requeue``. ``exact_workers``: threads that compute them;
    ``fine_processes``: the fine compositions run in child processes (at most ``exact_workers``, started when
    first needed and ended after :data:`~darrm_opt.ledger.children.IDLE_S` seconds without one, at niceness
    +FINE_NICE), so that they take neither this process's interpreter lock nor more
    than their share of the CPU from the requests it serves. A tenant has at most one fine composition computed
    at a time per process (the others it needs wait in its backlog), so a tenant whose ledgers sit at their
    budgets takes one of the ``exact_workers`` slots, never all, and another tenant's ledger near its budget is
    not queued behind them. With ``exact_share`` a tenant's near-budget compositions run at most that fraction
    of the time while another tenant's debits come (averaged; the first ``exact_burst_s`` seconds of them at
    once; see :meth:`_share_wait`); a tenant alone is not held back. ``shared``: compositions shared with other
    processes through the database (None: this process's cache only). ``slots``: the children of every process
    holding the same slots compute at most that many fine compositions at once, and each process starts no more
    children for them than that (None: no bound beyond ``exact_workers`` per process)."""

    def __init__(self, requeue: Callable[[list[Debit]], None], shared: SharedCompositions | None = None,
                 exact_workers: int = 2, fine_processes: bool = False, exact_share: float | None = None,
                 exact_burst_s: float = 2.0, clock: Callable[[], float] = time.monotonic,
                 slots: MachineSlots | None = None) -> None:
        if exact_share is not None and not 0 < exact_share <= 1:
            raise ValueError(f"exact_share must be in (0, 1], got {exact_share}")
        self._requeue = requeue
        self.shared = shared
        self._slots = slots
        self._clock = clock
        #: each tenant's time on near-budget compositions while another is served, in seconds (``exact_share``)
        self._shares = (TenantBuckets(exact_share, exact_burst_s, clock) if exact_share is not None else None)
        #: near-budget compositions waiting for their tenant's share, started by a timer
        self._timers: set[threading.Timer] = set()
        #: (tenant, time) of the latest debit submitted, and of the latest submitted by another tenant
        self._seen: tuple[tuple[Any, float], tuple[Any, float]] = ((None, -math.inf), (None, -math.inf))
        #: tenant -> the fine compositions it asked for while one of its own was being computed (see :meth:`park`)
        self._fine_backlog: dict[str | None, collections.deque[NeedsExact]] = {}
        self._exact = ThreadPoolExecutor(exact_workers, thread_name_prefix="darrm-exact")
        self._exact_fine = ThreadPoolExecutor(exact_workers, thread_name_prefix="darrm-exact-fine",
                                              initializer=_lower_priority)
        #: (more children than the machine's slots would only sit idle, each holding its interpreter's memory)
        children = exact_workers if slots is None else min(exact_workers, slots.slots)
        self._fine_processes = (IdlePool(children, initializer=lower_process_priority)
                                if fine_processes else None)
        #: compositions of the next buckets, computed before a debit needs them (one thread: it never waits); with
        #: ``fine_processes`` the thread hands each to a child process of normal priority, so that it does not
        #: hold this process's interpreter lock while requests wait
        self._ahead = ThreadPoolExecutor(1, thread_name_prefix="darrm-exact-ahead")
        self._ahead_process = IdlePool(1) if fine_processes else None
        self._ahead_running: dict[tuple[Any, float], Future] = {}
        self._ahead_wanted: collections.OrderedDict[str, tuple[Any, float]] = collections.OrderedDict()
        #: ledger id -> its pace (answers per second) and the compositions computed in advance for it
        self._pace: collections.OrderedDict[str, _Pace] = collections.OrderedDict()
        #: ledger id -> (the debits whose decision asked for the composition being computed, the debits of that
        #: ledger that arrived meanwhile)
        self._warming: dict[str, tuple[list[Debit], list[Debit]]] = {}
        self._warm_lock = threading.Lock()
        self._stopped = False

    def stop(self) -> None:
        """Stop computing; the debits still set aside fail."""
        with self._warm_lock:
            self._stopped = True
        self._exact.shutdown(wait=False, cancel_futures=True)
        self._exact_fine.shutdown(wait=False, cancel_futures=True)
        if self._fine_processes is not None:
            self._fine_processes.shutdown()
        with self._warm_lock:
            timers, self._timers = self._timers, set()
        for t in timers:
            t.cancel()
        self._ahead.shutdown(wait=False, cancel_futures=True)
        if self._ahead_process is not None:
            self._ahead_process.shutdown()
        with self._warm_lock:
            waiting = [d for asked, late in self._warming.values() for d in asked + late]
            self._warming.clear()
        for d in waiting:
            if not d.future.done():
                d.future.set_exception(RuntimeError("the debit writer stopped"))

    def saw(self, tenant: str | None) -> None:
        """Note that ``tenant`` submitted a debit now (what the tenant shares look at)."""
        if self._shares is None:
            return
        latest, other = self._seen
        now = self._clock()
        self._seen = ((tenant, now), other) if tenant == latest[0] else ((tenant, now), latest)

    def divert(self, batch: list[Debit]) -> list[Debit]:
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

    def look_ahead(self, ledger_id: str) -> tuple[tuple[Any, ...], int]:
        """For a decision on ``ledger_id``: the compositions computed in advance for it, and how many answers
        ahead of its count the next one should be (its pace times :data:`LOOKAHEAD_S`, at least 1)."""
        pace = self._pace.get(ledger_id, _Pace(0.0, 0))
        return tuple(pace.covers), max(1, int(pace.rate * LOOKAHEAD_S))

    def after_commit(self, ledger_id: str, answers: int, parts: Any, delta: float) -> None:
        """``ledger_id`` has ``answers`` answers and will need the composition of ``parts`` at ``delta``: note
        its pace and compute that composition in advance."""
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

    def park(self, need: NeedsExact, debits: list[Debit]) -> None:
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
                self._requeue(group)

    def _warm(self, need: NeedsExact) -> BaseException | None:
        """Compute (and cache) the exact composition a decision asked for; the error if it failed."""
        try:
            self._composition(need.parts, need.delta, need.coarse, self._fine_processes if need.near else None)
        except Exception as exc:  # noqa: BLE001 - fail the debits that need it, keep the writer alive
            return exc
        return None

    def _composition(self, parts: Any, delta: float, coarse: bool, child: IdlePool | None,
                     wait_s: float | None = None) -> float | None:
        """:func:`exact_epsilon` of ``parts`` (now in this process's cache): from the cache, from the database
        (another process computed it, or is computing it: waited for up to ``wait_s``, see
        :meth:`SharedCompositions.obtain`) or computed, on this thread or in the ``child`` process."""
        def compute() -> float:
            if child is None:
                return exact_epsilon(parts, delta, coarse=coarse)
            # a fine composition holds 0.5–0.7 GB while it runs: it waits for one of the machine's slots (a coarse
            # one, on a 10× coarser grid, does not)
            slot = self._slots.hold() if self._slots is not None and not coarse else contextlib.nullcontext()
            with slot:
                return child.submit(child_epsilon, parts, delta, coarse).result()

        if self.shared is not None:  # it looks in this process's cache first
            return self.shared.obtain(parts, delta, coarse, compute, wait_s=wait_s)
        hit = cached_exact_epsilon(parts, delta, coarse=coarse)
        if hit is not None:
            return hit
        value = compute()
        remember_exact_epsilon(parts, delta, value, coarse=coarse)
        return value
