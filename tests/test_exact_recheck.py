"""The interval re-check (certify/exact.py) against an independent 60-digit brute force.

The reference below never uses the library's corners, convolution, signed h or bound: it takes the
vertices from the notes' formulas, enumerates all 2^K vote vectors and evaluates Lemma 3.4 through the
output probabilities, f = 2(Pr[1 | p] − e^{mε} Pr[1 | p′]) + e^{mε} − 1, with Pr[1 | L] = γ(L)·1{L ≥ (K+1)/2}
+ (1 − γ(L))/2 (Alg. 1). Tables are then placed a few ulps of δ above and below the bound, where only
the exact re-check can tell the two apart; a table whose true excess is +6e-51 (which plain 40-digit
arithmetic accepts) is proven a violation, and non-structural ties are decided by their excess polynomial
(certify/ties.py) whatever ε.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from functools import cache

import mpmath
import numpy as np
import pytest
from plain_mp import exact_cost_mp, exact_excess_mp

from darrm_opt.certify.certificate import certify
from darrm_opt.certify.exact import (
    DIGITS_LADDER,
    MP_DIGITS,
    Decision,
    decide,
    exact_bound_mp,
    excess_intervals,
    recheck,
)
from darrm_opt.certify.ties import excess_polynomial, root_step
from darrm_opt.model.corners import corners
from darrm_opt.model.params import Params

REF_DPS = 60


def ref_corners(eps, Delta, *, exp):
    """The vertices in the documented count-vector order (notes, corners.py docstring)."""
    e = exp(eps)
    d = Delta
    if d == 0:
        return [(0, 0), (e / (e + 1), 1 / (e + 1)), (1, 1), (1 / (e + 1), e / (e + 1))]
    return [(0, 0), (0, d), (d, 0), ((e + d) / (e + 1), (1 - d) / (e + 1)),
            (1, 1), (1, 1 - d), (1 - d, 1), ((1 - d) / (e + 1), (e + d) / (e + 1))]


def ref_prob_one(K, gamma, probs):
    """Pr[out = 1] by enumerating every vote vector; ``probs`` are the K teachers' Pr[vote 1]."""
    total = mpmath.mpf(0)
    half = (K + 1) // 2
    for votes in itertools.product((0, 1), repeat=K):
        w = mpmath.mpf(1)
        for v, p in zip(votes, probs):
            w *= p if v else 1 - p
        L = sum(votes)
        g = mpmath.mpf(float(gamma[L]))
        total += w * (g * (1 if L >= half else 0) + (1 - g) / 2)
    return total


def ref_cost(params: Params, gamma, counts) -> mpmath.mpf:
    """f(n; γ) at REF_DPS digits from the exact binary values of the parameters."""
    with mpmath.workdps(REF_DPS):
        cs = ref_corners(mpmath.mpf(params.epsilon), mpmath.mpf(params.teacher_delta), exp=mpmath.exp)
        teachers = [cs[c] for c, n in enumerate(counts) for _ in range(int(n))]
        p1 = ref_prob_one(params.K, gamma, [mpmath.mpf(p) for p, _ in teachers])
        q1 = ref_prob_one(params.K, gamma, [mpmath.mpf(q) for _, q in teachers])
        E = mpmath.exp(mpmath.mpf(params.m) * mpmath.mpf(params.epsilon))
        return 2 * (p1 - E * q1) + E - 1


def ref_bound(params: Params) -> mpmath.mpf:
    with mpmath.workdps(REF_DPS):
        return mpmath.exp(mpmath.mpf(params.m) * mpmath.mpf(params.epsilon)) - 1 + 2 * mpmath.mpf(params.delta)


def all_multisets(K, C):
    """Count vectors of every multiset of K out of C corners (itertools, not the library's compositions)."""
    out = []
    for combo in itertools.combinations_with_replacement(range(C), K):
        v = [0] * C
        for c in combo:
            v[c] += 1
        out.append(tuple(v))
    return out


def reflect(counts):
    half = len(counts) // 2
    return tuple(counts[half:]) + tuple(counts[:half])


def float_costs(params: Params, gamma, multisets):
    """f of every multiset in float64 (brute force over vote vectors), to locate the worst one."""
    K = params.K
    cs = np.array(ref_corners(params.epsilon, params.teacher_delta, exp=math.exp), dtype=float)
    votes = np.array(list(itertools.product((0, 1), repeat=K)), dtype=float)
    L = votes.sum(axis=1).astype(int)
    g = np.asarray(gamma)[L]
    out1 = g * (L >= (K + 1) // 2) + (1 - g) / 2
    E = math.exp(params.m * params.epsilon)
    res = []
    for n in multisets:
        idx = [c for c, k in enumerate(n) for _ in range(k)]
        p, q = cs[idx, 0], cs[idx, 1]
        wp = np.prod(np.where(votes == 1, p, 1 - p), axis=1)
        wq = np.prod(np.where(votes == 1, q, 1 - q), axis=1)
        res.append(2 * (wp @ out1 - E * (wq @ out1)) + E - 1)
    return np.array(res)


PARAMS = [
    Params(5, 2, epsilon=0.1, teacher_delta=0.0, delta=0.0),
    Params(5, 3, epsilon=0.3, teacher_delta=1e-3),
    Params(7, 2.5, epsilon=0.2, teacher_delta=0.01, delta=0.05),
    Params(3, 1, epsilon=1.0, teacher_delta=0.0, delta=1e-4),
]


def test_mp_digits_is_at_least_forty():
    assert MP_DIGITS >= 40


@pytest.mark.parametrize("params", PARAMS + [Params(11, 3), Params(41, 7.5, epsilon=0.05, teacher_delta=1e-6)])
def test_bound_is_exp_m_eps_minus_one_plus_two_delta_at_forty_digits(params):
    got = exact_bound_mp(params)
    ref = ref_bound(params)
    with mpmath.workdps(REF_DPS):
        assert abs(got - ref) <= mpmath.mpf(10) ** -39 * ref
    assert float(got) == pytest.approx(params.bound, rel=4e-16)
    # δ enters twice: a value off by δ would differ by far more than 40 digits allow
    assert params.delta == 0 or abs(float(got) - math.expm1(params.m * params.epsilon)) > 1.9 * params.delta


def test_corner_order_used_by_count_vectors():
    for params in PARAMS:
        ref = np.array(ref_corners(params.epsilon, params.teacher_delta, exp=math.exp), dtype=float)
        np.testing.assert_allclose(corners(params), ref, rtol=0, atol=1e-15)


@pytest.mark.parametrize("params", PARAMS)
def test_exact_cost_and_excess_agree_with_brute_force(params):
    rng = np.random.default_rng(int(params.K * 1000 + params.m * 10))
    C = 4 if params.pure else 8
    gamma = rng.random(params.K + 1)  # not symmetric
    gamma[0] = gamma[-1] = 1.0  # h = −1 and h = +1 entries
    gamma[1] = 0.0  # and an h = 0 entry
    multisets = all_multisets(params.K, C)
    picks = [multisets[0], multisets[-1]] + [multisets[i] for i in rng.choice(len(multisets), 5, replace=False)]
    bound = ref_bound(params)
    for n in picks:
        ref = ref_cost(params, gamma, n)
        got = exact_cost_mp(params, gamma, np.array(n))
        x1, x0 = exact_excess_mp(params, gamma, np.array(n))
        with mpmath.workdps(REF_DPS):
            tol = mpmath.mpf(10) ** -36
            assert abs(got - ref) <= tol, n
            assert abs(2 * x1 + bound - ref) <= tol, n  # f = bound + 2 x₁
            assert abs(2 * x0 + bound + ref) <= tol, n  # −f = bound + 2 x₀


@cache
def tight_setup(pure: bool, kind: str):
    """A γ scaled so that its worst multiset n* costs c* ≈ e^{mε} − 1 + 6e-5, c* at 60 digits, and the
    exact δ* = (c* − e^{mε} + 1)/2 that makes n* tight."""
    K, m, eps = 5, 2, 0.1
    Delta = 0.0 if pure else 1e-5
    base = Params(K, m, epsilon=eps, teacher_delta=Delta, delta=0.5)
    multisets = all_multisets(K, 4 if pure else 8)
    for seed in range(100):  # the first seed whose scaled table fits in [0, 1] with a unique worst multiset
        g0 = 0.2 + 0.4 * np.random.default_rng(seed).random(K + 1)
        if kind == "symmetric":
            g0 = (g0 + g0[::-1]) / 2
        f = float_costs(base, g0, multisets)
        gamma = g0 * (math.expm1(m * eps) + 6e-5) / np.maximum(f, -f).max()
        f = float_costs(base, gamma, multisets)
        order = np.argsort(-np.maximum(f, -f))
        i = int(order[0])
        n_star = multisets[i]
        side = 1 if f[i] >= -f[i] else -1
        runner_up = [j for j in order[1:] if multisets[j] != reflect(n_star)][0]
        if gamma.max() <= 1 and max(f[i], -f[i]) - max(f[runner_up], -f[runner_up]) > 1e-9:
            break
    else:
        raise AssertionError("no suitable table")
    if kind == "symmetric" and side == -1:  # the same cost on the f side: the reflected multiset
        n_star, side = reflect(n_star), 1
    if kind == "mirrored":  # γ(K − l): f(γ', reflect n) = −f(γ, n), so the worst is on the output-0 side
        gamma, n_star, side = gamma[::-1].copy(), reflect(n_star), -side
    with mpmath.workdps(REF_DPS):  # every mp operation at REF_DPS (outside, mpmath rounds to 53 bits)
        c_star = side * ref_cost(base, gamma, n_star)
        delta_star = (c_star - mpmath.expm1(mpmath.mpf(m) * mpmath.mpf(eps))) / 2
    return (K, m, eps, Delta), gamma, n_star, side, c_star, delta_star


def _delta_near(delta_star, c_star, where: str, rel: float = 0.0) -> float:
    """The float just above/below δ* (rel = 0: by one ulp of δ), or δ* ± rel·c*/2 (the bound moves by
    rel·c*, a relative 1e-15 of itself)."""
    with mpmath.workdps(REF_DPS):
        d = float(delta_star)
        if rel == 0:
            while (mpmath.mpf(d) <= delta_star) if where == "above" else (mpmath.mpf(d) >= delta_star):
                d = math.nextafter(d, math.inf if where == "above" else -math.inf)
            return d
        return float(delta_star + (1 if where == "above" else -1) * rel * c_star / 2)


@pytest.mark.parametrize("pure", [True, False], ids=["Delta0", "Delta1e-5"])
@pytest.mark.parametrize("kind", ["asymmetric", "mirrored", "symmetric"])
@pytest.mark.parametrize("rel", [0.0, 1e-15], ids=["ulp", "1e-15rel"])
def test_table_placed_just_above_and_just_below_the_bound(pure, kind, rel):
    (K, m, eps, Delta), gamma, n_star, side, c_star, delta_star = tight_setup(pure, kind)
    above = Params(K, m, epsilon=eps, teacher_delta=Delta, delta=_delta_near(delta_star, c_star, "above", rel))
    below = Params(K, m, epsilon=eps, teacher_delta=Delta, delta=_delta_near(delta_star, c_star, "below", rel))
    with mpmath.workdps(REF_DPS):
        gap_above = ref_bound(above) - c_star
        gap_below = ref_bound(below) - c_star
        assert 0 < gap_above < (1e-19 if rel == 0 else 3e-15)
        assert -(1e-19 if rel == 0 else 3e-15) < gap_below < 0
    ok = certify(above, gamma)
    assert ok.certified, ok.reason
    assert ok.high_precision_checked >= 1  # decided in 40 digits, not by the float sweep
    assert ok.max_privacy_cost == pytest.approx(float(c_star), rel=1e-15, abs=0)
    assert ok.max_privacy_cost <= ok.bound
    bad = certify(below, gamma)
    assert not bad.certified
    if kind == "symmetric":
        assert tuple(bad.worst_multiset) in (n_star, reflect(n_star))
    else:
        assert tuple(bad.worst_multiset) == n_star
        assert str(list(n_star)) in bad.reason
    assert bad.max_privacy_cost == pytest.approx(float(c_star), rel=1e-15, abs=0)
    # the re-check alone, on n* among slack multisets, in both orders
    slack = [m_ for m_ in all_multisets(K, len(n_star))[:4] if m_ not in (n_star, reflect(n_star))]
    two_sided = kind != "symmetric"
    for multisets in (slack + [n_star], [n_star] + slack):
        arr = np.array(multisets)
        r_ok = recheck(above, gamma, arr, two_sided)
        r_bad = recheck(below, gamma, arr, two_sided)
        assert r_ok.certified and not r_bad.certified
        assert r_ok.worst == r_bad.worst == n_star
        assert r_ok.checked == r_bad.checked == len(multisets)
        assert r_ok.max_cost == pytest.approx(float(c_star), rel=1e-15, abs=0)
        assert r_ok.reason == "" and str(list(n_star)) in r_bad.reason


def test_one_sided_recheck_ignores_the_output_zero_side_only_when_told():
    """A mirrored table's violation is on −f: the two-sided re-check sees it, a one-sided one must not."""
    (K, m, eps, Delta), gamma, n_star, side, c_star, delta_star = tight_setup(False, "mirrored")
    assert side == -1
    below = Params(K, m, epsilon=eps, teacher_delta=Delta, delta=_delta_near(delta_star, c_star, "below"))
    arr = np.array([n_star])
    assert not recheck(below, gamma, arr, True).certified
    one = recheck(below, gamma, arr, False)
    assert one.certified
    assert one.max_cost == pytest.approx(float(-c_star), rel=1e-15, abs=0)  # f itself, −c*


@pytest.mark.parametrize("K,m", [(3, 3), (5, 5), (11, 11), (11, 6)])
def test_gamma_one_is_exactly_tight_in_pure_dp(K, m):
    """γ ≡ 1 with Δ = δ = 0: every multiset whose majority has probability 0 under p and p′ costs exactly
    e^{mε} − 1 = the bound. The re-check must decide these ties exactly (excess 0), not by rounding noise:
    the all-(0,0) multiset has x₁ = 0 exactly and x₀ = −δ − (e^{mε} − 1) < 0."""
    params = Params(K, m, epsilon=0.1, teacher_delta=0.0, delta=0.0)
    g = np.ones(K + 1)
    zero = np.zeros(4, dtype=int)
    zero[0] = K
    x1, x0 = exact_excess_mp(params, g, zero)
    assert x1 == 0
    assert float(x0) == pytest.approx(-math.expm1(0.1 * m), rel=1e-15)
    r = recheck(params, g, np.array([zero, zero[[2, 3, 0, 1]]]), True)
    assert r.certified and r.max_cost == float(exact_bound_mp(params))
    assert r.worst == tuple(zero)  # x₁(zero) = x₀(reflected) = 0: the first of equal excesses is reported
    if m == K:  # K-fold composition: γ ≡ 1 is (Kε, 0)-DP, and every tie is structural
        cert = certify(params, g)
        assert cert.certified, cert.reason
        assert cert.max_privacy_cost == pytest.approx(cert.bound, rel=1e-15)
        assert cert.high_precision_checked > 0


def test_structural_tie_with_delta():
    """K = 1, m = 1, δ = Δ: the teacher itself. At the corner (Δ, 0) Pr[1|p] = Δ and Pr[1|p′] = 0, so the
    excess is Δ − δ = 0 exactly (δ < Δ is invalid input, so the tie is the boundary case)."""
    params = Params(1, 1, epsilon=0.1, teacher_delta=1e-5, delta=1e-5)
    x1, _ = exact_excess_mp(params, np.ones(2), np.array([0, 0, 1, 0, 0, 0, 0, 0]))
    assert x1 == 0
    assert recheck(params, np.ones(2), np.array([[0, 0, 1, 0, 0, 0, 0, 0]]), True).certified


def test_recheck_verdict_is_frozen():
    r = recheck(Params(3, 1), np.ones(4), np.zeros((0, 8), dtype=int), True)
    with pytest.raises(AttributeError):
        r.certified = False  # type: ignore[misc]


def test_empty_recheck():
    r = recheck(Params(3, 1), np.ones(4), np.zeros((0, 8), dtype=int), True)
    assert r.certified and r.checked == 0 and r.max_cost == -math.inf and r.worst == ()


def interval_ends(x):
    lo, hi = x._mpi_
    return mpmath.mp.make_mpf(lo), mpmath.mp.make_mpf(hi)  # exact, not rounded to 53 bits


@pytest.mark.parametrize("params", PARAMS)
def test_excess_intervals_enclose_the_brute_force_excess(params):
    """Every enclosure (at 40 and 80 digits) contains the 60-digit brute-force excess (f − bound)/2 and is
    narrow: width < 1e-35 at 40 digits, < 1e-55 at 80 (the reference itself is good to ~1e-58)."""
    rng = np.random.default_rng(7 + params.K)
    gamma = rng.random(params.K + 1)
    gamma[0] = gamma[-1] = 1.0
    gamma[params.K // 2] = 0.0  # weight-1/2 terms on both output sides
    multisets = all_multisets(params.K, 4 if params.pure else 8)
    bound = ref_bound(params)
    for i in rng.choice(len(multisets), 6, replace=False):
        n = multisets[i]
        ref = ref_cost(params, gamma, n)
        with mpmath.workdps(REF_DPS):
            want = ((ref - bound) / 2, (-ref - bound) / 2)
        for dps, width in ((40, 1e-35), (80, 1e-55)):
            for x, w in zip(excess_intervals(params, gamma, n, dps), want):
                lo, hi = interval_ends(x)
                with mpmath.workdps(REF_DPS):
                    assert lo - mpmath.mpf(10) ** -57 <= w <= hi + mpmath.mpf(10) ** -57, (n, dps)
                    assert hi - lo < width


#: Δ = δ = 1e-50 beside the γ ≡ 1, K = 3, m = 2 tie: the true excess of (0,0,1,2 | 0,0,0,0) is +6.4e-51
TINY = Params(3, 2, epsilon=0.3, teacher_delta=1e-50, delta=1e-50)
TINY_N = (0, 0, 1, 2, 0, 0, 0, 0)


def test_a_violation_of_6e_51_that_40_digit_arithmetic_accepts_is_proven():
    g = np.ones(4)
    ref = ref_cost(TINY, g, TINY_N)
    with mpmath.workdps(REF_DPS):
        true_excess = (ref - ref_bound(TINY)) / 2
        assert mpmath.mpf(1e-51) < true_excess < mpmath.mpf(1e-50)  # a real violation, far above 60-digit noise
    x1, x0 = exact_excess_mp(TINY, g, np.array(TINY_N))
    assert x1 <= 0 and x0 < 0  # the plain 40-digit evaluation would accept it
    d = decide(TINY, g, TINY_N, True)
    assert d.verdict == "fail" and d.digits == 80  # 40 digits straddle, 80 prove it
    with mpmath.workdps(REF_DPS):
        slack = mpmath.mpf(10) ** -57  # the 60-digit reference's own error
        assert 0 < d.lo and d.lo - slack <= true_excess <= d.hi + slack and d.hi - d.lo < mpmath.mpf(10) ** -70
    r = recheck(TINY, g, np.array([TINY_N, (3, 0, 0, 0, 0, 0, 0, 0)]), True)
    assert not r.certified and r.worst == TINY_N and "exceeds the bound" in r.reason
    cert = certify(TINY, g)
    assert not cert.certified and cert.high_precision_checked > 0


def test_the_mirrored_violation_on_the_output_zero_side_is_proven_too():
    n = reflect(TINY_N)
    x1, x0 = exact_excess_mp(TINY, np.ones(4), np.array(n))
    assert x1 < 0 and x0 <= 0
    assert decide(TINY, np.ones(4), n, True).verdict == "fail"
    assert decide(TINY, np.ones(4), n, False).verdict == "pass"  # x₁ alone is fine


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_a_non_structural_tie_is_an_exact_tie_whatever_epsilon(eps):
    """γ ≡ 1, K = 3, m = 2, pure DP: multiset (1, 2, 0, 0) costs exactly e^{2ε} − 1 (a rational identity in
    e^ε). Plain 40-digit arithmetic put it on opposite sides of 0 at ε = 0.1 and 0.3 (refused, accepted); the
    interval re-check straddles 0 at every precision, the excess polynomial is identically 0, and both are
    accepted as exact ties. A 400-digit brute force agrees that the excess is 0 to 390 digits."""
    params = Params(3, 2, epsilon=eps, teacher_delta=0.0, delta=0.0)
    g, n = np.ones(4), (1, 2, 0, 0)
    with mpmath.workdps(400):
        cs = ref_corners(mpmath.mpf(eps), 0.0, exp=mpmath.exp)
        teachers = [cs[c] for c, k in enumerate(n) for _ in range(k)]
        p1 = ref_prob_one(3, g, [mpmath.mpf(p) for p, _ in teachers])
        q1 = ref_prob_one(3, g, [mpmath.mpf(q) for _, q in teachers])
        assert abs(p1 - mpmath.exp(2 * mpmath.mpf(eps)) * q1) < mpmath.mpf(10) ** -390
    for dps in DIGITS_LADDER:
        lo, hi = interval_ends(excess_intervals(params, g, n, dps)[0])
        assert lo <= 0 <= hi and hi - lo < mpmath.mpf(10) ** (4 - dps)
    assert excess_polynomial(params, g, n, 1) == []
    assert decide(params, g, n, False) == Decision("tie", mpmath.mpf(0), mpmath.mpf(0), 320)
    cert = certify(params, g)
    assert cert.certified, cert.reason
    assert cert.max_privacy_cost == cert.bound


@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_ties_on_the_output_zero_side_are_proven_on_that_side(eps):
    """γ ≡ 1, K = 3, m = 2, pure DP, both output sides: every multiset passes or is an exact tie, and some
    multisets are ties on the output-0 side only (x₀ straddles 0 while x₁ is proven < 0), so the tie must be
    proven for x₀'s own polynomial."""
    params = Params(3, 2, epsilon=eps, teacher_delta=0.0, delta=0.0)
    g = np.ones(4)
    zero_side_ties = 0
    for n in all_multisets(3, 4):
        assert decide(params, g, n, True).verdict in ("pass", "tie"), n
        x1, x0 = (interval_ends(x) for x in excess_intervals(params, g, n, 320))
        if x1[1] < 0 <= x0[1] and x0[0] <= 0:
            zero_side_ties += 1
            assert excess_polynomial(params, g, n, -1) == [] and excess_polynomial(params, g, n, 1) != []
    assert zero_side_ties > 0


def test_a_violation_below_320_digits_that_is_no_tie_is_refused():
    """Δ = δ = 5e-324 (the smallest float) beside the same tie: the excess of TINY_N is ~3e-324 > 0, below
    what 320 digits resolve, and its polynomial is not 0: refused as "cannot be proven"."""
    params = Params(3, 2, epsilon=0.3, teacher_delta=5e-324, delta=5e-324)
    g = np.ones(4)
    d = decide(params, g, TINY_N, True)
    assert d.verdict == "undecided" and d.lo <= 0 < d.hi < mpmath.mpf(10) ** -319
    P = excess_polynomial(params, g, TINY_N, 1)
    assert P  # a nonzero rational polynomial: not an exact tie
    r = recheck(params, g, np.array([TINY_N]), True)
    assert not r.certified and "cannot be proven" in r.reason and "not an exact tie" in r.reason
    assert r.worst == TINY_N


@pytest.mark.parametrize("params", PARAMS)
def test_excess_polynomial_agrees_with_the_brute_force(params):
    """P(t)/(D(e + 1))^K at t = e^{ε/s} (certify/ties.py) equals the 60-digit brute-force excess, both
    sides."""
    rng = np.random.default_rng(11 + params.K)
    gamma = rng.random(params.K + 1)
    gamma[0] = 1.0
    multisets = all_multisets(params.K, 4 if params.pure else 8)
    s = root_step(params.m)
    assert s == (2 if params.m == 2.5 else 1)
    for i in rng.choice(len(multisets), 5, replace=False):
        n = multisets[i]
        ref = ref_cost(params, gamma, n)
        with mpmath.workdps(REF_DPS):
            bound = ref_bound(params)
            t = mpmath.exp(mpmath.mpf(params.epsilon) / s)
            for side, want in ((1, (ref - bound) / 2), (-1, (-ref - bound) / 2)):
                P = excess_polynomial(params, gamma, n, side)
                got = sum(mpmath.mpf(c.numerator) / c.denominator * t**k for k, c in enumerate(map(Fraction, P)))
                D = Fraction(params.teacher_delta).denominator  # P is scaled by D^K (integer arithmetic)
                assert abs(got / (D * (t**s + 1)) ** params.K - want) < mpmath.mpf(10) ** -55, (n, side)


def test_ties_need_m_in_eighths():
    assert root_step(3.0) == 1 and root_step(2.5) == 2 and root_step(1.125) == 8
    assert root_step(1.0625) is None
    params = Params(3, 1.0625, epsilon=0.1, teacher_delta=0.0, delta=0.0)
    assert excess_polynomial(params, np.ones(4), (3, 0, 0, 0), 1) is None


def test_structural_ties_are_degenerate_intervals_at_forty_digits():
    """Outcomes of probability exactly 0 stay [0, 0]: the tie is decided at the first rung."""
    params = Params(5, 5, epsilon=0.1, teacher_delta=0.0, delta=0.0)
    x1, x0 = excess_intervals(params, np.ones(6), (5, 0, 0, 0), MP_DIGITS)
    assert interval_ends(x1) == (0, 0)
    assert interval_ends(x0)[1] < -0.6  # −(e^{0.5} − 1)
    d = decide(params, np.ones(6), (5, 0, 0, 0), True)
    assert d.verdict == "pass" and d.digits == 40 and d.hi == 0
