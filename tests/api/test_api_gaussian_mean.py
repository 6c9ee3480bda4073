"""The gaussian-mean kind through the service: a calibrated table stored, teachers' vectors answered by
``POST /v1/aggregate`` (clipped on the server, priced by the exact profile), bad bodies refused by field."""

from __future__ import annotations

import math

import numpy as np
import pytest
from svc_helpers import make_ledger

from darrm_opt.mechanisms.gaussian_mean import gaussian_mean_table
from darrm_opt.model.gaussian_params import GaussianMeanParams
from darrm_opt.privacy.gaussian_mean import composed_epsilon
from darrm_opt.privacy.pld import exact_epsilon

REQUEST = {"queries": 80, "epsilon": 8.0, "delta": 1e-3, "K": 8, "dim": 4, "radius": 1.0}


@pytest.fixture(scope="module")
def table(app_client) -> dict:
    r = app_client.post("/v1/gaussian-tables", json=REQUEST)
    assert r.status_code == 201, r.text
    return r.json()


def test_a_calibrated_table_is_stored_with_its_certificate_and_profile(client, table):
    t, cal = table["table"], table["calibration"]
    assert t["kind"] == "gaussian-mean" and t["gamma"] == [] and t["certificate"]["certified"] is True
    assert (t["K"], t["dim"], t["lattice"], t["noise"]) == (8, 4, 2.0**-9, 4397)
    assert cal["sigma_eq15"] == pytest.approx(1.2825639, rel=1e-6) and cal["sigma"] == pytest.approx(1.073486328125)
    assert client.get(f"/v1/tables/{t['id']}").json()["id"] == t["id"]
    listed = client.get("/v1/tables", params={"limit": 500})
    assert listed.status_code == 200 and t["id"] in {x["id"] for x in listed.json()["items"]}
    expected = gaussian_mean_table(GaussianMeanParams(8, 4, 1.0, 2.0**-9, 4397, 1e-3 / 80))
    assert t["id"] == expected.id and t["privacy_profile"] == expected.profile.to_dict()
    r = client.post("/v1/gaussian-tables", json={**REQUEST, "K": 0})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "K"]


def test_vectors_are_clipped_answered_and_priced_by_the_exact_profile(client, table):
    t = table["table"]
    ledger = make_ledger(client, 8.0, 1e-3)
    y = np.full((20, 8, 4), 0.25)
    y[:, 0, :] = 1.0  # norm 2 > R = 1: clipped on the server to 0.5 per coordinate
    r = client.post("/v1/aggregate", json={"table_id": t["id"], "ledger_id": ledger["id"], "vectors": y.tolist()})
    assert r.status_code == 200, r.text
    doc = r.json()
    means = np.asarray(doc["answers"])
    assert means.shape == (20, 4) and doc["ledger_answers"] == 20
    clipped_mean = (7 * 0.25 + 0.5) / 8  # the server clipped the first teacher: the mean is 0.28125
    assert abs(means.mean() - clipped_mean) < 5 * 1.0735 / math.sqrt(80)
    prof = gaussian_mean_table(GaussianMeanParams(8, 4, 1.0, 2.0**-9, 4397, 1e-3 / 80)).profile
    assert composed_epsilon(prof, 20, 1e-3) <= doc["epsilon_spent"]
    assert doc["epsilon_spent"] in [pytest.approx(exact_epsilon([(prof, 20)], 1e-3, coarse=c), rel=1e-12)
                                    for c in (False, True)]


@pytest.mark.parametrize(("vectors", "loc", "needle"), [
    ([[[0.5] * 4] * 7], "vectors", "shape"),                              # K = 7 vectors, the table has 8
    ([[[0.5] * 3] * 8], "vectors", "shape"),
    ([[[0.5] * 4] * 8, [[0.5, 1.5, 0.5, 0.5]] + [[0.5] * 4] * 7], "vectors", "row 1"),
    ([[[0.5] * 4] * 8, [[-0.1, 0.5, 0.5, 0.5]] + [[0.5] * 4] * 7], "vectors", "[0, 1]"),
    ([[[0.5, "a", 0.5, 0.5]] * 8], "vectors", "numbers"),
    ([[[0.5] * 4] * 8, [[0.5] * 4] * 6], "vectors", "numbers"),             # ragged
])
def test_bad_vectors_are_a_422_naming_the_field_and_spend_nothing(client, table, vectors, loc, needle):
    ledger = make_ledger(client, 8.0, 1e-3)
    r = client.post("/v1/aggregate", json={"table_id": table["table"]["id"], "ledger_id": ledger["id"],
                                           "vectors": vectors})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body", loc] and needle in detail["msg"]
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 0


def test_nan_is_refused_naming_vectors(client, table):
    ledger = make_ledger(client, 8.0, 1e-3)
    rows = ", ".join(["[0.5, NaN, 0.5, 0.5]"] * 8)
    body = f'{{"table_id": "{table["table"]["id"]}", "ledger_id": "{ledger["id"]}", "vectors": [[{rows}]]}}'
    r = client.post("/v1/aggregate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "vectors"]
    assert "JSON numbers only" in r.json()["detail"][0]["msg"]  # NaN is not JSON: refused as the body is read
    rows = ", ".join(["[0.5, 1.5, 0.5, 0.5]"] * 8)  # a number outside [0, 1]: refused naming its row
    body = f'{{"table_id": "{table["table"]["id"]}", "ledger_id": "{ledger["id"]}", "vectors": [[{rows}]]}}'
    r = client.post("/v1/aggregate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "vectors"]
    assert "row 0" in r.json()["detail"][0]["msg"], r.text


def test_an_unknown_field_is_named_and_an_unknown_table_is_a_404(client, table):
    ledger = make_ledger(client, 8.0, 1e-3)
    r = client.post("/v1/aggregate", json={"table_id": table["table"]["id"], "ledger_id": ledger["id"],
                                           "vectors": [[[0.5] * 4] * 8], "request_key": "k"})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "request_key"]
    r = client.post("/v1/aggregate", json={"table_id": "0" * 32, "ledger_id": ledger["id"],
                                           "vectors": [[[0.5] * 4] * 8]})
    assert r.status_code == 404


def test_a_budget_too_small_refuses_the_batch(client, table):
    ledger = make_ledger(client, 0.5, 1e-3)
    r = client.post("/v1/aggregate", json={"table_id": table["table"]["id"], "ledger_id": ledger["id"],
                                           "vectors": [[[0.5] * 4] * 8] * 10})
    assert r.status_code == 409 and "answers" in r.json()
    assert client.get(f"/v1/ledgers/{ledger['id']}").json()["answers"] == 0


@pytest.mark.slow  # a real server process
def test_a_real_server_answers_vectors_over_loopback(sqlite_server):
    with sqlite_server.client() as c:
        r = c.post("/v1/gaussian-tables", json={**REQUEST, "dim": 16})
        assert r.status_code == 201, r.text
        table_id = r.json()["table"]["id"]
        ledger = make_ledger(c, 8.0, 1e-3)
        y = np.random.default_rng(0).random((80, 8, 16))
        r = c.post("/v1/aggregate", json={"table_id": table_id, "ledger_id": ledger["id"], "vectors": y.tolist()})
        assert r.status_code == 200, r.text
        assert np.asarray(r.json()["answers"]).shape == (80, 16) and r.json()["epsilon_spent"] <= 8.0
        r = c.post("/v1/aggregate", json={"table_id": table_id, "ledger_id": ledger["id"], "vectors": y[:1].tolist()})
        assert r.status_code == 409  # the 80 answers the table was calibrated for have spent the budget
        over = c.post("/v1/aggregate", json={"table_id": table_id, "ledger_id": ledger["id"],
                                             "vectors": np.zeros((30_001, 1, 1)).tolist()})
        assert over.status_code == 422 and over.json()["detail"][0]["loc"] == ["body", "vectors"]
