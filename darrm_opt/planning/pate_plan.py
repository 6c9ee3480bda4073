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

``disjoint-private`` teachers are planned as shared ones (:mod:`darrm_opt.planning.plan`, whose
:func:`~darrm_opt.planning.plan.majority_free` says when the plain majority is free by parallel composition).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from darrm_opt.model.neighbours import PateParams
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


def plan_pate(job: Any, progress: Progress | None = None
              ) -> tuple[PateSolution, PrivacyProfile, float, dict[str, Any]]:
    """The certified PATE-setting table of least expected error whose Q answers fit the job's
    (ε_B, δ_B) by the ledger's accounting (module docstring): (its solution, its certified profile, the ε its
    Q answers spend at δ_B, the ``plan`` member of its table document: the setting, Q, the budget, that
    spend, the bound it comes from (``accounting``: exact or optimal), the seconds taken and every
    candidate tried, whose ``m`` is null and ``epsilon`` the per-answer ε: there is no allowance)."""
    t0 = time.perf_counter()
    req = PatePlanRequest.make(job.K, job.queries, job.budget_epsilon, job.budget_delta, job.prior)  # before any solve
    q, be, bd = req.queries, req.budget_epsilon, req.budget_delta
    search = _PateSearch(req.K, q, (be, bd), req.prior, job.solver, progress)
    found = [search.largest_fitting(bd / q * f) for f in DELTA_FACTORS]
    for cand in sorted((c for c in found if c.fits), key=lambda c: (c.expected_error, -c.m)):
        _, sol, profile = search.seen[(cand.m, cand.delta)]
        acc = accounting.account([(cand.m, cand.delta, q)], bd, profiles=[(profile, q)])
        if acc.spend.delta <= bd and acc.spend.epsilon <= be:  # the ledger's accounting, at its own interval
            info = {"teachers": "disjoint-nonprivate", "queries": q, "budget_epsilon": be, "budget_delta": bd,
                    "spent_epsilon": acc.spend.epsilon, "accounting": acc.spend.method,
                    "seconds": time.perf_counter() - t0,
                    "candidates": [{**c.to_dict(), "m": None, "epsilon": c.m} for c, _, _ in search.seen.values()]}
            return sol, profile, acc.spend.epsilon, info
    raise BudgetInfeasible("budget", f"no per-answer (ε, δ) tried fits {q} answers in (ε={be:g}, δ={bd:g})", None)
