"""Data-dependent ledgers on a database (table ``data_dependent_ledgers``, migration 0009).

Every change runs in one write transaction that locks the ledger's row (SQLite ``BEGIN IMMEDIATE``;
PostgreSQL ``SELECT … FOR UPDATE``), decides with :mod:`darrm_opt.ledger.dd_account` and commits: two
processes recording on one ledger serialise, and the quota holds across them. Reads return
:func:`~darrm_opt.ledger.dd_account.public_view` only: the private account in ``state`` never leaves
this module.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import insert, or_, select, text, update

from darrm_opt.errors import InvalidParameter

from .db import Database
from .dd_account import (
    DataDependentPolicy,
    DataDependentState,
    RandomBytes,
    admit,
    histograms,
    new_state,
    public_view,
    publish,
    record,
)
from .schema import DEFAULT_TENANT, DataDependentLedgerRecord, aware, utcnow

#: draws a batch's answers: (policy, histograms, student probabilities or None) → (labels, answered or None)
Draw = Callable[[DataDependentPolicy, Any, Any], tuple[Any, Any]]


def answer_digest(votes: object, student: object | None) -> str:
    """SHA-256 (hex) of an answer request's votes and student probabilities (its canonical JSON)."""
    def plain(x: object) -> object:
        return x.tolist() if hasattr(x, "tolist") else x  # numpy arrays as lists

    text = json.dumps({"votes": plain(votes), "student": plain(student)}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(b"darrm-dd-answer-v1\0" + text.encode()).hexdigest()


def _view(row: Any) -> dict[str, Any]:
    policy = DataDependentPolicy.from_json(row.policy)
    view = public_view(policy, DataDependentState.from_json(row.state))
    view.update(id=row.id, name=row.name, tenant=row.tenant, created_at=aware(row.created_at).isoformat(),
                updated_at=aware(row.updated_at).isoformat())
    return view


#: pg_advisory_xact_lock key serialising find-or-create of data-dependent ledgers by name (arbitrary, fixed)
NAME_LOCK = 7_247_301_813


def _of(tenant: str | None) -> list[Any]:
    """The condition that a ledger belongs to ``tenant`` (none for None: every tenant's, an admin's read)."""
    return [] if tenant is None else [DataDependentLedgerRecord.tenant == tenant]


class DataDependentStore:
    """Creating, recording on, publishing and reading data-dependent ledgers, each of one tenant: every
    method takes the tenant it acts for, and another tenant's ledger is absent to it (reads take None for an
    admin's view of every tenant's)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def find_or_create(self, name: str, policy: DataDependentPolicy | Mapping[str, Any] | None,
                       tenant: str = DEFAULT_TENANT) -> str:
        """The id of the data-dependent ledger called ``name`` (or with that id), created with ``policy`` if
        absent, under the write lock (two processes cannot both create it). A policy given for an existing
        ledger must equal its own: a policy cannot change."""
        p = None if policy is None else (
            policy if isinstance(policy, DataDependentPolicy) else DataDependentPolicy.from_mapping(policy))
        with self.db.write() as conn:
            if not self.db.is_sqlite:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": NAME_LOCK})
            rows = conn.execute(select(DataDependentLedgerRecord.id, DataDependentLedgerRecord.policy).where(
                or_(DataDependentLedgerRecord.id == name, DataDependentLedgerRecord.name == name), *_of(tenant))).all()
            if len(rows) > 1:
                raise InvalidParameter("ledger", f"{len(rows)} data-dependent ledgers are called {name!r}: "
                                       "give one's id")
            if rows:
                if p is not None and DataDependentPolicy.from_json(rows[0].policy) != p:
                    raise InvalidParameter("policy", f"ledger {name!r} exists with another policy; a policy cannot "
                                           "change", p.to_json())
                return str(rows[0].id)
            if p is None:
                raise InvalidParameter("ledger", f"no data-dependent ledger {name!r}: give a policy to create it")
            return self._insert(conn, name, p, tenant)

    @staticmethod
    def _insert(conn: Any, name: str, p: DataDependentPolicy, tenant: str) -> str:
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise InvalidParameter("name", "must be a non-empty string of at most 200 characters", name)
        ledger_id = uuid.uuid4().hex
        now = utcnow()
        conn.execute(insert(DataDependentLedgerRecord).values(
            id=ledger_id, name=name, policy=p.to_json(), queries=0, answered=0,
            state=new_state(p).to_json(), published_epsilon=None, created_at=now, updated_at=now, tenant=tenant))
        return ledger_id

    def create(self, name: str, policy: DataDependentPolicy | Mapping[str, Any],
               tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
        """A new data-dependent ledger of ``tenant``; its public view."""
        p = policy if isinstance(policy, DataDependentPolicy) else DataDependentPolicy.from_mapping(policy)
        with self.db.write() as conn:
            ledger_id = self._insert(conn, name, p, tenant)
        return self.get(ledger_id, tenant)  # type: ignore[return-value]

    def get(self, ledger_id: str, tenant: str | None = DEFAULT_TENANT) -> dict[str, Any] | None:
        """The public view of a ledger of ``tenant`` (None: of any tenant), or None."""
        with self.db.read() as conn:
            row = conn.execute(select(DataDependentLedgerRecord).where(DataDependentLedgerRecord.id == ledger_id,
                                                                 *_of(tenant))).first()
        return None if row is None else _view(row)

    def _change(self, ledger_id: str, change, tenant: str) -> dict[str, Any] | None:  # noqa: ANN001
        with self.db.write() as conn:
            q = select(DataDependentLedgerRecord).where(DataDependentLedgerRecord.id == ledger_id, *_of(tenant))
            if not self.db.is_sqlite:
                q = q.with_for_update()
            row = conn.execute(q).first()
            if row is None:
                return None
            policy = DataDependentPolicy.from_json(row.policy)
            state = change(policy, DataDependentState.from_json(row.state))
            conn.execute(update(DataDependentLedgerRecord).where(DataDependentLedgerRecord.id == ledger_id).values(
                queries=state.queries, answered=state.answered, state=state.to_json(),
                published_epsilon=state.published, updated_at=utcnow()))
        return self.get(ledger_id, tenant)

    def record(self, ledger_id: str, votes: object, answered: Sequence[bool] | None = None,
               tenant: str = DEFAULT_TENANT, student: object | None = None) -> dict[str, Any] | None:
        """Add the queries ``votes`` (and, for Confident-/Interactive-GNMax, which were answered; for
        Interactive-GNMax optionally the student's probabilities) to a ledger of ``tenant``; the public view,
        or None for an unknown ledger (or another tenant's). BudgetExceeded beyond the quota or once sealed
        (nothing is written)."""
        return self._change(ledger_id, lambda p, s: record(p, s, votes, answered, student), tenant)

    def answer(self, ledger_id: str, votes: object, draw: Draw, student: object | None = None,
               tenant: str = DEFAULT_TENANT, idempotency_key: str | None = None) -> dict[str, Any] | None:
        """Draw the answers to ``votes`` and account them in one transaction on a ledger of ``tenant``:
        admission first (quota, seal: BudgetExceeded before any draw), then ``draw(policy, votes, student)``
        → (labels, answered or None), then :func:`record` of that outcome (discrete noise). The public
        view with ``answers`` (−1: ⊥) and ``replayed``, or None for an unknown ledger. Nothing is written or
        answered on an error.

        With ``idempotency_key``: a key among the ledger's last KEPT_KEYS keyed requests, sent again with the
        same votes and student, returns that request's answers and records nothing (``replayed``); with
        another request it is InvalidParameter naming ``idempotency_key``."""
        out: dict[str, Any] = {"replayed": False}
        digest = None if idempotency_key is None else answer_digest(votes, student)

        def change(p: DataDependentPolicy, s: DataDependentState) -> DataDependentState:
            if idempotency_key is not None:
                kept = s.answers_of(idempotency_key)
                if kept is not None:
                    if kept[0] != digest:
                        raise InvalidParameter("idempotency_key", "was already used on this ledger for a different "
                                               "request; nothing was recorded or answered")
                    out.update(answers=list(kept[1]), replayed=True)
                    return s
            v = histograms(p, votes)
            admit(p, s, v.shape[0])
            labels, answered = draw(p, v, student)
            out["answers"] = [int(x) for x in labels]
            s = record(p, s, v, None if answered is None else [bool(a) for a in answered], student)
            if idempotency_key is not None and digest is not None:
                s = s.keep(idempotency_key, digest, tuple(out["answers"]))
            return s

        view = self._change(ledger_id, change, tenant)
        return None if view is None else {**view, "answers": out["answers"], "replayed": out["replayed"]}

    def publish(self, ledger_id: str, random_bytes: RandomBytes, tenant: str = DEFAULT_TENANT) -> dict[str, Any] | None:
        """Publish the sanitised ε (once) and seal a ledger of ``tenant``; its public view."""
        return self._change(ledger_id, lambda p, s: publish(p, s, random_bytes), tenant)
