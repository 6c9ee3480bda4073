"""Calibrating a composition-shaped table to a job: the target's scale α that spends the budget.

For a job of Q answers under (ε_B, δ_B) (binary votes, PATE setting) and a target shape β
(:mod:`darrm_opt.model.shaped`), find the smallest scale α whose *certified* shaped table composes within
the budget: ε_Q(α) = exact PLD composition of Q answers of the table's exact pair profile at δ_B
(:func:`darrm_opt.privacy.pld.exact_epsilon`, what the ledger computes) ≤ ε_B. ε_Q is computed for every
table tried, never inferred from the target (the table's profile meets the target only at the slopes and
may exceed it between them).

The first α is the Gaussian's: Q-fold μ-GDP composes to √Q·μ-GDP (Dong, Roth, Su 2022, Cor. 3.3), and
the μ_B with δ_{μ_B}(ε_B) = δ_B (:func:`darrm_opt.privacy.gaussian_profile.gdp_mu`)
gives α₀ = √2·√Q/μ_B (the target of shape 2 at that scale is the curve
of GNMax at the job's budget). ε_Q is smooth in log α, so each next scale is the root of
ε_Q = ε_B(1 − EPS_RTOL/2) on the secant through the last two tables tried: until a bracket [α_lo, α_hi]
(ε_Q(α_lo) > ε_B ≥ ε_Q(α_hi)) is found, extrapolated by a factor in [1.02, 2] in the needed direction
(1.02 while a secant is undefined); then kept inside the bracket (else its midpoint in log α), until the
bracket's relative width is ``rtol`` or ε_Q(α_hi) is within EPS_RTOL·ε_B below ε_B. The table at α_hi is
returned with its composed ε. Each re-solve starts from the previous solve's active rows
(:mod:`darrm_opt.optimize.shaped`). The slope range ends where the target falls to ``floor``
(:func:`darrm_opt.model.shaped.slope_cap`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from darrm_opt.errors import DarrmError, InvalidParameter
from darrm_opt.model.multiclass import MulticlassPrior
from darrm_opt.model.params import Prior
from darrm_opt.model.shaped import ShapedMulticlassParams, ShapedPateParams, slope_cap
from darrm_opt.optimize.shaped import solve_shaped, solve_shaped_multiclass
from darrm_opt.privacy.gaussian_profile import gdp_mu
from darrm_opt.privacy.pair_profile import family_profile, multiclass_family, pate_family
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.profile import PrivacyProfile

#: slopes of a planned table (the issue: 12 overshoot, 120 reach GNMax with the Gaussian target)
SLOPES = 120
#: the target's value at the last slope
FLOOR = 1e-10
#: relative width of the final scale bracket
RTOL = 3e-4
#: or: the table's composed ε is within this fraction below the budget
EPS_RTOL = 2e-4
#: the most tables tried
MAX_STEPS = 40


def shaped_profile(params: ShapedPateParams, gamma) -> PrivacyProfile:
    """The exact privacy profile of a shaped table (:func:`darrm_opt.privacy.pair_profile.family_profile` of
    its pair family), with its certified last slope point (ε_max, δ_T(ε_max)) as a statement."""
    eps, target = params.slope_points()
    return family_profile(pate_family(params.K, np.asarray(gamma, dtype=np.float64)),
                          (float(eps[-1]), float(target[-1])))


def shaped_multiclass_profile(params: ShapedMulticlassParams, gamma) -> PrivacyProfile:
    """The exact privacy profile of a shaped multi-class table (``family_profile`` of its histogram-type
    family), with its certified last slope point as a statement."""
    eps, target = params.slope_points()
    return family_profile(multiclass_family(params.K, params.C, np.asarray(gamma, dtype=np.float64)),
                          (float(eps[-1]), float(target[-1])))


@dataclass(frozen=True)
class ShapedPlan:
    """A calibrated shaped table: its solution (a ShapedSolution or ShapedMulticlassSolution), profile and the
    ε of Q answers at δ_B (≤ ε_B)."""

    solution: Any
    profile: PrivacyProfile
    queries: int
    budget_epsilon: float
    budget_delta: float
    epsilon_spent: float
    tried: int
    seconds: float

    @property
    def params(self) -> Any:
        return self.solution.params


#: the budgets a shaped table is calibrated for: below them the target curve's root finding leaves the
#: range of float64 (a job this strict is served by the other kinds' offers, or refused)
MIN_BUDGET_DELTA = 1e-100
MIN_BUDGET_EPSILON = 1e-6


def calibrate_shaped(K: int, queries: int, budget_epsilon: float, budget_delta: float, prior: Any = "paper",
                     *, beta: float = 3.0, slopes: int = SLOPES, floor: float = FLOOR, rtol: float = RTOL,
                     solver: str = "highs", warm: np.ndarray | None = None, classes: int | None = None,
                     progress: Callable[..., None] | None = None) -> ShapedPlan:
    """The shaped table of shape β with the smallest scale whose Q answers compose within (ε_B, δ_B)
    (module docstring; ``warm``: active rows of an earlier solve of the same K, classes and slopes, e.g.
    another shape's; ``classes``: a multi-class table of rule MC-1, ``prior`` then a multi-class prior).
    InvalidParameter naming ``budget_epsilon`` when no scale up to 10⁶·α₀ fits."""
    try:
        return _calibrate_shaped(K, queries, budget_epsilon, budget_delta, prior, beta=beta, slopes=slopes,
                                 floor=floor, rtol=rtol, solver=solver, warm=warm, classes=classes,
                                 progress=progress)
    except (ValueError, RuntimeError, ArithmeticError) as exc:
        if isinstance(exc, DarrmError):
            raise
        # scipy's root finding of the target curve left float64's range: no table is offered
        raise InvalidParameter("budget_epsilon", "no shaped table could be calibrated for this budget (its target "
                               f"curve leaves float64's range: {exc})", budget_epsilon) from None


def _calibrate_shaped(K: int, queries: int, budget_epsilon: float, budget_delta: float, prior: Any = "paper",
                     *, beta: float = 3.0, slopes: int = SLOPES, floor: float = FLOOR, rtol: float = RTOL,
                     solver: str = "highs", warm: np.ndarray | None = None, classes: int | None = None,
                     progress: Callable[..., None] | None = None) -> ShapedPlan:
    """:func:`calibrate_shaped`, whose float failures that wrapper turns into a refusal."""
    t0 = time.perf_counter()
    if not (isinstance(queries, int) and queries >= 1):
        raise InvalidParameter("queries", "must be an integer >= 1", queries)
    if not MIN_BUDGET_DELTA <= budget_delta < 1:
        raise InvalidParameter("budget_delta", f"a shaped table needs {MIN_BUDGET_DELTA:g} <= budget_delta < 1 "
                               "(its target curve is evaluated in floats)", budget_delta)
    if not budget_epsilon >= MIN_BUDGET_EPSILON:
        raise InvalidParameter("budget_epsilon", f"a shaped table needs budget_epsilon >= {MIN_BUDGET_EPSILON:g}",
                               budget_epsilon)
    pr: Any = Prior.parse(prior) if classes is None else MulticlassPrior.parse(prior)
    alpha0 = math.sqrt(2.0 * queries) / gdp_mu(budget_epsilon, budget_delta)
    start: list[np.ndarray | None] = [warm]
    cache: dict[float, tuple[float, Any, PrivacyProfile]] = {}

    def spent(alpha: float) -> float:
        if alpha not in cache:
            cap = slope_cap(beta, alpha, floor)
            sol: Any
            if classes is None:
                params = ShapedPateParams(K, beta, alpha, slopes, cap, pr)
                sol = solve_shaped(params, solver=solver, warm=start[0])
                prof = shaped_profile(params, sol.gamma)
            else:
                mparams = ShapedMulticlassParams(K, classes, beta, alpha, slopes, cap, pr)
                sol = solve_shaped_multiclass(mparams, solver=solver, warm=start[0])
                prof = shaped_multiclass_profile(mparams, sol.gamma)
            start[0] = sol.active
            eps = exact_epsilon([(prof, queries)], budget_delta)
            cache[alpha] = (eps, sol, prof)
            if progress is not None:
                progress("shaped-scale", beta=beta, scale=alpha, epsilon=eps, error=sol.expected_error)
        return cache[alpha][0]

    B = budget_epsilon
    aim = B * (1.0 - EPS_RTOL / 2)  # the secant aims just inside the budget: its root then ends the search
    tried: list[float] = []  # log α in the order evaluated

    def step(u: float) -> None:
        tried.append(u)
        spent(math.exp(u))

    def secant() -> float | None:
        """The root of the line through the last two evaluated points (log α, ε), if both are finite."""
        if len(tried) < 2:
            return None
        u1, u2 = tried[-2:]
        e1, e2 = spent(math.exp(u1)), spent(math.exp(u2))
        if not (math.isfinite(e1) and math.isfinite(e2)) or e1 == e2:
            return None
        return u2 + (aim - e2) * (u2 - u1) / (e2 - e1)

    step(math.log(alpha0))
    for _ in range(MAX_STEPS):
        fit = [u for u in tried if spent(math.exp(u)) <= B]
        over = [u for u in tried if spent(math.exp(u)) > B]
        if fit and over:
            lo, hi = max(over), min(fit)
            if hi - lo <= math.log1p(rtol) or B - spent(math.exp(hi)) <= EPS_RTOL * B:
                break
            u = secant()
            w = hi - lo
            step(u if u is not None and lo + 0.02 * w < u < hi - 0.02 * w else lo + w / 2)
            continue
        up = not fit  # every table so far spends too much: more noise
        last = tried[-1]
        u = secant()
        if u is None:
            u = last + (1 if up else -1) * math.log(1.02)
        else:  # extrapolate, by a factor in [1.02, 2] in the needed direction
            d = min(max(abs(u - last), math.log(1.02)), math.log(2.0))
            u = last + (d if up else -d)
        if math.exp(u) > 1e6 * alpha0:
            raise InvalidParameter("budget_epsilon", "no shaped table fits this budget", B)
        step(u)
    else:
        raise InvalidParameter("budget_epsilon", f"the scale search did not converge in {MAX_STEPS} steps", B)
    hi = math.exp(min(u for u in tried if spent(math.exp(u)) <= B))
    eps, sol, prof = cache[hi]
    return ShapedPlan(sol, prof, queries, float(budget_epsilon), float(budget_delta), eps, len(cache),
                      time.perf_counter() - t0)
