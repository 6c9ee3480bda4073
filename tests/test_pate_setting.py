"""Honest baselines and the PATE setting (issue 14; issue 11 item 9).

Reference values from the issue: c* = 0.87202 (error 0.0596) at K = 11, m = 3; GNMax σ at (0.2676, 3e-4):
21.46 (paper's RDP), 14.63 (improved conversion), 12.90 (analytic Gaussian), 7.68 (exact one bit, K = 11).
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
from scipy.optimize import linprog

from darrm_opt.certify.certificate import certify
from darrm_opt.certify.pairs import certify_pairs
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.baselines import const_parameters, gamma_const
from darrm_opt.model.neighbours import PateParams, pate_delta, setting_note
from darrm_opt.model.objective import expected_error, objective_weights
from darrm_opt.model.params import Params
from darrm_opt.optimize.pate_setting import certified_pair_decimals, solve_pate
from darrm_opt.privacy import gnmax
from darrm_opt.release.table_file import Unavailable, baseline_tables

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------------
# constant randomized response
# ---------------------------------------------------------------------------------------------------
def test_const_opt_reference():
    params = Params(11, 3, epsilon=0.1, teacher_delta=1e-5)
    base = baseline_tables(params)
    c = base["const_opt"].gamma
    assert len(set(c)) == 1 and round(c[0], 5) == 0.87202
    assert round(expected_error(c, params.prior), 4) == 0.0596
    assert base["const_opt"].certificate.certified
    # c* is the largest constant: a constant 1e-6 larger violates the bound
    assert not certify(params, np.full(12, c[0] + 1e-6)).certified
    # the paper's constant (eq. 16) stays, far looser
    assert round(base["const"].gamma[0], 4) == 0.2975
    assert round(expected_error(base["const"].gamma, params.prior), 4) == 0.3271


def test_const_uses_composed_delta_and_certifies():
    """Issue 11 item 9: simple composition gives the majority λ = 1 − (1 − Δ)^K, not 0."""
    params = Params(3, 1.5, epsilon=0.01, teacher_delta=0.05)
    tau, lam = const_parameters(params)
    assert tau == 3 and lam == pytest.approx(1 - 0.95**3, rel=1e-14)
    assert certify(params, gamma_const(params)).certified
    # the paper's λ = 0 overstates the constant and is not private here
    E, Et = math.exp(0.015), math.exp(0.03)
    p_paper = (E - 1 + 2 * params.delta) / (2 * (Et - E) / (Et + 1) + E - 1)
    assert not certify(params, np.full(4, min(1.0, p_paper))).certified
    base = baseline_tables(params)
    assert isinstance(base["sub"], Unavailable) and "integer m" in base["sub"].reason
    assert not base["dsub"] and base["const"] and base["const_opt"]


@pytest.mark.slow  # CLI subprocesses
def test_k3_solve_cli_prints_gamma_opt_and_reasons():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-m", "darrm_opt", "solve", "--K", "3", "--m", "1.5", "--epsilon", "0.01",
                          "--teacher-delta", "0.05", "-q"], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "γ_opt" in res.stdout and "CERTIFIED" in res.stdout
    assert "γ_Sub unavailable: γ_Sub needs an integer m" in res.stdout
    res = subprocess.run([sys.executable, "-m", "darrm_opt", "solve", "--K", "3", "--m", "1.5", "--epsilon", "0.01",
                          "--teacher-delta", "0.05", "-q", "--format", "json"], capture_output=True, text=True,
                         env=env, timeout=120)
    doc = json.loads(res.stdout)
    assert doc["certificate"]["certified"] and doc["baselines"]["const"] is not None
    assert set(doc["baseline_unavailable"]) == {"sub", "dsub"}
    assert doc["expected_error"]["opt"] <= doc["expected_error"]["const_opt"] <= doc["expected_error"]["const"]


# ---------------------------------------------------------------------------------------------------
# GNMax calibrations
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("method, ref", [("rdp", 21.46), ("rdp-improved", 14.63), ("analytic-gaussian", 12.90),
                                         ("exact-one-bit", 7.68)])
def test_gnmax_sigma_references(method, ref):
    cal = gnmax.calibrate_gnmax(0.2676, 3e-4, method, K=11)
    assert round(cal.sigma, 2) == ref and cal.method == method


def test_order_grid_reaches_500():
    assert gnmax.DEFAULT_ORDERS.max() >= 500
    assert gnmax.calibrate_gnmax_sigma(0.1, 1e-5).order == 232.0  # m = 1 of the compare default, beyond 200


def test_improved_and_analytic_meet_the_target():
    from dp_accounting import get_epsilon_gaussian

    imp = gnmax.calibrate_gnmax_rdp_improved(0.2676, 3e-4)
    lam = gnmax.DEFAULT_ORDERS
    eps = lam / imp.sigma**2 + np.log1p(-1 / lam) - (math.log(3e-4) + np.log(lam)) / (lam - 1)
    assert eps.min() <= 0.2676 < (lam / (imp.sigma * 0.9999) ** 2 + np.log1p(-1 / lam)
                                   - (math.log(3e-4) + np.log(lam)) / (lam - 1)).min()
    ana = gnmax.calibrate_gnmax_analytic(0.2676, 3e-4)
    assert get_epsilon_gaussian(ana.sigma / math.sqrt(2), 3e-4) <= 0.2676


def _bit_probs(K, sigma):
    with mpmath.workdps(40):
        return [mpmath.erfc(-(2 * l - K) / (2 * mpmath.mpf(sigma))) / 2 for l in range(K + 1)]


def _bit_ok(K, sigma, eps, delta):
    p = _bit_probs(K, sigma)
    with mpmath.workdps(40):
        E = mpmath.exp(mpmath.mpf(eps))
        return all(p[a] <= E * p[b] + delta and 1 - p[a] <= E * (1 - p[b]) + delta
                   for a in range(K + 1) for b in (a - 1, a + 1) if 0 <= b <= K)


@pytest.mark.parametrize("K, eps, delta", [(11, 0.2676, 3e-4), (5, 1.0, 1e-5), (21, 0.5, 0.0)])
def test_exact_one_bit_is_tight(K, eps, delta):
    cal = gnmax.calibrate_gnmax_one_bit(eps, delta, K)
    assert _bit_ok(K, cal.sigma, eps, delta)
    assert not _bit_ok(K, cal.sigma * (1 - 1e-6), eps, delta)
    # the bit GNMax releases is DaRRM with γ = erf(|2l − K|/(2σ)); its exact δ matches
    assert pate_delta(gnmax.gnmax_gamma(K, cal.sigma), eps) <= delta + 1e-15


# ---------------------------------------------------------------------------------------------------
# the PATE-setting LP
# ---------------------------------------------------------------------------------------------------
def _brute_force_ok(params, gamma):
    """Every pair (l, l ± 1) and output from the output probabilities themselves, in 40 digits."""
    K = params.K
    with mpmath.workdps(40):
        E, d = mpmath.exp(mpmath.mpf(params.epsilon)), mpmath.mpf(params.delta)
        p1 = [(1 + (1 if l > K / 2 else -1) * mpmath.mpf(float(gamma[l]))) / 2 for l in range(K + 1)]
        return all(p1[a] <= E * p1[b] + d and 1 - p1[a] <= E * (1 - p1[b]) + d
                   for a in range(K + 1) for b in range(K + 1) if abs(a - b) == 1)


def _full_lp_optimum(params):
    """The LP over all K + 1 values (no symmetry assumed), rows written from the probabilities."""
    K, E = params.K, math.exp(params.epsilon)
    rows = []
    for a in range(K + 1):
        for b in (a - 1, a + 1):
            if 0 <= b <= K:
                for sign in (1, -1):  # output 1, output 0: ±(P1(a) − E P1(b)) ≤ (E − 1)/2 + δ, times 2
                    r = np.zeros(K + 1)
                    r[a] += sign * (1 if a > K / 2 else -1)
                    r[b] -= sign * E * (1 if b > K / 2 else -1)
                    rows.append(r)
    w = objective_weights(K, params.prior)  # w_j for γ((K+1)/2 + j)
    high = np.arange((K + 1) // 2, K + 1)
    c = np.zeros(K + 1)
    c[high] -= w / 2
    c[K - high] -= w / 2  # maximise Σ_j w_j (γ(l_j) + γ(K − l_j))/2, = Σ_j w_j γ(l_j) for symmetric γ
    res = linprog(c, A_ub=np.array(rows), b_ub=np.full(len(rows), params.bound), bounds=(0, 1), method="highs")
    return float(w.sum()), -res.fun


@pytest.mark.parametrize("K, eps, delta", [(3, 0.5, 1e-3), (11, 0.2676, 3e-4), (11, 1.0, 0.0), (21, 0.3, 1e-5)])
def test_pate_lp_against_brute_force_and_gnmax(K, eps, delta):
    params = PateParams(K, eps, delta)
    sol = solve_pate(params)
    g = np.asarray(sol.gamma)
    assert g.size == K + 1 and np.array_equal(g, g[::-1])
    assert sol.certificate.certified and _brute_force_ok(params, g)
    # optimal: the unrestricted LP does no better, and raising any γ(l) pair breaks some (l, l ± 1) row
    total, best = _full_lp_optimum(params)  # error = Σ w − Σ w_j γ(l_j)
    assert total - sol.expected_error == pytest.approx(best, abs=1e-7)
    assert total - sol.expected_error <= best + 1e-9
    assert not all(_brute_force_ok(params, np.minimum(1, g + 1e-4 * (np.arange(K + 1) == l)))
                   for l in range(K + 1) if g[l] < 1 - 1e-4)
    # GNMax with two classes is one feasible γ: the optimum is at least as good
    cal = gnmax.calibrate_gnmax_one_bit(eps, delta, K)
    gn = gnmax.gnmax_gamma(K, cal.sigma)
    assert _brute_force_ok(params, gn)
    assert sol.expected_error <= expected_error(gn, params.prior) + 1e-9


def test_pate_table_as_printed_certifies():
    params = PateParams(11, 0.2676, 3e-4)
    shown, cert = certified_pair_decimals(params, solve_pate(params).gamma, 4)
    assert cert.certified and _brute_force_ok(params, [float(x) for x in shown])
    assert not certify_pairs(params, np.ones(12)).certified


def test_pate_params_rules():
    with pytest.raises(InvalidParameter, match="K"):
        PateParams(0, 0.1, 0.0)
    assert PateParams(4, 0.1, 0.0).K == 4  # even K: the tie rule (tests/test_even_k.py)
    with pytest.raises(InvalidParameter, match="target_epsilon"):
        PateParams(11, 0.0, 0.0)
    with pytest.raises(InvalidParameter, match="delta"):
        PateParams(11, 0.1, 1.0)


def _cli(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "darrm_opt", *args], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.slow  # CLI subprocesses
def test_solve_disjoint_nonprivate_cli():
    res = _cli("solve", "--K", "11", "--teachers", "disjoint-nonprivate", "--target-epsilon", "0.2676",
               "--delta", "3e-4", "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert len(doc["gamma"]) == 12 and doc["certificate"]["certified"]
    assert doc["gnmax"]["calibration"] == "exact-one-bit" and round(doc["gnmax"]["sigma"], 2) == 7.68
    assert doc["expected_error"] <= doc["gnmax"]["expected_error"]
    assert _brute_force_ok(PateParams(11, 0.2676, 3e-4), doc["gamma"])
    bad = _cli("solve", "--K", "11", "--teachers", "disjoint-nonprivate", "--m", "3", "--target-epsilon", "0.3")
    assert bad.returncode == 2 and "invalid m" in bad.stderr and "Traceback" not in bad.stderr
    bad = _cli("solve", "--K", "11", "--teachers", "disjoint-nonprivate")
    assert bad.returncode == 2 and "target-epsilon" in bad.stderr


def test_disjoint_private_states_the_cap():
    note = setting_note("disjoint-private", 0.1, 1e-5)
    assert note.cap == (0.1, 1e-5) and "parallel composition" in note.note
    res = _cli("solve", "--K", "5", "--m", "2", "--teachers", "disjoint-private", "-q", "--format", "json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["setting"]["total_cap"] == {"epsilon": 0.1, "delta": 1e-5}
    assert "plain majority" in doc["setting"]["note"]


def test_pair_certificate_agrees_with_brute_force_on_random_tables():
    rng = np.random.default_rng(7)
    verdicts = []
    for _ in range(150):
        K = int(rng.choice([1, 3, 5, 9]))
        eps, delta = float(rng.uniform(0.05, 2.0)), float(rng.choice([0.0, 1e-3, 0.05]))
        g = rng.uniform(0, 1, K + 1) ** float(rng.uniform(0.5, 4))
        if rng.random() < 0.5:
            g = (g + g[::-1]) / 2
        params = PateParams(K, eps, delta)
        ok = certify_pairs(params, g).certified
        assert ok == _brute_force_ok(params, g)
        # pate_delta is the smallest δ: the table certifies just above it and fails just below (if > 0)
        need = pate_delta(g, eps)
        assert _brute_force_ok(PateParams(K, eps, min(need * (1 + 1e-9) + 1e-15, 0.999)), g)
        if need > 1e-9:
            assert not _brute_force_ok(PateParams(K, eps, need * (1 - 1e-6)), g)
        verdicts.append(ok)
    assert 10 < sum(verdicts) < 140  # both verdicts occur


def test_one_bit_sigma_below_analytic_gaussian_and_meets_it_for_large_k():
    """The released bit is a post-processing of the Gaussian histogram, so its σ is never above the analytic
    Gaussian's; with many thresholds (large K) the worst pair sits where a Neyman–Pearson threshold test
    of the two Gaussians does, and the two calibrations meet."""
    ana = gnmax.calibrate_gnmax_analytic(0.2676, 3e-4).sigma
    small = gnmax.calibrate_gnmax_one_bit(0.2676, 3e-4, 11).sigma
    large = gnmax.calibrate_gnmax_one_bit(0.2676, 3e-4, 101).sigma
    assert small < large <= ana
    assert large == pytest.approx(ana, rel=1e-3)


# ---------------------------------------------------------------------------------------------------
# the interval re-check of the PATE rows
# ---------------------------------------------------------------------------------------------------
def _row_ends(params, g, label, dps):
    from darrm_opt.certify.pairs import row_excess_interval

    lo, hi = row_excess_interval(params, g, label, dps)._mpi_
    return mpmath.mp.make_mpf(lo), mpmath.mp.make_mpf(hi)


def test_pate_row_intervals_enclose_the_probability_form():
    """Each row's enclosure contains P_l − e^ε P_{l′} − δ from the output probabilities at 60 digits."""
    from darrm_opt.model.neighbours import pair_rows

    params = PateParams(7, 0.4, 1e-3)
    g = np.random.default_rng(3).random(8)
    _, labels = pair_rows(7, math.exp(0.4))
    with mpmath.workdps(60):
        E, d = mpmath.exp(mpmath.mpf(0.4)), mpmath.mpf(1e-3)
        p1 = [(1 + (1 if l > 3.5 else -1) * mpmath.mpf(float(g[l]))) / 2 for l in range(8)]
        for l, lp, out in labels:
            P = (p1[l], p1[lp]) if out == 1 else (1 - p1[l], 1 - p1[lp])
            want = P[0] - E * P[1] - d
            lo, hi = _row_ends(params, g, (l, lp, out), 40)
            assert lo - mpmath.mpf(10) ** -57 <= want <= hi + mpmath.mpf(10) ** -57
            assert hi - lo < mpmath.mpf(10) ** -38


def test_pate_structural_tie_is_an_exact_zero():
    """γ(0) = γ(1) = 1, δ = 0: Pr[out = 1 | L] = 0 at L = 0 and 1, so the rows (0, 1, 1) and (1, 0, 1) cost
    exactly e^ε − 1 = the bound: excess [0, 0] at 40 digits (the cost form h − e^ε h′ − (e^ε − 1) would be
    e^ε − e^ε, rounding noise of either sign)."""
    from darrm_opt.certify.pairs import decide_row

    params = PateParams(5, 0.3, 0.0)
    g = np.array([1.0, 1.0, 0.5, 0.5, 1.0, 1.0])
    for label in ((0, 1, 1), (1, 0, 1), (5, 4, 0), (4, 5, 0)):
        assert _row_ends(params, g, label, 40) == (0, 0)
        verdict, mid = decide_row(params, g, label)
        assert verdict == "pass" and mid == 0
    assert decide_row(params, g, (3, 2, 1))[0] == "fail"  # P₁(3) − e^0.3 P₁(2) = 0.75 − 1.35·0.25 > 0
