"""The stability-based release's runtime (darrm_opt.mechanisms.stability): the law of its answers against the
exact law of the test, the cut-off, the state's round trip (a restart neither resets nor reveals ρ), the quota,
and an end-to-end job whose empirical ⊥ rate lies in the binomial range of the planned figure."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms.stability import BOTTOM, StabilityParams, StabilityRelease, StabilityState
from darrm_opt.privacy.stability import DistanceLaw, SvtParams, dlap_cdf, dlap_pmf, job_error


def test_one_query_jobs_follow_the_exact_law_of_the_test() -> None:
    """Fresh jobs of one query on a histogram with d = 2: Pr[⊥] = Σ_z Pr[ρ = z]·Pr[s·2 + ν ≤ T + z]."""
    svt = SvtParams(1, 2, 3, 1, 1)
    rel = StabilityRelease(StabilityParams(9, 3, svt, 5))
    h = np.array([[6, 2, 1]])  # g = 4, d = 1
    rng = np.random.default_rng(3)
    n, bottom = 5_000, 0
    for _ in range(n):
        state = rel.open(rng.bytes)
        out, _ = rel.answer(state, h, rng.bytes)
        assert out[0] in (BOTTOM, 0)
        bottom += out[0] == BOTTOM
    z = np.arange(-400, 401)
    exact = float(dlap_pmf(2, z) @ dlap_cdf(3, svt.threshold + z - 1))
    assert stats.binomtest(bottom, n, exact).pvalue > 1e-4
    assert 0.2 < exact < 0.8


def test_cut_off_then_bottom_without_noise_and_ties_split_uniformly() -> None:
    svt = SvtParams(1, 1, 1, 1000, 2)  # every query is unstable
    rel = StabilityRelease(StabilityParams(5, None, svt, 10))
    rng = np.random.default_rng(1)
    out, state = rel.answer(rel.open(rng.bytes), [5, 0, 3, 4], rng.bytes)
    assert out.tolist() == [BOTTOM] * 4 and state.unstable == 2 and state.public(rel.params)["halted"]
    free = StabilityRelease(StabilityParams(4, 3, SvtParams(1, 1, 1, -1000, 1), 4000))
    st = StabilityState(0)
    out, st = free.answer(st, np.array([[2, 2, 0]] * 3000), rng.bytes)  # ties always pass here
    assert set(out.tolist()) == {0, 1} and stats.binomtest(int((out == 0).sum()), 3000, 0.5).pvalue > 1e-4
    assert st.answered == 3000 and st.unstable == 0


def test_state_round_trip_and_quota() -> None:
    rel = StabilityRelease(StabilityParams(5, None, SvtParams(2, 3, 4, 1, 1), 3))
    rng = np.random.default_rng(2)
    state = rel.open(rng.bytes)
    _, state = rel.answer(state, [5, 4], rng.bytes)
    again = StabilityState.from_json(state.to_json())
    assert again == state and "rho" not in state.public(rel.params)
    with pytest.raises(InvalidParameter, match="queries"):
        rel.answer(again, [5, 5], rng.bytes)
    with pytest.raises(InvalidParameter, match="state"):
        StabilityState.from_json('{"rho": 1}')
    with pytest.raises(InvalidParameter, match="votes"):
        rel.answer(again, [6], rng.bytes)


def test_end_to_end_bottom_rate_within_the_binomial_range_of_the_plan() -> None:
    """Votes drawn from a law of d, released job by job: the ⊥ count over all jobs is within the binomial
    range of the exact expected share (c = 2, Q = 6, jobs independent)."""
    svt = SvtParams(2, 3, 4, 6, 2)
    K, Q, jobs = 11, 6, 1000
    alpha = stats.binom.pmf(np.arange(K + 1), K, 0.7)
    gaps = np.abs(2 * np.arange(K + 1) - K)
    mass = np.bincount(np.maximum(0, (gaps + 1) // 2 - 1), weights=alpha)
    expected = job_error(svt, DistanceLaw(mass, np.zeros_like(mass)), Q).bottom_share
    rel = StabilityRelease(StabilityParams(K, None, svt, Q))
    rng = np.random.default_rng(11)
    bottoms = 0
    for _ in range(jobs):
        L = rng.binomial(K, 0.7, size=Q)
        out, _ = rel.answer(rel.open(rng.bytes), L, rng.bytes)
        bottoms += int((out == BOTTOM).sum())
        majority = (L > K / 2).astype(int)
        assert np.all((out == BOTTOM) | (out == majority))
    # the Q answers of a job are dependent (one ρ): compare job-level means by a normal range with the
    # per-job variance bounded by Q² p(1 − p)
    p = expected
    sd = math.sqrt(jobs * Q * Q * p * (1 - p))
    assert abs(bottoms - jobs * Q * p) < 5 * sd
    assert 0.05 < p < 0.95


def test_a_ledger_job_fills_its_quota_then_opens_new_jobs() -> None:
    """The kind's state across calls (Stability.job_units, run_job): rows first finish the current job, then
    open jobs of ``quota`` rows, each with a fresh ρ; the units paid are the jobs opened."""
    import json

    from darrm_opt.mechanisms import mechanism

    m = mechanism("stability")
    p = StabilityParams(61, 3, SvtParams(100, 100, 100, 1200, 2), 4)
    rng = np.random.default_rng(5)
    h = np.array([[61, 0, 0]] * 11)
    assert m.job_units(p, None, 0) == 0 and m.job_units(p, None, 1) == 1 and m.job_units(p, None, 9) == 3
    out, state = m.run_job(p, None, h[:3], rng.bytes)
    s1 = json.loads(state)
    assert (s1["jobs"], s1["current"]["queries"]) == (1, 3) and m.job_units(p, state, 1) == 0
    assert m.job_units(p, state, 2) == 1 and m.job_units(p, state, 9) == 2
    out, state = m.run_job(p, state, h[3:11], rng.bytes)
    s2 = json.loads(state)
    assert (s2["jobs"], s2["current"]["queries"]) == (3, 3) and list(out) == [0] * 8
    with pytest.raises(InvalidParameter):
        m.run_job(p, '{"rho": 1}', h[:1], rng.bytes)
