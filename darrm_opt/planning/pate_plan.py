"""Budget planning for the other teacher settings (:mod:`darrm_opt.model.neighbours`).

``disjoint-nonprivate`` (PATE). The per-answer target is (ε, δ) itself. For each (ε, δ) the PATE-setting
LP's certified optimum γ*_{ε,δ} (:func:`darrm_opt.optimize.pate_setting.solve_pate`) has a certified privacy
profile (:func:`darrm_opt.privacy.pair_profile.pate_profile`), and its Q answers spend

    spent(ε, δ) = min( ε_PLD(pair(γ*)^{⊗Q}; δ_B),  ε_KOV((ε, δ) × Q; δ_B) )

at δ_B: the exact composition of the table's dominating pair (pessimistic PLD) or the optimal composition of
Q arbitrary (ε, δ)-DP answers (Kairouz, Oh, Viswanath 2015), whichever is smaller, i.e. the ledger's
accounting (:func:`darrm_opt.privacy.accounting.account` with the profile). The plan is
argmin_{(ε, δ) : spent ≤ ε_B} E[error(γ*_{ε,δ})]. The error decreases in ε (the LP's bound e^ε − 1 + 2δ
grows) and the spent ε grows with it, so for each δ of the grid δ_B/Q·(1, ½, ¼), 0 the largest fitting ε
is bracketed from ε_B/Q (which fits by basic composition: Qδ ≤ δ_B) by doublings and then bisected in
log ε to a relative EPS_RTOL. Screening, as for shared tables, uses the pessimistic PLD on the grid
:func:`~darrm_opt.planning.plan.screen_interval`; a candidate within SCREEN_WINDOW·Q·screen_interval(Q)
above ε_B is decided by the ledger's exact composition, and the chosen table's spend is recomputed by the ledger's
accounting and checked against ε_B again.

``disjoint-private``: by parallel composition every answer (any γ, the plain majority γ ≡ 1 included) is
within the teachers' own (ε_T, Δ_T) in total. When (ε_T, Δ_T) is within the budget the plan is the plain
majority, free of further cost (:func:`majority_free`); otherwise the shared-data plan applies (its composed
spend stays valid) and says that the cap does not fit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from darrm_opt import solvers
from darrm_opt.model.neighbours import SETTING_NOTES, PateParams
from darrm_opt.model.objective import expected_error
from darrm_opt.model.params import Prior
from darrm_opt.optimize.pate_setting import PateSolution, solve_pate
from darrm_opt.planning.plan import (
    SCREEN_WINDOW,
    BudgetInfeasible,
    Candidate,
    check_budget,
    screen_epsilon,
    screen_interval,
)
from darrm_opt.privacy import accounting
from darrm_opt.privacy.calibrate import bisect, geometric, walk
from darrm_opt.privacy.pair_profile import pate_profile
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.profile import PrivacyProfile

#: the ε search stops when the bracket's ends differ by less than this factor
EPS_RTOL = 0.002
#: per-answer δ grid (multiples of δ_B / Q); pure ε-DP (δ = 0) is tried last
DELTA_FACTORS = (1.0, 0.5, 0.25, 0.0)
MAX_EPSILON = 700.0

Progress = Callable[..., None]


@dataclass(frozen=True)
class PatePlan:
    """The planned PATE-setting table: its certified ``solution`` and ``profile``, and the ε its ``queries``
    answers spend at ``budget_delta`` by the ledger's accounting (``method``: exact or optimal)."""

    params: PateParams
    solution: PateSolution
    profile: PrivacyProfile
    queries: int
    budget_epsilon: float
    budget_delta: float
    spent_epsilon: float
    method: str
    candidates: tuple[Candidate, ...] = field(repr=False)
    seconds: float = 0.0

    @property
    def expected_error(self) -> float:
        return self.solution.expected_error

    def plan_dict(self) -> dict[str, Any]:
        """The ``plan`` member of the table document (candidates' ``m`` is null: there is no allowance)."""
        return {"teachers": "disjoint-nonprivate", "queries": self.queries, "budget_epsilon": self.budget_epsilon,
                "budget_delta": self.budget_delta, "spent_epsilon": self.spent_epsilon, "accounting": self.method,
                "seconds": self.seconds,
                "candidates": [{**c.to_dict(), "m": None, "epsilon": c.m} for c in self.candidates]}

    def to_dict(self) -> dict[str, Any]:
        """A PATE-setting table file (as ``solve --teachers disjoint-nonprivate`` writes one) plus ``plan``."""
        return {**self.solution.to_dict(), "privacy_profile": self.profile.to_dict(), "plan": self.plan_dict()}


@dataclass(frozen=True)
class PatePlanRequest:
    """Validated inputs of :func:`plan_pate` (no teacher ε or Δ: the teachers are not private)."""

    K: int
    queries: int
    budget_epsilon: float
    budget_delta: float
    prior: Prior

    @classmethod
    def make(cls, K, queries, budget_epsilon, budget_delta, prior) -> PatePlanRequest:
        p = PateParams(K, 1.0, 0.0, Prior.parse(prior))  # K and prior
        q, be, bd = check_budget(queries, budget_epsilon, budget_delta)
        return cls(p.K, q, be, bd, p.prior)

    def canonical(self) -> dict[str, Any]:
        return {"K": self.K, "teachers": "disjoint-nonprivate", "queries": self.queries,
                "budget_epsilon": self.budget_epsilon, "budget_delta": self.budget_delta, "prior": self.prior.spec}


class _PateSearch:
    """Evaluates per-answer (ε, δ) targets (cached); ``Candidate.m`` holds the per-answer ε."""

    def __init__(self, K: int, queries: int, budget: tuple[float, float], prior: Prior, solver: str,
                 progress: Progress | None) -> None:
        self.K, self.queries, self.budget, self.prior = K, queries, budget, prior
        self.solver, self.progress = solver, progress
        self.seen: dict[tuple[float, float], tuple[Candidate, PateSolution, PrivacyProfile]] = {}

    def __call__(self, epsilon: float, delta: float) -> Candidate:
        key = (epsilon, delta)
        if key not in self.seen:
            be, bd = self.budget
            params = PateParams(self.K, epsilon, delta, self.prior)
            sol = solve_pate(params, solver=self.solver)
            profile = pate_profile(params, sol.gamma)
            spent = min(screen_epsilon(profile, self.queries, bd), _generic(params, self.queries, bd))
            if be < spent <= be + SCREEN_WINDOW * self.queries * screen_interval(self.queries):
                spent = exact_epsilon([(profile, self.queries)], bd)  # the edge: the ledger decides
            cand = Candidate(epsilon, delta, sol.expected_error, spent, spent <= be)
            self.seen[key] = (cand, sol, profile)
            if self.progress is not None:
                self.progress("plan", evaluations=len(self.seen), epsilon=epsilon, delta=delta, spent=spent,
                              fits=cand.fits, error=cand.expected_error)
        return self.seen[key][0]

    def largest_fitting(self, delta: float) -> Candidate:
        """The largest per-answer ε (to EPS_RTOL) whose table fits at this δ (module docstring)."""
        def fits(e: float) -> bool:
            return self(e, delta).fits

        start = _basic_share(self.budget[0], self.queries)
        if not fits(start):
            return self(start, delta)
        lo, hi = walk(lambda e: not fits(e), start, lambda e, _: min(MAX_EPSILON, 2.0 * e),
                      end=lambda e, _: e >= MAX_EPSILON)
        if hi is None:
            return self(lo, delta)
        lo, _ = bisect(fits, lo, hi, geometric, done=lambda g, b: b / g - 1.0 <= EPS_RTOL)
        return self(lo, delta)


def _basic_share(budget_epsilon: float, queries: int) -> float:
    """The largest float ε with Q·ε ≤ ε_B exactly (basic composition fits)."""
    eps = budget_epsilon / queries
    while accounting.exact_sum([(queries, eps)]) > budget_epsilon:
        eps = math.nextafter(eps, 0.0)
    return eps


def _generic(params: PateParams, queries: int, budget_delta: float) -> float:
    """ε at δ_B of Q arbitrary (ε, δ)-DP answers (basic or optimal composition); inf when δ_B is too small."""
    spend = accounting.tightest([(params.epsilon, params.delta, queries)], budget_delta)
    return spend.epsilon if spend.delta <= budget_delta else math.inf


def plan_pate(K: int, queries: int, budget_epsilon: float, budget_delta: float, prior: str | Prior = "paper", *,
              solver: str = solvers.DEFAULT_BACKEND, progress: Progress | None = None) -> PatePlan:
    """The certified PATE-setting table of least expected error whose ``queries`` answers fit
    (budget_epsilon, budget_delta) by the ledger's accounting (module docstring)."""
    t0 = time.perf_counter()
    req = PatePlanRequest.make(K, queries, budget_epsilon, budget_delta, prior)  # checked before any solve
    q, be, bd = req.queries, req.budget_epsilon, req.budget_delta
    search = _PateSearch(req.K, q, (be, bd), req.prior, solver, progress)
    found = [search.largest_fitting(bd / q * f) for f in DELTA_FACTORS]
    for cand in sorted((c for c in found if c.fits), key=lambda c: (c.expected_error, -c.m)):
        _, sol, profile = search.seen[(cand.m, cand.delta)]
        acc = accounting.account([(cand.m, cand.delta, q)], bd, profiles=[(profile, q)])
        if acc.spend.delta <= bd and acc.spend.epsilon <= be:  # the ledger's accounting, at its own interval
            return PatePlan(sol.params, sol, profile, q, be, bd, acc.spend.epsilon, acc.spend.method,
                            tuple(c for c, _, _ in search.seen.values()), time.perf_counter() - t0)
    raise BudgetInfeasible("budget", f"no per-answer (ε, δ) tried fits {q} answers in (ε={be:g}, δ={bd:g})", None)


@dataclass(frozen=True)
class MajorityFree:
    """``disjoint-private`` teachers whose own (ε_T, Δ_T) is within the budget: the plain majority (γ ≡ 1),
    and any number of answers, cost at most (ε_T, Δ_T) in total by parallel composition."""

    K: int
    teacher_epsilon: float
    teacher_delta: float
    queries: int
    budget_epsilon: float
    budget_delta: float
    prior: Prior

    @property
    def expected_error(self) -> float:
        return expected_error(np.ones(self.K + 1), self.prior)

    def to_dict(self) -> dict[str, Any]:
        return {"K": self.K, "teachers": "disjoint-private", "prior": self.prior.spec, "gamma": [1.0] * (self.K + 1),
                "expected_error": self.expected_error, "note": SETTING_NOTES["disjoint-private"],
                "plan": {"teachers": "disjoint-private", "majority_free": True, "queries": self.queries,
                         "budget_epsilon": self.budget_epsilon, "budget_delta": self.budget_delta,
                         "spent_epsilon": self.teacher_epsilon, "spent_delta": self.teacher_delta,
                         "accounting": "parallel-cap"}}


def majority_free(K: int, epsilon: float, teacher_delta: float, queries: int, budget_epsilon: float,
                  budget_delta: float, prior: str | Prior = "paper") -> MajorityFree | None:
    """:class:`MajorityFree` when the teachers' (ε_T, Δ_T) is within (ε_B, δ_B), else None."""
    from darrm_opt.model.params import Params
    from darrm_opt.privacy.parallel import check_cap

    base = Params(K=K, m=1, epsilon=epsilon, teacher_delta=teacher_delta, prior=prior)
    q, be, bd = check_budget(queries, budget_epsilon, budget_delta)
    eps_t, delta_t = check_cap(base.epsilon, base.teacher_delta)
    if eps_t <= be and delta_t <= bd:
        return MajorityFree(base.K, eps_t, delta_t, q, be, bd, base.prior)
    return None
