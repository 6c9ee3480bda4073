"""Independent truths for the privacy-profile tests: every event point of a table, and their upper hull.

Shared-data tables: every corner multiset's points (b, a) = (Pr_D′[o], Pr_D[o]) by direct convolution of
Bernoulli pmfs in mpmath (Lemma 3.4 with the corners of Lemma 5.1; a probability that is structurally 0 stays
an exact 0). PATE setting and multi-class tables: every neighbouring pair's output laws in exact rationals.
None of it uses the library's sweeps, interval code or profile code.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import mpmath

from darrm_opt.model.corners import compositions, corners_mp
from darrm_opt.model.multiclass import top_structure
from darrm_opt.model.neighbours import signs
from darrm_opt.model.params import Params


def shared_points(params: Params, gamma, dps: int = 50) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """(b, a) = (Pr_D′[o], Pr_D[o]) of every corner multiset and output, by direct convolution at ``dps``
    digits (Lemma 3.4; the corners of Lemma 5.1)."""
    with mpmath.workdps(dps):
        cs = corners_mp(params)
        K = params.K
        h = [(1 if l >= (K + 1) / 2 else -1) * mpmath.mpf(float(g)) for l, g in enumerate(gamma)]
        pts = []
        for n in compositions(K, len(cs)):
            a, b = [mpmath.mpf(1)], [mpmath.mpf(1)]
            for c, (p, q) in zip(n, cs):
                for _ in range(int(c)):
                    a, b = _bernoulli(a, p), _bernoulli(b, q)
            for s in (1, -1):
                w = [(1 + s * x) / 2 for x in h]
                pts.append((sum(x * y for x, y in zip(w, b)), sum(x * y for x, y in zip(w, a))))
        return pts


def _bernoulli(v, p):
    """The pmf of L + B, B ~ Bernoulli(p), from the pmf v of L."""
    out = [(1 - p) * x for x in v] + [mpmath.mpf(0)]
    for i, x in enumerate(v):
        out[i + 1] += p * x
    return out


def shared_delta(pts, eps: float, dps: int = 50) -> mpmath.mpf:
    with mpmath.workdps(dps):
        E = mpmath.exp(mpmath.mpf(eps))
        return max(mpmath.mpf(0), max(a - E * b for b, a in pts))


def _events(P, Q):
    """(Q(S), P(S)) for every subset S of the outputs."""
    n = len(P)
    return [(sum((Q[i] for i in range(n) if m >> i & 1), Fraction(0)),
             sum((P[i] for i in range(n) if m >> i & 1), Fraction(0))) for m in range(1 << n)]


def pate_points(K: int, gamma) -> list[tuple[Fraction, Fraction]]:
    """Every pair (l, l ± 1) of vote counts (both orders), outputs Pr[1 | l] = ½ + ½ s_l γ(l)."""
    h = [Fraction(float(s)) * Fraction(float(g)) for s, g in zip(signs(K), gamma)]
    pts = []
    for l in range(K):
        for a, b in ((l, l + 1), (l + 1, l)):
            p, q = Fraction(1, 2) + h[a] / 2, Fraction(1, 2) + h[b] / 2
            pts += _events([p, 1 - p], [q, 1 - q])
    return pts


def multiclass_points(K: int, C: int, gamma) -> list[tuple[Fraction, Fraction]]:
    """Every histogram h and neighbour h′ (one vote moved), outputs (MC-1) in exact rationals."""
    g = [Fraction(float(x)) for x in gamma]

    def law(hist):
        gap, top = top_structure(hist)
        return [(1 - g[gap]) / C + (g[gap] / len(top) if c in top else 0) for c in range(C)]

    pts = []
    for combo in itertools.combinations_with_replacement(range(C), K):
        hist = [combo.count(c) for c in range(C)]
        for a, b in itertools.permutations(range(C), 2):
            if hist[a]:
                h2 = list(hist)
                h2[a] -= 1
                h2[b] += 1
                pts += _events(law(hist), law(h2))
    return pts


def upper_hull(points):
    """The upper concave hull of (b, a) points, from the highest point at the smallest b to (1, 1)."""
    hull: list = []
    for p in sorted(set(points)):
        while len(hull) >= 2 and ((hull[-1][0] - hull[-2][0]) * (p[1] - hull[-2][1])
                                  - (hull[-1][1] - hull[-2][1]) * (p[0] - hull[-2][0])) >= 0:
            hull.pop()
        hull.append(p)
    while len(hull) >= 2 and hull[1][0] == hull[0][0]:
        hull.pop(0)
    return hull


def tradeoff(hull, b):
    """T(b): the hull at b (exact for rational hulls, in the working precision for mpmath ones)."""
    b = Fraction(b) if isinstance(hull[0][0], Fraction) else mpmath.mpf(b)
    for (b1, a1), (b2, a2) in zip(hull, hull[1:]):
        if b1 <= b <= b2:
            return a1 + (a2 - a1) * (b - b1) / (b2 - b1)
    raise ValueError(b)
