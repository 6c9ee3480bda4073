"""The privacy profile of a PATE-setting γ table (non-private teachers on disjoint shards).

Neighbouring datasets move the vote count by one, l → l′ = l ± 1, and DaRRM_γ releases one bit with
p_l = Pr[1 | l] = ½ + ½ h_l, h_l = s_l γ(l) (:mod:`darrm_opt.model.neighbours`). Each ordered pair (l, l′)
gives the points (b, a) = (Pr_{l′}[S], Pr_l[S]) for S = {1}, {0} (and (0, 0), (1, 1)); the set is closed under
(a, b) → (b, a) (both orders) and (a, b) → (1 − a, 1 − b) (the other output). The hockey-stick divergence
at slope x = e^{ε′} is the support function of the set,

    D(x) = max(0, max over rows of ½(1 − x) + ½ c_x(row)),   c_x = h_l − x h_{l′} (output 1), −h_l + x h_{l′} (0),

i.e. the certificate's rows (:func:`~darrm_opt.model.neighbours.pair_rows`) with E = x, so
D(x) = ½(1 − x) + ½ max(x − 1, max_rows c_x). The set is finite (4K points), so its upper concave hull is
known exactly: the profile is evaluated at the slope ≥ 1 of every hull edge (each row's float error bound
added, as :func:`~darrm_opt.certify.pairs.certify_pairs` bounds it), and :func:`envelope_vertices` builds
the dominating pair from those lines and their mirror images, exactly as for shared-data tables
(:mod:`darrm_opt.privacy.profile`): H_x(P‖Q) = max_v (a_v − x b_v) ≥ D(x) at every x, in both orders, so
adaptive composition of answers is dominated by the product of the pairs (Zhu, Dong, Wang 2022, Thm 10).
When γ is certified for (ε, δ) the statement (ε, δ) is one of the swept lines (slope rounded up).
"""

from __future__ import annotations

import math
import time

import numpy as np

from darrm_opt.certify.pairs import UNIT_ROUNDOFF, _validate, certify_pairs
from darrm_opt.model.neighbours import PateParams, pair_rows, signs
from darrm_opt.privacy.profile import PrivacyProfile, _upper_hull, envelope_vertices


def _points(gamma: np.ndarray) -> set[tuple[float, float]]:
    """(Pr_{l′}[S], Pr_l[S]) for every ordered neighbouring pair and S = {1}, {0} (float; they only pick slopes)."""
    K = gamma.size - 1
    p = 0.5 + 0.5 * signs(K) * gamma
    pts = {(0.0, 0.0), (1.0, 1.0)}
    for l in range(K + 1):
        for lp in (l - 1, l + 1):
            if 0 <= lp <= K:
                pts.update({(float(p[lp]), float(p[l])), (float(1.0 - p[lp]), float(1.0 - p[l]))})
    return pts


def profile_value(gamma: np.ndarray, x: float) -> float:
    """An upper bound on D(x) (module docstring) for x ≥ 1: the rows' float maximum plus their error bound."""
    A, _ = pair_rows(gamma.size - 1, x)
    top = max(float((A @ gamma).max()), x - 1.0)
    eta = 8 * UNIT_ROUNDOFF * (1.0 + x) + 4 * UNIT_ROUNDOFF * abs(top)
    return max(0.0, math.nextafter(0.5 * (1.0 - x) + 0.5 * (top + eta), math.inf))


def _hull_slopes(gamma: np.ndarray) -> list[float]:
    """The slopes ≥ 1 of the upper hull's edges (finite, non-vertical), and 1."""
    hull = _upper_hull(_points(gamma))
    slopes = {1.0}
    for (b1, a1), (b2, a2) in zip(hull, hull[1:], strict=False):
        if b2 > b1:
            x = (a2 - a1) / (b2 - b1)
            if math.isfinite(x) and x >= 1.0:
                slopes.add(x)
    return sorted(slopes)


def pate_profile(params: PateParams, gamma) -> PrivacyProfile:
    """The certified privacy profile of a PATE-setting γ (module docstring)."""
    t0 = time.perf_counter()
    g = _validate(gamma, params.K)
    lines = [(x, profile_value(g, x)) for x in _hull_slopes(g)]
    support = [(math.log(x), D) for x, D in lines]
    if certify_pairs(params, g).certified:  # (ε, δ)-DP exactly: a ≤ δ + x b for every float x ≥ e^ε
        x_up = math.nextafter(math.nextafter(math.exp(params.epsilon), math.inf), math.inf)
        lines.append((x_up, params.delta))
        support.append((params.epsilon, params.delta))
    vertices = envelope_vertices(lines)
    return PrivacyProfile(tuple(sorted(set(support))), vertices, len(lines), time.perf_counter() - t0)
