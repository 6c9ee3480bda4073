"""Interactive-GNMax (PATE Alg. 2) on a data-dependent ledger: answers drawn with exact discrete Gaussian noise
against their analytic law, the check priced for the discrete law (brute force), the ledger's account against
darrm_opt.privacy.query_accounts, and the student's probabilities validated (library and service)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from sqlalchemy import select
from test_data_dependent import histograms, neighbours
from test_data_dependent_ledger import renyi_gauss

from darrm_opt.errors import BudgetExceeded, InvalidParameter
from darrm_opt.ledger.dd_account import DataDependentPolicy, new_state, record, release_law
from darrm_opt.ledger.dd_store import DataDependentStore
from darrm_opt.ledger.schema import DataDependentLedgerRecord as Row
from darrm_opt.mechanisms.dd_answers import draw_answers, drawer
from darrm_opt.mechanisms.vote_samplers import GnmaxSampler
from darrm_opt.model.gnmax import discrete_gaussian_pmf, tail_cut
from darrm_opt.privacy.interactive_gnmax import interactive_check_statistic
from darrm_opt.privacy.query_accounts import account_gnmax, account_interactive_gnmax
from darrm_opt.privacy.query_costs import (
    discrete_gaussian_log_tail,
    discrete_q_sigma,
    discrete_threshold_shape,
)
from darrm_opt.privacy.smooth_sensitivity import gnss_rdp
from darrm_opt.release.dd_ledger import DataDependentLedger

K, C = 12, 3
T, SIGMA1, SIGMA2, CONF = 4.0, 1.5, 2.0, 0.6


def policy(**kw) -> DataDependentPolicy:
    base = dict(aggregator="interactive-gnmax", K=K, classes=C, sigma=SIGMA2, order=2.0, beta=0.1, sigma_ss=3.0,
                delta=1e-5, quota=100_000, threshold=T, sigma1=SIGMA1, confidence=CONF)
    return DataDependentPolicy(**{**base, **kw})


def seeded(seed: int):
    rng = np.random.default_rng(seed)
    return lambda n: rng.bytes(n)


def pass_probability(i: int, sigma1: float = SIGMA1, threshold: float = T) -> float:
    """Pr[i + Z ≥ ⌈T⌉], Z ~ N_ℤ(0, σ₁²), by the pmf."""
    L = tail_cut(sigma1)
    p, _ = discrete_gaussian_pmf(sigma1, L)
    k = math.ceil(threshold) - i
    return float(p[max(k + L, 0):].sum()) if k <= L else 0.0


CASES = [  # histogram, student, which branch dominates
    ((6, 6, 0), (0.9, 0.05, 0.05)),  # the student disagrees: the teachers answer (s = 5.4)
    ((12, 0, 0), (0.9, 0.05, 0.05)),  # agrees and is confident: reinforced (s = 1.2)
    ((5, 4, 3), (0.4, 0.35, 0.25)),  # agrees, unsure: ⊥ (s = 0.2)
    ((4, 4, 4), (0.2, 0.2, 0.6)),  # s = 1.6; confident in class 2, which the teachers do not favour
]


def analytic(h, p) -> dict[int, float]:
    """Pr[label] for one query: pass · GNMax law + (1 − pass) · (argmax p if max p > γ else ⊥)."""
    i = int(interactive_check_statistic([h], [p], T, K)[0])
    a = pass_probability(i)
    law = {c: a * x for c, x in enumerate(GnmaxSampler(K, C, SIGMA2).distribution(h))}
    law[-1] = 0.0
    other = int(np.argmax(p)) if max(p) > CONF else -1
    law[other] += 1.0 - a
    return law


@pytest.mark.parametrize("case", range(len(CASES)))
def test_branch_frequencies_match_the_analytic_law(case):
    h, p = CASES[case]
    n = 4000
    labels, answered = draw_answers(policy(), [h] * n, seeded(case), [p] * n)
    law = analytic(h, p)
    i = int(interactive_check_statistic([h], [p], T, K)[0])
    a = pass_probability(i)
    assert abs(answered.mean() - a) <= 5 * math.sqrt(a * (1 - a) / n) + 1e-12
    for c, q in law.items():
        got = float(np.mean(labels == c))
        assert abs(got - q) <= 5 * math.sqrt(q * (1 - q) / n) + 1e-12, (c, got, q)
    # a query that failed the check never carries a teacher label other than the student's own
    assert set(labels[~answered].tolist()) <= {-1, int(np.argmax(p))}


def test_the_check_statistic_is_exact_and_moves_by_one():
    # s = max_j (n_j − K p_j) in rationals; i + Z ≥ ⌈T⌉ ⟺ s + Z ≥ T for every integer Z
    rng = np.random.default_rng(5)
    for h in histograms(K, C):
        p = rng.dirichlet(np.ones(C))
        i = int(interactive_check_statistic([h], [p], 4.3, K)[0])
        s = max(Fraction(h[j]) - K * Fraction(float(p[j])) for j in range(C))
        for z in range(-15, 16):
            assert (i + z >= math.ceil(Fraction(4.3))) == (s + z >= Fraction(4.3))
        for g in neighbours(h):
            assert abs(int(interactive_check_statistic([g], [p], 4.3, K)[0]) - i) <= 1


def test_discrete_tail_and_check_cost_by_brute_force():
    for sigma in (0.7, 1.5, 6.0):
        L = tail_cut(sigma)
        pmf, _ = discrete_gaussian_pmf(sigma, L)
        for j in (1, 2, 5, 9):
            direct = float(pmf[j + L:].sum()) if j <= L else 0.0
            if direct > 1e-250:
                assert math.exp(discrete_gaussian_log_tail([j], sigma)[0]) == pytest.approx(direct, rel=1e-8)
                assert math.exp(discrete_gaussian_log_tail([j], sigma)[0]) >= direct
    lam = 2.0
    for sigma1, threshold in ((1.5, 4.0), (0.8, 6.5), (3.0, 9.0)):
        shape = discrete_threshold_shape(threshold, sigma1, lam, K)
        P = [pass_probability(i, sigma1, threshold) for i in range(K + 1)]

        def D(a, b):  # D_λ(Bern(a) ‖ Bern(b))
            terms = [x**lam * y ** (1 - lam) for x, y in ((a, b), (1 - a, 1 - b)) if x > 0]
            return math.log(sum(terms)) / (lam - 1)

        for i in range(K + 1):
            true = max(D(P[i], P[j]) for j in (i - 1, i + 1) if 0 <= j <= K)
            assert true <= shape.cost[i] * (1 + 1e-9) + 1e-300
            assert shape.cost[i] <= lam / (2 * sigma1**2)
        assert shape.cost.min() < 0.1 * lam / (2 * sigma1**2)  # far from T the check is cheap


def test_ledger_account_matches_the_library():
    p = policy()
    rng = np.random.default_rng(2)
    votes = np.array([rng.multinomial(K, rng.dirichlet(np.ones(C))) for _ in range(30)])
    student = rng.dirichlet(np.ones(C), size=30)
    labels, answered = draw_answers(p, votes, seeded(9), student)
    state = record(p, new_state(p), votes.tolist(), answered.tolist(), student.tolist())
    th = discrete_threshold_shape(T, SIGMA1, 2.0, K)
    i = interactive_check_statistic(votes, student, T, K)
    g = account_gnmax(votes[answered], SIGMA2, 2.0, K, discrete=True)
    assert 0 < answered.sum() < 30
    assert state.rdp == pytest.approx(float(th.cost[i].sum()) + g.rdp, rel=1e-12)
    np.testing.assert_allclose(state.reach, th.reach[i].sum(axis=0) + g.reach, rtol=1e-12)
    lib = account_interactive_gnmax(votes, answered, SIGMA1, SIGMA2, 2.0, K, student, T, discrete=True)
    assert lib.rdp == pytest.approx(state.rdp, rel=1e-12)
    assert (state.answered, state.queries) == (lib.answered, lib.queries) == (int(answered.sum()), 30)
    # without the student the check is charged its worst case, never less
    # answers drawn elsewhere with continuous noise (recorded): GNMax's q̃ at σ, and without the student the
    # check's worst case
    worst = record(p, new_state(p), votes.tolist(), answered.tolist(), discrete=False)
    g_cont = account_gnmax(votes[answered], SIGMA2, 2.0, K)
    assert worst.rdp == pytest.approx(30 * 2.0 / (2 * SIGMA1**2) + g_cont.rdp, rel=1e-12)
    assert worst.rdp - g_cont.rdp > state.rdp - g.rdp
    # recorded without saying how they were drawn: the product's discrete noise, never charged less
    recorded = record(p, new_state(p), votes.tolist(), answered.tolist())
    assert recorded.rdp == pytest.approx(30 * 2.0 / (2 * SIGMA1**2) + g.rdp, rel=1e-12)
    assert g.rdp >= g_cont.rdp


def test_release_with_the_data_dependent_check_is_private_by_brute_force():
    """Every job of two queries with a fixed student and outcome, against every job one move away per
    histogram: the published law's D_λ ≤ ε_GNSS (Thm. 23), also where the check's cost varies with the votes."""
    p = policy(K=8, quota=2)
    hists = list(histograms(8, C))
    student = [0.7, 0.2, 0.1]
    for ans, drawn in ((False, True), (True, False), (True, True)):
        singles = [record(p, new_state(p), [h], [ans], [student], drawn) for h in hists]
        rdp = np.array([s.rdp for s in singles])
        assert len({round(x, 12) for x in rdp}) >= 3  # the check's cost varies with the votes
        reach = np.array([s.reach for s in singles])
        idx = {h: k for k, h in enumerate(hists)}
        disc = np.exp(-p.beta * np.arange(p.K + 1))
        mean = rdp[:, None] + rdp[None, :] + p.fixed_epsilon
        sd = p.sigma_ss * np.max((reach[:, None, :] + reach[None, :, :]) * disc, axis=2)
        s2 = record(p, singles[3], [hists[5]], [ans], [student], drawn)
        assert release_law(p, s2) == pytest.approx((mean[3, 5], sd[3, 5]), rel=1e-12)
        worst, control = 0.0, 0.0  # control: a quarter of the noise (a negative control: must fail)
        near = [[idx[h]] + [idx[g] for g in neighbours(h)] for h in hists]
        for a in range(len(hists)):
            for a2 in near[a]:
                for b in range(len(hists)):
                    for b2 in near[b]:
                        worst = max(worst, float(renyi_gauss(mean[a, b], sd[a, b], mean[a2, b2], sd[a2, b2], 2.0)))
                        control = max(control, float(renyi_gauss(mean[a, b], sd[a, b] / 4, mean[a2, b2],
                                                                 sd[a2, b2] / 4, 2.0)))
        bound = gnss_rdp(p.order, p.beta, p.sigma_ss)
        assert worst <= bound * (1 + 1e-12) and control > bound


@pytest.mark.parametrize("student, rule", [
    ([[0.5, 0.5]], "3 classes"),  # wrong length
    ([[0.5, 0.3, 0.1]], "sum to 1"),
    ([[1.2, -0.1, -0.1]], "non-negative"),
    ([[float("nan"), 0.5, 0.5]], "finite"),
])
def test_bad_probabilities_are_refused(student, rule):
    with pytest.raises(InvalidParameter, match=rule) as e:
        draw_answers(policy(), [[6, 6, 0]], seeded(0), student)
    assert e.value.parameter == "student"


def test_answer_path_rules(tmp_path):
    with pytest.raises(InvalidParameter, match="student"):
        draw_answers(policy(), [[6, 6, 0]], seeded(0))
    with pytest.raises(InvalidParameter, match="only interactive"):
        draw_answers(policy(aggregator="gnmax", threshold=None, sigma1=None, confidence=None), [[6, 6, 0]],
                     seeded(0), [[1.0, 0.0, 0.0]])
    with pytest.raises(InvalidParameter, match="confidence"):
        draw_answers(policy(confidence=None), [[6, 6, 0]], seeded(0), [[1.0, 0.0, 0.0]])
    with pytest.raises(InvalidParameter, match="confidence"):
        policy(confidence=1.0)
    with pytest.raises(InvalidParameter, match="only interactive"):
        policy(aggregator="gnmax", threshold=None, sigma1=None)
    # a policy without confidence keeps its JSON as before
    assert "confidence" not in policy(confidence=None).to_json() and "confidence" in policy().to_json()

    url = f"sqlite:///{tmp_path / 'i.db'}"
    with DataDependentLedger(url, "interactive", json.loads(policy(quota=3).to_json())) as ledger:
        got = ledger.answer([[6, 6, 0], [12, 0, 0]], [[0.9, 0.05, 0.05]] * 2, seeded(1))
        assert len(got) == 2 and set(got) <= {-1, 0, 1, 2} and ledger.view()["queries"] == 2
        with pytest.raises(BudgetExceeded, match="quota"):
            ledger.answer([[6, 6, 0]] * 2, [[0.9, 0.05, 0.05]] * 2, seeded(1))
        with pytest.raises(InvalidParameter):
            ledger.answer([[6, 6, 0]], [[0.9, 0.05]], seeded(1))
        assert ledger.view()["queries"] == 2  # nothing answered or written on a refusal
        ledger.publish()
        with pytest.raises(BudgetExceeded, match="sealed"):
            ledger.answer([[6, 6, 0]], [[0.9, 0.05, 0.05]], seeded(1))


def test_the_store_accounts_what_it_drew(tmp_path):
    """The state the store writes is the library's account of the outcome it drew (the check's outcome
    captured from the draw)."""
    from darrm_opt.ledger.db import Database, migrate

    db = Database(f"sqlite:///{tmp_path / 's.db'}")
    migrate(db)
    store = DataDependentStore(db)
    p = policy(quota=50)
    lid = store.create("job", p)["id"]
    seen = {}

    def capture(pol, votes, student):
        labels, answered = drawer(seeded(4))(pol, votes, student)
        seen["answered"] = answered
        return labels, answered

    rng = np.random.default_rng(8)
    votes = np.array([rng.multinomial(K, rng.dirichlet(np.ones(C))) for _ in range(20)])
    student = rng.dirichlet(np.ones(C), size=20)
    view = store.answer(lid, votes.tolist(), capture, student.tolist())
    assert view["queries"] == 20 and view["answered"] == int(seen["answered"].sum()) and len(view["answers"]) == 20
    with db.read() as conn:
        state = json.loads(conn.execute(select(Row.state).where(Row.id == lid)).scalar_one())
    lib = account_interactive_gnmax(votes, seen["answered"], SIGMA1, SIGMA2, 2.0, K, student, T, discrete=True)
    assert state["rdp"] == pytest.approx(lib.rdp, rel=1e-12)
    np.testing.assert_allclose(state["reach"], lib.reach, rtol=1e-12)
    db.dispose()


@pytest.mark.parametrize("sigma", [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0, 7.75, 10.0, 15.75, 30.0, 60.0, 100.0])
def test_prop7_at_the_discrete_sigma_bounds_each_pair(sigma):
    """Pr[D > g] + ½ Pr[D = g] ≤ ½ erfc(g/(2σ̂)), σ̂ = discrete_q_sigma(σ), D the difference of two N_ℤ(0, σ²), at
    every g ≥ 0 until the right side is below 10⁻³⁰⁰; and at σ̂ = σ it fails (the reason for σ̂)."""
    from scipy import special

    L = tail_cut(sigma)
    pmf, _ = discrete_gaussian_pmf(sigma, L)
    d = np.convolve(pmf, pmf[::-1])  # Pr[D = k], k = −2L..2L
    tail = np.cumsum(d[::-1])[::-1]  # Pr[D ≥ k]
    sh = discrete_q_sigma(sigma)
    fails = 0
    for g in range(0, 2 * L):
        lhs = (tail[2 * L + g + 1] if g + 1 <= 2 * L else 0.0) + 0.5 * d[2 * L + g]
        rhs = 0.5 * special.erfc(g / (2 * sh))
        if rhs < 1e-300:
            break
        assert lhs <= rhs * (1 + 1e-9), (g, lhs, rhs)
        fails += lhs > 0.5 * special.erfc(g / (2 * sigma)) * (1 + 1e-9)
    assert fails > 0


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0, 4.0])
def test_discrete_gnmax_misses_the_plurality_at_most_q_tilde_at_the_discrete_sigma(sigma):
    """Every histogram of 12 votes over 3 classes: 1 − Pr[GNMax_ℤ = i*] (exact law) ≤ Prop. 7's q̃ at σ̂."""
    from darrm_opt.privacy.gnmax import q_tilde

    sampler = GnmaxSampler(12, 3, sigma)
    worst = 0.0
    for h in histograms(12, 3):
        miss = 1.0 - sampler.distribution(h)[int(np.argmax(h))]
        qt = float(q_tilde(np.array(h, dtype=float), discrete_q_sigma(sigma)))
        assert miss <= qt * (1 + 1e-9) + 1e-15, (h, miss, qt)
        worst = max(worst, miss / max(float(q_tilde(np.array(h, dtype=float), sigma)), 1e-300)
                    if miss > 1e-12 else 0.0)
    assert worst > 1.0  # at σ itself Prop. 7 under-states the discrete miss on some histogram
