"""Planning a stability-based release with a sparse-vector test: the parameters of least exact expected error.

The release (:mod:`darrm_opt.privacy.stability`) is one (ε, δ) statement for the whole job, whatever Q:
ε = s/t_ρ + 2c·s/t_ν and δ = Σ_z Pr[ρ = z](1 − Pr[ν ≤ T + z]^{min(c, Q)}) (docs/maths.md, "Stability-based
release"). For a job (K, C or 0/1 votes, prior, Q, budget (ε_B, δ_B)) the search is over

* the cut-off c (a growing grid; it stops once the error has grown on two successive c),
* the share f of ε_B spent on the threshold (a grid of step 1/20 refined around its best point by
  golden-section steps): t_ρ = ⌈s/(f·ε_B)⌉ and t_ν the least integer with s/t_ρ + 2cs/t_ν ≤ ε_B (in exact
  rationals), so that the queries get all of the budget the rounded threshold noise leaves,
* the threshold T: the least integer with δ ≤ δ_B (δ decreases in T; every query errs no less when it is
  unstable than when it releases its plurality, and a larger T only makes queries unstable, so the least
  feasible T has the least error),

at the lattice scale s = SCALE·⌈ε_B⌉ (the resolution of the ε split). Each candidate's figures are exact
(:func:`~darrm_opt.privacy.stability.job_error`); the chosen one's ε and δ are recomputed and checked
against the budget.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.stability import (
    MAX_INT,
    DistanceLaw,
    JobError,
    SvtParams,
    binary_law,
    job_error,
    multiclass_law,
    ptr_delta,
    svt_epsilon,
)

#: lattice points per unit of ε_B (s = SCALE·⌈ε_B⌉)
SCALE = 16
#: cut-offs tried, in order (up to Q; the search stops once the error has grown on two successive ones)
CUTOFFS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
#: the ε split's first grid (the error is not unimodal in the split: the threshold moves in integer steps),
#: then this many golden-section steps around its best point
SPLITS = (0.15, 0.3, 0.45, 0.6, 0.75)
GOLDEN_STEPS = 4


@dataclass(frozen=True)
class StabilityCandidate:
    """One evaluated parameter set and its exact figures."""

    params: SvtParams
    split: float
    epsilon: float
    delta: float
    figures: JobError

    def to_dict(self) -> dict[str, Any]:
        return {**self.params.canonical(), "split": self.split, "epsilon": self.epsilon, "delta": self.delta,
                "expected_error": self.figures.error, "expected_answered": self.figures.answered,
                "bottom_share": self.figures.bottom_share}


@dataclass(frozen=True)
class StabilityPlan:
    """The chosen parameters (``best``) for ``queries`` queries within (``budget_epsilon``, ``budget_delta``),
    with every candidate evaluated."""

    best: StabilityCandidate
    queries: int
    budget_epsilon: float
    budget_delta: float
    candidates: tuple[StabilityCandidate, ...] = field(repr=False)
    seconds: float = 0.0

    @property
    def expected_error(self) -> float:
        return self.best.figures.error


def distance_law(K: int, classes: int | None, prior: str) -> DistanceLaw:
    """The law of d for 0/1 votes (``classes`` None: a DaRRM prior) or C class labels (a multi-class prior,
    spelled as a job's: :func:`darrm_opt.planning.job.normal_prior`)."""
    from darrm_opt.planning.job import normal_prior

    if classes is None:
        return binary_law(K, prior)
    return multiclass_law(K, classes, normal_prior(prior, classes))


def least_threshold(scale: int, t_rho: int, t_nu: int, cutoff: int, queries: int, budget_delta: float) -> int:
    """The least integer T with δ(T) ≤ δ_B (δ decreases in T), by doubling then bisection."""
    def fits(T: int) -> bool:
        return ptr_delta(SvtParams(scale, t_rho, t_nu, T, cutoff), queries) <= budget_delta

    hi = 1
    while not fits(hi):
        hi *= 2
        if hi > MAX_INT:
            raise InvalidParameter("budget_delta", "no threshold reaches this δ", budget_delta)
    lo = -1
    while fits(lo):
        lo *= 2
        if -lo > MAX_INT:
            return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


#: the largest ε a plan spends (exp(ε) stays finite in every formula of the search)
MAX_EPSILON = 700.0

#: the largest threshold noise scale t_ρ a plan uses: the exact error sums over ρ's support, |z| up to 700·t_ρ
#: times the ⌈K/2⌉ distances, so memory grows with t_ρ (a budget ε near 0 asked for terabytes); splits that
#: would need more are not tried, and a budget that needs more for every split is refused
MAX_T_RHO = 4096


class _Search:
    def __init__(self, law: DistanceLaw, queries: int, budget_epsilon: float, budget_delta: float) -> None:
        self.law, self.Q, self.eps, self.delta = law, queries, budget_epsilon, budget_delta
        self.scale = SCALE * max(1, math.ceil(budget_epsilon))
        self.seen: dict[tuple[int, int, int], StabilityCandidate] = {}

    def __call__(self, cutoff: int, split: float) -> StabilityCandidate:
        s = self.scale
        rho_eps = split * self.eps
        if not (0 < rho_eps < self.eps and s / rho_eps <= MAX_INT):
            raise InvalidParameter("budget_epsilon", f"too small for a stability-based release: its noise scales "
                                                     f"would exceed {MAX_INT}", self.eps)
        t_rho = max(1, math.ceil(s / rho_eps))
        if t_rho > MAX_T_RHO:
            raise InvalidParameter("budget_epsilon", f"too small for a stability-based release: its threshold "
                                                     f"noise scale would exceed {MAX_T_RHO}", self.eps)
        # the queries get all the budget the threshold leaves (ε₁ = s/t_ρ ≤ f·ε_B after rounding t_ρ up):
        # the least t_ν with s/t_ρ + 2cs/t_ν ≤ ε_B, exactly in rationals
        rest = Fraction(self.eps) - Fraction(s, t_rho)
        need = Fraction(2 * cutoff * s) / rest if rest > 0 else Fraction(MAX_INT + 1)
        if need > MAX_INT:
            raise InvalidParameter("budget_epsilon", f"too small for a stability-based release: its noise scales "
                                                     f"would exceed {MAX_INT}", self.eps)
        t_nu = max(1, math.ceil(need))
        key = (cutoff, t_rho, t_nu)
        if key not in self.seen:
            T = least_threshold(s, t_rho, t_nu, cutoff, self.Q, self.delta)
            p = SvtParams(s, t_rho, t_nu, T, cutoff)
            self.seen[key] = StabilityCandidate(p, split, svt_epsilon(p), ptr_delta(p, self.Q),
                                                job_error(p, self.law, self.Q))
        return self.seen[key]

    def least_split(self) -> float:
        """The least split whose t_ρ = ⌈s/(split·ε_B)⌉ is within MAX_T_RHO (with a margin for rounding)."""
        return self.scale / (self.eps * MAX_T_RHO) * (1 + 1e-9)

    def best_split(self, cutoff: int) -> StabilityCandidate:
        least = self.least_split()
        splits = [f for f in SPLITS if f >= least]
        if not splits:
            raise InvalidParameter("budget_epsilon", f"too small for a stability-based release: its threshold "
                                                     f"noise scale would exceed {MAX_T_RHO}", self.eps)
        grid = [self(cutoff, f) for f in splits]
        i = min(range(len(grid)), key=lambda k: grid[k].figures.error)
        lo = splits[max(0, i - 1)] if i > 0 else max(least, splits[0] / 2)
        hi = splits[i + 1] if i + 1 < len(splits) else (1 + splits[-1]) / 2
        g = (math.sqrt(5) - 1) / 2
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        fa, fb = self(cutoff, a), self(cutoff, b)
        for _ in range(GOLDEN_STEPS):
            if fa.figures.error <= fb.figures.error:
                hi, b, fb = b, a, fa
                a = hi - g * (hi - lo)
                fa = self(cutoff, a)
            else:
                lo, a, fa = a, b, fb
                b = lo + g * (hi - lo)
                fb = self(cutoff, b)
        return min([*grid, fa, fb], key=lambda c: c.figures.error)


def plan_stability(K: int, classes: int | None, prior: str, queries: int, budget_epsilon: float,
                   budget_delta: float, cutoffs: tuple[int, ...] = CUTOFFS) -> StabilityPlan:
    """The stability-based release of least exact expected error (⊥ counted as an error) whose job-wide
    (ε, δ) is within (ε_B, δ_B) (module docstring). InvalidParameter naming the budget when none is."""
    t0 = time.perf_counter()
    if not (budget_epsilon > 0 and math.isfinite(budget_epsilon)):
        raise InvalidParameter("budget_epsilon", "must be finite and > 0", budget_epsilon)
    if not 0 < budget_delta < 1:
        raise InvalidParameter("budget_delta", "a stability-based release needs 0 < δ < 1", budget_delta)
    if isinstance(queries, bool) or not isinstance(queries, int) or not 1 <= queries <= MAX_INT:
        raise InvalidParameter("queries", f"a stability-based release takes 1 <= queries <= {MAX_INT}", queries)
    # a budget over MAX_EPSILON is planned at MAX_EPSILON: spending less than the budget is within it
    search = _Search(distance_law(K, classes, prior), queries, min(budget_epsilon, MAX_EPSILON), budget_delta)
    best: StabilityCandidate | None = None
    worse = 0
    for c in cutoffs:
        if c > queries:
            break
        try:
            cand = search.best_split(c)
        except InvalidParameter:  # this c's noise scales exceed the integers: so do every larger c's
            if best is None:
                raise
            break
        if best is None or cand.figures.error < best.figures.error:
            best, worse = cand, 0
        else:
            worse += 1
            if worse >= 2:
                break
    assert best is not None
    p = best.params
    if svt_epsilon(p) > budget_epsilon or ptr_delta(p, queries) > budget_delta:  # pragma: no cover - by search
        raise AssertionError("the chosen stability release exceeds its budget")
    return StabilityPlan(best, queries, budget_epsilon, budget_delta, tuple(search.seen.values()),
                         time.perf_counter() - t0)
