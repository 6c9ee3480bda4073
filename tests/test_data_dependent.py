"""Data-dependent RDP, its smooth sensitivity (PATE App. B, Alg. 3–5) and the GNSS release (Thm. 23)."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest

from darrm_opt.errors import InvalidParameter
from darrm_opt.experiments.pate_votes import mnist_like_votes
from darrm_opt.model.multiclass import output_distribution
from darrm_opt.privacy.gnmax import (
    log_q_tilde,
    prob_answered,
    rdp_data_dependent_from_log_q,
    rdp_gnmax,
)
from darrm_opt.privacy.query_accounts import account_confident_gnmax, account_gnmax, account_table
from darrm_opt.privacy.query_costs import (
    gnmax_sensitivity_at_distance,
    gnmax_shape,
    table_shape,
    threshold_shape,
)
from darrm_opt.privacy.smooth_sensitivity import dp_tail, gnss_rdp, sanitised_epsilon, smooth_sensitivity


def histograms(K: int, C: int):
    if C == 1:
        yield (K,)
        return
    for a in range(K + 1):
        for rest in histograms(K - a, C - 1):
            yield (a, *rest)


def neighbours(h):
    for a in range(len(h)):
        if h[a]:
            for b in range(len(h)):
                if b != a:
                    x = list(h)
                    x[a] -= 1
                    x[b] += 1
                    yield tuple(x)


@cache
def ball_max(K: int, C: int, values: tuple[float, ...], d: int) -> tuple[float, ...]:
    """max of ``values`` (indexed like histograms(K, C)) over the histograms within d moves, by BFS."""
    H = list(histograms(K, C))
    idx = {h: i for i, h in enumerate(H)}
    cur = np.array(values)
    for _ in range(d):
        cur = np.array([max([cur[i]] + [cur[idx[g]] for g in neighbours(h)]) for i, h in enumerate(H)])
    return tuple(cur)


# ---------------------------------------------------------------------------------------------------
# β(q), q₀, B_U/B_L and the conditions of App. B
# ---------------------------------------------------------------------------------------------------


def test_shaped_cost_agrees_with_thm6_and_reference_values():
    s = gnmax_shape(40.0, 14.0, 10)
    lq = np.linspace(-60.0, s.log_q0, 200)
    ref = np.array([rdp_data_dependent_from_log_q(x, 14.0, 40.0) for x in lq])
    np.testing.assert_allclose(s.beta(lq), ref, rtol=1e-12, atol=0)
    # ../shared/notes/darrm-math.md, PATE reference values (the authors' implementation)
    assert float(s.beta(log_q_tilde([250] + [0] * 9, 40.0))) == pytest.approx(3.1202e-5, rel=1e-4)
    assert float(s.beta(log_q_tilde([200, 30, 20] + [0] * 7, 40.0))) == pytest.approx(1.4256e-3, rel=1e-4)
    assert float(s.beta(log_q_tilde([200, 30, 20] + [0] * 7, 40.0))) == pytest.approx(
        float(rdp_gnmax([200, 30, 20] + [0] * 7, 40.0, 14.0)), rel=1e-12)
    # above q₀ the data-independent λ/σ² (Prop. 8), continuous at q₀ (the crossing)
    assert float(s.beta(s.log_q0 + 1e-3)) == s.beta_star == 14.0 / 1600.0
    assert float(s.beta(s.log_q0)) == pytest.approx(s.beta_star, rel=1e-6)
    assert float(s.beta(-np.inf)) == 0.0


def test_neighbour_bounds_are_inverse_and_bound_every_neighbour():
    s = gnmax_shape(4.0, 3.0, 3)
    lq = np.linspace(-40.0, s.log_q0, 50)
    np.testing.assert_allclose(s.log_bl(s.log_bu(lq)), lq, rtol=1e-9)  # C4
    assert np.all(s.log_bl(lq) <= lq) and np.all(lq <= s.log_bu(lq))
    # Prop. 21 (C2), every histogram of 30 votes over 3 classes and each neighbour
    for h in histograms(30, 3):
        q = float(log_q_tilde(np.array(h, float), 4.0))
        for g in neighbours(h):
            q2 = float(log_q_tilde(np.array(g, float), 4.0))
            assert float(s.log_bl(q)) - 1e-9 <= q2 <= float(s.log_bu(q)) + 1e-9


def test_conditions_checked_and_refused_where_they_fail():
    assert gnmax_shape(40.0, 14.0, 10).conditions  # PATE's MNIST parameters
    bad = gnmax_shape(1.0, 3.0, 3)  # C6 fails (a brute force finds A(d) not smooth there)
    assert not bad.conditions
    with pytest.raises(InvalidParameter, match="C5/C6"):
        gnmax_sensitivity_at_distance([8, 0, 0], bad, 8)


@pytest.mark.parametrize(("K", "C", "sigma", "order", "discrete"), [
    (12, 3, 2.0, 2.0, False), (30, 3, 4.0, 3.0, False), (20, 2, 6.0, 3.0, False),
    (12, 3, 2.0, 2.0, True), (30, 3, 4.0, 3.0, True)])
def test_gnmax_smooth_sensitivity_by_brute_force(K, C, sigma, order, discrete):
    """Over every histogram: A(0) bounds the true local sensitivity of β(q(·)); A(d) bounds the largest true
    local sensitivity within d moves (Alg. 4's claim), and A_n(d) ≤ A_n′(d + 1) for neighbours, so that
    SS_β is β-smooth. ``discrete``: q̃ and B_U / B_L at σ̂ (answers drawn with N_ℤ noise)."""
    from darrm_opt.privacy.query_costs import discrete_gnmax_shape

    s = discrete_gnmax_shape(sigma, order, C, discrete)
    assert s.conditions and (s.q_sigma > sigma) == discrete
    H = list(histograms(K, C))
    idx = {h: i for i, h in enumerate(H)}
    f = s.beta(log_q_tilde(np.array(H, float), s.q_sigma))
    assert np.sum(f < s.beta_star) > 5  # the data-dependent branch is exercised
    A = np.array([gnmax_sensitivity_at_distance(h, s, K) for h in H])
    true_ls = np.array([max(abs(f[i] - f[idx[g]]) for g in neighbours(h)) for i, h in enumerate(H)])
    assert np.all(true_ls <= A[:, 0] + 1e-12)
    for d in (1, 2, 5):
        assert np.all(np.array(ball_max(K, C, tuple(true_ls), d)) <= A[:, d] + 1e-12)
    beta = 0.05
    SS = np.array([smooth_sensitivity(a, beta) for a in A])
    for i, h in enumerate(H):
        for g in neighbours(h):
            j = idx[g]
            assert np.all(A[i, :-1] <= A[j, 1:] + 1e-12)
            assert SS[i] <= math.exp(beta) * SS[j] * (1 + 1e-12)
            assert abs(f[i] - f[j]) <= SS[i] + 1e-12


def test_threshold_shape_is_exact():
    th = threshold_shape(8.0, 1.5, 3.0, 12)
    f = th.cost
    assert np.any(f < 3.0 / (2 * 1.5**2) - 1e-6)  # the data-dependent branch is used somewhere
    for M in range(13):
        ls = max(abs(f[M] - f[x]) for x in (M - 1, M + 1) if 0 <= x <= 12)
        assert th.reach[M, 0] == pytest.approx(ls, abs=1e-15)
        for d in range(4):
            near = [th.reach[x, 0] for x in range(max(0, M - d), min(12, M + d) + 1)]
            assert th.reach[M, d] == pytest.approx(max(near), abs=1e-15)
    # Pr[answered] at the notes' reference point
    assert float(prob_answered(250, 200, 150)) == pytest.approx(0.63056, abs=1e-5)


# ---------------------------------------------------------------------------------------------------
# γ tables
# ---------------------------------------------------------------------------------------------------


def renyi(P, Q, lam):
    P, Q = np.asarray(P), np.asarray(Q)
    return float(np.log(np.sum(P**lam * Q ** (1 - lam))) / (lam - 1))


@pytest.mark.parametrize(("K", "C"), [(7, 3), (6, 4)])
def test_table_rdp_and_sensitivity_by_brute_force(K, C):
    rng = np.random.default_rng(K * C)
    gamma = np.sort(rng.uniform(0.0, 0.9, K + 1))
    gamma[0] = 0.0
    lam = 3.0
    shape = table_shape(K, C, gamma, lam)
    H = list(histograms(K, C))
    idx = {h: i for i, h in enumerate(H)}
    P = {h: output_distribution(h, gamma) for h in H}
    f = np.array([max(max(renyi(P[h], P[g], lam), renyi(P[g], P[h], lam)) for g in neighbours(h)) for h in H])
    states = np.array([shape.state(h) for h in H])
    mine = shape.cost[states]
    assert np.all(f <= mine * (1 + 1e-10) + 1e-14)  # an upper bound at every histogram
    for s in set(states.tolist()):  # and exact per state: the maximum over the histograms of that (g, t)
        assert shape.cost[s] == pytest.approx(float(f[states == s].max()), rel=1e-10, abs=1e-14)
    # q̃ = Pr[output ≠ plurality] = (1 − γ(g))(1 − 1/C) exactly for a unique top
    h = (K - 1, 1) + (0,) * (C - 2)
    assert 1 - P[h][0] == pytest.approx((1 - gamma[K - 2]) * (1 - 1 / C), rel=1e-12)
    # the released function is the state cost: its true local sensitivity, within d moves
    true_ls = np.array([max(abs(mine[i] - mine[idx[g]]) for g in neighbours(h)) for i, h in enumerate(H)])
    A = np.array([shape.reach[shape.state(h)] for h in H])
    assert np.all(true_ls <= A[:, 0] + 1e-12)
    for d in (1, 3):
        assert np.all(np.array(ball_max(K, C, tuple(true_ls), d)) <= A[:, d] + 1e-12)
    acc = account_table(np.array(H[:5]), shape)
    assert acc.rdp == pytest.approx(float(mine[:5].sum()), rel=1e-12)


def test_table_with_infinite_rdp_is_refused():
    with pytest.raises(InvalidParameter, match="infinite"):
        table_shape(5, 3, np.ones(6), 2.0)


# ---------------------------------------------------------------------------------------------------
# GNSS and PATE's Table 2
# ---------------------------------------------------------------------------------------------------


def test_gnss_cost_matches_table2():
    assert gnss_rdp(14.0, 0.0329, 6.23) == pytest.approx(0.5184, abs=5e-4)  # Table 2: (14, 0.52)
    with pytest.raises(InvalidParameter):
        gnss_rdp(20.0, 0.0329, 6.23)  # λ ≥ 1/(2β)


def test_pate_table2_mnist_row():
    """Confident-GNMax T = 200, σ₁ = 150, σ₂ = 40, 640 queries, δ = 1e-5, λ = 14, β = 0.0329, σ_SS = 6.23 on
    MNIST-like votes (darrm_opt.experiments.pate_votes); expectations over the first step's coins."""
    votes = mnist_like_votes(640, seed=0)
    p = np.asarray(prob_answered(votes.max(axis=1), 200.0, 150.0))
    acc = account_confident_gnmax(votes, p > 0, 200.0, 150.0, 40.0, 14.0, 250, weights=p)
    assert p.sum() == pytest.approx(283, abs=10)  # E[answered] 283
    assert acc.rdp == pytest.approx(1.18, abs=0.04)  # E[RDP] 1.18 at λ = 14
    tail14 = math.log(1e5) / 14  # Table 2's arithmetic (÷ λ)
    assert acc.rdp + tail14 == pytest.approx(2.00, abs=0.04)  # E[ε] 2.00
    ss = acc.smooth_sensitivity(0.0329)
    assert ss == pytest.approx(0.0618, rel=0.10)  # E[SS_β] 0.0618
    assert 6.23 * ss == pytest.approx(0.385, rel=0.10)
    fixed_paper = acc.rdp + gnss_rdp(14.0, 0.0329, 6.23) + tail14
    assert abs(fixed_paper - 2.52) < 0.385 and fixed_paper == pytest.approx(2.52, abs=0.05)
    # Thm. 5 as stated (÷ (λ − 1)): the published fixed part is 0.063 higher
    fixed = sanitised_epsilon(acc.rdp, ss, 0.0, 14.0, 0.0329, 6.23, 1e-5)
    assert fixed == pytest.approx(fixed_paper + math.log(1e5) * (1 / 13 - 1 / 14), rel=1e-12)
    assert abs(fixed - 2.52) < 0.385


def test_conversions():
    from dp_accounting.rdp import compute_epsilon

    assert dp_tail(14.0, 1e-5) == pytest.approx(math.log(1e5) / 13, rel=1e-15)
    for lam, r, d in [(14.0, 1.18, 1e-5), (11.0, 0.4, 1e-6), (3.0, 2.0, 1e-3)]:
        eps, order = compute_epsilon([lam], [r], d)
        assert order == lam and r + dp_tail(lam, d, "improved") == pytest.approx(eps, rel=1e-12)
        assert dp_tail(lam, d, "improved") < dp_tail(lam, d, "thm5")
    with pytest.raises(InvalidParameter):
        dp_tail(14.0, 1e-5, "exact")


def test_confident_gnmax_pays_gnmax_only_when_answered():
    votes = np.array([[40, 2, 0], [20, 20, 2], [42, 0, 0]])
    none = account_confident_gnmax(votes, [False] * 3, 30.0, 6.0, 4.0, 3.0, 42)
    some = account_confident_gnmax(votes, [True, False, True], 30.0, 6.0, 4.0, 3.0, 42)
    th = threshold_shape(30.0, 6.0, 3.0, 42)
    assert none.rdp == pytest.approx(float(th.cost[[40, 20, 42]].sum()), rel=1e-12)
    g = account_gnmax(votes[[0, 2]], 4.0, 3.0, 42)
    assert some.rdp == pytest.approx(none.rdp + g.rdp, rel=1e-12)
    np.testing.assert_allclose(some.reach, none.reach + g.reach, rtol=1e-12)
    assert (some.answered, some.queries) == (2, 3)


def test_interactive_statistic_has_sensitivity_one():
    from darrm_opt.privacy.interactive_gnmax import interactive_statistic

    rng = np.random.default_rng(3)
    student = rng.dirichlet(np.ones(3), size=1)
    for h in histograms(10, 3):
        s = interactive_statistic([h], student, 10)[0]
        for g in neighbours(h):
            assert abs(interactive_statistic([g], student, 10)[0] - s) <= 1.0 + 1e-12


def test_interactive_gnmax_outcomes_and_account():
    from darrm_opt.privacy.interactive_gnmax import interactive_gnmax
    from darrm_opt.privacy.query_accounts import account_interactive_gnmax

    votes = np.array([[250, 0, 0], [0, 250, 0], [90, 80, 80]])
    student = np.array([[0.98, 0.01, 0.01], [0.98, 0.01, 0.01], [0.4, 0.3, 0.3]])
    labels, answered = interactive_gnmax(votes, student, 0.9, 100.0, 1.0, 1.0, 250, np.random.default_rng(0))
    # agreeing confident student: reinforced without the teachers; disagreeing: teachers answer; unsure: ⊥
    assert answered.tolist() == [False, True, False] and labels.tolist() == [0, 1, -1]
    acc = account_interactive_gnmax(votes, answered, 150.0, 40.0, 14.0, 250)
    g = account_gnmax(votes[[1]], 40.0, 14.0, 250)
    assert acc.rdp == pytest.approx(3 * 14 / (2 * 150.0**2) + g.rdp, rel=1e-12)
    np.testing.assert_allclose(acc.reach, g.reach)
    assert (acc.answered, acc.queries) == (1, 3)
    with pytest.raises(InvalidParameter, match="probability"):
        interactive_gnmax(votes, student * 2, 0.9, 100.0, 1.0, 1.0, 250, np.random.default_rng(0))
