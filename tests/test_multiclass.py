"""Multi-class DaRRM (PATE setting): pair types, LP rows, certificate and accuracy against brute force over
every histogram and every neighbour; C = 2 against an independent binary LP; GNMax baseline; the CLI."""

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize, special, stats
from typer.testing import CliRunner

from darrm_opt.certify.multiclass import certify_multiclass, exact_hockey_stick, exp_lower, round_down_certified
from darrm_opt.cli import app
from darrm_opt.errors import InvalidParameter
from darrm_opt.experiments.multiclass_compare import (
    best_confident_gnmax,
    calibrate_gaussian_sigma,
    confident_terms,
    gaussian_delta_mp,
    gnmax_accuracy,
    gnmax_error,
    rdp_sigma,
)
from darrm_opt.model.multiclass import (
    MulticlassParams,
    MulticlassPrior,
    accuracy_weights,
    canonical,
    expected_accuracy,
    expected_error,
    hockey_stick,
    output_distribution,
    pair_rows,
    pair_type_of,
    pair_types,
    reachable_gaps,
    top_structure,
    type_hockey_sticks,
)
from darrm_opt.optimize.multiclass import scale_into_bound, solve_multiclass
from darrm_opt.privacy.gnmax import gnmax_output_probabilities, prob_answered

SMALL = [(K, C) for K in range(1, 8) for C in range(2, 5)]


def histograms(K, C):
    for combo in itertools.combinations_with_replacement(range(C), K):
        h = [0] * C
        for c in combo:
            h[c] += 1
        yield h


def neighbours(h):
    for a, b in itertools.permutations(range(len(h)), 2):
        if h[a]:
            h2 = list(h)
            h2[a] -= 1
            h2[b] += 1
            yield h2


def brute_max_divergence(K, C, gamma, E):
    return max((hockey_stick(output_distribution(h, gamma), output_distribution(h2, gamma), E)
                for h in histograms(K, C) for h2 in neighbours(h)), default=0.0)


def brute_prob(h, prior, K, C):
    if prior.kind == "dirichlet":
        al = [prior.a] + [prior.b] * (C - 1)
        lp = (special.gammaln(K + 1) - sum(special.gammaln(x + 1) for x in h) + special.gammaln(sum(al))
              - special.gammaln(K + sum(al)) + sum(special.gammaln(x + a) - special.gammaln(a) for x, a in zip(h, al)))
        return math.exp(lp)
    q = 0.5 * (prior.a + prior.b)
    return stats.multinomial.pmf(h, K, [q] + [(1 - q) / (C - 1)] * (C - 1))


# ------------------------------------------------------------------------------------------------------
# pair types and reachable gaps
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("K,C", SMALL + [(9, 5), (10, 3), (12, 4)])
def test_pair_types_equal_brute_force(K, C):
    brute = {canonical(pt) for h in histograms(K, C) for h2 in neighbours(h)
             if (pt := pair_type_of(h, h2)) is not None}
    assert set(pair_types(K, C)) == brute
    gaps = np.zeros(K + 1, dtype=bool)
    for h in histograms(K, C):
        gaps[top_structure(h)[0]] = True
    np.testing.assert_array_equal(reachable_gaps(K, C), gaps)


def test_two_classes_are_the_binary_neighbours():
    # C = 2, K odd: L ↔ L + 1 means gap g ↔ g + 2 (same top) and the flip at g = 1 (k = 0); no ties
    types = set(pair_types(7, 2))
    assert types == {(1, 1, 3, 1, 1), (3, 1, 5, 1, 1), (5, 1, 7, 1, 1), (1, 1, 1, 1, 0)}
    assert list(np.flatnonzero(reachable_gaps(7, 2))) == [1, 3, 5, 7]
    assert (2, 1, 0, 2, 1) in set(pair_types(8, 2))  # K even: (5, 3) ↔ (4, 4)


# ------------------------------------------------------------------------------------------------------
# divergences, rows and certificate against brute force
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("K,C", [(3, 3), (5, 4), (6, 3), (7, 2), (7, 4)])
def test_type_divergences_equal_brute_force(K, C):
    rng = np.random.default_rng(K * 10 + C)
    E = math.exp(0.4)
    types = pair_types(K, C)
    for _ in range(3):
        gamma = rng.random(K + 1)
        assert type_hockey_sticks(types, gamma, C, E).max() == pytest.approx(
            brute_max_divergence(K, C, gamma, E), abs=1e-14)


@pytest.mark.parametrize("K,C", [(4, 3), (6, 4), (7, 2)])
def test_rows_are_the_divergence_bound(K, C):
    """max over rows of (Aγ − b)⁺ equals (max divergence − δ)⁺ for random γ: the linearisation is exact."""
    rng = np.random.default_rng(7)
    E, delta = math.exp(0.3), 0.01
    types = pair_types(K, C)
    A = np.concatenate([pair_rows(pt, C, E, delta, K)[0] for pt in types])
    b = np.concatenate([pair_rows(pt, C, E, delta, K)[1] for pt in types])
    for _ in range(20):
        gamma = rng.random(K + 1)
        lhs = max(0.0, float((A @ gamma - b).max()))
        rhs = max(0.0, type_hockey_sticks(types, gamma, C, E).max() - delta)
        assert lhs == pytest.approx(rhs, abs=1e-13)


@pytest.mark.parametrize("K,C,eps,delta", [(5, 3, 0.5, 1e-3), (6, 4, 1.0, 0.0), (7, 3, 0.2, 1e-5), (7, 2, 0.3, 1e-4)])
def test_solution_is_private_by_brute_force_and_tight(K, C, eps, delta):
    sol = solve_multiclass(MulticlassParams(K, C, eps, delta))
    assert sol.certificate.certified
    gamma = np.array(sol.gamma)
    assert brute_max_divergence(K, C, gamma, math.exp(eps)) <= delta + 1e-15
    assert sol.certificate.max_hockey_stick == pytest.approx(
        brute_max_divergence(K, C, gamma, math.exp(eps)), abs=1e-12)
    # raising the table at the worst type breaks privacy: the optimum is tight
    worst = sol.certificate.worst_type
    bumped = gamma.copy()
    bumped[[worst[0], worst[2]]] = np.minimum(1.0, bumped[[worst[0], worst[2]]] + 1e-3)
    if not np.array_equal(bumped, gamma):
        assert not certify_multiclass(sol.params, bumped).certified


def test_certificate_decides_at_float_resolution_exactly():
    """δ one ulp below / above the exact divergence: the exact re-check rejects / certifies."""
    base = MulticlassParams(7, 3, 0.5, 1e-3)
    gamma = np.array(solve_multiclass(base).gamma)
    E = exp_lower(0.5)
    D = max(exact_hockey_stick(o, gamma, 3, E) for pt in pair_types(7, 3) for o in (pt, pt.reversed()))
    below, above = math.nextafter(float(D), 0.0), math.nextafter(float(D), 1.0)
    while Fraction(below) >= D:
        below = math.nextafter(below, 0.0)
    while Fraction(above) < D:
        above = math.nextafter(above, 1.0)
    rejected = certify_multiclass(MulticlassParams(7, 3, 0.5, below), gamma)
    accepted = certify_multiclass(MulticlassParams(7, 3, 0.5, above), gamma)
    assert not rejected.certified and rejected.exact_checked > 0
    assert accepted.certified and accepted.exact_checked > 0


@pytest.mark.parametrize("delta", [0.0, 1e-3])
def test_scaling_absorbs_a_violation(delta):
    """A table certified at δ = 0.05 violates a smaller δ; scaled by ρ/(ρ + excess) it is certified."""
    loose = solve_multiclass(MulticlassParams(9, 4, 0.7, 0.05))
    strict = MulticlassParams(9, 4, 0.7, delta)
    cert = certify_multiclass(strict, loose.gamma)
    assert not cert.certified and cert.max_hockey_stick > delta
    assert certify_multiclass(strict, scale_into_bound(strict, np.array(loose.gamma), cert.max_hockey_stick)).certified


def test_pure_dp_table_is_useful():
    """δ = 0: the LP is tightened by less than its smallest right-hand side, so γ is far from 0."""
    sol = solve_multiclass(MulticlassParams(60, 5, 0.5, 0.0))
    assert sol.certificate.certified and sol.certificate.max_hockey_stick == 0.0
    assert sol.expected_accuracy > 0.95


def test_exp_lower_is_a_lower_bound():
    for eps in (1e-6, 0.1, 0.5, 1.0, 7.3):
        lo = exp_lower(eps)
        assert lo < Fraction(math.exp(eps)) * (1 + Fraction(1, 10**15))
        assert float(lo) == pytest.approx(math.exp(eps), rel=1e-15)


def test_rounded_table_is_certified():
    params = MulticlassParams(25, 4, 0.5, 1e-5)
    sol = solve_multiclass(params)
    shown, cert = round_down_certified(params, sol.gamma, 6)
    assert cert.certified and all(abs(a - b) < 1e-4 for a, b in zip(shown, sol.gamma))


# ------------------------------------------------------------------------------------------------------
# the objective
# ------------------------------------------------------------------------------------------------------
PRIORS = [MulticlassPrior(), MulticlassPrior("iid-uniform", 0.2, 0.7), MulticlassPrior("dirichlet", 2.5, 0.6)]


@pytest.mark.parametrize("K,C", [(1, 2), (4, 3), (6, 4), (7, 2), (5, 5)])
@pytest.mark.parametrize("prior", PRIORS, ids=lambda p: p.spec)
def test_expected_accuracy_equals_brute_force(K, C, prior):
    rng = np.random.default_rng(K + C)
    gamma = rng.random(K + 1)
    brute = sum(brute_prob(h, prior, K, C) * output_distribution(h, gamma)[0] for h in histograms(K, C))
    assert expected_accuracy(gamma, K, C, prior) == pytest.approx(brute, abs=1e-13)


@pytest.mark.parametrize("K,C", [(5, 3), (7, 4), (6, 2)])
def test_errors_are_one_minus_accuracies(K, C):
    prior = MulticlassPrior("dirichlet", 2.0, 0.5)
    gamma = np.random.default_rng(3).random(K + 1)
    assert expected_error(gamma, K, C, prior) == pytest.approx(1 - expected_accuracy(gamma, K, C, prior), abs=1e-14)
    assert gnmax_error(K, C, 1.3, prior) == pytest.approx(1 - gnmax_accuracy(K, C, 1.3, prior), abs=1e-12)


def test_accuracy_weights_at_extremes():
    # γ ≡ 1 is plurality with random tie-breaking; γ ≡ 0 is a uniform guess
    K, C, prior = 40, 6, MulticlassPrior("iid-uniform", 0.1, 0.5)
    w = accuracy_weights(K, C, prior)
    assert 1 / C + w.sum() > 1 / C and 1 / C + w.sum() < 1
    assert expected_accuracy(np.zeros(K + 1), K, C, prior) == pytest.approx(1 / C)


# ------------------------------------------------------------------------------------------------------
# C = 2 reproduces the binary PATE-setting table (an independent LP written over L)
# ------------------------------------------------------------------------------------------------------
def binary_pate_optimum(K, eps, delta, q=0.75):
    """max Σ_L Bin(K, q)(L) P_1(L) over symmetric γ(|2L − K|), P_1(L) = ½ + ½ sign(2L − K) γ, subject to
    P_o(L) ≤ e^ε P_o(L′) + δ for |L − L′| = 1 and both outputs o."""
    E = math.exp(eps)
    alpha = stats.binom.pmf(np.arange(K + 1), K, q)

    def p1(L):  # (constant, coefficient vector over gaps)
        c = np.zeros(K + 1)
        c[abs(2 * L - K)] = 0.5 * np.sign(2 * L - K)
        return 0.5, c

    A, b = [], []
    for L in range(K):
        for x, y in ((L, L + 1), (L + 1, L)):
            (cx, vx), (cy, vy) = p1(x), p1(y)
            A += [vx - E * vy, -vx + E * vy]
            b += [delta - cx + E * cy, delta - (1 - cx) + E * (1 - cy)]
    obj = sum(alpha[L] * p1(L)[1] for L in range(K + 1))
    res = optimize.linprog(-obj, A_ub=np.array(A), b_ub=np.array(b), bounds=(0, 1), method="highs")
    return 0.5 + float(-res.fun)


@pytest.mark.parametrize("K,eps,delta", [(11, 0.5, 1e-5), (15, 0.2676, 3e-4), (10, 1.0, 0.0), (25, 0.1, 1e-5)])
def test_two_classes_reproduce_the_binary_pate_table(K, eps, delta):
    sol = solve_multiclass(MulticlassParams(K, 2, eps, delta))
    assert sol.expected_accuracy == pytest.approx(binary_pate_optimum(K, eps, delta), abs=1e-8)


# ------------------------------------------------------------------------------------------------------
# GNMax baseline
# ------------------------------------------------------------------------------------------------------
def test_gnmax_accuracy_equals_per_histogram_quadrature():
    K, C, sigma, prior = 6, 3, 1.7, MulticlassPrior("iid-uniform", 0.3, 0.8)
    brute = sum(brute_prob(h, prior, K, C) * gnmax_output_probabilities(h, sigma)[0] for h in histograms(K, C))
    assert gnmax_accuracy(K, C, sigma, prior) == pytest.approx(brute, abs=1e-10)


def test_confident_gnmax_accuracy_equals_per_histogram_quadrature():
    K, C, s1, s2, T, prior = 6, 3, 2.0, 1.7, 3.2, MulticlassPrior("iid-uniform", 0.3, 0.8)
    brute = 0.0
    for h in histograms(K, C):
        answered = prob_answered(max(h), T, s1)
        brute += brute_prob(h, prior, K, C) * (answered * gnmax_output_probabilities(h, s2)[0] + (1 - answered) / C)
    cm, pm = confident_terms(K, C, s2, prior)
    assert pm.sum() == pytest.approx(1.0, abs=1e-14)
    assert 1 / C + special.ndtr((np.arange(K + 1) - T) / s1) @ (cm - pm / C) == pytest.approx(brute, abs=1e-10)


def test_confident_gnmax_at_equal_budget_is_not_better_than_darrm():
    params = MulticlassParams(20, 4, 0.5, 1e-5)
    sigma = calibrate_gaussian_sigma(0.5, 1e-5)
    conf = best_confident_gnmax(20, 4, sigma, params.prior)
    assert 1 / conf.sigma1**2 + 2 / conf.sigma2**2 == pytest.approx(2 / sigma**2)
    assert conf.accuracy <= solve_multiclass(params).expected_accuracy


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0])
def test_gaussian_calibration_is_exact_and_beats_rdp(eps):
    sigma = calibrate_gaussian_sigma(eps, 1e-5)
    assert gaussian_delta_mp(eps, sigma) <= 1e-5
    assert gaussian_delta_mp(eps, sigma * (1 - 1e-9)) > 1e-5
    assert sigma < rdp_sigma(eps, 1e-5)
    assert calibrate_gaussian_sigma(eps, 0.0) is None


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0])
def test_darrm_beats_gnmax_at_equal_privacy(eps):
    params = MulticlassParams(31, 5, eps, 1e-5)
    acc = solve_multiclass(params).expected_accuracy
    assert acc >= gnmax_accuracy(31, 5, calibrate_gaussian_sigma(eps, 1e-5), params.prior)


# ------------------------------------------------------------------------------------------------------
# parameters and the CLI
# ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,name", [
    ({"K": 0, "C": 3, "epsilon": 1.0}, "K"), ({"K": 5, "C": 1, "epsilon": 1.0}, "classes"),
    ({"K": 5, "C": 3, "epsilon": 0.0}, "target_epsilon"), ({"K": 5, "C": 3, "epsilon": 1.0, "delta": 1.0}, "delta"),
])
def test_bad_parameters_name_the_parameter(kwargs, name):
    with pytest.raises(InvalidParameter) as exc:
        MulticlassParams(**kwargs)
    assert exc.value.parameter == name


@pytest.mark.parametrize("spec", ["dirichlet:0,1", "iid-uniform:0.9,0.2", "beta:1,2", "dirichlet:1"])
def test_bad_priors(spec):
    with pytest.raises(InvalidParameter):
        MulticlassPrior.parse(spec)


def test_cli_json(tmp_path):
    out = tmp_path / "mc.json"
    r = CliRunner().invoke(app, ["solve", "--K", "20", "--classes", "4", "--teachers", "disjoint-nonprivate",
                                 "--target-epsilon", "0.5", "--delta", "1e-5", "--format", "json", "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert len(doc["gamma"]) == 21 and doc["classes"] == 4 and doc["teachers"] == "disjoint-nonprivate"
    assert doc["certificate"]["certified"] and doc["certificate"]["max_hockey_stick"] <= 1e-5
    assert doc["gamma"][19] == 0.0 and 19 not in doc["reachable_gaps"]  # gap K − 1 never occurs
    assert doc["comparison"]["darrm_error"] < doc["comparison"]["gnmax_error"]
    assert doc["expected_accuracy"] == pytest.approx(1 - doc["comparison"]["darrm_error"])
    assert doc["expected_error"] == doc["comparison"]["darrm_error"]


@pytest.mark.parametrize("args,needle", [
    (["--classes", "3"], "target-epsilon"),
    (["--classes", "3", "--target-epsilon", "1", "--teachers", "private"], "teachers"),
    (["--classes", "1", "--target-epsilon", "1"], "classes"),
    (["--classes", "3", "--target-epsilon", "1", "--prior", "dirichlet:-1,1"], "prior"),
    ([], "invalid m"),
])
def test_cli_bad_input_exit_2(args, needle):
    r = CliRunner().invoke(app, ["solve", "--K", "9", *args])
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output


def test_cli_table_view_is_certified_as_printed():
    r = CliRunner().invoke(app, ["solve", "--K", "15", "--classes", "3", "--target-epsilon", "1", "--delta", "1e-6",
                                 "--no-baselines"])
    assert r.exit_code == 0, r.output
    assert "CERTIFIED" in r.output and "NOT CERTIFIED" not in r.output
    assert "(unreachable" in r.output  # gap K − 1 = 14


def test_pate_scale_target():
    """K = 250, C = 10 (the issue's target): certified, and at least as accurate as GNMax at ε = 0.1."""
    params = MulticlassParams(250, 10, 0.1, 1e-5)
    sol = solve_multiclass(params)
    assert sol.certificate.certified and sol.certificate.types_checked == 2 * len(pair_types(250, 10))
    assert sol.expected_accuracy >= gnmax_accuracy(250, 10, calibrate_gaussian_sigma(0.1, 1e-5), params.prior)


def test_tiers_resolve_weights_far_below_the_largest():
    """Under a concentrated prior most weights are < 1e-8 of the largest; one LP leaves those γ at an
    arbitrary vertex, the tiered solve maximises them without giving up the large ones."""
    from darrm_opt import solvers
    from darrm_opt.optimize.multiclass import build_lp, solve_in_tiers

    params = MulticlassParams(120, 10, 1.0, 1e-5)
    lp, _ = build_lp(params, 1e-5 - 1e-9)
    w = -lp.c
    one = np.clip(solvers.get_backend("highs").solve(lp).x, 0, lp.ub)
    tiered, _ = solve_in_tiers(solvers.get_backend("highs"), lp)
    big = np.abs(w) >= 1e-8 * np.abs(w).max()
    small = ~big & (np.abs(w) >= 1e-15 * np.abs(w).max())
    assert w[big] @ tiered[big] >= w[big] @ one[big] - 1e-12 * np.abs(w).max()
    assert w[small] @ tiered[small] > w[small] @ one[small]
    assert (lp.A_ub @ tiered - lp.b_ub).max() <= 1e-9
