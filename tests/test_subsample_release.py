"""Subsampled teachers as the darrm-pate kind's ``subsample`` (m of K per answer): parameters and documents,
the error against the majority of all K by brute force, the exact hypergeometric sampler, the amplified
profile and its check, the planner's m, and the refusals where subsampling is not valid."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import mechanism, read_document, table_document, table_from_document
from darrm_opt.model.neighbours import PateParams, signs, subsampled_table, thinned_pmf
from darrm_opt.model.objective import expected_error, expected_pmf
from darrm_opt.model.params import Prior
from darrm_opt.optimize.pate_setting import solve_pate
from darrm_opt.planning.job import Job
from darrm_opt.privacy.pair_profile import pate_profile
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.subsample import amplified_delta, amplified_epsilon, amplify_profile

KIND = mechanism("darrm-pate")


def seeded(seed: int):
    rng = np.random.default_rng(seed)
    return lambda n: rng.bytes(n)


def test_a_table_of_every_teacher_keeps_its_form_and_hash():
    p = PateParams(5, 0.5, 1e-5)
    assert "subsample" not in p.canonical()
    assert PateParams(5, 0.5, 1e-5, subsample=5) == p  # m = K is every teacher: the same table
    assert p.key() == "1a84d110c098b1fbc425dab3a3e54852"  # as before subsampling existed
    t = KIND.certify_table(p, np.zeros(6), teachers="disjoint-nonprivate")
    assert t.id == "87a1efc7d2bf021d2f439815e4819511"
    s = PateParams(5, 0.5, 1e-5, subsample=3)
    assert s.canonical()["subsample"] == 3 and s.key() != p.key()
    for bad in (0, 6, 2.5, True):
        with pytest.raises(InvalidParameter, match="subsample"):
            PateParams(5, 0.5, 1e-5, subsample=bad)


def brute_error(K: int, m: int, gamma: np.ndarray, alpha: np.ndarray) -> float:
    """Σ_L Pr[L]·(Pr[maj_K = 1 | L] − Pr[answer = 1 | L]) (ties ½), the answer's law averaged over every
    m-subset of a vote vector with L ones."""
    s = signs(m)
    total = 0.0
    for L in range(K + 1):
        votes = [1] * L + [0] * (K - L)
        subsets = list(itertools.combinations(range(K), m))
        one = sum(0.5 + 0.5 * s[j] * gamma[j] for j in (sum(votes[i] for i in S) for S in subsets)) / len(subsets)
        maj = 1.0 if 2 * L > K else 0.5 if 2 * L == K else 0.0
        total += alpha[L] * (maj - one)
    return total


@pytest.mark.parametrize(("K", "m", "prior"), [(6, 3, "counts:4=0.5,5=0.3,6=0.2"), (5, 2, "counts:3..5=1"),
                                                (7, 4, "paper"), (6, 5, "beta:9,1")])
def test_error_against_the_majority_of_all_k_by_brute_force(K, m, prior):
    params = PateParams(K, 0.7, 1e-4, prior, m)
    sol = KIND.solve(params, solver="highs")
    gamma = np.asarray(sol.table.gamma)
    assert gamma.size == m + 1
    alpha = expected_pmf(K, Prior.parse(prior))
    err = KIND.expected_error(params, gamma)
    assert err == pytest.approx(brute_error(K, m, gamma, alpha), abs=1e-13)
    assert sol.table.expected_error == err
    # the m-teacher objective under the thinned law, plus a constant: the LP with the thinned prior is optimal
    inner = params.inner()
    assert np.allclose(expected_pmf(m, inner.prior), thinned_pmf(alpha, m), atol=1e-12)
    const = err - expected_error(gamma, inner.prior)
    other = np.asarray(solve_pate(PateParams(m, 0.3, 0.0)).gamma)
    assert KIND.expected_error(params, other) - expected_error(other, inner.prior) == pytest.approx(const, abs=1e-12)
    assert err <= KIND.expected_error(params, other) + 1e-12  # the solved table beats another certified one


def test_sampler_draws_the_subset_count_exactly_hypergeometric():
    params = PateParams(7, 0.8, 1e-5, subsample=3)
    table = KIND.solve(params, solver="highs").table
    sampler = KIND.sampler(table, seeded(3))
    n, L = 60_000, 4
    j = sampler.subset_counts(np.full(n, L))
    want = stats.hypergeom.pmf(np.arange(4), 7, L, 3)
    got = np.bincount(j, minlength=4) / n
    assert np.all(np.abs(got - want) <= 5 * np.sqrt(want * (1 - want) / n))
    assert sampler.subset_counts(np.array([0, 7])).tolist() == [0, 3]  # no 1-vote to draw; only 1-votes
    votes = np.zeros((n, 7), dtype=np.uint8)
    votes[:, :L] = 1
    answers = sampler(votes)
    p_one = 0.5 + 0.5 * subsampled_table(7, np.asarray(table.gamma))[L]
    assert abs(answers.mean() - p_one) <= 5 * math.sqrt(p_one * (1 - p_one) / n)
    with pytest.raises(InvalidParameter, match="votes"):
        sampler(np.ones((2, 3), dtype=np.uint8))  # rows of m votes: each row holds all K


def test_profile_per_answer_and_check():
    params = PateParams(9, 1.0, 1e-6, subsample=4)
    table = KIND.solve(params, solver="highs").table
    g = np.asarray(table.gamma)
    base = pate_profile(params.inner(), g)
    assert table.profile == amplify_profile(base, 4, 9)
    eps0, delta0 = KIND.per_answer(params)
    assert (eps0, delta0) == (amplified_epsilon(1.0, 4, 9), amplified_delta(1e-6, 4, 9))
    assert eps0 < math.log1p(4 / 9 * math.expm1(1.0)) * (1 + 1e-9) and table.profile.delta(eps0) <= delta0
    assert KIND.check_profile(params, g, table.profile, table.certificate).valid
    optimistic = amplify_profile(base, 2, 9)  # as if 2 of 9 were read: below the true pair
    assert KIND.check_profile(params, g, optimistic, table.certificate).verdict == "optimistic"
    # a document round trip: the same table, its profile proven again
    doc = table_document(table)
    assert doc["subsample"] == 4 and len(doc["gamma"]) == 5
    assert table_from_document(doc).id == table.id
    assert exact_epsilon([(table.profile, 50)], 1e-5, coarse=True) < exact_epsilon([(base, 50)], 1e-5, coarse=True)


def test_subsampling_is_refused_where_it_is_not_valid():
    darrm = mechanism("darrm")
    shared = table_document(darrm.solve(darrm.examples()[0].params, solver="highs").table)
    with pytest.raises(InvalidParameter, match="subsample.*shared data"):
        read_document({**shared, "subsample": 2})
    with pytest.raises(InvalidParameter, match="subsample"):
        mechanism("darrm").params_from({"K": 5, "m": 1, "subsample": 3})
    mechanism("gnmax").refuse_subsample({"subsample": 3})  # gnmax samples teachers too (test_gnmax_subsample)
    with pytest.raises(InvalidParameter, match="subsample"):
        mechanism("confident-gnmax").refuse_subsample({"subsample": 3})
    with pytest.raises(InvalidParameter, match="subsample.*disjoint shards"):
        Job(5, 10, 2.0, 1e-5, teachers="shared", epsilon=0.1, teacher_delta=1e-5, subsample=3)
    with pytest.raises(InvalidParameter, match="subsample"):
        Job(5, 10, 2.0, 1e-5, subsample=6)
    assert "subsample" not in Job(5, 10, 2.0, 1e-5).canonical()


def test_the_planner_searches_m_and_takes_a_fixed_one():
    offer = KIND.plan(Job(9, 5, 2.0, 1e-5))
    tried = {c["subsample"] for c in offer.plan["candidates"]}
    assert tried == {9, 4, 2}
    fits = [c for c in offer.plan["candidates"] if c["fits"]]
    assert offer.expected_error == pytest.approx(min(c["expected_error"] for c in fits), rel=1e-12)
    fixed = KIND.plan(Job(9, 5, 2.0, 1e-5, subsample=3))
    p = fixed.table.params
    assert p.subsample == 3 and {c["subsample"] for c in fixed.plan["candidates"]} == {3}
    assert fixed.epsilon_spent <= 2.0
    assert exact_epsilon([(fixed.table.profile, 5)], 1e-5) == pytest.approx(fixed.epsilon_spent, abs=1e-3)
    assert fixed.expected_error == KIND.expected_error(p, np.asarray(fixed.table.gamma))


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("darrm-opt")
    exe = [str(script)] if script.exists() else [sys.executable, "-m", "darrm_opt"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1]) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([*exe, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_plan_out_then_aggregate_with_a_ledger(tmp_path):
    """The usual recipe through the CLI processes: plan --subsample --out, verify, aggregate --ledger paying the
    amplified pair's exact composition; the budget's Q answers fit and the next batch is refused."""
    r = cli("plan", "--K", "11", "--teachers", "disjoint-nonprivate", "--queries", "10", "--budget", "2,1e-5",
            "--subsample", "5", "--format", "json", "--out", "t.json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["kind"] == "darrm-pate" and doc["subsample"] == 5 and len(doc["gamma"]) == 6
    assert doc["epsilon_spent"] <= 2.0
    table = table_from_document(doc)
    assert table.profile == amplify_profile(pate_profile(table.params.inner(), table.gamma), 5, 11)
    r = cli("verify", "t.json", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = np.random.default_rng(0).random((10, 11)) < 0.8
    (tmp_path / "v.csv").write_text("".join(",".join(str(int(x)) for x in row) + "\n" for row in rows))
    args = ("aggregate", "--table", "t.json", "--votes", "v.csv", "--ledger-db", str(tmp_path / "l.db"),
            "--ledger", "job")
    r = cli(*args, "--budget", "2,1e-5", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["subsample"] == 5 and len(out["answers"]) == 10 and set(out["answers"]) <= {0, 1}
    spent = out["ledger"]["epsilon_spent"]
    assert spent <= 2.0
    assert spent == pytest.approx(exact_epsilon([(table.profile, 10)], 1e-5), abs=1e-3)
    r = cli(*args, cwd=tmp_path)
    assert r.returncode == 1 and "nothing was released" in r.stderr
    r = cli("plan", "--K", "11", "--teachers", "shared", "--epsilon", "0.1", "--teacher-delta", "1e-5",
            "--queries", "10", "--budget", "2,1e-5", "--subsample", "5", "-q", cwd=tmp_path)
    assert r.returncode != 0 and "subsample" in r.stderr
