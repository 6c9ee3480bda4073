"""Exact ties of the re-check, decided algebraically: the excess as a polynomial in e^{ε/s}.

Write e = e^ε. Every corner (model/corners.py) is N(e)/(e + 1) with N ∈ ℚ[e] of degree ≤ 1 and rational
(binary) coefficients: 0, Δ(e + 1), e + 1, (1 − Δ)(e + 1), e + Δ, 1 − Δ (Δ > 0), and 0, e, e + 1, 1 (Δ = 0).
So the pmf of L under the multiset's p's is α_l = A_l(e)/(e + 1)^K with A_l ∈ ℚ[e] (one convolution step per
teacher: A ← (e + 1 − N)·A_l + N·A_{l−1}), and likewise α′_l = B_l(e)/(e + 1)^K. For m = a/s (s = 2^k,
a ∈ ℕ) put t = e^{ε/s}, so e = t^s and e^{mε} = t^a. Then, with w_l = (1 ± h_l)/2 and δ exact rationals,

    x_± = Σ_l w_l (α_l − e^{mε} α′_l) − δ = P(t) / (e + 1)^K,
    P(t) = Σ_l w_l (A_l(t^s) − t^a B_l(t^s)) − δ (t^s + 1)^K.

If P is the zero polynomial, x = 0 exactly: the multiset meets the bound with equality, which satisfies
"≤". If P ≠ 0, then P(t) ≠ 0, because t = e^{ε/s} with ε/s a nonzero rational is transcendental
(Lindemann–Weierstrass), so it is a root of no nonzero rational polynomial: the tie is not exact and only
the sign of x (decided by interval arithmetic at enough digits) can settle it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from darrm_opt.certify.sweep import signed_h
from darrm_opt.model.params import Params

Poly = list  # coefficients (Fraction or int), lowest degree first

#: s = 2^k up to this k is tried for m = a/s; a finer m is not handled (its ties are refused).
MAX_ROOT_LOG2 = 3


def _add(a: Poly, b: Poly) -> Poly:
    out = list(a) + [0] * (len(b) - len(a))
    for i, x in enumerate(b):
        out[i] += x
    return out


def _mul(a: Poly, b: Poly) -> Poly:
    if not a or not b:
        return []
    out: Poly = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                out[i + j] += x * y
    return out


def _scale(a: Poly, c) -> Poly:
    return [c * x for x in a]


def root_step(m: float) -> int | None:
    """The smallest s = 2^k (k ≤ MAX_ROOT_LOG2) with m·s an integer, or None."""
    for k in range(MAX_ROOT_LOG2 + 1):
        if float(m * 2**k).is_integer():
            return 2**k
    return None


def _corner_numerators(params: Params, e: Poly) -> list[tuple[Poly, Poly]]:
    """N(e) of each corner (p, p′) = (N_p, N_p′)/(e + 1), in the order of model/corners.py."""
    ep1 = _add(e, [1])
    d = Fraction(params.teacher_delta)
    if d == 0:
        return [([], []), (e, [1]), (ep1, ep1), ([1], e)]
    hi, lo = _add(e, [d]), [1 - d]
    return [([], []), ([], _scale(ep1, d)), (_scale(ep1, d), []), (hi, lo),
            (ep1, ep1), (ep1, _scale(ep1, 1 - d)), (_scale(ep1, 1 - d), ep1), (lo, hi)]


def _pmf_numerators(ep1: Poly, numerators: list[Poly], counts) -> list[Poly]:
    """A_l (module docstring): the pmf of L times (e + 1)^K, one convolution step per teacher."""
    v: list[Poly] = [[1]]
    for N, n in zip(numerators, counts):
        rest = _add(ep1, _scale(N, -1))
        for _ in range(int(n)):
            v = [_add(_mul(rest, v[i]) if i < len(v) else [], _mul(N, v[i - 1]) if i else [])
                 for i in range(len(v) + 1)]
    return v


def _int(x: Fraction) -> int:
    assert x.denominator == 1
    return x.numerator


def excess_polynomial(params: Params, gamma: np.ndarray, counts, side: int) -> Poly | None:
    """D^K·P(t) (module docstring; D the denominator of Δ) for x₊ (side = 1, output 1) or x₋ (side = −1,
    output 0), trailing zeros stripped ([] is the zero polynomial); None when m is not a/2^k with k ≤
    MAX_ROOT_LOG2."""
    s = root_step(params.m)
    if s is None:
        return None
    e: Poly = [0] * s + [1]
    D = Fraction(params.teacher_delta).denominator  # a power of 2: D·N has integer coefficients
    ep1 = [D * x for x in _add(e, [1])]
    cs = [([_int(D * x) for x in p], [_int(D * x) for x in q]) for p, q in _corner_numerators(params, e)]
    A = _pmf_numerators(ep1, [p for p, _ in cs], counts)  # D^K A_l, D^K B_l: integer arithmetic only
    B = _pmf_numerators(ep1, [q for _, q in cs], counts)
    E: Poly = [0] * int(params.m * s) + [1]
    total: Poly = []
    for l, h in enumerate(signed_h(gamma)):
        w = (1 + side * Fraction(float(h))) / 2
        if w:
            total = _add(total, _scale(_add(A[l], _scale(_mul(E, B[l]), -1)), w))
    power: Poly = [1]
    for _ in range(int(params.K)):
        power = _mul(power, ep1)
    total = _add(total, _scale(power, -Fraction(float(params.delta or 0.0))))
    while total and total[-1] == 0:
        total.pop()
    return total


def is_exact_tie(params: Params, gamma: np.ndarray, counts, side: int) -> bool:
    """True when the excess x_side of ``counts`` is exactly 0 (P ≡ 0, module docstring)."""
    P = excess_polynomial(params, gamma, counts, side)
    return P is not None and not P
