"""The one calibration search (darrm_opt.privacy.calibrate) and the one GDP μ."""

from __future__ import annotations

import math

import pytest
from scipy import optimize, stats

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.calibrate import arithmetic, bisect, geometric, integer, reach, walk
from darrm_opt.privacy.gaussian_profile import GaussianProfile, gdp_mu


def test_bisect_finds_the_boundary_from_either_side():
    good, bad = bisect(lambda x: x * x <= 2.0, 0.0, 2.0, arithmetic, done=60)
    assert good * good <= 2.0 < bad * bad and bad - good == pytest.approx(2.0 / 2 ** 60)
    good, bad = bisect(lambda x: x * x >= 2.0, 2.0, 1.0, geometric, done=lambda g, b: g / b - 1 <= 1e-12)
    assert bad * bad < 2.0 <= good * good and good == pytest.approx(math.sqrt(2.0), rel=1e-12)
    assert bisect(lambda n: n * n <= 50, 0, 50, integer, done=lambda g, b: b - g <= 1) == (7, 8)


def test_bisect_counts_its_steps():
    seen: list[float] = []

    def ok(x: float) -> bool:
        seen.append(x)
        return x <= 0.3

    assert bisect(ok, 0.0, 1.0, arithmetic, done=lambda g, b: False, max_steps=3) == (0.25, 0.375)
    assert seen == [0.5, 0.25, 0.375]


def test_walk_and_reach():
    steps: list[int] = []

    def double(x: float, i: int) -> float:
        steps.append(i)
        return x * 2

    assert walk(lambda x: x >= 100, 1.0, double) == (64.0, 128.0) and steps == list(range(7))
    assert walk(lambda x: x >= 100, 1.0, lambda x, i: x * 2, end=lambda x, i: x >= 32) == (32.0, None)
    assert walk(lambda x: x >= 100, 1.0, lambda x, i: x * (1 + 4 ** i)) == (10.0, 170.0)  # 1, 2, 10, 170
    with pytest.raises(ValueError, match="start"):
        walk(lambda x: True, 1.0, double)
    assert reach(lambda x: x <= 0.1, 1.0, lambda x, _: x / 3) == pytest.approx(1 / 27)
    assert reach(lambda x: x >= 0, 5.0, lambda x, _: x - 1) == 5.0


@pytest.mark.parametrize(("eps", "delta"), [(2.0, 1e-5), (8.0, 1e-6), (0.1, 1e-10), (50.0, 1e-5)])
def test_gdp_mu_is_balle_wang_root(eps, delta):
    mu = gdp_mu(eps, delta)

    def closed(m: float) -> float:  # Dong, Roth, Su 2022, Cor. 2.13
        return float(stats.norm.cdf(-eps / m + m / 2) - math.exp(eps) * stats.norm.cdf(-eps / m - m / 2))

    assert GaussianProfile(1.0, (mu,), discrete=False).delta(eps) < delta
    assert GaussianProfile(1.0, (mu * (1 + 1e-12),), discrete=False).delta(eps) >= delta
    assert mu == pytest.approx(optimize.brentq(lambda m: closed(m) - delta, 1e-9, 1e3, rtol=1e-14), rel=1e-12)


def test_gdp_mu_refuses_a_budget_no_mu_meets():
    with pytest.raises(InvalidParameter, match="budget_epsilon"):
        gdp_mu(1.0, 0.0)  # δ_μ(ε) > 0 = δ at every μ > 0
