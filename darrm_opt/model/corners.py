"""Vertices of the (ε, Δ)-DP feasible region of one binary mechanism and corner multisets.

Lemma 5.1 / App. C.3: f(p, p′; γ) is linear in each pair (p_i, p′_i) with the others fixed, so its maximum
over the feasible region F_i = {(p, p′): p ≤ e^ε p′ + Δ, 1 − p′ ≤ e^ε (1 − p) + Δ, and the same with p, p′
swapped} is attained at a vertex. With e = e^ε the vertices are

    Δ > 0 (8): (0,0), (1,1), (0,Δ), (Δ,0), (1−Δ,1), (1,1−Δ), ((e+Δ)/(e+1), (1−Δ)/(e+1)),
               ((1−Δ)/(e+1), (e+Δ)/(e+1))
    Δ = 0 (4): (0,0), (1,1), (e/(e+1), 1/(e+1)), (1/(e+1), e/(e+1)).

(Erratum: the authors' public code writes the 6th vertex as (1−Δ)/(1+e^{−ε}); the value above is right.)

They are listed in the order that makes the reflection (p, p′) → (1 − p, 1 − p′) map corner i of the first
half to corner i of the second half, so the reflection of a count vector (u, v) is (v, u):

    Δ > 0: (0,0), (0,Δ), (Δ,0), hi | (1,1), (1,1−Δ), (1−Δ,1), lo      with hi = ((e+Δ)/(e+1), (1−Δ)/(e+1))
    Δ = 0: (0,0), hi | (1,1), lo                                       and lo its reflection
Because the pmf of L is invariant under permutations of the teachers, one constraint per *multiset* of K
vertices suffices: C(K+7, 7) of them for Δ > 0 and C(K+3, 3) for Δ = 0. A multiset is a count vector
(n_1, ..., n_C) with Σ n_c = K.
"""

from __future__ import annotations

import math
from functools import lru_cache

import mpmath
import numpy as np

from darrm_opt.model.params import Params


def corner_exprs(epsilon: float, teacher_delta: float, *, exp=math.exp):
    """The vertices as (p, p′) pairs computed with the given ``exp`` (math.exp or mpmath.exp)."""
    e = exp(epsilon)
    d = teacher_delta
    if d == 0:
        return [(0, 0), (e / (e + 1), 1 / (e + 1)), (1, 1), (1 / (e + 1), e / (e + 1))]
    hi = (e + d) / (e + 1)
    lo = (1 - d) / (e + 1)
    return [(0, 0), (0, d), (d, 0), (hi, lo), (1, 1), (1, 1 - d), (1 - d, 1), (lo, hi)]


def corners(params: Params) -> np.ndarray:
    """The vertices in float64, shape (C, 2) with columns (p, p′)."""
    return np.array(corner_exprs(params.epsilon, params.teacher_delta), dtype=np.float64)


def corners_mp(params: Params) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """The vertices in the current mpmath precision, from the exact binary values of ε and Δ."""
    pairs = corner_exprs(mpmath.mpf(params.epsilon), mpmath.mpf(params.teacher_delta), exp=mpmath.exp)
    return [(mpmath.mpf(p), mpmath.mpf(q)) for p, q in pairs]


def n_corners(params: Params) -> int:
    return 4 if params.pure else 8


def n_multisets(K: int, n_corner: int) -> int:
    """C(K + C − 1, C − 1): the number of multisets of K corners out of C."""
    return math.comb(K + n_corner - 1, n_corner - 1)


@lru_cache(maxsize=512)
def _compositions(total: int, parts: int) -> np.ndarray:
    if parts == 1:
        one = np.array([[total]], dtype=np.int16)
        one.setflags(write=False)  # cached: a caller must not be able to change it
        return one
    blocks = []
    for first in range(total, -1, -1):
        rest = _compositions(total - first, parts - 1)
        block = np.empty((rest.shape[0], parts), dtype=np.int16)
        block[:, 0] = first
        block[:, 1:] = rest
        blocks.append(block)
    out = np.concatenate(blocks)
    out.setflags(write=False)
    return out


def compositions(total: int, parts: int) -> np.ndarray:
    """Every vector of ``parts`` non-negative integers summing to ``total`` (read-only, int16),
    in reverse lexicographic order. There are C(total + parts − 1, parts − 1) of them."""
    if total < 0 or parts < 1:
        raise ValueError("compositions need total >= 0 and parts >= 1")
    return _compositions(int(total), int(parts))


def multisets_with_few_corners(K: int, n_corner: int, max_distinct: int) -> np.ndarray:
    """Count vectors (shape (M, C)) of the multisets that use at most ``max_distinct`` distinct corners.

    The worst multisets of the LP mostly mix 2–3 distinct corners (notes), so these form a cheap pool of
    candidate constraints that is tried before an exhaustive sweep.
    """
    from itertools import combinations

    rows = []
    for k in range(1, max_distinct + 1):
        if k > K:
            break
        # positive compositions of K into k parts
        pos = compositions(K - k, k).astype(np.int32) + 1
        for cs in combinations(range(n_corner), k):
            block = np.zeros((pos.shape[0], n_corner), dtype=np.int32)
            block[:, cs] = pos
            rows.append(block)
    return np.concatenate(rows).astype(np.int16)
