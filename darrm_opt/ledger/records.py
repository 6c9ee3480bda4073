"""The answers a ledger released per client record id (``record_answers``, migration 0014): read here; written
only by the debit writer, in the transaction of the debit that paid them (:mod:`darrm_opt.ledger.core`)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from .db import Database
from .schema import RecordAnswer

#: record ids read per query (within every database's limit on bound parameters)
CHUNK = 500


def answered(db: Database, ledger_id: str, record_ids: Sequence[str]) -> frozenset[str]:
    """Which of ``record_ids`` the ledger ``ledger_id`` answered before. The caller has checked that the ledger
    is its tenant's (the service: a debit of no rows, decided with the tenant, first)."""
    listed, out = sorted(set(record_ids)), set[str]()
    with db.read() as conn:
        for lo in range(0, len(listed), CHUNK):
            out.update(conn.execute(select(RecordAnswer.record_id).where(
                RecordAnswer.ledger_id == ledger_id, RecordAnswer.record_id.in_(listed[lo:lo + CHUNK]))).scalars())
    return frozenset(out)
