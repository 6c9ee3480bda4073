"""Plain (rounded) 40-digit evaluations of a multiset's privacy cost: references for the tests.

This is what the certificate's re-check did before it became interval arithmetic
(darrm_opt/certify/exact.py): direct convolution of Bernoulli pmfs in ``MP_DIGITS``-digit mpmath, good to
about 1e-38 but not rigorous (an excess of +6.4e-51 comes out ≤ 0). The tests use it as an independent
reference and to show what plain arithmetic gets wrong."""

from __future__ import annotations

import mpmath
import numpy as np

from darrm_opt.certify.exact import MP_DIGITS
from darrm_opt.certify.sweep import signed_h
from darrm_opt.model.corners import corners_mp
from darrm_opt.model.params import Params


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
