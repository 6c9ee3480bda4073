"""The structured sweep of a symmetric γ reads the tables of the prefix sums s > K/2 as the negated transposes
of those of K − s (darrm_opt.certify.structured, "Reflection"): checked against the direct tables of every s,
against the direct sweep (``reflect=False``), and against brute force over every multiset at small K; a
non-symmetric γ (and every γ at even K) keeps the direct path."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_exact_recheck import all_multisets, float_costs

from darrm_opt.certify.slopes import slope_front
from darrm_opt.certify.structured import StructuredSweepProblem
from darrm_opt.certify.sweep import error_bound, signed_h, sweep
from darrm_opt.model.baselines import gamma_sub
from darrm_opt.model.corners import corners, n_multisets
from darrm_opt.model.params import Params


def sym_gamma(K: int, seed: int) -> np.ndarray:
    half = np.random.default_rng(seed).random((K + 1) // 2)
    return np.concatenate([half[::-1], half])


def problem(params: Params, g: np.ndarray, reflect=None) -> StructuredSweepProblem:
    return StructuredSweepProblem(corners(params), signed_h(g), math.exp(params.m * params.epsilon),
                                  reflect=reflect)


def bound(prob: StructuredSweepProblem) -> float:
    return error_bound(prob.K, prob.E, float(np.abs(prob.h).max()))


@pytest.mark.parametrize("K,m,td,seed", [(9, 3, 1e-5, 0), (31, 1.5, 0.05, 1), (21, 2, 0.2, 2)])
def test_reflected_tables_are_the_negated_transposes_and_meet_the_direct_ones(K, m, td, seed):
    prob = problem(Params(K, m, teacher_delta=td), sym_gamma(K, seed))
    assert prob.reflect
    eb = bound(prob)
    for s in range((K + 1) // 2, K + 1):
        got, direct, mirror = prob._tables(s), prob._direct_tables(s), prob._direct_tables(K - s)
        assert got.s == s
        np.testing.assert_array_equal(got.offsets, direct.offsets)
        np.testing.assert_array_equal(got.T1, -mirror.T1.T)  # bit for bit
        np.testing.assert_array_equal(got.T2, -mirror.T2.T)
        assert got.T1.flags.c_contiguous and got.T2.flags.c_contiguous
        np.testing.assert_allclose(got.T1, direct.T1, rtol=0, atol=eb)  # the same numbers up to float error
        np.testing.assert_allclose(got.T2, direct.T2, rtol=0, atol=eb)
        # the sweep reads them block by block: each block's rows are those of its u3 group
        parts = list(prob._reflected_blocks(mirror))
        assert [(it.s, it.start, it.stop) for _, it in parts] == [(s, u3, u3 + 1) for u3 in range(s + 1)]
        for part, it in parts:
            r0, r1 = int(got.offsets[it.start]), int(got.offsets[it.start + 1])
            assert part.offsets[it.start] == 0 and part.T1.shape[0] == r1 - r0
            np.testing.assert_array_equal(part.T1, got.T1[r0:r1])
            np.testing.assert_array_equal(part.T2, got.T2[r0:r1])


@pytest.mark.parametrize("params,seed", [(Params(7, 3), 3), (Params(9, 1.5, teacher_delta=0.05), 4),
                                         (Params(7, 2, epsilon=0.5, teacher_delta=0.2), None)])
def test_every_multiset_of_the_reflected_sweep_against_brute_force(params, seed):
    """With a level below every cost the sweep lists every multiset once with its swept cost: each within the
    error bound of a brute-force evaluation over all vote vectors."""
    K = params.K
    g = gamma_sub(K, params.m).astype(float) if seed is None else sym_gamma(K, seed)
    prob = problem(params, g)
    assert prob.reflect
    res = sweep(prob, near=-10.0, near_cap=10**6, workers=2)
    ms = all_multisets(K, 8)
    brute = dict(zip(ms, float_costs(params, g, ms), strict=True))
    swept = {tuple(int(c) for c in row): float(c) for row, c in zip(res.near, res.near_costs, strict=True)}
    assert len(swept) == res.near.shape[0] == len(ms) == res.multisets == n_multisets(K, 8)
    tol = bound(prob) + 1e-14  # the brute force's own float error is below 1e-14 at K ≤ 9
    assert max(abs(swept[n] - brute[n]) for n in ms) <= tol
    assert res.max_cost == pytest.approx(max(brute.values()), abs=tol)
    assert brute[tuple(res.worst)] == pytest.approx(max(brute.values()), abs=2 * tol)


@pytest.mark.parametrize("K,m,td,which", [(31, 3, 1e-5, "sub"), (33, 1.5, 1e-3, "random"), (41, 5, 1e-5, "random")])
def test_symmetric_sweep_matches_the_direct_sweep(K, m, td, which):
    """The same maximum, multiset count, near set and violators as the direct sweep of every s, within the
    error bound; the slope front likewise."""
    params = Params(K, m, teacher_delta=td)
    g = gamma_sub(K, m).astype(float) if which == "sub" else sym_gamma(K, K)
    fast, direct = problem(params, g), problem(params, g, reflect=False)
    assert fast.reflect and not direct.reflect
    eb = bound(fast)
    a, b = (sweep(p, workers=2) for p in (fast, direct))
    assert a.multisets == b.multisets == n_multisets(K, 8)
    assert abs(a.max_cost - b.max_cost) <= 2 * eb
    near = a.max_cost - 0.02
    a, b = (sweep(p, threshold=near, top=100, near=near, near_cap=10**6, workers=2) for p in (fast, direct))
    assert not a.near_overflow and not b.near_overflow
    A = {tuple(r): c for r, c in zip(a.near.tolist(), a.near_costs, strict=True)}
    B = {tuple(r): c for r, c in zip(b.near.tolist(), b.near_costs, strict=True)}
    assert len(A) == a.near.shape[0] and len(B) == b.near.shape[0]
    clear = lambda D: {n for n, c in D.items() if c > near + 2 * eb}  # noqa: E731  (not at the level's edge)
    assert clear(A) <= set(B) and clear(B) <= set(A) and len(A) > 100
    assert max(abs(A[n] - B[n]) for n in set(A) & set(B)) <= 2 * eb
    np.testing.assert_allclose(np.sort(a.violator_costs), np.sort(b.violator_costs), rtol=0, atol=2 * eb)
    xs = [1.0, fast.E, 3.0, 20.0]
    fa, fb = (slope_front(p, workers=2).evaluate(xs) for p in (fast, direct))
    np.testing.assert_allclose(fa.best, fb.best, rtol=0, atol=2 * eb)


def test_a_symmetric_sweep_computes_the_tables_of_half_the_prefix_sums():
    K = 21
    prob = problem(Params(K, 3), np.ones(K + 1))
    items = prob.plan()
    assert [(it.s, it.start, it.stop, it.mirror) for it in items] == [(s, 0, s + 1, True) for s in range(11)]
    assert [prob.order_rank(s) for s in (0, K, 1, K - 1, 10, 11)] == [0, 1, 2, 3, 20, 21]
    calls = []
    orig = prob._direct_tables
    prob._direct_tables = lambda s: calls.append(s) or orig(s)
    res = sweep(prob, workers=2)
    assert sorted(calls) == list(range(11)) and res.multisets == n_multisets(K, 8)
    split = prob.plan(rows_per_item=4)  # tests' split plans cover the same blocks in the same order
    assert [it.s for it in split if it.start == 0] == [0, 21, 1, 20, 2, 19, 3, 18, 4, 17, 5, 16, 6, 15, 7, 14,
                                                       8, 13, 9, 12, 10, 11]
    assert sum(prob.item_multisets(it) for it in split) == n_multisets(K, 8)
    assert sweep(prob, workers=1).max_cost == res.max_cost


@pytest.mark.parametrize("case", ["asymmetric", "forced off"])
def test_other_gammas_take_the_direct_path(case):
    K = 15
    params = Params(K, 3)
    g = sym_gamma(K, 5)
    if case == "asymmetric":
        g[2] *= 0.5  # one value off the mirror: both signs are swept from direct tables of every s
    prob = problem(params, g, reflect=False if case == "forced off" else None)
    assert not prob.reflect
    items = prob.plan()
    assert [it.s for it in items] == list(range(K + 1)) and not any(it.mirror for it in items)
    for s in (3, 12):
        np.testing.assert_array_equal(prob._tables(s).T1, prob._direct_tables(s).T1)
    assert prob.order_rank(12) == 12
