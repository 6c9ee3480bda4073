"""Privacy accounting for a ledger of DaRRM answers.

Every released answer of a table for ``Params`` is an (ε₀, δ₀) = (mε, δ)-DP binary mechanism. A ledger
holds answers of possibly several tables, i.e. *groups* of k_g answers of cost (ε_g, δ_g), and must state
one (ε, δ) guarantee for all of them under adaptive composition. This module computes several valid
guarantees and picks the tightest.

Basic composition (``basic``)
    (Σ_g k_g ε_g, 1 − Π_g (1 − δ_g)^{k_g}). This is the i = 0 case of the optimal composition theorem below
    (and its heterogeneous form), never larger than the textbook Σ k δ.

Optimal composition of k answers of one cost (``optimal``; Kairouz, Oh, Viswanath 2015, Thm 3.3)
    The k-fold adaptive composition of (ε₀, δ₀)-DP mechanisms is dominated by the k-fold product of the
    canonical mechanism V(ε₀, δ₀) (reveal the bit with probability δ₀, otherwise randomised response with
    q = e^{ε₀}/(1 + e^{ε₀})), and that product is itself such a composition, so its privacy profile is
    exact. With J the number of agreeing coordinates, J ~ Bin(k, q) under D and Bin(k, 1 − q) under D′:

        δ(ε) = 1 − (1 − δ₀)^k (1 − δ_rr(ε)),
        δ_rr(ε) = Σ_{j : (2j − k)ε₀ > ε} C(k, j) (e^{jε₀} − e^{ε} e^{(k−j)ε₀}) / (1 + e^{ε₀})^k
                = P[Bin(k, q) ≥ j*] − e^{ε} P[Bin(k, 1 − q) ≥ j*],   j* = ⌊(k + ε/ε₀)/2⌋ + 1.

    At ε = (k − 2i)ε₀ this is Thm 3.3's δ_i = Σ_{l<i} C(k, l)(e^{(k−l)ε₀} − e^{(k−2i+l)ε₀}) / (1 + e^{ε₀})^k.
    δ_rr is continuous and decreasing, zero for ε ≥ kε₀, and linear in e^{ε} between the breakpoints
    (2j − k)ε₀. ε(δ), the smallest ε with δ(ε) ≤ δ, is found by bisection over the breakpoints followed by
    the closed form e^{ε} = (P[Bin(k, q) ≥ j*] − s) / P[Bin(k, 1 − q) ≥ j*] on the bracketing segment, where
    s = (δ − δ_basic)/(1 − δ_basic) is the share of the target left for the randomised-response part.
    Binomial tails come from ``scipy.special.bdtrc`` (regularised incomplete beta), O(log k) per query.

Heterogeneous answers (several costs in one ledger); each is valid, the smallest ε is used
    - ``optimal-dominating``: an (ε_g, δ_g)-DP mechanism is also (max ε, max δ)-DP, so the k = Σ k_g answers
      are covered by the optimal composition at the largest cost;
    - ``optimal-grouped``: each group's k_g answers compose optimally to (ε′_g, δ′_g) and the groups compose
      by basic composition, (Σ ε′_g, 1 − Π (1 − δ′_g)); the split of the target δ between groups
      (Π_g (1 − s_g) = 1 − s) is chosen greedily in equal steps of −log(1 − s_g);
    - ``kov-heterogeneous`` (Kairouz, Oh, Viswanath 2015, Thm 3.5): for δ̃ ∈ (0, 1],
      ε = min{ Σ ε_l, Σ ε_l tanh(ε_l/2) + √(2 Σ ε_l² log(e + √(Σ ε_l²)/δ̃)),
               Σ ε_l tanh(ε_l/2) + √(2 Σ ε_l² log(1/δ̃)) },  δ = 1 − (1 − δ̃) Π_l (1 − δ_l).

Exact composition of the tables' own privacy profiles (``exact``)
    When the ledger knows the privacy profile of every table it answered (darrm_opt.privacy.profile), the
    answers are dominated by the product of the tables' dominating pairs, composed through dp_accounting's
    privacy loss distributions with pessimistic discretisation (darrm_opt.privacy.pld): ε at the target δ,
    an upper bound, usually far below the generic bounds (which treat each answer as an arbitrary
    (mε, δ)-DP mechanism).

Every method other than ``basic`` is evaluated at a target δ (the ledger's δ budget) and returns
(smallest ε, target δ). Floating point: the randomised-response share s is reduced by a relative 1e-9
before solving for ε and the solved ε is rounded up by a relative 1e-12 (plus 1e-15), which keeps the
reported ε on the safe side of the float64 evaluation error of the binomial tails (about 1e-13 relative)
and of the logarithms. Sums of ε (basic composition, kε₀) are exact sums of the float inputs rounded once
to the nearest float, so budgets written as decimals behave as decimals (5 × 0.2 = 1.0).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from scipy.special import bdtrc, expit

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.composition import Guarantee, compose_delta
from darrm_opt.privacy.adaptive import (
    BASIC_FILTER,
    EXACT,
    ZCDP_FILTER,
    adaptive_parts,
    zcdp_epsilon,
    zcdp_rho,
)

#: relative reduction of the randomised-response share of δ before solving for ε (float safety).
SAFETY = 1e-9
#: relative upward rounding of an ε solved in closed form (float64 logarithms).
EPS_ROUND_UP = 1e-12
#: steps of the greedy split of δ between groups in ``optimal-grouped``.
SPLIT_STEPS = 24

BASIC = "basic"
OPTIMAL = "optimal"
OPTIMAL_DOMINATING = "optimal-dominating"
OPTIMAL_GROUPED = "optimal-grouped"
KOV_HETEROGENEOUS = "kov-heterogeneous"


@dataclass(frozen=True)
class Group:
    """``count`` answers, each (``epsilon``, ``delta``)-DP."""

    epsilon: float
    delta: float
    count: int

    def __post_init__(self) -> None:
        _check_cost(self.epsilon, self.delta)
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise InvalidParameter("count", "must be an integer >= 0", self.count)


#: An (ε, δ)-DP guarantee for a set of answers and the rule that gives it.
Spend = Guarantee


@dataclass(frozen=True)
class Accounting:
    """The chosen (tightest valid) spend and every method's bound."""

    spend: Spend
    bounds: dict[str, Spend] = field(default_factory=dict)

    def within(self, epsilon_budget: float, delta_budget: float) -> bool:
        return self.spend.epsilon <= epsilon_budget and self.spend.delta <= delta_budget


def _check_cost(epsilon: float, delta: float) -> None:
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise InvalidParameter("epsilon", "must be a finite number > 0", epsilon)
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise InvalidParameter("delta", "must satisfy 0 <= delta < 1", delta)


def exact_sum(terms: Iterable[tuple[int, float]]) -> float:
    """Σ count·value over the exact binary values of the floats, rounded once to the nearest float.

    Budgets and costs are decimal numbers written as floats, so 5 answers of ε₀ = 0.2 spend exactly the
    ε = 1.0 a user expects (the real-number sum of five float 0.2s is 1 + 5.6e-17)."""
    return float(sum((Fraction(v) * n for n, v in terms), Fraction(0)))


def _check_target(delta: float) -> None:
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise InvalidParameter("delta", "must satisfy 0 <= delta < 1", delta)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidParameter("k", "must be an integer >= 1", k)


# ---------------------------------------------------------------------------------------------------------
# One cost: the exact profile of k-fold composition (Kairouz, Oh, Viswanath 2015, Thm 3.3)
# ---------------------------------------------------------------------------------------------------------
class _RR:
    """The randomised-response part of k-fold V(ε₀, δ₀): tails and δ_rr."""

    __slots__ = ("eps0", "k", "q", "qbar", "top")

    def __init__(self, eps0: float, k: int) -> None:
        self.eps0 = float(eps0)
        self.k = int(k)
        self.q = float(expit(eps0))  # e^ε₀ / (1 + e^ε₀)
        self.qbar = float(expit(-eps0))  # 1 / (1 + e^ε₀), accurate for large ε₀
        self.top = exact_sum([(self.k, self.eps0)])  # kε₀: δ_rr = 0 from here on

    def tails(self, j: int) -> tuple[float, float]:
        """(P[Bin(k, q) ≥ j], P[Bin(k, 1 − q) ≥ j])."""
        if j <= 0:
            return 1.0, 1.0
        if j > self.k:
            return 0.0, 0.0
        return float(bdtrc(j - 1, self.k, self.q)), float(bdtrc(j - 1, self.k, self.qbar))

    def on_segment(self, j: int, eps: float) -> float:
        """A(j) − e^ε B(j): δ_rr(ε) when {i : (2i − k)ε₀ > ε} = {j, …, k}.

        When B underflows the subtracted term is dropped, which can only overstate δ_rr (safe side)."""
        a, b = self.tails(j)
        if a <= 0.0:
            return 0.0
        sub = math.exp(eps + math.log(b)) if b > 0.0 else 0.0
        return max(a - sub, 0.0)

    def first_index(self, eps: float) -> int:
        """Smallest j with (2j − k)ε₀ > ε."""
        return int(math.floor((self.k + eps / self.eps0) / 2.0)) + 1

    def delta(self, eps: float) -> float:
        if eps >= self.top:
            return 0.0
        return self.on_segment(self.first_index(max(eps, 0.0)), max(eps, 0.0))

    def breakpoint(self, j: int) -> float:
        return (2 * j - self.k) * self.eps0

    def epsilon(self, s: float) -> float:
        """Smallest ε ≥ 0 with δ_rr(ε) ≤ s (s ≥ 0): bisection over breakpoints, then the closed form."""
        top = self.top
        if s <= 0.0:
            return top
        if self.delta(0.0) <= s:
            return 0.0
        # δ_rr at breakpoint b_j uses the set {j+1..k} (term j vanishes there); decreasing in j.
        lo = self.k // 2 + 1  # smallest j with b_j > 0
        hi = self.k  # δ_rr(b_k) = 0 <= s
        if self.on_segment(lo + 1, self.breakpoint(lo)) <= s:
            hi = lo
        else:
            while hi - lo > 1:  # invariant: δ_rr(b_lo) > s >= δ_rr(b_hi)
                mid = (lo + hi) // 2
                if self.on_segment(mid + 1, self.breakpoint(mid)) <= s:
                    hi = mid
                else:
                    lo = mid
        j = hi  # ε lies in [max(0, b_{j−1}), b_j], where δ_rr(ε) = A(j) − e^ε B(j)
        left = max(self.breakpoint(j - 1), 0.0)
        # on the last segment the right end is kε₀, which ``top`` may round down by half an ulp
        right = math.nextafter(top, math.inf) if j == self.k else self.breakpoint(j)
        a, b = self.tails(j)
        if b <= 0.0 or a - s <= 0.0:
            return right  # ill-conditioned in float64: the segment's right end is always valid
        eps = math.log(a - s) - math.log(b)
        eps = eps * (1.0 + EPS_ROUND_UP) + 1e-15  # cover the rounding of the logarithms
        return min(max(eps, left), right)


def optimal_delta(epsilon0: float, delta0: float, k: int, epsilon: float) -> float:
    """Exact δ(ε) of k-fold composition of (ε₀, δ₀)-DP mechanisms (the privacy profile, Thm 3.3)."""
    _check_cost(epsilon0, delta0)
    _check_k(k)
    if not (isinstance(epsilon, (int, float)) and epsilon >= 0 and not math.isnan(epsilon)):
        raise InvalidParameter("epsilon", "must be a number >= 0", epsilon)
    base = compose_delta(delta0, k)
    return base + (1.0 - base) * _RR(epsilon0, k).delta(float(epsilon))


def optimal_epsilon(epsilon0: float, delta0: float, k: int, delta: float) -> float:
    """Smallest ε with k answers of (ε₀, δ₀) being (ε, δ)-DP; ``inf`` when δ < 1 − (1 − δ₀)^k."""
    _check_cost(epsilon0, delta0)
    _check_k(k)
    _check_target(delta)
    base = compose_delta(delta0, k)
    if delta < base:
        return math.inf
    s = (delta - base) / (1.0 - base) * (1.0 - SAFETY)
    return _RR(epsilon0, k).epsilon(s)


def _rr_share(base: float, delta: float) -> float | None:
    """s with 1 − δ = (1 − base)(1 − s), reduced by SAFETY; None when δ < base."""
    if delta < base:
        return None
    return (delta - base) / (1.0 - base) * (1.0 - SAFETY)


# ---------------------------------------------------------------------------------------------------------
# Ledger methods
# ---------------------------------------------------------------------------------------------------------
def merge_groups(groups: Iterable[Group | tuple[float, float, int]]) -> list[Group]:
    """Groups with identical (ε, δ) merged, empty ones dropped, in a stable order."""
    counts: dict[tuple[float, float], int] = {}
    for g in groups:
        g = g if isinstance(g, Group) else Group(float(g[0]), float(g[1]), int(g[2]))
        if g.count:
            key = (float(g.epsilon), float(g.delta))
            counts[key] = counts.get(key, 0) + g.count
    return [Group(e, d, n) for (e, d), n in sorted(counts.items())]


def _base_delta(groups: Sequence[Group]) -> float:
    """1 − Π_g (1 − δ_g)^{k_g}, without cancellation."""
    return -math.expm1(math.fsum(g.count * math.log1p(-g.delta) for g in groups))


def basic(groups: Sequence[Group]) -> Spend:
    """(Σ k_g ε_g, 1 − Π (1 − δ_g)^{k_g})."""
    return Spend(exact_sum((g.count, g.epsilon) for g in groups), _base_delta(groups), BASIC)


def optimal(epsilon0: float, delta0: float, k: int, delta: float) -> Spend:
    """Thm 3.3 at target δ: (ε(δ), δ); ε = inf when the target is below 1 − (1 − δ₀)^k."""
    return Spend(optimal_epsilon(epsilon0, delta0, k, delta), delta, OPTIMAL)


def optimal_dominating(groups: Sequence[Group], delta: float) -> Spend:
    k = sum(g.count for g in groups)
    eps = max(g.epsilon for g in groups)
    d0 = max(g.delta for g in groups)
    return Spend(optimal_epsilon(eps, d0, k, delta), delta, OPTIMAL_DOMINATING)


def optimal_grouped(groups: Sequence[Group], delta: float, steps: int = SPLIT_STEPS) -> Spend:
    s = _rr_share(_base_delta(groups), delta)
    if s is None:
        return Spend(math.inf, delta, OPTIMAL_GROUPED)
    rrs = [_RR(g.epsilon, g.count) for g in groups]
    total = -math.log1p(-s)  # Σ_g −log(1 − s_g) must not exceed this
    step = total / steps
    x = [0.0] * len(groups)

    def eps_at(i: int, xi: float) -> float:
        return rrs[i].epsilon(-math.expm1(-xi))

    current = [eps_at(i, 0.0) for i in range(len(groups))]
    nxt = [eps_at(i, step) for i in range(len(groups))]
    for _ in range(steps):
        gains = [current[i] - nxt[i] for i in range(len(groups))]
        i = max(range(len(groups)), key=gains.__getitem__)
        if gains[i] <= 0.0:
            break
        x[i] += step
        current[i] = nxt[i]
        nxt[i] = eps_at(i, x[i] + step)
    return Spend(exact_sum((1, c) for c in current), delta, OPTIMAL_GROUPED)


def kov_heterogeneous(groups: Sequence[Group], delta: float) -> Spend:
    s = _rr_share(_base_delta(groups), delta)
    if s is None:
        return Spend(math.inf, delta, KOV_HETEROGENEOUS)
    total = exact_sum((g.count, g.epsilon) for g in groups)
    if s <= 0.0:
        return Spend(total, delta, KOV_HETEROGENEOUS)
    drift = math.fsum(g.count * g.epsilon * math.tanh(g.epsilon / 2.0) for g in groups)
    sq = math.fsum(g.count * g.epsilon**2 for g in groups)
    a = drift + math.sqrt(2.0 * sq * math.log(math.e + math.sqrt(sq) / s))
    b = drift + math.sqrt(2.0 * sq * math.log(1.0 / s))
    return Spend(min(total, a, b), delta, KOV_HETEROGENEOUS)


def exact(profiles: Iterable[tuple[Any, int]], delta: float, *, coarse: bool = False) -> Spend:
    """Exact composition at target δ of ``count`` answers of each (PrivacyProfile, count) (``coarse``: on the
    coarser grid of :func:`darrm_opt.privacy.pld.exact_epsilon`, still an upper bound)."""
    from darrm_opt.privacy.pld import exact_epsilon

    return Spend(exact_epsilon(profiles, delta, coarse=coarse), delta, EXACT)


def account(groups: Iterable[Group | tuple[float, float, int]], delta_budget: float,
            profiles: Sequence[tuple[Any, int]] | None = None, *, coarse: bool = False,
            adaptive: bool = False) -> Accounting:
    """Every method's bound for ``groups`` at target ``delta_budget`` and the tightest valid one.

    ``profiles``: the (PrivacyProfile or None, count) of the same answers; when every table's profile is
    known (no None) and ``delta_budget`` > 0 it adds the ``exact`` bound. The tightest is the smallest ε
    among bounds with δ ≤ ``delta_budget``; ties go to ``basic`` (listed first). When no bound meets the δ
    target, ``basic`` is returned (it has the smallest δ of all).

    ``adaptive``: the answers' tables may have been chosen after earlier answers (a ledger). Then only the
    bounds valid for such a sequence are used (:mod:`darrm_opt.privacy.adaptive`): with several costs, basic
    composition as a filter (Σε, Σδ) and the optimal composition at the largest cost, not the fixed-sequence
    ``optimal-grouped`` and ``kov-heterogeneous``; with several profiles, the exact composition of the one that
    dominates all (``exact-dominating``) or, for Gaussian pairs, the zCDP filter, never the exact composition
    of the different pairs.
    """
    _check_target(delta_budget)
    merged = merge_groups(groups)
    if not merged:
        none = Spend(0.0, 0.0, BASIC)
        return Accounting(none, {BASIC: none})
    if len(merged) == 1:
        g = merged[0]
        candidates = [basic(merged), optimal(g.epsilon, g.delta, g.count, delta_budget)]
    elif adaptive:
        candidates = [basic_filter(merged), optimal_dominating(merged, delta_budget)]
    else:
        candidates = [
            basic(merged),
            optimal_dominating(merged, delta_budget),
            optimal_grouped(merged, delta_budget),
            kov_heterogeneous(merged, delta_budget),
        ]
    if profiles is not None and delta_budget > 0 and all(p is not None for p, _ in profiles):
        if sum(n for _, n in profiles) != sum(g.count for g in merged):
            raise InvalidParameter("profiles", "must count the same answers as the groups")
        if not adaptive:
            candidates.append(exact(profiles, delta_budget, coarse=coarse))
        else:
            parts, _, method = adaptive_parts(profiles)
            if parts is not None:
                candidates.append(Spend(exact(parts, delta_budget, coarse=coarse).epsilon, delta_budget, method))
            else:
                zcdp = zcdp_filter(profiles, delta_budget)
                if zcdp is not None:
                    candidates.append(zcdp)
    feasible = [c for c in candidates if c.delta <= delta_budget and math.isfinite(c.epsilon)]
    chosen = min(feasible, key=lambda c: c.epsilon) if feasible else candidates[0]
    return Accounting(chosen, {c.method: c for c in candidates})


def basic_filter(groups: Sequence[Group]) -> Spend:
    """(Σ k_g ε_g, Σ k_g δ_g rounded up): basic composition as a privacy filter, valid for adaptively chosen
    costs (Rogers, Roth, Ullman, Vadhan 2016, Thm 3.6)."""
    d = math.fsum(g.count * g.delta for g in groups)
    d = math.nextafter(d * (1 + 1e-15), math.inf) if d > 0 else 0.0
    return Spend(exact_sum((g.count, g.epsilon) for g in groups), min(d, 1.0), BASIC_FILTER)


def zcdp_filter(profiles: Sequence[tuple[Any, int]], delta: float) -> Spend | None:
    """The zCDP filter's (ε, δ) of Gaussian answers (:mod:`darrm_opt.privacy.adaptive`); None when a profile
    is not a Gaussian pair."""
    rho = zcdp_rho(profiles)
    if rho is None:
        return None
    return Spend(zcdp_epsilon(rho, delta), delta, ZCDP_FILTER)


def with_bound(acc: Accounting, bound: Spend, delta_budget: float) -> Accounting:
    """``acc`` with one more valid bound of the same answers: the spend becomes ``bound`` when it meets the δ
    target with a finite ε smaller than the spend's (or the spend does not meet it); ties keep the spend."""
    chosen = acc.spend
    chosen_ok = chosen.delta <= delta_budget and math.isfinite(chosen.epsilon)
    if bound.delta <= delta_budget and math.isfinite(bound.epsilon) and (not chosen_ok or
                                                                          bound.epsilon < chosen.epsilon):
        chosen = bound
    return Accounting(chosen, {**acc.bounds, bound.method: bound})


def tightest(groups: Iterable[Group | tuple[float, float, int]], delta_budget: float) -> Spend:
    """The tightest valid spend (ε, δ, method) of ``groups`` at target ``delta_budget``."""
    return account(groups, delta_budget).spend
