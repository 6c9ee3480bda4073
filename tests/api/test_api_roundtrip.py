"""Round trips through the service (the application in process; single flight under concurrent requests
through a real server): tables (cache, jobs, single flight), ledgers, aggregate, errors."""

from __future__ import annotations

import concurrent.futures as cf
import math
import time

import pytest
from svc_helpers import in_process_client, make_ledger, make_table

from darrm_opt.certify.certificate import certify
from darrm_opt.model.params import Params
from darrm_opt.privacy import accounting, pld
from darrm_opt.privacy.profile import PrivacyProfile
from darrm_opt.privacy.table import table_id


def test_round_trip_and_cache_hit(client):
    first = client.post("/v1/tables", json={"K": 5, "m": 2, "epsilon": 0.1, "teacher_delta": 1e-5})
    assert first.status_code == 200, first.text
    table = first.json()
    assert first.headers["x-darrm-cache"] in ("miss", "hit", "shared")
    params = Params(5, 2, 0.1, 1e-5)
    assert table["id"] == table_id("darrm", params, "shared", table["gamma"])  # its content, γ included
    assert table["certificate"]["certified"] is True
    assert certify(params, table["gamma"]).certified  # the served γ re-verifies
    for field in ("K", "m", "epsilon", "teacher_delta", "delta", "prior", "gamma", "certificate", "created_at"):
        assert field in table

    second = client.post("/v1/tables", json={"K": 5, "m": 2.0, "epsilon": 0.1, "teacher_delta": 1e-5})
    assert second.status_code == 200 and second.headers["x-darrm-cache"] == "hit"
    assert second.json() == table
    assert client.get(f"/v1/tables/{table['id']}").json() == table

    ledger = make_ledger(client, epsilon_budget=10.0, delta_budget=1e-3)
    assert (ledger["answers"], ledger["epsilon_spent"], ledger["delta_target"]) == (0, 0.0, 1e-3)
    votes = [[1, 1, 1, 0, 0], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1]]
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"], "votes": votes})
    assert r.status_code == 200, r.text
    out = r.json()
    assert len(out["answers"]) == 3 and set(out["answers"]) <= {0, 1}
    eps0, d0 = 2 * 0.1, params.delta
    generic = accounting.account([(eps0, d0, 3)], 1e-3).spend
    # the debit states the exact composition of the table's profile (coarse grid: the budget is far), the
    # tightest bound, at the ledger's fixed δ; the view states the same
    profile = PrivacyProfile.from_dict(table["privacy_profile"])
    tightest = accounting.account([(eps0, d0, 3)], 1e-3, profiles=[(profile, 3)], coarse=True).spend
    assert tightest.method == "exact" and tightest.epsilon < generic.epsilon
    assert (out["epsilon_spent"], out["delta_target"], out["composition"]) == (tightest.epsilon, 1e-3, "exact")

    after = client.get(f"/v1/ledgers/{ledger['id']}").json()
    assert after["answers"] == 3
    assert (after["epsilon_spent"], after["delta_target"], after["composition"]) == (
        tightest.epsilon, 1e-3, tightest.method)
    assert after["bounds"]["basic"]["epsilon"] == pytest.approx(3 * eps0)
    assert after["groups"] == [{"table_id": table["id"], "epsilon0": eps0, "delta0": d0, "answers": 3}]


def test_list_tables_filters(client):
    a = make_table(client, K=3, m=1.5, teacher_delta=0.0)
    b = make_table(client, K=3, m=2.5, teacher_delta=0.0)
    listed = client.get("/v1/tables", params={"K": 3, "teacher_delta": 0.0}).json()
    ids = {t["id"] for t in listed["items"]}
    assert {a["id"], b["id"]} <= ids and all(t["K"] == 3 for t in listed["items"])
    only_b = client.get("/v1/tables", params={"K": 3, "m": 2.5, "teacher_delta": 0.0}).json()
    assert [t["id"] for t in only_b["items"]] == [b["id"]] and only_b["total"] == 1
    page = client.get("/v1/tables", params={"limit": 1, "offset": 0}).json()
    assert len(page["items"]) == 1 and page["total"] >= 2


def test_slow_solve_answers_202_then_job_reports_the_table(client):
    r = client.post("/v1/tables", json={"K": 7, "m": 2.25})  # 3432 multisets > the server's inline limit
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    assert r.headers["location"] == f"/v1/jobs/{job_id}" == r.json()["status_url"]
    deadline = time.monotonic() + 60
    job = {}
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        assert job["status"] in ("queued", "running", "done"), job
        if job["status"] == "done":
            break
        time.sleep(0.05)
    assert job["status"] == "done" and job_id == Params(7, 2.25).key()  # the job is the parameters' solve
    assert job["table_id"] == table_id("darrm", Params(7, 2.25), "shared", job["table"]["gamma"])
    assert job["table"] == client.get(f"/v1/tables/{job['table_id']}").json()
    assert job["table"]["certificate"]["certified"] is True
    again = client.post("/v1/tables", json={"K": 7, "m": 2.25})
    assert again.status_code == 200 and again.headers["x-darrm-cache"] == "hit"


@pytest.mark.slow  # concurrent requests into a real server process
def test_identical_concurrent_requests_run_one_solve(sqlite_server):
    body = {"K": 13, "m": 3.37, "teacher_delta": 0.0}  # pure DP: 560 multisets, inline
    with sqlite_server.client() as c, cf.ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda _: c.post("/v1/tables", json=body), range(8)))
    assert all(r.status_code == 200 for r in responses), [r.text for r in responses]
    kinds = [r.headers["x-darrm-cache"] for r in responses]
    assert kinds.count("miss") == 1, kinds
    assert set(kinds) <= {"miss", "shared", "hit"}
    assert len({r.json()["id"] for r in responses}) == 1
    assert len({r.json()["created_at"] for r in responses}) == 1


def test_idempotency_key_replays_and_spends_nothing_twice(client):
    table = make_table(client, K=5, m=2)
    ledger = make_ledger(client, 50.0, 1e-3)
    body = {"table_id": table["id"], "ledger_id": ledger["id"], "votes": [[1, 0, 1, 0, 1]] * 7,
            "idempotency_key": "batch-0001"}
    first = client.post("/v1/aggregate", json=body)
    assert first.status_code == 200 and first.json()["replayed"] is False
    replay = client.post("/v1/aggregate", json=body)
    assert replay.status_code == 200 and replay.json()["replayed"] is True
    assert replay.json()["answers"] == first.json()["answers"]
    assert replay.json()["epsilon_spent"] == first.json()["epsilon_spent"]
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 7
    # the same key with a different request is refused (422 naming the key), not a replay
    other = client.post("/v1/aggregate", json={**body, "votes": [[1, 0, 1, 0, 1]] * 3})
    assert other.status_code == 422 and other.json()["detail"][0]["loc"] == ["body", "idempotency_key"]
    # keys are per ledger
    ledger2 = make_ledger(client, 50.0, 1e-3)
    fresh = client.post("/v1/aggregate", json={**body, "ledger_id": ledger2["id"]})
    assert fresh.status_code == 200 and fresh.json()["replayed"] is False


def test_over_budget_batch_releases_nothing(client):
    table = make_table(client, K=5, m=2, teacher_delta=0.0)  # pure: (0.2, 0) per answer
    ledger = make_ledger(client, epsilon_budget=1.0, delta_budget=0.0)  # pays for exactly 5 answers
    body = {"table_id": table["id"], "ledger_id": ledger["id"]}
    ok = client.post("/v1/aggregate", json={**body, "votes": [[1, 1, 0, 0, 0]] * 4})
    assert ok.status_code == 200
    too_many = client.post("/v1/aggregate", json={**body, "votes": [[1, 1, 0, 0, 0]] * 2})
    assert too_many.status_code == 409
    refused = too_many.json()
    assert "answers" in refused and refused["answers"] == 4 and "budget" in refused["detail"]
    assert not isinstance(refused.get("answers"), list)
    state = client.get(f"/v1/ledgers/{ledger['id']}").json()
    assert state["answers"] == 4 and state["epsilon_spent"] == pytest.approx(0.8)
    last = client.post("/v1/aggregate", json={**body, "votes": [[1, 1, 0, 0, 0]]})
    assert last.status_code == 200
    assert client.post("/v1/aggregate", json={**body, "votes": [[0, 0, 0, 0, 0]]}).status_code == 409


def test_heterogeneous_ledger_spends_by_a_bound_valid_for_an_adaptive_mix(client):
    """Two tables mixed in one ledger (the client may pick each after reading earlier answers): the ledger
    states the tightest bound valid for an adaptive mix, here the smaller of all 47 answers composed as one pair
    that dominates both tables' (``exact-dominating``, coarse grid at the count's bucket while the budget is
    far) and basic composition as a filter. The exact product of the two profiles (what it stated before) and
    the fixed-sequence heterogeneous bounds are not used: no theorem covers them for an adaptive mix."""
    from darrm_opt.privacy.adaptive import adaptive_parts

    t1 = make_table(client, K=5, m=2, teacher_delta=1e-6)
    t2 = make_table(client, K=3, m=1.5, epsilon=0.3, teacher_delta=0.0)
    ledger = make_ledger(client, 100.0, 1e-4)
    for table, rows in ((t1, 30), (t2, 12), (t1, 5)):
        r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"],
                                               "votes": [[1] * table["K"]] * rows})
        assert r.status_code == 200, r.text
    state = client.get(f"/v1/ledgers/{ledger['id']}").json()
    groups = [(0.2, Params(5, 2, 0.1, 1e-6).delta, 35), (0.3 * 1.5, 0.0, 12)]
    profiles = [(PrivacyProfile.from_dict(t["privacy_profile"]), n) for t, n in ((t1, 35), (t2, 12))]
    parts, _, method = adaptive_parts(profiles)
    assert method == "exact-dominating" and parts is not None and [n for _, n in parts] == [47]
    dom = parts[0][0]
    assert pld.bucket(47) == 48
    joined = pld.exact_epsilon([(dom, 48)], 1e-4, coarse=True)
    generic = accounting.account(groups, 1e-4, adaptive=True).spend  # basic as a filter: 12.4 here
    assert generic.method == "basic-filter" and generic.epsilon == pytest.approx(12.4)
    expected = min((joined, "exact-dominating"), (generic.epsilon, generic.method))
    assert state["answers"] == 47
    assert (state["epsilon_spent"], state["composition"]) == expected
    assert accounting.account(groups, 1e-4, profiles=profiles).spend.epsilon < expected[0]  # the old, invalid one
    assert {"basic-filter", "optimal-dominating"} <= set(state["bounds"])
    assert not {"basic", "optimal-grouped", "kov-heterogeneous", "exact"} & set(state["bounds"])
    assert sorted(g["answers"] for g in state["groups"]) == [12, 35]
    for b in state["bounds"].values():
        assert b["epsilon"] is None or math.isfinite(b["epsilon"])


@pytest.mark.parametrize(
    "body,field",
    [
        ({"K": 10, "m": 3}, "K"),
        ({"K": 11, "m": 12}, "m"),
        ({"K": 11, "m": 3, "epsilon": -1}, "epsilon"),
        ({"K": 11, "m": 3, "teacher_delta": 1e-3, "delta": 1e-4}, "delta"),
        ({"K": 11, "m": 3, "prior": "flat"}, "prior"),
        ({"K": 11, "m": 3, "solver": "nonesuch"}, "solver"),
        ({"K": 41, "m": 3}, "K"),  # more multisets than this server accepts
        ({"K": "eleven", "m": 3}, "K"),
        ({"m": 3}, "K"),
        ({"K": 11, "m": 3, "colour": "red"}, "colour"),
    ],
)
def test_invalid_table_parameters_are_422_naming_the_field(client, body, field):
    r = client.post("/v1/tables", json=body)
    assert r.status_code == 422, r.text
    locs = [e["loc"] for e in r.json()["detail"]]
    assert any(field in loc for loc in locs), locs


def test_bad_aggregate_bodies(client):
    table = make_table(client, K=5, m=2)
    ledger = make_ledger(client, 10.0, 1e-3)
    base = {"table_id": table["id"], "ledger_id": ledger["id"]}
    cases = [
        ({**base, "votes": [[1, 0, 1, 0]]}, 422, "votes"),
        ({**base, "votes": [[1, 0, 1, 0, 1], [1, 0, 1]]}, 422, "votes"),
        ({**base, "votes": [[1, 0, 2, 0, 1]]}, 422, "votes"),
        ({**base, "votes": [[1, 0, True, 0, 1]]}, 422, "votes"),
        ({**base, "votes": [[1, 0, 1.0, 0, 1]]}, 422, "votes"),
        ({**base, "votes": []}, 422, "votes"),
        ({**base, "votes": [[]]}, 422, "votes"),
        ({**base, "votes": "11010"}, 422, "votes"),
        ({"ledger_id": ledger["id"], "votes": [[1] * 5]}, 422, "table_id"),
        ({**base, "votes": [[1] * 5], "extra": 1}, 422, "extra"),
        ({**base, "votes": [[1] * 5], "idempotency_key": "a\u0000b"}, 422, "idempotency_key"),
        ({**base, "table_id": "0" * 32, "votes": [[1] * 5]}, 404, "table_id"),
        ({**base, "ledger_id": "f" * 32, "votes": [[1] * 5]}, 404, "ledger_id"),
        ({**base, "table_id": "../../etc", "votes": [[1] * 5]}, 422, "table_id"),
    ]
    for body, status, field in cases:
        r = client.post("/v1/aggregate", json=body)
        assert r.status_code == status, (body, r.text)
        assert field in r.text, (body, r.text)
    r = client.post("/v1/aggregate", content=b'{"table_id": "x", "votes": [[1,0',
                    headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 0


def test_too_many_rows_is_422_and_spends_nothing(client):
    table = make_table(client, K=3, m=1.5)
    ledger = make_ledger(client, 1e9, 0.9)
    r = client.post("/v1/aggregate", json={"table_id": table["id"], "ledger_id": ledger["id"],
                                           "votes": [[1, 0, 1]] * 30_001})  # the server allows 30 000
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "votes"]
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 0


def test_unknown_ids_are_404(client):
    for path in ("/v1/tables/" + "0" * 32, "/v1/ledgers/" + "0" * 32, "/v1/jobs/" + "0" * 32):
        r = client.get(path)
        assert r.status_code == 404 and "not found" in r.json()["detail"]


def test_health_and_docs(tmp_path):
    with in_process_client(f"sqlite:///{tmp_path / 'health.db'}", keyed=False) as c:  # no key: open paths
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json() == {"status": "ready"}
        spec = c.get("/openapi.json").json()
        for path in ("/v1/tables", "/v1/tables/{table_id}", "/v1/jobs/{job_id}", "/v1/ledgers",
                     "/v1/ledgers/{ledger_id}", "/v1/aggregate", "/healthz", "/readyz"):
            assert path in spec["paths"]
        assert "votes" in spec["paths"]["/v1/aggregate"]["post"]["requestBody"]["content"]["application/json"][
            "schema"]["properties"]
        assert c.get("/docs").status_code == 200


def test_unknown_solver_is_refused_even_for_a_cached_table(client):
    make_table(client, K=3, m=1.25)
    r = client.post("/v1/tables", json={"K": 3, "m": 1.25, "solver": "nonesuch"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "solver"]
    assert client.post("/v1/tables", json={"K": 3, "m": 1.25, "solver": "highs"}).status_code == 200
