"""The plans' calibrations on the ledger's grid: few compositions, and a result that is still the fitting end of a
bracket of the stated width, composed on the ledger's own grid.

GNMax's σ search starts at the Gaussian-DP σ₀ with a first step of SIGMA_RTOL/2; the shaped table's scale search
is screened on the coarse grid and then finished on the ledger's (darrm_opt.planning.shaped_plan)."""

from __future__ import annotations

import pytest

import darrm_opt.privacy.pld as pld
from darrm_opt.model.shaped import ShapedPateParams, slope_cap
from darrm_opt.optimize.shaped import solve_shaped
from darrm_opt.planning import gaussian_plan, shaped_plan
from darrm_opt.planning.shaped_plan import calibrate_shaped, shaped_profile
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


def test_shaped_scale_is_decided_on_the_ledgers_grid(compositions):
    K, Q, eB, dB = 11, 40, 3.0, 1e-3 * (1 + 1e-9)
    plan = calibrate_shaped(K, Q, eB, dB, beta=3.0, slopes=40)
    assert plan.epsilon_spent == exact_epsilon([(plan.profile, Q)], dB) <= eB
    assert plan.solution.certificate.certified
    # the coarse screen did the walking: the ledger's grid composes its bracket's two ends, and here two more
    # (the screen ended within EPS_RTOL·ε_B of the budget by 6.0e-4, the ledger's grid by 6.4e-4: not within)
    assert compositions[1] == 5 and compositions[0] == 4 and plan.tried == 7
    # the fitting end of a bracket of relative width RTOL, or within EPS_RTOL of the budget
    if eB - plan.epsilon_spent > shaped_plan.EPS_RTOL * eB:
        a = plan.params.scale / (1 + shaped_plan.RTOL)
        tighter = ShapedPateParams(K, 3.0, a, 40, slope_cap(3.0, a, shaped_plan.FLOOR), plan.params.prior)
        sol = solve_shaped(tighter)
        assert exact_epsilon([(shaped_profile(tighter, sol.gamma), Q)], dB) > eB

