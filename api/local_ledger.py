"""A privacy ledger used from Python or the CLI without a server, through the service's own code.

:class:`Ledger` opens a database (a SQLite file by default, created and migrated on first use, or the
service's PostgreSQL), finds or creates a ledger by name and pays for batches of answers with the
service's :class:`api.ledger.DebitWriter`: one transaction that locks the ledger, composes its spend with
:func:`darrm_opt.privacy.accounting.account` and commits durably (SQLite ``synchronous=FULL``) before
:meth:`Ledger.pay` returns. A batch that does not fit is refused whole: nothing is written and
:class:`darrm_opt.errors.BudgetExceeded` names the binding limit (ε or δ) and the largest batch that fits.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from sqlalchemy import insert, or_, select, text, update
from sqlalchemy.exc import SQLAlchemyError

from darrm_opt.errors import BudgetExceeded, DarrmError, InvalidParameter
from darrm_opt.model.multiclass import MulticlassParams
from darrm_opt.model.neighbours import PateParams
from darrm_opt.model.params import Params
from darrm_opt.privacy import accounting

from .db import Database, migrate
from .ledger import Debit, DebitResult, DebitWriter, LedgerStore
from .models import GammaTable, utcnow
from .models import Ledger as LedgerRow

#: pg_advisory_xact_lock key serialising find-or-create by name (arbitrary, fixed)
NAME_LOCK = 7_247_301_812
DEFAULT_URL = "sqlite:///darrm.db"


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
    lo, hi = 0, upper
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def per_answer(params: Params | PateParams | MulticlassParams) -> tuple[float, float]:
    """(ε₀, δ₀) of one answer: (mε, δ) for a shared-data table, the stated (ε, δ) for a PATE-setting one."""
    if isinstance(params, (MulticlassParams, PateParams)):
        return params.epsilon, params.delta
    return params.m * params.epsilon, float(params.delta or 0.0)


def table_columns(params: Params | PateParams | MulticlassParams, gamma: Any, certificate: Any) -> dict[str, Any]:
    """The ``gamma_tables`` parameter columns and expected error of a table certified for ``params``
    (InvalidParameter otherwise). A multi-class table: ``classes`` = C, ``epsilon`` = its per-answer ε,
    m = 1, teacher_delta = 0 (the per-answer cost mε is then its ε)."""
    g = np.asarray(gamma, dtype=np.float64)
    if isinstance(params, MulticlassParams):
        from darrm_opt.model.multiclass import expected_error as mc_error

        if not getattr(certificate, "certified", False) or getattr(certificate, "delta", None) != params.delta:
            raise InvalidParameter("table", "only a table certified for its parameters can be paid for")
        return {"K": params.K, "m": 1.0, "epsilon": params.epsilon, "teacher_delta": 0.0, "delta": params.delta,
                "prior": params.prior.spec, "classes": params.C, "teachers": "disjoint-nonprivate",
                "expected_error": float(mc_error(g, params.K, params.C, params.prior))}
    from darrm_opt.model.objective import expected_error

    if not certificate.certified or certificate.bound != params.bound:
        raise InvalidParameter("table", "only a table certified for its parameters can be paid for")
    if isinstance(params, PateParams):  # stored as the service stores it (m = 1, teacher_delta = 0: 0006)
        return {"K": params.K, "m": 1.0, "epsilon": params.epsilon, "teacher_delta": 0.0, "delta": params.delta,
                "prior": params.prior.spec, "teachers": "disjoint-nonprivate",
                "expected_error": float(expected_error(g, params.prior))}
    return {"K": params.K, "m": params.m, "epsilon": params.epsilon, "teacher_delta": params.teacher_delta,
            "delta": params.delta, "prior": params.prior.spec,
            "expected_error": float(expected_error(g, params.prior))}


class Ledger:
    """A durable (ε, δ) budget on a database, paid exactly as the service pays ``POST /v1/aggregate``."""

    def __init__(self, url: str | None, name: str, *, epsilon_budget: float | None = None,
                 delta_budget: float | None = None) -> None:
        if not name or len(name) > 200:
            raise InvalidParameter("ledger", "must be a name of 1 to 200 characters", name)
        try:
            self.db = Database(database_url(url))
        except ValueError as exc:
            raise InvalidParameter("ledger-db", str(exc)) from None
        try:
            migrate(self.db)
            self.id = self._find_or_create(name, epsilon_budget, delta_budget)
        except SQLAlchemyError as exc:
            self.db.dispose()
            raise LedgerUnavailable(f"cannot use the ledger database {self.db.description}: "
                                    f"{type(exc).__name__}: {exc.orig if hasattr(exc, 'orig') else exc}") from None
        except BaseException:
            self.db.dispose()
            raise
        self.name = name
        self._writer: DebitWriter | None = None

    def _find_or_create(self, name: str, epsilon_budget: float | None, delta_budget: float | None) -> str:
        """The id of the ledger called ``name`` (or with that id); created with the budgets if absent,
        under the database's write lock so that two processes cannot both create it."""
        with self.db.write() as conn:
            if not self.db.is_sqlite:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": NAME_LOCK})
            rows = conn.execute(select(LedgerRow.__table__).where(
                or_(LedgerRow.id == name, LedgerRow.name == name))).all()
            if len(rows) > 1:
                raise InvalidParameter("ledger", f"{len(rows)} ledgers are called {name!r}: give one's id")
            if rows:
                row = rows[0]
                for label, given, have in (("epsilon-budget", epsilon_budget, row.epsilon_budget),
                                           ("delta-budget", delta_budget, row.delta_budget)):
                    if given is not None and given != have:
                        raise InvalidParameter(label, f"ledger {name!r} already exists with budget {have:g}; "
                                               "a budget cannot change", given)
                return str(row.id)
            if epsilon_budget is None or delta_budget is None:
                raise InvalidParameter("ledger", f"no ledger {name!r} in this database: give --epsilon-budget "
                                       "and --delta-budget to create it")
            if not (math.isfinite(epsilon_budget) and epsilon_budget > 0):
                raise InvalidParameter("epsilon-budget", "must be a finite number > 0", epsilon_budget)
            if not (0 <= delta_budget < 1):
                raise InvalidParameter("delta-budget", "must satisfy 0 <= delta < 1", delta_budget)
            now = utcnow()
            ledger_id = uuid.uuid4().hex
            conn.execute(insert(LedgerRow).values(
                id=ledger_id, name=name, epsilon_budget=epsilon_budget, delta_budget=delta_budget, answers=0,
                epsilon_spent=0.0, delta_spent=0.0, composition=accounting.BASIC, created_at=now, updated_at=now))
            return ledger_id

    def view(self) -> dict[str, Any]:
        """Budgets, spend (the composition used and every method's bound) and what remains."""
        v = LedgerStore(self.db, profile_of=self.profile_of).get(self.id)
        assert v is not None  # ledgers are never deleted
        v["epsilon_remaining"] = max(v["epsilon_budget"] - v["epsilon_spent"], 0.0)
        v["delta_remaining"] = max(v["delta_budget"] - v["delta_spent"], 0.0)
        return v

    def register(self, params: Params | PateParams | MulticlassParams, gamma: Any, certificate: Any,
                 profile: Any = None) -> str:
        """Record a certified table in ``gamma_tables`` (its id is ``params.key()``, as in the service), with
        its certified privacy profile when given (then its answers compose exactly, as in the service).
        A multi-class table (``MulticlassParams`` with its ``MulticlassCertificate``) is stored as the service
        stores it (``classes`` = C, ``epsilon`` its per-answer ε, m = 1)."""
        key = params.key()
        stored = None if profile is None else json.dumps(profile.to_dict())
        with self.db.write() as conn:
            row = conn.execute(select(GammaTable.id, GammaTable.privacy_profile).where(GammaTable.id == key)).first()
            if row is not None and row.privacy_profile is None and stored is not None:
                conn.execute(update(GammaTable).where(GammaTable.id == key).values(privacy_profile=stored))
            if row is None:
                conn.execute(insert(GammaTable).values(
                    id=key, **table_columns(params, gamma, certificate), solver="file",
                    gamma=json.dumps([float(x) for x in gamma]), certificate=json.dumps(certificate.to_dict()),
                    solve_seconds=0.0, created_at=utcnow(), privacy_profile=stored))
        return key

    def profile_of(self, table_id: str) -> Any:
        """The stored privacy profile of a table (None when it has none): the ledger's exact accounting."""
        from darrm_opt.privacy.profile import PrivacyProfile

        with self.db.read() as conn:
            row = conn.execute(select(GammaTable.privacy_profile).where(GammaTable.id == table_id)).first()
        if row is None or row.privacy_profile is None:
            return None
        return PrivacyProfile.from_dict(json.loads(row.privacy_profile))

    def pay(self, params: Params | PateParams | MulticlassParams, gamma: Any, certificate: Any, answers: np.ndarray,
            profile: Any = None) -> DebitResult:
        """Debit ``len(answers)`` answers of the certified table (``params``, ``gamma``), each (mε, δ)-DP,
        durably, before the answers may be released. With the table's certified ``profile``
        (:func:`darrm_opt.privacy.profile.profile_and_certificate`) the spend includes the exact composition,
        as in the service. Raises BudgetExceeded (nothing is written) when the batch does not fit."""
        table_id = self.register(params, gamma, certificate, profile)
        if self._writer is None:
            self._writer = DebitWriter(self.db, max_batch=1, profile_of=self.profile_of)
        epsilon0, delta0 = per_answer(params)
        debit = Debit(self.id, table_id, epsilon0, delta0, np.asarray(answers), profile=profile)
        try:
            result: DebitResult = self._writer.submit(debit).result()
        except SQLAlchemyError as exc:
            raise LedgerUnavailable(f"the debit failed ({type(exc).__name__}): no answer was released") from None
        if result.status == "over_budget":
            raise self._refusal(debit)
        if result.status != "paid":
            raise LedgerUnavailable(f"the debit was not paid: {result.detail or result.status}")
        return result

    def _refusal(self, d: Debit) -> BudgetExceeded:
        v = self.view()
        eb, db = v["epsilon_budget"], v["delta_budget"]
        # the debit writer's decision: every valid bound, the exact composition included when every table's
        # profile is known (the ledger's profiles are read once, not per bisection step)
        counts = [(g["epsilon0"], g["delta0"], g["answers"]) for g in v["groups"]]
        parts = [(self.profile_of(g["table_id"]), g["answers"]) for g in v["groups"]]

        def with_more(n: int) -> accounting.Accounting:
            return accounting.account(counts + [(d.epsilon0, d.delta0, n)], db, profiles=parts + [(d.profile, n)])

        spend = with_more(d.rows).spend
        binding = [name for name, over in (("epsilon", spend.epsilon > eb), ("delta", spend.delta > db)) if over]
        fits = largest_batch(lambda n: with_more(n).within(eb, db), d.rows)
        limits = " and ".join(f"{n} (would be {getattr(spend, n):.6g} > budget {b:.6g})"
                              for n, b in (("epsilon", eb), ("delta", db)) if n in binding)
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
