"""Multi-class tables through the service (the application in process, on SQLite and on PostgreSQL):
creation (C in the id), class-label votes, the ledger, errors.

Also, in process: a multi-class table row that carries a privacy profile is served with it, and the ledger
composes it exactly (the path is the binary tables' one: "the table has a profile")."""

from __future__ import annotations

import json
import math
import uuid

import numpy as np
import pytest
from svc_helpers import in_process_client, make_ledger

from darrm_opt.certify.multiclass import certify_multiclass
from darrm_opt.mechanisms.vote_samplers import MulticlassSampler
from darrm_opt.model.multiclass import MulticlassParams
from darrm_opt.optimize.multiclass import solve_multiclass
from darrm_opt.privacy import accounting
from darrm_opt.privacy.pair_profile import multiclass_profile
from darrm_opt.privacy.pld import bucketed, exact_epsilon
from darrm_opt.privacy.table import table_id

BODY = {"K": 7, "classes": 3, "teachers": "disjoint-nonprivate", "target_epsilon": 1.0, "delta": 1e-5}


@pytest.fixture(scope="module")
def table(app_client) -> dict:
    r = app_client.post("/v1/tables", json=BODY)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_multiclass_table_is_created_certified_and_cached(client, table):
    params = MulticlassParams(7, 3, 1.0, 1e-5)
    assert table["id"] == table_id("darrm-multiclass", params, "disjoint-nonprivate", table["gamma"])  # its content
    assert (table["K"], table["classes"], table["teachers"], table["target_epsilon"], table["delta"]) == (
        7, 3, "disjoint-nonprivate", 1.0, 1e-5)
    assert table["gamma"] == list(solve_multiclass(params).gamma)  # the library's table, as served
    assert table["certificate"]["certified"] is True
    assert certify_multiclass(params, table["gamma"]).certified
    again = client.post("/v1/tables", json=BODY)
    assert again.status_code == 200 and again.headers["x-darrm-cache"] == "hit" and again.json() == table
    assert client.get(f"/v1/tables/{table['id']}").json() == table
    four = client.post("/v1/tables", json={**BODY, "classes": 4})  # C is part of the id
    four_id = table_id("darrm-multiclass", MulticlassParams(7, 4, 1.0, 1e-5), "disjoint-nonprivate",
                       four.json()["gamma"])
    assert four.status_code == 200 and four.json()["id"] == four_id != table["id"]
    binary = client.post("/v1/tables", json={"K": 5, "m": 2, "epsilon": 0.1, "teacher_delta": 1e-5})
    assert binary.status_code == 200 and "classes" not in binary.json()  # binary tables unchanged
    listed = client.get("/v1/tables", params={"K": 7, "limit": 500}).json()["items"]
    assert table in listed and all(t["K"] == 7 for t in listed)
    base = client.get(f"/v1/tables/{table['id']}/baselines").json()  # the dashboard's view: γ_opt only
    assert base["gamma"]["opt"] == table["gamma"] and base["gamma"]["sub"] is None
    assert base["expected_error"]["opt"] == pytest.approx(table["expected_error"], rel=1e-9)


@pytest.mark.parametrize("change, loc", [
    ({"m": 2}, "m"),
    ({"epsilon": 0.1}, "epsilon"),
    ({"teachers": None}, "teachers"),
    ({"teachers": "shared"}, "teachers"),
    ({"target_epsilon": None}, "target_epsilon"),
    ({"classes": 1}, "classes"),
    ({"classes": 1001}, "classes"),
    ({"prior": "common-uniform:0.5,1"}, "prior"),
])
def test_bad_multiclass_requests_are_422_naming_the_field(client, change, loc):
    body = {k: v for k, v in {**BODY, **change}.items() if v is not None}
    r = client.post("/v1/tables", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", loc]


def test_a_binary_request_without_m_or_with_target_epsilon_is_422(client):
    r = client.post("/v1/tables", json={"K": 5, "epsilon": 0.1})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "m"]
    r = client.post("/v1/tables", json={"K": 5, "m": 2, "target_epsilon": 1.0})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "target_epsilon"]


def test_label_votes_are_answered_and_paid_per_answer(client, table):
    ledger = make_ledger(client, epsilon_budget=20.0, delta_budget=1e-3, name="mc-" + uuid.uuid4().hex[:6])
    votes = [[0] * 7, [2] * 7, [1, 1, 1, 0, 0, 2, 2], [0, 0, 1, 1, 2, 2, 2]]
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"], "votes": votes})
    assert r.status_code == 200, r.text
    out = r.json()
    assert len(out["answers"]) == 4 and set(out["answers"]) <= {0, 1, 2}
    # the table is stored with its exact profile: far from the budget the debit states the exact composition
    # on the coarse grid (tighter than the generic bounds of its per-answer (ε, δ))
    prof = multiclass_profile(MulticlassParams(7, 3, 1.0, 1e-5), table["gamma"])
    assert table["privacy_profile"] == prof.to_dict() | {"seconds": table["privacy_profile"]["seconds"]}
    exact = accounting.account([(1.0, 1e-5, 4)], 1e-3, profiles=[(prof, 4)], coarse=True).spend
    generic = accounting.account([(1.0, 1e-5, 4)], 1e-3).spend
    assert exact.method == "exact" and exact.epsilon < generic.epsilon
    assert (out["epsilon_spent"], out["delta_target"], out["composition"], out["ledger_answers"]) == (
        exact.epsilon, 1e-3, "exact", 4)
    view = client.get(f"/v1/ledgers/{ledger['id']}").json()
    assert view["groups"] == [{"table_id": table["id"], "epsilon0": 1.0, "delta0": 1e-5, "answers": 4}]
    assert view["epsilon_spent"] == exact.epsilon


@pytest.mark.slow  # 10 000 answers through the service
def test_the_served_law_matches_mc1(client, table):
    """5 000 answers to one histogram with a tie of two (gap 0) and 5 000 to a unanimous one, within 5
    standard errors of (MC-1)."""
    ledger = make_ledger(client, epsilon_budget=1e6, delta_budget=0.5, name="mc-law-" + uuid.uuid4().hex[:6])
    agg = MulticlassSampler(table["gamma"], 3)
    n = 5000
    for row in ([0, 0, 0, 1, 1, 1, 2], [2] * 7):
        r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"],
                                               "votes": [row] * n})
        assert r.status_code == 200, r.text
        counts = np.bincount(r.json()["answers"], minlength=3)
        h = np.bincount(row, minlength=3)
        for c, p in enumerate(agg.distribution(h)):
            p = float(p)
            assert abs(counts[c] / n - p) <= 5 * math.sqrt(p * (1 - p) / n) + 1e-12, (row, c, counts)


@pytest.mark.parametrize("votes, row", [
    ([[0] * 7, [0, 0, 0, 0, 0, 0, 3]], 1),
    ([[0] * 7, [0] * 6], 1),
    ([[0, 0, 0, 0, 0, 0, -1]], 0),
    ([[0, 0, 0, 0, 0, 0, 1000]], 0),
    ([[0, 0, 0, 0, 0, 0, 1.0]], 0),
])
def test_bad_labels_are_422_naming_votes_and_row(client, table, votes, row):
    ledger = make_ledger(client, epsilon_budget=20.0, delta_budget=1e-3, name="mc-bad-" + uuid.uuid4().hex[:6])
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"], "votes": votes})
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][:3] == ["body", "votes", row]
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 0


def test_a_binary_table_still_refuses_a_label(client):
    binary = client.post("/v1/tables", json={"K": 5, "m": 2, "epsilon": 0.1, "teacher_delta": 1e-5}).json()
    ledger = make_ledger(client, epsilon_budget=20.0, delta_budget=1e-3, name="bin-" + uuid.uuid4().hex[:6])
    r = client.post("/v1/aggregate", json={"table_id": binary["id"], "ledger_id": ledger["id"],
                                           "votes": [[0, 1, 0, 1, 0], [0, 1, 2, 1, 0]]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "votes", 1]
    assert "0 or 1" in r.json()["detail"][0]["msg"]


def test_large_label_bodies_and_two_digit_labels_with_replay(client):
    """Bodies over 16 KiB take the byte-level reader; labels 10 and 11 (C = 12) are answered and replayed."""
    t12 = client.post("/v1/tables", json={**BODY, "classes": 12})
    assert t12.status_code == 200, t12.text
    tid = t12.json()["id"]
    ledger = make_ledger(client, epsilon_budget=1e6, delta_budget=0.5, name="mc-big-" + uuid.uuid4().hex[:6])
    rows = 2000
    body = {"table_id": tid, "ledger_id": ledger["id"], "votes": [[11, 11, 11, 11, 11, 10, 0]] * rows,
            "idempotency_key": "k1"}
    text = json.dumps(body).encode()
    assert len(text) > 16 * 1024
    r = client.post("/v1/aggregate", content=text, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    answers = r.json()["answers"]
    assert len(answers) == rows and set(answers) <= set(range(12)) and answers.count(11) > rows // 2
    replay = client.post("/v1/aggregate", content=text, headers={"content-type": "application/json"})
    assert replay.status_code == 200 and replay.json()["replayed"] is True and replay.json()["answers"] == answers
    bad = json.dumps({**body, "idempotency_key": "k2", "votes": [[11] * 7] * 999 + [[12] * 7] * 1001}).encode()
    r = client.post("/v1/aggregate", content=bad, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "votes", 999], r.text
    assert "[0, 11]" in r.json()["detail"][0]["msg"]
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == rows


def test_multiclass_round_trip_on_postgres(pg_database):
    """The same on PostgreSQL (migration 0005 adds ``classes`` there too): create, answer labels, pay; the
    application in process."""
    with in_process_client(pg_database) as c:
        r = c.post("/v1/tables", json=BODY)
        assert r.status_code == 200, r.text
        tid = r.json()["id"]
        params = MulticlassParams(7, 3, 1.0, 1e-5)
        assert tid == table_id("darrm-multiclass", params, "disjoint-nonprivate", r.json()["gamma"])
        assert r.json()["classes"] == 3
        ledger = make_ledger(c, epsilon_budget=20.0, delta_budget=1e-3, name="mc-pg")
        r = c.post("/v1/aggregate", json={"table_id": tid, "ledger_id": ledger["id"],
                                          "votes": [[1] * 7, [0, 1, 2, 2, 2, 2, 2]]})
        assert r.status_code == 200, r.text
        assert set(r.json()["answers"]) <= {0, 1, 2} and r.json()["ledger_answers"] == 2
        prof = multiclass_profile(params, r.json()["gamma"] if "gamma" in r.json() else
                                  c.get(f"/v1/tables/{tid}").json()["gamma"])
        expected = accounting.account([(1.0, 1e-5, 2)], 1e-3, profiles=[(prof, 2)], coarse=True).spend
        assert (r.json()["epsilon_spent"], r.json()["composition"]) == (expected.epsilon, "exact")


# ---------------------------------------------------------------------------------------------------------
# in process: a stored profile is served and composed exactly, whatever the table's kind
def test_a_multiclass_row_with_a_profile_is_served_and_composed_exactly(tmp_path):
    from darrm_opt.api.settings import Settings
    from darrm_opt.api.table_service import TableService
    from darrm_opt.ledger.local import Ledger
    from darrm_opt.mechanisms import mechanism_for
    from darrm_opt.release.release import Aggregator

    params = MulticlassParams(7, 3, 1.0, 1e-5)
    sol = solve_multiclass(params)
    prof = multiclass_profile(params, sol.gamma)  # the table's own: tighter than its generic (1, 1e-5) pair
    table = mechanism_for(params).table(params, sol.gamma, sol.certificate, profile=prof)
    url = f"sqlite:///{tmp_path / 'l.db'}"
    with Ledger(url, "mc", epsilon_budget=50.0, delta_budget=1e-3) as book:
        Aggregator(table, book)(np.zeros((30, 7), dtype=np.uint8))
        view = book.view()
        exact = accounting.account([(1.0, 1e-5, 30)], 1e-3, profiles=[(prof, 30)], coarse=True).spend
        generic = accounting.account([(1.0, 1e-5, 30)], 1e-3).spend
        assert exact.method == "exact" and exact.epsilon < generic.epsilon
        # the ledger states the exact composition at the count or at its bucket (an upper bound of it)
        at_bucket = exact_epsilon(bucketed([(prof, 30)]), 1e-3, coarse=True)
        assert view["composition"] == "exact" and view["epsilon_spent"] in (exact.epsilon, at_bucket)
        assert exact.epsilon <= view["epsilon_spent"] < generic.epsilon
        service = TableService(book.db, Settings())
        try:
            served = service.get(table.id)
            assert served is not None and served.classes == 3 and served.profile == prof
            assert (served.epsilon0, served.delta0) == (1.0, 1e-5)
            assert service.profile_of(table.id) == prof
        finally:
            service.close()


# ---------------------------------------------------------------------------------------------------------
# the byte-level reader of large bodies reads class labels as pydantic does
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from darrm_opt.api import votes as votes_io  # noqa: E402

label_rows = st.integers(1, 6).flatmap(
    lambda k: st.lists(st.lists(st.integers(0, 999), min_size=k, max_size=k), min_size=1, max_size=20))


@settings(max_examples=200, deadline=None)
@given(rows=label_rows, spaces=st.booleans())
def test_fast_reader_reads_labels_as_the_model_does(rows, spaces):
    body = json.dumps({"table_id": "t1", "ledger_id": "l1", "votes": rows},
                      separators=None if spaces else (",", ":")).encode()
    slow = votes_io.AggregateRequest.model_validate_json(body)
    fast = votes_io.parse_fast(body)
    assert fast is not None
    assert fast[1].tolist() == slow.votes == rows


@pytest.mark.parametrize("votes", [b"[[01,2]]", b"[[1000]]", b"[[1,2],[3]]", b"[[-1,2]]", b"[[1.5,2]]",
                                   b"[[1e2,2]]", b"[[12 3]]", b"[[1,2,]]", b"[[]]"])
def test_fast_reader_refuses_what_is_not_labels(votes):
    body = b'{"table_id":"t","ledger_id":"l","votes":' + votes + b"}"
    assert votes_io.parse_fast(body) is None


def test_a_top_two_table_is_planned_served_whole_and_answers_labels(client):
    """The top-two kind through the service: planned on request, served with every field its document needs
    (``gap_cap`` included, so the served table reads back and re-certifies), and answering class labels."""
    from darrm_opt.mechanisms import table_from_document

    body = {"K": 9, "classes": 3, "queries": 1, "budget_epsilon": 1.0, "budget_delta": 1e-5,
            "mechanism": "darrm-multiclass-top2"}
    r = client.post("/v1/plans", json=body)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["mechanism"] == "darrm-multiclass-top2"
    served = client.get(f"/v1/tables/{doc['table']['id']}").json()
    assert served["kind"] == "darrm-multiclass-top2" and served["gap_cap"] == doc["table"]["gap_cap"] >= 1
    table = table_from_document(served)
    assert table.id == served["id"] and list(table.gamma) == served["gamma"]
    ledger = make_ledger(client, epsilon_budget=5.0, delta_budget=1e-3, name="top2-" + uuid.uuid4().hex[:6])
    votes = [[0] * 9, [1, 1, 1, 1, 1, 2, 2, 2, 0]]
    r = client.post("/v1/aggregate", json={"table_id": served["id"], "ledger_id": ledger["id"], "votes": votes})
    assert r.status_code == 200, r.text
    assert len(r.json()["answers"]) == 2 and set(r.json()["answers"]) <= {0, 1, 2}
