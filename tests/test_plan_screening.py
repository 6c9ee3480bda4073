"""GNMax's σ calibration on the ledger's grid: few compositions, and a result that is still the fitting end of a
bracket of the stated width, composed on the ledger's own grid (the search starts at the Gaussian-DP σ₀ with a
first step of SIGMA_RTOL/2, darrm_opt.planning.gaussian_plan)."""

from __future__ import annotations

import pytest

import darrm_opt.privacy.pld as pld
from darrm_opt.planning import gaussian_plan
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.pld import exact_epsilon


@pytest.fixture
def compositions(monkeypatch):
    """Counts of the compositions computed (not cached), on the ledger's grid [0] and the coarse one [1]."""
    counts = [0, 0]
    plain = pld._exact_epsilon

    def counted(parts, delta, coarse):
        counts[int(coarse)] += 1
        return plain(parts, delta, coarse)

    monkeypatch.setattr(pld, "_exact_epsilon", counted)
    return counts


@pytest.mark.parametrize("queries, eps_b, delta_b", [(60, 4.0, 1e-3), (40, 1.0, 1e-5), (1, 2.0, 1e-5)])
def test_gaussian_sigma_is_the_fitting_end_of_a_sigma_rtol_bracket(compositions, queries, eps_b, delta_b):
    delta_b *= 1 + 1e-9  # a δ no other test composes at, so the counts below are this search's
    sigma, spent = gaussian_plan.calibrate(lambda s: GaussianProfile(s, (1, 1)), queries, eps_b, delta_b)
    assert spent == exact_epsilon([(GaussianProfile(sigma, (1, 1)), queries)], delta_b) <= eps_b
    # the least σ is within SIGMA_RTOL below (spent decreases in σ) unless σ already spends (1 − EPS_RTOL)·ε_B
    below = exact_epsilon([(GaussianProfile(sigma / (1 + gaussian_plan.SIGMA_RTOL), (1, 1)), queries)], delta_b)
    assert below > eps_b or spent >= eps_b * (1 - gaussian_plan.EPS_RTOL)
    assert compositions[1] == 0  # no coarse composition: every σ tried is decided on the ledger's grid
    if queries > 1:  # σ₀ is within SIGMA_RTOL/2 of the result: two or three compositions, not six or seven
        assert compositions[0] <= 3

