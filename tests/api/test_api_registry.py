"""The registry is the one place a kind is known: every registered kind (each of its ``examples()``) is served
through every endpoint and command that takes a table, and each answer is checked by value.

REST (the application in this process): ``POST /v1/plans`` of the kind's example job, ``GET /v1/tables/{id}``,
an unfiltered ``GET /v1/tables`` and ``POST /v1/aggregate`` (votes, or teachers' vectors for a kind whose votes
file is an .npy array). CLI (subprocesses): ``solve`` (the kinds its flags reach), ``plan --out``, ``verify``,
``budget --table`` and ``aggregate --ledger``. Nothing here names a kind: a newly registered kind is served
by this file as it stands."""

from __future__ import annotations

import json
import subprocess
import typing
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli
from svc_helpers import in_process_client

from darrm_opt.mechanisms import MECHANISMS, TableOutBase, kind_for, mechanism, table_document

#: (kind, index of the example) of every example of every registered kind
CASES = [(kind, i) for kind, m in MECHANISMS.items() for i in range(len(m.examples()))]
#: the ε budget of every ledger here: large enough for the few answers each example pays
EPSILON_BUDGET = 1000.0
ROWS = 2


def delta_budget(table) -> float:  # noqa: ANN001
    """A ledger's δ for ROWS answers of ``table``: 0.01, or twice their basic composition's δ where that is
    more (a shaped example's per-answer statement is at its last slope, δ₀ ≈ 0.1)."""
    return max(0.01, min(0.5, 2 * ROWS * table.delta0))


def _id(case: tuple[str, int]) -> str:
    return f"{case[0]}-{case[1]}"


@pytest.fixture(scope="module")
def solved() -> dict:
    """Each example's certified table, solved by its mechanism."""
    return {case: mechanism(case[0]).solve(mechanism(case[0]).examples()[case[1]].params, solver="highs").table
            for case in CASES}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    d = tmp_path_factory.mktemp("registry")
    with in_process_client(f"sqlite:///{d / 'darrm.db'}", inline_timeout_s=120) as c:
        yield c


@pytest.fixture(scope="module")
def served(client, solved) -> dict:
    """Every example's table stored in the service (as a solve stores it): its id, by case."""
    tables = client.app.state.services.tables  # type: ignore[attr-defined]
    for table in solved.values():
        tables.store(table, solver="highs", solve_seconds=0.0, params_key=None)
    return {case: table.id for case, table in solved.items()}


def votes(table, rows: int = ROWS) -> np.ndarray:  # noqa: ANN001
    """Votes the table's kind takes: teachers' vectors (rows, K, dim) in [0, 1] for an .npy kind, else rows
    of K votes, unanimous for the first class and for the last (0/1, or class labels 0..C−1)."""
    m = mechanism(table.kind)
    if m.votes_file == "npy":
        return np.random.default_rng(7).uniform(0, 1, (rows, table.K, table.params.dim))
    top = (table.classes or 2) - 1
    return np.array([[top * (r % 2)] * table.K for r in range(rows)], dtype=np.int64)


def answers_ok(table, answers: list) -> bool:  # noqa: ANN001
    """Answers of the table's kind: means of length dim (vectors), else labels of its classes (⊥ = −1 where
    the kind abstains)."""
    if mechanism(table.kind).votes_file == "npy":
        return all(len(a) == table.params.dim and all(isinstance(x, float) for x in a) for a in answers)
    return set(answers) <= set(range(-1, table.classes or 2))


def expected_wire(table) -> dict:  # noqa: ANN001
    """The fields a served table must show: its id, kind, setting, γ, expected error and every parameter its
    kind's output model has, with the values of the library's table."""
    fields = mechanism(table.kind).output_model.model_fields
    doc = {"id": table.id, "kind": table.kind, "teachers": table.teachers, "gamma": list(table.gamma),
           "expected_error": table.expected_error,
           **{k: v for k, v in table.params.canonical().items() if k in fields}}
    return doc


def test_every_kind_names_its_own_wire_model_and_examples():
    for kind, m in MECHANISMS.items():
        model = m.output_model
        assert issubclass(model, TableOutBase) and model is not TableOutBase
        assert typing.get_args(model.model_fields["kind"].annotation) == (kind,)
        assert m.examples() and all(type(ex.params) is m.params_type for ex in m.examples())
    assert len({m.output_model for m in MECHANISMS.values()}) == len(MECHANISMS)


def test_openapi_states_every_kind_by_its_discriminator(client):
    spec = client.get("/openapi.json").json()
    table = spec["components"]["schemas"]["TableListOut"]["properties"]["items"]["items"]
    mapping = table["discriminator"]["mapping"]
    assert table["discriminator"]["propertyName"] == "kind" and set(mapping) == set(MECHANISMS)
    for kind, ref in mapping.items():
        assert ref == f"#/components/schemas/{MECHANISMS[kind].output_model.__name__}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_get_table_serves_every_kind_by_value(client, solved, served, case):
    table = solved[case]
    r = client.get(f"/v1/tables/{served[case]}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert {k: body[k] for k in expected_wire(table)} == expected_wire(table)
    assert body["privacy_profile"] == table.profile.to_dict()
    assert body["certificate"]["certified"] is True


def test_an_unfiltered_list_serves_every_kind(client, solved, served):
    r = client.get("/v1/tables", params={"limit": 500})
    assert r.status_code == 200, r.text
    items = {t["id"]: t for t in r.json()["items"]}
    for case, table_id in served.items():
        assert items[table_id]["kind"] == case[0]
        assert items[table_id] == client.get(f"/v1/tables/{table_id}").json()


PLANNED = [case for case in CASES if mechanism(case[0]).examples()[case[1]].job is not None]


def _job(case: tuple[str, int]) -> dict:
    """The example's job, with the setting of the kind (its first) unless the job states one."""
    m = mechanism(case[0])
    return {"teachers": m.settings[0], **m.examples()[case[1]].job}  # type: ignore[dict-item]


@pytest.mark.parametrize("case", PLANNED, ids=_id)
def test_a_plan_of_every_kind_serves_its_table(client, case):
    kind = case[0]
    r = client.post("/v1/plans", json={**_job(case), "mechanism": kind})
    assert r.status_code == 200, r.text
    doc = r.json()
    table = doc["table"]
    assert doc["mechanism"] == table["kind"] == kind
    assert client.get(f"/v1/tables/{table['id']}").json() == table
    m = mechanism(kind)
    params = m.params_from(table)
    recomputed = m.certify_table(params, table["gamma"], teachers=table["teachers"], profile=False)
    assert recomputed.id == table["id"] and recomputed.expected_error == table["expected_error"]
    assert doc["expected_error"] == table["expected_error"]
    assert doc["epsilon_spent"] <= _job(case)["budget_epsilon"]


# --- the commands ------------------------------------------------------------------------------------------


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, timeout=300, module=True)


def _write_votes(table, path: Path) -> Path:  # noqa: ANN001
    v = votes(table)
    if mechanism(table.kind).votes_file == "npy":
        path = path.with_suffix(".npy")
        np.save(path, v)
    else:
        path.write_text("".join(",".join(map(str, row)) + "\n" for row in v))
    return path


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_service_and_the_commands_answer_and_pay_alike_for_every_kind(client, solved, served, case, tmp_path):
    """``POST /v1/aggregate`` and ``aggregate --ledger`` answer ROWS rows of the table and their fresh ledgers
    (the same budget) state the same spend, which ``budget --table`` states for ROWS answers by the same
    composition; ``verify`` accepts the table's file."""
    table = solved[case]
    path = tmp_path / "table.json"
    path.write_text(json.dumps(table_document(table)))

    delta = delta_budget(table)
    ledger = client.post("/v1/ledgers", json={"name": f"walk-{_id(case)}", "epsilon_budget": EPSILON_BUDGET,
                                              "delta_budget": delta})
    assert ledger.status_code == 201, ledger.text
    field = "vectors" if mechanism(table.kind).votes_file == "npy" else "votes"
    r = client.post("/v1/aggregate", json={"table_id": served[case], "ledger_id": ledger.json()["id"],
                                           field: votes(table).tolist()})
    assert r.status_code == 200, r.text
    paid = r.json()
    assert len(paid["answers"]) == ROWS and answers_ok(table, paid["answers"])
    assert paid["ledger_answers"] == ROWS and paid["delta_target"] == delta and paid["epsilon_spent"] >= 0

    r = cli("aggregate", "--table", str(path), "--votes", str(_write_votes(table, tmp_path / "votes.csv")),
            "--ledger-db", f"sqlite:///{tmp_path / 'ledger.db'}", "--ledger", "walk", "--epsilon-budget",
            str(EPSILON_BUDGET), "--delta-budget", str(delta), "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["table_id"] == table.id and len(out["answers"]) == ROWS and answers_ok(table, out["answers"])
    assert (out["ledger"]["epsilon_spent"], out["ledger"]["composition"], out["ledger"]["answers"]) == \
        (paid["epsilon_spent"], paid["composition"], ROWS)

    r = cli("budget", "--table", str(path), "--queries", str(ROWS), "--delta-total", str(delta), "--format",
            "json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rows = {row["method"]: row for row in json.loads(r.stdout)}
    # the same composition (the ledger's exact one on its own grid: equal to 1e-4)
    assert rows[paid["composition"]]["epsilon"] == pytest.approx(paid["epsilon_spent"], rel=1e-4, abs=1e-9)

    r = cli("verify", str(path), "--format", "json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["certificate"]["certified"] is True and report["privacy_profile_valid"] is True


@pytest.mark.slow  # a plan (the kind's calibration) and a verify in subprocesses per kind
@pytest.mark.parametrize("case", PLANNED, ids=_id)
def test_plan_out_of_every_kind_is_a_file_verify_accepts(case, tmp_path):
    job = _job(case)
    flags = ["--K", str(job["K"]), "--queries", str(job["queries"]),
             "--budget", f"{job['budget_epsilon']!r},{job['budget_delta']!r}", "--teachers", job["teachers"],
             "--mechanism", case[0]]
    for name in ("classes", "epsilon", "teacher_delta"):
        if job.get(name) is not None:
            flags += [f"--{name.replace('_', '-')}", str(job[name])]
    out = tmp_path / "plan.json"
    r = cli("plan", *flags, "--format", "json", "--out", str(out), "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["kind"] == doc["mechanism"] == case[0]
    r = cli("verify", str(out), "--format", "json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["certificate"]["certified"] is True


def solve_flags(case: tuple[str, int]) -> list[str] | None:
    """The ``solve`` flags of an example, when they ask for its kind (``kind_for`` of its setting and classes;
    None for a kind that ``solve``'s flags do not reach): its parameters as options (a per-answer ``epsilon``
    of non-private teachers is ``--target-epsilon``)."""
    m = mechanism(case[0])
    params = m.examples()[case[1]].params
    canonical = params.canonical()
    setting = m.settings[0]
    if kind_for(setting, canonical.get("classes")) is not m:
        return None
    flags = []
    for name, value in canonical.items():
        if name == "epsilon" and setting == "disjoint-nonprivate":
            name = "target_epsilon"
        flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags if "--teachers" in flags else [*flags, "--teachers", setting]


SOLVED_BY_FLAGS = [case for case in CASES if solve_flags(case) is not None]


def test_solve_reaches_the_kinds_of_its_flags():
    assert {case[0] for case in SOLVED_BY_FLAGS} >= {kind_for().kind, kind_for("disjoint-nonprivate").kind,
                                                     kind_for(None, 3).kind}


@pytest.mark.parametrize("case", SOLVED_BY_FLAGS, ids=_id)
def test_solve_writes_every_kind_its_flags_reach(solved, case, tmp_path):
    from darrm_opt.mechanisms import table_from_document

    r = cli("solve", *solve_flags(case), "--no-baselines", "--format", "json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["kind"], doc["schema_version"]) == (case[0], 1)
    table = table_from_document(doc, profile=False)  # certified again
    assert table.gamma == tuple(doc["gamma"]) and table.params == solved[case].params
    assert table.expected_error == pytest.approx(solved[case].expected_error, abs=1e-7)  # both optimal


def test_the_plan_request_names_every_kind(client):
    """The OpenAPI description of ``POST /v1/plans``'s ``mechanism`` lists the registry's kinds (it is built
    from the registry, not written by hand)."""
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    described = next(s["properties"]["mechanism"] for s in schema.values()
                     if "mechanism" in s.get("properties", {}) and "budget_delta" in s["properties"])
    text = json.dumps(described)
    assert all(kind in text for kind in MECHANISMS), (set(MECHANISMS), text)
