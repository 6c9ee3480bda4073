"""The service's data-dependent ledgers: create, record, publish once; only public values are served."""

from __future__ import annotations

import json

POLICY = {"aggregator": "gnmax", "K": 12, "classes": 3, "sigma": 2.0, "order": 2.0, "beta": 0.1, "sigma_ss": 3.0,
          "delta": 1e-5, "quota": 3}


def test_data_dependent_ledger_over_http(client):
    r = client.post("/v1/data-dependent-ledgers", json={"name": "dd-job", "policy": POLICY})
    assert r.status_code == 201, r.text
    view = r.json()
    lid = view["id"]
    assert view["mode"] == "data-dependent" and view["sanitised_epsilon"] is None and "not a worst case" in \
        view["guarantee"]
    r = client.post(f"/v1/data-dependent-ledgers/{lid}/record", json={"votes": [[12, 0, 0], [6, 6, 0]]})
    assert r.status_code == 200 and r.json()["queries"] == 2
    quiet = r.json()
    r = client.post(f"/v1/data-dependent-ledgers/{lid}/record", json={"votes": [[12, 0, 0], [6, 6, 0]]})
    assert r.status_code == 409 and "quota" in r.json()["detail"]
    assert client.get(f"/v1/data-dependent-ledgers/{lid}").json() == quiet  # nothing recorded
    r = client.post(f"/v1/data-dependent-ledgers/{lid}/publish")
    assert r.status_code == 200 and r.json()["sealed"]
    eps = r.json()["sanitised_epsilon"]
    assert isinstance(eps, float)
    assert client.post(f"/v1/data-dependent-ledgers/{lid}/publish").json()["sanitised_epsilon"] == eps
    r = client.post(f"/v1/data-dependent-ledgers/{lid}/record", json={"votes": [[12, 0, 0]]})
    assert r.status_code == 409 and "sealed" in r.json()["detail"]
    assert "rdp" not in json.dumps(client.get(f"/v1/data-dependent-ledgers/{lid}").json())


def test_invalid_requests_are_422_or_404(client):
    bad = client.post("/v1/data-dependent-ledgers", json={"name": "x", "policy": {**POLICY, "sigma": 1.0,
                                                                                     "order": 3.0}})
    assert bad.status_code == 422 and "C5/C6" in bad.text
    bad = client.post("/v1/data-dependent-ledgers", json={"name": "x", "policy": {**POLICY, "beta": 0.3}})
    assert bad.status_code == 422
    assert client.get("/v1/data-dependent-ledgers/nope").status_code == 404
    assert client.post("/v1/data-dependent-ledgers/nope/publish").status_code == 404
    lid = client.post("/v1/data-dependent-ledgers", json={"name": "y", "policy": POLICY}).json()["id"]
    r = client.post(f"/v1/data-dependent-ledgers/{lid}/record", json={"votes": [[11, 0, 0]]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "votes"]
    r = client.post(f"/v1/data-dependent-ledgers/{lid}/record", json={"votes": [[12, 0, 0]], "answered": [True]})
    assert r.status_code == 422


INTERACTIVE = {"aggregator": "interactive-gnmax", "K": 12, "classes": 3, "sigma": 2.0, "order": 2.0, "beta": 0.1,
               "sigma_ss": 3.0, "delta": 1e-5, "quota": 4, "threshold": 4.0, "sigma1": 1.5, "confidence": 0.6}


def test_interactive_answers_take_the_students_probabilities(client):
    lid = client.post("/v1/data-dependent-ledgers", json={"name": "interactive", "policy": INTERACTIVE}).json()["id"]
    body = {"votes": [[6, 6, 0], [12, 0, 0]], "student": [[0.9, 0.05, 0.05], [0.9, 0.05, 0.05]]}
    r = client.post(f"/v1/data-dependent-ledgers/{lid}/answer", json=body)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert len(doc["answers"]) == 2 and set(doc["answers"]) <= {-1, 0, 1, 2}
    assert doc["queries"] == 2 and 0 <= doc["answered"] <= 2 and doc["policy"]["confidence"] == 0.6
    assert "rdp" not in json.dumps(doc)
    for student, field_rule in (([[0.9, 0.1]] * 2, "3 classes"), ([[0.5, 0.3, 0.1]] * 2, "sum to 1"),
                                ([[1.2, -0.1, -0.1]] * 2, "non-negative")):
        bad = client.post(f"/v1/data-dependent-ledgers/{lid}/answer", json={**body, "student": student})
        assert bad.status_code == 422, bad.text
        (detail,) = bad.json()["detail"]
        assert detail["loc"][-1] == "student" and field_rule in detail["msg"]
    missing = client.post(f"/v1/data-dependent-ledgers/{lid}/answer", json={"votes": body["votes"]})
    assert missing.status_code == 422 and missing.json()["detail"][0]["loc"][-1] == "student"
    over = client.post(f"/v1/data-dependent-ledgers/{lid}/answer", json={**body, "votes": body["votes"] * 2,
                                                                          "student": body["student"] * 2})
    assert over.status_code == 409 and "quota" in over.json()["detail"]
    assert client.get(f"/v1/data-dependent-ledgers/{lid}").json()["queries"] == 2  # nothing on a refusal
    assert client.post("/v1/data-dependent-ledgers/nope/answer", json=body).status_code == 404
    gnmax = client.post("/v1/data-dependent-ledgers", json={"name": "plain-dd", "policy": POLICY}).json()["id"]
    r = client.post(f"/v1/data-dependent-ledgers/{gnmax}/answer", json={"votes": [[12, 0, 0]]})
    assert r.status_code == 200 and r.json()["answered"] == 1 and r.json()["answers"] in ([0], [1], [2])
