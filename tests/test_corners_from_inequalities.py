"""The corner list checked against the DP inequalities themselves, not against corners()' formulas.

A binary mechanism with Pr[1 | D] = p and Pr[1 | D′] = p′ is (ε, Δ)-DP iff
    p ≤ e^ε p′ + Δ,   1 − p ≤ e^ε (1 − p′) + Δ,   and the same with p and p′ swapped,   0 ≤ p, p′ ≤ 1.
Its vertices are found here by intersecting every pair of constraint lines and keeping the feasible
points, once in exact rational arithmetic (e := the float e^ε as a fraction) and once at 50 digits.
This also guards the authors' erratum ((1 − Δ)/(1 + e^{−ε}) is not a vertex).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from darrm_opt.model.corners import (
    compositions,
    corners,
    corners_mp,
    multisets_with_few_corners,
    n_corners,
    n_multisets,
)
from darrm_opt.model.params import Params


def constraints(e, d):
    """Rows (a, b, c) of a·p + b·p′ ≤ c."""
    one = e - e + 1  # 1 in the number type of e
    zero = one - one
    return [
        (one, -e, d),                  # p ≤ e p′ + Δ
        (-e, one, d),                  # p′ ≤ e p + Δ
        (-one, e, d + e - one),        # 1 − p ≤ e (1 − p′) + Δ
        (e, -one, d + e - one),        # 1 − p′ ≤ e (1 − p) + Δ
        (-one, zero, zero), (one, zero, one),  # 0 ≤ p ≤ 1
        (zero, -one, zero), (zero, one, one),  # 0 ≤ p′ ≤ 1
    ]


def vertices(e, d, tol):
    rows = constraints(e, d)
    out = []
    for (a1, b1, c1), (a2, b2, c2) in itertools.combinations(rows, 2):
        det = a1 * b2 - a2 * b1
        if abs(det) <= tol:
            continue
        p = (c1 * b2 - c2 * b1) / det
        q = (a1 * c2 - a2 * c1) / det
        if all(a * p + b * q <= c + tol for a, b, c in rows):
            if not any(abs(p - x) <= tol and abs(q - y) <= tol for x, y in out):
                out.append((p, q))
    return out


CASES = [(0.1, 1e-5), (0.1, 0.0), (1.0, 0.3), (0.05, 0.01), (2.0, 0.0), (0.5, 0.2), (0.01, 1e-9), (3.0, 0.05)]


@pytest.mark.parametrize("eps,Delta", CASES)
def test_corners_are_exactly_the_vertices_of_the_dp_region(eps, Delta):
    params = Params(3, 1, epsilon=eps, teacher_delta=Delta)
    ref = vertices(Fraction(math.exp(eps)), Fraction(Delta), Fraction(0))
    got = corners(params)
    assert len(ref) == got.shape[0] == n_corners(params) == (4 if Delta == 0 else 8)
    # a bijection within float rounding (the library computes e^ε and the quotients in float64)
    for p, q in ref:
        d = np.abs(got - np.array([float(p), float(q)])).max(axis=1)
        assert (d <= 4e-16).sum() == 1, (p, q)
    assert len({tuple(r) for r in got.tolist()}) == got.shape[0]


@pytest.mark.parametrize("eps,Delta", CASES)
def test_corners_mp_are_the_vertices_at_forty_digits(eps, Delta):
    params = Params(3, 1, epsilon=eps, teacher_delta=Delta)
    with mpmath.workdps(50):
        ref = vertices(mpmath.exp(mpmath.mpf(eps)), mpmath.mpf(Delta), mpmath.mpf(10) ** -45)
    with mpmath.workdps(40):
        got = corners_mp(params)
    assert len(got) == len(ref)
    with mpmath.workdps(50):
        for p, q in ref:
            close = [i for i, (x, y) in enumerate(got) if abs(x - p) <= 1e-39 and abs(y - q) <= 1e-39]
            assert len(close) == 1, (p, q)


@pytest.mark.parametrize("eps,Delta", [c for c in CASES if c[1] > 0])
def test_the_authors_sixth_vertex_is_not_a_vertex(eps, Delta):
    """(1 − Δ)/(1 + e^{−ε}) = e(1 − Δ)/(e + 1) lies Δ below the true (e + Δ)/(e + 1)."""
    wrong = (1 - Delta) / (1 + math.exp(-eps))
    got = corners(Params(3, 1, epsilon=eps, teacher_delta=Delta))
    assert np.abs(got - wrong).min() > Delta / 2
    ref = vertices(Fraction(math.exp(eps)), Fraction(Delta), Fraction(0))
    assert min(abs(float(x) - wrong) for v in ref for x in v) > Delta / 2


@pytest.mark.parametrize("eps,Delta", CASES)
def test_corner_order_reflection_and_swap(eps, Delta):
    """Corner i + C/2 is the reflection (1 − p, 1 − p′) of corner i, so a count vector (u, v) reflects to
    (v, u); the set is closed under the swap (p, p′) → (p′, p)."""
    got = corners(Params(3, 1, epsilon=eps, teacher_delta=Delta))
    half = got.shape[0] // 2
    np.testing.assert_allclose(got[half:], 1 - got[:half], rtol=0, atol=2e-16)
    assert tuple(got[0]) == (0.0, 0.0) and tuple(got[half]) == (1.0, 1.0)
    swapped = got[:, ::-1]
    for row in swapped:
        assert np.abs(got - row).max(axis=1).min() <= 2e-16


def test_multiset_counts():
    assert n_multisets(11, 8) == 31_824
    assert n_multisets(41, 8) == 73_629_072
    assert n_multisets(11, 4) == math.comb(14, 3) == 364
    assert n_multisets(1, 1) == 1
    assert n_corners(Params(5, 1, teacher_delta=0.0)) == 4
    assert n_corners(Params(5, 1, teacher_delta=1e-300)) == 8


@pytest.mark.parametrize("total,parts", [(0, 1), (0, 3), (1, 1), (4, 1), (5, 3), (7, 4), (3, 8)])
def test_compositions_are_every_count_vector_in_reverse_lexicographic_order(total, parts):
    got = compositions(total, parts)
    brute = sorted((v for v in itertools.product(range(total + 1), repeat=parts) if sum(v) == total),
                   reverse=True)
    assert [tuple(int(x) for x in r) for r in got] == brute
    assert got.shape == (math.comb(total + parts - 1, parts - 1), parts)
    assert got.dtype == np.int16 and not got.flags.writeable


def test_compositions_reject_bad_arguments():
    with pytest.raises(ValueError):
        compositions(-1, 3)
    with pytest.raises(ValueError):
        compositions(3, 0)


@pytest.mark.parametrize("K,C,k", [(5, 8, 1), (5, 8, 2), pytest.param(7, 8, 3, marks=pytest.mark.slow),  # 8⁸ tuples
                                   (3, 4, 3), (2, 4, 3), (6, 4, 4), (1, 8, 3)])
def test_multisets_with_few_corners_is_the_filtered_full_list(K, C, k):
    got = multisets_with_few_corners(K, C, k)
    want = {v for v in itertools.product(range(K + 1), repeat=C) if sum(v) == K and sum(x > 0 for x in v) <= k}
    rows = [tuple(int(x) for x in r) for r in got]
    assert len(rows) == len(set(rows)) == len(want)
    assert set(rows) == want
    assert got.dtype == np.int16
