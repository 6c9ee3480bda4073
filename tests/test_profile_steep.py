"""Issue 20: the profile's steep edges and its infinite-loss mass, against brute force over every multiset.

The hull of the event points (b, a) = (Pr_D′[S], Pr_D[S]) rises from (0, a₀) by edges far steeper than the
slopes the float sweeps resolve (K = 5, m = 3: 2566, 2101, 1901). The truths here are computed independently
of the library: every corner multiset's points by direct convolution in 50-digit arithmetic (structural zeros
stay exact zeros, so b = 0 is recognised exactly).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from brute_profile import shared_points
from hypothesis import given, settings
from hypothesis import strategies as st

from darrm_opt.model.params import Params
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.profile import MARGIN, infinite_loss_mass, privacy_profile

#: γ_opt of K = 5, m = 3, ε = 0.1, Δ = 1e-5 (``darrm-opt solve --K 5 --m 3``, HiGHS)
K5 = (Params(5, 3, 0.1, 1e-5), [1.0, 1.0, 0.9999999714219419, 0.9999999714219419, 1.0, 1.0])
#: γ_opt of K = 3, m = 2, ε = 0.5, Δ = 0.1 (a large Δ: infinite mass 0.19 without the steep stage, 0.028 true)
K3 = (Params(3, 2, 0.5, 0.1), None)
#: γ_opt of K = 7, m = 3, ε = 0.1, Δ = 1e-5 (no steep edge: the profile is unchanged)
K7 = (Params(7, 3, 0.1, 1e-5), None)


def _gamma(case):
    params, gamma = case
    if gamma is None:
        from darrm_opt.optimize.optimizer import solve

        gamma = solve(params).gamma
    return params, np.array(gamma, dtype=float)


def brute_infinite_mass(points) -> mpmath.mpf:
    """max Pr_D[S] over the points with Pr_D′[S] = 0 exactly."""
    return max([a for b, a in points if b == 0] + [mpmath.mpf(0)])


def brute_delta(points, eps: float) -> mpmath.mpf:
    with mpmath.workdps(50):
        E = mpmath.exp(mpmath.mpf(eps))
        return max(mpmath.mpf(0), max(a - E * b for b, a in points))


def test_k5_m3_infinite_mass_is_the_true_one():
    """K = 5, m = 3: brute force puts the infinite-loss mass at 6.0056e-10 (four teachers at (Δ, 0) and one at
    (1 − Δ, 1): two Δ-events under D; the grid's steepest slope alone gives 2.99e-5); the profile is within
    MARGIN of it (relative 1.7e-4), and the library's closed form (infinite_loss_mass) is exact."""
    params, gamma = _gamma(K5)
    pts = shared_points(params, gamma)
    a0 = brute_infinite_mass(pts)
    assert abs(a0 - mpmath.mpf("6.0056354e-10")) < 1e-17
    exact = infinite_loss_mass(params, gamma)
    with mpmath.workdps(50):
        assert abs(mpmath.mpf(exact.numerator) / exact.denominator - a0) < mpmath.mpf(10) ** -45
    prof = privacy_profile(params, gamma)
    assert a0 <= prof.infinite_mass <= a0 * (1 + 1e-3)
    assert prof.infinite_mass <= a0 + MARGIN + 1e-17  # the direct convolution's own bound: ~6e-19 here
    old = privacy_profile(params, gamma, steep=False)
    assert old.infinite_mass > 2.9e-5  # without the steep stage: the value at the grid's steepest slope


STEEP_EPS = [0.0, 0.1, 0.3, 0.6, 1.0, 2.0, 4.0, 6.0, 7.0, 7.5, 7.55, 7.6, 7.65, 7.7, 7.8, 7.85, 7.9, 8.0, 9.0, 12.0,
             20.0, 40.0]


@pytest.mark.parametrize("case", [K5, K3, K7], ids=["K5-m3", "K3-m2-bigDelta", "K7-m3"])
def test_profile_is_above_the_truth_tight_and_never_looser(case):
    """At every ε′ of a grid through the steep edges: the true δ(ε′) ≤ the profile's ≤ the truth + 1e-12, and
    never above the profile without the steep stage; the envelope likewise at every vertex of either (float
    interpolation of the two vertex lists: one ulp of 1)."""
    params, gamma = _gamma(case)
    pts = shared_points(params, gamma)
    prof = privacy_profile(params, gamma)
    old = privacy_profile(params, gamma, steep=False)
    assert brute_infinite_mass(pts) <= prof.infinite_mass <= brute_infinite_mass(pts) + 1e-12
    for e in STEEP_EPS:
        truth = brute_delta(pts, e)
        got = prof.delta(e)
        assert truth <= got <= truth + 1e-12, (e, got, float(truth))
        assert got <= old.delta(e), (e, got, old.delta(e))
    for b, a in prof.vertices:
        assert a <= old.envelope(b) + 2.0**-52
    for b, a in old.vertices:
        assert prof.envelope(b) <= a + 2.0**-52


@pytest.mark.slow  # subprocesses / a 100-answer composition
def test_composition_of_100_answers_tightens():
    """K = 5, m = 3: without the steep stage 100 answers at δ = 1e-5 have no finite ε (100 × the infinite mass
    2.99e-5 > 1e-5); with the true 6.0e-10 they spend ε ≈ 14.78. At δ_total = 1 − (1 − δ)^100 (1 − 1e-4) the exact
    ε is 7.64 against 8.87 without it."""
    params, gamma = _gamma(K5)
    new = privacy_profile(params, gamma)
    old = privacy_profile(params, gamma, steep=False)
    assert math.isinf(exact_epsilon([(old, 100)], 1e-5))
    assert exact_epsilon([(new, 100)], 1e-5) == pytest.approx(14.78, abs=0.05)
    d_total = 1 - (1 - params.delta) ** 100 * (1 - 1e-4)
    e_new, e_old = exact_epsilon([(new, 100)], d_total), exact_epsilon([(old, 100)], d_total)
    assert e_new == pytest.approx(7.64, abs=0.02) and e_old == pytest.approx(8.87, abs=0.02)


@settings(max_examples=15, deadline=None)
@given(K=st.sampled_from([1, 3, 5]), td=st.sampled_from([1e-5, 0.01, 0.3, 0.0]), eps=st.sampled_from([0.05, 1.0]),
       seed=st.integers(0, 2**32 - 1))
def test_infinite_loss_mass_is_the_brute_force_one(K, td, eps, seed):
    """The closed form of infinite_loss_mass (the extreme teachers of Lemma 5.1, L′ fixed on a zero-weight
    count) equals the brute-force maximum over every multiset and output with Pr_D′ = 0."""
    rng = np.random.default_rng(seed)
    gamma = rng.random(K + 1)
    gamma[rng.random(K + 1) < 0.5] = 1.0
    params = Params(K, 1, eps, td, delta=max(td, 1e-3))
    a0 = brute_infinite_mass(shared_points(params, gamma))
    got = infinite_loss_mass(params, gamma)
    with mpmath.workdps(50):
        assert abs(mpmath.mpf(got.numerator) / got.denominator - a0) <= mpmath.mpf(10) ** -40 * max(a0, 1e-300)
