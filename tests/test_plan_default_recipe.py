"""Issue 33: what ``plan`` chooses by default is a worst-case guarantee of the user's budget, and it runs through
the documented recipe of its front end at that budget.

The reproducer is the audited job: K = 250, C = 10, Q = 100, budget (2, 1e-5), the default (paper) prior. It
chose data-dependent GNMax by default (a sanitised-ε target of 1.90, worst case 5.83), so a plain ledger at the
budget refused the job after 15 answers. ``plan --format json --out job.json`` then ``aggregate --table job.json
--ledger NAME --epsilon-budget 2 --delta-budget 1e-5 --votes votes.csv`` must pay all 100 answers, and the
ledger must state the ε the plan stated."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.errors import InvalidParameter
from darrm_opt.planning.job import Job

ROOT = Path(__file__).resolve().parents[1]
K, C, Q, EPS, DELTA = 250, 10, 100, 2.0, 1e-5


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, timeout=600)


def label_votes(rows: int, seed: int = 0) -> np.ndarray:
    """``rows`` rows of K class labels (class 0 the plurality, as the paper prior has it)."""
    rng = np.random.default_rng(seed)
    return np.where(rng.random((rows, K)) < 0.75, 0, rng.integers(1, C, (rows, K)))


@pytest.mark.slow  # the audited job plans every kind (about 45 s on the shared 2-core machine)
def test_the_audited_job_runs_through_the_cli_recipe_at_its_budget(tmp_path):
    r = cli("plan", "--K", str(K), "--classes", str(C), "--queries", str(Q), "--budget", f"{EPS:g},{DELTA:g}",
            "--format", "json", "--out", "job.json", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (tmp_path / "votes.csv").write_text("".join(",".join(map(str, row)) + "\n" for row in label_votes(Q)))
    a = cli("aggregate", "--table", "job.json", "--ledger", "job", "--epsilon-budget", f"{EPS:g}",
            "--delta-budget", f"{DELTA:g}", "--votes", "votes.csv", "--format", "json", cwd=tmp_path)
    assert a.returncode == 0, a.stderr  # it exited 1: "at most 15 answer(s) fit now"
    plan = json.loads((tmp_path / "job.json").read_text())
    out = json.loads(a.stdout)
    assert len(out["answers"]) == Q and out["table_id"] == plan["id"]
    ledger = out["ledger"]
    assert ledger["answers"] == Q and ledger["epsilon_spent"] <= EPS
    # the plan and the ledger state the same worst case, to the precision both print (6 significant digits)
    assert f"{ledger['epsilon_spent']:.6g}" == f"{plan['epsilon_spent']:.6g}"
    assert f"spent ε={plan['epsilon_spent']:.6g} of {EPS:g}" in a.stderr

    assert plan["accounting"] == "data-independent" and plan["run"]["ledger"] == "plain"
    # the most accurate worst-case offer: the stability-based release (one job of the Q queries) since issue 35
    assert plan["mechanism"] == "stability" and plan["plan"]["job"]["accounting"] == "worst-case"
    assert plan["data_independent_epsilon"] == plan["epsilon_spent"] <= EPS
    assert all(o["expected_error"] >= plan["expected_error"] for o in plan["alternatives"]
               if o["accounting"] == "data-independent")
    # the data-dependent offer is shown beside the choice, labelled, with its worst case (over the budget)
    (dd,) = [o for o in plan["alternatives"] if o["accounting"] == "data-dependent"]
    assert dd["mechanism"] == "gnmax" and dd["run"]["ledger"] == "data-dependent"
    assert dd["epsilon_spent"] <= EPS < dd["data_independent_epsilon"]


@pytest.mark.slow  # the audited job again, in process
def test_the_python_recipe_in_the_docs_runs_as_is(tmp_path, monkeypatch):
    """The Python snippet of docs/gnmax-and-planning.md (the audited job), executed as written."""
    text = (ROOT / "docs" / "gnmax-and-planning.md").read_text()
    section = text[text.index("### Python"):]
    code = section[section.index("```python") + len("```python"):]
    code = code[:code.index("```")]
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(code, "docs/gnmax-and-planning.md", "exec"), scope)  # it raised BudgetExceeded
    best, answers = scope["best"], scope["answers"]
    assert scope["job"] == scope["Job"](K=K, queries=Q, budget_epsilon=EPS, budget_delta=DELTA, classes=C)
    assert best.accounting == "data-independent" and best.worst_case and len(answers) == Q
    with scope["Ledger"]("ledger.db", "job") as ledger:
        view = ledger.view()
    assert view["answers"] == Q and f"{view['epsilon_spent']:.6g}" == f"{best.epsilon_spent:.6g}"
    assert any(not o.worst_case and o.expected_error < best.expected_error for o in scope["offers"])


def test_an_invalid_accounting_is_one_line_naming_it():
    r = CliRunner().invoke(app, ["plan", "--K", "10", "--classes", "3", "--queries", "5", "--budget", "1,1e-6",
                                 "--accounting", "optimistic"])
    assert r.exit_code == 2 and "--accounting" in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1
    with pytest.raises(InvalidParameter, match="accounting"):
        Job(K=10, queries=5, budget_epsilon=1.0, budget_delta=1e-6, classes=3, accounting="data-independent")
    assert Job(K=10, queries=5, budget_epsilon=1.0, budget_delta=1e-6).accounting == "worst-case"


def test_worst_case_refuses_a_job_only_data_dependent_offers_fit(monkeypatch):
    """No worst-case offer: the error names budget_epsilon and the data-dependent offer, with its worst case,
    and how to choose it; with data-dependent accounting that offer is chosen."""
    from types import SimpleNamespace

    from darrm_opt.mechanisms import mechanism, plan_job
    from darrm_opt.planning.job import Offer

    gnmax = mechanism("gnmax")
    dd = Offer("gnmax", SimpleNamespace(id="t"), 0.01, 1.5, {"data_independent_epsilon": 5.25}, 0.0,
               accounting="data-dependent", policy={"sigma": 3.0})

    def refuse(job, progress=None):
        raise InvalidParameter("budget_epsilon", "no σ fits")

    monkeypatch.setattr(gnmax, "plan", refuse)
    monkeypatch.setattr(gnmax, "plan_data_dependent", lambda job: dd)
    job = Job(K=10, queries=5, budget_epsilon=2.0, budget_delta=1e-6, classes=3)
    with pytest.raises(InvalidParameter, match="budget_epsilon") as err:
        plan_job(job, kinds=["gnmax"])
    assert "worst case ε 5.25" in str(err.value) and "accounting data-dependent" in str(err.value)
    assert "no σ fits" in str(err.value)
    best, offers, refused = plan_job(Job(**{**job.canonical(), "accounting": "data-dependent"}), kinds=["gnmax"])
    assert best is dd and offers == [dd] and best.worst_case_epsilon == 5.25 and not best.worst_case
