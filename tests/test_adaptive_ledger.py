"""A ledger's guarantee holds however it is paid (issue 33, part 1).

The ledger used to compose the exact profiles of every table it paid and stop at the budget (the natural
filter), which is not valid when a client mixes tables with different profiles adaptively. Now: one profile
composes exactly; several compose as one dominating pair (a table that dominates the rest, or the join of
their tradeoff envelopes); Gaussian pairs with none dominating go through the zCDP filter; and the
heterogeneous fixed-sequence bounds are not used for a mix.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from darrm_opt.mechanisms import mechanism
from darrm_opt.model.gnmax import GnmaxParams
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve
from darrm_opt.privacy import accounting, pld
from darrm_opt.privacy.adaptive import EXACT_DOMINATING, adaptive_parts, dominates, join, zcdp_epsilon
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.profile import privacy_profile


@pytest.fixture(scope="module")
def crossing():
    """Two K = 11 tables whose tradeoff curves cross (m = 3 and m = 5: neither dominates)."""
    p3, p5 = Params(11, 3, 0.1, 1e-5), Params(11, 5, 0.1, 1e-5)
    a = privacy_profile(p3, np.array(solve(p3).gamma))
    b = privacy_profile(p5, np.array(solve(p5).gamma))
    return p3, p5, a, b


def test_the_join_dominates_both_and_is_the_least_such_hull(crossing):
    _, _, a, b = crossing
    assert not dominates(a, b) and not dominates(b, a)
    j = join([a, b])
    assert dominates(j, a) and dominates(j, b)
    # every vertex of the join is a vertex of a or b (raised by the margin): no looser than needed
    originals = set(a.vertices) | set(b.vertices)
    for v in j.vertices[:-1]:
        assert any(v[0] == o[0] and 0 <= v[1] - o[1] <= 2e-15 for o in originals)
    # its δ(ε) is at least each table's, and at most their sum, at every ε
    for eps in (0.0, 0.1, 0.3, 0.5, 1.0):
        assert j.delta(eps) >= max(a.delta(eps), b.delta(eps)) - 1e-15
        assert j.delta(eps) <= a.delta(eps) + b.delta(eps) + 1e-12


def test_adaptive_accounting_of_crossing_tables_composes_their_join(crossing):
    """The old ledger priced 10 + 5 answers of the two tables by their exact product (3.0749 at δ = 1e-3), which
    no theorem covers for tables mixed adaptively; now by 15 answers of the join."""
    p3, p5, a, b = crossing
    groups = [(0.3, p3.delta, 10), (0.5, p5.delta, 5)]
    old = accounting.account(groups, 1e-3, profiles=[(a, 10), (b, 5)])
    new = accounting.account(groups, 1e-3, profiles=[(a, 10), (b, 5)], adaptive=True)
    assert old.spend.method == accounting.EXACT
    assert old.spend.epsilon == pytest.approx(3.0749, abs=1e-3)
    assert new.spend.method == EXACT_DOMINATING
    assert new.spend.epsilon == pld.exact_epsilon([(join([a, b]), 15)], 1e-3) > old.spend.epsilon
    assert {"optimal-grouped", "kov-heterogeneous", accounting.BASIC} & set(new.bounds) == set()
    assert new.bounds[accounting.BASIC_FILTER].epsilon == pytest.approx(10 * 0.3 + 5 * 0.5)
    assert new.bounds[accounting.BASIC_FILTER].delta >= 10 * p3.delta + 5 * p5.delta


def test_one_profile_keeps_the_exact_composition(crossing):
    _, _, a, _ = crossing
    parts, grow, method = adaptive_parts([(a, 4), (a, 6)])
    assert method == accounting.EXACT and grow == a and sum(n for _, n in parts) == 10
    acc = accounting.account([(0.3, 1e-5, 10)], 1e-3, profiles=[(a, 10)], adaptive=True)
    assert acc.spend.method == accounting.EXACT
    assert acc.spend.epsilon == pld.exact_epsilon([(a, 10)], 1e-3)


def test_a_dominating_table_is_composed_for_every_answer():
    """Continuous Gaussian pairs of the same shift: the smaller σ dominates (add noise to get the other)."""
    lo, hi = GaussianProfile(2.0, (1.0,), discrete=False), GaussianProfile(3.0, (1.0,), discrete=False)
    assert dominates(lo, hi) and not dominates(hi, lo)
    parts, grow, method = adaptive_parts([(hi, 3), (lo, 2)])
    assert parts == ((lo, 5),) and grow == lo and method == EXACT_DOMINATING


def test_zcdp_conversion_against_a_grid_and_the_exact_gaussian():
    """ε(ρ, δ) is the minimum over orders of CKS 2020, Prop. 12 (a fine grid of α finds none smaller by more than
    1e-9), and never below the exact ε of the Gaussian pair of that ρ (μ = √(2ρ)), which is ρ-zCDP: no valid
    conversion can state less."""
    for rho, delta in ((0.05, 1e-5), (0.5, 1e-6), (3.0, 1e-10)):
        got = zcdp_epsilon(rho, delta)
        alphas = 1 + np.exp(np.linspace(math.log(1e-5), math.log(1e6), 200_000))
        grid = alphas * rho + (math.log(1 / delta) + (alphas - 1) * np.log1p(-1 / alphas) - np.log(alphas)) / (
            alphas - 1)
        assert got <= float(grid.min()) + 1e-9
        gauss = GaussianProfile(1.0, (math.sqrt(2 * rho),), discrete=False)
        assert gauss.delta(got) <= delta


def test_a_mixed_gaussian_ledger_the_old_rule_paid_is_refused(tmp_path):
    """The reproducer: 20 GNMax answers at σ = 3, then 20 at σ = 4, within (16, 1e-6). The old ledger composed
    the two discrete pairs exactly (15.43) and paid; the zCDP filter states 16.36 and refuses the second batch,
    saying which accounting it used."""
    pytest.importorskip("sqlalchemy")
    from darrm_opt.errors import BudgetExceeded
    from darrm_opt.ledger.local import Ledger

    t3 = mechanism("gnmax").solve(GnmaxParams(15, 3, 3.0), solver="highs").table
    t4 = mechanism("gnmax").solve(GnmaxParams(15, 3, 4.0), solver="highs").table
    parts = [(t3.profile, 20), (t4.profile, 20)]
    groups = [(t3.epsilon0, t3.delta0, 20), (t4.epsilon0, t4.delta0, 20)]
    assert accounting.account(groups, 1e-6, profiles=parts).spend.epsilon <= 16.0  # what the old ledger paid
    with Ledger(f"sqlite:///{tmp_path}/l.db", "mix", epsilon_budget=16.0, delta_budget=1e-6) as book:
        first = book.pay(t3, 20)
        assert first.composition == accounting.EXACT
        with pytest.raises(BudgetExceeded, match="zcdp-filter"):
            book.pay(t4, 20)
        assert book.view()["answers"] == 20
    new = accounting.account(groups, 1e-6, profiles=parts, adaptive=True)
    assert new.spend.method == accounting.ZCDP_FILTER and new.spend.epsilon > 16.0


def test_a_ledger_of_one_table_states_its_exact_composition(tmp_path):
    pytest.importorskip("sqlalchemy")
    from darrm_opt.ledger.local import Ledger

    t3 = mechanism("gnmax").solve(GnmaxParams(15, 3, 3.0), solver="highs").table
    with Ledger(f"sqlite:///{tmp_path}/l.db", "one", epsilon_budget=50.0, delta_budget=1e-6) as book:
        book.pay(t3, 10)
        book.pay(t3, 30)
        view = book.view()
    assert view["composition"] == accounting.EXACT
    assert view["epsilon_spent"] == pld.exact_epsilon([(t3.profile, 40)], 1e-6, coarse=True)
