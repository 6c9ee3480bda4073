"""The stability kind's GNMax fallback (darrm_opt.privacy.stability, darrm_opt.mechanisms.stability,
darrm_opt.planning.stability_plan): the exact error against a brute-force recursion over the threshold noise and
the queries, GNMax's per-L error against a direct sum over its noise, the sampler's law against the exact law of
a tiny job, the statement against its parts, the parameters' forms (a job without fallback keeps its hash), the
planner's budget, and plan → aggregate → verify through the CLI."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from brute_stability import dlap_le, job_error_recursion
from scipy import stats

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import mechanism
from darrm_opt.mechanisms.stability import BOTTOM, StabilityParams, StabilitySampler
from darrm_opt.model.objective import expected_pmf
from darrm_opt.model.params import Prior
from darrm_opt.privacy.stability import (
    Fallback,
    SvtParams,
    binary_fallback_wrong,
    binary_law,
    distance_from_gap,
    dlap_pmf,
    fallback_delta,
    fallback_statement,
    job_error,
    ptr_delta,
)


def _dg_pmf(sigma: float, M: int) -> np.ndarray:
    z = np.arange(-M, M + 1)
    w = np.exp(-z.astype(float) ** 2 / (2 * sigma * sigma))
    return w / w.sum()


def _gnmax_one(K: int, l: int, sigma: float) -> float:
    """Pr[GNMax answers 1 | L = l] for h = (K − l, l), by a direct sum over both noises (noisy ties halved)."""
    M = int(20 * sigma) + 5
    p = _dg_pmf(sigma, M)
    z = np.arange(-M, M + 1)
    v0 = (K - l + z)[:, None]
    v1 = (l + z)[None, :]
    joint = p[:, None] * p[None, :]
    return float((joint * ((v1 > v0) + 0.5 * (v1 == v0))).sum())


@pytest.mark.parametrize("K", [5, 6])
def test_gnmax_wrong_per_distance_against_a_direct_sum(K) -> None:
    sigma = 1.3
    alpha = expected_pmf(K, Prior.parse("paper"))
    gw = np.zeros(int(distance_from_gap(K)) + 1)
    for l in range(K + 1):
        if 2 * l == K:
            continue
        one = _gnmax_one(K, l, sigma)
        gw[int(distance_from_gap(abs(2 * l - K)))] += alpha[l] * (one if 2 * l < K else 1 - one)
    got = binary_fallback_wrong(K, "paper", sigma)
    assert got == pytest.approx(gw, rel=1e-12, abs=1e-15) and gw.sum() > 0.01


def _brute_error(svt: SvtParams, K: int, prior: str, sigma: float | None, Q: int) -> tuple[float, float]:
    """(error, answered) by :func:`brute_stability.job_error_recursion` (GNMax's error per L by
    :func:`_gnmax_one`; the released majority errs by 0 against itself)."""
    alpha = expected_pmf(K, Prior.parse(prior))
    rows = [(float(alpha[l]), int(distance_from_gap(abs(2 * l - K))), 0.0,
             0.0 if sigma is None or 2 * l == K else
             (_gnmax_one(K, l, sigma) if 2 * l < K else 1 - _gnmax_one(K, l, sigma))) for l in range(K + 1)]
    return job_error_recursion(svt, Q, rows, sigma is not None)


@pytest.mark.parametrize(("K", "svt", "Q"), [(5, SvtParams(2, 2, 3, 3, 2), 4), (6, SvtParams(1, 1, 2, 1, 1), 3),
                                              (5, SvtParams(3, 2, 2, 6, 3), 5)])
def test_job_error_with_fallback_against_brute_force(K, svt, Q) -> None:
    sigma = 1.5
    law = binary_law(K, "paper")
    got = job_error(svt, law, Q, fallback_wrong=binary_fallback_wrong(K, "paper", sigma))
    err, ans = _brute_error(svt, K, "paper", sigma, Q)
    assert got.error == pytest.approx(err, rel=1e-10, abs=1e-13)
    assert got.answered == pytest.approx(ans, rel=1e-10)
    without = job_error(svt, law, Q)
    assert without.error == pytest.approx(_brute_error(svt, K, "paper", None, Q)[0], rel=1e-10, abs=1e-13)
    assert got.error < without.error and got.answered > without.answered


def _exact_outcomes(svt: SvtParams, K: int, Ls: list[int], sigma: float) -> dict[tuple[int, ...], float]:
    """The exact law of one job's answers on the 0/1-vote rows with counts ``Ls`` (fixed histograms)."""
    d = [int(distance_from_gap(abs(2 * l - K))) for l in Ls]
    law: dict[tuple[int, ...], float] = {}
    for z in range(-60 * svt.t_rho, 60 * svt.t_rho + 1):
        pz = float(dlap_pmf(svt.t_rho, np.array([z]))[0])
        paths = [((), 1.0, 0)]  # (answers so far, probability, unstable count)
        for i, l in enumerate(Ls):
            pu = dlap_le(svt.t_nu, svt.threshold + z - svt.scale * d[i])
            one = _gnmax_one(K, l, sigma)
            plur = [(1, 1.0)] if 2 * l > K else [(0, 1.0)] if 2 * l < K else [(0, 0.5), (1, 0.5)]
            nxt = []
            for a, p, k in paths:
                if k >= svt.cutoff:
                    nxt.append(((*a, BOTTOM), p, k))
                    continue
                nxt += [((*a, 1), p * pu * one, k + 1), ((*a, 0), p * pu * (1 - one), k + 1)]
                nxt += [((*a, c), p * (1 - pu) * q, k) for c, q in plur]
            paths = nxt
        for a, p, _ in paths:
            law[a] = law.get(a, 0.0) + pz * p
    return law


def test_the_sampler_follows_the_exact_law_of_a_tiny_job() -> None:
    """Jobs of two queries (L = 3 then 2 of K = 5: both d = 0), c = 1, σ = 1: the nine answer pairs' counts in
    40,000 jobs against their exact probabilities (chi-square), the GNMax answers included."""
    K, Ls, sigma = 5, [3, 2], 1.0
    svt = SvtParams(1, 1, 1, 0, 1)
    params = StabilityParams(K, None, svt, 2, "paper", sigma, 0.5)
    rng = np.random.default_rng(11)
    sampler = StabilitySampler(params, rng.bytes)
    n = 40_000
    h = np.array([[K - Ls[i % 2], Ls[i % 2]] for i in range(2 * n)])
    out = sampler.draw(h).reshape(n, 2)
    exact = _exact_outcomes(svt, K, Ls, sigma)
    keys = list(itertools.product((BOTTOM, 0, 1), repeat=2))
    probs = np.array([exact.get(k, 0.0) for k in keys])
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    counts = np.array([int(((out[:, 0] == a) & (out[:, 1] == b)).sum()) for a, b in keys])
    assert counts.sum() == n
    assert counts[probs == 0].sum() == 0
    live = probs > 0
    chi = float(((counts[live] - n * probs[live]) ** 2 / (n * probs[live])).sum())
    assert stats.chi2.sf(chi, live.sum() - 1) > 1e-4
    # GNMax answered some unstable first queries with the minority class: impossible without the fallback
    assert exact[(0, BOTTOM)] > 0.01 and counts[keys.index((0, BOTTOM))] > 0


def test_the_statement_is_its_parts_rounded_up() -> None:
    svt = SvtParams(4, 10, 40, 30, 3)
    fb = Fallback(12.0, 0.7)
    eps, delta = fallback_statement(svt, 50, fb)
    e_svt = 4 / 10 + 2 * 3 * 4 / 40
    assert eps >= e_svt + 0.7 and eps == pytest.approx(e_svt + 0.7, rel=1e-15)
    parts = math.exp(e_svt) * fallback_delta(12.0, 3, 0.7) + ptr_delta(svt, 50)
    assert delta >= parts and delta == pytest.approx(parts, rel=1e-8)
    # δ_G is the c-fold composition: more GNMax answers or less noise cost more
    assert fallback_delta(12.0, 3, 0.7) < fallback_delta(12.0, 6, 0.7)
    assert fallback_delta(12.0, 3, 0.7) < fallback_delta(8.0, 3, 0.7)
    # one answer: the discrete Gaussian pair's own δ(ε) (summed term by term), up to the PLD's pessimism
    one = Fallback(3.0, 0.5).profile().delta(0.5)
    assert one <= fallback_delta(3.0, 1, 0.5) <= one * 1.01


def test_a_job_without_fallback_keeps_its_form_and_hash() -> None:
    p = StabilityParams(61, None, SvtParams(64, 43, 52, 619, 2), 20)
    assert p.canonical() == {"K": 61, "classes": None, "scale": 64, "t_rho": 43, "t_nu": 52, "threshold": 619,
                             "cutoff": 2, "quota": 20, "prior": "paper"}
    assert p.key() == KEY_WITHOUT_FALLBACK
    q = StabilityParams(61, None, SvtParams(64, 43, 52, 619, 2), 20, "paper", 20.0, 0.5)
    assert q.canonical()["fallback_sigma"] == 20.0 and q.key() != p.key()
    kind = mechanism("stability")
    assert kind.params_from(q.canonical()) == q and kind.params_from(p.canonical()) == p


#: the key of the example job above as it was before the fallback existed (main at aaaa924)
KEY_WITHOUT_FALLBACK = "120ad0cacb6763a7ac876930e6b8f052"


def test_fallback_parameters_are_validated_naming_them() -> None:
    svt = SvtParams(64, 43, 52, 619, 2)
    assert StabilityParams(61, 3, svt, 20, "paper", 20.0, 0.5).fallback.sigma == 20.0  # class labels too
    with pytest.raises(InvalidParameter) as e:
        StabilityParams(61, None, svt, 20, "paper", 20.0, None)
    assert e.value.parameter == "fallback"
    with pytest.raises(InvalidParameter) as e:
        StabilityParams(61, None, svt, 20, "paper", -1.0, 0.5)
    assert e.value.parameter == "fallback_sigma"


def test_the_certificate_and_profile_state_the_fallback_statement() -> None:
    kind = mechanism("stability")
    p = StabilityParams(25, None, SvtParams(16, 40, 80, 200, 4), 10, "paper", 15.0, 0.5)
    cert = kind.certify(p, np.zeros(0))
    assert (cert.epsilon, cert.delta) == fallback_statement(p.svt, 10, p.fallback)
    assert kind.per_answer(p) == (cert.epsilon, cert.delta)
    prof = kind.profile(p, np.zeros(0))
    assert prof.delta(cert.epsilon) <= cert.delta * (1 + 1e-12)
    from darrm_opt.mechanisms import table_document

    doc = table_document(kind.certify_table(p, np.zeros(0), teachers="disjoint-nonprivate"))
    assert kind.params_from(doc) == p
    out = kind.output_model.model_validate({**doc, "gamma": [], "solver": "closed-form", "setting": {},
                                            "solve_seconds": 0.0, "created_at": "2026-01-01T00:00:00+00:00"})
    assert out.fallback_sigma == 15.0 and out.fallback_epsilon == 0.5


def test_every_planned_candidate_is_within_budget_and_the_fallback_wins_a_weak_job() -> None:
    from darrm_opt.planning.stability_plan import plan_stability

    plan = plan_stability(25, None, "counts:22=0.8,13..21=0.2", 4, 1.0, 1e-5)
    fbs = [c for c in plan.candidates if c.fallback is not None]
    assert fbs and len(fbs) < len(plan.candidates)
    for c in plan.candidates:
        stated = ((c.epsilon, c.delta) if c.fallback is None else fallback_statement(c.params, 4, c.fallback))
        assert stated == (c.epsilon, c.delta) and c.epsilon <= 1.0 and c.delta <= 1e-5
    assert plan.best.fallback is not None
    assert plan.expected_error == min(c.figures.error for c in plan.candidates)
    without = plan_stability(25, None, "counts:22=0.8,13..21=0.2", 4, 1.0, 1e-5, fallback=False)
    assert plan.expected_error < without.expected_error


@pytest.mark.slow  # CLI subprocesses (the plan about 15 CPU s)
def test_cli_plans_a_fallback_job_aggregates_it_through_a_ledger_and_verifies_it(tmp_path) -> None:
    from cli_helpers import run_cli

    r = run_cli("plan", "--K", "25", "--queries", "4", "--budget", "1,1e-5", "--prior", "counts:22=0.8,13..21=0.2",
                "--teachers", "disjoint-nonprivate", "--mechanism", "stability", "--format", "json", "-q", "--out",
                str(tmp_path / "job.json"),
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "job.json").read_text())
    assert doc["kind"] == "stability" and doc["fallback_sigma"] > 0 and doc["fallback_epsilon"] > 0
    p = mechanism("stability").params_from(doc)
    assert (doc["certificate"]["epsilon"], doc["certificate"]["delta"]) == p.statement()
    assert doc["certificate"]["epsilon"] <= 1.0 and doc["certificate"]["delta"] <= 1e-5
    votes = np.random.default_rng(2).integers(0, 2, size=(4, 25))
    (tmp_path / "votes.csv").write_text("".join(",".join(map(str, row)) + "\n" for row in votes))
    args = ("aggregate", "--table", str(tmp_path / "job.json"), "--votes", str(tmp_path / "votes.csv"),
            "--ledger-db", str(tmp_path / "l.db"), "--ledger", "job")
    r = run_cli(*args, "--epsilon-budget", "1", "--delta-budget", "1e-5", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["answers"]) == 4 and set(out["answers"]) <= {BOTTOM, 0, 1}
    r = run_cli("verify", str(tmp_path / "job.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr + r.stdout
    doc["fallback_sigma"] *= 0.9  # a tampered σ: the stored certificate no longer holds
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    r = run_cli("verify", str(tmp_path / "bad.json"), cwd=tmp_path)
    assert r.returncode != 0
