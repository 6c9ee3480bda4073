"""The ledger's decision: which debits a ledger pays, at what spend (no I/O; :mod:`.writer` persists it).

A *debit* asks a ledger to pay for ``rows`` answers of one certified table, identified by its content hash
(:func:`darrm_opt.privacy.table.table_id`: kind, setting, parameters and γ), at that table's per-answer cost
(ε₀, δ₀) and, when known, with that table's own privacy profile. The ledger holds its answers per table id,
so every answer is priced with the profile of the table that released it.

Spend. Every statement a ledger makes is "(ε, δ_T)-DP" at its fixed δ target δ_T (its δ budget): ε is the
smallest among the bounds of :func:`darrm_opt.privacy.accounting.account` that stay valid when each debit's
table is chosen after the answers before it (``adaptive=True``; :mod:`darrm_opt.privacy.adaptive` gives each
rule's theorem): basic composition as a filter, the optimal composition at the ledger's largest per-answer
cost, and the exact composition of one dominating pair: the tables' own when every answer came from tables of
one profile (``exact``), else the profile that dominates every other or the join of the tradeoff envelopes
(``exact-dominating``); for Gaussian pairs with none dominating, the zCDP filter. The exact composition of
*different* pairs (the natural filter of a family that is not totally ordered) is never used: it is not valid
for tables mixed adaptively. For a ledger of private teachers on disjoint shards, their own (ε_T, Δ_T) caps it
too (parallel composition). A debit is paid iff that ε is within the ε budget (and the bound's δ within δ_T).
The method that gave the spend is stated with it (``composition``).

Monotone spend. The ε a ledger states never decreases as answers are added: after a debit it is
max(ε stated before, ε of the tightest bound now). Both are valid for the new answers (the earlier statement
is weaker than the tighter bound of a superset of answers, at the same δ_T), and it stays within the budget
(each was within it when stated). Exact composition is evaluated on a grid that follows the answer count,
so its ε can move by discretisation error between counts; the maximum keeps what users read monotone.

Settings. A ledger capped by private teachers on disjoint shards (``disjoint-private``) refuses tables for
non-private teachers (``disjoint-nonprivate``, the PATE setting): the cap does not hold for them.

Tenancy. A debit made for a tenant (``Debit.tenant``; the service's, from the request's key) is paid only
from a ledger of that tenant; for any other it is ``no_ledger``, exactly as for an id that does not exist,
so its idempotency records and stored answers are never replayed to another tenant. A debit without a
tenant (the Python API and the CLI, which own their database) is not scoped.

Records. A debit may name the client's record id of each row (``Debit.records``, checked by
:func:`record_ids`), with every row's drawn answer. A row whose record this ledger answered before (stored in
``record_answers``) gets the stored answer and is not paid; a record named twice in one debit is answered and
paid once; only the remaining rows are paid (``Debit.units_of`` prices their count), and their answers are
recorded in the debit's own transaction, so a paid answer is never unrecorded nor a recorded one unpaid. A
record asked again with other votes (its row's digest, :func:`row_digests`, differs) or with another table is
still given the stored answer, and reported (``DebitResult.changed``). Records are read only after the
tenant check, so a record of another tenant's ledger is never seen.

Idempotency. A debit with an ``idempotency_key`` already used on its ledger replays the stored answers
(same request digest) or is refused as a conflict; every debit also carries a unique ``debit_id``, stored
with its spend record, so that a transaction whose commit succeeded but whose acknowledgement was lost (a
connection dropped during COMMIT) is recognised on retry and never charged twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy import accounting
from darrm_opt.privacy.adaptive import EXACT_DOMINATING, adaptive_parts
from darrm_opt.privacy.calibrate import bisect, integer
from darrm_opt.privacy.parallel import capped
from darrm_opt.privacy.pld import (
    EXACT_MAX_ANSWERS,
    DominatingPair,
    Parts,
    bucketed,
    cached_exact_epsilon,
    canonical_parts,
    covers,
    next_bucket,
)
from darrm_opt.privacy.profile import Profile

PATE = "disjoint-nonprivate"

#: the composition computed in advance for a ledger has room for at most this fraction more answers than it has
#: (before rounding up to a bucket), so the spend it states stays within ~1.25 × 1.25 of the answers' own
AHEAD_FRACTION = 0.25

#: the privacy profile of a table id (None when unknown: the ledger then uses the generic bounds only)
ProfileOf = Callable[[str], "Profile | None"]


def no_profiles(table_id: str) -> Profile | None:
    return None


def encode_answers(answers: np.ndarray) -> str:
    """One digit per answer (binary answers, class labels up to 9); a JSON list of integers otherwise (class
    labels above 9; the lattice sums of a Gaussian mean release, any int64, flattened)."""
    if answers.size and (int(answers.max()) > 9 or int(answers.min()) < 0):
        return json.dumps([int(a) for a in answers.ravel().tolist()], separators=(",", ":"))
    return (answers.astype(np.uint8) + ord("0")).tobytes().decode("ascii")


def decode_answers(text: str) -> np.ndarray:
    """The answers of :func:`encode_answers`: uint8 digits, uint16 class labels, or int64 beyond those."""
    if text.startswith("["):
        values = np.asarray(json.loads(text), dtype=np.int64)
        return values.astype(np.uint16) if not values.size or (values.min() >= 0 and values.max() <= 0xFFFF) \
            else values
    return np.frombuffer(text.encode("ascii"), dtype=np.uint8) - ord("0")


def request_digest(table_id: str, ledger_id: str, votes: np.ndarray | Sequence[Sequence[int]]) -> str:
    """SHA-256 (hex) of an aggregate request: table, ledger and the votes (shape and every vote).

    Stored with an idempotency key; a later request with the key is replayed only if its digest is equal.
    One-way, so the votes cannot be read back from it (low-entropy votes could be guessed by brute force,
    as from the answers stored beside it)."""
    arr = np.asarray(votes)
    wide = arr.size > 0 and int(arr.max()) > 255  # class labels above 255: two bytes each, tagged
    arr = np.ascontiguousarray(arr.astype("<u2" if wide else np.uint8))
    h = hashlib.sha256()
    tag = "darrm-aggregate-v1-u16" if wide else "darrm-aggregate-v1"
    h.update(f"{tag}\0{table_id}\0{ledger_id}\0{arr.shape[0]}x{arr.shape[-1] if arr.ndim == 2 else 0}\0"
             .encode())
    h.update(arr.tobytes())
    return h.hexdigest()


#: the longest record id (characters; the ``record_answers`` column's width)
MAX_RECORD_ID = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def record_ids(records: Sequence[object], rows: int, name: str = "records") -> list[str]:
    """The client's record ids of ``rows`` rows as strings (an integer id reads as its decimal text):
    InvalidParameter naming ``name`` (and the row) unless there is one per row, each a string of 1 to
    :data:`MAX_RECORD_ID` printable characters (valid Unicode, no control characters) or an integer."""
    if isinstance(records, (str, bytes)) or not isinstance(records, Sequence):
        raise InvalidParameter(name, "must be a list of record ids, one per row", type(records).__name__)
    if len(records) != rows:
        raise InvalidParameter(name, f"one record id per row: {len(records)} ids for {rows} rows")
    out = []
    for i, r in enumerate(records):
        text = str(r) if isinstance(r, int) and not isinstance(r, bool) else r
        if not isinstance(text, str) or not 1 <= len(text) <= MAX_RECORD_ID or _CONTROL.search(text):
            raise InvalidParameter(f"{name}[{i}]", f"a record id must be a string of 1 to {MAX_RECORD_ID} "
                                   "printable characters (or an integer)", r)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidParameter(f"{name}[{i}]", "a record id must be valid Unicode text", r) from None
        out.append(text)
    return out


def row_digests(votes: np.ndarray | Sequence[Sequence[int]]) -> list[str]:
    """SHA-256 (hex) of each row's votes as a multiset (the row's labels sorted: labels and counts of the same
    votes give one digest), stored with a recorded answer to report a record asked again with other votes.
    One-way (low-entropy votes could be guessed, as from the answer beside it)."""
    arr = np.sort(np.asarray(votes).astype("<u2"), axis=1)
    return [hashlib.sha256(b"darrm-row-v1\0" + row.tobytes()).hexdigest() for row in arr]


@dataclass
class Debit:
    """A request to pay for ``rows`` answers of table ``table_id`` from ledger ``ledger_id``.

    ``answers``: the computed, unreleased answers (kept with an idempotency key for replays), or None
    when the caller draws them only after the debit is paid (the Python API)."""

    ledger_id: str
    table_id: str
    epsilon0: float
    delta0: float
    rows: int
    teachers: str  #: the table's teachers' setting (a capped ledger refuses disjoint-nonprivate tables)
    profile: Profile | None = None
    answers: np.ndarray | None = None
    idempotency_key: str | None = None
    request_digest: str | None = None  #: see :func:`request_digest`; stored with the key
    debit_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    future: Future = field(default_factory=Future)
    #: the tenant paying (only its own ledgers pay); None: not scoped (see the module docstring)
    tenant: str | None = None
    #: times the writer set this debit aside while an exact composition of its ledger was computed
    parked: int = 0
    #: it was in a transaction that failed in the database, perhaps after its commit went through
    uncertain: bool = False
    #: how many times the table's profile is composed for these rows (None: once per row); a kind whose
    #: profile states a whole job pays it once (``Mechanism.units``)
    units: int | None = None
    #: the client's record id of each row (:func:`record_ids`), or None; with them ``answers`` holds every row's
    #: drawn answer and ``record_digests`` every row's votes digest (:func:`row_digests`)
    records: Sequence[str] | None = None
    record_digests: Sequence[str] | None = None
    #: with records: the units of the rows left to pay (None: ``units`` as given)
    units_of: Callable[[int], int | None] | None = None

    @property
    def paid_units(self) -> int:
        return self.rows if self.units is None else self.units

    @classmethod
    def of(cls, ledger_id: str, table: Any, rows: int, **kwargs: Any) -> Debit:
        """The debit of ``rows`` answers of a certified table (:class:`darrm_opt.privacy.table.CertifiedTable`
        or anything with its ``id``, ``epsilon0``, ``delta0``, ``teachers`` and ``profile``)."""
        return cls(ledger_id, table.id, table.epsilon0, table.delta0, int(rows), table.teachers,
                   profile=table.profile, **kwargs)


@dataclass(frozen=True)
class DebitResult:
    """``status``: paid, replayed, over_budget, no_ledger, key_conflict, setting_conflict.

    ``epsilon_spent``: the ledger's stated ε after this debit (at ``delta_target``, the ledger's δ budget)."""

    status: str
    answers: np.ndarray | None = None
    epsilon_spent: float = 0.0
    delta_target: float = 0.0
    composition: str = accounting.BASIC
    ledger_answers: int = 0
    detail: str = ""
    #: rows given a stored answer at no cost: their record was answered before (or earlier in the request)
    reanswered: tuple[int, ...] = ()
    #: of those, the rows whose votes (or table) differ from the ones their record was answered with
    changed: tuple[int, ...] = ()


class NeedsExact(Exception):
    """A decision needs an exact composition that is not cached yet (see :meth:`LedgerState.account`);
    ``ledger_id``: the ledger whose decision needs it."""

    def __init__(self, parts: list[tuple[DominatingPair, int]], delta: float, coarse: bool = False,
                 ledger_id: str = "", near: bool | None = None) -> None:
        super().__init__("exact composition not cached")
        self.parts = parts
        self.delta = delta
        self.coarse = coarse
        self.ledger_id = ledger_id
        #: a composition at the actual counts of a ledger near its budget (see :meth:`LedgerState.account`);
        #: by default, the fine grid's
        self.near = (not coarse) if near is None else near
        self.tenant: str | None = None  #: the tenant whose debits asked for it (set by the writer)


@dataclass(frozen=True)
class LedgerRow:
    """What the decision needs of a stored ledger."""

    id: str
    epsilon_budget: float
    delta_budget: float
    cap: tuple[float, float] | None = None  #: disjoint-private teachers' (ε_T, Δ_T), or None
    tenant: str | None = None  #: the tenant that owns the ledger


@dataclass
class LedgerState:
    """A ledger's answers per table and its stated spend, as read in the debit's transaction."""

    row: LedgerRow
    usage: dict[str, list]  # table_id -> [epsilon0, delta0, answers]
    answers: int
    spend: accounting.Spend
    dirty_tables: set[str] = field(default_factory=set)
    stored_tables: set[str] = field(default_factory=set)  # tables with a usage row already
    changed: bool = False
    profiles: dict[str, Profile | None] = field(default_factory=dict)
    #: the (parts, δ) of the composition the next debits will need (see :meth:`account`), or None
    ahead: tuple[Parts, float] | None = None
    #: answers per table the next composition should have room for beyond this debit (its ledger's recent
    #: answers per second times the look-ahead time; the writer's estimate)
    ahead_by: int = 1
    #: compositions computed in advance for this ledger (any that is cached and covers the counts is valid)
    covers: Sequence[Parts] = ()
    #: the exact composition's method for the parts of the last decision (exact, or exact-dominating: see
    #: darrm_opt.privacy.adaptive)
    method: str = accounting.EXACT
    #: ``record_answers`` rows of the debits paid in this decision (written in its transaction)
    new_records: list[dict[str, Any]] = field(default_factory=list)

    def groups(self, extra: Sequence[Debit] = ()) -> list[tuple[float, float, int]]:
        """The ledger's answers by cost, with the debits ``extra`` added (merged by accounting.account)."""
        return [(e, d, n) for e, d, n in self.usage.values()] + [(x.epsilon0, x.delta0, x.paid_units) for x in extra]

    def parts(self, extra: Sequence[Debit], profile_of: ProfileOf) -> list[tuple[Profile, int]] | None:
        """(profile, answers) of every table with ``extra`` added; None when a table's profile is unknown."""
        counts = {t: u[2] for t, u in self.usage.items()}
        for x in extra:
            counts[x.table_id] = counts.get(x.table_id, 0) + x.paid_units
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
        """The tightest valid spend with ``extra``: the generic bounds, the parallel cap and, when every
        table's profile is known, the exact composition of the tables' dominating pairs:

        1. at the counts rounded up to their buckets (:func:`darrm_opt.privacy.pld.bucketed`; a valid, looser
           bound: more answers never cost less), on the coarse grid: one composition serves every count of
           its bucket, so a busy ledger needs one every ~1/8 more answers, not one per debit;
        2. only when neither that nor the generic bounds fit the budget (the ledger is *near* its budget), at the
           actual counts: the fine grid's composition when it is cached already (the tightest), else the one
           on the coarse grid (0.02-0.3 s; within ~1e-4 relative of the fine one at 100 answers);
        3. only when that does not fit either, at the actual counts on the fine grid (0.4-4 s): the decision at
           the budget is the one the tightest bound gives.

        Steps 2 and 3 are one composition per answer count, asked for only by a ledger near its budget; the
        writer computes them as its tenant's (:class:`NeedsExact` ``near``), steps 1's as shared work.

        Raises :class:`NeedsExact` when that composition is not in the cache: it is computed outside the
        transaction (never while holding the database's write lock) and the batch is decided again. After a
        decision by the bucketed composition, :attr:`ahead` names the next bucket's (computed in advance)."""
        budget_delta = self.row.delta_budget
        generic = accounting.account(self.groups(extra), budget_delta, adaptive=True)
        acc = capped(generic, self.row.cap, budget_delta)
        paid = self.parts(extra, profile_of) if budget_delta > 0 else None
        if paid is None:
            return acc
        valid, grow_as, method = adaptive_parts(paid)
        if valid is None:  # several profiles, none dominating: no exact composition is valid adaptively
            zcdp = accounting.zcdp_filter(paid, budget_delta)
            return acc if zcdp is None else self._with_bound(generic, zcdp)
        parts = list(valid)
        if sum(n for _, n in parts) > EXACT_MAX_ANSWERS:
            return acc
        self.method = method
        wide = bucketed(parts)
        exact = cached_exact_epsilon(wide, budget_delta, coarse=True)
        if exact is None:
            exact = self._covered(canonical_parts(parts))
        if exact is None:
            raise NeedsExact(list(wide), budget_delta, True, self.row.id)
        out = self._with_exact(generic, exact)
        if self.fits(out):
            grow = [grow_as] if method == EXACT_DOMINATING else [self.profiles[x.table_id] for x in extra]
            by = min(self.ahead_by, int(AHEAD_FRACTION * sum(n for _, n in parts)))  # the bound stays close
            self.ahead = (next_bucket(parts, [g for g in grow if g is not None], by), budget_delta)
            return out
        fine = cached_exact_epsilon(parts, budget_delta, coarse=False)
        if fine is not None:  # the tightest bound, already known (a plan or an earlier decision computed it)
            return self._with_exact(generic, fine)
        exact = cached_exact_epsilon(parts, budget_delta, coarse=True)  # near the budget: the coarse grid first
        if exact is None:
            raise NeedsExact(parts, budget_delta, True, self.row.id, near=True)
        out = self._with_exact(generic, exact)
        if self.fits(out):
            return out
        raise NeedsExact(parts, budget_delta, False, self.row.id, near=True)

    def _covered(self, parts: Parts) -> float | None:
        """The smallest cached coarse ε among the compositions computed in advance that cover ``parts``."""
        found = [cached_exact_epsilon(c, self.row.delta_budget, coarse=True) for c in self.covers if covers(c, parts)]
        return min((e for e in found if e is not None), default=None)

    def _with_exact(self, generic: accounting.Accounting, exact: float) -> accounting.Accounting:
        # the generic bounds are not redone
        return self._with_bound(generic, accounting.Spend(exact, self.row.delta_budget, self.method))

    def _with_bound(self, generic: accounting.Accounting, bound: accounting.Spend) -> accounting.Accounting:
        return capped(accounting.with_bound(generic, bound, self.row.delta_budget), self.row.cap,
                      self.row.delta_budget)

    def stated(self, acc: accounting.Accounting) -> accounting.Spend:
        """The spend the ledger states with ``acc``'s answers: the larger ε of the earlier statement and the
        tightest bound now, at the δ target (see the module docstring)."""
        now = acc.spend
        if self.answers and self.spend.epsilon > now.epsilon:
            return accounting.Spend(self.spend.epsilon, self.row.delta_budget, self.spend.method)
        return accounting.Spend(now.epsilon, self.row.delta_budget, now.method)

    def fits(self, acc: accounting.Accounting) -> bool:
        return acc.within(self.row.epsilon_budget, self.row.delta_budget)

    def pay(self, d: Debit, spend: accounting.Spend) -> dict[str, Any]:
        """Add ``d`` to the in-memory state; the spend record to insert (the store stamps its time)."""
        usage = self.usage.setdefault(d.table_id, [d.epsilon0, d.delta0, 0])
        usage[2] += d.paid_units
        self.dirty_tables.add(d.table_id)
        self.answers += d.rows
        self.spend = spend
        self.changed = True
        keep = d.idempotency_key is not None and d.answers is not None
        return {
            "ledger_id": d.ledger_id, "table_id": d.table_id, "rows": d.rows,
            "epsilon_spent": spend.epsilon, "delta_spent": spend.delta, "composition": spend.method,
            "idempotency_key": d.idempotency_key,
            "answers": encode_answers(np.asarray(d.answers)) if keep else None,
            "request_digest": d.request_digest if d.idempotency_key is not None else None,
            "debit_id": d.debit_id,
        }


@dataclass(frozen=True)
class _RecordSplit:
    """A debit's rows by record: ``fresh`` (to pay and record), the rows given a stored answer, those of them
    whose votes changed, and every row's answer (the stored one for the re-answered rows)."""

    fresh: tuple[int, ...]
    reanswered: tuple[int, ...]
    changed: tuple[int, ...]
    answers: np.ndarray


def _split_records(d: Debit, stored: dict[tuple[str, str], Any]) -> _RecordSplit:
    """Which rows of ``d`` are answered by the ledger's stored records or by an earlier row of ``d`` with the
    same record id (``stored``: ``record_answers`` rows by (ledger, record id))."""
    assert d.records is not None and d.answers is not None
    answers = np.array(d.answers, copy=True)
    digests = d.record_digests or [""] * len(d.records)
    first: dict[str, int] = {}
    fresh, again, changed = [], [], []
    for j, rid in enumerate(d.records):
        rec = stored.get((d.ledger_id, rid))
        if rec is not None:
            value = decode_answers(rec.answer)
            answers = answers.astype(np.promote_types(answers.dtype, value.dtype), copy=False)
            answers[j] = value.reshape(answers[j].shape)
            was = rec.votes_digest if rec.table_id == d.table_id else None  # another table: reported as changed
        elif rid in first:
            answers[j] = answers[first[rid]]
            was = digests[first[rid]]
        else:
            first[rid] = j
            fresh.append(j)
            continue
        again.append(j)
        if was != digests[j]:
            changed.append(j)
    return _RecordSplit(tuple(fresh), tuple(again), tuple(changed), answers)


def _record_rows(d: Debit, split: _RecordSplit) -> list[dict[str, Any]]:
    digests = d.record_digests or [""] * len(split.answers)
    assert d.records is not None
    return [{"ledger_id": d.ledger_id, "record_id": d.records[j], "table_id": d.table_id,
             "answer": encode_answers(np.asarray(split.answers[j]).reshape(-1)), "votes_digest": digests[j]}
            for j in split.fresh]


def decide(
    batch: list[Debit], states: dict[str, LedgerState], seen: dict[tuple[str, str], Any],
    committed: dict[str, Any] | None = None, profile_of: ProfileOf = no_profiles,
    stored_records: dict[tuple[str, str], Any] | None = None,
) -> tuple[list[DebitResult], list[dict[str, Any]]]:
    """Accept or refuse every debit of the batch (in memory; the caller writes and commits).

    ``seen``: stored spend records by (ledger, idempotency key); ``committed``: stored spend records by
    ``debit_id`` (debits of this batch that an earlier, unacknowledged commit already paid: they are
    reported paid and charged nothing more). ``stored_records``: the ``record_answers`` rows of the batch's
    record ids by (ledger, record id); no two debits of a batch may name one record of one ledger (the writer
    decides such debits in separate transactions). A debit with records pays only its rows not answered before
    (module docstring); the record rows to write are left in each ledger's ``LedgerState.new_records``.

    Per ledger, the spend with *all* its new debits is computed first; if it is within the budget they
    are all paid and all report that spend (the ledger's spend after this commit). Only when it is not
    are they checked in arrival order against the spend so far (:func:`_pay_in_order`), so a batch that
    does not fit whole still pays exactly the debits that fit, as if they had come one at a time."""
    results: list[DebitResult | None] = [None] * len(batch)
    given, batch = batch, list(batch)
    splits: dict[int, _RecordSplit] = {}
    for i, d in enumerate(given):
        state = states.get(d.ledger_id)
        if d.records is None or state is None or (d.tenant is not None and d.tenant != state.row.tenant):
            continue  # the tenant is checked first: another tenant's records are never read
        split = _split_records(d, stored_records or {})
        if (committed or {}).get(d.debit_id) is not None:  # paid with its records by a commit not acknowledged
            split = _RecordSplit((), (), (), split.answers)
            batch[i] = dataclasses.replace(d, answers=split.answers)
            continue
        splits[i] = split
        n = len(split.fresh)
        batch[i] = dataclasses.replace(d, rows=n, answers=split.answers,
                                       units=d.units_of(n) if d.units_of is not None else d.units)
    fresh, duplicates = _classify(batch, states, seen, committed or {}, results)
    records: dict[int, dict[str, Any]] = {}
    for lid, indices in fresh.items():
        state = states[lid]
        together = state.account([batch[i] for i in indices], profile_of)
        if state.fits(together):
            spend = state.stated(together)
            for i in indices:
                records[i] = state.pay(batch[i], spend)
            for i in indices:
                results[i] = _paid(batch[i], spend, state)
        else:
            _pay_in_order(batch, indices, state, profile_of, results, records)
    for i, j in duplicates:  # the same idempotency key twice in one batch: the first one decides
        d = batch[i]
        results[i] = (_replay(_Replay(records[j]), d, states[d.ledger_id]) if j in records else results[j])
    for i, split in splits.items():
        result = results[i]
        assert result is not None
        if result.status != "paid":
            continue
        if i in records:
            states[batch[i].ledger_id].new_records.extend(_record_rows(batch[i], split))
        results[i] = dataclasses.replace(result, reanswered=split.reanswered, changed=split.changed)
    return results, [records[i] for i in sorted(records)]  # type: ignore[return-value]


def _classify(
    batch: list[Debit], states: dict[str, LedgerState], seen: dict[tuple[str, str], Any],
    committed: dict[str, Any], results: list[DebitResult | None],
) -> tuple[dict[str, list[int]], list[tuple[int, int]]]:
    """Fill ``results`` for unknown ledgers, setting conflicts, replays and debits already committed; the
    fresh debits per ledger (arrival order) and the (index, first index) pairs of idempotency keys
    repeated within the batch."""
    fresh: dict[str, list[int]] = {}
    first_with_key: dict[tuple[str, str], int] = {}
    duplicates: list[tuple[int, int]] = []
    for i, d in enumerate(batch):
        state = states.get(d.ledger_id)
        if state is None or (d.tenant is not None and d.tenant != state.row.tenant):
            results[i] = DebitResult("no_ledger", detail=f"ledger_id {d.ledger_id!r} not found")
            continue
        if d.rows == 0 and d.paid_units == 0:  # nothing to pay: the ledger's statement as it is
            results[i] = _paid(d, state.spend if state.answers else accounting.Spend(0.0, 0.0, accounting.BASIC),
                               state)
            continue
        done = committed.get(d.debit_id)
        if done is not None:  # paid by a commit whose acknowledgement was lost: report it, charge nothing
            results[i] = _paid(d, accounting.Spend(done.epsilon_spent, done.delta_spent, done.composition), state)
            continue
        if d.teachers == PATE and state.row.cap is not None:
            results[i] = DebitResult("setting_conflict", detail=(
                f"table {d.table_id!r} is for non-private teachers (disjoint-nonprivate); ledger "
                f"{d.ledger_id!r} is capped by private teachers' (ε, Δ) (disjoint-private), a cap that does "
                "not hold for them; nothing was spent and no answer was released"))
            continue
        if d.idempotency_key is not None:
            key = (d.ledger_id, d.idempotency_key)
            if key in seen:
                results[i] = _replay(seen[key], d, state)
                continue
            if key in first_with_key:
                duplicates.append((i, first_with_key[key]))
                continue
            first_with_key[key] = i
        fresh.setdefault(d.ledger_id, []).append(i)
    return fresh, duplicates


def _pay_in_order(batch: list[Debit], indices: list[int], state: LedgerState, profile_of: ProfileOf,
                  results: list[DebitResult | None], records: dict[int, dict[str, Any]]) -> None:
    """Each debit in arrival order is paid if the ledger's spend with it fits, else refused. The longest
    prefix that fits is found first by bisection (the spend grows with the answers), which needs
    O(log n) evaluations of the exact composition instead of n."""
    spends = {}

    def fits(n: int) -> bool:
        spends[n] = state.account([batch[i] for i in indices[:n]], profile_of)
        return state.fits(spends[n])

    # the first lo debits fit together (with spend best); len(indices) + 1 debits is the bracket's bad end
    lo, _ = bisect(fits, 0, len(indices) + 1, integer, done=lambda g, b: b - g <= 1)
    best = spends.get(lo) if lo > 0 else None
    if best is not None:
        spend = state.stated(best)
        for i in indices[:lo]:
            records[i] = state.pay(batch[i], spend)
        for i in indices[:lo]:
            results[i] = _paid(batch[i], spend, state)
    for i in indices[lo:]:
        d = batch[i]
        acc = state.account([d], profile_of)
        if state.fits(acc):
            spend = state.stated(acc)
            records[i] = state.pay(d, spend)
            results[i] = _paid(d, spend, state)
        else:
            results[i] = _refused(d, acc, state)


def _paid(d: Debit, spend: accounting.Spend, state: LedgerState) -> DebitResult:
    return DebitResult("paid", answers=d.answers, epsilon_spent=spend.epsilon, delta_target=state.row.delta_budget,
                       composition=spend.method, ledger_answers=state.answers)


def _refused(d: Debit, acc: accounting.Accounting, state: LedgerState) -> DebitResult:
    eps_budget, delta_budget = state.row.epsilon_budget, state.row.delta_budget
    over = acc.spend.delta > delta_budget or not math.isfinite(acc.spend.epsilon)
    eps = f"{acc.spend.epsilon:.6g}" if math.isfinite(acc.spend.epsilon) else "unbounded"
    return DebitResult(
        "over_budget",
        epsilon_spent=state.spend.epsilon if state.answers else 0.0, delta_target=delta_budget,
        composition=state.spend.method, ledger_answers=state.answers,
        detail=(
            f"ledger {d.ledger_id} cannot pay for {d.rows} more answer(s): the spend would be "
            f"epsilon={eps} at delta={delta_budget:.6g} by {acc.spend.method} composition"
            + (f" (delta {acc.spend.delta:.6g} over the target)" if over and math.isfinite(acc.spend.epsilon)
               else "")
            + f", over the budget (epsilon={eps_budget:.6g}, delta={delta_budget:.6g}); no answer was released"
        ),
    )


def _replay(stored: Any, d: Debit, state: LedgerState) -> DebitResult:
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
        delta_target=state.row.delta_budget, composition=stored.composition, ledger_answers=state.answers,
    )


class _Replay:
    """A spend record written earlier in the same batch, readable like a stored row."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.__dict__.update(record)
