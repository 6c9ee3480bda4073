"""GNMax and Confident-GNMax as kinds of release: exact discrete Gaussian sampling, ties, errors, certificate,
profile, documents, the ledger, and planning (σ calibrated on the ledger's exact composition)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scripted_bytes import chi2_pvalue, seeded

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import mechanism, plan_job, table_document, table_from_document
from darrm_opt.mechanisms.vote_samplers import GnmaxSampler
from darrm_opt.model.gnmax import (
    ConfidentGnmaxParams,
    GnmaxParams,
    abstain_probability,
    binary_gamma,
    confident_error,
    gnmax_error,
)
from darrm_opt.model.multiclass import MulticlassPrior
from darrm_opt.model.params import Prior
from darrm_opt.planning.job import Job
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.profile import profile_from_dict

# --- the discrete Gaussian sampler ----------------------------------------------------------------------

# --- GNMax answers ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("h, sigma", [((2, 2, 0), 0.5), ((3, 1, 1, 1), 0.8), ((1, 1, 1), 0.3), ((4, 0), 1.5)])
def test_gnmax_answers_follow_their_law_and_ties_are_uniform(h, sigma):
    C, K = len(h), sum(h)
    s = GnmaxSampler(K, C, sigma, seeded(11))
    law = np.array(s.distribution(h))
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    out = s.answers_from_histograms(np.tile(np.array(h), (40_000, 1)))
    counts = np.bincount(out, minlength=C)
    assert chi2_pvalue(counts, law) > 1e-3
    top = [c for c in range(C) if h[c] == max(h)]
    if len(top) > 1:  # the law itself is symmetric over tied classes
        assert np.ptp(law[top]) < 1e-12


def test_ties_of_noisy_counts_are_split_uniformly():
    """σ tiny: the noise is almost always 0, so (2, 2, 0) is a tie of the noisy counts too and each of the
    two top classes must come out half of the time."""
    s = GnmaxSampler(4, 3, 0.15, seeded(12))
    out = s.answers_from_histograms(np.tile([2, 2, 0], (20_000, 1)))
    counts = np.bincount(out, minlength=3)
    assert counts[2] == 0
    assert stats.binomtest(int(counts[0]), 20_000, 0.5).pvalue > 1e-3


def test_sampler_checks_votes():
    s = GnmaxSampler(3, 2, 1.0, seeded(1))
    with pytest.raises(InvalidParameter, match="votes"):
        s([[0, 1, 2]])
    with pytest.raises(InvalidParameter, match="votes"):
        s([[0, 1]])
    assert s([[1, 1, 1]]).dtype == np.int16


def test_confident_abstains_as_its_law_says():
    s = GnmaxSampler(6, 3, 1.0, seeded(13), threshold=5.0, sigma1=1.5)
    h = (4, 1, 1)
    law = np.array(s.distribution(h))
    out = s.answers_from_histograms(np.tile(h, (40_000, 1)))
    counts = np.append(np.bincount(out[out >= 0], minlength=3), (out == -1).sum())
    assert chi2_pvalue(counts, np.append(law, 1 - law.sum())) > 1e-3


# --- expected error ---------------------------------------------------------------------------------------

def _votes(K: int, C: int, prior: MulticlassPrior, n: int, rng: np.random.Generator) -> np.ndarray:
    """n histograms drawn from the prior, true class 0."""
    if prior.kind == "dirichlet":
        pi = rng.dirichlet([prior.a] + [prior.b] * (C - 1), size=n)
    else:
        q = 0.5 * (prior.a + prior.b)
        pi = np.tile([q] + [(1 - q) / (C - 1)] * (C - 1), (n, 1))
    return np.array([rng.multinomial(K, p) for p in pi])


@pytest.mark.parametrize("K, C, sigma, prior", [(30, 4, 3.0, "paper"), (25, 3, 4.0, "dirichlet:2,1"),
                                                 (40, 10, 2.5, "iid-uniform:0.3,0.6")])
def test_gnmax_error_agrees_with_monte_carlo(K, C, sigma, prior):
    pr = MulticlassPrior.parse(prior)
    exact = gnmax_error(K, C, sigma, pr)
    n = 60_000
    h = _votes(K, C, pr, n, np.random.default_rng(21))
    wrong = (GnmaxSampler(K, C, sigma, seeded(22)).answers_from_histograms(h) != 0).mean()
    se = math.sqrt(exact * (1 - exact) / n)
    assert abs(wrong - exact) < 4.5 * se, (wrong, exact, se)


def test_multiclass_error_near_the_continuous_one_at_large_sigma():
    """For σ ≫ 1 the discrete Gaussian is the continuous one sampled on ℤ: GNMax errors agree to ~1 %."""
    from darrm_opt.experiments.multiclass_compare import gnmax_error as continuous

    pr = MulticlassPrior.parse("paper")
    a, b = gnmax_error(120, 5, 20.0, pr), continuous(120, 5, 20.0, pr)
    assert a == pytest.approx(b, rel=0.02)


def test_binary_gamma_agrees_with_direct_summation():
    K, sigma = 9, 1.7
    g = binary_gamma(K, sigma)
    s = GnmaxSampler(K, 2, sigma)
    for l in range(K + 1):
        law = s.distribution((K - l, l))
        maj = 1 if 2 * l > K else 0
        assert g[l] == pytest.approx(law[maj] - law[1 - maj], abs=1e-12)


def test_binary_error_is_darrm_error_of_the_effective_table():
    from darrm_opt.model.objective import expected_error

    K, sigma = 21, 3.0
    assert gnmax_error(K, 2, sigma, Prior.parse("paper")) == pytest.approx(
        expected_error(binary_gamma(K, sigma), Prior.parse("paper")), abs=1e-15)


def test_confident_error_bounds_monte_carlo():
    K, C = 30, 4
    p = ConfidentGnmaxParams(K, C, 18.0, 4.0, 3.0, "paper")
    lo, hi = abstain_probability(p), confident_error(p)
    n = 60_000
    h = _votes(K, C, p.prior, n, np.random.default_rng(31))
    out = GnmaxSampler(K, C, 3.0, seeded(32), threshold=18.0, sigma1=4.0).answers_from_histograms(h)
    abst, wrong = (out == -1).mean(), (out != 0).mean()
    se = math.sqrt(0.25 / n)
    assert abs(abst - lo) < 4.5 * se
    assert lo - 4.5 * se <= wrong <= hi + 4.5 * se
    assert hi - lo == pytest.approx(gnmax_error(K, C, 3.0, p.prior))


# --- profile, certificate, documents ---------------------------------------------------------------------

def test_profile_with_per_coordinate_sigmas():
    equal = GaussianProfile(5.0, (1, 1), sigmas=(5.0, 5.0))
    plain = GaussianProfile(5.0, (1, 1))
    assert equal.mu == pytest.approx(plain.mu, rel=1e-15)
    assert exact_epsilon([(equal, 30)], 1e-6) == exact_epsilon([(plain, 30)], 1e-6)
    mixed = GaussianProfile(4.0, (1, 1, 1), sigmas=(9.0, 4.0, 4.0), discrete=False)
    assert mixed.mu == pytest.approx(math.sqrt(1 / 81 + 2 / 16))
    assert profile_from_dict(mixed.to_dict()) == mixed
    assert "sigmas" not in plain.to_dict()
    with pytest.raises(InvalidParameter, match="sigmas"):
        GaussianProfile(1.0, (1, 1), sigmas=(1.0,))


def test_certificate_is_computed_and_checked():
    m = mechanism("gnmax")
    p = GnmaxParams(100, 5, 12.0)
    cert = m.certify(p, np.zeros(0))
    assert cert.certified and cert.delta_at_epsilon0 <= cert.delta0
    prof = m.profile(p, np.zeros(0))
    assert prof.delta(cert.epsilon0) <= cert.delta0
    assert prof.delta(cert.epsilon0 * 0.98) > cert.delta0  # ε₀ is the profile's, not a loose bound
    assert m.per_answer(p) == (cert.epsilon0, cert.delta0)


@pytest.mark.parametrize("kind, params", [("gnmax", GnmaxParams(20, 3, 2.5, "dirichlet:2,1")),
                                          ("confident-gnmax", ConfidentGnmaxParams(20, 3, 9.0, 3.0, 2.5))])
def test_document_round_trip_and_tampering(kind, params):
    m = mechanism(kind)
    table = m.solve(params, solver="highs").table
    assert table.gamma == () and table.expected_error == m.expected_error(params, np.zeros(0))
    doc = json.loads(json.dumps(table_document(table)))
    assert "gamma" not in doc
    again = table_from_document(doc)
    assert again.id == table.id and again.profile == table.profile
    assert table_from_document(doc, certify=False).id == table.id
    field = "sigma" if kind == "gnmax" else "sigma2"
    with pytest.raises(InvalidParameter, match="privacy_profile"):  # the stored pair is the old σ's
        table_from_document({**doc, field: doc[field] * 1.5}, certify=False)
    doc.pop("privacy_profile")
    with pytest.raises(InvalidParameter, match="certificate"):  # less noise: its ε₀ no longer holds
        table_from_document({**doc, field: doc[field] / 1.5}, certify=False)
    more = table_from_document({**doc, field: doc[field] * 1.5}, certify=False)  # more noise: it still holds
    assert more.certificate.epsilon0 == doc["certificate"]["epsilon0"] and more.id != table.id


def test_params_are_validated():
    with pytest.raises(InvalidParameter, match="classes"):
        GnmaxParams(10, 1, 1.0)
    with pytest.raises(InvalidParameter, match="sigma"):
        GnmaxParams(10, 3, 0.0)
    with pytest.raises(InvalidParameter, match="prior"):
        GnmaxParams(10, 3, 1.0, "common-uniform:0.6,1")  # a 0/1-vote prior needs C = 2
    assert isinstance(GnmaxParams(10, 2, 1.0, "common-uniform:0.6,1").prior, Prior)
    with pytest.raises(InvalidParameter, match="FFT"):  # its exact error would take too long
        GnmaxParams(2000, 1000, 30.0)
    GnmaxParams(2000, 2, 30.0)  # a 0/1 prior's error is cheap at any K


@pytest.mark.slow  # a database / three mechanisms' plans
def test_ledger_prices_gnmax_answers_by_its_gaussian_profile(tmp_path):
    pytest.importorskip("sqlalchemy")
    from darrm_opt.ledger.local import Ledger
    from darrm_opt.release.release import release_answers

    table = mechanism("gnmax").solve(GnmaxParams(15, 3, 3.0), solver="highs").table
    votes = np.random.default_rng(3).integers(0, 3, size=(40, 15))
    with Ledger(f"sqlite:///{tmp_path}/l.db", "g", epsilon_budget=50.0, delta_budget=1e-6) as book:
        out = release_answers(table, votes, book)
        view = book.view()
    assert out.shape == (40,) and set(out.tolist()) <= {0, 1, 2}
    assert view["answers"] == 40
    # the exact composition of the Gaussian pair on the coarse grid (40 answers are their own bucket), within
    # its rounding (40 × 1e-4) of the fine one
    fine = exact_epsilon([(GaussianProfile(3.0, (1, 1)), 40)], view["delta_target"])
    coarse = exact_epsilon([(GaussianProfile(3.0, (1, 1)), 40)], view["delta_target"], coarse=True)
    assert view["epsilon_spent"] == coarse and abs(coarse - fine) <= 40 * 1e-4


# --- planning ---------------------------------------------------------------------------------------------

def test_gnmax_plan_calibrates_sigma_to_the_budget():
    job = Job(K=50, queries=20, budget_epsilon=1.0, budget_delta=1e-5, classes=4)
    offer = mechanism("gnmax").plan(job)
    sigma = offer.details["sigma"]
    spent = exact_epsilon([(GaussianProfile(sigma, (1, 1)), 20)], 1e-5)
    assert spent == offer.epsilon_spent <= 1.0
    assert exact_epsilon([(GaussianProfile(sigma * 0.99, (1, 1)), 20)], 1e-5) > 1.0  # σ is (nearly) the least
    assert offer.table.params.sigma == sigma and offer.expected_error == offer.table.expected_error


@pytest.mark.slow  # a database / three mechanisms' plans
def test_plan_job_picks_the_most_accurate_and_lists_every_offer():
    job = Job(K=40, queries=30, budget_epsilon=2.0, budget_delta=1e-5, classes=3)
    best, offers, refused = plan_job(job)
    kinds = [o.mechanism for o in offers]
    assert set(kinds) == {"gnmax", "confident-gnmax", "darrm-multiclass", "stability"} and not refused
    assert best is offers[0] and all(best.expected_error <= o.expected_error for o in offers)
    assert all(o.epsilon_spent <= 2.0 for o in offers)
    conf = next(o for o in offers if o.mechanism == "confident-gnmax")
    p = conf.table.params
    assert exact_epsilon([(GaussianProfile(p.sigma2, (1, 1, 1), sigmas=(p.sigma1, p.sigma2, p.sigma2)), 30)],
                         1e-5) == conf.epsilon_spent


def test_gnmax_serves_only_the_pate_setting():
    job = Job(K=11, queries=5, budget_epsilon=1.0, budget_delta=1e-5, teachers="shared", epsilon=0.5,
              teacher_delta=1e-6)
    assert mechanism("gnmax").plan(job) is None and mechanism("confident-gnmax").plan(job) is None


def test_gaussian_plans_refuse_a_pure_budget():
    job = Job(K=20, queries=5, budget_epsilon=2.0, budget_delta=0.0, classes=3)
    for kind in ("gnmax", "confident-gnmax"):
        with pytest.raises(InvalidParameter, match="budget_delta"):
            mechanism(kind).plan(job)


@settings(max_examples=25, deadline=None)
@given(h=st.lists(st.integers(0, 6), min_size=2, max_size=4), sigma=st.floats(0.3, 3.0))
def test_gnmax_law_is_a_distribution_symmetric_in_tied_classes(h, sigma):
    if sum(h) == 0:
        h = [1] + h[1:]
    law = np.array(GnmaxSampler(sum(h), len(h), sigma).distribution(h))
    assert law.sum() == pytest.approx(1.0, abs=1e-12) and law.min() >= 0
    for a in range(len(h)):
        for b in range(len(h)):
            if h[a] == h[b]:
                assert law[a] == pytest.approx(law[b], abs=1e-13)
            elif h[a] > h[b]:
                assert law[a] >= law[b]  # a larger count is answered at least as often


@settings(max_examples=25, deadline=None)
@given(K=st.integers(1, 60), sigma=st.floats(0.2, 20.0))
def test_binary_gamma_is_a_probability_growing_with_the_margin(K, sigma):
    g = binary_gamma(K, sigma)
    assert np.all((g >= 0) & (g <= 1)) and np.allclose(g, g[::-1], atol=1e-15)
    half = g[(K + 1) // 2 :]
    assert np.all(np.diff(half) >= -1e-15)


def test_a_one_answer_job_picks_the_per_answer_optimum():
    """Q = 1: the LP optimum at (ε_B, δ_B) is at least as accurate as any (ε_B, δ_B)-DP release, GNMax
    included; the planner picks it."""
    from darrm_opt.model.neighbours import PateParams
    from darrm_opt.optimize.pate_setting import solve_pate

    best, offers, _ = plan_job(Job(K=11, queries=1, budget_epsilon=1.0, budget_delta=1e-5))
    assert best.mechanism == "darrm-pate" and {o.mechanism for o in offers} >= {"gnmax", "confident-gnmax"}
    optimum = solve_pate(PateParams(11, 1.0, 1e-5), solver="highs").expected_error
    assert best.expected_error <= optimum * (1 + 1e-9)


@pytest.mark.parametrize("eps, delta", [(1e-9, 1e-6), (1e6, 1e-6)])
def test_extreme_budgets_end_quickly(eps, delta):
    """A budget too small for any σ ≤ MAX_SIGMA is refused at once; a huge one ends at a tiny σ."""
    job = Job(K=10, queries=3, budget_epsilon=eps, budget_delta=delta, classes=2)
    if eps < 1:
        with pytest.raises(InvalidParameter, match="budget_epsilon"):
            mechanism("gnmax").plan(job)
    else:
        offer = mechanism("gnmax").plan(job)
        assert offer.epsilon_spent <= eps and offer.details["sigma"] < 1


def test_a_two_class_job_of_labels_states_the_error_against_the_true_class():
    """classes = 2 (labels) and 0/1 votes are the same release with two error conventions; each job's
    offers use one, and the document reads back to the same parameters."""
    labels = GnmaxParams(15, 2, 2.0, "labels:paper")
    votes01 = GnmaxParams(15, 2, 2.0, "paper")
    assert isinstance(labels.prior, MulticlassPrior) and isinstance(votes01.prior, Prior)
    assert labels.canonical()["prior"] == "labels:paper" and votes01.canonical()["prior"] == "paper"
    m = mechanism("gnmax")
    assert m.params_from(labels.canonical()) == labels and m.params_from(votes01.canonical()) == votes01
    assert m.expected_error(labels, np.zeros(0)) > m.expected_error(votes01, np.zeros(0))  # the majority errs too
    offer = m.plan(Job(K=15, queries=3, budget_epsilon=2.0, budget_delta=1e-5, classes=2))
    assert offer.table.params.canonical()["prior"] == "labels:paper"


@pytest.mark.parametrize("q,eps,delta", [(4, 1.0, 1e-5), (50, 2.0, 1e-6)])
def test_gnmax_sigma_over_answers_is_the_exact_gaussian_composition(q, eps, delta):
    """dp_accounting's Gaussian PLD (sensitivity √2) composed q times meets (ε, δ) at σ and not at 0.99σ;
    σ is √q times one answer's σ (q = 1)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    from darrm_opt.privacy.gnmax import calibrate_gaussian_sigma, gnmax_sigma_over_answers

    sigma = gnmax_sigma_over_answers(q, eps, delta)

    def pld_eps(s):
        one = pld_lib.from_gaussian_mechanism(s, sensitivity=math.sqrt(2.0), value_discretization_interval=1e-4)
        return one.self_compose(q).get_epsilon_for_delta(delta)

    assert eps - 5e-3 <= pld_eps(sigma) <= eps + q * 1e-4
    assert pld_eps(0.99 * sigma) > eps
    assert sigma == pytest.approx(math.sqrt(q) * calibrate_gaussian_sigma(eps, delta), rel=1e-11)
    assert sigma == pytest.approx(math.sqrt(q) * gnmax_sigma_over_answers(1, eps, delta), rel=1e-11)
    with pytest.raises(InvalidParameter, match="delta"):
        gnmax_sigma_over_answers(q, eps, 0.0)
