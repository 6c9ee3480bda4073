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

The search also tries the GNMax fallback (docs/maths.md, "Stability-based release with a GNMax
fallback"): for each cut-off c, SVT shares a of ε_B (FALLBACK_EPSILON_SHARES) and shares b of δ_B for δ_PTR
(FALLBACK_DELTA_SHARES), the test is planned as above within (a·ε_B, b·δ_B) on the split grid, ε_G = ε_B − ε_svt
and σ the least with e^{ε_svt}·δ_G(ε_G) + δ_PTR ≤ δ_B: GNMax's calibration over c answers
(:func:`~darrm_opt.privacy.gnmax.gnmax_sigma_over_answers`) at δ = (δ_B − δ_PTR)/e^{ε_svt} rounded down, then
the exact statement (:func:`~darrm_opt.privacy.stability.fallback_statement`) checked and σ raised until it
holds. Calibrations are cached by (c, ε_G, δ_G), ε_G and δ_G rounded down to FALLBACK_DIGITS significant
digits. The plan is the better of the searches with and without fallback. For class labels a fallback
candidate's figure uses an upper bound of its error (:func:`~darrm_opt.privacy.stability.multiclass_fallback_wrong`,
which needs GNMax's own error, seconds per σ): every candidate is first evaluated at a floor of that figure
(:func:`~darrm_opt.privacy.stability.multiclass_fallback_floor`), and only those whose floor is below the best
figure found are settled, in increasing order of their floors.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.stability import (
    MAX_INT,
    DistanceLaw,
    Fallback,
    JobError,
    SvtParams,
    binary_fallback_wrong,
    binary_law,
    fallback_statement,
    job_error,
    multiclass_fallback_floor,
    multiclass_fallback_wrong,
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
#: with the GNMax fallback: the SVT's shares of ε_B, δ_PTR's shares of δ_B and the threshold's shares of the
#: SVT's ε tried, and the cut-offs (every one is tried: the error is not unimodal in c, a large c answers almost
#: every query by GNMax), with min(Q, 1024)
FALLBACK_EPSILON_SHARES = (0.2, 0.5, 0.8)
FALLBACK_DELTA_SHARES = (0.1, 0.5, 0.9)
FALLBACK_SPLITS = (0.3, 0.6)
FALLBACK_CUTOFFS = (1, 4, 16, 64, 256, 1024)
#: significant digits ε_G and δ_G are rounded down to (a calibration serves every test of its key)
FALLBACK_DIGITS = 2
#: GNMax is calibrated at this share of δ_G (the discrete pair's pessimistic PLD is above the continuous δ)
CALIBRATION_SHARE = 0.98
#: σ is raised by this factor until the exact statement fits the budget
SIGMA_STEP = 1.002


@dataclass(frozen=True)
class StabilityCandidate:
    """One evaluated parameter set and its exact figures."""

    params: SvtParams
    split: float
    epsilon: float
    delta: float
    figures: JobError
    fallback: Fallback | None = None

    def to_dict(self) -> dict[str, Any]:
        fb = self.fallback
        return {**self.params.canonical(), "split": self.split, "epsilon": self.epsilon, "delta": self.delta,
                "fallback_sigma": None if fb is None else fb.sigma,
                "fallback_epsilon": None if fb is None else fb.epsilon,
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


def fallback_wrong(K: int, classes: int | None, prior: str, sigma: float, floor: bool = False) -> np.ndarray:
    """The GNMax fallback's gw[d] for 0/1 votes (:func:`~darrm_opt.privacy.stability.binary_fallback_wrong`,
    exact) or its upper bound gw* for C class labels
    (:func:`~darrm_opt.privacy.stability.multiclass_fallback_wrong`; with ``floor`` its cheap floor,
    :func:`~darrm_opt.privacy.stability.multiclass_fallback_floor`), the prior read as :func:`distance_law`
    reads it."""
    from darrm_opt.planning.job import normal_prior

    if classes is None:
        return binary_fallback_wrong(K, prior, sigma)
    bound = multiclass_fallback_floor if floor else multiclass_fallback_wrong
    return bound(K, classes, normal_prior(prior, classes), sigma)


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
        self.tests: dict[tuple[int, int, int], SvtParams] = {}

    def __call__(self, cutoff: int, split: float) -> StabilityCandidate:
        p = self.svt(cutoff, split)
        key = (cutoff, p.t_rho, p.t_nu)
        if key not in self.seen:
            self.seen[key] = StabilityCandidate(p, split, svt_epsilon(p), ptr_delta(p, self.Q),
                                                job_error(p, self.law, self.Q))
        return self.seen[key]

    def svt(self, cutoff: int, split: float) -> SvtParams:
        """The test of cut-off c and threshold share ``split`` within the search's (ε, δ) (module docstring)."""
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
        if key not in self.tests:
            self.tests[key] = SvtParams(s, t_rho, t_nu, least_threshold(s, t_rho, t_nu, cutoff, self.Q, self.delta),
                                        cutoff)
        return self.tests[key]

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


def _floor_digits(x: float, digits: int = FALLBACK_DIGITS) -> float:
    """x rounded down to ``digits`` significant decimal digits (a float ≤ x)."""
    if x <= 0:
        return 0.0
    e = math.floor(math.log10(x)) - digits + 1
    v = math.floor(x / 10.0**e) * 10.0**e
    while v > x:
        v = math.nextafter(v, 0.0)
    return v


class _FallbackSearch:
    """Candidates with the GNMax fallback (module docstring), 0/1 votes (``classes`` None) or class labels."""

    def __init__(self, K: int, classes: int | None, prior: str, law: DistanceLaw, queries: int,
                 budget_epsilon: float, budget_delta: float) -> None:
        self.K, self.classes, self.prior, self.law, self.Q = K, classes, prior, law, queries
        self.eps, self.delta = budget_epsilon, budget_delta
        self.searches = {(a, b): _Search(law, queries, a * budget_epsilon, b * budget_delta)
                         for a in FALLBACK_EPSILON_SHARES for b in FALLBACK_DELTA_SHARES}
        self.sigmas: dict[tuple[int, float, float], float | None] = {}
        self.seen: dict[tuple[SvtParams, Fallback], StabilityCandidate] = {}

    def sigma(self, p: SvtParams) -> Fallback | None:
        """The fallback of least σ whose statement with the test ``p`` is within the budget, or None."""
        from darrm_opt.privacy.gnmax import gnmax_sigma_over_answers

        e_svt = p.epsilon_threshold + p.epsilon_queries
        eps_g = _floor_digits(float(Fraction(self.eps) - e_svt) * (1 - 1e-12))
        rest = self.delta - ptr_delta(p, self.Q)
        if eps_g <= 0 or rest <= 0:
            return None
        delta_g = _floor_digits(rest / math.exp(float(e_svt)) * (1 - 1e-9))
        key = (p.cutoff, eps_g, delta_g)
        if key not in self.sigmas:
            sigma: float | None = gnmax_sigma_over_answers(p.cutoff, eps_g, delta_g * CALIBRATION_SHARE)
            for _ in range(64):
                if sigma is None or sigma > 1e4:
                    sigma = None
                    break
                e, d = fallback_statement(p, self.Q, Fallback(sigma, eps_g))
                if e <= self.eps and d <= self.delta:
                    break
                sigma *= SIGMA_STEP
            else:  # pragma: no cover - the PLD's pessimism is far below 0.2^64
                sigma = None
            self.sigmas[key] = sigma
        sigma = self.sigmas[key]
        return None if sigma is None else Fallback(sigma, eps_g)

    def candidate(self, p: SvtParams, split: float) -> StabilityCandidate | None:
        fb = self.sigma(p)
        if fb is None:
            return None
        if (p, fb) not in self.seen:
            e, d = fallback_statement(p, self.Q, fb)
            if e > self.eps or d > self.delta:  # the cached σ was checked with another test
                return None
            # class labels: the floor now; :meth:`refine` computes the figure of the candidates that may win
            gw = fallback_wrong(self.K, self.classes, self.prior, fb.sigma, floor=True)
            self.seen[(p, fb)] = StabilityCandidate(p, split, e, d, job_error(p, self.law, self.Q,
                                                                               fallback_wrong=gw), fb)
        return self.seen[(p, fb)]

    def refine(self, floor: StabilityCandidate) -> StabilityCandidate:
        """A class-label candidate evaluated at its floor, with the figures of its bound gw*."""
        fb = floor.fallback
        assert fb is not None
        gw = fallback_wrong(self.K, self.classes, self.prior, fb.sigma)
        return StabilityCandidate(floor.params, floor.split, floor.epsilon, floor.delta,
                                  job_error(floor.params, self.law, self.Q, fallback_wrong=gw), fb)

    def settle(self, incumbent: float) -> list[StabilityCandidate]:
        """The class-label candidates refined in increasing order of their floors, until the next floor is no
        better than the best figure found (``incumbent``: the best without fallback, then the best refined);
        the candidates passed over cannot beat it (floor ≤ figure)."""
        out: list[StabilityCandidate] = []
        for cand in sorted(self.seen.values(), key=lambda c: c.figures.error):
            if cand.figures.error >= incumbent:
                break
            out.append(self.refine(cand))
            incumbent = min(incumbent, out[-1].figures.error)
        return out

    def fill(self, cutoff: int) -> None:
        """Every candidate with cut-off ``cutoff`` (each budget share and split) that fits the budget, into
        :attr:`seen`."""
        for search in self.searches.values():
            least = search.least_split()
            for f in FALLBACK_SPLITS:
                if f < least:
                    continue
                try:
                    self.candidate(search.svt(cutoff, f), f)
                except InvalidParameter:
                    continue


def plan_stability(K: int, classes: int | None, prior: str, queries: int, budget_epsilon: float,
                   budget_delta: float, cutoffs: tuple[int, ...] = CUTOFFS, fallback: bool = True) -> StabilityPlan:
    """The stability-based release of least exact expected error (⊥ counted as an error) whose job-wide
    (ε, δ) is within (ε_B, δ_B) (module docstring), with or without the GNMax fallback (``fallback``
    False: without only). InvalidParameter naming the budget when none is."""
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
    found = list(search.seen.values())
    if fallback:
        fbs = _FallbackSearch(K, classes, prior, search.law, queries, min(budget_epsilon, MAX_EPSILON), budget_delta)
        for c in sorted({c for c in FALLBACK_CUTOFFS if c < queries} | {min(queries, FALLBACK_CUTOFFS[-1])}):
            fbs.fill(c)
        # class labels: the figures so far are floors; settle the candidates that may beat the best
        settled = list(fbs.seen.values()) if classes is None else fbs.settle(best.figures.error)
        found += settled
        fb_best = min(settled, key=lambda c: c.figures.error, default=None)
        if fb_best is not None and fb_best.figures.error < best.figures.error:
            best = fb_best
    p = best.params
    if best.fallback is None:
        stated = (svt_epsilon(p), ptr_delta(p, queries))
    else:
        stated = fallback_statement(p, queries, best.fallback)
    if stated[0] > budget_epsilon or stated[1] > budget_delta:  # pragma: no cover - by search
        raise AssertionError("the chosen stability release exceeds its budget")
    return StabilityPlan(best, queries, budget_epsilon, budget_delta, tuple(found), time.perf_counter() - t0)
