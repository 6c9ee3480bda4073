"""A labelling job and a mechanism's offer for it: what the job planner compares.

A *job* is Q answers of one kind of query (K teachers, 0/1 votes or C classes, a teachers' setting, a
prior over the votes) under one total budget (ε_B, δ_B). Each mechanism (:mod:`darrm_opt.mechanisms`)
answers a job with its most accurate :class:`Offer` (``Mechanism.plan``): a certified table calibrated so
that the exact composition of Q of its answers (:func:`darrm_opt.privacy.pld.exact_epsilon`) fits the
budget, its expected error per answer under the job's prior, and the ε it spends. The planner
(:func:`darrm_opt.mechanisms.plan_job`) takes the most accurate offer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.params import finite_number

TEACHERS = ("shared", "disjoint-private", "disjoint-nonprivate")


@dataclass(frozen=True)
class Job:
    """Q answers of K teachers' votes (0/1, or ``classes`` = C labels) under a total (ε_B, δ_B).

    ``teachers``: the setting (``disjoint-nonprivate`` is PATE's). ``prior``: the prior over the votes, by
    name (a kind reads it with its own prior type). ``epsilon`` and ``teacher_delta``: the teachers' own
    (ε, Δ) where they are DP-trained (shared and disjoint-private settings), else None."""

    K: int
    queries: int
    budget_epsilon: float
    budget_delta: float
    teachers: str = "disjoint-nonprivate"
    classes: int | None = None
    prior: str = "paper"
    epsilon: float | None = None
    teacher_delta: float | None = None
    solver: str = "highs"

    def __post_init__(self) -> None:
        if self.teachers not in TEACHERS:
            raise InvalidParameter("teachers", f"must be one of {', '.join(TEACHERS)}", self.teachers)
        if isinstance(self.K, bool) or not isinstance(self.K, int) or self.K < 1:
            raise InvalidParameter("K", "must be an integer >= 1", self.K)
        eps = finite_number("budget_epsilon", self.budget_epsilon)
        if eps <= 0:
            raise InvalidParameter("budget_epsilon", "must be > 0", self.budget_epsilon)
        delta = finite_number("budget_delta", self.budget_delta)
        if not 0 <= delta < 1:
            raise InvalidParameter("budget_delta", "must satisfy 0 <= budget_delta < 1", self.budget_delta)
        object.__setattr__(self, "budget_epsilon", eps)
        object.__setattr__(self, "budget_delta", delta)
        q = self.queries
        if isinstance(q, bool) or not isinstance(q, int) or q < 1:
            raise InvalidParameter("queries", "must be an integer >= 1", q)
        if self.classes is not None:
            c = self.classes
            if isinstance(c, bool) or not isinstance(c, int) or c < 2:
                raise InvalidParameter("classes", "must be an integer >= 2", c)
        if self.epsilon is not None:
            e = finite_number("epsilon", self.epsilon)
            if e <= 0:
                raise InvalidParameter("epsilon", "must be > 0", self.epsilon)
            object.__setattr__(self, "epsilon", e)

    def canonical(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Offer:
    """A mechanism's most accurate certified table for a job: ``table`` (a
    :class:`darrm_opt.privacy.table.CertifiedTable`), its expected error per answer under the job's prior,
    the ε of Q of its answers at δ_B by the ledger's exact composition (≤ ε_B), and how it was calibrated
    (``details``: the kind's own figures, e.g. σ or the per-answer (ε₀, δ₀); ``seconds``)."""

    mechanism: str
    table: Any
    expected_error: float
    epsilon_spent: float
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "expected_error": self.expected_error,
                "epsilon_spent": self.epsilon_spent, "table_id": self.table.id, **self.details,
                "seconds": self.seconds}
