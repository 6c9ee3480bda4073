"""Labelling jobs on the ledger's database (``label_jobs``, migration 0012): the service's ``/v1/jobs``.

A job is a tenant's name, its plan inputs (``request``, canonical JSON), the ledger that pays its answers
(created with the job's budget, named as the job) and its table once planned. Its answers stay where every
paid answer is, in the ledger: each record's label in ``record_answers`` (a record sent again gets it at no
cost), beside the spend record of the batch that paid it. A job survives a restart: a job without a table is
planned again from ``request``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import insert, select, update

from darrm_opt.errors import InvalidParameter

from .db import Database
from .schema import LabelJobRecord, aware, utcnow
from .views import insert_ledger


def _doc(row: Any) -> dict[str, Any]:
    return {"id": row.id, "tenant": row.tenant, "name": row.name, "request": json.loads(row.request),
            "ledger_id": row.ledger_id, "table_id": row.table_id, "error": row.error,
            "created_at": aware(row.created_at)}


class LabelJobStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def open(self, tenant: str, name: str, request: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """(the job, created): the tenant's job called ``name``, created with its ledger (the budget
        ``request['budget']``) when absent; one with other inputs is refused (InvalidParameter naming
        ``name``)."""
        text = json.dumps(request, sort_keys=True, separators=(",", ":"))
        with self.db.write() as conn:
            row = conn.execute(select(LabelJobRecord.__table__).where(
                LabelJobRecord.tenant == tenant, LabelJobRecord.name == name)).first()
            if row is not None:
                if row.request != text:
                    raise InvalidParameter("name", f"job {name!r} exists with other inputs "
                                           f"({row.request}); another job needs another name")
                return _doc(row), False
            eps, delta = request["budget"]
            ledger_id = insert_ledger(conn, name, eps, delta, tenant=tenant)
            job_id = uuid.uuid4().hex
            conn.execute(insert(LabelJobRecord).values(id=job_id, tenant=tenant, name=name, request=text,
                                                       ledger_id=ledger_id, created_at=utcnow()))
            row = conn.execute(select(LabelJobRecord.__table__).where(LabelJobRecord.id == job_id)).one()
        return _doc(row), True

    def get(self, job_id: str, tenant: str | None) -> dict[str, Any] | None:
        """The job, or None when there is none with that id that ``tenant`` may read (None: every tenant)."""
        query = select(LabelJobRecord.__table__).where(LabelJobRecord.id == job_id)
        if tenant is not None:
            query = query.where(LabelJobRecord.tenant == tenant)
        with self.db.read() as conn:
            row = conn.execute(query).first()
        return None if row is None else _doc(row)

    def planned(self, job_id: str, table_id: str | None, error: str | None = None) -> None:
        """Record the job's planned table (or why planning failed)."""
        with self.db.write() as conn:
            conn.execute(update(LabelJobRecord).where(LabelJobRecord.id == job_id)
                         .values(table_id=table_id, error=error))
