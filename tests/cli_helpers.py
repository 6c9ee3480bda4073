"""Running the CLI as users do: the installed ``darrm-opt`` script beside this interpreter (``python -m darrm_opt``
where it is not installed), in a subprocess, without this process's ``DARRM_*`` settings, this checkout first on
the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def exe() -> list[str]:
    """The console script next to this interpreter (as the README runs it), else ``-m``."""
    script = Path(sys.executable).with_name("darrm-opt")
    return [str(script)] if script.exists() else [sys.executable, "-m", "darrm_opt"]


def run_cli(*args: str, cwd: Path, timeout: float = 300, module: bool = False) -> subprocess.CompletedProcess:
    """``darrm-opt ARGS`` in ``cwd`` (``module``: always ``python -m darrm_opt``), its output captured as text."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    command = [sys.executable, "-m", "darrm_opt"] if module else exe()
    return subprocess.run([*command, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
