"""Even K in the binary PATE setting (issue 22): the tie L = K/2 is answered by a fair coin, as GNMax
breaks the tie of two equal counts; certified exactly as odd K, against brute force over the output laws."""

import math

import mpmath
import numpy as np
import pytest
from scipy.optimize import linprog

from darrm_opt.certify.pairs import certify_pairs
from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import mechanism
from darrm_opt.mechanisms.vote_samplers import BinarySampler
from darrm_opt.model.neighbours import PateParams, pate_delta, signs, tie_index
from darrm_opt.model.objective import expected_error, expected_pmf
from darrm_opt.optimize.pate_setting import solve_pate
from darrm_opt.privacy import gnmax


def _p1(K, gamma, dps=40):
    """Pr[answer = 1 | L = l] from the rule itself: the majority with probability γ(l), else a fair coin;
    at a tie the majority is itself a fair coin."""
    with mpmath.workdps(dps):
        out = []
        for l in range(K + 1):
            g = mpmath.mpf(float(gamma[l]))
            maj = mpmath.mpf(1) if 2 * l > K else mpmath.mpf(0) if 2 * l < K else mpmath.mpf(1) / 2
            out.append(g * maj + (1 - g) / 2)
        return out


def _brute_force_ok(params, gamma):
    K = params.K
    p1 = _p1(K, gamma)
    with mpmath.workdps(40):
        E, d = mpmath.exp(mpmath.mpf(params.epsilon)), mpmath.mpf(params.delta)
        return all(p1[a] <= E * p1[b] + d and 1 - p1[a] <= E * (1 - p1[b]) + d
                   for a in range(K + 1) for b in (a - 1, a + 1) if 0 <= b <= K)


def _brute_error(K, gamma, prior):
    """Pr[answer ≠ 1] − Pr[uniformly tie-broken majority ≠ 1] under the prior's E[α_l] (label 1)."""
    alpha = expected_pmf(K, prior)
    p1 = np.array([float(x) for x in _p1(K, gamma)])
    maj = np.where(2 * np.arange(K + 1) > K, 1.0, np.where(2 * np.arange(K + 1) < K, 0.0, 0.5))
    return float(alpha @ (1 - p1) - alpha @ (1 - maj))


def test_signs_and_tie():
    assert signs(4).tolist() == [-1, -1, 0, 1, 1] and tie_index(4) == 2
    assert signs(5).tolist() == [-1, -1, -1, 1, 1, 1] and tie_index(5) is None


@pytest.mark.parametrize("K, eps, delta", [(2, 0.5, 1e-3), (4, 0.3, 0.0), (10, 0.2676, 3e-4), (20, 1.0, 1e-5)])
def test_even_k_lp_is_certified_and_optimal(K, eps, delta):
    params = PateParams(K, eps, delta)
    sol = solve_pate(params)
    g = np.asarray(sol.gamma)
    assert g[K // 2] == 0.0 and np.array_equal(g, g[::-1])
    assert sol.certificate.certified and _brute_force_ok(params, g)
    assert sol.expected_error == pytest.approx(_brute_error(K, g, params.prior), abs=1e-12)
    # the unrestricted LP over all K + 1 values (no symmetry, γ(K/2) free: it has no effect) does no better
    E = math.exp(eps)
    s = signs(K)
    rows = []
    for a in range(K + 1):
        for b in (a - 1, a + 1):
            if 0 <= b <= K:
                for sign in (1, -1):
                    r = np.zeros(K + 1)
                    r[a] += sign * s[a]
                    r[b] -= sign * E * s[b]
                    rows.append(r)
    # the objective symmetrised (the error of a table and of its mirror image averaged): minimise
    # Σ_l ¼ (α_{K−l} − α_l) s_l γ(l), whose value at a symmetric γ is the error minus ½ Σ_{l>K/2} (α_l − α_{K−l})
    alpha = expected_pmf(K, params.prior)
    c = 0.25 * (alpha[::-1] - alpha) * s
    res = linprog(c, A_ub=np.array(rows), b_ub=np.full(len(rows), params.bound), bounds=(0, 1), method="highs")
    hi = np.arange(K + 1) > K / 2
    total = 0.5 * float((alpha - alpha[::-1])[hi].sum())
    assert sol.expected_error == pytest.approx(total + res.fun, abs=1e-7)
    # the table sits on the bound: raising any free value off 1 breaks a row
    assert not all(_brute_force_ok(params, np.minimum(1, g + 1e-4 * (np.abs(np.arange(K + 1) - K / 2) ==
                                                                    abs(l - K / 2))))
                   for l in range(K // 2 + 1, K + 1) if g[l] < 1 - 1e-4)


def test_even_k_certificate_agrees_with_brute_force_on_random_tables():
    rng = np.random.default_rng(22)
    verdicts = []
    for _ in range(120):
        K = int(rng.choice([2, 4, 6, 10]))
        eps, delta = float(rng.uniform(0.05, 2.0)), float(rng.choice([0.0, 1e-3, 0.05]))
        g = rng.uniform(0, 1, K + 1) ** float(rng.uniform(0.5, 4))
        g[K // 2] = 0.0
        params = PateParams(K, eps, delta)
        ok = certify_pairs(params, g).certified
        assert ok == _brute_force_ok(params, g)
        need = pate_delta(g, eps)
        if need > 1e-9:
            assert not _brute_force_ok(PateParams(K, eps, need * (1 - 1e-6)), g)
        verdicts.append(ok)
    assert 10 < sum(verdicts) < 110


def test_even_k_gnmax_is_feasible_and_not_better():
    params = PateParams(10, 0.5, 1e-4)
    cal = gnmax.calibrate_gnmax_one_bit(0.5, 1e-4, 10)
    gn = gnmax.gnmax_gamma(10, cal.sigma)
    assert gn[5] == 0.0 and _brute_force_ok(params, gn)
    assert solve_pate(params).expected_error <= expected_error(gn, params.prior) + 1e-12


def test_even_k_table_states_a_zero_tie_and_samples_a_fair_coin():
    m = mechanism("darrm-pate")
    params = PateParams(4, 0.4, 1e-3)
    g = np.asarray(solve_pate(params).gamma)
    table = m.certify_table(params, g)
    assert table.gamma[2] == 0.0
    bad = g.copy()
    bad[2] = 0.5
    with pytest.raises(InvalidParameter, match="gamma"):
        m.certify_table(params, bad)
    # the sampler answers a tie by a fair coin (whatever γ(K/2) it is given)
    smp = BinarySampler([1.0, 1.0, 1.0, 1.0, 1.0])
    assert smp.probability_of_one(2) == 0.5
    votes = np.array([[1, 1, 0, 0]] * 4000, dtype=np.uint8)
    ones = int(smp(votes).sum())
    assert 1800 < ones < 2200  # Binomial(4000, ½): 6.3 standard deviations either side
    assert smp(np.array([[1, 1, 1, 0]] * 50, dtype=np.uint8)).tolist() == [1] * 50


@pytest.mark.slow  # a CLI subprocess
def test_solve_even_k_in_the_pate_setting_cli():
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    res = subprocess.run([sys.executable, "-m", "darrm_opt", "solve", "--K", "10", "--teachers", "disjoint-nonprivate",
                          "--target-epsilon", "0.3", "--delta", "1e-5", "--format", "json"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["kind"] == "darrm-pate" and len(doc["gamma"]) == 11 and doc["gamma"][5] == 0.0
    assert doc["certificate"]["certified"] and _brute_force_ok(PateParams(10, 0.3, 1e-5), doc["gamma"])
    # the shared setting still needs an odd K (DaRRM's Lemma 3.4 setting)
    bad = subprocess.run([sys.executable, "-m", "darrm_opt", "solve", "--K", "10", "--m", "3"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert bad.returncode == 2 and "odd" in bad.stderr and "Traceback" not in bad.stderr
