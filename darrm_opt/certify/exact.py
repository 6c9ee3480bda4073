"""The exact re-check behind every certificate: privacy costs in 40-digit arithmetic.

A multiset whose float64 cost lies within the sweep's error bound of the limit e^{mε} − 1 + 2δ is decided
here: its cost f(n) = Σ_l s_l γ(l) (α_l(n) − e^{mε} α′_l(n)) (Lemma 3.4) is recomputed by direct convolution
of Bernoulli pmfs from the exact binary values of γ, ε, Δ, m and δ, and compared with the bound computed in
the same precision.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath
import numpy as np

from darrm_opt.certify.sweep import signed_h
from darrm_opt.model.corners import corners_mp
from darrm_opt.model.params import Params

#: Decimal digits of the exact re-check.
MP_DIGITS = 40


@dataclass(frozen=True)
class Recheck:
    """The verdict of the exact re-check over a set of near-tight multisets."""

    certified: bool
    reason: str
    max_cost: float
    worst: tuple[int, ...]
    checked: int


def exact_bound_mp(params: Params) -> mpmath.mpf:
    with mpmath.workdps(MP_DIGITS):
        return mpmath.expm1(mpmath.mpf(params.m) * mpmath.mpf(params.epsilon)) + 2 * mpmath.mpf(params.delta)


def exact_cost_mp(params: Params, gamma: np.ndarray, counts) -> mpmath.mpf:
    """f for one multiset in MP_DIGITS-digit arithmetic: Σ_l h_l (α_l − e^{mε} α′_l) by direct
    convolution of binomial pmfs."""
    K = params.K
    with mpmath.workdps(MP_DIGITS):
        cs = corners_mp(params)
        E = mpmath.exp(mpmath.mpf(params.m) * mpmath.mpf(params.epsilon))
        a = [mpmath.mpf(1)]
        b = [mpmath.mpf(1)]
        for n, (p, q) in zip(counts, cs):
            for _ in range(int(n)):
                a = _conv_bern(a, p)
                b = _conv_bern(b, q)
        h = signed_h(gamma)
        total = mpmath.mpf(0)
        for l in range(K + 1):
            if h[l] != 0:
                total += mpmath.mpf(float(h[l])) * (a[l] - E * b[l])
        return total


def _conv_bern(v, p):
    q = 1 - p
    out = [q * x for x in v] + [mpmath.mpf(0)]
    for i, x in enumerate(v):
        out[i + 1] += p * x
    return out


def recheck(params: Params, gamma: np.ndarray, multisets, two_sided: bool) -> Recheck:
    """Re-evaluate every multiset of ``multisets`` (count vectors) exactly; for a non-symmetric γ both f and
    −f (the output-0 condition) must be ≤ the bound. Returns the largest exact cost and the verdict."""
    bound = exact_bound_mp(params)
    best_val, certified, reason = None, True, ""
    worst: tuple[int, ...] = ()
    for cnt in multisets:
        val = exact_cost_mp(params, gamma, cnt)
        for v in ((val, -val) if two_sided else (val,)):
            if best_val is None or v > best_val:
                best_val, worst = v, tuple(int(x) for x in cnt)
            if v > bound:
                certified = False
                reason = f"multiset {list(int(x) for x in cnt)} exceeds the bound"
    return Recheck(certified, reason, float(best_val) if best_val is not None else float("-inf"), worst,
                   len(multisets))
