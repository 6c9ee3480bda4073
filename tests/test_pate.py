"""Tests of darrm_opt.privacy.gnmax against the PATE reference values in the project notes, plus properties.

Reference values are printed to 4-5 significant digits; tolerances are half a unit in the last printed
digit (so a value that rounds to the reference passes, anything else fails).
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.rdp import RdpAccountant
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy import gnmax


def half_ulp(reference: str) -> float:
    """Half a unit in the last printed digit of a decimal string such as '4.4535e-5'."""
    mantissa, _, exponent = reference.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def close_to(value: float, reference: str) -> bool:
    return abs(value - float(reference)) <= half_ulp(reference)


# ---------------------------------------------------------------------------------------------------
# reference values (notes, "PATE reference values")
# ---------------------------------------------------------------------------------------------------

V250 = [250] + [0] * 9
V200 = [200, 30, 20] + [0] * 7


def test_half_ulp_helper():
    assert half_ulp("4.4535e-5") == pytest.approx(5e-10)
    assert half_ulp("0.92788") == pytest.approx(5e-6)
    assert half_ulp("21.46") == pytest.approx(5e-3)


def test_q_tilde_unanimous_ten_classes():
    assert close_to(gnmax.q_tilde(V250, 40), "4.4535e-5")


def test_rdp_unanimous_ten_classes_data_dependent_beats_independent():
    assert close_to(gnmax.rdp_gnmax(V250, 40, 14), "3.1202e-5")
    assert gnmax.rdp_gnmax_data_independent(14, 40) == pytest.approx(0.00875, rel=1e-12)
    assert gnmax.data_dependent_bound_applies(V250, 40, 14)


def test_q_tilde_and_rdp_split_votes():
    assert close_to(gnmax.q_tilde(V200, 40), "3.4827e-3")
    # The exact value is 1.425549e-3, which rounds to 1.4255e-3 at 5 digits; the notes' 1.4256e-3 is the
    # double rounding 1.425549 -> 1.42555 -> 1.4256 (the notes' q̃ above rounds correctly, and matching
    # 1.4256 to half a unit would need q̃ ≈ 3.4829e-3).  So allow one unit here and pin 7 digits.
    value = gnmax.rdp_gnmax(V200, 40, 14)
    assert abs(value - 1.4256e-3) <= 2 * half_ulp("1.4256e-3")
    assert value == pytest.approx(1.425549e-3, abs=5e-10)


def test_two_class_sigma2_order5():
    assert close_to(gnmax.rdp_gnmax([11, 0], 2, 5), "0.92788")


def test_two_class_close_vote_falls_back_to_data_independent():
    assert not gnmax.data_dependent_bound_applies([6, 5], 2, 5)
    assert gnmax.rdp_gnmax([6, 5], 2, 5) == pytest.approx(1.25, rel=1e-12)


def test_two_class_sigma4():
    assert close_to(gnmax.log_q_tilde([11, 0], 4), "-3.652935")
    assert close_to(gnmax.rdp_gnmax([11, 0], 4, 2), "0.081303")
    assert gnmax.rdp_gnmax_data_independent(2, 4) == pytest.approx(0.125)


def test_confident_gnmax_threshold_reference():
    assert close_to(gnmax.prob_answered(250, 200, 150), "0.63056")
    assert close_to(gnmax.rdp_threshold_check(250, 200, 150, 14), "3.111e-4")
    # the value is the sensitivity-1 data-independent cost λ / (2 σ₁²)
    assert gnmax.rdp_threshold_check(250, 200, 150, 14) == pytest.approx(14 / (2 * 150**2), rel=1e-12)


def test_threshold_check_data_dependent_when_far_from_threshold():
    lam = 14
    far = gnmax.rdp_threshold_check(2000, 200, 150, lam)  # max count 12 σ₁ above T
    assert 0 < far < lam / (2 * 150**2) / 10
    # symmetric: far below the threshold is just as cheap (⊥ is then the likely outcome)
    assert gnmax.rdp_threshold_check(0, 1800, 150, lam) == pytest.approx(far, rel=1e-9)


def test_rdp_to_dp_theorem5():
    assert close_to(gnmax.rdp_to_dp(1.18, 14, 1e-5), "2.066")
    # the λ (not λ-1) slip of PATE's Table 2 would give 2.002: make sure we are not doing that
    assert abs(gnmax.rdp_to_dp(1.18, 14, 1e-5) - (1.18 + math.log(1e5) / 14)) > 0.05


@pytest.mark.parametrize(
    ("epsilon", "sigma_ref", "order_lo", "order_hi"),
    [(0.2676, "21.46", 62, 65), (0.2556, "22.46", 62, 65)],
)
def test_calibrate_reproduces_darrm_table4(epsilon, sigma_ref, order_lo, order_hi):
    cal = gnmax.calibrate_gnmax_sigma(epsilon, 3e-4)
    assert close_to(cal.sigma, sigma_ref)
    assert round(cal.sigma, 2) == float(sigma_ref)
    assert order_lo <= cal.order <= order_hi
    assert cal.epsilon <= epsilon
    assert cal.epsilon == pytest.approx(epsilon, rel=1e-9)
    # consistent with best_epsilon over the same grid
    best = gnmax.best_epsilon(lambda lam: gnmax.rdp_gnmax_data_independent(lam, cal.sigma), gnmax.DEFAULT_ORDERS, 3e-4)
    assert best.order == cal.order
    assert best.epsilon <= epsilon
    # minimal: 0.1% less noise misses the target at every order
    lower = gnmax.best_epsilon(
        lambda lam: gnmax.rdp_gnmax_data_independent(lam, cal.sigma * 0.999), gnmax.DEFAULT_ORDERS, 3e-4
    )
    assert lower.epsilon > epsilon


def test_calibrate_exact_values_and_rounding_direction():
    cal = gnmax.calibrate_gnmax_sigma(0.2676, 3e-4)
    assert cal.sigma == pytest.approx(21.460492, abs=1e-6)
    assert cal.order == 62.0
    # Table 4's 21.46 is rounded to nearest and misses the target by ~6e-6; rounding up to 21.47 meets it
    at_2146 = gnmax.best_epsilon(lambda lam: lam / 21.46**2, gnmax.DEFAULT_ORDERS, 3e-4)
    assert 0.2676 < at_2146.epsilon < 0.26761
    at_2147 = gnmax.best_epsilon(lambda lam: lam / 21.47**2, gnmax.DEFAULT_ORDERS, 3e-4)
    assert at_2147.epsilon <= 0.2676
    cal2 = gnmax.calibrate_gnmax_sigma(0.2556, 3e-4)
    assert cal2.sigma == pytest.approx(22.459874, abs=1e-6)
    assert cal2.order == 65.0


def test_calibrate_composes_over_queries():
    one = gnmax.calibrate_gnmax_sigma(1.0, 1e-5)
    many = gnmax.calibrate_gnmax_sigma(1.0, 1e-5, n_queries=16)
    assert many.sigma > one.sigma
    # k queries at σ cost as much as one query at σ/√k, order by order
    assert many.sigma == pytest.approx(4 * one.sigma, rel=1e-12)
    assert many.order == one.order


def test_calibrate_unreachable_target_raises():
    with pytest.raises(InvalidParameter) as info:
        gnmax.calibrate_gnmax_sigma(0.01, 1e-5)  # needs an order > 1152
    assert info.value.parameter == "orders"


def test_calibration_is_frozen():
    cal = gnmax.calibrate_gnmax_sigma(0.2676, 3e-4)
    with pytest.raises(AttributeError):
        cal.sigma = 1.0  # type: ignore[misc]


def test_darrm_k11_two_classes_data_dependent_never_helps():
    """DaRRM App. D.2.1: with K = 11 and 2 classes the data-dependent bound never beats λ/σ²."""
    orders = gnmax.DEFAULT_ORDERS
    for sigma in (21.46, 22.46):
        for top in range(6, 12):
            votes = [top, 11 - top]
            assert np.all(gnmax.rdp_gnmax(votes, sigma, orders) == gnmax.rdp_gnmax_data_independent(orders, sigma))
        # at the calibrated order the conditions do not even hold (λ > μ₁)
        assert not gnmax.data_dependent_bound_applies([11, 0], sigma, 62.0)


def test_data_independent_matches_dp_accounting():
    """GNMax is a Gaussian mechanism with noise multiplier σ/√2 in dp_accounting's (sensitivity-1) terms."""
    orders = [1.5, 2.0, 14.0, 62.0, 100.0]
    sigma, k = 40.0, 7
    accountant = RdpAccountant(orders)
    accountant.compose(dp_accounting.GaussianDpEvent(sigma / math.sqrt(2)), k)
    ours = k * gnmax.rdp_gnmax_data_independent(orders, sigma)
    np.testing.assert_allclose(ours, accountant._rdp, rtol=1e-12)


def test_data_dependent_bound_is_a_valid_upper_bound_on_exact_divergence():
    """Thm. 6 must upper-bound the true Rényi divergence between GNMax outputs on neighbours."""
    cases = [([11, 0], [10, 1], 4.0, 2.0), ([11, 0], [10, 1], 2.0, 5.0), ([250, 0, 0], [249, 1, 0], 40.0, 14.0)]
    for votes, neighbour, sigma, lam in cases:
        p = gnmax.gnmax_output_probabilities(votes, sigma)
        q = gnmax.gnmax_output_probabilities(neighbour, sigma)
        exact = math.log(float(np.sum(p**lam * q ** (1 - lam)))) / (lam - 1)
        assert 0 < exact <= gnmax.rdp_gnmax(votes, sigma, lam)


def test_rdp_gnmax_vectorised_over_orders():
    orders = np.array([2.0, 5.0, 14.0, 50.0])
    vec = gnmax.rdp_gnmax(V200, 40, orders)
    assert vec.shape == (4,)
    for lam, value in zip(orders, vec):
        assert value == pytest.approx(gnmax.rdp_gnmax(V200, 40, float(lam)), rel=1e-12)


def test_log_q_tilde_batch_and_stability():
    batch = np.array([V250, V200])
    np.testing.assert_allclose(
        gnmax.log_q_tilde(batch, 40), [gnmax.log_q_tilde(V250, 40), gnmax.log_q_tilde(V200, 40)], rtol=1e-12
    )
    # far beyond where q̃ underflows to 0 in linear space, the log is still finite and right
    lq = gnmax.log_q_tilde([5000, 0], 10.0)
    assert math.isfinite(lq)
    # leading term of log Φ(-z) = -z²/2 - log(z √(2π)), z = 5000 / (√2 · 10)
    z = 5000 / (math.sqrt(2) * 10)
    assert lq == pytest.approx(-z * z / 2 - math.log(z * math.sqrt(2 * math.pi)), rel=1e-6)
    # the true RDP is ~exp(-62500): it must come out as a (denormal or zero) non-negative float, not nan
    assert 0.0 <= gnmax.rdp_gnmax([5000, 0], 10.0, 14) < 1e-300


def test_q_tilde_capped_by_one_minus_one_over_m():
    votes = [5] * 10  # union bound would give 4.5
    assert gnmax.q_tilde(votes, 3.0) == pytest.approx(0.9, rel=1e-12)


def test_rdp_data_dependent_q_endpoints():
    assert gnmax.rdp_data_dependent(1.0, 5, 2.0) == pytest.approx(1.25)
    assert gnmax.rdp_data_dependent(0.0, 5, 2.0) == 0.0
    assert gnmax.rdp_data_dependent(math.exp(gnmax.log_q_tilde([11, 0], 2)), 5, 2) == pytest.approx(
        gnmax.rdp_gnmax([11, 0], 2, 5), rel=1e-9
    )


# ---------------------------------------------------------------------------------------------------
# aggregators
# ---------------------------------------------------------------------------------------------------


def test_gnmax_empirical_frequencies_match_exact_distribution():
    rng = np.random.default_rng(20240607)
    votes = np.array([6.0, 5.0, 3.0, 0.0])
    sigma = 2.0
    draws = 20_000
    answers = gnmax.gnmax_aggregate(np.broadcast_to(votes, (draws, votes.size)), sigma, rng)
    assert answers.shape == (draws,) and answers.dtype == np.int64
    freq = np.bincount(answers, minlength=votes.size) / draws
    exact = gnmax.gnmax_output_probabilities(votes, sigma)
    assert exact.sum() == pytest.approx(1.0, abs=1e-9)
    se = np.sqrt(exact * (1 - exact) / draws)
    assert np.all(np.abs(freq - exact) <= 4 * se + 1e-12)
    # and Prop. 7 bounds the off-plurality mass
    assert 1 - exact[0] <= gnmax.q_tilde(votes, sigma)


def test_gnmax_exact_two_class_closed_form():
    from scipy.stats import norm

    p = gnmax.gnmax_output_probabilities([11, 4], 3.0)
    assert p[0] == pytest.approx(norm.cdf(7 / (math.sqrt(2) * 3.0)), rel=1e-9)


def test_gnmax_single_histogram_returns_int():
    out = gnmax.gnmax_aggregate([0, 100000, 0], 1.0, np.random.default_rng(0))
    assert out == 1 and isinstance(out, int)


def test_confident_gnmax_single_and_batch():
    rng = np.random.default_rng(1)
    assert gnmax.confident_gnmax([1000, 0, 0], 10, 1.0, 1.0, rng) == 0
    assert gnmax.confident_gnmax([10, 0, 0], 1000, 1.0, 1.0, rng) is None
    batch = np.array([[1000, 0, 0], [0, 0, 10], [0, 2000, 0]])
    out = gnmax.confident_gnmax(batch, 500, 1.0, 1.0, rng)
    np.testing.assert_array_equal(out, [0, -1, 1])


def test_confident_gnmax_answer_rate_matches_prob_answered():
    rng = np.random.default_rng(7)
    n = 20_000
    votes = np.broadcast_to(np.array([250.0, 30.0, 20.0]), (n, 3))
    out = gnmax.confident_gnmax(votes, 200, 150, 40, rng)
    rate = np.mean(out >= 0)
    p = gnmax.prob_answered(250, 200, 150)
    assert abs(rate - p) <= 4 * math.sqrt(p * (1 - p) / n)


# ---------------------------------------------------------------------------------------------------
# properties
# ---------------------------------------------------------------------------------------------------

votes_st = st.lists(st.integers(min_value=0, max_value=300), min_size=2, max_size=10)
sigma_st = st.floats(min_value=0.5, max_value=150.0)
order_st = st.floats(min_value=1.01, max_value=200.0)


@settings(max_examples=300, deadline=None)
@given(votes=votes_st, sigma=sigma_st, order=order_st)
def test_data_dependent_never_exceeds_data_independent(votes, sigma, order):
    dd = gnmax.rdp_gnmax(votes, sigma, order)
    di = gnmax.rdp_gnmax_data_independent(order, sigma)
    assert 0.0 <= dd <= di


@settings(max_examples=300, deadline=None)
@given(q=st.floats(min_value=0.0, max_value=1.0), sigma=sigma_st, order=order_st)
def test_rdp_data_dependent_in_range_for_any_q(q, sigma, order):
    value = gnmax.rdp_data_dependent(q, order, sigma)
    assert 0.0 <= value <= order / sigma**2


@settings(max_examples=300, deadline=None)
@given(votes=votes_st, sigma=sigma_st)
def test_q_tilde_is_a_probability(votes, sigma):
    q = gnmax.q_tilde(votes, sigma)
    assert 0.0 <= q <= 1.0
    assert q <= 1 - 1 / len(votes) + 1e-15


@settings(max_examples=40, deadline=None)
@given(votes=st.lists(st.integers(min_value=0, max_value=30), min_size=2, max_size=5), sigma=st.floats(0.5, 20.0))
def test_q_tilde_bounds_exact_error_probability(votes, sigma):
    exact = gnmax.gnmax_output_probabilities(votes, sigma)
    assert 1 - exact[int(np.argmax(votes))] <= gnmax.q_tilde(votes, sigma) + 1e-9


@settings(max_examples=100, deadline=None)
@given(
    votes=st.lists(st.integers(min_value=0, max_value=1000), min_size=2, max_size=20),
    winner=st.integers(min_value=0, max_value=19),
    sigma=st.floats(min_value=0.1, max_value=100.0),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_gnmax_huge_margin_returns_argmax(votes, winner, sigma, seed):
    winner %= len(votes)
    votes = list(votes)
    votes[winner] = max(votes) + 100 * sigma  # a 100 σ margin: failure probability ~ 1e-2000
    out = gnmax.gnmax_aggregate(np.tile(votes, (50, 1)), sigma, np.random.default_rng(seed))
    assert np.all(out == winner)


@settings(max_examples=100, deadline=None)
@given(
    eps=st.floats(min_value=0.05, max_value=5.0),
    delta=st.floats(min_value=1e-10, max_value=1e-2),
    k=st.integers(min_value=1, max_value=200),
)
def test_calibration_meets_target_and_is_tight(eps, delta, k):
    assume(1 + math.log(1 / delta) / eps < 199.0)
    cal = gnmax.calibrate_gnmax_sigma(eps, delta, n_queries=k)
    assert cal.epsilon <= eps
    assert gnmax.rdp_to_dp(k * gnmax.rdp_gnmax_data_independent(cal.order, cal.sigma), cal.order, delta) <= eps
    smaller = gnmax.best_epsilon(lambda lam: k * lam / (cal.sigma * (1 - 1e-6)) ** 2, gnmax.DEFAULT_ORDERS, delta)
    assert smaller.epsilon > eps


# ---------------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda: gnmax.rdp_gnmax_data_independent(14, 0), "sigma"),
        (lambda: gnmax.rdp_gnmax_data_independent(14, -1.0), "sigma"),
        (lambda: gnmax.rdp_gnmax_data_independent(14, float("nan")), "sigma"),
        (lambda: gnmax.rdp_gnmax_data_independent(1.0, 40), "order"),
        (lambda: gnmax.rdp_gnmax_data_independent([2.0, 0.5], 40), "order"),
        (lambda: gnmax.rdp_gnmax([5, -1], 40, 14), "votes"),
        (lambda: gnmax.rdp_gnmax([5], 40, 14), "votes"),
        (lambda: gnmax.log_q_tilde([5, float("inf")], 40), "votes"),
        (lambda: gnmax.rdp_data_dependent(1.5, 14, 40), "q"),
        (lambda: gnmax.rdp_to_dp(1.0, 14, 0.0), "delta"),
        (lambda: gnmax.rdp_to_dp(1.0, 14, 1.0), "delta"),
        (lambda: gnmax.rdp_to_dp(1.0, 1.0, 1e-5), "order"),
        (lambda: gnmax.best_epsilon(lambda lam: 0.0, [0.5, 2.0], 1e-5), "orders"),
        (lambda: gnmax.best_epsilon(lambda lam: 0.0, [2.0], 2.0), "delta"),
        (lambda: gnmax.calibrate_gnmax_sigma(0.0, 1e-5), "target_epsilon"),
        (lambda: gnmax.calibrate_gnmax_sigma(1.0, 1e-5, n_queries=0), "n_queries"),
        (lambda: gnmax.calibrate_gnmax_sigma(1.0, 1e-5, orders=[1.0, 2.0]), "orders"),
        (lambda: gnmax.gnmax_aggregate([1, 2], 1.0, 42), "rng"),
        (lambda: gnmax.gnmax_aggregate([1, -2], 1.0, np.random.default_rng(0)), "votes_hist"),
        (lambda: gnmax.gnmax_aggregate([1, 2], 0.0, np.random.default_rng(0)), "sigma"),
        (lambda: gnmax.confident_gnmax([1, 2], 1.0, 0.0, 1.0, np.random.default_rng(0)), "sigma1"),
        (lambda: gnmax.confident_gnmax([1, 2], 1.0, 1.0, -3.0, np.random.default_rng(0)), "sigma2"),
        (lambda: gnmax.confident_gnmax([1, 2], float("nan"), 1.0, 1.0, np.random.default_rng(0)), "threshold"),
        (lambda: gnmax.prob_answered(-1, 200, 150), "max_count"),
        (lambda: gnmax.rdp_threshold_check(250, 200, 150, 0.9), "order"),
    ],
)
def test_invalid_parameters_raise(call, parameter):
    with pytest.raises(InvalidParameter) as info:
        call()
    assert info.value.parameter == parameter
    assert isinstance(info.value, ValueError)
