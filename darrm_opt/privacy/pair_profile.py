"""Exact privacy profiles of DaRRM in the PATE setting, where the neighbouring pairs are finitely many types.

Multi-class tables (:mod:`darrm_opt.model.multiclass`) and binary PATE-setting tables
(:mod:`darrm_opt.model.neighbours`) release one of finitely many outputs, and every ordered neighbouring
pair (D, D′) falls into one of finitely many *pair types* whose output laws P, P′ are known in closed form.
Group each pair's outputs so that P and P′ are constant on a group (group j of pair i: n_ij outputs, each
with probabilities P_ij under D and Q_ij under D′). The privacy profile is

    δ(ε′) = max_i Σ_j n_ij · max(0, P_ij − e^{ε′} Q_ij)        (every type, both orders),

the support function D(x) = max_(b, a) (a − x b), x = e^{ε′}, of the event points
(b, a) = (P′(S), P(S)) over the pairs i and unions S of whole groups (an event that splits a group lies
between such points, as the points of all events form a zonotope whose vertices are unions of groups).
So the exact profile is the upper concave hull of these finitely many points, and:

1. the points are computed in float64 and their upper hull found; each hull edge of slope x ≥ 1 (and
   x = 1) is a slope at which D is evaluated;
2. D(x) is evaluated rigorously: every type's divergence in float64 (error ≤ η(x), the certificate's
   bound), then every type within 2η of the float maximum (the true maximiser is among them) re-computed
   in exact rational arithmetic from the binary values of γ and x, and the exact maximum rounded up;
3. the lines a ≤ D(x) + x b and their mirror images (the point set is closed under
   (b, a) → (1 − a, 1 − b): the reversed order and the complementary event) are intersected by
   :func:`darrm_opt.privacy.profile.envelope_vertices` (each line raised by its MARGIN).

Every line is a valid bound whatever the float hull was, so the envelope is an upper bound at every ε′;
at the hull's edge slopes the lines are the true hull's supporting lines, so the envelope's vertices are
the true hull's vertices raised by at most MARGIN, and δ(ε′) = max_v (a_v − e^{ε′} b_v) is exact to within
MARGIN at *every* ε′ ≥ 0. The dominating pair (atoms) is read off the vertices as for shared-data tables,
so :mod:`darrm_opt.privacy.pld` composes these profiles unchanged.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from darrm_opt.privacy.pair_family import PairFamily, divergence_bound
from darrm_opt.privacy.profile import PrivacyProfile, envelope_vertices, upper_hull
from darrm_opt.privacy.statements import ProfileCheck, Statement, check_family_profile, decide_family

if TYPE_CHECKING:  # pragma: no cover
    from darrm_opt.model.multiclass import MulticlassParams
    from darrm_opt.model.neighbours import PateParams

def statements_hold(family: PairFamily, support) -> bool:
    """Whether every statement (ε_j, δ_j) of ``support`` is proven true: D(e^{ε_j}) ≤ δ_j, with e^{ε_j} between
    rational bounds and D exact (darrm_opt.privacy.statements). No tolerance: a statement below the exact profile
    by any amount is false, and a malformed one (ε_j < 0 or NaN) is not true."""
    for e, d in support:
        if not (e >= 0 and math.isfinite(d) and d >= 0):
            return False
        if decide_family(family, Statement("", Fraction(d), eps=float(e)))[0] != "pass":
            return False
    return True


def hull_slopes(family: PairFamily) -> list[float]:
    """The slopes x ≥ 1 of the upper hull of the event points (and x = 1)."""
    pts = {(0.0, 0.0), (1.0, 1.0), *map(tuple, family.points().tolist())}
    hull = upper_hull(pts)
    out = {1.0}
    for (b1, a1), (b2, a2) in zip(hull, hull[1:], strict=False):
        if b2 > b1:
            x = (a2 - a1) / (b2 - b1)
            if math.isfinite(x) and x >= 1.0:
                out.add(float(x))
    return sorted(out)


def log_up(x: float) -> float:
    """ε′ ≥ log x (math.log is within one ulp), 0 at x = 1."""
    return 0.0 if x == 1.0 else math.nextafter(math.log(x), math.inf)


def family_profile(family: PairFamily, certified: tuple[float, float] | None = None) -> PrivacyProfile:
    """The exact privacy profile of a pair family (module docstring). ``certified``: an (ε, δ) statement
    proven elsewhere (the table's certificate, exact near δ), added as a line at a slope ≥ e^ε and as a
    support statement so that δ(ε) ≤ that δ is read back exactly."""
    t0 = time.perf_counter()
    slopes = hull_slopes(family)
    lines = [(x, divergence_bound(family, x)) for x in slopes]
    support = [(log_up(x), D) for x, D in lines]
    if certified is not None:
        eps, delta = certified
        x_up = math.nextafter(math.nextafter(math.exp(eps), math.inf), math.inf)
        lines.append((x_up, float(delta)))
        support.append((eps, float(delta)))
    vertices = envelope_vertices(lines)
    return PrivacyProfile(tuple(sorted(set(support))), vertices, len(slopes), time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------------------------
# The two families: multi-class tables and binary PATE-setting tables
# ---------------------------------------------------------------------------------------------------------
def multiclass_family(K: int, C: int, gamma: np.ndarray) -> PairFamily:
    """Every neighbouring histogram type of :func:`~darrm_opt.model.multiclass.pair_types` (the
    certificate's enumeration), both orders; four groups (in T and T′, T only, T′ only, neither), with
    P_grp = (1 − γ(g))/C + γ(g)·1{grp ⊂ T}/t (MC-1) and Q_grp likewise at (g′, T′)."""
    from darrm_opt.certify.multiclass import exact_hockey_stick
    from darrm_opt.model.multiclass import pair_types

    ordered = [a for pt in pair_types(K, C) for a in (pt, pt.reversed())]
    n = np.zeros((len(ordered), 4))
    P, Q = np.zeros_like(n), np.zeros_like(n)
    for i, a in enumerate(ordered):
        cnt, inT, inT2 = a.groups(C)
        n[i] = cnt
        P[i] = (1.0 - gamma[a.g]) / C + gamma[a.g] * inT / a.t
        Q[i] = (1.0 - gamma[a.g2]) / C + gamma[a.g2] * inT2 / a.t2

    def laws(i: int) -> tuple[list[Fraction], list[Fraction]]:
        a = ordered[i]
        _, inT, inT2 = a.groups(C)
        g1, g2 = Fraction(float(gamma[a.g])), Fraction(float(gamma[a.g2]))
        return ([(1 - g1) / C + (g1 / a.t if x else 0) for x in inT.tolist()],
                [(1 - g2) / C + (g2 / a.t2 if x else 0) for x in inT2.tolist()])

    return PairFamily(n, P, Q, lambda i, X: exact_hockey_stick(ordered[i], gamma, C, X), laws)


def pate_family(K: int, gamma: np.ndarray) -> PairFamily:
    """Binary PATE setting (:mod:`darrm_opt.model.neighbours`): the pairs (l, l′), |l − l′| = 1, both
    orders; two groups (outputs 1 and 0) with Pr[1 | l] = ½ + ½ s_l γ(l)."""
    from darrm_opt.model.neighbours import signs

    h = signs(K) * gamma
    pairs = [(l, lp) for l in range(K) for l, lp in ((l, l + 1), (l + 1, l))]
    one = np.array([0.5 + 0.5 * h[l] for l, _ in pairs])
    two = np.array([0.5 + 0.5 * h[lp] for _, lp in pairs])
    P = np.stack([one, 1.0 - one], axis=1).reshape(-1, 2)
    Q = np.stack([two, 1.0 - two], axis=1).reshape(-1, 2)

    def laws(i: int) -> tuple[list[Fraction], list[Fraction]]:
        l, lp = pairs[i]
        p = Fraction(1, 2) + Fraction(float(h[l])) / 2
        q = Fraction(1, 2) + Fraction(float(h[lp])) / 2
        return [p, 1 - p], [q, 1 - q]

    def exact(i: int, X: Fraction) -> Fraction:
        (p, p0), (q, q0) = laws(i)
        return max(Fraction(0), p - X * q) + max(Fraction(0), p0 - X * q0)

    return PairFamily(np.ones_like(P), P, Q, exact, laws)


def multiclass_profile(params: MulticlassParams, gamma) -> PrivacyProfile:
    """The exact privacy profile of a multi-class table (``params`` a MulticlassParams); the table's
    certificate (exact near δ) adds the statement (ε, δ) when it certifies. For every ε′ ≥ 0,
    δ(ε′) = max over neighbouring histograms (both orders) of Σ_c max(0, P(c) − e^{ε′} P′(c))."""
    from darrm_opt.certify.certificate import validate_gamma
    from darrm_opt.certify.multiclass import certify_multiclass

    g = validate_gamma(gamma, params.K)
    cert = certify_multiclass(params, g)
    fam = multiclass_family(params.K, params.C, g)
    return family_profile(fam, (params.epsilon, params.delta) if cert.certified else None)


def pate_profile(params: PateParams, gamma) -> PrivacyProfile:
    """The exact privacy profile of a binary PATE-setting table (``params`` a PateParams); its pair
    certificate adds the statement (ε, δ) when it certifies. For every ε′ ≥ 0,
    δ(ε′) = max over |l − l′| = 1 (both orders) of Σ_o max(0, Pr[o | l] − e^{ε′} Pr[o | l′])."""
    from darrm_opt.certify.certificate import validate_gamma
    from darrm_opt.certify.pairs import certify_pairs

    g = validate_gamma(gamma, params.K)
    cert = certify_pairs(params, g)
    return family_profile(pate_family(params.K, g), (params.epsilon, params.delta) if cert.certified else None)


def multiclass_profile_check(params: MulticlassParams, gamma, stored: PrivacyProfile) -> ProfileCheck:
    """The verdict on a stored profile of a multi-class table: each of its statements proven in exact arithmetic
    (darrm_opt.privacy.statements.check_family_profile)."""
    from darrm_opt.certify.certificate import validate_gamma

    g = validate_gamma(gamma, params.K)
    return check_family_profile(multiclass_family(params.K, params.C, g), stored)


def pate_profile_check(params: PateParams, gamma, stored: PrivacyProfile) -> ProfileCheck:
    """The verdict on a stored profile of a binary PATE-setting table (as :func:`multiclass_profile_check`)."""
    from darrm_opt.certify.certificate import validate_gamma

    g = validate_gamma(gamma, params.K)
    return check_family_profile(pate_family(params.K, g), stored)


def top2_family(params, table) -> PairFamily:
    """Every ordered neighbouring histogram type of a top-two table (:func:`darrm_opt.model.top2.pair_types`),
    its non-empty role groups packed into five columns (no type has more; padding groups have n = 0), with
    P_grp = 1/C + p(s)·(1{T}/t − 1/C) + q(s)·(1{R}/r − 1/C) (TT-1) and Q_grp likewise at s′."""
    from darrm_opt.certify.top2 import exact_hockey_stick
    from darrm_opt.model.top2 import group_laws, pair_types, split, type_arrays

    K, C, cap = params.K, params.C, params.cap
    types = pair_types(K, C, cap)
    ta = type_arrays(types, C, cap)
    P9, Q9 = group_laws(ta, table, K, C, cap)
    width = 5
    order = np.argsort((ta.n <= 0).astype(np.int8), axis=1, kind="stable")[:, :width]
    rows = np.arange(len(types))[:, None]
    n, P, Q = ta.n[rows, order], P9[rows, order], Q9[rows, order]
    if np.any((ta.n > 0).sum(axis=1) > width):
        raise AssertionError("a top-two pair type with more than five role groups")
    p, q = split(table, K, cap)

    def laws(i: int) -> tuple[list[Fraction], list[Fraction]]:
        g1, g2, t, r, h1, h2, t2, r2 = (int(v) for v in types[i][:8])
        pa, qa = Fraction(float(p[g1, g2])), Fraction(float(q[g1, g2]))
        pb, qb = Fraction(float(p[h1, h2])), Fraction(float(q[h1, h2]))
        out_p, out_q = [], []
        for j in order[i].tolist():
            ra, rb = divmod(j, 3)
            out_p.append((1 - pa - qa) / C + (pa / t if ra == 0 else 0) + (qa / r if ra == 1 else 0))
            out_q.append((1 - pb - qb) / C + (pb / t2 if rb == 0 else 0) + (qb / r2 if rb == 1 else 0))
        return out_p, out_q

    return PairFamily(n, P, Q, lambda i, X: exact_hockey_stick(types[i], table, params, X), laws)


def top2_profile(params, table) -> PrivacyProfile:
    """The exact privacy profile of a top-two table (``params`` a Top2Params); its certificate adds the
    statement (ε, δ) when it certifies."""
    from darrm_opt.certify.top2 import certify_top2, validate_table

    x = validate_table(params, table)
    cert = certify_top2(params, x)
    return family_profile(top2_family(params, x), (params.epsilon, params.delta) if cert.certified else None)
