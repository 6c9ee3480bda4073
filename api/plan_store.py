"""Plans in the database (``plans``, migration 0013): any process answers a plan, one process runs it.

:class:`PlanStore` is the seam between the plan service (what a plan computes) and how its state is kept: a
row per plan id with the request that rebuilds its work (``request``, JSON), its status (``queued``,
``running``, ``done``, ``failed``), progress, result or error, the planned table's id and the last ledger
opened with it. The process that claims a plan holds a lease on its row (:mod:`darrm_opt.ledger.leases`:
``owner`` and ``updated_at``, renewed every ``HEARTBEAT_S`` while it runs); a claim not renewed for
``STALE_S`` seconds (its process died) is taken over by the next process that reads or posts the plan.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from darrm_opt.ledger.db import Database
from darrm_opt.ledger.leases import STALE_S, Heartbeat, fresh
from darrm_opt.ledger.schema import PlanRecord, utcnow

from .repositories import OWNER

log = logging.getLogger("darrm.api.plans")

UNFINISHED = ("queued", "running")


@dataclass(frozen=True)
class PlanRow:
    """A plan as stored: status, progress, its document or error, and the rest of its row."""

    id: str
    request: dict[str, Any]
    status: str
    progress: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    table_id: str | None
    ledger_id: str | None
    ledger_tenant: str | None
    owner: str
    live: bool  #: unfinished and its lease fresh (its process is alive)

    @classmethod
    def of(cls, row: Any, stale_s: float) -> PlanRow:
        return cls(id=row.id, request=json.loads(row.request), status=row.status,
                   progress=json.loads(row.progress or "{}"),
                   result=None if row.result is None else json.loads(row.result), error=row.error,
                   table_id=row.table_id, ledger_id=row.ledger_id, ledger_tenant=row.ledger_tenant,
                   owner=row.owner,
                   live=row.status in UNFINISHED and fresh(row.updated_at, utcnow(), stale_s))


Claim = Literal["claimed", "foreign", "done"]


class PlanStore:
    """The ``plans`` rows of ``db`` (module doc)."""

    def __init__(self, db: Database, *, stale_s: float = STALE_S) -> None:
        self.db = db
        self.stale_s = stale_s
        self.leases = Heartbeat(self._renew, name="darrm-plan-leases")

    def _renew(self, held: list[str]) -> None:
        with self.db.write() as conn:
            conn.execute(update(PlanRecord).where(PlanRecord.id.in_(held), PlanRecord.owner == OWNER,
                                                  PlanRecord.status.in_(UNFINISHED)).values(updated_at=utcnow()))

    def get(self, key: str) -> PlanRow | None:
        with self.db.read() as conn:
            row = conn.execute(select(PlanRecord.__table__).where(PlanRecord.id == key)).first()
        return None if row is None else PlanRow.of(row, self.stale_s)

    def claim(self, key: str, request: dict[str, Any], *, retry_failed: bool = True) -> tuple[Claim, PlanRow | None]:
        """Claim plan ``key`` for this process: 'claimed' (new, failed before and ``retry_failed``, or its lease
        stale), 'done' (with its row) or 'foreign' (another live process runs it, or it failed and not
        ``retry_failed``; with its row). A claimed plan is held (renewed) until :meth:`finish` or :meth:`fail`."""
        now = utcnow()
        values = {"request": json.dumps(request, sort_keys=True), "status": "queued", "progress": "{}",
                  "result": None, "error": None, "table_id": None, "owner": OWNER, "updated_at": now}
        for _attempt in range(3):
            try:
                with self.db.write() as conn:
                    row = conn.execute(select(PlanRecord.__table__).where(PlanRecord.id == key)
                                       .with_for_update()).first()
                    if row is None:
                        conn.execute(insert(PlanRecord).values(id=key, created_at=now, attempts=1, **values))
                    else:
                        seen = PlanRow.of(row, self.stale_s)
                        if seen.status == "done":
                            return "done", seen
                        if seen.live or (seen.status == "failed" and not retry_failed):
                            return "foreign", seen
                        conn.execute(update(PlanRecord).where(PlanRecord.id == key)
                                     .values(attempts=PlanRecord.attempts + 1, **values))
                self.leases.hold(key)
                return "claimed", None
            except IntegrityError:  # another process inserted the row first: look again
                continue
        return "foreign", self.get(key)

    def report(self, key: str, **values: Any) -> None:
        """Record a held plan's status or progress (best effort: the plan goes on if the database refuses)."""
        if "progress" in values:
            values["progress"] = json.dumps(values["progress"])
        try:
            with self.db.write() as conn:
                conn.execute(update(PlanRecord).where(PlanRecord.id == key, PlanRecord.owner == OWNER)
                             .values(**values, updated_at=utcnow()))
        except SQLAlchemyError as exc:
            log.warning("progress of plan %s not recorded (%s)", key, type(exc).__name__)

    def finish(self, key: str, doc: dict[str, Any], table_id: str | None) -> None:
        """Store a plan's document (done), whoever holds it now, and let its lease go."""
        try:
            self._end(key, status="done", result=json.dumps(doc), error=None, table_id=table_id)
        finally:
            self.leases.release(key)

    def fail(self, key: str, error: str) -> None:
        """Record a plan's error (failed) unless it is done, and let its lease go."""
        try:
            self._end(key, status="failed", error=error[:4000], only_unfinished=True)
        finally:
            self.leases.release(key)

    def _end(self, key: str, *, only_unfinished: bool = False, **values: Any) -> None:
        cond = [PlanRecord.id == key]
        if only_unfinished:
            cond.append(PlanRecord.status.in_(UNFINISHED))
        with self.db.write() as conn:
            conn.execute(update(PlanRecord).where(*cond).values(**values, progress="{}", updated_at=utcnow()))

    def remember(self, key: str, request: dict[str, Any], doc: dict[str, Any]) -> None:
        """Store a plan decided without a search (done at once)."""
        now = utcnow()
        values = {"request": json.dumps(request, sort_keys=True), "status": "done", "progress": "{}",
                  "result": json.dumps(doc), "error": None, "owner": OWNER, "updated_at": now}
        try:
            with self.db.write() as conn:
                if not conn.execute(update(PlanRecord).where(PlanRecord.id == key).values(**values)).rowcount:
                    conn.execute(insert(PlanRecord).values(id=key, created_at=now, **values))
        except IntegrityError:  # stored by another process at the same moment: the same document
            pass

    def set_ledger(self, key: str, ledger_id: str, tenant: str) -> None:
        """Name the ledger just opened with plan ``key`` (the last one opened is named)."""
        with self.db.write() as conn:
            conn.execute(update(PlanRecord).where(PlanRecord.id == key)
                         .values(ledger_id=ledger_id, ledger_tenant=tenant))
