"""Amplification by sampling m of K disjoint teachers (darrm_opt.privacy.subsample): the amplified pair
against the exact output law of the subsampled mechanism (brute force over every vote vector), γ = 1, and
properties of the construction on random symmetric pairs."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.neighbours import PateParams, signs
from darrm_opt.optimize.pate_setting import solve_pate
from darrm_opt.privacy.pair_profile import pate_profile
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.subsample import (
    amplified_delta,
    amplified_epsilon,
    amplified_vertices,
    amplify_profile,
    vertices_of_pair,
)

XS = [0.05, 0.3, 0.7, 0.95, 1.0, 1.05, 1.3, 1.8, 2.7, 4.0, 7.5, 20.0]


def curve(vertices, x: float) -> float:
    """H_x of the pair of an envelope: max_v (a_v − x b_v)."""
    return max(a - x * b for b, a in vertices)


def hockey(p: list[float], q: list[float], x: float) -> float:
    return sum(max(0.0, a - x * b) for a, b in zip(p, q, strict=True))


def subsampled_one(K: int, m: int, gamma: np.ndarray, votes: tuple[int, ...]) -> float:
    """Pr[answer = 1] of the m-teacher table on a uniform m-subset of ``votes``: the average over every
    m-subset of ½ + ½ s_j γ(j), j the subset's 1-votes (a fair coin at a tie of an even m)."""
    s = signs(m)
    subsets = list(itertools.combinations(range(K), m))
    return sum(0.5 + 0.5 * s[j] * gamma[j] for j in (sum(votes[i] for i in S) for S in subsets)) / len(subsets)


@pytest.mark.parametrize(("K", "m", "eps", "delta"), [(5, 3, 0.5, 0.0), (6, 4, 1.0, 1e-3), (6, 2, 0.3, 0.0),
                                                      (4, 3, 2.0, 1e-2), (6, 1, 0.8, 0.0)])
def test_amplified_pair_dominates_the_exact_subsampled_law(K, m, eps, delta):
    sol = solve_pate(PateParams(m, eps, delta))
    gamma = np.asarray(sol.gamma)
    base = pate_profile(PateParams(m, eps, delta), gamma)
    amp = amplify_profile(base, m, K)
    one = {v: subsampled_one(K, m, gamma, v) for v in itertools.product((0, 1), repeat=K)}
    worst = dict.fromkeys(XS, 0.0)
    for v in one:
        for i in range(K):
            w = v[:i] + (1 - v[i],) + v[i + 1:]
            p, q = [one[v], 1 - one[v]], [one[w], 1 - one[w]]
            for x in XS:  # both orders: (v, w) and, in its turn, (w, v)
                worst[x] = max(worst[x], hockey(p, q, x))
    for x in XS:
        assert worst[x] <= curve(amp.vertices, x) + 1e-15, (x, worst[x])
        assert worst[x] <= curve(base.vertices, x) + 1e-15
    # amplification is real: at x = e^ε the amplified curve is γ times the base's, well below it
    g = m / K
    x1 = math.exp(eps)
    assert curve(amp.vertices, 1 + g * (x1 - 1)) == pytest.approx(g * curve(base.vertices, x1), abs=1e-12)
    assert amp.delta(amplified_epsilon(eps, m, K)) <= amplified_delta(delta, m, K) * (1 + 1e-9) + 1e-15
    # the ledger's composition of the amplified pair costs less than the base pair's
    assert exact_epsilon([(amp, 4)], 0.05, coarse=True) < exact_epsilon([(base, 4)], 0.05, coarse=True)


def test_rate_one_is_the_identity_and_the_statement():
    base = pate_profile(PateParams(5, 0.7, 0.0), np.asarray(solve_pate(PateParams(5, 0.7, 0.0)).gamma))
    assert amplify_profile(base, 5, 5) is base
    # the vertex map at γ = 1 gives back the curve of a symmetric pair exactly (up to one rounding)
    again = amplified_vertices(base.vertices, 5, 5)
    for x in XS:
        assert curve(again, x) == pytest.approx(curve(base.vertices, x), abs=1e-12)
    # (ε, δ) → (ln(1 + γ(e^ε − 1)), γδ), rounded up
    assert amplified_epsilon(1.0, 1, 4) == pytest.approx(math.log(1 + (math.e - 1) / 4), rel=1e-11)
    assert amplified_epsilon(1.0, 1, 4) >= math.log1p((math.e - 1) / 4)
    assert amplified_delta(1e-5, 1, 4) >= 2.5e-6
    assert amplified_epsilon(0.3, 7, 7) == 0.3


@pytest.mark.parametrize("m", [0, 6, 2.5, True, "x"])
def test_subsample_outside_1_to_K_is_refused(m):
    base = pate_profile(PateParams(3, 0.7, 0.0), np.asarray(solve_pate(PateParams(3, 0.7, 0.0)).gamma))
    with pytest.raises(InvalidParameter, match="subsample"):
        amplify_profile(base, m, 5)


def explicit_pair(pos, r, dinf, g):
    """The brief's atom-by-atom construction: (q + γ(p − q), q) and its mirror, γ·δ∞ on both sides, the
    rest at loss 0."""
    atoms = []
    for p, q in pos:
        atoms += [(q + g * (p - q), q), (q, q + g * (p - q))]
    r2 = r + (1 - g) * (sum(p - q for p, q in pos) + dinf)
    atoms.append((r2, r2))
    atoms.append((0.0, g * dinf))
    return atoms, g * dinf


pairs = st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0.01, 6.0)), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(pairs, st.floats(0.0, 0.3), st.floats(0.0, 0.5), st.integers(1, 9), st.integers(0, 9))
def test_random_symmetric_pairs(raw, zero, dinf_w, K, extra):
    # a symmetric pair: atoms (p, q) of loss ℓ > 0 and their mirrors (q, p), a zero-loss atom, δ∞ both ways
    weights = [w for w, _ in raw]
    total = 2 * sum(weights) + zero + dinf_w
    pos = [(w / total * 2 * math.exp(l) / (1 + math.exp(l)), w / total * 2 / (1 + math.exp(l)))
           for w, l in raw]
    pos = [(p, q) for p, q in pos if p > q]
    r, dinf = zero / total, dinf_w / total
    atoms = pos + [(q, p) for p, q in pos] + [(r, r), (0.0, dinf)]
    base = vertices_of_pair(atoms, dinf)
    K = K + extra + 1
    m = max(1, min(K, K - extra))
    g = m / K
    amp = amplified_vertices(base, m, K)
    # a concave envelope from b = 0 to (1, 1): P-masses and Q-masses each sum to 1, its curve is convex
    assert amp[0][0] == 0.0 and amp[-1] == (1.0, 1.0)
    for o, a, b in zip(amp, amp[1:], amp[2:]):
        o_, a_, b_ = ([Fraction(c) for c in pt] for pt in (o, a, b))
        assert (a_[0] - o_[0]) * (b_[1] - o_[1]) <= (a_[1] - o_[1]) * (b_[0] - o_[0])
    ex_atoms, ex_inf = explicit_pair(pos, r, dinf, g)
    assert sum(p for p, _ in ex_atoms) + ex_inf == pytest.approx(1.0, abs=1e-12)
    assert sum(q for _, q in ex_atoms) == pytest.approx(1.0, abs=1e-12)
    ex = vertices_of_pair(ex_atoms, ex_inf)
    for x in XS:
        h = curve(base, 1 + (x - 1) / g) if x >= 1 else None
        want = g * h if h is not None else 1 - x + x * g * curve(base, 1 + (1 / x - 1) / g)
        got = curve(amp, x)
        assert got >= want - 1e-15  # an upper bound
        assert got == pytest.approx(want, abs=1e-12)  # and tight on a symmetric pair
        assert curve(ex, x) == pytest.approx(want, abs=1e-12)  # the explicit pair has the same curve
