"""The mechanism interface and its registry: every kind of table through one interface."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darrm_opt.certify.verdict import Verdict
from darrm_opt.errors import CertificationFailed, InvalidParameter
from darrm_opt.mechanisms import (
    MECHANISMS,
    certify_table,
    document_header,
    kind_for,
    mechanism,
    mechanism_for,
    params_key,
    table_from_document,
)
from darrm_opt.model.multiclass import MulticlassParams
from darrm_opt.model.neighbours import PateParams
from darrm_opt.model.params import Params
from darrm_opt.privacy.table import table_id

ROOT = Path(__file__).resolve().parents[1]
#: every registered kind's first example (its ``examples()``), but for kinds whose votes are vectors (an .npy
#: array: gaussian-mean, tests/test_gaussian_mean.py), which the 0/1-and-label tests below do not draw
EXAMPLES = {kind: m.examples()[0].params for kind, m in MECHANISMS.items() if m.votes_file == "csv"}
#: kinds whose documents predate the ``kind`` field (their kind is implied by their fields)
LEGACY_KINDS = ("darrm", "darrm-pate", "darrm-multiclass")


@pytest.fixture(scope="module")
def solved() -> dict:
    return {kind: mechanism(kind).solve(params, solver="highs") for kind, params in EXAMPLES.items()}


def test_every_kind_is_registered_once_by_name_and_parameter_type():
    assert set(MECHANISMS) == set(EXAMPLES) | {"gaussian-mean"}  # its vector votes: tests/test_gaussian_mean.py
    for kind, params in EXAMPLES.items():
        assert mechanism_for(params) is MECHANISMS[kind] and MECHANISMS[kind].kind == kind
    with pytest.raises(InvalidParameter, match="kind"):
        mechanism("no-such-kind")
    with pytest.raises(InvalidParameter, match="params"):
        mechanism_for({"K": 5})


def test_a_request_finds_its_kind_by_teachers_and_classes():
    assert kind_for().kind == kind_for("shared").kind == kind_for("disjoint-private").kind == "darrm"
    assert kind_for("disjoint-nonprivate").kind == "darrm-pate"
    assert kind_for(None, 3).kind == kind_for("disjoint-nonprivate", 3).kind == "darrm-multiclass"
    with pytest.raises(InvalidParameter, match="disjoint-nonprivate"):
        kind_for("shared", 3)
    with pytest.raises(InvalidParameter, match="teachers"):
        kind_for("everyone")


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_parameters_round_trip_through_their_document_form(kind):
    params = EXAMPLES[kind]
    m = mechanism(kind)
    assert m.params_from(params.canonical()) == params
    assert m.params_from(json.loads(json.dumps(params.canonical()))) == params


@settings(max_examples=30, deadline=None)
@given(K=st.integers(1, 40).map(lambda k: 2 * k + 1), m=st.floats(1, 5), eps=st.floats(0.01, 2),
       td=st.sampled_from([0.0, 1e-6, 1e-5]))
def test_darrm_parameters_round_trip_for_any_valid_values(K, m, eps, td):
    params = Params(K, min(m, K), eps, td)
    assert mechanism("darrm").params_from(params.canonical()) == params


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_each_kind_solves_a_certified_table_with_the_common_certificate(solved, kind):
    table, m = solved[kind].table, mechanism(kind)
    params = EXAMPLES[kind]
    assert isinstance(table.certificate, Verdict) and table.certificate.certified
    assert table.certificate.limit == m.limit(params) and table.certificate.worst <= table.certificate.limit
    assert table.certificate.checked > 0 and table.certificate.what
    assert (table.epsilon0, table.delta0) == m.per_answer(params)
    assert table.kind == kind and table.id == table_id(kind, params, table.teachers, table.gamma)
    assert table.profile is not None and table.profile.delta(table.epsilon0) <= table.delta0
    # certify_table (the plain route) computes the same certificate for the same γ
    again = certify_table(params, table.gamma)
    assert again.id == table.id and again.certificate.worst == pytest.approx(table.certificate.worst, abs=1e-12)
    assert m.expected_error(params, np.asarray(table.gamma)) == pytest.approx(table.expected_error, abs=0)


def test_tables_of_different_kinds_or_settings_are_different_tables(solved):
    ids = {s.table.id for s in solved.values()}
    assert len(ids) == len(solved)
    shared = solved["darrm"].table
    private = mechanism("darrm").table(shared.params, shared.gamma, shared.certificate, "disjoint-private")
    assert private.id != shared.id and private.teachers == "disjoint-private"
    assert params_key(shared.params, "disjoint-private") != params_key(shared.params) == shared.params.key()


def test_a_table_refuses_a_certificate_for_other_parameters(solved):
    table = solved["darrm-pate"].table
    m = mechanism("darrm-pate")
    other = PateParams(5, 0.4, 1e-5)
    with pytest.raises(InvalidParameter, match="certificate"):
        m.table(other, table.gamma, table.certificate)
    with pytest.raises(CertificationFailed, match="not"):
        certify_table(EXAMPLES["darrm-pate"], [1.0] * 6)  # the plain majority leaks


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_documents_say_their_kind_and_read_back_to_the_same_table(solved, kind):
    table = solved[kind].table
    doc = {**document_header(table.params), **table.params.canonical(), "teachers": table.teachers,
           "gamma": list(table.gamma), "certificate": table.certificate_dict()}
    assert doc["kind"] == kind and doc["schema_version"] == 1
    assert table_from_document(doc, profile=False).id == table.id  # certified again
    assert table_from_document(doc, certify=False).id == table.id  # its stored certificate
    if kind in LEGACY_KINDS:
        legacy = {k: v for k, v in doc.items() if k not in ("kind", "schema_version")}
        assert table_from_document(legacy, certify=False).id == table.id  # kind implied by its fields


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_samplers_draw_answers_of_the_right_type(solved, kind):
    table = solved[kind].table
    sampler = mechanism(kind).sampler(table, np.random.default_rng(1).bytes)
    votes = np.zeros((50, table.K), dtype=np.uint8)  # unanimous: the majority / plurality 0 when kept
    prepared = sampler.prepare(votes)
    assert sampler.rows(prepared) == 50
    answers = sampler.draw(prepared)
    abstains = {-1} if kind == "confident-gnmax" else set()  # ⊥ is written −1
    assert answers.shape == (50,) and set(answers.tolist()) <= set(range(table.classes or 2)) | abstains


@pytest.mark.slow  # subprocesses / a 100-answer composition
def test_solve_documents_carry_kind_and_schema_version(tmp_path):
    runs = {"darrm": ["--K", "5", "--m", "2"],
            "darrm-pate": ["--K", "5", "--teachers", "disjoint-nonprivate", "--target-epsilon", "0.5",
                           "--delta", "1e-5"],
            "darrm-multiclass": ["--K", "5", "--classes", "3", "--target-epsilon", "1", "--delta", "1e-5"]}
    for kind, args in runs.items():
        r = subprocess.run([sys.executable, "-m", "darrm_opt", "solve", *args, "--format", "json", "-q"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert (doc["kind"], doc["schema_version"]) == (kind, 1)
        assert table_from_document(doc, profile=False).gamma == tuple(doc["gamma"])


PARAM_TYPES = {"Params", "PateParams", "MulticlassParams", "GnmaxParams", "ConfidentGnmaxParams", "GaussianMeanParams"}


def _type_tests(path: Path) -> list[int]:
    """Lines of ``isinstance(x, T)`` with T a mechanism's parameter type."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            if any(getattr(k, "id", None) in PARAM_TYPES for k in kinds):
                lines.append(node.lineno)
    return lines


def test_no_front_end_or_layer_tests_a_parameter_type_outside_the_registry():
    """The kinds' own modules (the registry) and the parameter types' modules may test them; nothing else."""
    allowed = {ROOT / "darrm_opt" / "mechanisms", ROOT / "darrm_opt" / "model"}
    found = {}
    for base in (ROOT / "darrm_opt", ROOT / "api"):
        for path in base.rglob("*.py"):
            if any(a in path.parents for a in allowed):
                continue
            lines = _type_tests(path)
            if lines:
                found[str(path.relative_to(ROOT))] = lines
    assert found == {}


def test_a_kind_without_a_view_of_its_own_is_solved_by_the_generic_view(monkeypatch):
    """``solve`` finds its view by kind name; a kind with none (as a newly registered one) still solves,
    certifies and prints its table."""
    from typer.testing import CliRunner

    from darrm_opt.cli import app

    monkeypatch.setattr(mechanism("darrm-pate"), "solve_view", None)
    args = ["solve", "--K", "5", "--teachers", "disjoint-nonprivate", "--target-epsilon", "0.5", "--delta", "1e-5"]
    r = CliRunner().invoke(app, [*args, "--format", "json", "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "darrm-pate" and doc["certificate"]["certified"] is True
    table = table_from_document(doc, profile=False)
    assert table.id == doc["id"] and table.expected_error == pytest.approx(doc["expected_error"], abs=0)
    r = CliRunner().invoke(app, [*args, "-q"])
    assert r.exit_code == 0 and "certificate: CERTIFIED" in r.stdout and "γ = " in r.stdout


@pytest.mark.parametrize("bad", [2.5, True, -1, "x", 10 ** 400])
def test_one_rule_for_K_in_every_kind(bad):
    """K, the per-answer ε and δ have one validator: the same parameter name and rule whatever the kind."""
    from darrm_opt.model.neighbours import PateParams
    from darrm_opt.model.params import Params

    rules = set()
    for make in (lambda: Params(bad, 1), lambda: PateParams(bad, 1.0), lambda: MulticlassParams(bad, 3, 1.0)):
        with pytest.raises(InvalidParameter) as e:
            make()
        assert e.value.parameter == "K"
        rules.add(e.value.rule)
    # one wording: "must be [an odd] integer >= lo" or "... in [lo, hi]" (odd where the kind needs it)
    assert all(re.fullmatch(r"must be an (odd )?integer (>= 1|in \[1, \d+\])", r) for r in rules), rules


def test_one_spelling_for_the_per_answer_epsilon_and_delta():
    from darrm_opt.model.neighbours import PateParams

    for make in (lambda e, d: PateParams(5, e, d), lambda e, d: MulticlassParams(5, 3, e, d)):
        with pytest.raises(InvalidParameter) as e:
            make(0.0, 0.0)
        assert (e.value.parameter, e.value.rule) == ("target_epsilon", "must satisfy 0 < target_epsilon <= 700")
        with pytest.raises(InvalidParameter) as e:
            make(1.0, 1.0)
        assert (e.value.parameter, e.value.rule) == ("delta", "must satisfy 0 <= delta < 1")
