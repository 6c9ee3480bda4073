"""The package has no import cycle: pyproject's acyclic_siblings contract, run by ``lint-imports`` in CI, holds
for darrm_opt and is broken by a cycle, module-level or inside a function, at any depth (shown here on small
synthetic packages checked by the same contract)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _acyclic_contract() -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["type"] == "acyclic_siblings"]
    return contract


def test_the_contract_covers_the_whole_package():
    contract = _acyclic_contract()
    assert contract["ancestors"] == ["darrm_opt"]
    assert "depth" not in contract and "skip_descendants" not in contract and "ignore_imports" not in contract


def _lint(tmp_path: Path, files: dict[str, str]) -> subprocess.CompletedProcess:
    """``lint-imports`` on package ``cyc`` made of ``files`` (path -> source) with pyproject's contract."""
    for name, source in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    config = tmp_path / "lint.toml"
    config.write_text(
        '[tool.importlinter]\nroot_packages = ["cyc"]\n\n[[tool.importlinter.contracts]]\n'
        f'name = "no cycle"\ntype = "{_acyclic_contract()["type"]}"\nancestors = ["cyc"]\n')
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("where", ["cyc", "cyc/sub"])
def test_a_cycle_through_a_function_level_import_breaks_the_contract(tmp_path, where):
    dotted = where.replace("/", ".")
    files = {"cyc/__init__.py": "", f"{where}/__init__.py": "",
             f"{where}/low.py": f"def f():\n    from {dotted}.high import g\n    return g\n",
             f"{where}/high.py": f"from {dotted} import low\n\n\ndef g():\n    return low\n"}
    run = _lint(tmp_path, files)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "No cycles are allowed in " + dotted in run.stdout
    assert ".low -> .high" in run.stdout or ".high -> .low" in run.stdout


def test_a_package_without_a_cycle_keeps_the_contract(tmp_path):
    files = {"cyc/__init__.py": "", "cyc/low.py": "X = 1\n",
             "cyc/high.py": "def g():\n    from cyc.low import X\n    return X\n"}
    run = _lint(tmp_path, files)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 1 kept, 0 broken." in run.stdout
