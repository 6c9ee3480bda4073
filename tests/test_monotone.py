"""The reduced corner set of monotone tables (darrm_opt.certify.monotone) against the exhaustive sweeps."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plain_mp import exact_cost_mp

from darrm_opt.certify.certificate import certify
from darrm_opt.certify.monotone import lift, monotone_applies, reduced_problem, upper_corner_ids
from darrm_opt.certify.problems import make_problem
from darrm_opt.certify.sweep import error_bound, signed_h, sweep
from darrm_opt.model.baselines import gamma_dsub, gamma_sub
from darrm_opt.model.corners import corners, n_multisets
from darrm_opt.model.params import Params
from darrm_opt.model.pmf import pmf_direct


def v_shaped(K: int, rng) -> np.ndarray:
    """A random symmetric γ, non-increasing up to the middle (h non-decreasing)."""
    half = np.sort(rng.random((K + 1) // 2))  # γ((K+1)/2..K), non-decreasing
    return np.concatenate([half[::-1], half])


def test_monotone_applies_to_the_baselines_and_not_to_a_bump():
    K = 11
    assert monotone_applies(gamma_sub(K, 3)) and monotone_applies(np.ones(K + 1))
    assert monotone_applies(np.full(K + 1, 0.3)) and monotone_applies(gamma_dsub(K, 2))
    bump = np.zeros(K + 1)
    bump[5] = bump[6] = 1.0  # releases the majority only near a tie: φ is not monotone
    assert not monotone_applies(bump)
    g = gamma_sub(K, 3)
    g[0] = 0.5  # not symmetric
    assert not monotone_applies(g)
    assert not monotone_applies(np.ones(K))  # K even: no table of ours


def test_upper_corners_are_those_with_p_at_least_p_prime():
    assert upper_corner_ids(corners(Params(11, 3))).tolist() == [0, 2, 3, 4, 5]
    assert upper_corner_ids(corners(Params(11, 3, teacher_delta=0.0, delta=0.0))).tolist() == [0, 1, 2]
    ids = np.array([0, 2, 3, 4, 5])
    assert lift([[1, 2, 3, 4, 5]], ids, 8).tolist() == [[1, 0, 2, 3, 4, 5, 0, 0]]


@pytest.mark.parametrize("K,m,td", [(11, 3, 1e-5), (41, 3, 1e-5), (35, 5, 1e-2), (41, 3, 0.0)])
@pytest.mark.parametrize("kind", ["sub", "ones"])
def test_reduced_maximum_equals_the_exhaustive_maximum(K, m, td, kind):
    params = Params(K, m, teacher_delta=td, delta=None if td else 0.0)
    g = gamma_sub(K, m) if kind == "sub" else np.ones(K + 1)
    C, E, h = corners(params), math.exp(params.m * params.epsilon), signed_h(g)
    eta = error_bound(K, E, 1.0)
    full = [sweep(make_problem(C, h, E, method)) for method in ("matrix", "structured")[: 2 if td else 1]]
    red = sweep(reduced_problem(C, h, E))
    assert red.multisets == n_multisets(K, len(upper_corner_ids(C)))
    for f in full:
        assert f.multisets == n_multisets(K, C.shape[0])
        assert abs(f.max_cost - red.max_cost) <= 2 * eta
    worst = lift([red.worst], upper_corner_ids(C), C.shape[0])[0]
    assert abs(float(exact_cost_mp(params, g, worst)) - red.max_cost) <= eta


@pytest.mark.slow  # every multiset by direct convolution
@settings(max_examples=12, deadline=None)
@given(K=st.sampled_from([3, 5, 7, 9]), m=st.floats(1, 3), td=st.sampled_from([0.0, 1e-5, 1e-2, 0.1]),
       seed=st.integers(0, 2**32 - 1))
def test_reduced_maximum_equals_the_maximum_over_every_multiset(K, m, td, seed):
    """For random monotone γ: the reduced sweep's maximum is the maximum of the plain evaluation over every
    multiset of all corners (direct convolution), and no multiset of the other corners is costlier."""
    params = Params(K, min(m, K), teacher_delta=td, delta=None if td else 0.0)
    g = v_shaped(K, np.random.default_rng(seed))
    C, E, h = corners(params), math.exp(params.m * params.epsilon), signed_h(g)
    full = sweep(make_problem(C, h, E, "matrix"), threshold=-np.inf, top=n_multisets(K, C.shape[0]))
    plain = [h @ pmf_direct(c, C[:, 0]) - E * (h @ pmf_direct(c, C[:, 1])) for c in full.violators]
    red = sweep(reduced_problem(C, h, E))
    assert abs(max(plain) - red.max_cost) <= 2 * error_bound(K, E, 1.0)


def test_the_reduction_needs_the_monotone_shape():
    """A table that releases the majority only near a tie is costliest on a multiset with a p < p′
    corner: the reduced set would miss it, so certify(reduce=True) sweeps every corner for it."""
    params = Params(11, 3)
    g = np.zeros(12)
    g[5] = g[6] = 1.0
    C, E, h = corners(params), math.exp(0.3), signed_h(g)
    assert sweep(reduced_problem(C, h, E)).max_cost < sweep(make_problem(C, h, E)).max_cost - 1e-5
    cert = certify(params, g, reduce=True)
    assert cert.corners_swept is None and cert.multisets_checked == n_multisets(11, 8)


@pytest.mark.parametrize("params,g", [
    (Params(41, 3), gamma_sub(41, 3)),
    (Params(41, 3), np.full(42, 0.5)),
    (Params(41, 3), np.ones(42)),  # violates: the verdict and the worst multiset must agree
    (Params(11, 3, teacher_delta=0.0, delta=0.0), gamma_dsub(11, 3)),  # exactly tight: 40-digit re-check
])
def test_reduced_certificate_agrees_with_the_exhaustive_one(params, g):
    full, red = certify(params, g), certify(params, g, reduce=True)
    ids = upper_corner_ids(corners(params))
    assert red.corners_swept == ids.tolist() and full.corners_swept is None
    assert red.multisets_checked == n_multisets(params.K, len(ids))
    assert red.certified == full.certified and red.bound == full.bound
    assert abs(red.max_privacy_cost - full.max_privacy_cost) <= 2 * full.error_bound
    assert red.error_bound == full.error_bound
    assert len(red.worst_multiset) == corners(params).shape[0]
    assert all(red.worst_multiset[i] == 0 for i in range(len(red.worst_multiset)) if i not in ids)
    assert (red.high_precision_checked > 0) == (full.high_precision_checked > 0)


def test_reduction_is_off_unless_asked_and_for_explicit_methods():
    params = Params(11, 3)
    g = gamma_sub(11, 3)
    assert certify(params, g).corners_swept is None
    assert certify(params, g, reduce=True, method="matrix").corners_swept is None


def _same_sweep(a, b):
    assert a.max_cost == b.max_cost and a.worst == b.worst and a.multisets == b.multisets
    assert a.min_cost == b.min_cost and a.best == b.best and a.near_overflow == b.near_overflow
    assert sorted(map(tuple, a.near.tolist())) == sorted(map(tuple, b.near.tolist()))
    assert sorted(zip(a.violator_costs.tolist(), map(tuple, a.violators.tolist()))) == sorted(
        zip(b.violator_costs.tolist(), map(tuple, b.violators.tolist())))


@pytest.mark.parametrize("workers", [1, 2])
def test_sweep_many_is_bitwise_each_sweep(workers):
    """One pass for several γ (shared pmfs) against a sweep of each: reduced corner sets at K = 41 and the
    full 8-corner matrix sweep (with reflection) at K = 11, with near sets and violators collected."""
    from darrm_opt.certify.sweep import SweepProblem, sweep_many

    rng = np.random.default_rng(5)
    for K, full in ((41, False), (11, True)):
        params = Params(K, 3)
        C, E = corners(params), math.exp(0.3)
        gs = [gamma_sub(K, 3), np.ones(K + 1), v_shaped(K, rng), round_down_6(gamma_sub(K, 3))]
        make = (lambda h, C=C, E=E: SweepProblem(C, h, E)) if full else (
            lambda h, C=C, E=E: reduced_problem(C, h, E))
        kws = [dict(threshold=0.2, top=30, near=params.bound - 1e-3 * (i + 1), two_sided=False, near_cap=5000)
               for i in range(len(gs))]
        many = sweep_many([make(signed_h(g)) for g in gs], kws, workers=workers)
        for g, kw, got in zip(gs, kws, many):
            _same_sweep(got, sweep(make(signed_h(g)), workers=workers, **kw))


@settings(max_examples=15, deadline=None)
@given(K=st.sampled_from([3, 5, 7, 9]), td=st.sampled_from([0.0, 1e-5, 1e-2]), seed=st.integers(0, 2**32 - 1))
def test_sweep_many_is_bitwise_each_sweep_for_any_tables(K, td, seed):
    """Random tables, not symmetric (two-sided near sets, no reflection), on every corner."""
    from darrm_opt.certify.sweep import SweepProblem, sweep_many

    params = Params(K, min(3, K), teacher_delta=td, delta=None if td else 0.0)
    C, E = corners(params), math.exp(params.m * params.epsilon)
    gs = np.random.default_rng(seed).random((3, K + 1))
    kws = [dict(threshold=0.0, top=10, near=0.1, two_sided=True, near_cap=100) for _ in gs]
    many = sweep_many([SweepProblem(C, signed_h(g), E) for g in gs], kws, workers=2)
    for g, kw, got in zip(gs, kws, many):
        _same_sweep(got, sweep(SweepProblem(C, signed_h(g), E), workers=2, **kw))


def test_sweep_many_refuses_problems_of_different_corners_or_reflection():
    from darrm_opt.certify.sweep import SweepProblem, sweep_many

    C, E = corners(Params(11, 3)), math.exp(0.3)
    kw = dict(threshold=None, top=0, near=None, two_sided=False, near_cap=10)
    with pytest.raises(ValueError, match="one corner set"):
        sweep_many([SweepProblem(C, signed_h(np.ones(12)), E), reduced_problem(C, signed_h(np.ones(12)), E)],
                   [kw, kw])
    with pytest.raises(ValueError, match="one corner set"):  # symmetric (reflected) and asymmetric tables
        sweep_many([SweepProblem(C, signed_h(np.ones(12)), E), SweepProblem(C, signed_h(np.arange(12) / 11), E)],
                   [kw, kw])


def test_certify_many_gives_each_table_its_own_certificate():
    from darrm_opt.certify.certificate import certify_many

    params = Params(41, 3)
    bump = np.zeros(42)
    bump[20] = bump[21] = 1.0
    gs = [gamma_sub(41, 3), np.ones(42), round_down_6(gamma_sub(41, 3)), bump]
    for got, g in zip(certify_many(params, gs, reduce=True), gs):
        ref = certify(params, g, reduce=True)
        a, b = got.to_dict(), ref.to_dict()
        a.pop("seconds"), b.pop("seconds")
        assert a == b
    assert [c.corners_swept is None for c in certify_many(params, gs, reduce=True)] == [False, False, False, True]


def test_baseline_tables_from_the_shared_sweep_equal_one_by_one():
    from darrm_opt.release.table_file import baseline_tables, certified_decimals

    for params in (Params(41, 3), Params(11, 3, teacher_delta=0.0, delta=0.0), Params(21, 1)):
        shared = baseline_tables(params, decimals=6)
        for name, t in shared.items():
            if not t:
                continue
            ref = certify(params, np.array(t.gamma), reduce=True)
            if t.unit is None:
                a, b = t.certificate.to_dict(), ref.to_dict()
                a.pop("seconds"), b.pop("seconds")
                assert a == b, name
            if t.printed is not None:
                text, cert = certified_decimals(params, t.gamma, 6)
                a, b = t.printed.to_dict(), cert.to_dict()
                a.pop("seconds"), b.pop("seconds")
                assert a == b and certified_decimals(params, t.gamma, 6, printed=t.printed)[0] == text


def round_down_6(g):
    from darrm_opt.release.table_file import round_down

    return round_down(g, 6)
