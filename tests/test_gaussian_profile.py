"""The Gaussian dominating pair: Balle–Wang's closed form, its PLD in the ledger's exact composition, its
document."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.profile import profile_from_dict


def balle_wang(mu: float, eps: float) -> float:
    return norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu)


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε of μ-GDP at δ by bisection on Balle–Wang's formula."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if balle_wang(mu, mid) > delta else (lo, mid)
    return hi


@settings(max_examples=60, deadline=None)
@given(st.floats(0.05, 20.0), st.floats(0.01, 5.0), st.floats(0.0, 8.0))
def test_closed_form_is_balle_wang_and_an_upper_bound(sigma, shift, eps):
    p = GaussianProfile(sigma, (shift,), discrete=False)
    ref = balle_wang(shift / sigma, eps)
    d = p.delta(eps)
    assert d >= ref - 1e-15  # never below the exact value (scipy's own float error aside)
    assert d <= ref * (1 + 1e-9) + 1e-15


def test_composition_of_gaussian_answers_is_gdp():
    """Q answers of sensitivity √2, σ: μ = √(2Q)/σ GDP; the ledger's pessimistic composition is above the
    exact ε and close to it."""
    sigma, q, delta = 40.0, 100, 1e-5
    p = GaussianProfile(sigma, (1.0, 1.0), discrete=False)
    exact = gdp_epsilon(math.sqrt(2 * q) / sigma, delta)
    got = exact_epsilon([(p, q)], delta)
    assert exact <= got <= exact + q * 1e-5 + 1e-3


def test_discrete_pair_is_near_the_continuous_one_for_large_sigma():
    sigma, q, delta = 40.0, 100, 1e-5
    disc = exact_epsilon([(GaussianProfile(sigma, (1, 1), discrete=True), q)], delta)
    cont = exact_epsilon([(GaussianProfile(sigma, (1.0, 1.0), discrete=False), q)], delta)
    assert abs(disc - cont) < 5e-3


def discrete_gaussian_delta(sigma: float, eps: float) -> float:
    """δ(ε) of the pair (N_ℤ(0, σ²)², N_ℤ((1, 1), σ²)) by summing max(0, P − e^ε Q) over the whole grid."""
    x = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41)
    w = np.exp(-x.astype(float) ** 2 / (2 * sigma**2))
    p1 = w / w.sum()
    q1 = np.exp(-(x.astype(float) - 1) ** 2 / (2 * sigma**2)) / w.sum()
    p, q = np.outer(p1, p1), np.outer(q1, q1)
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


@settings(max_examples=25, deadline=None)
@given(st.floats(0.5, 8.0), st.floats(0.0, 3.0))
def test_discrete_pair_is_an_upper_bound_of_the_exact_delta_and_close_to_it(sigma, eps):
    """One answer: the connect-the-dots PLD's δ(ε) is never below the exact sum (CKS 2020, Thm 7 in two
    coordinates) and within the discretisation's reach of it."""
    exact = discrete_gaussian_delta(sigma, eps)
    got = float(GaussianProfile(sigma, (1, 1)).to_pld(1e-5).get_delta_for_epsilon(eps))
    assert got >= exact - 1e-15
    assert got <= exact + 2e-5 * max(exact, 1e-3)


@pytest.mark.parametrize(("q", "eps", "delta"), [(100, 2.0, 1e-5), (1000, 8.0, 1e-6)])
def test_composed_discrete_pair_is_within_1e_5_of_gaussian_dp(q, eps, delta):
    """σ calibrated by Gaussian DP to (ε, δ) over Q answers: the ledger's composition of the discrete pair
    spends ε within 1e-5 (it spent 2.001 and 8.03 under privacy-bucket rounding, moving the plan's σ by
    0.3 %)."""
    from darrm_opt.privacy.gaussian_profile import gdp_mu

    sigma = math.sqrt(2 * q) / gdp_mu(eps, delta)
    got = exact_epsilon([(GaussianProfile(sigma, (1, 1)), q)], delta)
    assert abs(got - eps) < 1e-5


def test_document_round_trip_and_rules():
    p = GaussianProfile(3.5, (1, 1))
    assert profile_from_dict(p.to_dict()) == p
    with pytest.raises(InvalidParameter, match="shifts"):
        GaussianProfile(1.0, (0.5,), discrete=True)
    with pytest.raises(InvalidParameter, match="sigma"):
        GaussianProfile(0.0, (1.0,))
