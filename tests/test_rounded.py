"""Rounded-down tables certified from the sweep of the table they come from (darrm_opt.certify.rounded)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plain_mp import exact_cost_mp

import darrm_opt.certify.certificate as certificate_module
from darrm_opt.certify.certificate import certify, certify_and_separate
from darrm_opt.certify.rounded import certify_rounded, wide_margin
from darrm_opt.certify.sweep import error_bound, signed_h
from darrm_opt.model.baselines import gamma_sub
from darrm_opt.model.corners import compositions, corners, n_multisets
from darrm_opt.model.params import Params
from darrm_opt.model.pmf import pmf_direct
from darrm_opt.optimize.optimizer import solve
from darrm_opt.release.table_file import certified_decimals, round_down


def plain_max(params, gamma):
    """max over every multiset of f by direct convolution (the reference), and its argmax."""
    C = corners(params)
    E = math.exp(params.m * params.epsilon)
    h = signed_h(gamma)
    allc = compositions(params.K, C.shape[0])
    costs = np.array([h @ pmf_direct(c, C[:, 0]) - E * (h @ pmf_direct(c, C[:, 1])) for c in allc])
    return float(costs.max()), allc[int(costs.argmax())]


def tight_symmetric(params, rng) -> np.ndarray:
    """A random symmetric γ with a 1 in it, scaled to within 1e-9 (relative) of the bound where it exceeds it."""
    half = rng.random((params.K + 1) // 2)
    g = np.concatenate([half[::-1], half]) / half.max()
    top = certify(params, g).max_privacy_cost
    return g * (params.bound / top) * (1 - 1e-9) if top > params.bound else g


def same_certificate(a, b):
    da, db = a.to_dict(), b.to_dict()
    da.pop("seconds"), db.pop("seconds")
    assert da == db


@pytest.mark.parametrize("method", ["matrix", "structured"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_wide_sweep_gives_the_same_certificate_and_near_set(method, workers):
    params = Params(11, 3)
    g = np.array(solve(params).gamma)
    w = wide_margin(params, 6)
    plain, r0 = certify_and_separate(params, g, method=method, workers=workers)
    wide, r1 = certify_and_separate(params, g, method=method, workers=workers, wide=w)
    same_certificate(plain, wide)
    assert sorted(map(tuple, r0.near.tolist())) == sorted(map(tuple, r1.near.tolist()))
    assert r0.wide is None and r1.wide is not None and r1.wide_level == params.bound - w
    assert r1.wide.shape[0] == r1.wide_costs.shape[0] > r1.near.shape[0]
    assert np.all(r1.wide_costs > r1.wide_level)


@pytest.mark.parametrize("method", ["matrix", "structured"])
def test_the_wide_set_is_every_multiset_above_its_level(method):
    params = Params(9, 3)
    g = tight_symmetric(params, np.random.default_rng(3))
    _, res = certify_and_separate(params, g, method=method, wide=1e-2)
    C, E, h = corners(params), math.exp(0.3), signed_h(g)
    allc = compositions(9, 8)
    costs = np.array([h @ pmf_direct(c, C[:, 0]) - E * (h @ pmf_direct(c, C[:, 1])) for c in allc])
    eta = error_bound(9, E, 1.0)
    got = {tuple(c) for c in res.wide.tolist()}
    assert {tuple(c) for c in allc[costs > res.wide_level + eta].tolist()} <= got
    assert got <= {tuple(c) for c in allc[costs > res.wide_level - eta].tolist()}
    plain = {tuple(c): x for c, x in zip(allc.tolist(), costs)}
    assert max(abs(plain[tuple(c)] - x) for c, x in zip(res.wide.tolist(), res.wide_costs)) <= eta


@pytest.mark.parametrize("method", ["matrix", "structured"])
def test_too_many_wide_multisets_sweep_again_with_the_same_certificate(monkeypatch, method):
    params = Params(11, 3)
    g = np.array(solve(params).gamma)
    plain = certify_and_separate(params, g, method=method)[0]
    monkeypatch.setattr(certificate_module, "WIDE_CAP", 3)
    cert, res = certify_and_separate(params, g, wide=wide_margin(params, 6), method=method)
    same_certificate(plain, cert)
    assert res.wide is None
    assert certify_rounded(params, g, round_down(g, 6), cert, res) is None


@pytest.mark.parametrize("K,m", [(11, 3), (21, 5), (41, 3)])
def test_rounded_optimum_certificate_equals_its_own_sweep(K, m):
    params = Params(K, m)
    sol = solve(params, wide=wide_margin(params, 6))
    g = np.array(sol.gamma)
    shown = round_down(g, 6)
    got = certify_rounded(params, g, shown, sol.certificate, sol.sweep)
    ref = certify(params, shown)
    assert got is not None and got.certified == ref.certified
    assert abs(got.max_privacy_cost - ref.max_privacy_cost) <= 2 * ref.error_bound
    assert abs(float(exact_cost_mp(params, shown, got.worst_multiset)) - got.max_privacy_cost) <= ref.error_bound
    assert got.multisets_checked == ref.multisets_checked == n_multisets(K, 8)
    assert got.error_bound == ref.error_bound and got.corners == ref.corners
    text, cert = certified_decimals(params, g, 6, source=(sol.certificate, sol.sweep))
    same_certificate(cert, got)
    assert text == [f"{x:.6f}" for x in shown]


@settings(max_examples=12, deadline=None)
@given(K=st.sampled_from([3, 5, 7, 9]), decimals=st.integers(2, 4), td=st.sampled_from([1e-5, 1e-2, 0.0]),
       seed=st.integers(0, 2**32 - 1))
def test_rounded_certificate_against_every_multiset(K, decimals, td, seed):
    """Tight random tables rounded to 2–4 decimals: the certificate from γ's sweep states the plain maximum
    over every multiset of the rounded table and certifies exactly when that is within the bound."""
    params = Params(K, 3, teacher_delta=td, delta=None if td else 0.0)
    g = tight_symmetric(params, np.random.default_rng(seed))
    shown = round_down(g, decimals)
    cert, res = certify_and_separate(params, g, method="matrix", wide=wide_margin(params, decimals))
    got = certify_rounded(params, g, shown, cert, res)
    if got is None:  # the kept maximum could not be shown to be the maximum: the caller sweeps instead
        return
    top, _ = plain_max(params, shown)
    eta = error_bound(K, math.exp(0.3), 1.0)
    assert abs(got.max_privacy_cost - top) <= 2 * eta
    if abs(top - params.bound) > 2 * eta:
        assert got.certified == (top <= params.bound)


def test_a_margin_too_narrow_for_the_rounding_decides_nothing():
    params = Params(11, 3)
    sol = solve(params, wide=wide_margin(params, 9))
    g = np.array(sol.gamma)
    assert certify_rounded(params, g, round_down(g, 3), sol.certificate, sol.sweep) is None
    text, cert = certified_decimals(params, g, 3, source=(sol.certificate, sol.sweep))  # swept instead
    assert cert.certified and cert.high_precision_checked >= 0


def test_rounding_up_or_an_asymmetric_copy_is_never_decided_from_the_sweep():
    params = Params(11, 3)
    sol = solve(params, wide=wide_margin(params, 6))
    g = np.array(sol.gamma)
    up = np.minimum(g + 1e-7, 1.0)
    assert certify_rounded(params, g, up, sol.certificate, sol.sweep) is None
    lop = round_down(g, 6)
    lop[0] = 0.0
    assert certify_rounded(params, g, lop, sol.certificate, sol.sweep) is None
    assert certify_rounded(params, g, lop, sol.certificate, certify_and_separate(params, g)[1]) is None


def test_monotone_table_rounded_from_its_reduced_sweep():
    """A tight monotone table ((γ_Sub + 1)/2 scaled to the bound) from the sweep over the corners with
    p ≥ p′; γ_Sub itself is 6·10⁻⁵ below the bound at K = 41: no multiset is kept, so its maximum is not
    known from the sweep, and it is swept instead."""
    params = Params(41, 3)
    w = wide_margin(params, 6)
    sub = gamma_sub(41, 3)
    cert, res = certify_and_separate(params, sub, reduce=True, wide=w)
    assert res.wide.shape[0] == 0 and certify_rounded(params, sub, round_down(sub, 6), cert, res) is None
    g = (sub + 1) / 2
    g = g * (params.bound / certify(params, g, reduce=True).max_privacy_cost) * (1 - 1e-9)
    cert, res = certify_and_separate(params, g, reduce=True, wide=w)
    shown = round_down(g, 6)
    got = certify_rounded(params, g, shown, cert, res)
    ref = certify(params, shown, reduce=True)
    assert got is not None and got.certified == ref.certified
    assert got.corners_swept == ref.corners_swept == cert.corners_swept == [0, 2, 3, 4, 5]
    assert abs(got.max_privacy_cost - ref.max_privacy_cost) <= 2 * ref.error_bound
    assert got.multisets_checked == ref.multisets_checked == n_multisets(41, 5)
