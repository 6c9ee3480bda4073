"""Schemathesis against /openapi.json of a real server (no 5xx, no schema violation) and, in process, the key
on every keyed endpoint."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from svc_helpers import AUTH, KEY, Server, in_process_client

from darrm_opt.api.main import create_app
from darrm_opt.api.settings import Settings

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    server = Server(d, f"sqlite:///{d / 'fuzz.db'}", name="fuzz", env={
        "DARRM_MAX_MULTISETS": "2000",  # fuzzed parameters cannot start long solves
        "DARRM_INLINE_MAX_MULTISETS": "2000",
        "DARRM_INLINE_TIMEOUT_S": "4",  # under the fuzzer's 10 s read timeout, with a plan queued ahead
    }).start()
    with server.client() as c:  # something for the fuzzer to find
        c.post("/v1/tables", json={"K": 3, "m": 2})
        c.post("/v1/ledgers", json={"name": "fuzz", "epsilon_budget": 5, "delta_budget": 1e-3})
    yield server
    server.stop()
    assert "internal error" not in server.log(), server.log()


#: fuzzed requests per operation and mode in the suite (a longer run: docs/rest.md, "Hostile input")
EXAMPLES = 60
#: the served schema, built in process so that pytest can list one test per operation
SPEC = create_app(Settings(database_url="sqlite:///unused.db", api_keys=[])).openapi()
OPERATIONS = [result.ok() for result in schemathesis.openapi.from_dict(SPEC).get_all_operations()]


@pytest.mark.slow  # the fuzz server, a process of its own
def test_the_served_schema_is_the_one_fuzzed(fuzz_server):
    assert httpx.get(fuzz_server.url + "/openapi.json").json() == SPEC


@pytest.mark.slow  # a few fuzzed requests per operation and mode: about a minute for every operation
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["positive", "negative"])
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda op: op.label)
def test_fuzz_finds_no_5xx_and_no_schema_violation(fuzz_server, operation, mode):
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
              database=None)
    def run(case):
        case.call_and_validate(base_url=fuzz_server.url, headers=AUTH, checks=CHECKS)

    try:
        run()
    except Unsatisfiable:
        assert mode is GenerationMode.NEGATIVE
        pytest.skip(f"{operation.label} has no input to make invalid")


# --- keys -----------------------------------------------------------------------------------------------
def keyed_operations(c: httpx.Client) -> list[tuple[str, str]]:
    spec = c.get("/openapi.json").json()
    ops = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if op.get("security"):
                ops.append((method.upper(), path.replace("{table_id}", "0" * 32)
                            .replace("{ledger_id}", "0" * 32).replace("{job_id}", "0" * 32)))
    return ops


BAD_HEADERS = [
    {},
    {"Authorization": "Bearer wrong-key"},
    {"Authorization": f"Basic {KEY}"},
    {"Authorization": f"Bearer {KEY}x"},
    {"Authorization": KEY},
]


def test_every_keyed_endpoint_refuses_a_missing_or_wrong_key(tmp_path):
    """The key check is the application's (an ASGI middleware): tested in process, with no default key."""
    with in_process_client(f"sqlite:///{tmp_path / 'auth.db'}", keyed=False) as c:
        ops = keyed_operations(c)
        assert {p for _m, p in ops} >= {"/v1/tables", "/v1/ledgers", "/v1/aggregate", "/v1/tables/" + "0" * 32,
                                        "/v1/ledgers/" + "0" * 32, "/v1/jobs/" + "0" * 32}
        for method, path in ops:
            for headers in BAD_HEADERS:
                # a malformed body and unknown ids: without a key the answer is 401 and nothing else
                r = c.request(method, path, headers={**headers, "content-type": "application/json"},
                              content=b"{not json" if method == "POST" else None)
                assert r.status_code == 401, (method, path, headers, r.text)
                assert r.json() == {"detail": "missing or invalid API key"}
                assert r.headers["www-authenticate"] == "Bearer"
            ok = c.request(method, path, headers=AUTH, json={} if method == "POST" else None)
            assert ok.status_code in (200, 404, 422), (method, path, ok.text)
        # the second configured key works too; unknown /v1 paths learn nothing either
        assert c.get("/v1/tables", headers={"Authorization": "Bearer second-key"}).status_code == 200
        assert c.get("/v1/nope").status_code == 401
        for open_path in ("/healthz", "/readyz", "/openapi.json", "/docs"):
            assert c.get(open_path).status_code == 200
