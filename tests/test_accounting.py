"""Tests of darrm_opt.privacy.accounting against hand-computed values, an exact mpmath reference and dp-accounting."""

from __future__ import annotations

import itertools
import math

import mpmath
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy import accounting as acc

eps0_st = st.floats(min_value=0.01, max_value=3.0)
delta0_st = st.sampled_from([0.0, 1e-8, 1e-5, 1e-3])
k_st = st.integers(min_value=1, max_value=60)


def exact_rr_delta(eps0: float, k: int, eps: float, dps: int = 50) -> mpmath.mpf:
    """δ_rr(ε) = Σ_j C(k, j) max(0, e^{jε₀} − e^{ε} e^{(k−j)ε₀}) / (1 + e^{ε₀})^k, in high precision."""
    with mpmath.workdps(dps):
        e0, e = mpmath.mpf(eps0), mpmath.mpf(eps)
        total = mpmath.mpf(0)
        for j in range(k + 1):
            term = mpmath.exp(j * e0) - mpmath.exp(e + (k - j) * e0)
            if term > 0:
                total += mpmath.binomial(k, j) * term
        return total / (1 + mpmath.exp(e0)) ** k


def exact_delta(eps0: float, delta0: float, k: int, eps: float) -> float:
    with mpmath.workdps(50):
        base = 1 - (1 - mpmath.mpf(delta0)) ** k
        return float(base + (1 - base) * exact_rr_delta(eps0, k, eps))


# --- one answer --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("eps0,delta0", [(0.3, 1e-5), (1.1, 0.0), (0.01, 1e-3)])
def test_one_answer_is_its_own_cost(eps0, delta0):
    assert acc.optimal_epsilon(eps0, delta0, 1, delta0) == pytest.approx(eps0, rel=1e-12)
    assert acc.optimal_delta(eps0, delta0, 1, eps0) == pytest.approx(delta0, abs=1e-15)
    spend = acc.tightest([(eps0, delta0, 1)], delta0)
    assert (spend.epsilon, spend.delta, spend.method) == (eps0, pytest.approx(delta0, abs=1e-18), "basic")


def test_one_answer_closed_form():
    # k = 1: δ(ε) = δ₀ + (1 − δ₀)(e^{ε₀} − e^{ε})/(1 + e^{ε₀}) for 0 <= ε < ε₀
    eps0, delta0, target = 0.3, 1e-5, 1e-3
    s = (target - delta0) / (1 - delta0)
    expected = math.log(math.exp(eps0) - s * (1 + math.exp(eps0)))
    assert acc.optimal_epsilon(eps0, delta0, 1, target) == pytest.approx(expected, rel=1e-8)
    assert expected == pytest.approx(0.29827508591795, rel=1e-12)


def test_two_answers_by_hand():
    # ε₀ = ln 3, q = 3/4: δ(ε) = q² − e^ε (1 − q)² for 0 <= ε < 2ε₀
    eps0 = math.log(3)
    assert acc.optimal_delta(eps0, 0.0, 2, 0.0) == pytest.approx(0.5, rel=1e-14)
    assert acc.optimal_delta(eps0, 0.0, 2, eps0) == pytest.approx(3 / 8, rel=1e-14)
    assert acc.optimal_delta(eps0, 0.0, 2, 2 * eps0) == 0.0
    assert acc.optimal_epsilon(eps0, 0.0, 2, 3 / 8) == pytest.approx(eps0, rel=1e-8)
    assert acc.optimal_epsilon(eps0, 0.0, 2, 0.51) == 0.0
    assert 0.0 < acc.optimal_epsilon(eps0, 0.0, 2, 0.5) < 1e-7  # the float safety margin
    assert acc.optimal_epsilon(eps0, 0.0, 2, 0.0) == 2 * eps0


@pytest.mark.parametrize("k", [1, 2, 5, 10, 31])
@pytest.mark.parametrize("eps0,delta0", [(0.1, 1e-5), (0.7, 0.0), (2.0, 1e-3)])
def test_theorem_3_3_grid_points(k, eps0, delta0):
    # δ_i = Σ_{l<i} C(k, l)(e^{(k−l)ε₀} − e^{(k−2i+l)ε₀}) / (1 + e^{ε₀})^k at ε = (k − 2i)ε₀
    for i in range(k // 2 + 1):
        with mpmath.workdps(50):
            e0 = mpmath.mpf(eps0)
            di = sum(
                mpmath.binomial(k, l) * (mpmath.exp((k - l) * e0) - mpmath.exp((k - 2 * i + l) * e0))
                for l in range(i)
            ) / (1 + mpmath.exp(e0)) ** k
            expected = float(1 - (1 - mpmath.mpf(delta0)) ** k * (1 - di))
        got = acc.optimal_delta(eps0, delta0, k, (k - 2 * i) * eps0)
        assert got == pytest.approx(expected, rel=1e-10, abs=1e-300)


@settings(max_examples=150, deadline=None)
@given(eps0=eps0_st, delta0=delta0_st, k=k_st, frac=st.floats(min_value=0.0, max_value=1.05))
def test_profile_matches_exact_sum(eps0, delta0, k, frac):
    eps = frac * k * eps0
    assert acc.optimal_delta(eps0, delta0, k, eps) == pytest.approx(
        exact_delta(eps0, delta0, k, eps), rel=1e-9, abs=1e-15
    )


@settings(max_examples=150, deadline=None)
@given(eps0=eps0_st, delta0=delta0_st, k=k_st, extra=st.floats(min_value=0.0, max_value=0.5))
def test_epsilon_is_the_inverse_and_safe(eps0, delta0, k, extra):
    base = -math.expm1(k * math.log1p(-delta0))
    target = min(base + extra * (1 - base), 0.999)
    eps = acc.optimal_epsilon(eps0, delta0, k, target)
    assert 0.0 <= eps <= math.nextafter(acc.basic([acc.Group(eps0, delta0, k)]).epsilon, math.inf)
    if target <= base:  # nothing left for the randomised-response part: basic composition, kε₀
        assert eps == acc.basic([acc.Group(eps0, delta0, k)]).epsilon
        return
    # valid: the exact profile at the returned ε meets the target
    assert exact_delta(eps0, delta0, k, eps) <= target * (1 + 1e-12) + 1e-300
    # tight: slightly less ε would not
    if eps > 1e-9:
        assert exact_delta(eps0, delta0, k, eps * (1 - 1e-6)) > target * (1 - 1e-12) - 1e-15


@settings(max_examples=100, deadline=None)
@given(eps0=eps0_st, delta0=delta0_st, k=k_st)
def test_profile_monotone(eps0, delta0, k):
    grid = [k * eps0 * t / 40 for t in range(42)]
    deltas = [acc.optimal_delta(eps0, delta0, k, e) for e in grid]
    assert all(a >= b for a, b in itertools.pairwise(deltas))
    base = -math.expm1(k * math.log1p(-delta0))
    targets = [base + (1 - base) * t for t in (0.0, 1e-9, 1e-6, 1e-4, 1e-2, 0.1, 0.5)]
    eps = [acc.optimal_epsilon(eps0, delta0, k, t) for t in targets]
    assert all(a >= b for a, b in itertools.pairwise(eps))
    # more answers never cost less
    if k > 1:
        assert acc.optimal_epsilon(eps0, delta0, k, 0.5) >= acc.optimal_epsilon(eps0, delta0, k - 1, 0.5)


@settings(max_examples=100, deadline=None)
@given(eps0=eps0_st, delta0=delta0_st, k=st.integers(1, 10_000), extra=st.floats(0.0, 0.1))
def test_basic_is_never_beaten_by_less_than_zero(eps0, delta0, k, extra):
    b = acc.basic([acc.Group(eps0, delta0, k)])
    assume(b.delta < 0.99)
    target = min(b.delta + extra, 0.99)
    a = acc.account([(eps0, delta0, k)], target)
    assert a.spend.epsilon <= b.epsilon
    assert a.bounds["optimal"].epsilon <= math.nextafter(b.epsilon, math.inf)
    assert a.spend.delta <= target


def test_target_below_basic_delta_is_infeasible():
    assert acc.optimal_epsilon(0.3, 1e-5, 1000, 1e-3) == math.inf
    a = acc.account([(0.3, 1e-5, 1000)], 1e-3)
    assert a.spend.method == "basic" and a.spend.delta > 1e-3 and not a.within(1e9, 1e-3)


def test_decimal_budgets_behave_as_decimals():
    assert acc.basic([acc.Group(0.2, 0.0, 5)]).epsilon == 1.0  # not 1.0000000000000002
    a = acc.account([(0.2, 0.0, 5)], 0.0)
    assert a.within(1.0, 0.0) and not acc.account([(0.2, 0.0, 6)], 0.0).within(1.0, 0.0)
    assert acc.basic([acc.Group(0.1, 0.0, 3), acc.Group(0.7, 0.0, 1)]).epsilon == 1.0


def test_pure_dp_with_zero_delta_budget_is_basic():
    a = acc.account([(0.5, 0.0, 7)], 0.0)
    assert a.spend == acc.Spend(3.5, 0.0, "basic")
    assert a.bounds["optimal"].epsilon == pytest.approx(3.5)


def test_large_k_is_fast_and_sane():
    eps = acc.optimal_epsilon(0.05, 0.0, 1_000_000, 1e-6)
    # general composition (Thm 2.3 with δ′ = 1e-6) is an upper bound for the optimal one
    e = math.exp(0.05)
    drift = (e - 1) * 0.05 * 1e6 / (e + 1)
    general = drift + 0.05 * math.sqrt(2e6 * math.log(1e6))
    assert drift < eps < general
    assert acc.optimal_delta(0.05, 0.0, 1_000_000, eps) <= 1e-6


def test_matches_dp_accounting_pld():
    from dp_accounting.pld import privacy_loss_distribution as pld
    from dp_accounting.pld.common import DifferentialPrivacyParameters

    eps0, delta0, k = 0.3, 1e-5, 20
    d = pld.from_privacy_parameters(DifferentialPrivacyParameters(eps0, delta0), value_discretization_interval=1e-5)
    composed = d.self_compose(k)
    for eps in (0.0, 1.0, 2.5, 4.0, 5.9):
        ours = acc.optimal_delta(eps0, delta0, k, eps)
        theirs = composed.get_delta_for_epsilon(eps)  # pessimistic discretisation: >= the exact value
        assert ours <= theirs * (1 + 1e-9)
        assert ours == pytest.approx(theirs, rel=2e-3, abs=1e-9)


# --- heterogeneous ledgers ---------------------------------------------------------------------------------
def exact_hetero_delta(groups, eps: float) -> float:
    """Exact δ(ε) of the product of V(ε_g, δ_g)^{k_g} by enumerating the joint agreement counts."""
    with mpmath.workdps(40):
        axes = []
        for e0, _d0, k in groups:
            e0 = mpmath.mpf(e0)
            q = mpmath.exp(e0) / (1 + mpmath.exp(e0))
            axes.append(
                [(mpmath.binomial(k, j) * q**j * (1 - q) ** (k - j), (2 * j - k) * e0) for j in range(k + 1)]
            )
        rr = mpmath.mpf(0)
        for combo in itertools.product(*axes):
            p = mpmath.fprod(c[0] for c in combo)
            loss = sum(c[1] for c in combo)
            rr += max(mpmath.mpf(0), p * (1 - mpmath.exp(mpmath.mpf(eps) - loss)))
        keep = mpmath.fprod((1 - mpmath.mpf(d0)) ** k for _e0, d0, k in groups)
        return float(1 - keep * (1 - rr))


@pytest.mark.parametrize(
    "groups,target",
    [
        ([(0.3, 1e-5, 6), (0.1, 0.0, 9)], 1e-3),
        ([(1.0, 0.0, 4), (0.2, 1e-6, 12), (0.5, 1e-4, 3)], 1e-2),
        ([(0.05, 1e-6, 30), (0.06, 1e-6, 20)], 1e-4),
    ],
)
def test_heterogeneous_bounds_are_valid(groups, target):
    a = acc.account(groups, target)
    assert set(a.bounds) == {"basic", "optimal-dominating", "optimal-grouped", "kov-heterogeneous"}
    for s in a.bounds.values():
        if math.isfinite(s.epsilon) and s.delta <= target:
            assert exact_hetero_delta(groups, s.epsilon) <= s.delta * (1 + 1e-9), s
    assert a.spend.epsilon == min(s.epsilon for s in a.bounds.values() if s.delta <= target)
    assert a.spend.epsilon <= a.bounds["basic"].epsilon
    # no bound can beat composing only the most expensive group optimally
    for e0, d0, k in groups:
        assert a.spend.epsilon >= acc.optimal_epsilon(e0, d0, k, target) - 1e-12


def test_same_cost_groups_merge_into_the_exact_optimum():
    a = acc.account([(0.3, 1e-5, 4), (0.3, 1e-5, 6)], 1e-3)
    assert a.spend.method == "optimal"
    assert a.spend.epsilon == acc.optimal_epsilon(0.3, 1e-5, 10, 1e-3)


def test_kov_heterogeneous_homogeneous_case_is_general_composition():
    eps0, delta0, k, target = 0.1, 1e-6, 400, 1e-3
    s = acc.kov_heterogeneous([acc.Group(eps0, delta0, k)], target)
    base = -math.expm1(k * math.log1p(-delta0))
    dp = (target - base) / (1 - base)
    e = math.exp(eps0)
    drift = (e - 1) * eps0 * k / (e + 1)
    expected = min(
        k * eps0,
        drift + eps0 * math.sqrt(2 * k * math.log(math.e + math.sqrt(k * eps0**2) / dp)),
        drift + eps0 * math.sqrt(2 * k * math.log(1 / dp)),
    )
    assert s.epsilon == pytest.approx(expected, rel=1e-7)
    # and the exact optimum is tighter
    assert acc.optimal_epsilon(eps0, delta0, k, target) < s.epsilon


def test_empty_ledger_spends_nothing():
    a = acc.account([], 1e-5)
    assert (a.spend.epsilon, a.spend.delta) == (0.0, 0.0)


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: acc.optimal_epsilon(0.0, 0.0, 3, 0.1), "epsilon"),
        (lambda: acc.optimal_epsilon(0.1, 1.0, 3, 0.1), "delta"),
        (lambda: acc.optimal_epsilon(0.1, 0.0, 0, 0.1), "k"),
        (lambda: acc.optimal_delta(0.1, 0.0, 3, -1.0), "epsilon"),
        (lambda: acc.account([(0.1, 0.0, -1)], 0.1), "count"),
        (lambda: acc.account([(0.1, 0.0, 1)], 1.5), "delta"),
    ],
)
def test_invalid_input_names_the_field(call, field):
    with pytest.raises(InvalidParameter) as info:
        call()
    assert info.value.parameter == field
