"""The data-dependent ledger of the Python API, drawing its own answers (``darrm_opt.DataDependentLedger``).

:class:`DataDependentLedger` is :class:`darrm_opt.ledger.dd_local.DataDependentRecorder` (open or create by
name, record, publish once) with :meth:`~DataDependentLedger.answer`: the answers to the job's next queries
drawn and accounted in one transaction (:mod:`darrm_opt.mechanisms.dd_answers`). Both take the votes as
people hold them (:func:`darrm_opt.release.votes.read_votes`: (N, K) labels or (N, C) histograms, an array, a
.npy/.npz/CSV/TSV path or ``-``), turned into the histograms the ledger accounts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from darrm_opt.ledger.dd_account import RandomBytes
from darrm_opt.ledger.dd_local import DataDependentRecorder, _system_random
from darrm_opt.mechanisms.dd_answers import drawer
from darrm_opt.release.votes import read_votes

__all__ = ["DataDependentLedger"]


class DataDependentLedger(DataDependentRecorder):
    """A data-dependent job on a database that also answers it (see the base class for the rest)."""

    def answer(self, votes: object, student: object | None = None,
               random_bytes: RandomBytes = _system_random) -> list[int]:
        """Draw the answers to the job's next queries (their vote histograms) and account them in one
        transaction: GNMax, Confident-GNMax or Interactive-GNMax (PATE Alg. 2; ``student``: its class
        probabilities per query, required there) with exact discrete Gaussian noise from ``random_bytes``
        (a CSPRNG; :mod:`darrm_opt.mechanisms.dd_answers`). The labels, −1 for ⊥. BudgetExceeded beyond the
        quota or once published, InvalidParameter on bad input; nothing is answered or written then."""
        v = self.store.answer(self.id, self.histograms(votes), drawer(random_bytes), student)
        assert v is not None
        return list(v["answers"])

    def record(self, votes: object, answered: Sequence[bool] | None = None,
               student: object | None = None) -> dict[str, Any]:
        """The base class's ``record`` of the votes as people hold them (see the module docstring)."""
        return super().record(self.histograms(votes), answered, student)

    def histograms(self, votes: object) -> np.ndarray:
        """``votes`` ((N, K) labels or (N, C) histograms, an array or a source) as the ledger's (N, C)
        histograms, checked against its policy's K and C (InvalidParameter naming votes)."""
        policy = self.view()["policy"]
        return read_votes(votes, K=int(policy["K"]), classes=int(policy["classes"])).counts
