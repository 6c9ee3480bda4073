"""The exact re-check behind every certificate: privacy costs in 40-digit arithmetic.

A multiset whose float64 cost lies within the sweep's error bound of the limit e^{mε} − 1 + 2δ is decided
here: its cost f(n) = Σ_l s_l γ(l) (α_l(n) − e^{mε} α′_l(n)) (Lemma 3.4) is recomputed by direct convolution
of Bernoulli pmfs from the exact binary values of γ, ε, Δ, m and δ. The verdict is decided in the
equivalent form Pr[out = 1 | p] − e^{mε} Pr[out = 1 | p′] ≤ δ (f = 2(Pr₁ − e^{mε} Pr′₁) + e^{mε} − 1), where a
structurally tight multiset (γ(l) = 1 beside outcomes of probability 0) gives an exact 0 rather than a
difference of two rounded copies of e^{mε} − 1.
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


def _pmfs_mp(params: Params, counts) -> tuple[list, list, mpmath.mpf]:
    """α and α′ (pmfs of L under p and p′) of one multiset by direct convolution of Bernoulli pmfs, and
    e^{mε}; call inside ``mpmath.workdps``. A corner with p = 0 or 1 contributes exact zeros."""
    cs = corners_mp(params)
    E = mpmath.exp(mpmath.mpf(params.m) * mpmath.mpf(params.epsilon))
    a = [mpmath.mpf(1)]
    b = [mpmath.mpf(1)]
    for n, (p, q) in zip(counts, cs):
        for _ in range(int(n)):
            a = _conv_bern(a, p)
            b = _conv_bern(b, q)
    return a, b, E


def exact_cost_mp(params: Params, gamma: np.ndarray, counts) -> mpmath.mpf:
    """f for one multiset in MP_DIGITS-digit arithmetic: Σ_l h_l (α_l − e^{mε} α′_l) (Lemma 3.4) by direct
    convolution of binomial pmfs."""
    K = params.K
    with mpmath.workdps(MP_DIGITS):
        a, b, E = _pmfs_mp(params, counts)
        h = signed_h(gamma)
        total = mpmath.mpf(0)
        for l in range(K + 1):
            if h[l] != 0:
                total += mpmath.mpf(float(h[l])) * (a[l] - E * b[l])
        return total


def exact_excess_mp(params: Params, gamma: np.ndarray, counts) -> tuple[mpmath.mpf, mpmath.mpf]:
    """(x₁, x₀) with x_o = Pr[out = o | p] − e^{mε} Pr[out = o | p′] − δ, in MP_DIGITS-digit arithmetic.

    Pr[out = 1 | L = l] = (1 + h_l)/2 (Alg. 1), so f = 2 x₁ + (e^{mε} − 1 + 2δ) and −f = 2 x₀ + (e^{mε} − 1 + 2δ)
    (Lemma 3.4): f ≤ bound iff x₁ ≤ 0. In this form the e^{mε} − 1 of f and of the bound cancel exactly, so a
    multiset that is tight for structural reasons (γ(l) = 1 next to outcomes of probability 0, e.g. γ ≡ 1
    in pure DP) gives an exact 0 instead of rounding noise of either sign.
    """
    with mpmath.workdps(MP_DIGITS):
        a, b, E = _pmfs_mp(params, counts)
        h = signed_h(gamma)
        w1 = [(1 + mpmath.mpf(float(x))) / 2 for x in h]
        w0 = [(1 - mpmath.mpf(float(x))) / 2 for x in h]
        delta = mpmath.mpf(params.delta)
        x1 = mpmath.fsum(w * x for w, x in zip(w1, a)) - E * mpmath.fsum(w * x for w, x in zip(w1, b)) - delta
        x0 = mpmath.fsum(w * x for w, x in zip(w0, a)) - E * mpmath.fsum(w * x for w, x in zip(w0, b)) - delta
        return x1, x0


def _conv_bern(v, p):
    q = 1 - p
    out = [q * x for x in v] + [mpmath.mpf(0)]
    for i, x in enumerate(v):
        out[i + 1] += p * x
    return out


def recheck(params: Params, gamma: np.ndarray, multisets, two_sided: bool) -> Recheck:
    """Re-evaluate every multiset of ``multisets`` (count vectors) exactly; for a non-symmetric γ both f and
    −f (the output-0 condition) must be ≤ the bound. The verdict is the sign of the excess of
    :func:`exact_excess_mp`; the reported cost is f = bound + 2·excess. Returns the largest exact cost."""
    bound = exact_bound_mp(params)
    best_val, certified, reason = None, True, ""
    worst: tuple[int, ...] = ()
    for cnt in multisets:
        x1, x0 = exact_excess_mp(params, gamma, cnt)
        for x in ((x1, x0) if two_sided else (x1,)):
            if best_val is None or x > best_val:
                best_val, worst = x, tuple(int(c) for c in cnt)
            if x > 0:
                certified = False
                reason = f"multiset {list(int(c) for c in cnt)} exceeds the bound"
    if best_val is None:
        return Recheck(certified, reason, float("-inf"), worst, len(multisets))
    with mpmath.workdps(MP_DIGITS):
        max_cost = float(bound + 2 * best_val)
    return Recheck(certified, reason, max_cost, worst, len(multisets))
