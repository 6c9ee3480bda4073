"""The Gaussian dominating pair: Balle–Wang's closed form, its PLD in the ledger's exact composition, its
document."""

from __future__ import annotations

import math

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


def test_document_round_trip_and_rules():
    p = GaussianProfile(3.5, (1, 1))
    assert profile_from_dict(p.to_dict()) == p
    with pytest.raises(InvalidParameter, match="shifts"):
        GaussianProfile(1.0, (0.5,), discrete=True)
    with pytest.raises(InvalidParameter, match="sigma"):
        GaussianProfile(0.0, (1.0,))
