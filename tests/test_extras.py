"""The core install without any extra: the core commands work, the others stop with exit 2 and the pip
command. A missing package is simulated in a fresh interpreter by ``sys.modules[name] = None`` (then both
``import`` and ``importlib.util.find_spec`` see it as absent)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# slow tier: every test is a fresh interpreter with the extras hidden
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
EXTRA_MODULES = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "pydantic_settings", "gurobipy", "pulp", "matplotlib",
                 "sklearn", "distributed", "dask")


def core_only(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    code = (f"import sys\nfor m in {EXTRA_MODULES!r}:\n    sys.modules[m] = None\n"
            f"sys.argv = ['darrm-opt', *{list(args)!r}]\nfrom darrm_opt.cli import main\nmain()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """A K = 5 table solved without any extra (the first core command) and one vote row."""
    d = tmp_path_factory.mktemp("extras")
    r = core_only("solve", "--K", "5", "--m", "2", "--format", "json", "--out", "t.json", "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    (d / "v.csv").write_text("1,1,1,0,0\n")
    return d


def test_core_commands_run_without_any_extra(files):
    assert json.loads((files / "t.json").read_text())["certificate"]["certified"] is True  # solve ran core-only
    assert core_only("verify", "t.json", cwd=files).returncode == 0
    r = core_only("aggregate", "--table", "t.json", "--votes", "v.csv", cwd=files)
    assert r.returncode == 0 and r.stdout.splitlines()[0] == "answer", r.stderr
    r = core_only("budget", "--per-query", "0.2,1e-5", "--queries", "10", cwd=files)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(("args", "extra"), [
    (("serve",), "service"),
    (("aggregate", "--table", "{d}/t.json", "--votes", "{d}/v.csv", "--ledger", "x", "--epsilon-budget", "1",
      "--delta-budget", "1e-3"), "service"),
    (("plot", "--K", "5", "--m", "1", "--out", "p.png"), "plots"),
    (("demo",), "demo"),
    (("solve", "--K", "5", "--m", "2", "--solver", "gurobi", "-q"), "gurobi"),
    (("solve", "--K", "5", "--m", "2", "--solver", "cbc", "-q"), "cbc"),
    (("verify", "{d}/t.json", "--dask-scheduler", "tcp://127.0.0.1:1"), "dask"),
])
def test_a_missing_extra_exits_2_with_the_pip_command(files, tmp_path, args, extra):
    r = core_only(*(a.format(d=files) for a in args), cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"pip install 'darrm-opt[{extra}]'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "darrm.db").exists()


def test_the_python_ledger_names_its_extra(tmp_path):
    code = (f"import sys\nfor m in {EXTRA_MODULES!r}:\n    sys.modules[m] = None\n"
            "import darrm_opt\nfrom darrm_opt import Aggregator, certify_table, load_certified, release_answers\n"
            "try:\n    darrm_opt.Ledger\nexcept darrm_opt.MissingExtra as exc:\n    print(exc)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "darrm_opt.Ledger needs the 'service' extra" in r.stdout and "pip install 'darrm-opt[service]'" in r.stdout
