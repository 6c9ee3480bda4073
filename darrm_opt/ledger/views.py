"""Ledgers on a database: creating them and reading their public views (the debit is
:class:`darrm_opt.ledger.writer.DebitWriter`'s).

A ledger's view states its budgets, its spend (ε at the fixed δ target, the ledger's δ budget; monotone in the
answers, see :mod:`darrm_opt.ledger.core`), the composition method that gave it and every generic method's
bound of its answers (:func:`darrm_opt.privacy.accounting.account`, capped by parallel composition for
teachers on disjoint shards, :func:`darrm_opt.privacy.parallel.capped`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import func, insert, select

from darrm_opt.privacy import accounting
from darrm_opt.privacy.parallel import capped, check_cap

from .core import LedgerRow
from .db import Database
from .schema import DEFAULT_TENANT, LedgerRecord, LedgerUsage, SpendRecord, aware, utcnow


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
    conn.execute(insert(LedgerRecord).values(
        id=ledger_id, name=name, epsilon_budget=epsilon_budget, delta_budget=delta_budget,
        answers=0, epsilon_spent=0.0, delta_spent=0.0, composition=accounting.BASIC,
        created_at=now, updated_at=now, tenant=tenant,
        **({} if cap is None else dict(zip(("cap_epsilon", "cap_delta"), check_cap(*cap)))),
    ))
    return ledger_id


def _of(tenant: str | None) -> list[Any]:
    """The condition that a ledger belongs to ``tenant`` (none for None: every tenant's, an admin's view)."""
    return [] if tenant is None else [LedgerRecord.tenant == tenant]


class LedgerStore:
    """Creating and reading ledgers (the debit is :class:`darrm_opt.ledger.writer.DebitWriter`'s). Every read
    takes the tenant whose ledgers it may see (None: every tenant's); another tenant's ledger reads as absent."""

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
            total = conn.execute(select(func.count()).select_from(LedgerRecord).where(*mine)).scalar_one()
            rows = conn.execute(select(LedgerRecord.__table__).where(*mine)
                                .order_by(LedgerRecord.created_at, LedgerRecord.id)
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
            ledger = conn.execute(
                select(LedgerRecord.__table__).where(LedgerRecord.id == ledger_id, *_of(tenant))).first()
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
            row = conn.execute(
                select(LedgerRecord.__table__).where(LedgerRecord.id == ledger_id, *_of(tenant))).first()
            if row is None:
                return None
            usage = conn.execute(
                select(LedgerUsage.__table__).where(LedgerUsage.ledger_id == ledger_id).order_by(LedgerUsage.table_id)
            ).all()
        return ledger_view(row, usage)
