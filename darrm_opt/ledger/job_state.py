"""The runtime state of jobs a ledger runs across calls, kept durably (``job_states``, migration 0011).

A kind whose one privacy statement covers a job of several answers asked over several calls (the
stability-based release: its sparse-vector test's threshold noise ρ and count of unstable answers) keeps the
job's state here, per ledger and table, as the kind's own text. The state is private (ρ must never be shown):
nothing here serves it, and no view reads this table. Every update is a compare and swap on ``version``, so
two processes answering the same job cannot both advance it from one state: the second's swap fails and its
answers are never released.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from .db import Database
from .schema import JobState, SpendRecord, utcnow


@dataclass(frozen=True)
class StoredState:
    """A job's state text and its version (0: no state stored yet)."""

    state: str | None
    version: int


class JobStates:
    """The ``job_states`` rows of one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, ledger_id: str, table_id: str) -> StoredState:
        with self.db.read() as conn:
            row = conn.execute(select(JobState.state, JobState.version).where(
                JobState.ledger_id == ledger_id, JobState.table_id == table_id)).first()
        return StoredState(None, 0) if row is None else StoredState(row.state, int(row.version))

    def swap(self, ledger_id: str, table_id: str, expected: int, state: str) -> bool:
        """Store ``state`` iff the stored version is still ``expected`` (0: none stored); whether it was."""
        now = utcnow()
        with self.db.write() as conn:
            if expected == 0:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(JobState).values(ledger_id=ledger_id, table_id=table_id, state=state,
                                                             version=1, updated_at=now))
                except IntegrityError:
                    return False
                return True
            done = conn.execute(update(JobState).where(
                JobState.ledger_id == ledger_id, JobState.table_id == table_id, JobState.version == expected)
                .values(state=state, version=expected + 1, updated_at=now))
            return done.rowcount == 1

    def key_used(self, ledger_id: str, key: str) -> bool:
        """Whether a spend record of ``ledger_id`` holds the idempotency ``key`` (a retried request: its
        answers are replayed by the debit writer and the job is not advanced again)."""
        with self.db.read() as conn:
            return conn.execute(select(SpendRecord.id).where(
                SpendRecord.ledger_id == ledger_id, SpendRecord.idempotency_key == key)).first() is not None
