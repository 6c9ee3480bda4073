"""Negative control: "Immutable Noisy ArgMax" (the near-zero-cost (NZC) query paper) is not DP.

The mechanism (that paper's Def. 3 and Sec. 4.2): take the vote histogram v, add a large constant c to
the count of its (noiseless) argmax, then report the noisy argmax with noise scale set for sensitivity 1:
Laplace(1/γ) (claimed (2γ, 0)-DP, its Thm. 4) or N(0, σ²) (claimed RDP near 0 for large σ).  The paper
chooses c = log(L/τ)/γ (Laplace) or c = σ √(2 log(2L/τ)) (Gaussian) so that the output equals the
noiseless argmax with probability about 1 − τ.

That is exactly why it cannot be private: on the neighbouring histograms (6, 5) and (5, 6) (one teacher
switches its vote) the two noiseless argmaxes differ, so the two output distributions are almost
disjoint and any (ε, δ) guarantee needs ε ≥ log((Pr_D[0] − δ) / Pr_D'[0]) ≈ log((1 − τ − δ)/τ).  The
boosted vote function has sensitivity c + 1, not the 1 the noise is calibrated for.

The implementation lives only here, as an audit target; it is not a mechanism darrm-opt offers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

DELTA = 1e-5


def boosted_votes(votes: np.ndarray, c: float) -> np.ndarray:
    """v̂(c): add c to the count of the noiseless argmax (first one on ties)."""
    v = np.asarray(votes, dtype=float).copy()
    v[int(np.argmax(v))] += c
    return v


def immutable_noisy_argmax(votes, c: float, rng: np.random.Generator, size: int, *, gamma=None, sigma=None):
    """``size`` independent runs of argmax(v̂(c) + noise); Laplace(1/γ) noise or N(0, σ²) noise."""
    v = boosted_votes(votes, c)
    if gamma is not None:
        noise = rng.laplace(0.0, 1.0 / gamma, size=(size, v.size))
    else:
        noise = rng.normal(0.0, sigma, size=(size, v.size))
    return np.argmax(v + noise, axis=1)


def laplace_difference_sf(t: float, b: float) -> float:
    """Pr[Z₁ − Z₀ > t] for Z₀, Z₁ i.i.d. Laplace(b), t ≥ 0: ½ e^{−t/b} (1 + t/(2b))."""
    return 0.5 * math.exp(-t / b) * (1.0 + t / (2.0 * b))


def exact_pr_zero_laplace(votes, c: float, gamma: float) -> float:
    """Pr[output = 0] for two classes: Pr[Z₁ − Z₀ < v̂₀ − v̂₁]."""
    v = boosted_votes(votes, c)
    gap = v[0] - v[1]
    b = 1.0 / gamma
    return 1.0 - laplace_difference_sf(gap, b) if gap >= 0 else laplace_difference_sf(-gap, b)


def exact_pr_zero_gaussian(votes, c: float, sigma: float) -> float:
    v = boosted_votes(votes, c)
    return float(stats.norm.cdf((v[0] - v[1]) / (math.sqrt(2.0) * sigma)))


def implied_epsilon(p_d: float, p_dprime: float, delta: float) -> float:
    """Smallest ε with Pr_D[S] ≤ e^ε Pr_D'[S] + δ for S = {0}."""
    return math.log((p_d - delta) / p_dprime)


D, D_PRIME = np.array([6, 5]), np.array([5, 6])
L = 2  # classes
TAU = 1e-9


def test_laplace_difference_formula():
    rng = np.random.default_rng(3)
    b = 2.5
    z = rng.laplace(0, b, size=(400_000, 2))
    for t in (0.0, 1.0, 4.0, 10.0):
        p = laplace_difference_sf(t, b)
        est = np.mean(z[:, 1] - z[:, 0] > t)
        assert abs(est - p) <= 4 * math.sqrt(p * (1 - p) / len(z))


def test_boosted_vote_function_sensitivity_is_c_plus_one():
    c = 1000.0
    assert np.max(np.abs(boosted_votes(D, c) - boosted_votes(D_PRIME, c))) == c + 1


def test_immutable_noisy_argmax_laplace_is_not_private():
    gamma = 0.01  # the paper's Thm. 4 claims (2γ, 0) = (0.02, 0)-DP per query
    claimed_epsilon = 2 * gamma
    c = math.log(L / TAU) / gamma  # the paper's choice, ≈ 2142

    p_d = exact_pr_zero_laplace(D, c, gamma)
    p_dp = exact_pr_zero_laplace(D_PRIME, c, gamma)
    tau = max(1 - p_d, p_dp)  # the actual failure probability (a bit above the paper's τ: its union
    assert tau < 10 * TAU  # bound over |noise| < c misses that two noises can add up to c)
    eps_lower = implied_epsilon(p_d, p_dp, DELTA)
    assert eps_lower >= math.log((1 - tau - DELTA) / tau)
    assert eps_lower > 18
    assert eps_lower > 500 * claimed_epsilon

    # the same conclusion from samples alone (seeded, 200k runs each)
    rng = np.random.default_rng(2024)
    n = 200_000
    zeros_d = int(np.sum(immutable_noisy_argmax(D, c, rng, n, gamma=gamma) == 0))
    zeros_dp = int(np.sum(immutable_noisy_argmax(D_PRIME, c, rng, n, gamma=gamma) == 0))
    # one-sided 99.9% Clopper-Pearson bounds: Pr_D[0] from below, Pr_D'[0] from above
    p_d_low = stats.beta.ppf(0.001, zeros_d, n - zeros_d + 1) if zeros_d > 0 else 0.0
    p_dp_high = stats.beta.ppf(0.999, zeros_dp + 1, n - zeros_dp)
    assert implied_epsilon(p_d_low, p_dp_high, DELTA) > 10


def test_immutable_noisy_argmax_gaussian_is_not_private():
    sigma = 100.0  # huge noise: the paper claims near-zero privacy cost
    c = sigma * math.sqrt(2 * math.log(2 * L / TAU))
    claimed_rdp_order_2 = 2 / (2 * sigma**2)  # sensitivity-1 Gaussian as the paper calibrates it: 1e-4
    p_d = exact_pr_zero_gaussian(D, c, sigma)
    p_dp = exact_pr_zero_gaussian(D_PRIME, c, sigma)
    assert p_dp == pytest.approx(1 - p_d, rel=1e-9)  # symmetric by construction
    eps_lower = implied_epsilon(p_d, p_dp, DELTA)
    assert eps_lower > 10
    assert eps_lower > 1e5 * claimed_rdp_order_2

    rng = np.random.default_rng(99)
    n = 200_000
    zeros_d = int(np.sum(immutable_noisy_argmax(D, c, rng, n, sigma=sigma) == 0))
    zeros_dp = int(np.sum(immutable_noisy_argmax(D_PRIME, c, rng, n, sigma=sigma) == 0))
    p_d_low = stats.beta.ppf(0.001, zeros_d, n - zeros_d + 1)
    p_dp_high = stats.beta.ppf(0.999, zeros_dp + 1, n - zeros_dp)
    assert implied_epsilon(p_d_low, p_dp_high, DELTA) > 10


def test_audit_passes_the_honest_mechanism():
    """Control for the control: without the boost (c = 0), noisy argmax keeps the claimed ε = 2γ."""
    gamma = 0.01
    p_d = exact_pr_zero_laplace(D, 0.0, gamma)
    p_dp = exact_pr_zero_laplace(D_PRIME, 0.0, gamma)
    assert 0 < math.log(p_d / p_dp) <= 2 * gamma
    assert 0 < math.log((1 - p_dp) / (1 - p_d)) <= 2 * gamma
