"""The composition grid widens for pairs of wide loss range (darrm_opt.privacy.pld.grid_interval).

A Gaussian pair of large μ spans tens of loss units; composed on the 1e-5 grid its window held 10⁷–10⁸ points
(a named GNMax plan at K = 5, ε = 8 did not finish in 5 minutes). The grid then doubles until the window fits
MAX_WINDOW points. Checked here: the ε stays an upper bound of the closed form of the continuous Gaussian pair
(Q answers of N(0, σ²) against N(1, σ²) are √Q/σ-GDP, Dong, Roth, Su 2022, Cor. 2.13), close to it, and equal
to the fine grid's where that one can still run; narrow pairs keep the base grid."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, stats

from darrm_opt.privacy import pld
from darrm_opt.privacy.gaussian_profile import GaussianProfile


def gdp_epsilon(mu: float, delta: float) -> float:
    """ε at δ of μ-GDP: the root of Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) = δ."""
    def f(eps: float) -> float:
        return stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps + stats.norm.logcdf(-eps / mu - mu / 2)) - delta
    return optimize.brentq(f, 0.0, mu * mu / 2 + 12 * mu + 5, xtol=1e-14, rtol=1e-14)


@pytest.mark.parametrize("sigma, queries, delta", [(0.3, 10, 1e-3), (0.5, 20, 1e-5), (1.0, 10, 1e-6)])
def test_wide_gaussian_upper_bound(sigma, queries, delta):
    prof = GaussianProfile(sigma, (1.0,), discrete=False)
    parts = pld.canonical_parts([(prof, queries)])
    base = pld.interval_for(queries)
    grid = pld.grid_interval(parts)
    assert grid > base  # this pair's window needs the wider grid
    assert pld._window(parts, grid) / grid <= pld.MAX_WINDOW * 1.01
    exact = gdp_epsilon(math.sqrt(queries) / sigma, delta)
    got = pld.exact_epsilon([(prof, queries)], delta)
    assert exact <= got <= exact * (1 + 1e-4) + 1e-3


def test_narrow_pairs_keep_the_base_grid():
    for sigma, queries in ((89.17, 1000), (20.0, 100), (2.0, 1)):
        parts = pld.canonical_parts([(GaussianProfile(sigma, (1, 1)), queries)])
        assert pld.grid_interval(parts) == pld.interval_for(queries)
        assert pld.grid_interval(parts, coarse=True) == pld.interval_for(queries) * pld.COARSE


def test_widened_grid_agrees_with_the_fine_one(monkeypatch):
    """σ = 2, 10 answers: a 1.3·10⁷-point window on the fine grid (still feasible) against the widened one."""
    prof = GaussianProfile(2.0, (1, 1))
    widened = pld.exact_epsilon([(prof, 10)], 1e-3)
    pld.release_compositions()
    pld._EXACT.clear()
    monkeypatch.setattr(pld, "MAX_WINDOW", 1 << 40)
    fine = pld.exact_epsilon([(prof, 10)], 1e-3)
    assert fine == pytest.approx(widened, rel=1e-6)
    assert 8.7 < fine < 8.9


@pytest.mark.parametrize("prof, count", [(GaussianProfile(2.0, (1, 1)), 10), (GaussianProfile(5.0, (1, 1)), 100),
                                         (GaussianProfile(0.7, (1, 1, 1), sigmas=(3.0, 0.7, 0.7)), 7)])
def test_sparse_chernoff_window_is_dp_accountings(prof, count):
    """The window computed on a sparse PMF's support equals dp_accounting's on the dense array (up to the one
    point a last-bit difference of the moment generating function can move a rounded bound)."""
    from dp_accounting.pld import common

    for m in pld._pmfs(pld.bounded(prof.to_pld(pld.interval_for(count))).pld):
        assert pld._sparse(m)
        dense = np.asarray(m.to_dense_pmf()._probs, dtype=float)
        want = common.compute_self_convolve_bounds(dense, count, pld.SELF_TAIL)
        got = pld._chernoff_window(m, count, pld.SELF_TAIL)
        assert abs(got[0] - want[0]) <= 1 and abs(got[1] - want[1]) <= 1
        assert want[1] - want[0] > 10


def test_dense_copy_is_dp_accountings():
    m = pld._pmfs(pld.bounded(GaussianProfile(2.0, (1, 1)).to_pld(1e-5)).pld)[0]
    assert pld._sparse(m)
    want, got = m.to_dense_pmf(), pld._to_dense(m)
    assert (got._lower_loss, got._infinity_mass, got._discretization) == (want._lower_loss, want._infinity_mass,
                                                                          want._discretization)
    assert np.array_equal(np.asarray(got._probs), np.asarray(want._probs))
