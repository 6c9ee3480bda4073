"""A privacy ledger used from Python or the CLI without a server, with the service's own ledger code.

:class:`Ledger` opens a database (a SQLite file by default, created and migrated on first use, or the
service's PostgreSQL), finds or creates a ledger by name and pays for batches of answers of certified
tables (:class:`darrm_opt.privacy.table.CertifiedTable`) through :class:`darrm_opt.ledger.writer.DebitWriter`:
one transaction that locks the ledger, decides with :func:`darrm_opt.ledger.core.decide` (each answer priced
with its own table's profile, the teachers' setting checked against the ledger's cap) and commits durably
(SQLite ``synchronous=FULL``) before :meth:`Ledger.pay` returns. A batch that does not fit is refused whole:
nothing is written and :class:`darrm_opt.errors.BudgetExceeded` names the binding limit and the largest
batch that fits. Answers are drawn only after the debit: :func:`darrm_opt.release.release`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import insert, or_, select, text, update
from sqlalchemy.exc import SQLAlchemyError

from darrm_opt.errors import BudgetExceeded, DarrmError, InvalidParameter
from darrm_opt.privacy import accounting
from darrm_opt.privacy.parallel import capped
from darrm_opt.privacy.profile import Profile, profile_from_dict
from darrm_opt.privacy.table import CertifiedTable

from .core import Debit, DebitResult, record_ids
from .db import DEFAULT_URL, Database, migrate
from .job_state import JobStates, StoredState
from .records import answered
from .schema import GammaTable, LedgerRecord, RecordAnswer, SpendRecord, utcnow
from .tables import table_columns
from .views import LedgerStore, insert_ledger
from .writer import DebitWriter

#: pg_advisory_xact_lock key serialising find-or-create by name (arbitrary, fixed)
NAME_LOCK = 7_247_301_812


class LedgerUnavailable(DarrmError):
    """The ledger database cannot be opened or used."""

    exit_code = 2


def database_url(spec: str | None) -> str:
    """``spec`` as a database URL: a URL as is, a plain path as ``sqlite:///PATH``; None: the default."""
    if not spec:
        return DEFAULT_URL
    return spec if "://" in spec else f"sqlite:///{Path(spec).expanduser().resolve()}"


def largest_batch(fits: Callable[[int], bool], upper: int) -> int:
    """The most answers (< ``upper``) for which ``fits(n)`` holds, by bisection: the spend grows with the
    count, so ``fits`` is monotone (``fits(0)`` always holds, ``fits(upper)`` does not)."""
    from darrm_opt.privacy.calibrate import bisect, integer

    return bisect(fits, 0, upper, integer, done=lambda g, b: b - g <= 1)[0]


def open_ledger(url: str | None, name: str, find: Callable[[Database], str]) -> tuple[Database, str]:
    """The migrated ledger database at ``url`` and ``find(db)``: the id of the ledger called ``name`` (found or
    created). InvalidParameter for a bad name or URL; LedgerUnavailable when the database fails (it is
    disposed of whenever this raises)."""
    if not name or len(name) > 200:
        raise InvalidParameter("ledger", "must be a name of 1 to 200 characters", name)
    try:
        db = Database(database_url(url))
    except ValueError as exc:
        raise InvalidParameter("ledger-db", str(exc)) from None
    try:
        migrate(db)
        return db, find(db)
    except SQLAlchemyError as exc:
        db.dispose()
        raise LedgerUnavailable(f"cannot use the ledger database {db.description}: "
                                f"{type(exc).__name__}: {exc.orig if hasattr(exc, 'orig') else exc}") from None
    except BaseException:
        db.dispose()
        raise


class Ledger:
    """A durable (ε, δ) budget on a database, paid exactly as the service pays ``POST /v1/aggregate``.

    ``teacher_cap``: for a new ledger of private teachers on disjoint shards, their (ε_T, Δ_T), which caps
    the total (parallel composition); such a ledger refuses tables for non-private teachers."""

    def __init__(self, url: str | None, name: str, *, epsilon_budget: float | None = None,
                 delta_budget: float | None = None, teacher_cap: tuple[float, float] | None = None) -> None:
        self.db, self.id = open_ledger(url, name, lambda db: self._find_or_create(
            name, epsilon_budget, delta_budget, teacher_cap, db))
        self.name = name
        self._writer: DebitWriter | None = None

    def _find_or_create(self, name: str, epsilon_budget: float | None, delta_budget: float | None,
                        teacher_cap: tuple[float, float] | None, db: Database) -> str:
        """The id of the ledger called ``name`` (or with that id); created with the budgets if absent,
        under the database's write lock so that two processes cannot both create it."""
        with db.write() as conn:
            if not db.is_sqlite:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": NAME_LOCK})
            rows = conn.execute(select(LedgerRecord.__table__).where(
                or_(LedgerRecord.id == name, LedgerRecord.name == name))).all()
            if len(rows) > 1:
                raise InvalidParameter("ledger", f"{len(rows)} ledgers are called {name!r}: give one's id")
            if rows:
                row = rows[0]
                for label, given, have in (("epsilon-budget", epsilon_budget, row.epsilon_budget),
                                           ("delta-budget", delta_budget, row.delta_budget)):
                    if given is not None and given != have:
                        raise InvalidParameter(label, f"ledger {name!r} already exists with budget {have:g}; "
                                               "a budget cannot change", given)
                if teacher_cap is not None and (row.cap_epsilon, row.cap_delta) != tuple(teacher_cap):
                    raise InvalidParameter("teacher-cap", f"ledger {name!r} already exists with another cap; "
                                           "a cap cannot change", teacher_cap)
                return str(row.id)
            if epsilon_budget is None or delta_budget is None:
                raise InvalidParameter("ledger", f"no ledger {name!r} in this database: give --budget EPS,DELTA "
                                       "(epsilon_budget and delta_budget in Python) to create it")
            if not (math.isfinite(epsilon_budget) and epsilon_budget > 0):
                raise InvalidParameter("epsilon-budget", "must be a finite number > 0", epsilon_budget)
            if not (0 <= delta_budget < 1):
                raise InvalidParameter("delta-budget", "must satisfy 0 <= delta < 1", delta_budget)
            return insert_ledger(conn, name, epsilon_budget, delta_budget, teacher_cap)

    def view(self) -> dict[str, Any]:
        """Budgets, the stated spend (ε at the fixed δ target, monotone), its method and the bounds."""
        v = LedgerStore(self.db).get(self.id)
        assert v is not None  # ledgers are never deleted
        return v

    def register(self, table: CertifiedTable) -> str:
        """Record a certified table in ``gamma_tables`` under its content hash (with its privacy profile,
        so that its answers compose exactly); its id."""
        if not isinstance(table, CertifiedTable):
            raise InvalidParameter("table", "must be a CertifiedTable (darrm_opt.certify_table or load_certified)")
        stored = table_columns(table, solver="file", solve_seconds=0.0, params_key=None)
        with self.db.write() as conn:
            row = conn.execute(select(GammaTable.id, GammaTable.privacy_profile)
                               .where(GammaTable.id == table.id)).first()
            if row is None:
                conn.execute(insert(GammaTable).values(**stored, created_at=utcnow()))
            elif row.privacy_profile is None and stored["privacy_profile"] is not None:
                conn.execute(update(GammaTable).where(GammaTable.id == table.id)
                             .values(privacy_profile=stored["privacy_profile"]))
        return table.id

    def profile_of(self, table_id: str) -> Profile | None:
        """The stored privacy profile of a table (None when it has none): the ledger's exact accounting."""
        with self.db.read() as conn:
            row = conn.execute(select(GammaTable.privacy_profile).where(GammaTable.id == table_id)).first()
        if row is None or row.privacy_profile is None:
            return None
        return profile_from_dict(json.loads(row.privacy_profile))

    def pay(self, table: CertifiedTable, rows: int, *, idempotency_key: str | None = None,
            answers: Any = None, request_digest: str | None = None, units: int | None = None,
            records: Sequence[str] | None = None, record_digests: Sequence[str] | None = None,
            units_of: Callable[[int], int | None] | None = None) -> DebitResult:
        """Debit ``rows`` answers of the certified ``table``, durably, before any of them is released. Raises
        BudgetExceeded (nothing is written) when they do not fit, InvalidParameter when the table's
        teachers' setting conflicts with the ledger's cap.

        With ``idempotency_key`` the drawn, unreleased ``answers`` are stored with the spend record (under
        ``request_digest``, :func:`darrm_opt.ledger.core.request_digest`): a later debit with that key and
        digest is ``replayed`` (the stored answers, nothing charged), with another digest refused
        (InvalidParameter naming ``idempotency_key``). ``units``: how many times the table's profile is
        composed for these rows (``Mechanism.units``; None: once per row).

        ``records``: the client's record id of each row (:func:`darrm_opt.ledger.core.record_ids`), with every
        row's drawn ``answers`` and ``record_digests`` (:func:`darrm_opt.ledger.core.row_digests`): the rows
        whose record this ledger answered before get the stored answer and are not paid; the others are paid
        (``units_of`` their count, when given) and recorded with the debit (the result's ``answers`` are every
        row's, ``reanswered`` and ``changed`` name the rows given a stored answer)."""
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
            raise InvalidParameter("rows", "must be an integer >= 0", rows)
        if units is not None and (isinstance(units, bool) or not isinstance(units, int) or units < 0):
            raise InvalidParameter("units", "must be an integer >= 0", units)
        if records is not None:
            records = record_ids(records, rows)
            if answers is None or len(answers) != rows:
                raise InvalidParameter("answers", "records need every row's drawn answer")
        self.register(table)
        if self._writer is None:
            self._writer = DebitWriter(self.db, max_batch=1, profile_of=self.profile_of)
        debit = Debit.of(self.id, table, rows, idempotency_key=idempotency_key, answers=answers,
                         request_digest=request_digest, units=units, records=records,
                         record_digests=record_digests, units_of=units_of)
        try:
            result: DebitResult = self._writer.submit(debit).result()
        except SQLAlchemyError as exc:
            raise LedgerUnavailable(f"the debit failed ({type(exc).__name__}): no answer was released") from None
        if result.status == "over_budget":
            raise self._refusal(debit)
        if result.status == "setting_conflict":
            raise InvalidParameter("table", result.detail)
        if result.status == "key_conflict":
            raise InvalidParameter("idempotency_key", result.detail)
        if result.status not in ("paid", "replayed"):
            raise LedgerUnavailable(f"the debit was not paid: {result.detail or result.status}")
        return result

    def job_state(self, table: CertifiedTable) -> StoredState:
        """The private runtime state of this ledger's current job of ``table`` (:mod:`.job_state`)."""
        return JobStates(self.db).get(self.id, table.id)

    def swap_job_state(self, table: CertifiedTable, expected: int, state: str) -> bool:
        """Store the job's next state iff its version is still ``expected`` (the table is registered first)."""
        self.register(table)
        return JobStates(self.db).swap(self.id, table.id, expected, state)

    def recorded(self, record_id: str) -> Any:
        """The answer this ledger released for ``record_id`` (its ``record_answers`` row: ``answer`` encoded,
        ``table_id``, ``votes_digest``), or None when it answered none."""
        with self.db.read() as conn:
            return conn.execute(select(RecordAnswer.__table__).where(
                RecordAnswer.ledger_id == self.id, RecordAnswer.record_id == record_id)).first()

    def answered(self, record_ids: Sequence[str]) -> frozenset[str]:
        """Which of ``record_ids`` this ledger answered before (``record_answers``)."""
        return answered(self.db, self.id, record_ids)

    def records(self, key_prefix: str) -> list[Any]:
        """The ledger's spend records whose idempotency key starts with ``key_prefix`` (oldest first): each
        with ``idempotency_key``, ``table_id``, ``rows``, ``answers`` (encoded), ``request_digest``."""
        with self.db.read() as conn:
            return list(conn.execute(select(SpendRecord.__table__).where(
                SpendRecord.ledger_id == self.id, SpendRecord.idempotency_key.startswith(key_prefix, autoescape=True))
                .order_by(SpendRecord.id)).all())

    def table_row(self, table_id: str) -> Any:
        """The ``gamma_tables`` row of ``table_id`` (read back by :func:`darrm_opt.mechanisms.table_from_row`)."""
        with self.db.read() as conn:
            row = conn.execute(select(GammaTable.__table__).where(GammaTable.id == table_id)).first()
        if row is None:
            raise InvalidParameter("table", f"no table {table_id} in the ledger's database")
        return row

    def _refusal(self, d: Debit) -> BudgetExceeded:
        v = self.view()
        eb, db = v["epsilon_budget"], v["delta_budget"]
        cap = None if v["total_cap"] is None else (v["total_cap"]["epsilon"], v["total_cap"]["delta"])
        # the debit writer's decision: every valid bound, the exact composition included when every table's
        # profile is known (the ledger's profiles are read once, not per bisection step)
        counts = [(g["epsilon0"], g["delta0"], g["answers"]) for g in v["groups"]]
        parts = [(self.profile_of(g["table_id"]), g["answers"]) for g in v["groups"]]

        def with_more(n: int) -> accounting.Accounting:
            acc = accounting.account(counts + [(d.epsilon0, d.delta0, n)], db, profiles=parts + [(d.profile, n)],
                                     adaptive=True)
            return capped(acc, cap, db)

        spend = with_more(d.paid_units).spend
        binding = [name for name, over in (("epsilon", spend.epsilon > eb), ("delta", spend.delta > db)) if over]
        fits = largest_batch(lambda n: with_more(n).within(eb, db), d.paid_units)
        limits = " and ".join(f"{n} (would be {getattr(spend, n):.6g} > budget {b:.6g})"
                              for n, b in (("epsilon", eb), ("delta", db)) if n in binding)
        if fits == 0 and d.delta0 > db and not v["answers"]:
            return BudgetExceeded(
                f"ledger {self.name!r} cannot pay for any answer of table {d.table_id}: the table's δ per answer "
                f"({d.delta0:.3g}, at ε {d.epsilon0:.3g}) exceeds the ledger's whole δ budget ({db:.6g}) and no "
                f"composition brings one answer within (ε={eb:.6g}, δ={db:.6g}); use a table of smaller δ per "
                "answer (darrm-opt plan, or label, chooses one for the budget); nothing was released",
                ",".join(binding) or "delta", 0)
        return BudgetExceeded(
            f"ledger {self.name!r} cannot pay for {d.rows} answer(s): the binding limit is {limits} by "
            f"{spend.method} composition; at most {fits} answer(s) fit now; nothing was released",
            ",".join(binding), fits)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.stop()
            self._writer = None
        self.db.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
