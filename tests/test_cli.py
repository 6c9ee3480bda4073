"""The real CLI: outputs, certificates and every bad input (exit code 2, one line, no traceback)."""

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.model.params import Params

runner = CliRunner()


def run(*args):
    return runner.invoke(app, list(args))


def test_solve_json_has_every_field(tmp_path):
    out = tmp_path / "t.json"
    r = run("solve", "--K", "11", "--m", "3", "--format", "json", "--out", str(out), "--quiet")
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    for key in ("K", "m", "epsilon", "teacher_delta", "delta", "prior", "solver", "mode", "gamma",
                "certificate", "baselines", "expected_error", "seconds"):
        assert key in doc
    assert len(doc["gamma"]) == 12
    cert = doc["certificate"]
    assert cert["multisets_checked"] == 31824 and cert["max_privacy_cost"] <= cert["bound"]
    assert len(cert["worst_multiset"]) == 8 and sum(cert["worst_multiset"]) == 11
    assert doc["baselines"]["dsub"] is None and len(doc["baselines"]["sub"]) == 12
    assert doc["expected_error"]["opt"] == pytest.approx(0.0413, abs=5e-5)
    assert doc["expected_error"]["dsub"] is None
    np.testing.assert_allclose(doc["gamma"][:6], [1, 0.977696, 1, 1, 0.54234, 0.939241], atol=2e-6)
    # the proven distance to the optimum: the full LP (every row at once) is within it, and it is small
    from darrm_opt.model.objective import objective_weights
    from darrm_opt.optimize.optimizer import solve

    assert 0.0 <= doc["objective_gap"] < 1e-7
    w = objective_weights(11, Params(11, 3).prior)
    full = solve(Params(11, 3), mode="full")
    assert float(w @ np.array(full.gamma[6:])) <= float(w @ np.array(doc["gamma"][6:])) / (1 - doc["objective_gap"])


def test_solve_table_view_is_certified_as_printed():
    r = run("solve", "--K", "13", "--m", "3", "--quiet")
    assert r.exit_code == 0, r.output
    assert "CERTIFIED" in r.output and "γ_opt" in r.output and "E[error]" in r.output
    rows = [line.split("│") for line in r.output.splitlines() if line.strip()[:2].strip().isdigit() and "│" in line]
    printed = np.array([float(cells[1]) for cells in rows])
    assert printed.size == 14
    from darrm_opt.certify.certificate import certify

    assert certify(Params(13, 3), printed).certified


def test_verify_roundtrip_and_violation(tmp_path):
    good = tmp_path / "good.json"
    assert run("solve", "--K", "9", "--m", "2", "--format", "json", "--out", str(good), "-q").exit_code == 0
    r = run("verify", str(good))
    assert r.exit_code == 0 and "CERTIFIED" in r.output
    doc = json.loads(good.read_text())
    doc["gamma"] = [1.0] * 10  # the plain majority is not 0.2-DP
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = run("verify", str(bad))
    assert r.exit_code == 1
    assert "VIOLATED" in r.output and "multiset" in r.output


@pytest.mark.parametrize(
    "args,needle",
    [
        (["solve", "--K", "10", "--m", "3"], "K"),
        (["solve", "--K", "0", "--m", "1"], "K"),
        (["solve", "--K", "11", "--m", "12"], "m"),
        (["solve", "--K", "11", "--m", "0.5"], "m"),
        (["solve", "--K", "11", "--m", "3", "--epsilon", "0"], "epsilon"),
        (["solve", "--K", "11", "--m", "3", "--epsilon", "-1"], "epsilon"),
        (["solve", "--K", "11", "--m", "3", "--teacher-delta", "1"], "teacher_delta"),
        (["solve", "--K", "11", "--m", "3", "--teacher-delta", "-0.1"], "teacher_delta"),
        (["solve", "--K", "11", "--m", "3", "--delta", "1e-6"], "delta"),
        (["solve", "--K", "11", "--m", "3", "--delta", "1"], "delta"),
        (["solve", "--K", "11", "--m", "3", "--solver", "cplex"], "solver"),
        (["solve", "--K", "11", "--m", "3", "--prior", "beta"], "prior"),
        (["solve", "--K", "11", "--m", "3", "--prior", "iid-uniform:0.9,0.6"], "prior"),
        (["solve", "--K", "11", "--m", "3", "--prior", "iid-uniform:0.2,0.6"], "prior"),
        (["solve", "--K", "11", "--m", "3", "--mode", "fast"], "mode"),
        (["verify", "/nonexistent/table.json"], "table file"),
    ],
)
def test_bad_input_exits_2_with_a_clear_line(args, needle):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert needle in r.output
    assert "Traceback" not in r.output


def test_bad_table_files(tmp_path):
    f = tmp_path / "x.json"
    f.write_text("{not json")
    r = run("verify", str(f))
    assert r.exit_code == 2 and "not valid JSON" in r.output
    privacy = {"epsilon": 0.1, "teacher_delta": 1e-5, "delta": 2e-5}
    f.write_text(json.dumps({"K": 5, "m": 2, **privacy, "gamma": [1, 1]}))
    r = run("verify", str(f))
    assert r.exit_code == 2 and "gamma" in r.output
    f.write_text(json.dumps({"K": 5, "m": 2, **privacy, "gamma": [1, 1, 1, 1, 1, 2]}))
    r = run("verify", str(f))
    assert r.exit_code == 2 and "[0, 1]" in r.output


@pytest.mark.slow  # the console script as a subprocess
def test_console_script_subprocess(tmp_path):
    """The installed entry point, as a user runs it."""
    exe = [sys.executable, "-m", "darrm_opt", "solve", "--K", "5", "--m", "2", "--format", "json", "-q"]
    r = subprocess.run(exe, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["certificate"]["certified"] is True
    r = subprocess.run(exe[:4] + ["--K", "4", "--m", "2"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "invalid K" in r.stderr and "Traceback" not in r.stderr


def test_full_mode_too_large_is_refused_with_advice():
    r = run("solve", "--K", "41", "--m", "3", "--mode", "full")
    assert r.exit_code == 2 and "mode" in r.output and "lazy" in r.output
