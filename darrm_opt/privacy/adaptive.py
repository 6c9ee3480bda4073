"""Which compositions stay valid when a ledger is paid adaptively (tables chosen after earlier answers).

A ledger pays a debit when the composition of everything paid so far plus the new answers fits its budget: a
*privacy filter*. Which composition may be used depends on what the client may choose adaptively (each debit's
table may depend on every answer released before it):

``exact`` — one profile. When every answer the ledger paid was released by tables of one privacy profile, every
    answer is dominated by that one pair (P, Q), and any adaptive sequence of k such answers is dominated by the
    product (P, Q)^k (Zhu, Dong, Wang 2022, Thm 10). The family {(P, Q)^k} is totally ordered, so stopping at
    the budget is the natural filter of a totally ordered family, which is valid ("f-DP filters: validity and
    approximate solutions", arXiv 2602.06756; "Natural privacy filters are not always free", arXiv
    2602.15815): the ledger's guarantee is the composition of the largest count it can pay. A plan's table and
    count, and any ledger paid by one table, are this case.

``exact-dominating`` — several profiles, one of which dominates every other (its tradeoff curve lies below
    theirs everywhere, :meth:`darrm_opt.privacy.profile.PrivacyProfile.dominates`; for continuous Gaussian
    pairs of the same shifts, every σ_i smaller or equal). Every answer is then dominated by that one pair, and
    the ledger composes k = (all answers) copies of it: the case above with the dominating pair. When no table's
    profile dominates the others (γ tables of different allowances cross), their *join* does
    (:func:`join`): in the (b, a) = (Q-mass, P-mass) coordinates of :mod:`darrm_opt.privacy.profile` it is the
    upper concave hull of every envelope's vertices, raised by JOIN_MARGIN, the least concave curve above all
    of them; its pair dominates every table's (Dong, Roth, Su 2022, Prop. 2.12), so the same argument holds.

``zcdp-filter`` — several Gaussian pairs with no dominating one. Each is ρ_i-zCDP with ρ_i = μ_i²/2
    (continuous: Bun–Steinke 2016, Prop. 1.6; discrete: Canonne, Kamath, Steinke 2020, Thm 4, the same ρ), so
    at every Rényi order α its answer costs αρ_i. Feldman and Zrnic's Rényi filter (2021, Thm 3.3) is valid
    under full adaptivity at each order; "Σρ_i ≤ ρ_B" is that filter at every order at once, so the whole
    interaction is ρ-zCDP with ρ = Σρ_i, and ρ-zCDP gives (ε, δ)-DP for
    ε = min_α αρ + (ln(1/δ) + (α − 1) ln(1 − 1/α) − ln α)/(α − 1) (Canonne, Kamath, Steinke 2020, Prop. 12).

``optimal`` / ``optimal-dominating`` — the generic bounds that treat every answer as an (ε₀, δ₀)-DP mechanism:
    Kairouz, Oh, Viswanath (2015, Thm 3.3) covers k adaptively chosen (ε₀, δ₀)-DP mechanisms (one canonical
    pair dominates them all), at the largest (ε₀, δ₀) of the ledger when several costs are mixed.

``basic-filter`` — any mix: Σ ε_i and Σ δ_i within the budget (Rogers, Roth, Ullman, Vadhan 2016, Thm 3.6:
    basic composition is a valid filter for adaptively chosen parameters).

Not valid for an adaptive mix, so a ledger never uses them once its answers come from several profiles: the
exact composition of the different pairs (the natural filter of a family that is not totally ordered), and the
heterogeneous bounds of a *fixed* sequence of costs (``optimal-grouped``, ``kov-heterogeneous``: Kairouz et al.
Thm 3.5 fixes the sequence in advance).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from darrm_opt.privacy.gaussian_profile import GaussianProfile

EXACT = "exact"
EXACT_DOMINATING = "exact-dominating"
ZCDP_FILTER = "zcdp-filter"
BASIC_FILTER = "basic-filter"

#: relative upward rounding of the ε of the zCDP conversion (float logarithms)
EPS_ROUND_UP = 1e-12


def dominates(a: Any, b: Any) -> bool:
    """Whether profile ``a``'s pair dominates ``b``'s (every answer of ``b`` is also an answer of ``a``'s
    privacy): equal profiles; tradeoff envelopes by :meth:`PrivacyProfile.dominates`; Gaussian pairs of the
    same kind of noise and the same shifts with every coordinate's σ at most ``b``'s (a smaller σ is a
    post-processing away: add the difference of variances as noise, continuous; or compare the exact
    discrete pairs' δ(ε), which the ledger never needs)."""
    if a == b:
        return True
    if isinstance(a, GaussianProfile) and isinstance(b, GaussianProfile):
        return (not a.discrete and not b.discrete and a.shifts == b.shifts
                and all(x <= y for x, y in zip(a.coordinate_sigmas, b.coordinate_sigmas, strict=True)))
    if isinstance(a, GaussianProfile) or isinstance(b, GaussianProfile):
        return False
    return bool(a.dominates(b))


def adaptive_parts(parts: Sequence[tuple[Any, int]]) -> tuple[tuple[tuple[Any, int], ...] | None, Any, str]:
    """The parts whose exact composition is valid for a ledger paid adaptively (module docstring):
    (parts, the profile every new answer is composed as, method). One profile: the parts themselves
    (``exact``). Several with one dominating the rest: (dominating, all answers) (``exact-dominating``). Else
    (None, None, "") — no exact composition is valid."""
    live = [(p, n) for p, n in parts if n]
    distinct: list[Any] = []
    for p, _ in live:
        if p not in distinct:
            distinct.append(p)
    if len(distinct) <= 1:
        return tuple(live), (distinct[0] if distinct else None), EXACT
    total = sum(n for _, n in live)
    for cand in distinct:
        if all(dominates(cand, other) for other in distinct):
            return ((cand, total),), cand, EXACT_DOMINATING
    if not any(isinstance(p, GaussianProfile) for p in distinct):
        top = join(distinct)
        return ((top, total),), top, EXACT_DOMINATING
    return None, None, ""


#: added to every vertex of a join (but (1, 1)): the hull's float error (its chords pass through original
#: vertices, so only the orientation test of a nearly collinear vertex can err, by a few ulps)
JOIN_MARGIN = 1e-15


def join(profiles: Sequence[Any]) -> Any:
    """The least tradeoff envelope above every profile's (module docstring): the upper concave hull of all
    their vertices (monotone chain from b = 0 to b = 1; a vertex on or below the chord of its neighbours is
    dropped), every vertex but (1, 1) raised by JOIN_MARGIN (capped at 1). No swept statements are kept (each
    table's are valid for it alone); :meth:`PrivacyProfile.delta` then reads the envelope."""
    from darrm_opt.privacy.profile import PrivacyProfile

    points: dict[float, float] = {}
    for p in profiles:
        for b, a in p.vertices:
            points[b] = max(points.get(b, 0.0), a)
    hull: list[tuple[float, float]] = []
    for b, a in sorted(points.items()):
        while len(hull) >= 2:
            (b1, a1), (b2, a2) = hull[-2], hull[-1]
            if (b2 - b1) * (a - a1) - (a2 - a1) * (b - b1) >= 0:  # hull[-1] on or below the chord
                hull.pop()
            else:
                break
        hull.append((b, a))
    raised = [(b, min(1.0, a + JOIN_MARGIN)) for b, a in hull[:-1]] + [(1.0, 1.0)]
    out = [raised[0]]
    for b, a in raised[1:]:
        out.append((b, max(a, out[-1][1])))
    return PrivacyProfile((), tuple(out))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The ε of ρ-zCDP at δ (Canonne, Kamath, Steinke 2020, Prop. 12 with D_α ≤ αρ), minimised over the order
    by golden-section search on ln(α − 1) (every α gives a valid ε; the one found is rounded up)."""
    if rho <= 0:
        return 0.0
    if not 0 < delta < 1:
        return math.inf
    log_inv = math.log(1 / delta)

    def eps_at(alpha: float) -> float:
        return alpha * rho + (log_inv + (alpha - 1) * math.log1p(-1 / alpha) - math.log(alpha)) / (alpha - 1)

    lo, hi = math.log(1e-6), math.log(1e8)
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = eps_at(1 + math.exp(a)), eps_at(1 + math.exp(b))
    for _ in range(200):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = eps_at(1 + math.exp(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = eps_at(1 + math.exp(b))
    best = max(min(fa, fb), 0.0)
    return math.nextafter(best * (1 + EPS_ROUND_UP) + 1e-15, math.inf)


def zcdp_rho(parts: Sequence[tuple[Any, int]]) -> float | None:
    """ρ = Σ n_i μ_i²/2 of Gaussian parts, rounded up; None when a part is not a Gaussian pair."""
    if not all(isinstance(p, GaussianProfile) for p, _ in parts):
        return None
    total = math.fsum(n * p.mu**2 / 2 for p, n in parts)
    return math.nextafter(total * (1 + 1e-12), math.inf)
