"""The example scripts the documentation renders run end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # trains 12 models, plans a table (certified, with its profile) and pays 100 answers
def test_label_toy_dataset_end_to_end(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("sqlalchemy")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "label_toy_dataset.py"), "--workdir", str(tmp_path)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["queries"] == 100 and result["composition"] == "exact"
    # the ledger's exact composition of 100 answers fits the plan's budget (8, 1e-3), and nearly spends it
    assert 7 < result["epsilon_spent"] <= result["epsilon_budget"] == 8 and result["delta_target"] == 1e-3
    # the private labels carry the teachers' majority often enough for a useful student (0.83 on seed 0)
    assert result["label_agreement"] > 0.6 and result["student_accuracy"] > 0.7
    assert (tmp_path / "plan.json").exists() and (tmp_path / "ledger.db").exists()
    # docs/examples.md shows a run: its lines are what the script prints (the seeded data, the plan and the
    # ledger's exact composition are the same every run; the student's accuracy varies with the answers)
    page = (ROOT / "docs" / "examples.md").read_text()
    shown = page[page.index("```text\n", page.index("A run (")) + 8:].split("```")[0].strip().splitlines()
    printed = r.stdout.strip().splitlines()
    assert len(shown) == 4 and shown[:3] == printed[:3], (shown, printed)
    assert shown[3].startswith("student trained on 100 private labels: test accuracy ")
    assert printed[3].startswith("student trained on 100 private labels: test accuracy ")
