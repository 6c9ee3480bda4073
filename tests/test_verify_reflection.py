"""``verify`` accepts the table files of releases before the structured sweep's reflection (their certificate
computed from every prefix sum's tables, its maximum's last bits differing) as well as this release's, and still
refuses a changed one; run as users run it (the CLI, a subprocess)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli
from typer.testing import CliRunner

from darrm_opt.certify.structured import full_tables
from darrm_opt.cli import app

pytestmark = pytest.mark.slow  # solves and verifies at K = 31 (structured sweep)

ARGS = ["solve", "--K", "31", "--m", "3", "--format", "json"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("reflection")
    with full_tables():  # the sweep of earlier releases
        old = CliRunner().invoke(app, ARGS)
    assert old.exit_code == 0, old.output
    new = run_cli(*ARGS, cwd=d, module=True)
    assert new.returncode == 0, new.stderr
    (d / "old.json").write_text(old.stdout)
    (d / "new.json").write_text(new.stdout)
    return d, json.loads(old.stdout), json.loads(new.stdout)


def test_the_two_sweeps_state_the_same_table_with_other_last_bits(files):
    _, old, new = files
    assert old["gamma"] == new["gamma"] and old["certificate"]["certified"] and new["certificate"]["certified"]
    a, b = old["certificate"]["max_privacy_cost"], new["certificate"]["max_privacy_cost"]
    assert a != b  # the files differ where verify compares them (else the fallback would go untested)
    assert abs(a - b) <= old["certificate"]["error_bound"]


@pytest.mark.parametrize("name", ["old.json", "new.json"])
def test_verify_accepts_both(files, name):
    d, _, _ = files
    r = run_cli("verify", name, cwd=d, module=True)
    assert r.returncode == 0, r.stderr


def test_verify_refuses_an_old_file_changed_in_its_certificate(files):
    d, old, _ = files
    doc = json.loads(json.dumps(old))
    doc["certificate"]["max_privacy_cost"] = old["certificate"]["max_privacy_cost"] * (1 - 1e-15)
    (d / "changed.json").write_text(json.dumps(doc))
    r = run_cli("verify", "changed.json", cwd=d, module=True)
    assert r.returncode == 1, r.stderr
    assert "certificate.max_privacy_cost" in r.stderr
