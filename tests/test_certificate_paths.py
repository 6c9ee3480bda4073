"""certify(): every path of the verdict against a brute-force evaluation of every multiset.

Paths: a proven violation (float cost above bound + η), the exact re-check (covered in depth by
test_exact_recheck.py), a clean pass, on the f side and on the −f (output 0) side of a non-symmetric γ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_exact_recheck import all_multisets, float_costs, reflect

from darrm_opt.certify.certificate import (
    NEAR_CAP,
    NEAR_TIGHT,
    Certificate,
    certify,
    certify_and_separate,
    is_symmetric,
    validate_gamma,
)
from darrm_opt.certify.sweep import error_bound, signed_h
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.corners import corners
from darrm_opt.model.params import Params

# not symmetric; violates (m = 1) on the f side; its mirror violates on the −f side
BAD = np.array([1.0, 1.0, 1.0, 0.2, 0.3, 0.1])


def brute(params, gamma):
    ms = all_multisets(params.K, 4 if params.pure else 8)
    f = float_costs(params, gamma, ms)
    two = np.maximum(f, -f) if not is_symmetric(np.asarray(gamma)) else f
    i = int(np.argmax(two))
    return two[i], ms[i], len(ms)


@pytest.mark.parametrize("mirror", [False, True])
@pytest.mark.parametrize("params", [Params(5, 1), Params(5, 1, teacher_delta=0.0, delta=0.0)])
def test_a_proven_violation_names_the_worst_multiset_on_either_side(params, mirror):
    g = BAD[::-1].copy() if mirror else BAD
    cert = certify(params, g)
    worst_cost, worst, n = brute(params, g)
    assert not cert.certified
    assert cert.max_privacy_cost == pytest.approx(worst_cost, abs=1e-13)
    assert tuple(cert.worst_multiset) == worst
    assert cert.reason.startswith(f"multiset {list(worst)} exceeds the bound by ")
    assert float(cert.reason.rsplit(" ", 1)[1]) == pytest.approx(worst_cost - params.bound, rel=5e-3)
    assert cert.high_precision_checked == 0
    assert cert.multisets_checked == n
    other = certify(params, g[::-1])
    assert tuple(other.worst_multiset) == reflect(worst)
    assert other.max_privacy_cost == pytest.approx(cert.max_privacy_cost, abs=1e-13)


@pytest.mark.parametrize("params", [Params(5, 2), Params(7, 3, teacher_delta=0.0, delta=0.0), Params(3, 1.5)])
def test_a_clean_pass_reports_the_brute_force_maximum(params):
    rng = np.random.default_rng(params.K)
    for sym in (True, False):
        g = 0.3 * rng.random(params.K + 1)
        if sym:
            g = (g + g[::-1]) / 2
        cert = certify(params, g)
        worst_cost, worst, n = brute(params, g)
        assert cert.certified and cert.reason == ""
        assert cert.max_privacy_cost == pytest.approx(worst_cost, abs=1e-13)
        assert cert.max_privacy_cost < cert.bound == params.bound
        assert tuple(cert.worst_multiset) == worst
        assert cert.multisets_checked == n
        assert cert.high_precision_checked == 0
        assert cert.corners == corners(params).tolist()
        E = math.exp(params.m * params.epsilon)
        assert cert.error_bound == error_bound(params.K, E, float(np.abs(signed_h(g)).max()))
        assert 0 < cert.seconds < 60


def test_separate_collects_violators_above_a_threshold():
    params = Params(5, 1)
    cert, res = certify_and_separate(params, BAD, threshold=params.bound, top=3)
    assert not cert.certified
    assert res.violators.shape[0] == 3
    costs = np.sort(res.violator_costs)[::-1]
    assert costs[0] == pytest.approx(cert.max_privacy_cost, abs=1e-13)
    assert np.all(costs > params.bound)
    assert certify_and_separate(params, BAD, threshold=params.bound)[1].violators.shape[0] == 0  # top = 0


def test_validate_gamma():
    np.testing.assert_array_equal(validate_gamma([0, 0.5, 1, 1], 3), [0, 0.5, 1, 1])
    assert validate_gamma([0, 1], 1).dtype == np.float64
    for bad, rule in [([0.5] * 3, "K \\+ 1 = 4"), ([[0.5] * 4], "K \\+ 1"), (["a"] * 4, "numbers"),
                      ([0.5, 0.5, 0.5, 1.0000001], "\\[0, 1\\]"), ([0.5, 0.5, -1e-300, 1], "\\[0, 1\\]"),
                      ([0.5, 0.5, float("nan"), 1], "\\[0, 1\\]"), ([0.5, None, 0.5, 0.5], "\\[0, 1\\]")]:
        with pytest.raises(InvalidParameter, match=rule) as info:
            validate_gamma(bad, 3)
        assert info.value.parameter == "gamma"


def test_is_symmetric():
    assert is_symmetric(np.array([0.1, 0.2, 0.2, 0.1]))
    assert not is_symmetric(np.array([0.1, 0.2, 0.2, 0.10000000000000002]))
    assert is_symmetric(np.array([1.0, 1.0]))


def test_certificate_round_trip():
    cert = certify(Params(3, 1), [1.0, 1 / 3, 1 / 3, 1.0])
    d = cert.to_dict()
    assert Certificate.from_dict({**d, "unknown": 1}) == cert
    assert set(d) == set(Certificate.__dataclass_fields__)


def test_too_many_near_tight_multisets_are_refused_not_guessed():
    """ε = 1e-15: the bound is ~1e-15, below the re-check band, so all 31,824 multisets of γ ≡ 0 (cost 0)
    are near-tight, more than NEAR_CAP; certify refuses instead of re-checking them or passing them."""
    cert = certify(Params(11, 1, epsilon=1e-15, teacher_delta=1e-17), np.zeros(12))
    assert not cert.certified
    assert cert.reason == "too many multisets within the float error of the bound to verify exactly"
    assert cert.high_precision_checked == 0 and cert.multisets_checked == 31_824 > NEAR_CAP


def test_an_exact_tie_between_the_two_sides_reports_the_f_side():
    """γ(0) = γ(K) = 1: the all-(0,0) multiset (f = e^{mε} − 1) and the all-(1,1) one (−f, the same value)
    tie for the worst; the f side is reported."""
    cert = certify(Params(5, 2, teacher_delta=0.0, delta=0.01), [1, 0.01, 0.02, 0.03, 0.04, 1])
    assert cert.certified and cert.worst_multiset == [5, 0, 0, 0]
    assert cert.max_privacy_cost == pytest.approx(math.expm1(0.2), rel=1e-15)


def test_certificate_is_frozen():
    cert = certify(Params(3, 1), [1.0, 1 / 3, 1 / 3, 1.0])
    with pytest.raises(AttributeError):
        cert.certified = False  # type: ignore[misc]


def test_constants():
    assert NEAR_TIGHT == 1e-12 and NEAR_CAP == 20_000
