"""The labelling job in one call (darrm_opt.label, ``darrm-opt label``): plan, ledger, pay once, release, and
the statement; resumed from the ledger's records (nothing paid twice), run as a user runs it."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import darrm_opt
from darrm_opt.errors import BudgetExceeded, InvalidParameter

pytest.importorskip("sqlalchemy")


def cli(*args, cwd, stdin=None):
    return subprocess.run([sys.executable, "-m", "darrm_opt", *args], capture_output=True, cwd=cwd, input=stdin,
                          timeout=900)


def teachers_votes(N, K, C, seed=1, right=0.8):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, C, N)
    correct = rng.random((N, K)) < right
    return np.where(correct, truth[:, None], rng.integers(0, C, (N, K)))


def counts_of(labels, C):
    return np.stack([(labels == c).sum(axis=1) for c in range(C)], axis=1)


def ledger_answers(db, name="label"):
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT answers, epsilon_spent FROM ledgers WHERE name = ?", (name,)).fetchone()


@pytest.mark.slow  # plans and CLI processes
def test_label_cli_plans_pays_once_and_resumes(tmp_path):
    votes = teachers_votes(30, 11, 2)
    np.savetxt(tmp_path / "v20.csv", votes[:20], fmt="%d", delimiter=",")
    np.save(tmp_path / "c20.npy", counts_of(votes[:20], 2))
    np.savetxt(tmp_path / "v30.tsv", votes, fmt="%d", delimiter="\t")
    common = ("--budget", "2,1e-5", "--ledger-db", "l.db", "--mechanism", "darrm-pate")

    r = cli("label", "--votes", "v20.csv", *common, "--queries", "30", "--out", "labels.csv", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    lines = (tmp_path / "labels.csv").read_text().splitlines()
    assert lines[0] == "record,label" and len(lines) == 21
    first = [int(x.split(",")[1]) for x in lines[1:]]
    assert set(first) <= {0, 1} and [int(x.split(",")[0]) for x in lines[1:]] == list(range(20))
    said = " ".join(r.stderr.decode().split())
    assert "These 20 labels are (ε = " in said and "δ = 1e-05)-differentially private in the worst case" in said
    assert "Mechanism darrm-pate" in said and "20 answered in this run, 0 answered before" in said
    answers, eps = ledger_answers(tmp_path / "l.db")
    assert answers == 20 and 0 < eps <= 2

    # the same votes as counts, from standard input: nothing is paid, the stored labels come back
    r = cli("label", "--votes", "-", *common, "--format", "json", cwd=tmp_path,
            stdin=(tmp_path / "c20.npy").read_bytes())
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["labels"] == first
    s = doc["statement"]
    assert (s["answered_now"], s["answered_before"], s["labels"]) == (0, 20, 20)
    assert (s["accounting"], s["delta"], s["mechanism"], s["K"], s["classes"]) == ("worst-case", 1e-5, "darrm-pate",
                                                                                  11, 2)
    assert s["epsilon"] == eps and s["ledger"]["answers"] == 20
    assert ledger_answers(tmp_path / "l.db") == (20, eps)

    # the job grows: only the 10 new rows are answered and paid, within the budget planned for Q = 30
    r = cli("label", "--votes", "v30.tsv", *common, "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["labels"][:20] == first and len(doc["labels"]) == 30
    assert (doc["statement"]["answered_now"], doc["statement"]["answered_before"]) == (10, 20)
    answers, eps30 = ledger_answers(tmp_path / "l.db")
    assert answers == 30 and eps <= eps30 <= 2 and doc["statement"]["epsilon"] == eps30

    # votes that are not the ones answered are refused, and nothing is paid
    changed = votes[:20].copy()
    changed[0] = 1 - changed[0]
    np.savetxt(tmp_path / "other.csv", changed, fmt="%d", delimiter=",")
    r = cli("label", "--votes", "other.csv", *common, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.decode().strip().splitlines()[-1] == (
        "error: invalid votes: rows 0 to 19 differ from the votes ledger 'label' answered for them (another job "
        "needs another ledger)")
    assert ledger_answers(tmp_path / "l.db") == (30, eps30)


@pytest.mark.slow  # plans and CLI processes
def test_label_cli_multiclass_every_mechanism_and_one_line_errors(tmp_path):
    votes = teachers_votes(30, 25, 10, seed=3, right=0.7)
    np.save(tmp_path / "c.npy", counts_of(votes, 10))
    r = cli("label", "--votes", "c.npy", "--budget", "2,1e-5", "--ledger-db", "l.db", "--format", "json",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    s = doc["statement"]
    assert len(doc["labels"]) == 30 and all(-1 <= x <= 9 for x in doc["labels"])
    assert (s["K"], s["classes"], s["answered_now"], s["accounting"]) == (25, 10, 30, "worst-case")
    assert 0 < s["epsilon"] <= 2 and s["delta"] == 1e-5 and ledger_answers(tmp_path / "l.db")[0] == 30
    err = r.stderr.decode()
    assert "votes: N = 30 queries, K = 25 teachers, C = 10 classes (read as counts)" in err
    assert "plan: darrm-multiclass offers E[error]" in err and "plan: chosen " in err
    assert "\nplan: darrm-multiclass (" in err and "\npaying and releasing ...\n" in err  # each step's phase

    bad = counts_of(votes, 10)
    bad[4, 0] += 1
    np.save(tmp_path / "bad.npy", bad)
    for args, line in (
        (("--votes", "bad.npy", "--budget", "2,1e-5"),
         "error: invalid votes: votes[4]: a count row sums to 26; every count row must sum to K = 25 (the number "
         "of teachers)"),
        (("--votes", "c.npy", "--budget", "2"), "error: invalid budget: must be two numbers EPS,DELTA (got '2')"),
        (("--votes", "c.npy", "--budget", "3,1e-5"),
         "error: invalid epsilon-budget: ledger 'label' already exists with budget 2; a budget cannot change "
         "(got 3.0)"),
    ):
        r = cli("label", *args, "--ledger-db", "l.db", "-q", cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.decode().strip().splitlines() == [line]


@pytest.mark.slow  # a plan
def test_label_in_python_reports_progress_and_resumes(tmp_path):
    votes = teachers_votes(20, 11, 2, seed=5)
    seen = []
    db = str(tmp_path / "l.db")
    job = darrm_opt.label(counts_of(votes, 2), budget=(2, 1e-5), ledger_db=db, kinds=["darrm-pate"],
                          progress=lambda stage, **info: seen.append((stage, info.get("step"))))
    assert seen[:3] == [("votes", None), ("plan", "start"), ("plan", "kind")] and seen[-2:] == [("pay", None),
                                                                                               ("done", None)]
    assert ("plan", "offer") in seen and ("plan", "chosen") in seen
    assert job.labels.shape == (20,) and set(job.labels.tolist()) <= {0, 1}
    s = job.statement
    assert (s["answered_now"], s["mechanism"], s["accounting"], s["delta"]) == (20, "darrm-pate", "worst-case", 1e-5)
    assert 0 < s["epsilon"] <= 2 and job.text.startswith(f"These 20 labels are (ε = {s['epsilon']:.6g}, δ = 1e-05)")
    again = darrm_opt.label(votes, budget=(2, 1e-5), ledger_db=db)  # labels this time; no plan, nothing paid
    assert again.labels.tolist() == job.labels.tolist() and again.statement["answered_before"] == 20
    assert again.statement["epsilon"] == s["epsilon"] and again.statement["ledger"]["answers"] == 20
    with pytest.raises(BudgetExceeded):  # 5 more answers than the plan's Q = 20 do not fit its budget
        darrm_opt.label(np.vstack([votes, votes[:5]]), budget=(2, 1e-5), ledger_db=db)
    assert ledger_answers(tmp_path / "l.db")[0] == 20
    with pytest.raises(InvalidParameter, match="invalid budget: must be two numbers"):
        darrm_opt.label(votes, budget=(2,), ledger_db=db)


def rest_job_statement(tmp_path, votes):
    """The PATE job as one REST job on a real server: POST /v1/jobs (polled while it plans), the (N, C) counts
    as one batch of record ids; its statement without the ledger's own name and id."""
    sys.path.insert(0, str(Path(__file__).with_name("api")))
    from svc_helpers import Server

    server = Server(tmp_path, f"sqlite:///{tmp_path / 'rest.db'}").start()
    try:
        with server.client(timeout=600.0) as c:
            r = c.post("/v1/jobs", json={"budget": [2, 1e-5], "classes": 10, "shape": list(votes.shape),
                                         "name": "pate"})
            deadline = time.monotonic() + 1500
            while r.status_code == 202 and time.monotonic() < deadline:
                assert r.json()["status"] == "planning", r.text
                time.sleep(1)
                r = c.get(r.headers["Location"])
            assert r.status_code in (200, 201) and r.json()["status"] == "ready", r.text
            batch = {"records": list(range(len(votes))), "votes": counts_of(votes, 10).tolist()}
            r = c.post(f"/v1/jobs/{r.json()['id']}/votes", json=batch)
            assert r.status_code == 200, r.text
            doc = r.json()
            assert len(doc["labels"]) == len(votes) and not doc["replayed"]
            again = c.post(f"/v1/jobs/{doc['job_id']}/votes", json=batch).json()  # resent: not paid twice
            assert again["replayed"] and again["labels"] == doc["labels"]
            status = c.get(f"/v1/jobs/{doc['job_id']}").json()
            assert status["answered"] == len(votes) and status["spent"]["epsilon"] == doc["statement"]["epsilon"]
    finally:
        server.stop()
    return {k: v for k, v in doc["statement"].items() if k != "ledger"}


@pytest.mark.slow  # the PATE job (K = 250, C = 10, Q = 1000): three plans of every mechanism
@pytest.mark.timeout(2400)  # each about 1 min of CPU, 5 min on 2 cores shared with other runs
def test_the_pate_job_from_counts_npy_labels_csv_and_one_rest_job(tmp_path):
    votes = teachers_votes(1000, 250, 10, seed=7, right=0.6)
    np.save(tmp_path / "counts.npy", counts_of(votes, 10))
    np.savetxt(tmp_path / "votes.csv", votes, fmt="%d", delimiter=",")
    statements = []
    for name, db in (("counts.npy", "a.db"), ("votes.csv", "b.db")):
        start = time.monotonic()
        r = cli("label", "--votes", name, "--budget", "2,1e-5", "--ledger-db", db, "--format", "json", "-q",
                cwd=tmp_path)
        assert r.returncode == 0, r.stderr.decode()
        doc = json.loads(r.stdout)
        assert len(doc["labels"]) == 1000, time.monotonic() - start
        statements.append({k: v for k, v in doc["statement"].items() if k != "ledger"})
    statements.append(rest_job_statement(tmp_path, votes))
    assert statements[0] == statements[1] == statements[2]
    s = statements[0]
    assert (s["K"], s["classes"], s["labels"], s["accounting"], s["delta"]) == (250, 10, 1000, "worst-case", 1e-5)
    assert 0 < s["epsilon"] <= 2


@pytest.mark.slow  # a shared-setting plan (K = 5, Q = 20)
def test_label_of_disjoint_private_teachers_within_their_cap_pays_a_composed_table(tmp_path):
    """The plan of disjoint-private teachers whose (ε, Δ) is within the budget is the plain majority, free,
    which has no table to pay for: label pays the shared-setting plan's table, of their setting."""
    votes = teachers_votes(20, 5, 2, seed=7)
    job = darrm_opt.label(votes, budget=(3.0, 0.01), ledger_db=str(tmp_path / "l.db"), teachers="disjoint-private",
                          epsilon=0.2, teacher_delta=1e-4)
    s = job.statement
    assert (s["answered_now"], s["mechanism"], s["teachers"]) == (20, "darrm", "disjoint-private")
    assert 0 < s["epsilon"] <= 3.0 and job.labels.shape == (20,)
    assert ledger_answers(tmp_path / "l.db")[0] == 20


def test_progress_is_a_callback_or_tqdm(tmp_path):
    with pytest.raises(InvalidParameter, match="invalid progress: must be a callable progress"):
        darrm_opt.label(np.zeros((2, 3), dtype=int), budget=(2, 1e-5), ledger_db=str(tmp_path / "l.db"),
                        progress="bars")
    try:
        import tqdm  # noqa: F401
    except ImportError:
        with pytest.raises(InvalidParameter, match=r"'tqdm' needs the tqdm package \(pip install tqdm\)"):
            darrm_opt.plan_job(None, progress="tqdm")
    assert not (tmp_path / "l.db").exists()  # refused before anything opened
