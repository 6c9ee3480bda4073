"""Issue 33, part 4: ``darrm-opt verify`` checks the file, not only the maths. An audit tampered with table files
darrm-opt wrote and found many still verified with exit 0 (any or no ``schema_version``, the certificate
removed or ``certified: false``, ``certificate.epsilon0`` lowered, ``epsilon_spent`` lowered, ``id``,
``expected_error`` or ``mechanism`` changed, ``privacy_profile`` removed).

For every registered kind (and the DaRRM ``plan`` document beside ``solve``'s), one real file is written by the
product's CLI with small parameters (a module-scoped fixture, the commands run as subprocesses two at a time),
then tampered in each of those ways and with an unknown field added. The untampered file verifies (exit 0, a
subprocess); every tampered one is refused with one line naming the field: exit 2 for a missing or unknown
field or an unknown schema version, exit 1 for a value that differs from the recomputed one. Each tamper runs
as a subprocess on one file (the quickest to verify that has its field), and the whole matrix (every file,
every tamper) through the same command in-process (``CliRunner`` on the CLI app): a fresh interpreter for each
of its ~90 cases would take minutes on two cores, each paying ~2 s of imports and its kind's recomputation.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.mechanisms import MECHANISMS

# slow tier: ten CLI runs write the files, 21 verify subprocesses, the matrix in-process
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

PATE_JOB = ("--K", "5", "--teachers", "disjoint-nonprivate", "--queries", "10", "--budget", "2,1e-5", "--mechanism")
CLASS_JOB = ("--K", "5", "--classes", "3", "--queries", "10", "--budget", "2,1e-5", "--mechanism")

#: one file per registered kind (and the shared-data plan document), with the command that writes it
WRITERS: dict[str, tuple[str, ...]] = {
    "darrm": ("solve", "--K", "5", "--m", "2"),
    "darrm-plan": ("plan", "--K", "5", "--epsilon", "0.1", "--teacher-delta", "1e-5", "--queries", "10",
                   "--budget", "3,1e-3"),
    "darrm-pate": ("solve", "--K", "5", "--teachers", "disjoint-nonprivate", "--target-epsilon", "1"),
    "darrm-pate-shaped": ("plan", *PATE_JOB, "darrm-pate-shaped"),
    "darrm-multiclass": ("solve", "--K", "5", "--classes", "3", "--target-epsilon", "1", "--delta", "1e-6"),
    "darrm-multiclass-shaped": ("plan", *CLASS_JOB, "darrm-multiclass-shaped"),
    "darrm-multiclass-top2": ("plan", *CLASS_JOB, "darrm-multiclass-top2"),
    "gnmax": ("plan", *CLASS_JOB, "gnmax"),
    "confident-gnmax": ("plan", *CLASS_JOB, "confident-gnmax"),
    "stability": ("plan", *CLASS_JOB, "stability"),
    "gaussian-mean": ("gaussian", "--queries", "80", "--epsilon", "8", "--delta", "1e-3", "--K", "8", "--dim", "16"),
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DARRM_")}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["COLUMNS"] = "400"
    return env


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "darrm_opt", *args], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("written")

    def write(name: str) -> subprocess.CompletedProcess:
        args = WRITERS[name]
        quiet = () if args[0] == "gaussian" else ("-q",)
        return _run(*args, *quiet, "--format", "json", "--out", f"{name}.json", cwd=d)

    with ThreadPoolExecutor(2) as pool:
        runs = dict(zip(WRITERS, pool.map(write, WRITERS)))
    for name, r in runs.items():
        assert r.returncode == 0, (name, r.stderr[-2000:])
    return {name: d / f"{name}.json" for name in WRITERS}


def test_every_registered_kind_is_written():
    assert set(MECHANISMS) <= set(WRITERS), set(MECHANISMS) - set(WRITERS)


# --- the tampers: (name, the field the refusal names, exit code), each applied where its field exists -----
def _nested(doc: dict, path: str) -> tuple[dict, str] | None:
    *parents, last = path.split(".")
    for p in parents:
        doc = doc.get(p)
        if not isinstance(doc, dict):
            return None
    return (doc, last) if last in doc else None


def _spent_field(doc: dict) -> str | None:
    """Where the file states the ε its answers spend: the offer's epsilon_spent, the DaRRM plan's
    spent_epsilon or the Gaussian calibration's epsilon_spent."""
    return next((p for p in ("epsilon_spent", "plan.spent_epsilon", "calibration.epsilon_spent")
                 if _nested(doc, p) is not None), None)


def _error_field(doc: dict) -> str | None:
    if "expected_error" not in doc:
        return None
    return "expected_error.opt" if isinstance(doc["expected_error"], dict) else "expected_error"


def tampered(doc: dict, tamper: str) -> tuple[dict, str, int] | None:
    """``doc`` tampered as ``tamper`` says, the field the refusal must name and the exit code; None where the
    file has no such field."""
    d = copy.deepcopy(doc)
    if tamper == "schema_version removed":
        d.pop("schema_version")
        return d, "schema_version", 2
    if tamper == "schema_version unknown":
        d["schema_version"] = 2
        return d, "schema_version", 2
    if tamper == "certificate removed":
        d.pop("certificate")
        return d, "certificate", 2
    if tamper == "certified false":
        d["certificate"]["certified"] = False
        return d, "certificate.certified", 1
    if tamper == "epsilon0 lowered 10 %":
        if "epsilon0" not in d["certificate"]:
            return None
        d["certificate"]["epsilon0"] *= 0.9
        return d, "certificate.epsilon0", 1
    if tamper == "epsilon_spent lowered":
        path = _spent_field(d)
        if path is None:
            return None
        parent, key = _nested(d, path)  # type: ignore[misc]
        parent[key] = 0.001
        return d, path, 1
    if tamper == "id changed":
        if "id" not in d:
            return None
        d["id"] = "0" * 32
        return d, "id", 1
    if tamper == "expected_error changed":
        path = _error_field(d)
        if path is None:
            return None
        parent, key = _nested(d, path)  # type: ignore[misc]
        parent[key] = parent[key] / 2 + 0.01
        return d, path, 1
    if tamper == "mechanism changed":
        if "mechanism" not in d:
            return None
        d["mechanism"] = "gnmax" if d["mechanism"] != "gnmax" else "darrm"
        return d, "mechanism", 1
    if tamper == "privacy_profile removed":
        d.pop("privacy_profile")
        return d, "privacy_profile", 2
    if tamper == "unknown field added":
        d["audit_note"] = "checked"
        return d, "audit_note", 2
    raise AssertionError(tamper)


TAMPERS = ("schema_version removed", "schema_version unknown", "certificate removed", "certified false",
           "epsilon0 lowered 10 %", "epsilon_spent lowered", "id changed", "expected_error changed",
           "mechanism changed", "privacy_profile removed", "unknown field added")


def _one_line(output: str, field: str) -> str:
    assert "Traceback" not in output, output
    lines = [ln for ln in output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), output
    assert field in lines[0], (field, lines[0])
    return lines[0]


#: the files by the time their verification takes, the quickest first (a tamper's subprocess runs on the first
#: that has its field)
QUICKEST_FIRST = ("darrm-pate", "darrm", "darrm-multiclass", "darrm-pate-shaped", "darrm-plan",
                  "darrm-multiclass-top2", "darrm-multiclass-shaped", "confident-gnmax", "gnmax", "gaussian-mean",
                  "stability")


@pytest.fixture(scope="module")
def processes(files, tmp_path_factory) -> dict[str, tuple[str, str, int, subprocess.CompletedProcess]]:
    """``darrm-opt verify`` as a subprocess, two at a time: each untampered file (key: its name), and each tamper
    on the quickest file that has its field (key: the tamper): (file, field named, exit code, the run)."""
    assert set(QUICKEST_FIRST) == set(WRITERS)
    d = tmp_path_factory.mktemp("tampered")
    cases: dict[str, tuple[str, str, int, Path]] = {name: (name, "", 0, files[name]) for name in WRITERS}
    for tamper in TAMPERS:
        name, (bad, field, code) = next((n, c) for n in QUICKEST_FIRST
                                        if (c := tampered(json.loads(files[n].read_text()), tamper)) is not None)
        path = d / f"{name}-{TAMPERS.index(tamper)}.json"
        path.write_text(json.dumps(bad, indent=2))
        cases[tamper] = (name, field, code, path)

    def run(key: str) -> subprocess.CompletedProcess:
        path = cases[key][3]
        return _run("verify", str(path), cwd=path.parent)

    with ThreadPoolExecutor(2) as pool:
        done = dict(zip(cases, pool.map(run, cases)))
    return {key: (*cases[key][:3], done[key]) for key in cases}


@pytest.mark.parametrize("name", list(WRITERS))
def test_the_untampered_file_verifies(processes, name):
    r = processes[name][3]
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "CERTIFIED" in r.stdout and "NOT CERTIFIED" not in r.stdout


@pytest.mark.parametrize("tamper", TAMPERS)
def test_each_tamper_is_refused_by_the_command(processes, tamper):
    """Each tamper in a real process (on the quickest file to verify that has the tamper's field)."""
    name, field, code, r = processes[tamper]
    assert r.returncode == code, (name, r.stdout, r.stderr)
    assert r.stdout == ""
    _one_line(r.stderr, field)


@pytest.mark.parametrize("tamper", TAMPERS)
@pytest.mark.parametrize("name", list(WRITERS))
def test_every_tamper_is_refused(files, name, tamper, tmp_path):
    case = tampered(json.loads(files[name].read_text()), tamper)
    if case is None:
        pytest.skip(f"a {name} file has no field for {tamper!r}")
    bad, field, code = case
    path = tmp_path / "t.json"
    path.write_text(json.dumps(bad, indent=2))
    r = CliRunner().invoke(app, ["verify", str(path), "-q"])
    assert r.exit_code == code, (r.output, r.exception)
    _one_line(r.output, field)


def test_the_library_verify_refuses_too(files, tmp_path):
    """``darrm_opt.verify(path)`` answers as the command does: the certificate of a file darrm-opt wrote,
    the same refusal (and exit code) for a tampered one."""
    from darrm_opt.errors import TableFileError, TableFileMismatch
    from darrm_opt.release.verify import verify

    assert verify(files["darrm-pate"]).certified
    bad, field, _ = tampered(json.loads(files["darrm-pate"].read_text()), "certified false")  # type: ignore[misc]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(TableFileMismatch, match=field) as exc:
        verify(path)
    assert exc.value.field == field and exc.value.exit_code == 1
    bad, field, _ = tampered(json.loads(files["gnmax"].read_text()), "unknown field added")  # type: ignore[misc]
    path.write_text(json.dumps(bad))
    with pytest.raises(TableFileError, match=field):
        verify(path)
