"""Data-dependent ledgers on a database (table ``data_dependent_ledgers``, migration 0009).

Every change runs in one write transaction that locks the ledger's row (SQLite ``BEGIN IMMEDIATE``;
PostgreSQL ``SELECT … FOR UPDATE``), decides with :mod:`darrm_opt.ledger.data_dependent` and commits: two
processes recording on one ledger serialise, and the quota holds across them. Reads return
:func:`~darrm_opt.ledger.data_dependent.public_view` only: the private account in ``state`` never leaves
this module.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import insert, or_, select, text, update

from darrm_opt.errors import InvalidParameter

from .data_dependent import (
    DataDependentPolicy,
    DataDependentState,
    RandomBytes,
    new_state,
    public_view,
    publish,
    record,
)
from .db import Database
from .schema import DataDependentLedger, aware, utcnow


def _view(row: Any) -> dict[str, Any]:
    policy = DataDependentPolicy.from_json(row.policy)
    view = public_view(policy, DataDependentState.from_json(row.state))
    view.update(id=row.id, name=row.name, created_at=aware(row.created_at).isoformat(),
                updated_at=aware(row.updated_at).isoformat())
    return view


#: pg_advisory_xact_lock key serialising find-or-create of data-dependent ledgers by name (arbitrary, fixed)
NAME_LOCK = 7_247_301_813


class DataDependentStore:
    """Creating, recording on, publishing and reading data-dependent ledgers."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def find_or_create(self, name: str, policy: DataDependentPolicy | Mapping[str, Any] | None) -> str:
        """The id of the data-dependent ledger called ``name`` (or with that id), created with ``policy`` if
        absent, under the write lock (two processes cannot both create it). A policy given for an existing
        ledger must equal its own: a policy cannot change."""
        p = None if policy is None else (
            policy if isinstance(policy, DataDependentPolicy) else DataDependentPolicy.from_mapping(policy))
        with self.db.write() as conn:
            if not self.db.is_sqlite:
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": NAME_LOCK})
            rows = conn.execute(select(DataDependentLedger.id, DataDependentLedger.policy).where(
                or_(DataDependentLedger.id == name, DataDependentLedger.name == name))).all()
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
            return self._insert(conn, name, p)

    @staticmethod
    def _insert(conn: Any, name: str, p: DataDependentPolicy) -> str:
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise InvalidParameter("name", "must be a non-empty string of at most 200 characters", name)
        ledger_id = uuid.uuid4().hex
        now = utcnow()
        conn.execute(insert(DataDependentLedger).values(
            id=ledger_id, name=name, policy=p.to_json(), queries=0, answered=0,
            state=new_state(p).to_json(), published_epsilon=None, created_at=now, updated_at=now))
        return ledger_id

    def create(self, name: str, policy: DataDependentPolicy | Mapping[str, Any]) -> dict[str, Any]:
        """A new data-dependent ledger; its public view."""
        p = policy if isinstance(policy, DataDependentPolicy) else DataDependentPolicy.from_mapping(policy)
        with self.db.write() as conn:
            ledger_id = self._insert(conn, name, p)
        return self.get(ledger_id)  # type: ignore[return-value]

    def get(self, ledger_id: str) -> dict[str, Any] | None:
        with self.db.read() as conn:
            row = conn.execute(select(DataDependentLedger).where(DataDependentLedger.id == ledger_id)).first()
        return None if row is None else _view(row)

    def _change(self, ledger_id: str, change) -> dict[str, Any] | None:  # noqa: ANN001
        with self.db.write() as conn:
            q = select(DataDependentLedger).where(DataDependentLedger.id == ledger_id)
            if not self.db.is_sqlite:
                q = q.with_for_update()
            row = conn.execute(q).first()
            if row is None:
                return None
            policy = DataDependentPolicy.from_json(row.policy)
            state = change(policy, DataDependentState.from_json(row.state))
            conn.execute(update(DataDependentLedger).where(DataDependentLedger.id == ledger_id).values(
                queries=state.queries, answered=state.answered, state=state.to_json(),
                published_epsilon=state.published, updated_at=utcnow()))
        return self.get(ledger_id)

    def record(self, ledger_id: str, votes: object, answered: Sequence[bool] | None = None) -> dict[str, Any] | None:
        """Add the queries ``votes`` (and, for Confident-GNMax, which were answered); the public view, or None
        for an unknown ledger. BudgetExceeded beyond the quota or once sealed (nothing is written)."""
        return self._change(ledger_id, lambda p, s: record(p, s, votes, answered))

    def publish(self, ledger_id: str, random_bytes: RandomBytes) -> dict[str, Any] | None:
        """Publish the sanitised ε (once) and seal the ledger; its public view."""
        return self._change(ledger_id, lambda p, s: publish(p, s, random_bytes))
