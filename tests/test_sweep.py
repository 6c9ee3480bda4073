"""The fast sweep against a plain reference evaluation, and the brute-force privacy check."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plain_mp import exact_cost_mp

from darrm_opt.certify.certificate import certify
from darrm_opt.certify.sweep import SweepProblem, error_bound, signed_h, sweep
from darrm_opt.model.corners import compositions, corners, n_multisets
from darrm_opt.model.params import Params
from darrm_opt.model.pmf import pmf_direct, poisson_binomial
from darrm_opt.optimize.optimizer import solve


def plain_costs(params, gamma):
    """Direct convolution of binomials for every multiset (the reference)."""
    C = corners(params)
    E = math.exp(params.m * params.epsilon)
    h = signed_h(gamma)
    allc = compositions(params.K, C.shape[0])
    costs = np.array([h @ pmf_direct(c, C[:, 0]) - E * (h @ pmf_direct(c, C[:, 1])) for c in allc])
    return allc, costs


@pytest.mark.slow  # against the plain reference
@settings(max_examples=25, deadline=None)
@given(
    K=st.sampled_from([1, 3, 5, 7, 9]),
    m=st.floats(1, 3),
    teacher_delta=st.sampled_from([0.0, 1e-5, 1e-2]),
    seed=st.integers(0, 2**32 - 1),
)
def test_fast_sweep_equals_plain_reference_on_every_multiset(K, m, teacher_delta, seed):
    params = Params(K, min(m, K), teacher_delta=teacher_delta)
    gamma = np.random.default_rng(seed).random(K + 1)  # not symmetric: a general table
    allc, ref = plain_costs(params, gamma)
    E = math.exp(params.m * params.epsilon)
    prob = SweepProblem(corners(params), signed_h(gamma), E)
    res = sweep(prob, threshold=-np.inf, top=len(allc) + 1, two_sided=True)
    assert res.multisets == len(allc) == n_multisets(K, 4 if teacher_delta == 0 else 8)
    got = {tuple(int(x) for x in v): c for v, c in zip(res.violators, res.violator_costs)}
    diff = max(abs(got[tuple(int(x) for x in c)] - r) for c, r in zip(allc, ref))
    assert diff <= error_bound(K, E, 1.0)
    assert res.max_cost == pytest.approx(ref.max(), abs=1e-14)
    assert res.min_cost == pytest.approx(ref.min(), abs=1e-14)


def test_multithreaded_sweep_equals_single_threaded():
    params = Params(21, 3)
    g = np.array(solve(params).gamma)
    prob = SweepProblem(corners(params), signed_h(g), math.exp(0.3))
    a = sweep(prob, workers=1, threshold=params.bound - 1e-6, top=50)
    b = sweep(prob, workers=2, threshold=params.bound - 1e-6, top=50)
    assert a.multisets == b.multisets == n_multisets(21, 8)
    assert a.max_cost == b.max_cost and a.worst == b.worst
    np.testing.assert_array_equal(np.sort(a.violator_costs), np.sort(b.violator_costs))


def test_mp_cost_agrees_with_float():
    params = Params(7, 2)
    g = np.random.default_rng(1).random(8)
    allc, ref = plain_costs(params, g)
    for i in (0, 17, len(allc) - 1):
        assert float(exact_cost_mp(params, g, allc[i])) == pytest.approx(ref[i], abs=1e-14)


def _random_pair(rng, eps, delta):
    """A random (p, p′) inside the (ε, Δ)-DP feasible region of a binary mechanism."""
    e = math.exp(eps)
    while True:
        p, q = rng.random(2)
        if (p <= e * q + delta and q <= e * p + delta and 1 - q <= e * (1 - p) + delta
                and 1 - p <= e * (1 - q) + delta):
            return p, q


@pytest.mark.parametrize("K,m,teacher_delta", [(3, 2, 1e-5), (5, 2, 0.0), (7, 3, 1e-5), (7, 3, 0.0)])
def test_brute_force_continuous_pairs_never_exceed_bound(K, m, teacher_delta, rng):
    """Independent check for K ≤ 7: random continuous (p, p′) in the feasible regions (not corners), and
    mixtures pushed towards corners, never exceed the bound for γ_opt, for either output value."""
    params = Params(K, m, teacher_delta=teacher_delta)
    g = np.array(solve(params).gamma)
    E = math.exp(params.m * params.epsilon)
    h = signed_h(g)
    C = corners(params)
    worst = -np.inf
    for trial in range(3000):
        if trial % 2:
            pairs = [_random_pair(rng, params.epsilon, teacher_delta) for _ in range(K)]
        else:  # near-corner points: a corner blended with a random feasible point
            pairs = []
            for _ in range(K):
                c = C[rng.integers(len(C))]
                p, q = _random_pair(rng, params.epsilon, teacher_delta)
                t = rng.random() ** 8
                pairs.append((c[0] * (1 - t) + p * t, c[1] * (1 - t) + q * t))
        p = np.array([x for x, _ in pairs])
        q = np.array([y for _, y in pairs])
        a, b = poisson_binomial(p), poisson_binomial(q)
        # Pr[out=1] condition for (D, D′) and (D′, D), and the Pr[out=0] conditions (−h) for both orders
        ha, hb = h @ a, h @ b
        worst = max(worst, ha - E * hb, hb - E * ha, -ha + E * hb, -hb + E * ha)
    assert worst <= params.bound
    # and the corners do reach (almost) the bound: the check is not vacuous
    assert certify(params, g).max_privacy_cost > params.bound - 1e-7


@settings(max_examples=25, deadline=None)
@given(
    K=st.sampled_from([1, 3, 5, 7, 9]),
    teacher_delta=st.sampled_from([0.0, 1e-5, 1e-2]),
    seed=st.integers(0, 2**32 - 1),
)
def test_reflection_halved_sweep_equals_plain_reference_for_symmetric_gamma(K, teacher_delta, seed):
    """With symmetric γ the sweep visits half the prefix sums and reads −f as the reflected multisets."""
    params = Params(K, min(2.0, K), teacher_delta=teacher_delta)
    half = np.random.default_rng(seed).random((K + 1) // 2)
    gamma = np.concatenate([half, half[::-1]])
    allc, ref = plain_costs(params, gamma)
    E = math.exp(params.m * params.epsilon)
    prob = SweepProblem(corners(params), signed_h(gamma), E)
    assert prob.reflect
    res = sweep(prob, threshold=-np.inf, top=len(allc) + 1, near=-np.inf)
    assert res.multisets == len(allc)
    got = {tuple(int(x) for x in v): c for v, c in zip(res.violators, res.violator_costs)}
    assert len(got) == len(allc)  # every multiset exactly once
    assert max(abs(got[tuple(int(x) for x in c)] - r) for c, r in zip(allc, ref)) <= error_bound(K, E, 1.0)
    assert res.max_cost == pytest.approx(ref.max(), abs=1e-14)
    assert res.near.shape[0] == len(allc)
    full = sweep(SweepProblem(corners(params), signed_h(gamma), E, reflect=False), threshold=-np.inf, top=1)
    assert full.max_cost == pytest.approx(res.max_cost, abs=1e-15)


@pytest.mark.slow  # against the matrix sweep and the plain reference
@settings(max_examples=20, deadline=None)
@given(
    K=st.sampled_from([1, 3, 5, 7, 11]),
    teacher_delta=st.sampled_from([1e-5, 1e-2, 0.2]),
    symmetric=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_structured_sweep_equals_matrix_sweep_and_plain_reference(K, teacher_delta, symmetric, seed):
    """The O(K⁵) structured sweep finds the same extremes, worst multisets (of a non-symmetric γ; of a symmetric
    one, multisets of the extreme costs) and the complete set of multisets above any level as the matrix sweep
    and the plain reference."""
    from darrm_opt.certify.structured import StructuredSweepProblem

    params = Params(K, min(2.0, K), teacher_delta=teacher_delta)
    g = np.random.default_rng(seed).random(K + 1)
    if symmetric:
        g = np.concatenate([g[: (K + 1) // 2], g[: (K + 1) // 2][::-1]])
    E = math.exp(params.m * params.epsilon)
    h = signed_h(g)
    allc, ref = plain_costs(params, g)
    level = float(np.quantile(ref, 0.7))
    s = sweep(StructuredSweepProblem(corners(params), h, E), two_sided=True, near=level)
    m = sweep(SweepProblem(corners(params), h, E, reflect=False), two_sided=True, near=level)
    assert s.multisets == m.multisets == len(allc)
    assert s.max_cost == pytest.approx(ref.max(), abs=1e-14) and s.min_cost == pytest.approx(ref.min(), abs=1e-14)
    # the worst and best multisets are ones of the extreme costs; a symmetric γ's structured sweep visits the
    # prefix sums in the reflection's order (s = 0, K, 1, K − 1, …), so among exact ties it may name another
    cost = {tuple(int(x) for x in c): r for c, r in zip(allc, ref)}
    assert cost[s.worst] == pytest.approx(ref.max(), abs=1e-14) and cost[s.best] == pytest.approx(ref.min(), abs=1e-14)
    if not symmetric:
        assert s.worst == m.worst and s.best == m.best
    expected = {tuple(int(x) for x in c) for c, r in zip(allc, ref) if abs(r) > level + 1e-12}
    got = {tuple(int(x) for x in c) for c in s.near}
    assert expected <= got <= {tuple(int(x) for x in c) for c, r in zip(allc, ref) if abs(r) > level - 1e-12}


@pytest.mark.parametrize("K,m", [(15, 3), (21, 2.5)])
def test_solve_with_structured_and_matrix_sweeps_agree(K, m):
    p = Params(K, m)
    a = solve(p, sweep_method="structured")
    b = solve(p, sweep_method="matrix")
    assert a.certificate.certified and b.certificate.certified
    assert a.certificate.max_privacy_cost == pytest.approx(b.certificate.max_privacy_cost, abs=1e-13)
    assert a.expected_error == pytest.approx(b.expected_error, abs=1e-9)


@pytest.mark.parametrize("K,teacher_delta", [(15, 1e-5), (12, 0.2)])
def test_compiled_block_scan_is_bitwise_equal_to_numpy(K, teacher_delta):
    """The fused numba scan of the structured sweep against its numpy form on every (s, u3) block and both
    sides: the same maximum, position and above-level entries, bit for bit."""
    from darrm_opt.certify import kernels
    from darrm_opt.certify.structured import StructuredSweepProblem

    if not kernels.HAVE_NUMBA:
        pytest.skip("numba not installed")
    params = Params(K if K % 2 else K + 1, 2.0, teacher_delta=teacher_delta)
    g = np.random.default_rng(K).random(params.K + 1)  # not symmetric
    prob = StructuredSweepProblem(corners(params), signed_h(g), math.exp(params.m * params.epsilon))
    blocks = 0
    for s in range(params.K + 1):
        tabs = prob._tables(s)
        for u3 in range(s + 1):
            for sign in (1.0, -1.0):
                r0, A, Ks = int(tabs.offsets[u3]), s - u3, params.K - s
                ref = kernels.scan_numpy(tabs.T1, tabs.T2, r0, A, Ks, prob.E, sign, -np.inf)
                level = float(np.quantile(ref[3], 0.6)) if ref[3].size else 0.0
                a = kernels.scan_numpy(tabs.T1, tabs.T2, r0, A, Ks, prob.E, sign, level)
                b = kernels.scan_compiled(tabs.T1, tabs.T2, r0, A, Ks, prob.E, sign, level)
                assert a[0] == b[0] and a[1] == b[1]
                np.testing.assert_array_equal(a[2], b[2])
                np.testing.assert_array_equal(a[3], b[3])
                blocks += 1
    assert blocks == 2 * sum(s + 1 for s in range(params.K + 1))


def test_structured_sweep_plans_one_item_per_prefix_sum():
    """The per-s tables are computed once per sweep: one work item per s, covering every u3 (a non-symmetric
    γ; a symmetric one computes half of them: tests/test_structured_reflection.py)."""
    from darrm_opt.certify.structured import StructuredSweepProblem

    params = Params(21, 3)
    prob = StructuredSweepProblem(corners(params), signed_h(np.linspace(0.5, 1.0, 22)), math.exp(0.3))
    assert not prob.reflect
    items = prob.plan()
    assert [it.s for it in items] == list(range(22))
    assert all(it.start == 0 and it.stop == it.s + 1 for it in items)
    calls = []
    orig = prob._tables
    prob._tables = lambda s: calls.append(s) or orig(s)
    res = sweep(prob, workers=2)
    assert sorted(calls) == list(range(22)) and res.multisets == n_multisets(21, 8)
