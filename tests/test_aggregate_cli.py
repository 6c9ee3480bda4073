"""``darrm-opt aggregate`` through the real CLI process (answers, the durable debit, the refusal, two processes
racing for one budget), its argument errors through the same Typer app in process, and the Python API."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli
from typer.testing import CliRunner

from darrm_opt.cli import app

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "scipy", "fastapi", "mpmath", "sqlalchemy", "highspy")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, timeout=120, module=True)


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    """The certified K = 5, m = 2 table (each answer (0.2, 1.99999e-05)-DP)."""
    d = tmp_path_factory.mktemp("table")
    r = cli("solve", "--K", "5", "--m", "2", "--format", "json", "--out", "t.json", "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    return d / "t.json"


def run(*args: str):
    """The same CLI in process (argument errors need no fresh interpreter)."""
    return CliRunner().invoke(app, list(args))


def write_votes(path: Path, rows) -> Path:
    path.write_text("".join(",".join(str(v) for v in row) + "\n" for row in rows))
    return path


def ledger_row(db: Path, name: str) -> tuple[int, float, float]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT answers, epsilon_spent, delta_spent FROM ledgers WHERE name = ?",
                            (name,)).fetchone()


@pytest.mark.slow  # CLI subprocesses
def test_answers_one_per_row_and_deterministic_where_gamma_is_one(table, tmp_path, monkeypatch):
    gamma = json.loads(table.read_text())["gamma"]
    rng = np.random.default_rng(5)
    rows = np.vstack([rng.integers(0, 2, size=(36, 5)), np.zeros((2, 5), int), np.ones((2, 5), int)])
    votes = write_votes(tmp_path / "v.csv", rows)
    r = cli("aggregate", "--table", str(table), "--votes", str(votes), "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    answers = json.loads(r.stdout)["answers"]
    assert len(answers) == 40 and set(answers) <= {0, 1}
    L = rows.sum(axis=1)
    sure = [i for i in range(40) if gamma[L[i]] == 1.0]
    assert sure, "the table keeps the majority for sure somewhere"
    assert all(answers[i] == int(L[i] >= 3) for i in sure)
    monkeypatch.chdir(tmp_path)  # where a default ledger file would appear
    r = run("aggregate", "--table", str(table), "--votes", str(votes))  # the CSV view: the same app in process
    lines = r.stdout.splitlines()
    assert r.exit_code == 0 and lines[0] == "answer" and len(lines) == 41
    assert not (tmp_path / "darrm.db").exists()  # no ledger asked for, none created


@pytest.mark.slow  # CLI subprocesses
def test_ledger_debits_durably_and_refuses_a_batch_that_does_not_fit(table, tmp_path):
    votes = write_votes(tmp_path / "v.csv", [[1, 1, 1, 0, 0], [0, 0, 0, 0, 1], [1, 1, 1, 1, 1]])
    db = tmp_path / "ledger.db"
    args = ("aggregate", "--table", str(table), "--votes", str(votes), "--ledger-db", str(db), "--ledger", "job")
    r = cli(*args, "--epsilon-budget", "1", "--delta-budget", "1e-3", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["answers"]) == 3 and doc["ledger"]["answers"] == 3
    spent = ledger_row(db, "job")
    assert spent[0] == 3 and 0 < spent[1] <= 1 and spent[2] <= 1e-3
    # the view reports the tightest valid bound (the exact composition of the table's profile), never more
    # than the spend committed with the debit
    assert doc["ledger"]["epsilon_spent"] <= spent[1] and doc["ledger"]["composition"] == "exact"

    r = cli(*args, cwd=tmp_path)  # 6 answers of ε₀ = 0.2 do not fit in ε = 1 at δ = 1e-3
    assert r.returncode == 1 and r.stdout == ""
    assert "binding limit is epsilon" in r.stderr and "nothing was released" in r.stderr
    assert ledger_row(db, "job") == spent  # refused whole: nothing written
    fits = int(r.stderr.split("at most ")[1].split(" answer")[0])
    assert 0 < fits < 3
    write_votes(tmp_path / "few.csv", [[1, 0, 1, 0, 1]] * fits)
    r = cli("aggregate", "--table", str(table), "--votes", str(tmp_path / "few.csv"), "--ledger-db", str(db),
            "--ledger", "job", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # exactly the largest batch that fits is paid
    assert ledger_row(db, "job")[0] == 3 + fits


def test_delta_is_named_when_it_binds(table, tmp_path):
    # one answer is (0.2, 2e-5)-DP, and by its exact profile (10, 5.5e-6)-DP: δ = 1e-6 binds at any ε
    votes = write_votes(tmp_path / "v.csv", [[1, 1, 1, 0, 0]])
    r = run("aggregate", "--table", str(table), "--votes", str(votes), "--ledger-db", str(tmp_path / "l.db"),
            "--ledger", "tight", "--epsilon-budget", "10", "--delta-budget", "1e-6")
    assert r.exit_code == 1
    assert ("cannot pay for any answer of table" in r.output and "the table's δ per answer (2e-05, at ε 0.2) "
            "exceeds the ledger's whole δ budget (1e-06)" in " ".join(r.output.split()))
    assert ledger_row(tmp_path / "l.db", "tight") == (0, 0.0, 0.0)


def test_budget_takes_one_syntax_and_no_ledger_is_said(table, tmp_path):
    votes = write_votes(tmp_path / "v.csv", [[1, 1, 1, 0, 0]] * 2)
    args = ("aggregate", "--table", str(table), "--votes", str(votes), "--ledger-db", str(tmp_path / "l.db"))
    r = run(*args, "--ledger", "b", "--budget", "1,1e-3")
    assert r.exit_code == 0, r.output
    assert ledger_row(tmp_path / "l.db", "b")[0] == 2
    r = run(*args, "--ledger", "b", "--budget", "1,1e-3", "--epsilon-budget", "1")
    assert r.exit_code == 2 and "give --budget EPS,DELTA or --epsilon-budget/--delta-budget, not both" in r.output
    r = run(*args, "--ledger", "b", "--budget", "2,1e-3")
    assert r.exit_code == 2 and "a budget cannot change" in r.output
    r = run(*args, "--ledger", "b", "--budget", "1")
    assert r.exit_code == 2 and "invalid budget: must be two numbers EPS,DELTA" in r.output
    r = run("aggregate", "--table", str(table), "--votes", str(votes))
    assert r.exit_code == 0 and "no ledger: nothing was accounted for these 2 answers" in " ".join(r.output.split())
    r = run("aggregate", "--table", str(table), "--votes", str(votes), "--no-ledger")
    assert r.exit_code == 0 and "nothing was accounted" not in r.output and r.output.startswith("answer\n")


@pytest.mark.slow  # two CLI processes race
def test_two_processes_cannot_both_spend_the_last_budget(table, tmp_path):
    """Budget for one batch of 3 only: of two concurrent processes exactly one is paid."""
    votes = write_votes(tmp_path / "v.csv", [[1, 1, 1, 0, 0]] * 3)
    db = tmp_path / "race.db"
    base = ("aggregate", "--table", str(table), "--votes", str(votes), "--ledger-db", str(db), "--ledger", "r")
    write_votes(tmp_path / "empty.csv", [])
    r = run(*base[:4], str(tmp_path / "empty.csv"), *base[5:], "--epsilon-budget", "0.7", "--delta-budget", "1e-3")
    assert r.exit_code == 0, r.output  # creates the ledger (in process: the race is between the next two)
    assert ledger_row(db, "r") == (0, 0.0, 0.0)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env["PYTHONPATH"] = str(ROOT)
    procs = [subprocess.Popen([sys.executable, "-m", "darrm_opt", *base], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes == [0, 1]
    assert ledger_row(db, "r")[0] == 3


@pytest.mark.parametrize(("rows", "message"), [
    ([[1, 1, 1, 0, 0], [1, 2, 0, 0, 0]], "row 2: every vote must be 0 or 1"),
    ([[1, 1, 1, 0, 0], [1, 1, 1, 0, 0], [1, 0, 1]], "row 3 has 3 values; every row needs K = 5"),
])
def test_bad_votes_exit_2_naming_the_row(table, tmp_path, rows, message):
    votes = write_votes(tmp_path / "v.csv", rows)
    r = run("aggregate", "--table", str(table), "--votes", str(votes), "--ledger", "x", "--ledger-db",
            str(tmp_path / "l.db"), "--epsilon-budget", "1", "--delta-budget", "1e-3")
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert not (tmp_path / "l.db").exists()  # rejected before the ledger was opened


def test_ledger_errors_exit_2(table, tmp_path):
    votes = write_votes(tmp_path / "v.csv", [[1, 1, 1, 0, 0]])
    args = ("aggregate", "--table", str(table), "--votes", str(votes), "--ledger-db", str(tmp_path / "l.db"))
    r = run(*args, "--ledger", "absent")
    assert r.exit_code == 2 and "give --budget EPS,DELTA (epsilon_budget and delta_budget in Python) to create it" \
        in r.output
    assert run(*args, "--ledger", "a", "--epsilon-budget", "1", "--delta-budget", "1e-3").exit_code == 0
    r = run(*args, "--ledger", "a", "--epsilon-budget", "2")
    assert r.exit_code == 2 and "a budget cannot change" in r.output
    r = run(*args, "--epsilon-budget", "2")
    assert r.exit_code == 2 and "need --ledger" in r.output


def test_an_uncertified_table_releases_nothing(table, tmp_path):
    doc = json.loads(table.read_text())
    doc["gamma"] = [1.0] * 6  # the plain majority is not (0.2, 2e-5)-DP
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    votes = write_votes(tmp_path / "v.csv", [[1, 1, 1, 0, 0]])
    r = run("aggregate", "--table", str(bad), "--votes", str(votes))
    assert r.exit_code == 1 and r.stdout == "" and "not (mε, δ)-DP" in r.output


def test_version_and_short_help():
    from importlib.metadata import version

    r = run("--version")
    assert r.exit_code == 0 and r.stdout.strip() == f"darrm-opt {version('darrm-opt')}"
    r = run("-h")
    assert r.exit_code == 0 and "aggregate" in r.stdout and "solve" in r.stdout


def test_help_and_import_load_no_heavy_module(tmp_path):
    probe = ("import sys, runpy; sys.argv = ['darrm-opt', '--help']\n"
             "try:\n    runpy.run_module('darrm_opt', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "import darrm_opt\n"
             f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_python_api(table, tmp_path):
    import darrm_opt
    from darrm_opt import (
        Aggregator,
        BudgetExceeded,
        CertifiedTable,
        Ledger,
        Params,
        load_certified,
        load_table,
        release_answers,
        solve,
        verify,
    )

    assert darrm_opt.__version__ and "Ledger" in dir(darrm_opt)
    params, gamma = load_table(table)
    assert params == Params(5, 2)
    cert = verify(table)
    assert cert.certified and cert.max_privacy_cost == verify(params, gamma).max_privacy_cost
    assert solve(Params(5, 2)).gamma == pytest.approx(tuple(gamma), abs=1e-9)
    certified = load_certified(table)
    assert isinstance(certified, CertifiedTable) and certified.gamma == tuple(gamma.tolist())
    assert certified.certificate.max_privacy_cost == cert.max_privacy_cost and certified.profile is not None
    answers = Aggregator(certified)(np.ones((4, 5), dtype=np.uint8))
    assert len(answers) == 4 and set(answers.tolist()) <= {0, 1}
    with Ledger(str(tmp_path / "api.db"), "py", epsilon_budget=0.5, delta_budget=1e-3) as book:
        assert len(release_answers(certified, np.ones((2, 5), dtype=np.uint8), book)) == 2
        view = book.view()
        assert view["answers"] == 2 and view["epsilon_remaining"] == pytest.approx(0.5 - view["epsilon_spent"])
        with pytest.raises(BudgetExceeded) as exc:
            release_answers(certified, np.ones((4, 5), dtype=np.uint8), book)
        assert exc.value.binding == "epsilon" and 0 <= exc.value.largest_batch < 4
        assert book.view()["answers"] == 2
    with pytest.raises(AttributeError):
        darrm_opt.no_such_name  # noqa: B018


@pytest.mark.slow  # CLI subprocesses
def test_offline_ledger_composes_exactly_like_the_service(table, tmp_path):
    """A budget above the exact composition of n answers (the table's certified profile) but below both the
    tightest generic bound for n and the exact one for n + 1: the offline ledger pays all n, as the service
    would, reports the exact composition (its bucket's, on the coarse grid), and refuses one more."""
    from darrm_opt.privacy import accounting
    from darrm_opt.privacy.pld import exact_epsilon
    from darrm_opt.privacy.profile import privacy_profile
    from darrm_opt.release.table_file import load_table

    params, gamma = load_table(table)
    n, delta_budget = 8, 1e-3
    exact = exact_epsilon([(privacy_profile(params, gamma), n)], delta_budget)
    generic = accounting.account([(params.m * params.epsilon, params.delta, n)], delta_budget).spend.epsilon
    one_more = exact_epsilon([(privacy_profile(params, gamma), n + 1)], delta_budget)
    assert exact < generic and exact < one_more
    budget = (exact + min(generic, one_more)) / 2  # n answers fit only by exact composition; n + 1 never
    votes = write_votes(tmp_path / "v.csv", [[1, 0, 1, 0, 1]] * n)
    db = tmp_path / "ledger.db"
    r = cli("aggregate", "--table", str(table), "--votes", str(votes), "--ledger-db", str(db), "--ledger", "x",
            "--epsilon-budget", repr(budget), "--delta-budget", repr(delta_budget), "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ledger"]["answers"] == n and doc["ledger"]["composition"] == "exact"
    # paid by the exact composition on the coarse grid (n = 8 is its own bucket) when it fits, as here; it is
    # within the coarse grid's rounding (n × 1e-4) of the fine one
    coarse = exact_epsilon([(privacy_profile(params, gamma), n)], delta_budget, coarse=True)
    assert abs(coarse - exact) <= n * 1e-4 and coarse <= budget
    assert doc["ledger"]["epsilon_spent"] == pytest.approx(coarse, rel=1e-9)
    write_votes(tmp_path / "one.csv", [[1, 0, 1, 0, 1]])  # one more does not fit: refused, nothing written
    r = cli("aggregate", "--table", str(table), "--votes", str(tmp_path / "one.csv"), "--ledger-db", str(db),
            "--ledger", "x", cwd=tmp_path)
    assert r.returncode == 1 and "at most 0 answer(s) fit now" in r.stderr
    assert ledger_row(db, "x")[0] == n


def test_python_api_exports_planning_and_profiles():
    import darrm_opt
    from darrm_opt import mechanisms
    from darrm_opt.planning import job as job_module
    from darrm_opt.privacy import profile as profile_module

    assert darrm_opt.plan_job is mechanisms.plan_job and darrm_opt.Offer is job_module.Offer
    assert darrm_opt.Job is job_module.Job and not hasattr(darrm_opt, "Plan") and not hasattr(darrm_opt, "plan")
    assert darrm_opt.privacy_profile is profile_module.privacy_profile
    assert set(darrm_opt.__all__) >= {"plan_job", "Job", "Offer", "privacy_profile", "solve", "verify",
                                      "Aggregator", "Ledger", "release_answers", "certify_table", "load_certified",
                                      "CertifiedTable"}


def test_the_python_api_exports_every_kind_and_the_job_planner():
    """Every name of ``__all__`` resolves; the registry, the job planner, the PATE-setting and multi-class solvers
    and the Gaussian mean release are among them (and are the modules' own objects)."""
    import darrm_opt
    from darrm_opt import mechanisms
    from darrm_opt.optimize import multiclass, pate_setting

    for name in darrm_opt.__all__:
        assert getattr(darrm_opt, name) is not None, name
    assert darrm_opt.plan_job is mechanisms.plan_job and darrm_opt.MECHANISMS is mechanisms.MECHANISMS
    assert darrm_opt.solve_pate is pate_setting.solve_pate
    assert darrm_opt.solve_multiclass is multiclass.solve_multiclass
    assert set(darrm_opt.MECHANISMS) >= {"darrm", "darrm-pate", "darrm-multiclass", "gnmax", "confident-gnmax",
                                         "gaussian-mean"}
