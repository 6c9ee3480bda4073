"""GNMax on subsampled teachers: the amplified discrete Gaussian pair (BBG 2018 Thm 10 as an exact finite
pair) against the exact law of the subsampled answer, BBG's closed form, and the plain pair at m = K."""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms.vote_samplers import GnmaxSampler
from darrm_opt.privacy.gaussian_profile import GaussianProfile, discrete_pair, discrete_tail, subsampled_pair
from darrm_opt.privacy.profile import profile_from_dict


def histograms(K: int, C: int) -> list[tuple[int, ...]]:
    return [h for h in itertools.product(range(K + 1), repeat=C) if sum(h) == K]


@lru_cache(maxsize=None)
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
