"""Every ``--format json`` command of the CLI, run as a subprocess as users run it: stdout must be one JSON
document (nothing else on it: no solver banner, no progress) carrying the values asked for.

A C library writing to file descriptor 1 (highspy 1.16 prints a banner when the first ``Highs()`` is
created) bypasses ``sys.stdout``; so does the stand-in below, which makes the check independent of the
installed highspy's habits.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_helpers import exe, run_cli

from darrm_opt.cli import COMMANDS

# slow tier: every command runs as a subprocess (a fresh interpreter each)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]



def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd, timeout=240)


def json_out(*args: str, cwd: Path):
    """Run a command with ``--format json``; its stdout parsed (the whole of it must be the document)."""
    r = cli(*args, "--format", "json", cwd=cwd)
    assert r.returncode == 0, (args, r.stdout[-2000:], r.stderr[-2000:])
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError as exc:
        raise AssertionError(f"{args}: stdout is not one JSON document ({exc}): {r.stdout[:300]!r}") from None


def _in_unit(values) -> bool:
    return all(isinstance(v, float | int) and 0.0 <= v <= 1.0 for v in values)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """Table files of the three kinds (the JSON of ``solve``) and a votes file."""
    d = tmp_path_factory.mktemp("json-commands")
    for name, args in (("shared", ("solve", "--K", "5", "--m", "2", "--no-baselines")),
                       ("pate", ("solve", "--K", "5", "--teachers", "disjoint-nonprivate", "--target-epsilon", "1")),
                       ("multiclass", ("solve", "--K", "5", "--classes", "3", "--target-epsilon", "1",
                                       "--delta", "1e-6", "--no-baselines"))):
        r = cli(*args, "--format", "json", "--out", f"{name}.json", "-q", cwd=d)
        assert r.returncode == 0, r.stderr
    (d / "votes.csv").write_text("0,0,0,0,0\n1,1,1,1,1\n1,1,0,1,0\n0,1,0,0,1\n")
    return {"dir": d, "shared": d / "shared.json", "pate": d / "pate.json", "multiclass": d / "multiclass.json",
            "votes": d / "votes.csv"}


# --- solve, in every setting -------------------------------------------------------------------------------
def test_solve_shared(tmp_path):
    doc = json_out("solve", "--K", "5", "--m", "2", "-q", cwd=tmp_path)
    assert doc["K"] == 5 and doc["m"] == 2 and doc["epsilon"] == 0.1 and doc["teacher_delta"] == 1e-5
    assert doc["delta"] == pytest.approx(1 - (1 - 1e-5) ** 2, rel=1e-12)
    assert doc["certificate"]["certified"] is True and doc["certificate"]["multisets_checked"] == 792
    assert doc["certificate"]["max_privacy_cost"] <= doc["certificate"]["bound"]
    assert len(doc["gamma"]) == 6 and _in_unit(doc["gamma"]) and doc["gamma"][0] == doc["gamma"][5]
    assert 0 < doc["expected_error"]["opt"] <= doc["expected_error"]["const_opt"] <= doc["expected_error"]["const"]
    assert doc["baseline_certificates"]["sub"]["certified"] is True and doc["baselines"]["dsub"] is None
    assert doc["setting"]["teachers"] == "shared"


def test_solve_disjoint_private(tmp_path):
    doc = json_out("solve", "--K", "5", "--m", "2", "--teachers", "disjoint-private", "--no-baselines", "-q",
                   cwd=tmp_path)
    assert doc["certificate"]["certified"] is True and _in_unit(doc["gamma"])
    assert doc["setting"]["teachers"] == "disjoint-private"
    assert doc["setting"]["total_cap"] is not None


def test_solve_pate_setting(files):
    doc = json.loads(files["pate"].read_text())
    assert doc["teachers"] == "disjoint-nonprivate" and doc["K"] == 5 and doc["epsilon"] == 1.0
    assert doc["certificate"]["certified"] is True and doc["certificate"]["pairs_checked"] == 20
    assert doc["certificate"]["max_privacy_cost"] <= doc["certificate"]["bound"] == pytest.approx(math.e - 1)
    assert len(doc["gamma"]) == 6 and _in_unit(doc["gamma"])
    # GNMax is one of the γ the LP ranges over: the optimum's error is at most GNMax's at the same (ε, δ)
    assert 0 < doc["expected_error"] <= doc["gnmax"]["expected_error"]
    again = json_out("solve", "--K", "5", "--teachers", "disjoint-nonprivate", "--target-epsilon", "1", "-q",
                     cwd=files["dir"])
    assert again["gamma"] == doc["gamma"]


def test_solve_multiclass(files):
    doc = json.loads(files["multiclass"].read_text())
    assert doc["classes"] == 3 and doc["K"] == 5 and doc["target_epsilon"] == 1.0 and doc["delta"] == 1e-6
    assert doc["certificate"]["certified"] is True
    assert doc["certificate"]["max_hockey_stick"] <= doc["delta"]
    assert len(doc["gamma"]) == 6 and _in_unit(doc["gamma"])
    assert doc["expected_accuracy"] + doc["expected_error"] == pytest.approx(1.0)
    assert 1 / 3 < doc["expected_accuracy"] < 1
    direct = json_out("solve", "--K", "5", "--classes", "3", "--target-epsilon", "1", "--delta", "1e-6", "-q",
                      cwd=files["dir"])
    assert direct["gamma"] == doc["gamma"]
    assert direct["comparison"]["gnmax_error"] is not None
    assert direct["comparison"]["darrm_error"] <= direct["comparison"]["gnmax_error"]


# --- the other commands -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["shared", "pate", "multiclass"])
def test_verify(files, kind):
    doc = json_out("verify", str(files[kind]), "-q", cwd=files["dir"])
    assert doc["certificate"]["certified"] is True and doc["privacy_profile_valid"] is True
    assert doc["K"] == 5


def test_aggregate(files):
    doc = json_out("aggregate", "--table", str(files["shared"]), "--votes", str(files["votes"]), cwd=files["dir"])
    gamma = json.loads(files["shared"].read_text())["gamma"]
    assert doc["K"] == 5 and len(doc["answers"]) == 4 and set(doc["answers"]) <= {0, 1}
    assert gamma[0] == gamma[5] == 1.0  # unanimous votes are answered for sure
    assert doc["answers"][:2] == [0, 1]


def test_grid(tmp_path):
    rows = json_out("grid", "--K", "5", "--m", "1,2", "-q", cwd=tmp_path)
    assert [(r["K"], r["m"]) for r in rows] == [(5, 1), (5, 2)]
    assert all(r["certificate"]["certified"] and len(r["gamma"]) == 6 and _in_unit(r["gamma"]) for r in rows)
    assert rows[1]["expected_error"] < rows[0]["expected_error"]  # a larger allowance, a smaller error


def test_compare(tmp_path):
    rows = json_out("compare", "--K", "5", "--m", "1,3", cwd=tmp_path)
    assert [r["m"] for r in rows] == [1, 3]
    for r in rows:
        e = r["errors"]
        # γ_opt sits 1e-8 (relative) inside the bound: at least as good as each baseline up to that
        assert 0 <= e["opt"] <= min(e["const_opt"], e["sub"], e["const"]) + 1e-7
        assert e["opt"] <= e["gnmax"] and r["sigma"]["gnmax"] > 0
    assert rows[1]["errors"]["opt"] < rows[0]["errors"]["opt"]


def test_compare_pate_setting(tmp_path):
    rows = json_out("compare", "--K", "5", "--teachers", "disjoint-nonprivate", "--target-epsilon", "0.1",
                    "--delta", "1e-5", cwd=tmp_path)
    assert len(rows) == 1 and rows[0]["teachers"] == "disjoint-nonprivate"
    assert 0 < rows[0]["errors"]["opt"] <= rows[0]["errors"]["gnmax"]


def test_multiclass_comparison_is_the_plan_of_every_mechanism(tmp_path):
    """Class-label votes over Q answers at a total budget: ``plan --classes`` compares every mechanism's
    offer (``compare`` has no --classes)."""
    doc = json_out("plan", "--K", "5", "--classes", "3", "--queries", "2", "--budget", "2,1e-5", "-q", cwd=tmp_path)
    offered = {doc["mechanism"], *(a["mechanism"] for a in doc["alternatives"])}
    assert {"darrm-multiclass", "gnmax", "confident-gnmax"} <= offered
    assert doc["plan"]["queries"] == 2 and doc["epsilon_spent"] <= 2.0
    assert cli("compare", "--K", "5", "--classes", "3", cwd=tmp_path).returncode == 2


def test_budget_per_query(tmp_path):
    rows = json_out("budget", "--per-query", "0.2,1e-5", "--queries", "1,5", cwd=tmp_path)
    simple = {r["queries"]: r for r in rows if r["method"] == "simple"}
    assert simple[1]["epsilon"] == pytest.approx(0.2) and simple[5]["epsilon"] == pytest.approx(1.0)


def test_budget_table(files):
    rows = json_out("budget", "--table", str(files["shared"]), "--queries", "1,5", "-q", cwd=files["dir"])
    exact = {r["queries"]: r["epsilon"] for r in rows if r["method"] == "exact"}
    basic = {r["queries"]: r["epsilon"] for r in rows if r["method"] == "basic"}
    assert basic[1] == pytest.approx(0.2) and basic[5] == pytest.approx(1.0)
    assert 0 < exact[1] <= 0.2 and exact[1] < exact[5] <= 1.0


def test_plan(tmp_path):
    doc = json_out("plan", "--K", "5", "--epsilon", "0.1", "--teacher-delta", "1e-5", "--queries", "10",
                   "--budget", "3,1e-3", "--no-baselines", "-q", cwd=tmp_path)
    assert doc["certificate"]["certified"] is True and _in_unit(doc["gamma"])
    assert doc["plan"]["queries"] == 10 and doc["plan"]["spent_epsilon"] <= 3


def test_plan_pate_setting(tmp_path):
    doc = json_out("plan", "--K", "5", "--teachers", "disjoint-nonprivate", "--queries", "10", "--budget",
                   "8,1e-3", "-q", cwd=tmp_path)
    assert doc["teachers"] == "disjoint-nonprivate" and doc["certificate"]["certified"] is True
    assert doc["plan"]["spent_epsilon"] <= 8 and _in_unit(doc["gamma"])


def test_demo(tmp_path):
    pytest.importorskip("sklearn")
    doc = json_out("demo", "teachers", "--queries", "10", "--draws", "2", cwd=tmp_path)
    assert doc["config"]["K"] == 11 and _in_unit(doc["gamma_opt"])
    assert all(0 <= a <= 1 for row in doc["accuracy"] for a in row.values() if isinstance(a, float))


def test_gaussian_json(tmp_path):
    doc = json_out("gaussian", "--queries", "80", "--epsilon", "8", "--delta", "1e-3", "--K", "8", "--dim", "16",
                   cwd=tmp_path)
    assert doc["kind"] == "gaussian-mean" and doc["certificate"]["certified"] is True and "gamma" not in doc
    cal = doc["calibration"]
    assert cal["sigma_eq15"] == pytest.approx(1.2825639, rel=1e-6)
    assert cal["sigma_exact"] == pytest.approx(1.0733, abs=1e-4)
    assert cal["epsilon_spent"] <= 8 and doc["privacy_profile"]["type"] == "gaussian"


def test_label_json(files):
    pytest.importorskip("sqlalchemy")
    doc = json_out("label", "--votes", str(files["votes"]), "--budget", "8,1e-3", "--mechanism", "darrm-pate",
                   "--ledger-db", "label.db", "-q", cwd=files["dir"])
    s = doc["statement"]
    assert len(doc["labels"]) == 4 and set(doc["labels"]) <= {0, 1}
    assert (s["mechanism"], s["K"], s["classes"], s["accounting"], s["answered_now"]) == ("darrm-pate", 5, 2,
                                                                                          "worst-case", 4)
    assert 0 < s["epsilon"] <= 8 and s["delta"] == 1e-3 and doc["text"].startswith("These 4 labels are")


#: the commands this module runs with --format json (each by one or more tests above)
COVERED = {"solve", "verify", "aggregate", "grid", "compare", "budget", "plan", "demo", "gaussian", "label"}


def test_every_json_command_is_covered(tmp_path):
    """Each command whose ``--help`` offers ``--format`` json is run above (a new one must be added here)."""
    with_json = set()
    for name in COMMANDS:
        r = subprocess.run([*exe(), name, "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                           env={**os.environ, "COLUMNS": "200"})
        assert r.returncode == 0, r.stderr
        if any("--format" in line and "json" in line for line in r.stdout.splitlines()):
            with_json.add(name)
    assert with_json == COVERED


# --- the guard itself, against any library that writes to fd 1 --------------------------------------------
def test_a_c_level_write_while_highs_is_created_never_reaches_stdout(tmp_path):
    """A stand-in Highs whose constructor writes to fd 1 directly (as a C library does) and through C stdio
    without flushing: the solve's stdout holds only what Python printed, in order."""
    script = textwrap.dedent("""
        import ctypes, json, os, sys
        import numpy as np
        import highspy

        libc = ctypes.CDLL(None)

        class Loud(highspy.Highs):
            def __init__(self):
                os.write(1, b"BANNER-FD\\n")
                libc.printf(b"BANNER-STDIO\\n")
                super().__init__()

        highspy.Highs = Loud
        from darrm_opt.solvers import LP, highs

        print("before", flush=False)
        r = highs.solve(LP(np.array([-1.0]), np.array([[1.0]]), np.array([0.5]), np.zeros(1), np.ones(1)))
        s = highs.session(np.array([-1.0]), np.zeros(1), np.ones(1))
        s.add_rows(np.array([[2.0]]), np.array([1.5]))
        print(json.dumps({"one": r.objective, "two": s.solve().objective}))
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "before" and len(lines) == 2, r.stdout
    assert json.loads(lines[1]) == {"one": -0.5, "two": -0.75}
