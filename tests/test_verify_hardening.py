"""Issue 11, item 7: ``darrm-opt verify`` on hostile and unusual table files, through the CLI as a subprocess.

Unreadable files (a 400-digit integer inside γ, non-UTF-8 bytes, NaN, deep nesting) and missing privacy
parameters exit 2 with one line naming the problem, never a traceback; exactly tight tables (γ_DSub,
γ ≡ 1 at K = 3, m = 2) are proven exact ties and certify; a table whose tie is below what 320-digit interval
arithmetic resolves (and no exact tie) is refused (exit 1) with a plain explanation, and the shrink it
proposes really certifies. The files that must verify are written as darrm-opt writes them
(:func:`darrm_opt.mechanisms.table_document`: verify accepts no other, issue 33); the ones it refuses for
their maths are bare tables, refused for the maths before their form is looked at.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from darrm_opt.mechanisms import certify_table, table_document
from darrm_opt.model.baselines import gamma_dsub
from darrm_opt.model.params import Params

# slow tier: every test runs `darrm-opt verify` in a fresh interpreter (one to three each)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
PURE = {"epsilon": 0.1, "teacher_delta": 0.0, "delta": 0.0}


def verify(path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "COLUMNS": "400"}
    return subprocess.run([sys.executable, "-m", "darrm_opt", "verify", str(path)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)


def _one_error_line(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize("name, raw, needles", [
    ("int400", b'{"K": 3, "m": 2, "epsilon": 0.1, "teacher_delta": 0, "delta": 0, "gamma": [1, '
     + b"9" * 400 + b", 1, 1]}", ("invalid gamma", "400 digits", "at most 40 digits")),
    ("int5000", b'{"K": ' + b"7" * 5000 + b', "m": 2, "epsilon": 0.1, "teacher_delta": 0, "delta": 0, '
     b'"gamma": [1, 1, 1, 1]}', ("invalid K", "5000 digits", "at most 40 digits")),
    ("int41-profile", b'{"K": 3, "m": 2, "epsilon": 0.1, "teacher_delta": 0, "delta": 0, "gamma": [1, 1, 1, 1], '
     b'"privacy_profile": {"support": [], "vertices": [[0, ' + b"1" * 41 + b']]}}',
     ("invalid privacy_profile", "41 digits", "at most 40 digits")),
    ("int400-pate", b'{"K": 3, "teachers": "disjoint-nonprivate", "epsilon": 1, "delta": 0, "gamma": [1, 1, '
     + b"1" * 400 + b", 1]}", ("invalid gamma", "400 digits")),
    ("latin1", b'{"K": 3, "m": 2, "prior": "caf\xe9", "epsilon": 0.1, "teacher_delta": 0, "delta": 0, '
     b'"gamma": [1, 1, 1, 1]}', ("not UTF-8", "0xe9")),
    ("nan", b'{"K": 3, "m": 2, "epsilon": 0.1, "teacher_delta": 0, "delta": 0, "gamma": [NaN, 1, 1, 1]}',
     ("NaN",)),
    ("deep", b'{"K": 3, "gamma": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", ("too deeply",)),
])
def test_unreadable_files_exit_2_with_one_line(tmp_path, name, raw, needles):
    f = tmp_path / f"{name}.json"
    f.write_bytes(raw)
    _one_error_line(verify(f), str(f.name), *needles)


def written(K: int, m: float, gamma: list[float], **privacy: float) -> dict:
    """The table file darrm-opt writes for this table (certified, with its privacy profile)."""
    return table_document(certify_table(Params(K=K, m=m, **privacy), gamma))


COMPLETE = written(3, 2, [0.5] * 4, **PURE)


@pytest.fixture(scope="module")
def complete_table_certifies(tmp_path_factory) -> bool:
    """The table the next test strips fields from certifies while they are present (checked once)."""
    f = tmp_path_factory.mktemp("complete") / "t.json"
    f.write_text(json.dumps(COMPLETE))
    r = verify(f)
    return r.returncode == 0 and "CERTIFIED" in r.stdout


@pytest.mark.parametrize("dropped", [("epsilon",), ("teacher_delta",), ("delta",), ("epsilon", "delta")])
def test_missing_privacy_parameters_are_named_never_defaulted(tmp_path, complete_table_certifies, dropped):
    assert complete_table_certifies
    doc = dict(COMPLETE)
    f = tmp_path / "t.json"
    for k in dropped:
        doc.pop(k)
    f.write_text(json.dumps(doc))
    _one_error_line(verify(f), "lacks field(s) " + ", ".join(dropped))
    doc.update({k: None for k in dropped})  # null is missing too
    f.write_text(json.dumps(doc))
    _one_error_line(verify(f), *dropped)


@pytest.mark.parametrize("K, m, gamma", [
    (3, 2, [1.0] * 4),  # m >= (K + 1) / 2: γ ≡ 1 meets e^{mε} − 1 exactly
    (11, 3, [float(x) for x in gamma_dsub(11, 3)]),
])
@pytest.mark.parametrize("eps", [0.1, 0.3])
def test_exactly_tight_tables_certify_as_exact_ties(tmp_path, K, m, gamma, eps):
    f = tmp_path / "tight.json"
    f.write_text(json.dumps(written(K, m, gamma, **{**PURE, "epsilon": eps})))
    r = verify(f)
    assert r.returncode == 0 and "CERTIFIED" in r.stdout, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "not certified" not in r.stderr


def test_a_tie_that_cannot_be_proven_is_explained_and_refused(tmp_path):
    """Δ = 5e-324, δ = 1e-323, γ ≡ 1, K = 3, m = 2: multiset (0,0,1,2 | 0,0,0,0) is within ~1e-320 of the bound
    (not an exact tie), which 320-digit interval arithmetic cannot resolve."""
    doc = {"K": 3, "m": 2, "epsilon": 0.3, "teacher_delta": 5e-324, "delta": 1e-323}
    f = tmp_path / "tie.json"
    f.write_text(json.dumps({**doc, "gamma": [1.0] * 4}))
    r = verify(f)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "equality to 320 digits" in r.stderr and "cannot be proven" in r.stderr
    assert "[0, 0, 1, 2, 0, 0, 0, 0]" in r.stderr and "NOT CERTIFIED" in r.stdout and "VIOLATED" not in r.stdout
    assert "(1 - 1e-12) certifies" in r.stderr
    shrunk = tmp_path / "shrunk.json"
    shrunk.write_text(json.dumps(written(3, 2, [1.0 - 1e-12] * 4, epsilon=0.3, teacher_delta=5e-324, delta=1e-323)))
    ok = verify(shrunk)
    assert ok.returncode == 0 and "CERTIFIED" in ok.stdout


def test_a_plain_violation_gets_no_tightness_note(tmp_path):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"K": 5, "m": 2, **PURE, "gamma": [1.0] * 6}))  # majority: far over the bound
    r = verify(f)
    assert r.returncode == 1 and "violation:" in r.stderr and "equality" not in r.stderr
