import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.experiments.demo import DemoConfig, darrm_answer, run_demo


def test_demo_small():
    res = run_demo(DemoConfig.small())
    d = res.to_dict()
    assert {r["method"] for r in d["accuracy"]} == {"opt", "sub", "majority", "pate_opt", "gnmax", "gnmax_paper"}
    assert {r["setting"] for r in d["accuracy"]} == {"shared", "disjoint"}
    assert all(0 <= r["mean"] <= 1 and r["std"] >= 0 for r in d["accuracy"])
    assert round(d["gnmax_sigma"]["rdp"], 2) == 21.46  # DaRRM Table 4, per query (0.2676, 3e-4)
    assert round(d["gnmax_sigma"]["exact-one-bit"], 2) == 7.68  # the bit GNMax releases, K = 11
    assert d["settings"]["disjoint"]["total_cap"] == {"epsilon": 0.0892, "delta": 1e-4}
    assert d["privacy"][0]["per_query_epsilon"] == __import__("pytest").approx(0.2676)
    assert d["teacher_accuracy"]["non_private_mean"] > 0.8  # the task is learnable without privacy


def test_darrm_answer_extremes():
    rng = np.random.default_rng(0)
    votes = np.array([0, 11, 11, 0])
    assert list(darrm_answer(votes, 11, np.ones(12), rng)) == [0, 1, 1, 0]


def test_demo_cli(tmp_path):
    fig = tmp_path / "d.png"
    res = CliRunner().invoke(app, ["demo", "teachers", "--queries", "10", "--draws", "2", "--format", "json",
                                   "--plot", str(fig)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["privacy"][0]["queries"] == 10
    assert fig.read_bytes()[:4] == b"\x89PNG"
    res = CliRunner().invoke(app, ["demo", "nothing"])
    assert res.exit_code != 0


@pytest.mark.slow  # the example script as a subprocess
def test_example_script_small():
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "examples" / "teachers_demo.py"), "--small"],
                         capture_output=True, text=True, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "GNMax" in out.stdout
