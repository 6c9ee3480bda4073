"""Privacy amplification by sampling m of K disjoint teachers without replacement, as a dominating pair.

Setting: K teachers on disjoint shards (PATE), so a neighbouring dataset changes ONE teacher's vote
arbitrarily (the substitution relation on the teachers' votes). Each answer is computed by a mechanism M of
m teachers' votes on a uniformly random m-subset of the K (drawn per answer, without replacement); write
M' = M ∘ (uniform m-subset) and γ = m/K. Let (P, Q) be a dominating pair of M under substitution
(Zhu, Dong, Wang 2022, Def. 7) in both orders: H_x(M(v)‖M(v′)) ≤ h(x) = H_x(P‖Q) for every x ≥ 0 and every
ordered pair of neighbouring m-vote vectors (v, v′).

**Theorem** (Balle, Barthe, Gaboardi, NeurIPS 2018, "Privacy amplification by subsampling: tight analyses
via couplings and divergences", Thm 10: sampling without replacement, substitution relation). For every
ordered pair of neighbouring K-vote vectors (D, D′) and x ≥ 1,

    H_x(M'(D)‖M'(D′)) ≤ g(x) = γ·h(1 + (x − 1)/γ),

and for 0 < x < 1, by H_x(A‖B) = 1 − x + x·H_{1/x}(B‖A) and the theorem in the other order,
H_x(M'(D)‖M'(D′)) ≤ 1 − x + x·g(1/x). (Proof: advanced joint convexity of H with the coupling that swaps the
changed teacher for a uniformly random unsampled one; docs/maths.md.)

**The pair.** Write the curve of (P, Q) as the support function of its tradeoff points (b, a) = (Q(S), P(S)):
h(x) = max_v (a_v − x b_v), v over the vertices of its envelope (:class:`~darrm_opt.privacy.profile.PrivacyProfile`).
Then for x ≥ 1, vertex by vertex,

    γ·h(1 + (x − 1)/γ) = max_v ((b_v + γ(a_v − b_v)) − x b_v),

so g is the curve of the points v′ = (b_v, b_v + γ(a_v − b_v)), and 1 − x + x·g(1/x) that of their mirror
images (1 − a′_v, 1 − b_v). The upper concave hull of all of them and (1, 1) is a tradeoff envelope whose
curve is ≥ both bounds at every x > 0: its pair (atoms read off the hull as for every profile) dominates M'
in both orders, and composes adaptively like any other (ibid. Zhu, Dong, Wang, Thm 10). Atom by atom, an atom
(p, q) of loss ℓ > 0 becomes (q + γ(p − q), q) of loss ln(1 + γ(e^ℓ − 1)) with its mirror (q, q + γ(p − q)),
the infinite-loss atom δ∞ becomes γ·δ∞, and the rest of the mass sits at loss 0. At γ = 1 the map is the
identity: :func:`amplify_profile` returns the profile itself.

**Float error.** The points are computed exactly (rationals) from the base vertices' binary values, then
rounded outwards (a up, b down: each rounded point's a − x b is ≥ the exact one's for every x ≥ 0) and the hull
is taken exactly over the rounded points, so the envelope is an upper bound through float error; a hull of
upper bounds of the exact points is ≥ the exact points' hull, and the map h ↦ γ·h(1 + (x − 1)/γ) is monotone,
so amplifying a pessimistic profile is again pessimistic. Each swept statement (ε_j, δ_j) of the base becomes
(ln(1 + γ(e^{ε_j} − 1)) rounded up, γ·δ_j rounded up), the theorem at that point.
"""

from __future__ import annotations

import math
from fractions import Fraction

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.params import integer_in
from darrm_opt.privacy.pair_family import round_up
from darrm_opt.privacy.profile import PrivacyProfile, check_vertices


def check_subsample(m: object, K: int) -> int:
    """``m`` as an int with 1 ≤ m ≤ K (InvalidParameter naming ``subsample`` otherwise)."""
    return integer_in("subsample", m, 1, int(K))


def rate(m: int, K: int) -> Fraction:
    """γ = m/K exactly."""
    return Fraction(check_subsample(m, K), int(K))


def _round_down(v: Fraction) -> float:
    f = float(v)
    return math.nextafter(f, -math.inf) if Fraction(f) > v else f


def amplified_epsilon(epsilon: float, m: int, K: int) -> float:
    """ε′ = ln(1 + γ(e^ε − 1)), γ = m/K, rounded up (BBG 2018, Thm 10: an (ε, δ)-DP mechanism of m teachers
    run on a uniform m-subset of K disjoint teachers is (ε′, γδ)-DP under substitution)."""
    g = rate(m, K)
    if g == 1:
        return float(epsilon)
    value = math.log1p(float(g) * math.expm1(float(epsilon)))
    return math.nextafter(value * (1 + 1e-12) + 1e-300, math.inf)


def amplified_delta(delta: float, m: int, K: int) -> float:
    """γ·δ rounded up (the δ of :func:`amplified_epsilon`'s statement)."""
    g = rate(m, K)
    return float(delta) if g == 1 else min(round_up(g * Fraction(float(delta))), 1.0)


def _hull(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The upper concave hull of float points, decided in exact arithmetic (one point per b: the highest)."""
    best: dict[float, float] = {}
    for b, a in points:
        if a > best.get(b, -1.0):
            best[b] = a
    hull: list[tuple[float, float]] = []
    exact: list[tuple[Fraction, Fraction]] = []
    for b, a in sorted(best.items()):
        p = (Fraction(b), Fraction(a))
        while len(exact) >= 2:
            o, q = exact[-2], exact[-1]
            cross = (q[0] - o[0]) * (p[1] - o[1]) - (q[1] - o[1]) * (p[0] - o[0])
            if cross < 0:
                break
            exact.pop()
            hull.pop()
        exact.append(p)
        hull.append((b, a))
    return hull


def amplified_vertices(vertices: tuple[tuple[float, float], ...], m: int, K: int
                       ) -> tuple[tuple[float, float], ...]:
    """The tradeoff envelope of the amplified pair (module docstring): the upper concave hull of the points
    (b, b + γ(a − b)) and their mirrors (1 − b − γ(a − b), 1 − b) for every vertex (b, a), and (1, 1); each
    point rounded outwards (a up, b down), the hull exact over the rounded points."""
    check_vertices(vertices)
    g = rate(m, K)
    points: list[tuple[float, float]] = [(1.0, 1.0)]
    for b, a in vertices:
        B, A = Fraction(b), Fraction(a)
        amp = B + g * (A - B)
        points.append((b, min(round_up(amp), 1.0)))
        points.append((max(_round_down(1 - amp), 0.0), min(round_up(1 - B), 1.0)))
    hull = _hull(points)
    out = tuple(hull)
    check_vertices(out)
    return out


def amplify_profile(profile: PrivacyProfile, m: int, K: int) -> PrivacyProfile:
    """The dominating pair of m of K teachers sampled without replacement per answer (module docstring:
    BBG 2018, Thm 10), from a dominating pair ``profile`` of the m-teacher mechanism under substitution:
    H_x = γ·h(1 + (x − 1)/γ) for x ≥ 1 and 1 − x + x·H_{1/x} below, γ = m/K, as a
    :class:`PrivacyProfile` (its statements (ε_j, δ_j) mapped to (ε′_j, γδ_j)). γ = 1: ``profile`` itself."""
    if rate(m, K) == 1:
        return profile
    support = tuple(sorted({(amplified_epsilon(e, m, K), amplified_delta(d, m, K)) for e, d in profile.support
                            if e >= 0 and math.isfinite(d)}))
    return PrivacyProfile(support, amplified_vertices(profile.vertices, m, K), profile.sweeps, profile.seconds)


def vertices_of_pair(atoms: list[tuple[float, float]], infinite_mass: float) -> tuple[tuple[float, float], ...]:
    """The tradeoff envelope of a discrete pair: atoms (P-mass, Q-mass) with Q-mass > 0, sorted by decreasing
    loss, accumulated from (0, ``infinite_mass``) (the P-mass of the infinite-loss atom); Q-masses of atoms
    with P-mass 0 close it at b = 1. The last vertex is put at (1, 1) (masses summing to 1 up to float)."""
    if not (0 <= infinite_mass <= 1):
        raise InvalidParameter("infinite_mass", "must be in [0, 1]", infinite_mass)
    finite = sorted(((p, q) for p, q in atoms if q > 0), key=lambda pq: -Fraction(pq[0]) / Fraction(pq[1]))
    b, a = Fraction(0), Fraction(infinite_mass)
    pts: list[tuple[Fraction, Fraction]] = [(b, a)]
    for p, q in finite:
        b, a = b + Fraction(q), a + Fraction(p)
        pts.append((b, a))
    out: list[tuple[float, float]] = []
    for x, y in pts[:-1]:
        bx, ay = float(x), min(float(y), 1.0)
        if bx >= 1.0:
            break
        if out and bx <= out[-1][0]:
            out[-1] = (out[-1][0], max(out[-1][1], ay))
        else:
            out.append((bx, ay))
    out.append((1.0, 1.0))
    return tuple(out)
