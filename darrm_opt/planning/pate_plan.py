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
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from darrm_opt.model.neighbours import PateParams, subsampled_table
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
from darrm_opt.privacy.subsample import amplified_delta, amplified_epsilon, amplify_profile

#: the ε search stops when the bracket's ends differ by less than this factor
EPS_RTOL = 0.002
#: per-answer δ grid (multiples of δ_B / Q); pure ε-DP (δ = 0) is tried last
DELTA_FACTORS = (1.0, 0.5, 0.25, 0.0)
MAX_EPSILON = 700.0
#: the shares m/K of the teachers each answer reads that the planner tries besides all K (subsampled teachers)
SUBSAMPLE_RATES = (0.5, 0.25)
#: the largest table δ a subsampled search asks for (δ_B/Q divided by m/K can pass 1 at tiny m)
MAX_TABLE_DELTA = 0.5

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
                 progress: Progress | None, subsample: int | None = None) -> None:
        self.K, self.queries, self.budget, self.prior = K, queries, budget, prior
        self.solver, self.progress = solver, progress
        self.subsample = None if subsample == K else subsample
        self.seen: dict[tuple[float, float], tuple[Candidate, PateSolution, PrivacyProfile]] = {}

    def __call__(self, epsilon: float, delta: float) -> Candidate:
        key = (epsilon, delta)
        if key not in self.seen:
            be, bd = self.budget
            params = PateParams(self.K, epsilon, delta, self.prior, self.subsample)
            sol = solve_pate(params.inner(), solver=self.solver)
            profile = pate_profile(params.inner(), sol.gamma)
            if params.subsample is not None:  # each answer reads m of the K teachers: the amplified pair
                profile = amplify_profile(profile, params.m, params.K)
                sol = replace(sol, params=params, expected_error=_subsampled_error(params, sol.gamma))
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


def _per_answer(params: PateParams) -> tuple[float, float]:
    """The (ε, δ) of one answer: the table's, amplified with a ``subsample`` (BBG 2018, Thm 10)."""
    if params.subsample is None:
        return params.epsilon, params.delta
    return (amplified_epsilon(params.epsilon, params.m, params.K),
            amplified_delta(params.delta, params.m, params.K))


def _subsampled_error(params: PateParams, gamma: Any) -> float:
    """The expected error of the m-teacher table against the majority of all K (docs/maths.md)."""
    return float(expected_error(subsampled_table(params.K, np.asarray(gamma, dtype=np.float64)), params.prior))


def _generic(params: PateParams, queries: int, budget_delta: float) -> float:
    """ε at δ_B of Q arbitrary (ε, δ)-DP answers (basic or optimal composition); inf when δ_B is too small."""
    spend = accounting.tightest([(*_per_answer(params), queries)], budget_delta)
    return spend.epsilon if spend.delta <= budget_delta else math.inf


def subsample_grid(K: int) -> tuple[int, ...]:
    """The teachers per answer the planner tries: K, and K·r rounded for r in SUBSAMPLE_RATES (at least 1)."""
    return tuple(sorted({K, *(max(1, round(K * r)) for r in SUBSAMPLE_RATES)}, reverse=True))


def plan_pate(job: Any, progress: Progress | None = None, subsample: bool = True
              ) -> tuple[PateSolution, PrivacyProfile, float, dict[str, Any]]:
    """The certified PATE-setting table of least expected error whose Q answers fit the job's
    (ε_B, δ_B) by the ledger's accounting (module docstring): (its solution, its certified profile, the ε its
    Q answers spend at δ_B, the ``plan`` member of its table document: the setting, Q, the budget, that
    spend, the bound it comes from (``accounting``: exact or optimal), the seconds taken and every
    candidate tried, whose ``m`` is null, ``epsilon`` the table's per-answer ε (there is no allowance) and
    ``subsample`` the teachers each answer reads). With ``subsample`` the search runs for every m of
    :func:`subsample_grid` (m of the K teachers per answer, the profile amplified: docs/maths.md) and the
    least error over all of them wins (ties to the larger m); the chosen solution's ``params`` state its m."""
    t0 = time.perf_counter()
    req = PatePlanRequest.make(job.K, job.queries, job.budget_epsilon, job.budget_delta, job.prior)  # before any solve
    q, be, bd = req.queries, req.budget_epsilon, req.budget_delta
    searches = []
    found = []
    fixed = getattr(job, "subsample", None)
    for m in (fixed,) if fixed is not None else subsample_grid(req.K) if subsample else (req.K,):
        search = _PateSearch(req.K, q, (be, bd), req.prior, job.solver, progress, m)
        gamma_rate = m / req.K  # the table's δ grid, so that the amplified δ is about δ_B/Q·f
        searches.append(search)
        found += [(search, search.largest_fitting(min(bd / q * f / gamma_rate, MAX_TABLE_DELTA)))
                  for f in DELTA_FACTORS]
    candidates = [{**c.to_dict(), "m": None, "epsilon": c.m, "subsample": s.subsample or s.K}
                  for s in searches for c, _, _ in s.seen.values()]
    for search, cand in sorted((sc for sc in found if sc[1].fits),
                               key=lambda sc: (sc[1].expected_error, -(sc[0].subsample or sc[0].K), -sc[1].m)):
        _, sol, profile = search.seen[(cand.m, cand.delta)]
        acc = accounting.account([(*_per_answer(sol.params), q)], bd, profiles=[(profile, q)])
        if acc.spend.delta <= bd and acc.spend.epsilon <= be:  # the ledger's accounting, at its own interval
            info = {"teachers": "disjoint-nonprivate", "queries": q, "budget_epsilon": be, "budget_delta": bd,
                    "spent_epsilon": acc.spend.epsilon, "accounting": acc.spend.method,
                    "seconds": time.perf_counter() - t0, "candidates": candidates}
            return sol, profile, acc.spend.epsilon, info
    raise BudgetInfeasible("budget", f"no per-answer (ε, δ) tried fits {q} answers in (ε={be:g}, δ={bd:g})", None)
