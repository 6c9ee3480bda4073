"""``darrm-opt data-dependent``: a data-dependent ledger from the command line, the votes read as held."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from test_data_dependent_ledger import gnmax_policy

pytest.importorskip("sqlalchemy")


def cli(*args, cwd, stdin=None):
    return subprocess.run([sys.executable, "-m", "darrm_opt", "data-dependent", *args], capture_output=True,
                          text=True, cwd=cwd, input=stdin, timeout=120)


@pytest.mark.slow  # CLI processes
def test_answer_record_publish_show_as_a_user_runs_them(tmp_path):
    (tmp_path / "policy.json").write_text(json.dumps({"run": {"policy": json.loads(gnmax_policy(quota=4).to_json())}}))
    np.save(tmp_path / "c.npy", np.array([[12, 0, 0], [0, 12, 0]]))
    db = ("--ledger-db", "dd.db")
    r = cli("answer", "--ledger", "job", "--policy", "policy.json", "--votes", "c.npy", *db, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    labels = r.stdout.splitlines()
    assert labels[0] == "label" and len(labels) == 3 and all(x in {"-1", "0", "1", "2"} for x in labels[1:])
    r = cli("record", "--ledger", "job", "--votes", "-", *db, cwd=tmp_path, stdin="2 2 2 2 2 2 2 2 2 2 2 2\n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["queries"] == 3
    r = cli("record", "--ledger", "job", "--votes", "-", *db, cwd=tmp_path, stdin="12,0,1\n")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: invalid votes: row 1: a count row sums to 13; every count row must sum to K = 12 (the number of "
        "teachers)"]
    r = cli("publish", "--ledger", "job", *db, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    published = json.loads(r.stdout)
    assert published["sealed"] and published["queries"] == 3 and published["sanitised_epsilon"] > 0
    r = cli("show", "--ledger", "job", *db, cwd=tmp_path)
    assert json.loads(r.stdout)["sanitised_epsilon"] == published["sanitised_epsilon"]
    r = cli("answer", "--ledger", "job", "--votes", "c.npy", *db, cwd=tmp_path)
    assert r.returncode == 1 and "sealed" in r.stderr
    r = cli("show", "--ledger", "absent", *db, cwd=tmp_path)
    assert r.returncode == 2 and "give a policy" in r.stderr
