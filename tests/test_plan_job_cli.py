"""``darrm-opt plan --classes / --mechanism`` (every mechanism's offer, the most accurate chosen) and
``aggregate`` with Gaussian tables, run as subprocesses: JSON, CSV and exit codes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli

from darrm_opt.mechanisms import mechanism, table_document
from darrm_opt.model.gnmax import ConfidentGnmaxParams
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.pld import exact_epsilon

pytestmark = pytest.mark.slow  # fresh interpreters

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def planned(tmp_path_factory):
    d = tmp_path_factory.mktemp("plan-job")
    r = cli("plan", "--K", "40", "--classes", "3", "--queries", "30", "--budget", "2,1e-5", "--format", "json",
            "-q", "--out", str(d / "plan.json"), cwd=d)
    assert r.returncode == 0, r.stderr
    return d, json.loads((d / "plan.json").read_text())


def test_plan_json_names_the_chosen_mechanism_and_the_alternatives(planned):
    _, doc = planned
    assert doc["mechanism"] == doc["kind"] == "gnmax"
    assert doc["epsilon_spent"] == exact_epsilon([(GaussianProfile(doc["sigma"], (1, 1)), 30)], 1e-5) <= 2.0
    assert doc["expected_error"] > 0 and "gamma" not in doc
    assert doc["accounting"] == "data-independent" and doc["run"] == {**doc["run"], "ledger": "plain"}
    alts = {(a["mechanism"], a["accounting"]): a for a in doc["alternatives"]}
    assert set(alts) == {("confident-gnmax", "data-independent"), ("darrm-multiclass", "data-independent"),
                         ("gnmax", "data-dependent"), ("stability", "data-independent")} and doc["refused"] == {}
    assert all(a["expected_error"] >= doc["expected_error"] and a["epsilon_spent"] <= 2.0 for a in alts.values())
    assert alts[("gnmax", "data-dependent")]["run"]["ledger"] == "data-dependent"
    assert {"sigma1", "sigma2", "threshold"} <= set(alts[("confident-gnmax", "data-independent")])
    assert doc["plan"]["job"]["classes"] == 3 and doc["plan"]["job"]["queries"] == 30


def test_planned_table_is_a_table_file_aggregate_uses(planned):
    d, doc = planned
    votes = np.random.default_rng(1).integers(0, 3, size=(7, 40))
    (d / "votes.csv").write_text("".join(",".join(map(str, row)) + "\n" for row in votes))
    r = cli("aggregate", "--table", str(d / "plan.json"), "--votes", str(d / "votes.csv"), "--format", "json",
            cwd=d)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["table_id"] == doc["id"] and len(out["answers"]) == 7 and set(out["answers"]) <= {0, 1, 2}
    r = cli("verify", str(d / "plan.json"), cwd=d)
    assert r.returncode == 0, r.stderr
    r = cli("budget", "--table", str(d / "plan.json"), "--queries", "30", "--delta-total", "1e-5", "--format",
            "json", "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    assert next(b for b in json.loads(r.stdout) if b["method"] == "exact")["epsilon"] == doc["epsilon_spent"]


def test_plan_text_lists_every_offer(planned):
    d, _ = planned
    r = cli("plan", "--K", "40", "--classes", "3", "--queries", "30", "--budget", "2,1e-5", cwd=d)
    assert r.returncode == 0, r.stderr
    assert "chosen: gnmax" in r.stdout and "darrm-multiclass" in r.stdout and "confident-gnmax" in r.stdout
    assert "plan: gnmax offers E[error]" in r.stderr


def test_binary_even_K_plans_every_mechanism_of_the_pate_setting_by_default(tmp_path):
    """disjoint-nonprivate binary jobs go through the planner without --mechanism: even K is served by the
    per-answer and shaped DaRRM tables (a tie is a fair coin) and by the Gaussian kinds; the chosen offer is
    the most accurate, and every offer fits the budget by the exact composition."""
    r = cli("plan", "--K", "20", "--teachers", "disjoint-nonprivate", "--queries", "10",
            "--budget", "2,1e-5", "--format", "json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    alts = {a["mechanism"]: a for a in doc["alternatives"]}
    assert set(alts) | {doc["mechanism"]} == {"darrm-pate", "darrm-pate-shaped", "gnmax", "confident-gnmax",
                                             "stability"}
    assert doc["refused"] == {}
    assert all(a["expected_error"] >= doc["expected_error"] and a["epsilon_spent"] <= 2.0 for a in alts.values())
    assert doc["epsilon_spent"] <= 2.0 and doc["plan"]["spent_epsilon"] == doc["epsilon_spent"]


def test_text_shows_a_shaped_tables_gamma_by_its_length_and_json_keeps_every_value(tmp_path):
    """Also: a named kind without --teachers is planned in its own setting (the shaped kind: PATE's)."""
    args = ("plan", "--K", "25", "--queries", "20", "--budget", "1,1e-5", "--mechanism", "darrm-pate-shaped")
    r = cli(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "gamma=(26 values)" in r.stdout and "gamma=[" not in r.stdout
    r = cli(*args, "--format", "json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["mechanism"] == "darrm-pate-shaped" and len(doc["gamma"]) == 26
    assert all(0 <= g <= 1 for g in doc["gamma"])


def test_one_mechanism_on_request(tmp_path):
    r = cli("plan", "--K", "30", "--classes", "4", "--mechanism", "confident-gnmax", "--queries", "10", "--budget",
            "3,1e-6", "--format", "json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["mechanism"] == "confident-gnmax" and doc["alternatives"] == []
    assert doc["sigma2"] < doc["sigma1"] and doc["epsilon_spent"] <= 3.0


@pytest.mark.parametrize("args, needle", [
    (("--classes", "1"), "classes"),
    (("--classes", "3", "--mechanism", "nonsense"), "kind"),
    (("--classes", "3", "--prior", "dirichlet:0,1"), "prior"),
    (("--classes", "3", "--budget", "2,0"), "budget"),
])
def test_refusals_exit_2(tmp_path, args, needle):
    base = {"--K": "10", "--queries": "5", "--budget": "1,1e-6"}
    for k, v in zip(args[::2], args[1::2]):
        base[k] = v
    r = cli("plan", "-q", *[x for kv in base.items() for x in kv], cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_confident_abstention_is_written_minus_one(tmp_path):
    params = ConfidentGnmaxParams(6, 3, 100.0, 1.0, 1.0)  # T far above K: always ⊥
    table = mechanism("confident-gnmax").solve(params, solver="highs").table
    (tmp_path / "t.json").write_text(json.dumps(table_document(table)))
    (tmp_path / "v.csv").write_text("0,0,0,1,2,0\n1,1,1,1,1,1\n")
    r = cli("aggregate", "--table", str(tmp_path / "t.json"), "--votes", str(tmp_path / "v.csv"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "answer\n-1\n-1\n"
    r = cli("aggregate", "--table", str(tmp_path / "t.json"), "--votes", str(tmp_path / "v.csv"), "--format", "json",
            cwd=tmp_path)
    assert json.loads(r.stdout)["answers"] == [-1, -1]


def test_progress_goes_to_stderr_and_json_stdout_stays_clean(tmp_path):
    """solve and plan (in a pipe: a plain line per phase, one per offer) report on stderr; stdout is the JSON
    document alone; --quiet leaves stderr empty."""
    for args, steps in (
        (("solve", "--K", "11", "--m", "3"), [r"^finding γ_opt \.\.\.$", r"^computing the privacy profile \.\.\.$"]),
        (("plan", "--K", "40", "--classes", "3", "--queries", "30", "--budget", "2,1e-5"),
         [r"^plan: darrm-pate \(1/\d+\) \.\.\.$", r"^plan: gnmax \(\d+/\d+\) \.\.\.$",
          r"^plan: gnmax offers E\[error\] 0\.\d+$"]),
    ):
        r = cli(*args, "--format", "json", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["kind"] in ("darrm", "gnmax"), doc["kind"]
        said = "\n".join(r.stderr.splitlines())
        for step in steps:
            assert re.search(step, said, re.MULTILINE), (step, said)
        quiet = cli(*args, "--format", "json", "--quiet", cwd=tmp_path)
        assert quiet.returncode == 0 and quiet.stderr == "" and json.loads(quiet.stdout)["kind"] == doc["kind"]
