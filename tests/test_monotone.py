"""The reduced corner set of monotone tables (darrm_opt.certify.monotone) against the exhaustive sweeps."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darrm_opt.certify.certificate import certify
from darrm_opt.certify.exact import exact_cost_mp
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
