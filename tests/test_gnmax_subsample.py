"""GNMax on subsampled teachers: the amplified discrete Gaussian pair (BBG 2018 Thm 10 as an exact finite
pair) against the exact law of the subsampled answer, BBG's closed form, and the plain pair at m = K."""

from __future__ import annotations

import itertools
import math
from functools import cache

import numpy as np
import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms.vote_samplers import GnmaxSampler
from darrm_opt.privacy.gaussian_profile import GaussianProfile, discrete_pair, discrete_tail, subsampled_pair
from darrm_opt.privacy.profile import profile_from_dict


def histograms(K: int, C: int) -> list[tuple[int, ...]]:
    return [h for h in itertools.product(range(K + 1), repeat=C) if sum(h) == K]


@cache
def gnmax_law(h: tuple[int, ...], sigma: float) -> np.ndarray:
    """Pr[answer = c] of GNMax_σ on histogram h (ties uniform, as the sampler breaks them)."""
    return np.array(GnmaxSampler(sum(h), len(h), sigma).distribution(h))


def subsampled_law(h: tuple[int, ...], m: int, sigma: float) -> np.ndarray:
    """The law of GNMax on a uniform m-subset of the teachers of histogram h: Σ_s Π_c C(h_c, s_c)/C(K, m)
    · law(s) over the sub-histograms s of size m."""
    K = sum(h)
    out = np.zeros(len(h))
    for s in itertools.product(*(range(x + 1) for x in h)):
        if sum(s) != m:
            continue
        w = math.prod(math.comb(x, y) for x, y in zip(h, s)) / math.comb(K, m)
        out += w * gnmax_law(s, sigma)
    return out


def hockey(a: np.ndarray, b: np.ndarray, eps: float) -> float:
    return float(np.maximum(a - math.exp(eps) * b, 0.0).sum())


@pytest.mark.parametrize(("K", "C", "m", "sigma"), [(4, 2, 2, 1.0), (5, 3, 3, 1.5), (6, 2, 3, 2.0), (5, 2, 1, 1.0)])
def test_subsampled_pair_bounds_the_exact_law_and_is_nearly_attained(K, C, m, sigma):
    prof = GaussianProfile(sigma, (1, 1), subsample=(m, K))
    eps_grid = [0.0, 0.05, 0.1, 0.2, 0.4, 0.7, 1.0, 1.5, 2.0]
    bound = [prof.delta(e) for e in eps_grid]
    laws = {h: subsampled_law(h, m, sigma) for h in histograms(K, C)}
    worst = [0.0] * len(eps_grid)
    for h, law in laws.items():
        for a in range(C):
            if h[a] == 0:
                continue
            for b in range(C):
                if b == a:
                    continue
                h2 = list(h)
                h2[a] -= 1
                h2[b] += 1
                other = laws[tuple(h2)]
                for i, e in enumerate(eps_grid):
                    worst[i] = max(worst[i], hockey(law, other, e))
    for i, e in enumerate(eps_grid):
        assert worst[i] <= bound[i] + 1e-13, (e, worst[i], bound[i])
    # the bound is a dominating pair's, not loose: the worst pair of histograms comes within 20 % of it
    assert max(w / b for w, b in zip(worst, bound)) > 0.8
    # a smaller rate than the sampler's (m of K + 2) is refuted by the exact law
    small = GaussianProfile(sigma, (1, 1), subsample=(m, K + 2))
    assert any(w > small.delta(e) for w, e in zip(worst, eps_grid))
    # and amplification is real: the plain pair's δ is larger at every ε > 0
    plain = GaussianProfile(sigma, (1, 1))
    assert all(prof.delta(e) < plain.delta(e) for e in eps_grid)


def raw_hockey(p: np.ndarray, loss: np.ndarray, inf: float, eps: float) -> float:
    keep = (loss > eps) & (p > 0)
    return math.fsum((p[keep] * -np.expm1(eps - loss[keep])).tolist()) + inf


@pytest.mark.parametrize(("sigma", "m", "K"), [(1.0, 1, 4), (2.0, 3, 5), (10.0, 62, 250), (30.0, 125, 250)])
def test_subsampled_pair_is_bbg_closed_form(sigma, m, K):
    """H_{e^ε}(P′‖Q′) = γ·δ_base(ε_b) at ε = log1p(γ·expm1(ε_b)) (BBG 2018 Thm 10 with x = e^ε), to 1e-12
    relative on the pairs' own atoms; the profile's δ (its float margin added) is above it and within 1e-9."""
    g = m / K
    (pb, lb), = discrete_pair((sigma, sigma), (1.0, 1.0))
    tb = discrete_tail((sigma, sigma), (1.0, 1.0))
    p, loss, inf = subsampled_pair(sigma, (1.0, 1.0), m, K)
    prof = GaussianProfile(sigma, (1, 1), subsample=(m, K))
    for eb in (0.0, 0.01, 0.1, 0.3, 0.6, 1.0, 2.0, 3.0):
        e = math.log1p(g * math.expm1(eb))
        base = g * raw_hockey(pb, lb, tb, eb)
        if base < 1e-30:
            continue
        mine = raw_hockey(p, loss, inf, e)
        assert abs(mine / base - 1) <= 1e-12, (eb, mine, base)
        d = prof.delta(e)
        assert mine <= d <= mine * (1 + 1e-9)
    assert abs(math.fsum(p.tolist()) - 1) < 1e-12  # P′ is a distribution (m0 is the remainder)


def test_subsample_of_every_teacher_is_the_plain_profile_and_documents_keep_their_form():
    plain = GaussianProfile(2.0, (1, 1))
    full = GaussianProfile(2.0, (1, 1), subsample=(5, 5))
    assert full == plain and full.subsample is None
    assert full.sort_key() == plain.sort_key() == ("gaussian", True, 2.0, (1.0, 1.0), ())
    assert plain.to_dict() == {"type": "gaussian", "sigma": 2.0, "shifts": [1.0, 1.0], "discrete": True,
                               "mu": plain.mu}
    assert full.delta(0.5) == plain.delta(0.5)
    sub = GaussianProfile(2.0, (1, 1), subsample=(3, 5))
    assert sub.to_dict()["subsample"] == [3, 5]
    assert profile_from_dict(sub.to_dict()) == sub
    assert profile_from_dict(plain.to_dict()) == plain
    assert sub.sort_key() != plain.sort_key() and sub != plain
    assert sub.delta(0.5) < plain.delta(0.5)


def test_plain_gnmax_table_id_is_unchanged():
    """A GNMax table without ``subsample`` keeps its key (stored tables' ids must not change)."""
    from darrm_opt.model.gnmax import GnmaxParams

    assert GnmaxParams(5, 3, 2.0).canonical() == {"K": 5, "classes": 3, "sigma": 2.0, "prior": "paper"}
    assert GnmaxParams(5, 3, 2.0).key() == PLAIN_KEY


#: GnmaxParams(5, 3, 2.0).key() before subsampling existed
PLAIN_KEY = "70ccf210c9d507d9a567b11ca3817b04"


@pytest.mark.parametrize("bad", [0, 6, 2.5, "x", (3,), (3, 5, 1)])
def test_subsample_rules(bad):
    with pytest.raises(InvalidParameter) as e:
        GaussianProfile(2.0, (1, 1), subsample=(bad, 5) if not isinstance(bad, tuple) else bad)
    assert e.value.parameter in ("subsample", "K")
    with pytest.raises(InvalidParameter, match="subsample"):
        GaussianProfile(2.0, (1, 1), discrete=False, subsample=(3, 5))


# --- the kind: parameters, table documents, the sampler, the error ----------------------------------------

def test_gnmax_params_subsample_rules_and_key():
    from darrm_opt.model.gnmax import GnmaxParams

    assert GnmaxParams(5, 3, 2.0, subsample=5) == GnmaxParams(5, 3, 2.0)  # m = K: every teacher, the same key
    p = GnmaxParams(5, 3, 2.0, subsample=3)
    assert p.m == 3 and p.canonical()["subsample"] == 3 and p.key() != PLAIN_KEY
    for bad in (0, 6, 2.5, "x", True):
        with pytest.raises(InvalidParameter) as e:
            GnmaxParams(5, 3, 2.0, subsample=bad)
        assert e.value.parameter == "subsample"


def test_subsampled_table_document_round_trip_and_verify(tmp_path):
    import json

    from darrm_opt.mechanisms import mechanism, table_document, table_from_document
    from darrm_opt.model.gnmax import GnmaxParams
    from darrm_opt.release.verify import TableFileMismatch, verify

    kind = mechanism("gnmax")
    params = GnmaxParams(7, 3, 1.5, subsample=3)
    table = kind.certify_table(params, np.zeros(0))
    assert table.profile == GaussianProfile(1.5, (1, 1), subsample=(3, 7))
    plain = kind.certify_table(GnmaxParams(7, 3, 1.5), np.zeros(0))
    assert table.epsilon0 < plain.epsilon0  # amplified
    assert "3 of 7 teachers" in table.certificate.pair
    doc = table_document(table)
    assert doc["subsample"] == 3 and doc["privacy_profile"]["subsample"] == [3, 7]
    assert "subsample" not in table_document(plain) and "subsample" not in table_document(plain)["privacy_profile"]
    assert table_from_document(json.loads(json.dumps(doc))) == table
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    assert verify(str(path)).certified
    # a document whose profile is the plain pair (not the amplified one) is refused
    bad = {**doc, "privacy_profile": plain.profile.to_dict()}
    with pytest.raises(InvalidParameter, match="privacy_profile"):
        table_from_document(bad, certify=False)
    path.write_text(json.dumps(bad))
    with pytest.raises(TableFileMismatch, match="privacy_profile"):
        verify(str(path))


@pytest.mark.parametrize(("labels", "m", "sigma"), [((0, 0, 1, 2, 2), 3, 0.8), ((0, 1, 1, 1), 2, 0.5),
                                                   ((2, 0, 1, 1, 0, 2), 1, 1.0)])
def test_subsampled_sampler_follows_its_law(labels, m, sigma):
    from scripted_bytes import chi2_pvalue, seeded

    from darrm_opt.mechanisms.vote_samplers import SubsampledGnmaxSampler

    C = 3
    K = len(labels)
    h = tuple(int(np.sum(np.array(labels) == c)) for c in range(C))
    law = subsampled_law(h, m, sigma)
    s = SubsampledGnmaxSampler(K, C, sigma, m, seeded(7))
    out = s(np.tile(np.array(labels), (40_000, 1)))
    assert chi2_pvalue(np.bincount(out, minlength=C), law) > 1e-3
    # the subset itself: each teacher is read with probability m/K, and the subset's histogram is hypergeometric
    sub = s.subset_histograms(np.tile(np.arange(K) % C, (30_000, 1)))
    assert sub.sum(axis=1).tolist() == [m] * 30_000
    with pytest.raises(InvalidParameter, match="subsample"):
        SubsampledGnmaxSampler(K, C, sigma, K + 1)


def test_subsampled_error_is_against_every_teacher_for_binary_votes_and_the_true_class_for_labels():
    """0/1 votes: DaRRM's error (Def. 2.4, against the majority of all K) of the effective K-teacher table
    Γ(L) = s_L(2·Pr[answer = 1 | L] − 1), Pr[answer = 1 | L] enumerated over the subset's j and D = Z₁ − Z₀;
    class labels: the m-teacher figure (the subset's votes are i.i.d. from the same prior)."""
    from darrm_opt.model.gnmax import discrete_gaussian_pmf, gnmax_error, subsampled_gnmax_error, tail_cut
    from darrm_opt.model.multiclass import MulticlassPrior
    from darrm_opt.model.neighbours import signs
    from darrm_opt.model.objective import expected_error
    from darrm_opt.model.params import Prior

    K, m, sigma = 9, 4, 1.3
    prior = Prior.parse("paper")
    L_ = tail_cut(sigma)
    p, tail = discrete_gaussian_pmf(sigma, L_)
    d = np.convolve(p, p)  # D = Z₁ − Z₀ on −2L..2L
    D = np.arange(-2 * L_, 2 * L_ + 1)
    table = np.zeros(K + 1)
    for L in range(K + 1):
        one = 0.0
        for j in range(m + 1):
            w = math.comb(L, j) * math.comb(K - L, m - j) / math.comb(K, m)
            gap = 2 * j - m  # ones minus zeros in the subset: answer 1 iff gap + D > 0, ties (= 0) a fair coin
            one += w * float(d[gap + D > 0].sum() + 0.5 * d[gap + D == 0].sum())
        table[L] = signs(K)[L] * (2 * one - 1)
    err = float(expected_error(table, prior))
    got = subsampled_gnmax_error(K, m, 2, sigma, prior)
    assert err - 1e-12 <= got <= err + 2 * tail + 1e-12
    assert got > gnmax_error(K, 2, sigma, prior)  # fewer teachers read: more error at the same σ
    mc = MulticlassPrior.parse("dirichlet:2,0.5")
    assert subsampled_gnmax_error(12, 5, 4, 1.0, mc) == gnmax_error(5, 4, 1.0, mc)


# --- planning ---------------------------------------------------------------------------------------------

def test_plan_searches_the_subsample_grid_or_takes_the_jobs_m():
    from darrm_opt.mechanisms import mechanism
    from darrm_opt.planning.job import Job
    from darrm_opt.planning.pate_plan import subsample_grid
    from darrm_opt.privacy.pld import exact_epsilon

    kind = mechanism("gnmax")
    offer = kind.plan(Job(40, 200, 2.0, 1e-5, classes=4, thorough=True))
    assert [c["subsample"] for c in kind.plan(Job(40, 200, 2.0, 1e-5, classes=4)).details["candidates"]] == [40]
    tried = offer.details["candidates"]
    assert [c["subsample"] for c in tried] == list(subsample_grid(40))
    best = min(tried, key=lambda c: (c["expected_error"], -c["subsample"]))
    assert offer.details["subsample"] == best["subsample"] and offer.expected_error == best["expected_error"]
    for c in tried:  # each m's σ fits the budget by the ledger's exact composition of its amplified pair
        sub = None if c["subsample"] == 40 else (c["subsample"], 40)
        assert exact_epsilon([(GaussianProfile(c["sigma"], (1, 1), subsample=sub), 200)], 1e-5) <= 2.0
    fixed = kind.plan(Job(40, 200, 2.0, 1e-5, classes=4, subsample=10))
    p = fixed.table.params
    assert p.subsample == 10 and fixed.details["subsample"] == 10
    assert [c["subsample"] for c in fixed.details["candidates"]] == [10]
    assert fixed.table.profile == GaussianProfile(p.sigma, (1, 1), subsample=(10, 40))
    assert fixed.epsilon_spent <= 2.0
    # amplification lets σ fall about in proportion to m/K (the pair of m of K at σ·m/K spends about as much)
    plain = next(c for c in tried if c["subsample"] == 40)
    assert 0.15 < p.sigma / plain["sigma"] < 0.5


@pytest.mark.slow
def test_cli_plan_subsample_out_verify_and_aggregate_with_a_ledger(tmp_path):
    """plan --mechanism gnmax --subsample --out, verify, aggregate --ledger paying the amplified pair's exact
    composition; the budget's Q answers fit and the next batch is refused (subprocesses)."""
    import json

    from cli_helpers import run_cli

    from darrm_opt.mechanisms import table_from_document
    from darrm_opt.privacy.pld import exact_epsilon

    r = run_cli("plan", "--K", "20", "--classes", "3", "--queries", "100", "--budget", "2,1e-5", "--mechanism",
                "gnmax", "--subsample", "7", "--format", "json", "--out", "t.json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["kind"] == "gnmax" and doc["subsample"] == 7 and doc["privacy_profile"]["subsample"] == [7, 20]
    table = table_from_document(doc)
    assert table.profile == GaussianProfile(doc["sigma"], (1, 1), subsample=(7, 20))
    r = run_cli("verify", "t.json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = np.random.default_rng(0).integers(0, 3, size=(100, 20))
    (tmp_path / "v.csv").write_text("".join(",".join(str(int(x)) for x in row) + "\n" for row in rows))
    args = ("aggregate", "--table", "t.json", "--votes", "v.csv", "--ledger-db", str(tmp_path / "l.db"),
            "--ledger", "job")
    r = run_cli(*args, "--budget", "2,1e-5", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["answers"]) == 100 and set(out["answers"]) <= {0, 1, 2}
    spent = out["ledger"]["epsilon_spent"]
    assert spent <= 2.0
    assert spent == pytest.approx(exact_epsilon([(table.profile, 100)], 1e-5), abs=1e-3)
    r = run_cli(*args, cwd=tmp_path)
    assert r.returncode == 1 and "nothing was released" in r.stderr
    r = run_cli("plan", "--K", "20", "--classes", "3", "--queries", "100", "--budget", "2,1e-5", "--mechanism",
                "gnmax", "--subsample", "21", "-q", cwd=tmp_path)
    assert r.returncode != 0 and "subsample" in r.stderr
