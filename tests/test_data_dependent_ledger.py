"""The data-dependent ledger mode: publishes only a sanitised ε, and that release is private (brute force)."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest
from test_data_dependent import histograms, neighbours

from darrm_opt.errors import BudgetExceeded, InvalidParameter
from darrm_opt.ledger.dd_account import (
    DataDependentPolicy,
    DataDependentState,
    new_state,
    public_view,
    publish,
    record,
    release_law,
)
from darrm_opt.privacy.smooth_sensitivity import gnss_rdp


def gnmax_policy(**kw):
    base = dict(aggregator="gnmax", K=12, classes=3, sigma=2.0, order=2.0, beta=0.1, sigma_ss=3.0, delta=1e-5,
                quota=2)
    return DataDependentPolicy(**{**base, **kw})


def renyi_gauss(m1, s1, m2, s2, lam):
    """D_λ(N(m1, s1²) ‖ N(m2, s2²)) in closed form (van Erven & Harremoës 2014); inf when s_λ² ≤ 0."""
    s_lam2 = lam * s2**2 + (1 - lam) * s1**2
    out = np.full(np.broadcast(m1, s1, m2, s2).shape, np.inf)
    ok = s_lam2 > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        val = (np.log(s2 / s1) + np.log(s2**2 / s_lam2) / (2 * (lam - 1))
               + lam * (m1 - m2) ** 2 / (2 * s_lam2))
    out[ok] = val[ok]
    return out


def test_policy_is_validated():
    with pytest.raises(InvalidParameter, match="C5/C6"):
        gnmax_policy(sigma=1.0, order=3.0, beta=0.1)
    with pytest.raises(InvalidParameter, match="1/\\(2β\\)"):
        gnmax_policy(beta=0.3)
    with pytest.raises(InvalidParameter, match="threshold"):
        gnmax_policy(aggregator="confident-gnmax")
    with pytest.raises(InvalidParameter, match="aggregator"):
        gnmax_policy(aggregator="laplace")
    with pytest.raises(InvalidParameter, match="unknown"):
        DataDependentPolicy.from_mapping({**json.loads(gnmax_policy().to_json()), "extra": 1})
    p = gnmax_policy()
    assert DataDependentPolicy.from_json(p.to_json()) == p


def test_quota_and_seal_are_enforced_on_counts_only():
    p = gnmax_policy()
    s = record(p, new_state(p), [[12, 0, 0]])
    with pytest.raises(BudgetExceeded, match="quota"):
        record(p, s, [[6, 6, 0], [4, 4, 4]])
    s = record(p, s, [[6, 6, 0]])
    s2 = publish(p, s, os.urandom)
    assert publish(p, s2, os.urandom) == s2  # one release only
    with pytest.raises(BudgetExceeded, match="sealed"):
        record(p, s2, [[12, 0, 0]])
    with pytest.raises(InvalidParameter, match="K = 12"):
        record(p, new_state(p), [[11, 0, 0]])


def test_public_view_never_shows_the_unsanitised_value():
    p = gnmax_policy(quota=3)
    consensus = record(p, new_state(p), [[12, 0, 0], [11, 1, 0], [12, 0, 0]])
    split = record(p, new_state(p), [[6, 6, 0], [5, 4, 3], [7, 5, 0]])
    assert consensus.rdp < split.rdp  # the private states differ …
    v1, v2 = public_view(p, consensus), public_view(p, split)
    assert v1 == v2  # … and nothing shown before publication depends on the votes
    text = json.dumps(v1)
    for secret in (consensus.rdp, consensus.rdp + p.fixed_epsilon, *release_law(p, consensus)):
        assert repr(secret) not in text and f"{secret:.6g}" not in text
    assert v1["sanitised_epsilon"] is None and not v1["sealed"]
    after = publish(p, consensus, lambda n: b"\x80" + b"\x00" * (n - 1))  # the median draw
    view = public_view(p, after)
    mean, _ = release_law(p, consensus)
    assert view["sanitised_epsilon"] == pytest.approx(round(mean / p.grid) * p.grid, abs=1e-12)
    assert view["sealed"] and set(view) == set(v1)


def test_data_independent_bound_is_the_worst_case():
    p = gnmax_policy(quota=2)
    worst = max(record(p, new_state(p), [h, g]).rdp for h in histograms(12, 3) for g in ([6, 6, 0], [4, 4, 4]))
    assert worst <= 2 * p.order / p.sigma**2 + 1e-12
    assert p.data_independent_epsilon() == pytest.approx(2 * 2 / 4 + math.log(1e5), rel=1e-12)


def _single_states(p, hists, answered=None):
    return [record(p, new_state(p), [h], None if answered is None else [answered]) for h in hists]


def _brute_force_release(p, hists, singles, answered=None, shrink=1.0):
    """Every job of two queries D = (h₁, h₂) and every D′ with each histogram equal or one move away (a
    superset of the neighbours: one teacher's votes change): D_λ of the published law, both orders.
    ``shrink`` divides the noise (a negative control: too little noise must fail)."""
    idx = {h: i for i, h in enumerate(hists)}
    rdp = np.array([s.rdp for s in singles])
    reach = np.array([s.reach for s in singles])
    n = len(hists)
    pair_rdp = rdp[:, None] + rdp[None, :]
    disc = np.exp(-p.beta * np.arange(p.K + 1))
    pair_ss = np.max((reach[:, None, :] + reach[None, :, :]) * disc, axis=2)
    mean = pair_rdp + p.fixed_epsilon
    sd = p.sigma_ss * pair_ss / shrink
    # the ledger's own law on a few jobs equals this composition
    for i, j in [(0, 1), (n // 2, n - 1), (3, 3)]:
        ans = None if answered is None else [answered]
        s = record(p, record(p, new_state(p), [hists[i]], ans), [hists[j]], ans)
        m, d = release_law(p, s)
        assert m == pytest.approx(mean[i, j], rel=1e-12) and d == pytest.approx(sd[i, j] * shrink, rel=1e-12)
    near = [[idx[h]] + [idx[g] for g in neighbours(h)] for h in hists]
    worst = 0.0
    for i in range(n):
        for a in near[i]:
            J = np.arange(n)
            for jb in range(max(len(x) for x in near)):
                B = np.array([near[j][jb] if jb < len(near[j]) else j for j in J])
                d1 = renyi_gauss(mean[i, J], sd[i, J], mean[a, B], sd[a, B], p.order)
                d2 = renyi_gauss(mean[a, B], sd[a, B], mean[i, J], sd[i, J], p.order)
                worst = max(worst, float(np.max(d1)), float(np.max(d2)))
    return worst, pair_rdp


def test_gnss_release_is_private_by_brute_force_gnmax():
    """K = 12, C = 3, σ = 2, two queries: the published ε's law on neighbouring vote sets is within Thm. 23's
    (λ, ε_GNSS)-RDP, while the data-dependent RDP itself moves by far more than 0 between them."""
    p = gnmax_policy()
    hists = list(histograms(12, 3))
    worst, pair_rdp = _brute_force_release(p, hists, _single_states(p, hists))
    bound = gnss_rdp(p.order, p.beta, p.sigma_ss)
    assert 0.0 < worst <= bound * (1 + 1e-12)
    # negative control: a tenth of the noise breaks the bound, so the brute force can fail
    assert _brute_force_release(p, hists, _single_states(p, hists), shrink=10.0)[0] > bound
    assert pair_rdp.max() - pair_rdp.min() > 0.5  # the private value varies a lot across datasets


@pytest.mark.parametrize("answered", [True, False])
def test_gnss_release_is_private_by_brute_force_confident(answered):
    p = DataDependentPolicy(aggregator="confident-gnmax", K=12, classes=3, sigma=2.0, order=2.0, beta=0.1,
                            sigma_ss=3.0, delta=1e-5, quota=2, threshold=9.0, sigma1=1.5)
    hists = list(histograms(12, 3))
    singles = _single_states(p, hists, answered)
    assert len({round(s.rdp, 12) for s in singles}) > 3
    worst, _ = _brute_force_release(p, hists, singles, answered)
    assert worst <= gnss_rdp(p.order, p.beta, p.sigma_ss) * (1 + 1e-12)


def test_confident_needs_the_answered_outcomes():
    p = DataDependentPolicy(aggregator="confident-gnmax", K=12, classes=3, sigma=2.0, order=2.0, beta=0.1,
                            sigma_ss=3.0, delta=1e-5, quota=4, threshold=9.0, sigma1=1.5)
    with pytest.raises(InvalidParameter, match="answered"):
        record(p, new_state(p), [[12, 0, 0]])
    s = record(p, new_state(p), [[12, 0, 0], [4, 4, 4]], [True, False])
    assert (s.queries, s.answered) == (2, 1)
    assert public_view(p, s)["answered"] == 1


def test_state_round_trips():
    p = gnmax_policy()
    s = record(p, new_state(p), [[12, 0, 0]])
    assert DataDependentState.from_json(s.to_json()) == s


def test_store_on_sqlite(tmp_path):
    from darrm_opt.ledger.db import Database, migrate
    from darrm_opt.ledger.dd_store import DataDependentStore

    db = Database(f"sqlite:///{tmp_path / 'dd.db'}")
    migrate(db)
    store = DataDependentStore(db)
    view = store.create("job", json.loads(gnmax_policy(quota=3).to_json()))
    lid = view["id"]
    assert view["queries"] == 0 and view["sanitised_epsilon"] is None
    view = store.record(lid, [[12, 0, 0], [6, 6, 0]])
    assert view is not None and view["queries"] == 2
    with pytest.raises(BudgetExceeded):
        store.record(lid, [[12, 0, 0], [12, 0, 0]])
    assert store.get(lid)["queries"] == 2  # nothing written by the refusal
    view = store.publish(lid, os.urandom)
    assert view["sealed"] and isinstance(view["sanitised_epsilon"], float)
    assert store.publish(lid, os.urandom)["sanitised_epsilon"] == view["sanitised_epsilon"]
    assert "rdp" not in json.dumps(store.get(lid)) and store.get("nope") is None
    with pytest.raises(BudgetExceeded, match="sealed"):
        store.record(lid, [[12, 0, 0]])


def test_interactive_ledger_pays_gnmax_only_for_teacher_answers():
    p = DataDependentPolicy(aggregator="interactive-gnmax", K=12, classes=3, sigma=2.0, order=2.0, beta=0.1,
                            sigma_ss=3.0, delta=1e-5, quota=3, threshold=4.0, sigma1=1.5)
    votes = [[6, 6, 0], [6, 6, 0], [12, 0, 0]]
    none = record(p, new_state(p), votes, [False, False, False])
    one = record(p, new_state(p), votes, [True, False, False])
    assert none.rdp == pytest.approx(3 * 2.0 / (2 * 1.5**2), rel=1e-12)
    assert one.rdp > none.rdp and sum(none.reach) == 0.0
    hists = list(histograms(12, 3))
    worst, _ = _brute_force_release(p, hists, _single_states(p, hists, True), True)
    assert worst <= gnss_rdp(p.order, p.beta, p.sigma_ss) * (1 + 1e-12)


def table_policy(**kw):
    gamma = np.linspace(0.0, 0.8, 8).tolist()
    base = dict(aggregator="table", K=7, classes=3, sigma=None, order=2.0, beta=0.1, sigma_ss=3.0, delta=1e-5,
                quota=2, gamma=gamma)
    return DataDependentPolicy(**{**base, **kw})


def test_table_ledger_release_is_private_by_brute_force():
    p = table_policy()
    assert DataDependentPolicy.from_json(p.to_json()) == p
    hists = list(histograms(7, 3))
    singles = _single_states(p, hists)
    assert len({round(s.rdp, 12) for s in singles}) > 3  # the per-state cost varies with the votes
    worst, _ = _brute_force_release(p, hists, singles)
    assert 0.0 < worst <= gnss_rdp(p.order, p.beta, p.sigma_ss) * (1 + 1e-12)
    assert p.data_independent_epsilon() == pytest.approx(2 * float(p.table().cost.max()) + math.log(1e5), rel=1e-12)


def test_table_ledger_refuses_infinite_rdp_and_sigma():
    with pytest.raises(InvalidParameter, match="infinite"):
        table_policy(gamma=[1.0] * 8)
    with pytest.raises(InvalidParameter, match="gamma"):
        table_policy(sigma=2.0)
    with pytest.raises(InvalidParameter, match="gamma"):
        gnmax_policy(gamma=[0.5] * 13)


def test_python_ledger_persists_and_publishes_once(tmp_path):
    from darrm_opt.ledger.dd_local import DataDependentRecorder

    db = str(tmp_path / "dd.db")
    policy = gnmax_policy(quota=3)
    with DataDependentRecorder(db, "job", policy) as led:
        assert led.record([[12, 0, 0]])["queries"] == 1
    with pytest.raises(InvalidParameter, match="cannot change"):
        DataDependentRecorder(db, "job", gnmax_policy(quota=4))
    with pytest.raises(InvalidParameter, match="give a policy"):
        DataDependentRecorder(db, "other")
    with DataDependentRecorder(db, "job") as led:
        led.record([[6, 6, 0], [4, 4, 4]])
        with pytest.raises(BudgetExceeded, match="quota"):
            led.record([[12, 0, 0]])
        eps = led.publish()
        assert led.publish() == eps and led.view()["sealed"]
        assert led.view()["data_independent_epsilon"] == pytest.approx(3 * 2 / 4 + math.log(1e5))
    with DataDependentRecorder(db, "job") as led:
        assert led.view()["sanitised_epsilon"] == eps
