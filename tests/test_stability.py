"""Stability-based release with a sparse-vector test (darrm_opt.privacy.stability): the distance to instability
against a breadth-first search over histograms, its sensitivity and the PTR property by brute force, the
discrete Laplace's law against direct sums, the SVT's ε and the job's δ against the exact output laws of tiny
jobs on every neighbouring pair, and the exact expected error against an independent dynamic programme."""

from __future__ import annotations

import itertools
import math
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.stability import (
    DistanceLaw,
    SvtParams,
    _stop_sums,
    binary_law,
    dlap_cdf,
    dlap_pmf,
    dlap_sf,
    instability_distance,
    job_error,
    multiclass_law,
    plurality,
    ptr_delta,
    svt_epsilon,
)


def histograms(K: int, C: int) -> list[tuple[int, ...]]:
    return [h for h in itertools.product(range(K + 1), repeat=C) if sum(h) == K]


def neighbours(h: tuple[int, ...]) -> list[tuple[int, ...]]:
    out = []
    for a, b in itertools.permutations(range(len(h)), 2):
        if h[a] > 0:
            g = list(h)
            g[a] -= 1
            g[b] += 1
            out.append(tuple(g))
    return out


@pytest.mark.parametrize(("K", "C"), [(1, 2), (2, 2), (7, 2), (8, 2), (5, 3), (9, 3), (8, 4), (6, 5)])
def test_distance_is_the_breadth_first_distance_to_the_unstable_set(K: int, C: int) -> None:
    hs = histograms(K, C)
    unstable = {h for h in hs if any(plurality(n) != plurality(h) for n in neighbours(h))}
    dist = {h: 0 for h in unstable}
    todo = deque(unstable)
    while todo:
        h = todo.popleft()
        for n in neighbours(h):
            if n not in dist:
                dist[n] = dist[h] + 1
                todo.append(n)
    assert all(instability_distance(h) == dist.get(h, 10**9) for h in hs)
    assert any(d >= 1 for d in dist.values()) == (K >= 3)


@pytest.mark.parametrize(("K", "C"), [(9, 2), (10, 2), (9, 3), (8, 4)])
def test_sensitivity_one_and_stable_pluralities_agree_at_every_neighbour(K: int, C: int) -> None:
    for h in histograms(K, C):
        d = instability_distance(h)
        for n in neighbours(h):
            assert abs(instability_distance(n) - d) <= 1
            if d >= 1:
                assert plurality(n) == plurality(h) is not None


@pytest.mark.parametrize("t", [1, 2, 7])
def test_discrete_laplace_law_against_direct_sums(t: int) -> None:
    x = np.arange(-60 * t, 60 * t + 1)
    p = dlap_pmf(t, x)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert p[x == 1][0] / p[x == 0][0] == pytest.approx(math.exp(-1 / t), rel=1e-14)
    for v in (-5, -1, 0, 3):
        assert dlap_cdf(t, np.array([v]))[0] == pytest.approx(p[x <= v].sum(), rel=1e-12)
        assert dlap_sf(t, np.array([v]))[0] == pytest.approx(p[x > v].sum(), rel=1e-12)
    far = dlap_cdf(t, np.array([-400 * t]))[0]  # a far tail keeps its relative precision
    assert far == pytest.approx(math.exp(-400) / (1 + math.exp(-1 / t)), rel=1e-12)


def transcript_laws(p: SvtParams, d: tuple[int, ...], zmax: int = 400) -> dict[tuple[str, ...], float]:
    """Exact law of the SVT transcript (S stable, U unstable, H halted) for one fixed sequence of distances."""
    z = np.arange(-zmax, zmax + 1)
    pz = dlap_pmf(p.t_rho, z)
    unstable = [dlap_cdf(p.t_nu, p.threshold + z - p.scale * di) for di in d]
    out: dict[tuple[str, ...], float] = {}

    def walk(prefix: tuple[str, ...], prob: np.ndarray, count: int) -> None:
        i = len(prefix)
        if count == p.cutoff or i == len(d):
            out[prefix + ("H",) * (len(d) - i)] = float(prob.sum())
            return
        walk(prefix + ("U",), prob * unstable[i], count + 1)
        walk(prefix + ("S",), prob * (1 - unstable[i]), count)

    walk((), pz, 0)
    return out


@pytest.mark.parametrize("params", [SvtParams(1, 2, 3, 1, 1), SvtParams(2, 3, 5, 2, 2), SvtParams(1, 1, 4, 0, 2)])
def test_svt_epsilon_bounds_every_transcript_ratio(params: SvtParams) -> None:
    eps = svt_epsilon(params)
    worst = 0.0
    for d in itertools.product(range(4), repeat=3):
        for shift in itertools.product((-1, 0, 1), repeat=3):
            d2 = tuple(a + s for a, s in zip(d, shift))
            if min(d2) < 0:
                continue
            P, P2 = transcript_laws(params, d), transcript_laws(params, d2)
            for key, v in P.items():
                worst = max(worst, math.log(v / P2[key]))
    assert worst <= eps * (1 + 1e-9)
    assert worst >= 0.3 * eps  # the bound is not vacuous on these jobs


def release_law(p: SvtParams, votes: np.ndarray) -> dict[tuple, float]:
    """The exact law of the released transcript of K binary teachers' votes (K × Q): per query (S, class),
    (U,) or (H,); a tie released stable is a fair coin."""
    K, Q = votes.shape
    hs = [(K - int(votes[:, i].sum()), int(votes[:, i].sum())) for i in range(Q)]
    d = tuple(instability_distance(h) for h in hs)
    out: dict[tuple, float] = {}
    for word, prob in transcript_laws(p, d).items():
        options = []
        for a, h in zip(word, hs):
            if a == "S":
                f = plurality(h)
                options.append([(("S", f), 1.0)] if f is not None else [(("S", 0), 0.5), (("S", 1), 0.5)])
            else:
                options.append([((a,), 1.0)])
        for combo in itertools.product(*options):
            key = tuple(o for o, _ in combo)
            out[key] = out.get(key, 0.0) + prob * math.prod(w for _, w in combo)
    return out


@pytest.mark.parametrize("params", [SvtParams(1, 1, 2, 1, 1), SvtParams(1, 1, 3, 2, 2), SvtParams(2, 2, 3, 1, 1)])
def test_release_is_epsilon_delta_private_on_every_neighbouring_pair(params: SvtParams) -> None:
    """K = 4 teachers, Q = 2 binary queries: every dataset of votes and every teacher's changed row; the
    hockey-stick divergence at the stated ε is at most the stated δ (and positive: δ is needed)."""
    K, Q = 4, 2
    eps, delta = svt_epsilon(params), ptr_delta(params, Q)
    worst = 0.0
    rows = list(itertools.product((0, 1), repeat=Q))
    for flat in itertools.product(rows, repeat=K):
        votes = np.array(flat)
        P = release_law(params, votes)
        for k, row in itertools.product(range(K), rows):
            if row == flat[k]:
                continue
            other = votes.copy()
            other[k] = row
            P2 = release_law(params, other)
            div = sum(max(0.0, v - math.exp(eps) * P2.get(key, 0.0)) for key, v in P.items())
            worst = max(worst, div)
    assert worst <= delta * (1 + 1e-9) + 1e-15
    assert worst > 0.0


def test_ptr_delta_against_a_double_sum_and_its_monotonicity() -> None:
    p = SvtParams(3, 4, 9, 20, 1)
    z = np.arange(-3000, 3001)
    pz = dlap_pmf(p.t_rho, z)
    direct = float(pz @ dlap_sf(p.t_nu, p.threshold + z))  # c = 1: Pr[ν > T + ρ]
    assert ptr_delta(p, 10) == pytest.approx(direct, rel=1e-8)
    assert ptr_delta(p, 10) >= direct
    c3 = SvtParams(3, 4, 9, 20, 3)
    assert ptr_delta(c3, 2) < ptr_delta(c3, 3) == ptr_delta(c3, 50)  # min(c, Q) trials
    assert ptr_delta(SvtParams(3, 4, 9, 21, 1), 5) < ptr_delta(p, 5)


def dp_error(p: SvtParams, law: DistanceLaw, Q: int, zmax: int = 2000) -> tuple[float, float]:
    """Independent: per ρ = z, the law of the unstable count carried query by query."""
    err = ans = 0.0
    for z in range(-zmax, zmax + 1):
        pz = float(dlap_pmf(p.t_rho, np.array([z]))[0])
        x = p.threshold + z - p.scale * np.arange(law.mass.size)
        u = float(dlap_cdf(p.t_nu, x) @ law.mass)
        w = float(dlap_sf(p.t_nu, x) @ law.wrong)
        count = np.zeros(p.cutoff + 1)
        count[0] = 1.0
        for _ in range(Q):
            running = count[: p.cutoff].sum()
            err += pz * (count[p.cutoff] + running * (u + w))
            ans += pz * running * (1 - u)
            nxt = np.zeros_like(count)
            nxt[: p.cutoff] += count[: p.cutoff] * (1 - u)
            nxt[1:] += count[: p.cutoff] * u
            nxt[p.cutoff] += count[p.cutoff]
            count = nxt
    return err / Q, ans


@pytest.mark.parametrize(("p", "Q"), [(SvtParams(2, 3, 4, 5, 1), 7), (SvtParams(1, 2, 3, 3, 3), 12),
                                      (SvtParams(2, 5, 2, 9, 2), 1)])
def test_job_error_against_a_dynamic_programme(p: SvtParams, Q: int) -> None:
    rng = np.random.default_rng(5)
    mass = rng.random(6)
    mass /= mass.sum()
    law = DistanceLaw(mass, mass * rng.random(6) * 0.3)
    got = job_error(p, law, Q)
    err, ans = dp_error(p, law, Q)
    assert got.error == pytest.approx(err, rel=1e-9)
    assert got.answered == pytest.approx(ans, rel=1e-9)
    assert got.error >= got.bottom_share


@settings(max_examples=40, deadline=None)
@given(st.floats(1e-12, 0.9), st.integers(1, 400), st.integers(1, 6))
def test_stop_sums_against_their_definition(u: float, Q: int, c: int) -> None:
    from scipy import stats

    R, S = _stop_sums(np.array([u]), Q, c)
    i = np.arange(Q)
    running = stats.binom.cdf(c - 1, i, u)
    assert R[0] == pytest.approx(running.sum(), rel=1e-9)
    assert S[0] == pytest.approx(stats.binom.sf(c - 1, i, u).sum(), rel=1e-7, abs=1e-300)


def test_laws_of_d_under_the_priors() -> None:
    K = 11
    law = binary_law(K, "paper")  # L ~ Binomial(11, 0.75), g = |2L − 11|, d = ⌈g/2⌉ − 1
    from scipy import stats

    alpha = stats.binom.pmf(np.arange(K + 1), K, 0.75)
    expect = np.zeros(law.mass.size)
    for L in range(K + 1):
        expect[max(0, (abs(2 * L - K) + 1) // 2 - 1)] += alpha[L]
    assert np.allclose(law.mass, expect, rtol=1e-12, atol=0)
    assert not law.wrong.any()
    mc = multiclass_law(6, 3, "paper")  # against an enumeration of Multinomial(6; 0.75, 0.125, 0.125)
    mass, wrong = np.zeros(mc.mass.size), np.zeros(mc.mass.size)
    for h in histograms(6, 3):
        pr = stats.multinomial.pmf(h, 6, [0.75, 0.125, 0.125])
        top = [c for c in range(3) if h[c] == max(h)]
        d = instability_distance(h)
        mass[d] += pr
        wrong[d] += pr * (1 - (1 / len(top) if 0 in top else 0))
    assert np.allclose(mc.mass, mass, rtol=1e-9, atol=1e-15)
    assert np.allclose(mc.wrong, wrong, rtol=1e-9, atol=1e-15)


def test_parameters_are_validated() -> None:
    with pytest.raises(InvalidParameter, match="t_nu"):
        SvtParams(1, 1, 0, 1, 1)
    with pytest.raises(InvalidParameter, match="threshold"):
        SvtParams(1, 1, 1, 1.5, 1)  # type: ignore[arg-type]
    assert svt_epsilon(SvtParams(3, 7, 11, 0, 2)) >= 3 / 7 + 12 / 11


@pytest.mark.parametrize("t", [1, 3, 40])
def test_discrete_laplace_sampler_matches_its_pmf(t: int) -> None:
    """χ² of 100 000 seeded draws against DLap(t) (cells of expectation ≥ 20, tails pooled); with power: the
    same draws reject DLap(1.05 t)."""
    from scipy import stats

    from darrm_opt.sampling import discrete_laplace

    x = discrete_laplace(t, 100_000, np.random.default_rng(t).bytes)
    support = np.arange(-40 * t, 40 * t + 1)

    def pvalue(p: np.ndarray) -> float:
        expected = p * x.size
        observed = np.bincount(np.clip(x, -40 * t, 40 * t) + 40 * t, minlength=support.size)
        keep = expected >= 20
        e = np.append(expected[keep], expected[~keep].sum())
        o = np.append(observed[keep], observed[~keep].sum())
        return float(stats.chisquare(o, e * o.sum() / e.sum())[1])

    assert pvalue(dlap_pmf(t, support)) > 1e-4
    wrong = np.exp(-np.abs(support) / (1.05 * t))
    assert pvalue(wrong / wrong.sum()) < 1e-4
    assert x.dtype == np.int64


def test_discrete_laplace_refuses_a_bad_scale() -> None:
    from darrm_opt.sampling import discrete_laplace

    with pytest.raises(InvalidParameter, match="noise"):
        discrete_laplace(0, 3)


def test_job_profile_is_the_epsilon_delta_pair() -> None:
    from darrm_opt.mechanisms.stability import StabilityParams
    from darrm_opt.privacy.stability import dp_pair_profile

    eps, delta = 1.3, 1e-6
    prof = dp_pair_profile(eps, delta)
    for e in (0.0, 0.4, 1.0, 1.3, 2.0):
        true = delta + (1 - delta) * max(0.0, math.exp(eps) - math.exp(e)) / (1 + math.exp(eps))
        assert prof.delta(e) >= true
        assert prof.delta(e) == pytest.approx(true, rel=1e-12, abs=1e-18)
    p = SvtParams(4, 5, 9, 30, 2)
    jp = StabilityParams(5, None, p, 100).profile()
    assert jp.delta(svt_epsilon(p)) == pytest.approx(ptr_delta(p, 100), rel=1e-12)
    assert jp.delta(svt_epsilon(p)) >= ptr_delta(p, 100)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 30.0), st.floats(0.0, 0.5), st.floats(0.0, 40.0))
def test_pair_profile_never_below_the_exact_profile(eps: float, delta: float, other: float) -> None:
    from darrm_opt.privacy.stability import dp_pair_profile

    prof = dp_pair_profile(eps, delta)
    true = delta + (1 - delta) * max(0.0, math.exp(eps) - math.exp(other)) / (1 + math.exp(eps))
    assert prof.delta(other) >= true * (1 - 1e-15)
    assert prof.delta(other) <= true + 1e-12


def test_ptr_delta_keeps_the_digits_of_tiny_tails() -> None:
    """Where Pr[ν > T + z] is far below float64's resolution of 1 − Pr[ν ≤ T + z], δ still sums it: against
    Pr[ν − ρ > T] for c = 1 (ν, ρ ~ DLap(2)) summed term by term, Σ_{y, k > T} p(y)·p(y − k), all positive."""
    t, T = 2, 120
    p = SvtParams(1, t, t, T, 1)
    y = np.arange(-1500, 1501)
    k = np.arange(T + 1, T + 1200)
    exact = float((dlap_pmf(t, y)[:, None] * dlap_pmf(t, y[:, None] - k[None, :])).sum())
    assert 0 < exact < 1e-20
    assert ptr_delta(p, 1) >= exact
    assert ptr_delta(p, 1) == pytest.approx(exact, rel=1e-9)
