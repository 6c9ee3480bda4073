"""The smaller items of the service audit: the OpenAPI schema states the cross-field rules the service
enforces (a body is schema-valid iff the service does not answer 422), huge integers are 4xx, OPTIONS
answers with ``Allow``, database errors are 503, and a server on a bad database URL exits non-zero."""

from __future__ import annotations

import os
import subprocess
import sys

import jsonschema_rs
import psycopg
import pytest
from svc_helpers import KEY, ROOT, free_port, in_process_client

HUGE = "1" + "0" * 400

TABLES = [
    ({"K": 5, "m": 2}, True),
    ({"K": 5}, False),  # m is required for a binary table of shared teachers
    ({"K": 5, "m": 2, "target_epsilon": 1.0}, False),
    ({"K": 5, "m": 2, "teachers": "disjoint-private"}, True),
    ({"K": 5, "teachers": "disjoint-nonprivate", "target_epsilon": 1.0}, True),
    ({"K": 5, "teachers": "disjoint-nonprivate", "m": None, "target_epsilon": 1.0}, True),
    ({"K": 5, "teachers": "disjoint-nonprivate", "target_epsilon": 1.0, "epsilon": 0.1}, False),
    ({"K": 5, "teachers": "disjoint-nonprivate", "target_epsilon": 1.0, "teacher_delta": 0.0}, False),
    ({"K": 5, "teachers": "disjoint-nonprivate", "m": 2, "target_epsilon": 1.0}, False),
    ({"K": 5, "teachers": "disjoint-nonprivate"}, False),
    ({"K": 5, "m": 2, "classes": 3}, False),  # classes only with disjoint-nonprivate teachers
]
LEDGERS = [
    ({"name": "a", "epsilon_budget": 1.0, "delta_budget": 0.0}, True),
    ({"name": "a", "epsilon_budget": 1.0, "delta_budget": 0.0, "teachers": "disjoint-private"}, False),
    ({"name": "a", "epsilon_budget": 1.0, "delta_budget": 0.0, "teachers": "disjoint-private",
      "teacher_epsilon": 0.5}, False),
    ({"name": "a", "epsilon_budget": 1.0, "delta_budget": 0.0, "teacher_epsilon": 0.5}, False),
    ({"name": "a", "epsilon_budget": 1.0, "delta_budget": 0.0, "teachers": "disjoint-private",
      "teacher_epsilon": 0.5, "teacher_delta": 0.0}, True),
]
SMALL_PLAN = {"K": 5, "epsilon": 0.2, "teacher_delta": 1e-4, "queries": 20, "budget_epsilon": 3.0,
              "budget_delta": 0.01}
PLANS = [
    (SMALL_PLAN, True),
    ({k: v for k, v in SMALL_PLAN.items() if k != "epsilon"}, False),
    ({**SMALL_PLAN, "teachers": "disjoint-nonprivate"}, False),
]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    d = tmp_path_factory.mktemp("edges")
    with in_process_client(f"sqlite:///{d / 'darrm.db'}", inline_max_multisets=1000) as c:
        yield c


def _validator(spec: dict, name: str):
    return jsonschema_rs.Draft202012Validator({**spec, "$ref": f"#/components/schemas/{name}"})


@pytest.mark.parametrize(("path", "model", "cases"), [
    ("/v1/tables", "TableRequest", TABLES), ("/v1/ledgers", "LedgerRequest", LEDGERS),
    ("/v1/plans", "PlanRequestIn", PLANS),
])
def test_the_schema_states_the_cross_field_rules(client, path, model, cases):
    spec = client.get("/openapi.json").json()
    valid = _validator(spec, model)
    for body, ok in cases:
        assert valid.is_valid(body) is ok, body
        r = client.post(path, json=body)
        assert (r.status_code != 422) is ok, (body, r.status_code, r.text)
        assert r.status_code < 500


def test_huge_integers_are_4xx(client):
    bodies = {"/v1/tables": '{"K": ' + HUGE + ', "m": 2}',
              "/v1/plans": '{"K": ' + HUGE + ', "epsilon": 0.1, "teacher_delta": 1e-5, "queries": 10, '
                           '"budget_epsilon": 1, "budget_delta": 0.001}'}
    for path, body in bodies.items():
        r = client.post(path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "K"], r.text


def test_options_and_405_name_every_method_of_the_path(client):
    for path, allow in (("/v1/tables", "GET, POST, OPTIONS"), ("/v1/ledgers/" + "a" * 32, "GET, OPTIONS"),
                        ("/v1/aggregate", "POST, OPTIONS"), ("/healthz", "GET, OPTIONS")):
        r = client.options(path, headers={"Authorization": ""})
        assert r.status_code == 204 and r.headers["allow"] == allow, (path, r.status_code, r.headers)
    r = client.delete("/v1/tables")
    assert r.status_code == 405 and r.headers["allow"] == "GET, POST, OPTIONS"
    assert client.options("/nowhere").status_code == 404


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    return {**env, "DARRM_DATABASE_URL": url, "DARRM_API_KEYS": KEY}


@pytest.mark.slow
@pytest.mark.parametrize("url", ["mysql://nobody@127.0.0.1/x", "postgresql://nobody@127.0.0.1:1/x",
                                 "sqlite:////nonexistent-dir/darrm.db"])
def test_a_bad_database_url_stops_the_server_with_a_nonzero_exit(url, tmp_path):
    port = str(free_port())
    uv = subprocess.run([sys.executable, "-m", "uvicorn", "--factory", "darrm_opt.api.main:create_app",
                         "--port", port], env=_env(url), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert uv.returncode != 0 and "Application startup failed" in uv.stderr
    serve = subprocess.run([sys.executable, "-m", "darrm_opt", "serve", "--port", port, "--workers", "2"],
                           env=_env(url), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert serve.returncode == 2 and "cannot use the database" in serve.stderr


@pytest.mark.postgres
def test_database_errors_are_503_on_read_and_create_endpoints(empty_pg_database):
    with in_process_client(empty_pg_database, inline_max_multisets=1000) as c:
        ledger = c.post("/v1/ledgers", json={"name": "x", "epsilon_budget": 1.0, "delta_budget": 0.0}).json()
        assert c.get(f"/v1/ledgers/{ledger['id']}").status_code == 200
        name = empty_pg_database.rsplit("/", 1)[1]
        admin = os.environ["DARRM_TEST_POSTGRES_URL"].replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        calls = [("GET", f"/v1/ledgers/{ledger['id']}", None), ("GET", "/v1/ledgers", None),
                 ("GET", f"/v1/ledgers/{ledger['id']}/spends", None), ("GET", "/v1/tables", None),
                 ("GET", "/v1/tables/" + "b" * 32, None),
                 ("POST", "/v1/ledgers", {"name": "y", "epsilon_budget": 1.0, "delta_budget": 0.0}),
                 ("POST", "/v1/tables", {"K": 3, "m": 1})]
        for method, path, body in calls:
            r = c.request(method, path, json=body)
            assert r.status_code == 503 and r.headers["retry-after"] == "1", (path, r.status_code, r.text)


#: run by every Python process started with this folder on PYTHONPATH: in a server process spawned by the
#: supervisor (its command line runs multiprocessing's spawn_main) the schema migration fails, as it would
#: if the database went away after `serve` checked it
_WORKERS_FAIL = '''
import sys
if any("spawn_main" in a for a in sys.orig_argv):
    import darrm_opt.ledger.db as db

    def migrate(*args, **kwargs):
        raise OSError("the database went away")

    db.migrate = migrate
'''


@pytest.mark.slow
def test_serve_exits_nonzero_when_its_server_processes_fail_to_start(tmp_path):
    """The database passes serve's check, then every server process fails to start: uvicorn's supervisor
    alone exits 0 then (--workers 2); serve exits 3 and says so."""
    (tmp_path / "inject").mkdir()
    (tmp_path / "inject" / "sitecustomize.py").write_text(_WORKERS_FAIL)
    env = _env(f"sqlite:///{tmp_path}/darrm.db")
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "inject"), str(ROOT), env.get("PYTHONPATH", "")])
    serve = subprocess.run([sys.executable, "-m", "darrm_opt", "serve", "--port", str(free_port()), "--workers", "2"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert serve.returncode == 3 and "the server did not start" in serve.stderr, serve.stderr[-2000:]
    assert "the database went away" in serve.stderr and "Application startup failed" in serve.stderr
