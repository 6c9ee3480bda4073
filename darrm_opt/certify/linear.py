"""Certificates of constant tables by linearity, from one sweep of γ ≡ 1.

The privacy cost f(n; γ) = Σ_l s_l γ(l) (α_l(n) − e^{mε} α′_l(n)) (Lemma 3.4) is linear in γ, so for γ ≡ c
(c ≥ 0) f(n; c·1) = c · f(n; 1) on every corner multiset n. One exhaustive sweep of γ ≡ 1 therefore
certifies every constant table:

- if γ ≡ 1 itself is certified, every c ∈ [0, 1] is (c·f ≤ f ≤ bound where f ≥ 0, and c·f ≤ 0 elsewhere);
- otherwise the sweep's float maximum M and its a-priori error η bound the exact maximum by U = M + η, and
  γ ≡ c is certified when c · U ≤ e^{mε} − 1 + 2δ, proven in 40-digit outward-rounded interval arithmetic
  (the upper end of c·U must not exceed the lower end of the bound's enclosure).

This is what makes the best constant c* = bound / U and the paper's γ_const (Lemma A.1) cost one sweep
between them, their printed (rounded-down) values included.
"""

from __future__ import annotations

import math

import mpmath
from mpmath import iv

from darrm_opt.certify.certificate import Certificate
from darrm_opt.certify.exact import MP_DIGITS, exact_bound_mp, exp_interval, interval_dps, interval_ends
from darrm_opt.model.baselines import const_opt_value
from darrm_opt.model.params import Params


def ones_upper_bound(unit: Certificate) -> float | None:
    """U ≥ max_n f(n; γ ≡ 1) proven by the sweep of γ ≡ 1, or None when that sweep proves no such bound
    (too many multisets near the bound to verify, or γ ≡ 1 certified, where every c ≤ 1 is certified)."""
    if unit.certified or unit.max_privacy_cost <= unit.bound + unit.error_bound:
        return None
    return unit.max_privacy_cost + unit.error_bound


def best_constant(params: Params, unit: Certificate) -> float:
    """c* = min(1, bound / U) with U from :func:`ones_upper_bound`, rounded down so c*·U ≤ bound exactly.
    Where the sweep bounds nothing, bound / max f(γ ≡ 1) (eq. of :func:`const_opt_value`), which the
    constant table's own sweep must then certify."""
    if unit.certified:
        return 1.0
    if ones_upper_bound(unit) is None:
        return const_opt_value(params.bound, unit.max_privacy_cost)
    with mpmath.workdps(MP_DIGITS):
        c = float(exact_bound_mp(params) / (mpmath.mpf(unit.max_privacy_cost) + mpmath.mpf(unit.error_bound)))
    c = min(1.0, c)
    while not constant_certified(params, unit, c):  # float rounding of the quotient: step down by ulps
        c = math.nextafter(c, 0.0)
    return c


def constant_certified(params: Params, unit: Certificate, c: float) -> bool:
    """True when γ ≡ c is proven (mε, δ)-DP by the sweep of γ ≡ 1 (module docstring)."""
    if not 0.0 <= c <= 1.0:
        return False
    if unit.certified:
        return True
    if ones_upper_bound(unit) is None:
        return False
    with interval_dps(MP_DIGITS):
        cost = iv.mpf(c) * (iv.mpf(unit.max_privacy_cost) + iv.mpf(unit.error_bound))
        bound = exp_interval(iv.mpf(params.m) * iv.mpf(params.epsilon)) - 1 + 2 * iv.mpf(params.delta)
        return bool(interval_ends(cost)[1] <= interval_ends(bound)[0])


def constant_certificate(params: Params, unit: Certificate, c: float) -> Certificate:
    """The certificate of γ ≡ c derived from the certificate ``unit`` of γ ≡ 1 (no further sweep)."""
    ok = constant_certified(params, unit, c)
    reason = "" if ok else f"γ ≡ {c!r} exceeds the bound: c · max f(γ ≡ 1) > e^(mε) − 1 + 2δ (linearity)"
    return Certificate(
        certified=ok,
        max_privacy_cost=c * unit.max_privacy_cost,
        bound=unit.bound,
        multisets_checked=unit.multisets_checked,
        worst_multiset=list(unit.worst_multiset),
        corners=[list(x) for x in unit.corners],
        error_bound=c * unit.error_bound,
        high_precision_checked=0,
        seconds=0.0,
        reason=reason,
    )
