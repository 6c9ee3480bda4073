"""Releasing answers: pay first, then draw.

:class:`Aggregator` answers vote rows with a *certified* table (:class:`darrm_opt.privacy.table.CertifiedTable`,
from :func:`darrm_opt.mechanisms.certify_table` or :func:`darrm_opt.release.table_file.load_certified`).
Each call checks the votes (a bad batch spends nothing), pays for one answer per row from the ledger when
one is given (a durable debit, :meth:`darrm_opt.ledger.local.Ledger.pay`; BudgetExceeded and nothing drawn
when it does not fit), and only then draws the answers with fresh coins from the operating system's
CSPRNG. :func:`release_answers` is the one-call form.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import mechanism
from darrm_opt.privacy.table import CertifiedTable
from darrm_opt.sampling import RandomBytes, system_random

if TYPE_CHECKING:  # pragma: no cover - the ledger needs the service extra
    from darrm_opt.ledger.local import Ledger


class Aggregator:
    """DaRRM answers of one certified table, paid from ``ledger`` (when given) before they are drawn."""

    def __init__(self, table: CertifiedTable, ledger: Ledger | None = None,
                 random_bytes: RandomBytes = system_random) -> None:
        if not isinstance(table, CertifiedTable):
            raise InvalidParameter("table", "must be a certified table (darrm_opt.certify_table(params, gamma) or "
                                   "darrm_opt.load_certified(path)); a bare γ has no certificate")
        self.table = table
        self.ledger = ledger
        self._sampler = mechanism(table.kind).sampler(table, random_bytes)

    def __call__(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """One answer per row of ``votes`` (rows, K): 0/1 votes for a binary table, class labels 0..C−1 for
        a multi-class one. The votes are checked, the ledger (if any) pays for every row, then the answers
        are drawn."""
        sampler: Any = self._sampler  # binary (counts) or multi-class (labels): prepare, rows, draw
        prepared = sampler.prepare(votes)
        if self.ledger is not None:
            rows = sampler.rows(prepared)
            self.ledger.pay(self.table, rows, units=mechanism(self.table.kind).units(self.table.params, rows))
        return sampler.draw(prepared)


def release_answers(table: CertifiedTable, votes: np.ndarray | Sequence[Sequence[int]], ledger: Ledger,
            random_bytes: RandomBytes = system_random) -> np.ndarray:
    """Pay for one answer per row of ``votes`` from ``ledger``, durably, then draw the answers of ``table``."""
    return Aggregator(table, ledger, random_bytes)(votes)
