"""A data-dependent ledger used from Python without a server, on the service's database code.

:class:`DataDependentRecorder` opens a database (a SQLite file by default, migrated on first use, or
PostgreSQL), finds or creates a data-dependent ledger by name (:mod:`darrm_opt.ledger.dd_account`),
records the queries of its job and publishes its sanitised ε once. Like the store, it shows only public
values (:func:`~darrm_opt.ledger.dd_account.public_view`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from .dd_account import DataDependentPolicy, RandomBytes
from .dd_store import DataDependentStore
from .local import open_ledger


def _system_random(n: int) -> bytes:
    import os

    return os.urandom(n)


class DataDependentRecorder:
    """A data-dependent job on a database: ``record`` its queries, ``publish`` its sanitised ε (once).

    ``policy``: a :class:`DataDependentPolicy` (or its mapping) to create the ledger ``name``; omitted, the
    ledger must exist. The ε it publishes is a noisy estimate of this dataset's privacy loss, not a worst
    case (docs/data-dependent.md); ``view()["data_independent_epsilon"]`` is the worst case."""

    def __init__(self, url: str | None, name: str,
                 policy: DataDependentPolicy | Mapping[str, Any] | None = None) -> None:
        self.db, self.id = open_ledger(url, name, lambda db: DataDependentStore(db).find_or_create(name, policy))
        self.store = DataDependentStore(self.db)
        self.name = name

    def view(self) -> dict[str, Any]:
        v = self.store.get(self.id)
        assert v is not None  # ledgers are never deleted
        return v

    def record(self, votes: object, answered: Sequence[bool] | None = None,
               student: object | None = None) -> dict[str, Any]:
        """Record the job's next queries (their vote histograms; for Confident-/Interactive-GNMax, which the
        teachers answered; for Interactive-GNMax optionally the student's probabilities, which price its check
        data-dependently). BudgetExceeded beyond the quota or once published; nothing is written then."""
        v = self.store.record(self.id, votes, answered, student=student)
        assert v is not None
        return v

    def publish(self, random_bytes: RandomBytes = _system_random) -> float:
        """The sanitised ε (drawn on the first call, the same value after: the ledger is sealed)."""
        v = self.store.publish(self.id, random_bytes)
        assert v is not None and v["sanitised_epsilon"] is not None
        return float(v["sanitised_epsilon"])

    def close(self) -> None:
        self.db.dispose()

    def __enter__(self) -> DataDependentRecorder:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
