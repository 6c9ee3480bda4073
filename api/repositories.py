"""The service's database access for tables and solve jobs (the ledgers' is :mod:`darrm_opt.ledger.views`
and :mod:`darrm_opt.ledger.writer`).

:class:`TableRepository` reads and writes ``gamma_tables`` rows (by content id, by the parameters' key, in
lists); :class:`JobCoordinator` owns the ``solve_jobs`` rows through which server processes share one solve
of a parameter set: a claim per parameters' key under a heartbeated lease (:mod:`darrm_opt.ledger.leases`:
renewed every ``HEARTBEAT_S`` while this process solves it), progress reports, and takeover of a claim not
renewed for ``stale_s`` seconds (``STALE_S`` by default: its process died).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError

from darrm_opt.ledger.db import Database
from darrm_opt.ledger.leases import STALE_S, Heartbeat
from darrm_opt.ledger.schema import GammaTable, SolveJob, aware, utcnow

log = logging.getLogger("darrm.api.repositories")

#: identifies this process as the owner of the solve jobs it claims
OWNER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class TableRepository:
    """``gamma_tables`` rows."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def by_id(self, table_id: str) -> Any:
        with self.db.read() as conn:
            return conn.execute(select(GammaTable.__table__).where(GammaTable.id == table_id)).first()

    def by_params_key(self, key: str) -> Any:
        with self.db.read() as conn:
            return conn.execute(select(GammaTable.__table__).where(GammaTable.params_key == key)).first()

    def page(self, filters: dict[str, Any], limit: int, offset: int) -> tuple[list[Any], int]:
        """Rows whose columns equal the non-None ``filters`` (oldest first) and how many there are."""
        conds = [getattr(GammaTable, name) == value for name, value in filters.items() if value is not None]
        with self.db.read() as conn:
            total = conn.execute(select(func.count()).select_from(GammaTable).where(*conds)).scalar_one()
            rows = conn.execute(
                select(GammaTable.__table__).where(*conds).order_by(GammaTable.created_at, GammaTable.id)
                .limit(limit).offset(offset)
            ).all()
        return list(rows), int(total)

    def insert(self, columns: dict[str, Any], done_job: str | None = None) -> None:
        """Insert a table's row unless a row with its id exists; with ``columns["params_key"]``, make it the
        solve of those parameters unless another table already is (then it is stored without the key);
        ``done_job``: mark that solve job done in the same transaction."""
        columns = dict(columns)
        with self.db.write() as conn:
            key = columns.get("params_key")
            if key is not None and conn.execute(
                    select(GammaTable.id).where(GammaTable.params_key == key)).first() is not None:
                columns["params_key"] = None
            exists = conn.execute(select(GammaTable.id, GammaTable.params_key)
                                  .where(GammaTable.id == columns["id"])).first()
            if exists is None:
                conn.execute(insert(GammaTable).values(**columns, created_at=utcnow()))
            elif exists.params_key is None and columns["params_key"] is not None:
                conn.execute(update(GammaTable).where(GammaTable.id == columns["id"])
                             .values(params_key=columns["params_key"]))
            if done_job is not None:
                conn.execute(update(SolveJob).where(SolveJob.id == done_job)
                             .values(status="done", stage="done", progress="{}", error=None, updated_at=utcnow()))


class JobCoordinator:
    """``solve_jobs`` rows: which process solves a parameter set, and how far it got."""

    def __init__(self, db: Database, stale_s: float = STALE_S) -> None:
        self.db = db
        self.stale_s = stale_s
        self.leases = Heartbeat(self._renew, name="darrm-job-leases")

    def _renew(self, held: list[str]) -> None:
        with self.db.write() as conn:
            conn.execute(update(SolveJob).where(SolveJob.id.in_(held), SolveJob.owner == OWNER,
                                                SolveJob.status.in_(("queued", "running")))
                         .values(updated_at=utcnow()))

    def release(self, key: str) -> None:
        """Stop renewing the claim of ``key`` (its solve ended)."""
        self.leases.release(key)

    def claim(self, key: str, canonical: dict, solver: str) -> str:
        """Claim the solve of ``key`` for this process: 'claimed' (held, renewed until :meth:`release`),
        'foreign' (live elsewhere) or 'done'."""
        now = utcnow()
        values = {"params": json.dumps(canonical), "solver": solver, "status": "queued", "stage": "queued",
                  "progress": "{}", "error": None, "owner": OWNER, "updated_at": now}
        for _attempt in range(3):
            try:
                with self.db.write() as conn:
                    row = conn.execute(
                        select(SolveJob.__table__).where(SolveJob.id == key).with_for_update()
                    ).first()
                    if row is not None:
                        if row.status == "done":
                            return "done"
                        fresh = (now - aware(row.updated_at)).total_seconds() < self.stale_s
                        if row.status in ("queued", "running") and row.owner != OWNER and fresh:
                            return "foreign"
                        conn.execute(update(SolveJob).where(SolveJob.id == key).values(**values))
                    else:
                        conn.execute(insert(SolveJob).values(id=key, created_at=now, **values))
                self.leases.hold(key)
                return "claimed"
            except IntegrityError:  # another process inserted the row first: look again
                continue
        return "foreign"

    def report(self, key: str, **values: Any) -> None:
        """Record a job's status or progress (best effort: the solve goes on if the database refuses)."""
        values["updated_at"] = utcnow()
        try:
            with self.db.write() as conn:
                conn.execute(update(SolveJob).where(SolveJob.id == key).values(**values))
        except Exception:  # noqa: BLE001 - progress reports are best effort; the solve goes on
            log.warning("could not record progress of job %s", key, exc_info=True)

    def row(self, key: str) -> Any:
        with self.db.read() as conn:
            return conn.execute(select(SolveJob.__table__).where(SolveJob.id == key)).first()

    def state(self, key: str, live_progress: dict[str, Any] | None
              ) -> tuple[str, str, dict[str, Any], str | None] | None:
        """(status, stage, progress, error) of an unfinished job as clients see it ('stale' when a foreign
        owner stopped reporting); None if unknown."""
        row = self.row(key)
        if row is None:
            return None
        status, stage, error = row.status, row.stage, row.error
        progress = live_progress or json.loads(row.progress or "{}")
        if status in ("queued", "running"):
            age = (utcnow() - aware(row.updated_at)).total_seconds()
            if age >= self.stale_s and row.owner != OWNER:
                status, error = "stale", "the process solving this table stopped reporting; POST again"
        return status, stage, progress, error
