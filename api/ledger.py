"""Ledgers and the debit: atomic, durable, and committed before any answer leaves the server.

Each server process has one *debit writer* thread. Request handlers compute their answers (in memory,
unreleased), hand the debit to the writer and wait. The writer takes every debit queued so far (group
commit: one transaction and one disk flush for many requests) and, in one transaction:

1. locks the ledgers concerned: SQLite ``BEGIN IMMEDIATE`` (the database's single write lock, shared by
   every process on the file); PostgreSQL ``SELECT … FROM ledgers … ORDER BY id FOR UPDATE`` (row locks,
   taken in id order so two processes cannot deadlock);
2. reads their per-table usage and the idempotency keys of the debits in hand;
3. a known idempotency key replays the stored answers and spends nothing; every other debit is paid only
   if the ledger's spend with it, computed by :func:`darrm_opt.privacy.accounting.account` (the tightest valid
   composition of all the ledger's answers), is within both budgets — else it is refused (409) and changes
   nothing. The spend with all of a ledger's debits in the batch is computed first; only when that does
   not fit are they checked in arrival order (see ``DebitWriter._decide``);
4. writes the new ledger state, the usage counts and one ``spends`` row per accepted debit (with the
   answers when it has an idempotency key), and COMMITS.

Exact accounting: when every table of a ledger has a privacy profile, the exact composition of the tables'
dominating pairs (method ``exact``, darrm_opt.privacy.pld) is one of the valid bounds. It costs a PLD
composition (cached in memory per composition state), so a debit evaluates the generic bounds first and the
exact one only when they do not fit: every accept/refuse decision is the one the tightest bound gives, and a
debit that the generic bounds already cover reports their spend. ``GET`` of a ledger reports the tightest
bound, exact included.

Only after the commit returns are the handlers woken, and only accepted handlers send their answers. A
crash before the commit releases nothing; a crash after it wastes the budget of answers never delivered,
never the reverse. With SQLite ``synchronous=FULL`` (the default) the commit is on disk when it returns;
PostgreSQL's default ``synchronous_commit=on`` gives the same.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

import numpy as np
from sqlalchemy import insert, select, tuple_, update
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError

from darrm_opt.privacy import accounting
from darrm_opt.privacy.parallel import capped, check_cap
from darrm_opt.privacy.pld import cached_exact_epsilon, exact_epsilon
from darrm_opt.privacy.profile import PrivacyProfile

from .db import Database
from .models import Ledger, LedgerUsage, SpendRecord, utcnow

log = logging.getLogger("darrm.api.ledger")

RETRIES = 5
#: at most this many exact compositions are computed (outside the transaction) for one batch
EXACT_ROUNDS = 64

#: the privacy profile of a table id (None when unknown: the ledger then uses the generic bounds only)
ProfileOf = Callable[[str], "PrivacyProfile | None"]


def no_profiles(table_id: str) -> PrivacyProfile | None:
    return None


def encode_answers(answers: np.ndarray) -> str:
    """One digit per answer (binary answers, class labels up to 9); a JSON list when a label exceeds 9."""
    if answers.size and int(answers.max()) > 9:
        return json.dumps([int(a) for a in answers.tolist()], separators=(",", ":"))
    return (answers.astype(np.uint8) + ord("0")).tobytes().decode("ascii")


def decode_answers(text: str) -> np.ndarray:
    if text.startswith("["):
        return np.asarray(json.loads(text), dtype=np.uint16)
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8) - ord("0")


def request_digest(table_id: str, ledger_id: str, votes: np.ndarray | Sequence[Sequence[int]]) -> str:
    """SHA-256 (hex) of an aggregate request: table, ledger and the votes (shape and every vote).

    Stored with an idempotency key; a later request with the key is replayed only if its digest is equal.
    One-way, so the votes cannot be read back from it (low-entropy votes could be guessed by brute force,
    as from the answers stored beside it; only a key's owner can query it)."""
    arr = np.asarray(votes)
    wide = arr.size > 0 and int(arr.max()) > 255  # class labels above 255: two bytes each, tagged
    arr = np.ascontiguousarray(arr.astype("<u2" if wide else np.uint8))
    h = hashlib.sha256()
    tag = "darrm-aggregate-v1-u16" if wide else "darrm-aggregate-v1"
    h.update(f"{tag}\0{table_id}\0{ledger_id}\0{arr.shape[0]}x{arr.shape[-1] if arr.ndim == 2 else 0}\0"
             .encode())
    h.update(arr.tobytes())
    return h.hexdigest()


@dataclass
class Debit:
    ledger_id: str
    table_id: str
    epsilon0: float
    delta0: float
    answers: np.ndarray
    idempotency_key: str | None = None
    request_digest: str | None = None  #: see :func:`request_digest`; stored with the key
    future: Future = field(default_factory=Future)
    profile: PrivacyProfile | None = None
    teachers: str = "shared"  #: the table's teacher setting (a capped ledger refuses non-private teachers)

    @property
    def rows(self) -> int:
        return int(self.answers.shape[0])


@dataclass(frozen=True)
class DebitResult:
    """``status``: paid, replayed, over_budget, no_ledger, key_conflict, setting_conflict."""

    status: str
    answers: np.ndarray | None = None
    epsilon_spent: float = 0.0
    delta_spent: float = 0.0
    composition: str = accounting.BASIC
    ledger_answers: int = 0
    detail: str = ""


class NeedsExact(Exception):
    """A decision needs an exact composition that is not cached yet (see :meth:`_LedgerState.account`)."""

    def __init__(self, parts: list[tuple[PrivacyProfile, int]], delta: float) -> None:
        super().__init__("exact composition not cached")
        self.parts = parts
        self.delta = delta


@dataclass
class _LedgerState:
    row: Any
    usage: dict[str, list]  # table_id -> [epsilon0, delta0, answers]
    answers: int
    spend: accounting.Spend
    dirty_tables: set[str] = field(default_factory=set)
    stored_tables: set[str] = field(default_factory=set)  # tables with a ledger_usage row already
    changed: bool = False

    profiles: dict[str, PrivacyProfile | None] = field(default_factory=dict)

    def groups(self, extra: Sequence[Debit] = ()) -> list[tuple[float, float, int]]:
        """The ledger's answers by cost, with the debits ``extra`` added (merged by accounting.account)."""
        return [(e, d, n) for e, d, n in self.usage.values()] + [(x.epsilon0, x.delta0, x.rows) for x in extra]

    def parts(self, extra: Sequence[Debit], profile_of: ProfileOf) -> list[tuple[PrivacyProfile, int]] | None:
        """(profile, answers) of every table with ``extra`` added; None when a table's profile is unknown."""
        counts = {t: u[2] for t, u in self.usage.items()}
        for x in extra:
            counts[x.table_id] = counts.get(x.table_id, 0) + x.rows
            if x.profile is not None:
                self.profiles.setdefault(x.table_id, x.profile)
        out = []
        for t, n in counts.items():
            if t not in self.profiles:
                self.profiles[t] = profile_of(t)
            prof = self.profiles[t]
            if prof is None:
                return None
            out.append((prof, n))
        return out

    def account(self, extra: Sequence[Debit], profile_of: ProfileOf) -> accounting.Accounting:
        """The tightest valid spend with ``extra``: the generic bounds, and the exact composition when they
        do not fit the budget (the decision is then the same as with every bound computed). Raises
        :class:`NeedsExact` when that composition is not in the cache: it is computed outside the
        transaction (never while holding the database's write lock) and the batch is decided again."""
        budget_eps, budget_delta = self.row.epsilon_budget, self.row.delta_budget
        cap = _cap(self.row)  # disjoint-private teachers: their own (ε, Δ) caps the total
        acc = capped(accounting.account(self.groups(extra), budget_delta), cap, budget_delta)
        if acc.within(budget_eps, budget_delta) or budget_delta <= 0:
            return acc
        parts = self.parts(extra, profile_of)
        if parts is None:
            return acc
        if cached_exact_epsilon(parts, budget_delta) is None:
            raise NeedsExact(parts, budget_delta)
        return capped(accounting.account(self.groups(extra), budget_delta, profiles=parts), cap, budget_delta)


    def pay(self, d: Debit, spend: accounting.Spend) -> dict[str, Any]:
        """Add ``d`` to the in-memory state; the spend record to insert."""
        usage = self.usage.setdefault(d.table_id, [d.epsilon0, d.delta0, 0])
        usage[2] += d.rows
        self.dirty_tables.add(d.table_id)
        self.answers += d.rows
        self.spend = spend
        self.changed = True
        return {
            "ledger_id": d.ledger_id, "table_id": d.table_id, "rows": d.rows,
            "epsilon_spent": spend.epsilon, "delta_spent": spend.delta, "composition": spend.method,
            "idempotency_key": d.idempotency_key,
            "answers": encode_answers(d.answers) if d.idempotency_key is not None else None,
            "request_digest": d.request_digest if d.idempotency_key is not None else None,
            "created_at": utcnow(),
        }


def ledger_view(row: Any, usage: Sequence[Any], profile_of: ProfileOf = no_profiles) -> dict[str, Any]:
    """The public view of a ledger: budgets, the spend by the tightest valid bound (the committed spend, or
    the exact composition of its tables' profiles when tighter), the method used and every method's bound."""
    groups = [(u.epsilon0, u.delta0, int(u.answers)) for u in usage]
    profiles = [(profile_of(u.table_id), int(u.answers)) for u in usage]
    acc = capped(accounting.account(groups, row.delta_budget, profiles=profiles), _cap(row), row.delta_budget)
    spend = accounting.Spend(row.epsilon_spent, row.delta_spent, row.composition)
    if acc.spend.epsilon < spend.epsilon and acc.spend.delta <= row.delta_budget:
        spend = acc.spend
    return {
        "id": row.id,
        "name": row.name,
        "epsilon_budget": row.epsilon_budget,
        "delta_budget": row.delta_budget,
        "answers": int(row.answers),
        "epsilon_spent": spend.epsilon,
        "delta_spent": spend.delta,
        "epsilon_remaining": max(row.epsilon_budget - spend.epsilon, 0.0),
        "delta_remaining": max(row.delta_budget - spend.delta, 0.0),
        "composition": spend.method,
        "bounds": {
            name: {"epsilon": s.epsilon if math.isfinite(s.epsilon) else None, "delta": s.delta}
            for name, s in acc.bounds.items()
        },
        "groups": [
            {"table_id": u.table_id, "epsilon0": u.epsilon0, "delta0": u.delta0, "answers": int(u.answers)}
            for u in usage
        ],
        "created_at": row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC),
        "teachers": "shared" if _cap(row) is None else "disjoint-private",
        "total_cap": None if _cap(row) is None else {"epsilon": row.cap_epsilon, "delta": row.cap_delta},
    }


def _cap(row: Any) -> tuple[float, float] | None:
    """The disjoint-shard teachers' (ε, Δ) of a ledger row, or None (shared teachers)."""
    return None if row.cap_epsilon is None else (row.cap_epsilon, row.cap_delta)


class LedgerStore:
    """Creating and reading ledgers (the debit is :class:`DebitWriter`'s)."""

    def __init__(self, db: Database, profile_of: ProfileOf = no_profiles) -> None:
        self.db = db
        self.profile_of = profile_of

    def create(self, name: str, epsilon_budget: float, delta_budget: float,
               cap: tuple[float, float] | None = None) -> dict[str, Any]:
        now = utcnow()
        ledger_id = uuid.uuid4().hex
        with self.db.write() as conn:
            conn.execute(
                insert(Ledger).values(
                    id=ledger_id, name=name, epsilon_budget=epsilon_budget, delta_budget=delta_budget,
                    answers=0, epsilon_spent=0.0, delta_spent=0.0, composition=accounting.BASIC,
                    created_at=now, updated_at=now,
                    **({} if cap is None else dict(zip(("cap_epsilon", "cap_delta"), check_cap(*cap)))),
                )
            )
        return self.get(ledger_id)  # type: ignore[return-value]

    def get(self, ledger_id: str) -> dict[str, Any] | None:
        with self.db.read() as conn:
            row = conn.execute(select(Ledger.__table__).where(Ledger.id == ledger_id)).first()
            if row is None:
                return None
            usage = conn.execute(
                select(LedgerUsage.__table__).where(LedgerUsage.ledger_id == ledger_id).order_by(LedgerUsage.table_id)
            ).all()
        return ledger_view(row, usage, self.profile_of)


class DebitWriter:
    """The process's single writer of debits (see the module docstring)."""

    def __init__(self, db: Database, max_batch: int = 512, profile_of: ProfileOf = no_profiles) -> None:
        self.db = db
        self.max_batch = max_batch
        self.profile_of = profile_of
        self._queue: queue.Queue[Debit | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="darrm-debit-writer", daemon=True)
        self._stopped = False
        self._thread.start()

    def submit(self, debit: Debit) -> Future:
        if self._stopped:
            raise RuntimeError("the debit writer is stopped")
        self._queue.put(debit)
        return debit.future

    def stop(self, timeout: float = 10.0) -> None:
        self._stopped = True
        self._queue.put(None)
        self._thread.join(timeout)

    # --- the writer thread -----------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            live = [d for d in batch if d.future.set_running_or_notify_cancel()]
            if live:
                self._process(live)
            if stop:
                return

    def _process(self, batch: list[Debit]) -> None:
        attempt, rounds = 0, 0
        while True:
            try:
                results = self._transaction(batch)
                break
            except NeedsExact as need:  # rolled back; compute it without holding any lock, then decide again
                rounds += 1
                error = self._warm(need) if rounds <= EXACT_ROUNDS else RuntimeError("too many exact compositions")
                if error is not None:
                    log.error("exact accounting failed for a debit batch: %s", error)
                    for d in batch:
                        d.future.set_exception(error)
                    return
            except (OperationalError, IntegrityError, DBAPIError) as exc:
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

    @staticmethod
    def _warm(need: NeedsExact) -> BaseException | None:
        """Compute (and cache) the exact composition a decision asked for; the error if it failed."""
        try:
            exact_epsilon(need.parts, need.delta)
        except Exception as exc:  # noqa: BLE001 - fail the batch, keep the writer alive
            return exc
        return None

    def _transaction(self, batch: list[Debit]) -> list[DebitResult]:
        ledger_ids = sorted({d.ledger_id for d in batch})
        keyed = {(d.ledger_id, d.idempotency_key) for d in batch if d.idempotency_key is not None}
        with self.db.write() as conn:
            rows = conn.execute(
                select(Ledger.__table__).where(Ledger.id.in_(ledger_ids)).order_by(Ledger.id).with_for_update()
            ).all()
            states: dict[str, _LedgerState] = {}
            for row in rows:
                states[row.id] = _LedgerState(
                    row=row, usage={}, answers=int(row.answers),
                    spend=accounting.Spend(row.epsilon_spent, row.delta_spent, row.composition),
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

            results, new_spends = self._decide(batch, states, seen, self.profile_of)

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
                conn.execute(insert(SpendRecord), new_spends)
        return results

    @staticmethod
    def _decide(
        batch: list[Debit], states: dict[str, _LedgerState], seen: dict[tuple[str, str], Any],
        profile_of: ProfileOf = no_profiles,
    ) -> tuple[list[DebitResult], list[dict[str, Any]]]:
        """Accept or refuse every debit of the batch (in memory; the caller writes and commits).

        Per ledger, the spend with *all* its new debits is computed first; if it is within the budget they
        are all paid and all report that spend (the ledger's spend after this commit). Only when it is not
        are they checked in arrival order against the spend so far (:meth:`_pay_in_order`), so a batch that
        does not fit whole still pays exactly the debits that fit, as if they had come one at a time."""
        results: list[DebitResult | None] = [None] * len(batch)
        fresh, duplicates = DebitWriter._classify(batch, states, seen, results)
        records: dict[int, dict[str, Any]] = {}
        for lid, indices in fresh.items():
            state = states[lid]
            together = state.account([batch[i] for i in indices], profile_of)
            if together.within(state.row.epsilon_budget, state.row.delta_budget):
                for i in indices:
                    records[i] = state.pay(batch[i], together.spend)
                for i in indices:
                    results[i] = DebitWriter._paid(batch[i], together.spend, state)
            else:
                DebitWriter._pay_in_order(batch, indices, state, profile_of, results, records)
        for i, j in duplicates:  # the same idempotency key twice in one batch: the first one decides
            d = batch[i]
            results[i] = (DebitWriter._replay(_Replay(records[j]), d, states[d.ledger_id]) if j in records
                          else results[j])
        return results, [records[i] for i in sorted(records)]  # type: ignore[return-value]

    @staticmethod
    def _classify(
        batch: list[Debit], states: dict[str, _LedgerState], seen: dict[tuple[str, str], Any],
        results: list[DebitResult | None],
    ) -> tuple[dict[str, list[int]], list[tuple[int, int]]]:
        """Fill ``results`` for unknown ledgers and replays; the fresh debits per ledger (arrival order) and
        the (index, first index) pairs of idempotency keys repeated within the batch."""
        fresh: dict[str, list[int]] = {}
        first_with_key: dict[tuple[str, str], int] = {}
        duplicates: list[tuple[int, int]] = []
        for i, d in enumerate(batch):
            state = states.get(d.ledger_id)
            if state is None:
                results[i] = DebitResult("no_ledger", detail=f"ledger_id {d.ledger_id!r} not found")
                continue
            if d.teachers == "disjoint-nonprivate" and _cap(state.row) is not None:
                results[i] = DebitResult("setting_conflict", detail=(
                    f"table {d.table_id!r} is for non-private teachers (disjoint-nonprivate); ledger "
                    f"{d.ledger_id!r} is capped by private teachers' (ε, Δ) (disjoint-private), a cap that does "
                    "not hold for them"))
                continue
            if d.idempotency_key is not None:
                key = (d.ledger_id, d.idempotency_key)
                if key in seen:
                    results[i] = DebitWriter._replay(seen[key], d, state)
                    continue
                if key in first_with_key:
                    duplicates.append((i, first_with_key[key]))
                    continue
                first_with_key[key] = i
            fresh.setdefault(d.ledger_id, []).append(i)
        return fresh, duplicates

    @staticmethod
    def _pay_in_order(batch: list[Debit], indices: list[int], state: _LedgerState, profile_of: ProfileOf,
                      results: list[DebitResult | None], records: dict[int, dict[str, Any]]) -> None:
        """Each debit in arrival order is paid if the ledger's spend with it fits, else refused. The longest
        prefix that fits is found first by bisection (the spend grows with the answers), which needs
        O(log n) evaluations of the exact composition instead of n."""
        eps_budget, delta_budget = state.row.epsilon_budget, state.row.delta_budget
        lo, hi, best = 0, len(indices), None  # the first lo debits fit together (with spend best)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            acc = state.account([batch[i] for i in indices[:mid]], profile_of)
            if acc.within(eps_budget, delta_budget):
                lo, best = mid, acc
            else:
                hi = mid - 1
        if best is not None:
            for i in indices[:lo]:
                records[i] = state.pay(batch[i], best.spend)
            for i in indices[:lo]:
                results[i] = DebitWriter._paid(batch[i], best.spend, state)
        for i in indices[lo:]:
            d = batch[i]
            acc = state.account([d], profile_of)
            if acc.within(eps_budget, delta_budget):
                records[i] = state.pay(d, acc.spend)
                results[i] = DebitWriter._paid(d, acc.spend, state)
            else:
                results[i] = DebitWriter._refused(d, acc, state)

    @staticmethod
    def _paid(d: Debit, spend: accounting.Spend, state: _LedgerState) -> DebitResult:
        return DebitResult("paid", answers=d.answers, epsilon_spent=spend.epsilon, delta_spent=spend.delta,
                           composition=spend.method, ledger_answers=state.answers)

    @staticmethod
    def _refused(d: Debit, acc: accounting.Accounting, state: _LedgerState) -> DebitResult:
        eps_budget, delta_budget = state.row.epsilon_budget, state.row.delta_budget
        return DebitResult(
            "over_budget",
            epsilon_spent=state.spend.epsilon, delta_spent=state.spend.delta,
            composition=state.spend.method, ledger_answers=state.answers,
            detail=(
                f"ledger {d.ledger_id} cannot pay for {d.rows} more answer(s): the spend would be "
                f"(epsilon={acc.spend.epsilon:.6g}, delta={acc.spend.delta:.6g}) by "
                f"{acc.spend.method} composition, over the budget "
                f"(epsilon={eps_budget:.6g}, delta={delta_budget:.6g}); no answer was released"
            ),
        )

    @staticmethod
    def _replay(stored: Any, d: Debit, state: _LedgerState) -> DebitResult:
        """The stored answers when ``d`` repeats the request its key was first used for; else a conflict.

        Same request = same digest of (table, ledger, votes); rows stored before digests were kept are
        compared by table and row count only."""
        digest = getattr(stored, "request_digest", None)
        same = (digest == d.request_digest if digest is not None and d.request_digest is not None
                else stored.table_id == d.table_id and stored.rows == d.rows)
        if not same or stored.answers is None:
            return DebitResult(
                "key_conflict",
                detail=(f"idempotency_key {d.idempotency_key!r} was already used on this ledger for a "
                        f"different request (it had {stored.rows} row(s) of table {stored.table_id}); a new "
                        "request needs a new key. Nothing was spent and no answer was released"),
            )
        return DebitResult(
            "replayed", answers=decode_answers(stored.answers), epsilon_spent=stored.epsilon_spent,
            delta_spent=stored.delta_spent, composition=stored.composition, ledger_answers=state.answers,
        )


class _Replay:
    """A spend record written earlier in the same batch, readable like a stored row."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.__dict__.update(record)
