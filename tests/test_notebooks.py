"""The notebook of the documentation (docs/notebooks/label_a_dataset.ipynb) runs end to end in a real kernel,
and the figures it prints are what it says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "docs" / "notebooks" / "label_a_dataset.ipynb"


def test_the_notebook_is_committed_without_outputs():
    nb = json.loads(NOTEBOOK.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


@pytest.mark.slow  # a kernel, a plan of two kinds, 200 answers paid through a ledger: about 20 s
def test_the_notebook_labels_a_dataset_end_to_end(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")
    pytest.importorskip("sqlalchemy")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # the kernel is a subprocess: it inherits PYTHONPATH, so it imports this checkout's darrm_opt
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 3  # the offers, ε spent, the student
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    result = json.loads(text.strip().splitlines()[-1])
    # both kinds made an offer within (8, 1e-5) for 200 answers, and the least expected error was chosen
    assert set(result["offers"]) == {"darrm-pate-shaped", "gnmax"}
    assert result["chosen"] == min(result["offers"], key=result["offers"].get)
    assert all(0.25 < e < 0.45 for e in result["offers"].values())
    # the ledger paid all 200 answers and its exact composition nearly spends the budget, never past it;
    # basic composition of the same answers would state an ε over 15 times larger
    assert result["answers"] == 200 and 7.9 < result["epsilon_spent"] <= 8
    assert result["epsilon_basic"] > 15 * result["epsilon_spent"]
    # the printed lines say the same figures
    assert f"ε spent {result['epsilon_spent']:.4f} of 8 at δ = 1e-05 (exact composition)" in text
    assert f"chosen: {result['chosen']}" in text
    # the teachers' majority is good (0.91 on this seed); the student learns from noisy private labels
    # (0.86 on one run: the answers are random)
    assert 0.88 < result["majority_accuracy"] < 0.94
    assert 0.6 < result["label_agreement"] < 0.95 and 0.7 < result["student_accuracy"] <= 0.95
    assert f"test accuracy {result['student_accuracy']:.3f}" in text
