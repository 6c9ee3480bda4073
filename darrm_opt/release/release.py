"""Releasing answers: pay first, then draw.

:class:`Aggregator` answers vote rows with a *certified* table (:class:`darrm_opt.privacy.table.CertifiedTable`,
from :func:`darrm_opt.mechanisms.certify_table` or :func:`darrm_opt.release.table_file.load_certified`).
Each call checks the votes (a bad batch spends nothing), pays for one answer per row from the ledger when
one is given (a durable debit, :meth:`darrm_opt.ledger.local.Ledger.pay`; BudgetExceeded and nothing drawn
when it does not fit), and only then draws the answers with fresh coins from the operating system's
CSPRNG. :func:`release_answers` is the one-call form.

A kind that ``keeps_state`` (the stability-based release: one statement for a job of several answers asked
over several calls) runs its answers as jobs whose private state the ledger keeps: the call reads the
ledger's state of the table's current job, pays the jobs the rows open (none while the current job has
quota left; the rows are counted as answers either way), draws the answers from that state, and stores the
next state by compare and swap before releasing them. A swap that fails (another process advanced the job
meanwhile) releases nothing and starts again from the stored state; what was paid stays paid. Without a
ledger every call is its own jobs.

Records. With a ledger, a call may name the client's record id of each row (:meth:`Aggregator.answer`): a row
whose record the ledger answered before gets the stored answer and is not paid (nor drawn from a job's
state), a record named twice is answered once; the others are paid and recorded with their answers in the
debit's transaction (:mod:`darrm_opt.ledger.core`). For such a call the answers are drawn before the debit
and released only once it is paid (a kind that keeps state: its job is run on the new rows only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import mechanism
from darrm_opt.privacy.table import CertifiedTable
from darrm_opt.sampling import RandomBytes, system_random

#: how many times a call of a kind that keeps state reads its job again after a failed swap
STATE_TRIES = 3

if TYPE_CHECKING:  # pragma: no cover - the ledger needs the service extra
    from darrm_opt.ledger.local import Ledger


@dataclass(frozen=True)
class Released:
    """Every row's answer; ``reanswered``: the rows given their record's stored answer (nothing paid);
    ``changed``: those of them asked with other votes than the record was answered for."""

    answers: np.ndarray
    reanswered: tuple[int, ...] = ()
    changed: tuple[int, ...] = ()


def new_rows(records: Sequence[str], answered: set[str] | frozenset[str]) -> list[int]:
    """The rows to answer now: the first row of each record id not in ``answered``."""
    seen: set[str] = set()
    out = []
    for j, r in enumerate(records):
        if r not in answered and r not in seen:
            out.append(j)
        seen.add(r)
    return out


class Aggregator:
    """DaRRM answers of one certified table, paid from ``ledger`` (when given) before they are drawn."""

    def __init__(self, table: CertifiedTable, ledger: Ledger | None = None,
                 random_bytes: RandomBytes = system_random) -> None:
        if not isinstance(table, CertifiedTable):
            raise InvalidParameter("table", "must be a certified table (darrm_opt.certify_table(params, gamma) or "
                                   "darrm_opt.load_certified(path)); a bare γ has no certificate")
        self.table = table
        self.ledger = ledger
        self._random_bytes = random_bytes
        self._sampler = mechanism(table.kind).sampler(table, random_bytes)

    def __call__(self, votes: np.ndarray | Sequence[Sequence[int]],
                 records: Sequence[str | int] | None = None) -> np.ndarray:
        """One answer per row of ``votes`` (rows, K): 0/1 votes for a binary table, class labels 0..C−1 for
        a multi-class one. The votes are checked, the ledger (if any) pays for every row, then the answers
        are drawn. ``records``: see :meth:`answer`."""
        if records is not None:
            return self.answer(votes, records).answers
        sampler: Any = self._sampler  # binary (counts) or multi-class (labels): prepare, rows, draw
        prepared = sampler.prepare(votes)
        if self.ledger is None:
            return sampler.draw(prepared)
        m, params, rows = mechanism(self.table.kind), self.table.params, sampler.rows(prepared)
        if not m.keeps_state:
            self.ledger.pay(self.table, rows, units=m.units(params, rows))
            return sampler.draw(prepared)
        for _ in range(STATE_TRIES):
            stored = self.ledger.job_state(self.table)
            self.ledger.pay(self.table, rows, units=m.job_units(params, stored.state, rows))
            answers, state = m.run_job(params, stored.state, prepared, self._random_bytes)
            if self.ledger.swap_job_state(self.table, stored.version, state):
                return answers
        from darrm_opt.ledger.local import LedgerUnavailable

        raise LedgerUnavailable(f"the job of table {self.table.id} was advanced by another process {STATE_TRIES} "
                                "times during this call: no answer was released")


    def answer(self, votes: np.ndarray | Sequence[Sequence[int]], records: Sequence[str | int]) -> Released:
        """The answers of ``votes`` with the client's record id of each row (strings of 1 to 200 printable
        characters, or integers; InvalidParameter naming ``records``): the rows whose record the ledger
        answered before get the stored answer at no cost, the others are paid and recorded (module
        docstring). Needs a ledger."""
        from darrm_opt.ledger.core import record_ids, row_digests

        if self.ledger is None:
            raise InvalidParameter("records", "need a ledger (records are kept by the ledger that answered them)")
        m = mechanism(self.table.kind)
        if m.votes_file != "csv":
            raise InvalidParameter("records", f"apply to vote rows; a {m.kind} table answers vectors")
        sampler: Any = self._sampler
        prepared = sampler.prepare(votes)
        rows, params = sampler.rows(prepared), self.table.params
        ids = record_ids(records, rows)
        digests = row_digests(np.asarray(votes))
        if not m.keeps_state:
            drawn = sampler.draw(prepared)
            result = self.ledger.pay(self.table, rows, answers=drawn, records=ids, record_digests=digests,
                                     units_of=lambda n: m.units(params, n))
            return Released(np.asarray(result.answers), result.reanswered, result.changed)
        for _ in range(STATE_TRIES):
            fresh = new_rows(ids, self.ledger.answered(ids))
            if not fresh:  # every row answered before: nothing to run, nothing to pay
                result = self.ledger.pay(self.table, rows, answers=np.zeros(rows, dtype=np.int16), records=ids,
                                         record_digests=digests, units=0)
                return Released(np.asarray(result.answers), result.reanswered, result.changed)
            stored = self.ledger.job_state(self.table)
            self.ledger.pay(self.table, 0, units=m.job_units(params, stored.state, len(fresh)))
            answers, state = m.run_job(params, stored.state, prepared[fresh], self._random_bytes)
            if self.ledger.swap_job_state(self.table, stored.version, state):
                drawn = np.zeros(rows, dtype=np.asarray(answers).dtype)
                drawn[fresh] = answers
                result = self.ledger.pay(self.table, rows, answers=drawn, records=ids, record_digests=digests,
                                         units=0)
                return Released(np.asarray(result.answers), result.reanswered, result.changed)
        from darrm_opt.ledger.local import LedgerUnavailable

        raise LedgerUnavailable(f"the job of table {self.table.id} was advanced by another process {STATE_TRIES} "
                                "times during this call: no answer was released")


def release_answers(table: CertifiedTable, votes: np.ndarray | Sequence[Sequence[int]], ledger: Ledger,
                    random_bytes: RandomBytes = system_random,
                    records: Sequence[str | int] | None = None) -> np.ndarray:
    """Pay for one answer per row of ``votes`` from ``ledger``, durably, then draw the answers of ``table``;
    with ``records`` (the client's record id of each row), the rows whose record the ledger answered before
    get the stored answer at no cost (:meth:`Aggregator.answer`)."""
    return Aggregator(table, ledger, random_bytes)(votes, records)
