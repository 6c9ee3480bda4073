"""Top-two multi-class rule: pair types, state law and certified tables against brute force on small cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from darrm_opt.certify.top2 import certify_top2
from darrm_opt.errors import InvalidParameter
from darrm_opt.model import top2
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior, hockey_stick
from darrm_opt.optimize.multiclass import solve_multiclass
from darrm_opt.optimize.top2 import solve_top2


def histograms(K: int, C: int):
    for bars in itertools.combinations(range(K + C - 1), C - 1):
        prev, out = -1, []
        for b in bars:
            out.append(b - prev - 1)
            prev = b
        out.append(K + C - 2 - prev)
        yield np.array(out)


def moves(K: int, C: int):
    for h in histograms(K, C):
        for a in range(C):
            if h[a] == 0:
                continue
            for b in range(C):
                if a != b:
                    h2 = h.copy()
                    h2[a] -= 1
                    h2[b] += 1
                    yield h, h2


def brute_types(K: int, C: int, cap: int) -> set[tuple[int, ...]]:
    out = set()
    for h, h2 in moves(K, C):
        t = top2.pair_type_of(h, h2, cap)
        if t is not None:
            out.add(tuple(int(x) for x in t))
    return out


@pytest.mark.parametrize("K", range(1, 10))
@pytest.mark.parametrize("C", [3, 4, 5])
def test_pair_types_match_brute_force(K: int, C: int) -> None:
    for cap in (1, 2, 12):
        got = {tuple(int(x) for x in r) for r in top2.pair_types(K, C, cap)}
        assert got == brute_types(K, C, cap)


@pytest.mark.parametrize("K,C,cap", [(14, 3, 3), (16, 4, 5), (13, 5, 4), (20, 3, 6)])
def test_pair_types_match_brute_force_larger_gaps(K: int, C: int, cap: int) -> None:
    """Gaps ≥ 4 (the affine extension of the shape types) are exercised."""
    got = {tuple(int(x) for x in r) for r in top2.pair_types(K, C, cap)}
    assert got == brute_types(K, C, cap)


def brute_law(K: int, C: int, cap: int, prior: MulticlassPrior):
    """Pr[s], A_T, A_R by summing over every histogram with the true class y = 0."""
    Y, R = prior.count_pmfs(K, C)
    prob, mT, mR = (np.zeros((K + 1, cap + 1)) for _ in range(3))
    Z = 0.0
    for h in histograms(K, C):
        w = Y[h[0]] * np.prod(R[h[1:]])
        Z += w
        g1, g2, T, Rs = top2.structure(h)
        s = (g1, min(g2, cap))
        prob[s] += w
        mT[s] += w * (1 - (1 / len(T) if 0 in T else 0))
        mR[s] += w * (1 - (1 / len(Rs) if 0 in Rs else 0))
    return prob / Z, mT / Z, mR / Z


@pytest.mark.parametrize("K,C,cap", [(7, 3, 2), (9, 4, 3), (8, 5, 1), (10, 3, 12)])
@pytest.mark.parametrize("prior", ["paper", "dirichlet:2,0.5"])
def test_state_law_matches_brute_force(K: int, C: int, cap: int, prior: str) -> None:
    law = top2.state_law(K, C, cap, MulticlassPrior.parse(prior))
    prob, mT, mR = brute_law(K, C, cap, MulticlassPrior.parse(prior))
    np.testing.assert_allclose(law.prob, prob, atol=1e-14)
    np.testing.assert_allclose(law.miss_T, mT, atol=1e-14)
    np.testing.assert_allclose(law.miss_R, mR, atol=1e-14)


@pytest.mark.parametrize("K,C,cap,eps,delta", [(9, 3, 2, 1.0, 1e-5), (8, 4, 12, 0.5, 0.0), (7, 5, 1, 2.0, 1e-3)])
def test_certified_table_brute_force_divergence_within_delta(K: int, C: int, cap: int, eps: float,
                                                             delta: float) -> None:
    """The optimal table's worst hockey stick over every neighbouring pair of histograms is ≤ δ, and the
    LP is tight (a larger table is not private)."""
    params = top2.Top2Params(K, C, eps, delta, "paper", cap)
    sol = solve_top2(params)
    assert sol.certificate.certified
    E = math.exp(eps)
    worst = max(hockey_stick(top2.output_distribution(h, sol.gamma, cap), top2.output_distribution(h2, sol.gamma, cap),
                             E) for h, h2 in moves(K, C))
    assert worst <= delta
    assert worst >= delta - 1e-6  # the optimum spends the budget
    # the expected error agrees with brute force
    prob, mT, mR = brute_law(K, C, cap, params.prior)
    p, q = top2.split(sol.gamma, K, cap)
    err = ((1 - p - q) * (1 - 1 / C) * prob + p * mT + q * mR).sum()
    assert sol.expected_error == pytest.approx(err, abs=1e-13)


def test_top2_never_worse_than_plurality_rule() -> None:
    """The rule of model.multiclass is the case q ≡ 0 (p(g, ·) = γ(g)), so the top-two optimum is at most its error;
    at K = 30, C = 4, ε = 1 it is strictly better."""
    for prior in ("paper", "dirichlet:9,0.3333333333333333"):
        a = solve_top2(top2.Top2Params(30, 4, 1.0, 1e-5, prior, 6)).expected_error
        b = solve_multiclass(MulticlassParams(30, 4, 1.0, 1e-5, prior)).expected_error
        assert a < b * 0.95


def test_certificate_rejects_an_inflated_table() -> None:
    params = top2.Top2Params(9, 3, 1.0, 1e-5, "paper", 2)
    x = np.array(solve_top2(params).gamma)
    p, q = top2.split(x, 9, 2)
    p = np.minimum(p * 1.02 + 0.01, 1.0) * (p > 0)
    y = np.concatenate([p.ravel(), np.minimum(q, 1 - p).ravel()])
    assert not certify_top2(params, y).certified


@pytest.mark.parametrize("field,kwargs", [("classes", {"C": 2}), ("gap_cap", {"cap": 0}), ("classes", {"C": 17})])
def test_bad_parameters_name_the_field(field: str, kwargs: dict) -> None:
    base = {"K": 9, "C": 3, "epsilon": 1.0, "delta": 1e-5}
    with pytest.raises(InvalidParameter) as e:
        top2.Top2Params(**{**base, **kwargs})
    assert field in str(e.value)


def test_table_rules() -> None:
    params = top2.Top2Params(5, 3, 1.0, 1e-5, "paper", 1)
    n = 2 * params.states
    with pytest.raises(InvalidParameter):
        certify_top2(params, np.zeros(n - 1))
    bad = np.zeros(n)
    bad[params.states] = 0.5  # q(0, 0)
    with pytest.raises(InvalidParameter, match="q"):
        certify_top2(params, bad)


def test_sampler_laws_are_the_rule_and_its_draws_follow_them() -> None:
    from fractions import Fraction

    from darrm_opt.mechanisms import mechanism

    params = top2.Top2Params(9, 4, 1.0, 1e-5, "paper", 2)
    m = mechanism("darrm-multiclass-top2")
    table = m.solve(params, solver="highs").table
    sampler = m.sampler(table, np.random.default_rng(7).bytes)
    for h in histograms(9, 4):
        law = sampler.distribution(h)
        assert sum(law) == 1 and min(law) >= 0
        np.testing.assert_allclose([float(x) for x in law], top2.output_distribution(h, table.gamma, 2), atol=1e-15)
    # a runner-up state where all three outcomes (top, runner-up, uniform) have mass
    h = np.array([[4, 3, 1, 1]])
    law = np.array([float(x) for x in sampler.distribution(h[0])])
    assert law[1] > law[2] and law[0] > law[1]
    n = 20000
    draws = sampler.answers_from_histograms(np.repeat(h, n, axis=0))
    freq = np.bincount(draws, minlength=4) / n
    assert np.all(np.abs(freq - law) <= 5 * np.sqrt(law * (1 - law) / n) + 1e-12)
    assert Fraction(1) == sum(sampler.distribution([9, 0, 0, 0]))


def test_profile_is_certified_and_composes() -> None:
    from darrm_opt.mechanisms import mechanism

    params = top2.Top2Params(9, 3, 0.5, 1e-6, "paper", 2)
    m = mechanism("darrm-multiclass-top2")
    table = m.solve(params, solver="highs").table
    assert table.profile is not None
    assert table.profile.delta(0.5) <= 1e-6
    # the profile at ε′ = 0 is the largest total-variation distance over the brute-force pairs
    law = top2.output_distribution
    tv = max(0.5 * np.abs(law(h, table.gamma, 2) - law(h2, table.gamma, 2)).sum() for h, h2 in moves(9, 3))
    assert table.profile.delta(0.0) == pytest.approx(tv, abs=1e-9)
    assert m.check_profile(params, np.asarray(table.gamma), table.profile, table.certificate).valid


def test_plan_cli_offers_a_top2_table_as_json(tmp_path) -> None:
    import json
    import subprocess
    import sys

    out = tmp_path / "plan.json"
    r = subprocess.run([sys.executable, "-m", "darrm_opt", "plan", "--K", "9", "--classes", "3", "--queries", "4",
                        "--budget", "2,1e-5", "--teachers", "disjoint-nonprivate", "--mechanism",
                        "darrm-multiclass-top2", "--format", "json", "--quiet", "--no-baselines", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == "darrm-multiclass-top2" and doc["gap_cap"] == 12 and doc["certificate"]["certified"]
    assert len(doc["gamma"]) == 2 * 10 * 13 and doc["expected_error"] < 0.5
    # the table file verifies
    v = subprocess.run([sys.executable, "-m", "darrm_opt", "verify", str(out)], capture_output=True, text=True,
                       timeout=600)
    assert v.returncode == 0, v.stdout + v.stderr
    # bad input: a clear error naming the parameter, non-zero exit
    bad = subprocess.run([sys.executable, "-m", "darrm_opt", "plan", "--K", "9", "--classes", "2", "--queries", "4",
                          "--budget", "2,1e-5", "--teachers", "disjoint-nonprivate", "--mechanism",
                          "darrm-multiclass-top2", "--quiet"], capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0
