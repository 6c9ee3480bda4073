"""Exact accounting in the service: served tables carry their privacy profile, and a ledger spends by the
exact composition of its tables' profiles when that is the tightest valid bound."""

from __future__ import annotations

import json
import math

import pytest
from svc_helpers import make_ledger, make_table
from typer.testing import CliRunner

from darrm_opt.certify.certificate import certify
from darrm_opt.cli import app
from darrm_opt.model.params import Params
from darrm_opt.privacy import accounting, pld
from darrm_opt.privacy.profile import PrivacyProfile, privacy_profile


@pytest.mark.slow  # a K = 11 table, 100 answers composed exactly
def test_ledger_spends_by_exact_composition_like_the_cli(client, tmp_path):
    table = make_table(client, K=11, m=3, epsilon=0.1, teacher_delta=1e-5)
    params = Params(11, 3, 0.1, 1e-5)
    assert certify(params, table["gamma"]).certified
    prof = PrivacyProfile.from_dict(table["privacy_profile"])
    assert prof == privacy_profile(params, table["gamma"])  # the served profile is the recomputed one
    assert prof.delta(params.m * params.epsilon) <= params.delta

    delta_budget = -math.expm1(100 * math.log1p(-params.delta) + math.log1p(-1e-4))
    path = tmp_path / "k11.json"
    path.write_text(json.dumps({k: table[k] for k in ("K", "m", "epsilon", "teacher_delta", "delta", "gamma")}))
    res = CliRunner().invoke(app, ["budget", "--table", str(path), "--queries", "100",
                                   "--delta-total", repr(delta_budget), "--format", "json", "-q"])
    assert res.exit_code == 0, res.output
    cli_exact = next(r for r in json.loads(res.stdout) if r["method"] == "exact")["epsilon"]
    assert 9.170 <= cli_exact < 9.1715

    # a budget between the exact spend of 100 and 101 answers: far below every generic bound
    eps_budget = (cli_exact + pld.exact_epsilon([(prof, 101)], delta_budget)) / 2
    assert accounting.optimal_epsilon(0.3, params.delta, 100, delta_budget) > 1.5 * eps_budget
    ledger = make_ledger(client, eps_budget, delta_budget, name="exact")
    body = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1] * 6 + [0] * 5] * 100}
    r = client.post("/v1/aggregate", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert (out["composition"], out["epsilon_spent"], out["delta_target"]) == ("exact", cli_exact, delta_budget)
    state = client.get(f"/v1/ledgers/{ledger['id']}").json()
    assert (state["answers"], state["composition"], state["epsilon_spent"]) == (100, "exact", cli_exact)
    assert state["bounds"]["exact"]["epsilon"] == cli_exact
    assert state["bounds"]["optimal"]["epsilon"] > eps_budget  # the generic ledger would have refused
    # the 101st answer does not fit: refused, nothing released, nothing spent
    r = client.post("/v1/aggregate", json={**body, "votes": [[1] * 11]})
    assert r.status_code == 409 and "answers" not in r.json() or not isinstance(r.json().get("answers"), list)
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 100


def test_large_budget_reports_the_tightest_bound(client):
    table = make_table(client, K=5, m=2, teacher_delta=1e-5)
    prof = PrivacyProfile.from_dict(table["privacy_profile"])
    ledger = make_ledger(client, 1000.0, 1e-3, name="loose")
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"],
                                           "votes": [[1, 1, 1, 0, 0]] * 30})
    assert r.status_code == 200
    generic = accounting.account([(0.2, Params(5, 2).delta, 30)], 1e-3).spend
    # far from the budget the debit states the exact composition on the coarse grid at the count's bucket
    # (30 answers -> 32): a valid bound above the one for 30 (within 30 × 1e-4 of the fine one), far below
    # the generic bound; the view states the same
    assert pld.bucket(30) == 32
    wide = pld.exact_epsilon([(prof, 32)], 1e-3, coarse=True)
    coarse = pld.exact_epsilon([(prof, 30)], 1e-3, coarse=True)
    fine = pld.exact_epsilon([(prof, 30)], 1e-3)
    assert fine <= coarse <= fine + 30 * 1e-4 and coarse < wide < generic.epsilon
    assert (r.json()["composition"], r.json()["epsilon_spent"]) == ("exact", wide)
    state = client.get(f"/v1/ledgers/{ledger['id']}").json()
    assert (state["composition"], state["epsilon_spent"]) == ("exact", wide)
