"""`solve` reuses the optimiser's certifying sweep: the outputs equal those computed from scratch."""

import json

import numpy as np
from typer.testing import CliRunner

from darrm_opt.certify.certificate import certify
from darrm_opt.cli import app
from darrm_opt.model.baselines import gamma_sub
from darrm_opt.model.params import Params
from darrm_opt.optimize.optimizer import solve
from darrm_opt.privacy.profile import privacy_profile
from darrm_opt.release.table_file import certified_decimals, round_down

runner = CliRunner()


def test_profile_from_the_solution_sweep_equals_a_fresh_one():
    params = Params(11, 3)
    sol = solve(params)
    assert sol.sweep is not None and sol.sweep.max_cost == sol.certificate.max_privacy_cost
    fresh = privacy_profile(params, sol.gamma)
    reused = privacy_profile(params, sol.gamma, certified=(sol.certificate, sol.sweep))
    assert reused == fresh and reused.sweeps == fresh.sweeps - 1
    assert reused.support == fresh.support and reused.vertices == fresh.vertices


def test_solve_json_profile_equals_a_fresh_profile(tmp_path):
    out = tmp_path / "t.json"
    r = runner.invoke(app, ["solve", "--K", "11", "--m", "3", "--format", "json", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    fresh = privacy_profile(Params(11, 3), doc["gamma"]).to_dict()
    assert doc["privacy_profile"]["vertices"] == fresh["vertices"]
    assert doc["privacy_profile"]["support"] == fresh["support"]
    sub = doc["baseline_certificates"]["sub"]
    assert sub["certified"] and sub["corners_swept"] == [0, 2, 3, 4, 5] and sub["multisets_checked"] == 1365


def test_solve_table_prints_what_full_sweeps_certify():
    """The table view's γ_opt and γ_Sub columns and its certificate line are those of sweeping each printed
    column over every corner multiset (the path before the sweeps were shared)."""
    params = Params(21, 3)
    r = runner.invoke(app, ["solve", "--K", "21", "--m", "3", "-q"])
    assert r.exit_code == 0, r.output
    rows = [line.split("│") for line in r.output.splitlines() if line.strip()[:2].strip().isdigit() and "│" in line]
    opt = np.array([float(c[1]) for c in rows])
    sub = np.array([float(c[2]) for c in rows])
    gamma = np.array(solve(params).gamma)
    text, cert = certified_decimals(params, gamma, 6, reduce=False)
    assert [f"{x:.6f}" for x in opt] == text
    np.testing.assert_array_equal(sub, round_down(gamma_sub(21, 3), 6))
    assert certify(params, sub).certified and cert.certified
    line = next(x for x in r.output.splitlines() if x.startswith("certificate:"))
    assert f"max privacy cost {cert.max_privacy_cost:.12g} <=" in line
    assert f"(worst multiset {cert.worst_multiset};" in line and f"over {cert.multisets_checked:,} corner" in line


def _reporter_output(monkeypatch, terminal: bool) -> str:
    """Drive a ProgressReporter through solve's phases on a real rich console writing to a buffer."""
    import io

    from rich.console import Console

    import darrm_opt.cli.common as common

    buf = io.StringIO()
    monkeypatch.setattr(common, "err_console", Console(file=buf, force_terminal=terminal, width=200))
    rep = common.ProgressReporter(quiet=False)
    rep.phase("finding γ_opt", sweeps="sweeping")
    rep("lp", iteration=3, active=120, objective=1.0, violation=0.0)
    rep("sweep-progress", done=10**6, total=2 * 10**6, worst=0.25)
    rep("sweep-progress", done=2 * 10**6, total=2 * 10**6, worst=0.35)
    rep.phase("computing the privacy profile")
    rep("profile", sweeps=4)
    rep.close()
    return buf.getvalue()


def test_progress_in_logs_is_plain_lines_for_every_phase(monkeypatch):
    lines = _reporter_output(monkeypatch, terminal=False).splitlines()
    assert lines == ["finding γ_opt ...", "sweeping: 2,000,000 multisets swept, worst cost 0.35",
                     "computing the privacy profile ...", "computing the privacy profile: 4 sweeps"]


def test_progress_on_a_terminal_shows_each_phase_and_its_sweeps(monkeypatch):
    out = _reporter_output(monkeypatch, terminal=True)
    for text in ("finding γ_opt", "LP 3, 120 rows", "sweeping", "1,000,000/2,000,000 multisets, worst 0.25",
                 "computing the privacy profile", "4 sweeps"):
        assert text in out
