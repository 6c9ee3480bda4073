"""The teacher settings on the command line and in the library (issue 14): the one rule on the options a
setting takes, PATE-setting table files through ``verify`` (and a tampered one), the PATE privacy profile
against brute force, and ``plan --teachers``."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.errors import InvalidParameter, TableFileError
from darrm_opt.mechanisms import plan_job
from darrm_opt.model.neighbours import PateParams, check_setting_options, cli_spelling
from darrm_opt.optimize.pate_setting import solve_pate
from darrm_opt.planning.job import Job
from darrm_opt.planning.pate_plan import EPS_RTOL
from darrm_opt.planning.plan import majority_free
from darrm_opt.privacy import accounting
from darrm_opt.privacy.pair_profile import pate_profile
from darrm_opt.release.table_file import load_any_table, load_table
from darrm_opt.release.verify import verify

runner = CliRunner()
PATE_ARGS = ["--K", "11", "--teachers", "disjoint-nonprivate", "--target-epsilon", "0.2676", "--delta", "3e-4"]


def run(*args):
    return runner.invoke(app, list(args))


# ---------------------------------------------------------------------------------------------------------
# the one rule
# ---------------------------------------------------------------------------------------------------------
def test_check_setting_options_rule():
    assert check_setting_options("disjoint-nonprivate", ["target_epsilon"]) == "disjoint-nonprivate"
    assert check_setting_options("shared", ["m", "epsilon"], m_needed=True) == "shared"
    for name in ("m", "epsilon", "teacher_delta"):
        with pytest.raises(InvalidParameter) as exc:
            check_setting_options("disjoint-nonprivate", [name, "target_epsilon"], cli_spelling)
        assert exc.value.parameter == cli_spelling(name) and "disjoint-nonprivate" in exc.value.rule
    with pytest.raises(InvalidParameter, match="target_epsilon: is required"):
        check_setting_options("disjoint-nonprivate", [])
    check_setting_options("disjoint-nonprivate", [], target_needed=False)  # plan chooses the per-answer ε
    for teachers in ("shared", "disjoint-private"):
        with pytest.raises(InvalidParameter, match="target_epsilon: applies only"):
            check_setting_options(teachers, ["m", "target_epsilon"])
        with pytest.raises(InvalidParameter, match="invalid m: is required"):
            check_setting_options(teachers, [], m_needed=True)
    with pytest.raises(InvalidParameter, match="teachers"):
        check_setting_options("pate", [])


@pytest.mark.parametrize(("args", "name"), [
    (["--epsilon", "0.1"], "epsilon"),
    (["--teacher-delta", "1e-5"], "teacher-delta"),
    (["--m", "3"], "m"),
])
def test_solve_refuses_teacher_privacy_in_the_pate_setting(args, name):
    r = run("solve", *PATE_ARGS, *args)
    assert r.exit_code == 2 and f"invalid {name}: does not apply with teachers disjoint-nonprivate" in r.output
    assert "Traceback" not in r.output


def test_multiclass_solve_refuses_teacher_privacy_too():
    cases = ((["--m", "2"], "m"), (["--epsilon", "0.1"], "epsilon"), (["--teacher-delta", "0"], "teacher-delta"))
    for args, name in cases:
        r = run("solve", "--K", "5", "--classes", "3", "--target-epsilon", "1", *args)
        assert r.exit_code == 2 and f"invalid {name}: does not apply with teachers disjoint-nonprivate" in r.output


def test_target_epsilon_is_refused_outside_the_pate_setting():
    for teachers in ("shared", "disjoint-private"):
        r = run("solve", "--K", "5", "--m", "2", "--teachers", teachers, "--target-epsilon", "0.2")
        assert r.exit_code == 2 and "invalid target-epsilon: applies only with teachers disjoint-nonprivate" in r.output
    r = run("plan", "--K", "11", "--teachers", "disjoint-nonprivate", "--teacher-delta", "1e-5", "--queries", "10",
            "--budget", "2,1e-3")
    assert r.exit_code == 2 and "invalid teacher-delta: does not apply" in r.output
    r = run("plan", "--K", "11", "--queries", "10", "--budget", "2,1e-3")
    assert r.exit_code == 2 and "invalid epsilon: is required" in r.output


# ---------------------------------------------------------------------------------------------------------
# PATE table files: verify, tampering, loading
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pate_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("pate") / "pate.json"
    r = run("solve", *PATE_ARGS, "--format", "json", "--out", str(path))
    assert r.exit_code == 0, r.output
    return path


def test_verify_pate_table_round_trip(pate_file):
    doc = json.loads(pate_file.read_text())
    assert round(doc["expected_error"], 4) == 0.2209 and doc["teachers"] == "disjoint-nonprivate"
    assert "m" not in doc and "teacher_delta" not in doc
    r = run("verify", str(pate_file), "--format", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["certificate"]["certified"] and out["certificate"]["pairs_checked"] == 44
    assert out["privacy_profile_valid"] is True
    assert verify(pate_file).certified and verify(pate_file).pairs_checked == 44  # the library's verify too
    params, gamma = load_any_table(pate_file)
    assert params == PateParams(11, 0.2676, 3e-4) and list(gamma) == doc["gamma"]
    with pytest.raises(TableFileError, match="disjoint-nonprivate"):
        load_table(pate_file)  # the commands that need m and the teachers' (ε, Δ) say why they refuse it
    r = run("budget", "--table", str(pate_file), "--queries", "10")  # budget takes every kind of table
    assert r.exit_code == 0 and "PATE-setting table K = 11" in r.output and "ε = 0.2676" in r.output


def test_verify_rejects_a_tampered_pate_table(pate_file, tmp_path):
    doc = json.loads(pate_file.read_text())
    g = np.array(doc["gamma"])
    bad = tmp_path / "bad.json"
    tampered_gamma = list(np.minimum(1.0, g * 1.001))  # every row scales with γ: the worst goes over
    bad.write_text(json.dumps({**doc, "gamma": tampered_gamma, "privacy_profile": None}))
    r = run("verify", str(bad))
    assert r.exit_code == 1 and "exceeds the bound" in r.output and "NOT CERTIFIED" in r.output
    bad.write_text(json.dumps({**doc, "gamma": tampered_gamma}))  # its stored profile is now optimistic too
    r = run("verify", str(bad))
    assert r.exit_code == 1 and "NOT CERTIFIED" in r.output
    # an optimistic stored profile: the infinite-loss mass and every vertex's P-mass lowered
    prof = doc["privacy_profile"]
    vertices = [[b, max(0.0, a - 1e-3)] if b < 1 else [b, a] for b, a in prof["vertices"]]
    optimistic = {**prof, "vertices": vertices, "infinite_mass": vertices[0][1]}
    optimistic.pop("atoms")
    tampered = tmp_path / "optimistic.json"
    tampered.write_text(json.dumps({**doc, "privacy_profile": optimistic}))
    r = run("verify", str(tampered))
    assert r.exit_code == 1 and "optimistic" in r.output
    both = tmp_path / "with_m.json"
    both.write_text(json.dumps({**doc, "m": 3}))
    r = run("verify", str(both))
    assert r.exit_code != 0 and "states m" in r.output and "Traceback" not in r.output


# ---------------------------------------------------------------------------------------------------------
# the PATE privacy profile
# ---------------------------------------------------------------------------------------------------------
def _brute_profile(gamma, epsilon: float):
    """max over ordered neighbours (l, l ± 1) and events S of Pr_l[S] − e^ε Pr_{l′}[S] (two outputs), in
    50-digit arithmetic from the exact binary γ (a float brute force is itself off by an ulp)."""
    import mpmath

    K = len(gamma) - 1
    with mpmath.workdps(50):
        p = [mpmath.mpf(0.5) + mpmath.mpf(0.5) * (1 if l > K / 2 else -1) * mpmath.mpf(float(gamma[l]))
             for l in range(K + 1)]
        x = mpmath.exp(mpmath.mpf(epsilon))
        out = mpmath.mpf(0)
        for l in range(K + 1):
            for lp in (l - 1, l + 1):
                if 0 <= lp <= K:
                    out = max(out, p[l] - x * p[lp], (1 - p[l]) - x * (1 - p[lp]))
        return out


def _bounds(prof, gamma, e: float) -> None:
    """The profile is never below the exact δ(ε′) and at most 1e-12 above it."""
    true = _brute_profile(gamma, e)
    assert true <= prof.delta(e) <= true + 1e-12, (e, float(true), prof.delta(e))


@pytest.mark.parametrize(("K", "eps", "delta"), [(3, 0.5, 0.0), (11, 0.2676, 3e-4), (21, 1.0, 1e-3)])
def test_pate_profile_is_the_brute_force_profile(K, eps, delta):
    params = PateParams(K, eps, delta)
    gamma = solve_pate(params).gamma
    prof = pate_profile(params, gamma)
    assert prof.delta(eps) <= delta + 1e-15
    for e in np.linspace(0.0, 2.5 * eps, 23):
        _bounds(prof, gamma, float(e))
    rng = np.random.default_rng(K)
    g = rng.uniform(0, 1, K + 1)  # not certified for anything: the profile still bounds it
    prof = pate_profile(params, g)
    for e in (0.0, 0.1, 0.7, 3.0):
        _bounds(prof, g, e)


# ---------------------------------------------------------------------------------------------------------
# plan --teachers
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pate_plan():
    best, _, _ = plan_job(Job(K=11, queries=10, budget_epsilon=2.0, budget_delta=1e-3), kinds=["darrm-pate"])
    return best


def test_pate_plan_is_the_largest_fitting_target(pate_plan):
    result = pate_plan
    p = result.table.params
    assert result.mechanism == "darrm-pate" and result.solution.certificate.certified
    assert result.epsilon_spent == result.plan["spent_epsilon"] <= 2.0
    acc = accounting.account([(p.epsilon, p.delta, 10)], 1e-3, profiles=[(result.table.profile, 10)])
    assert (acc.spend.epsilon, acc.spend.method) == (result.epsilon_spent, result.plan["accounting"])
    assert result.plan["accounting"] == "exact"  # the table's own profile composes tighter than Q arbitrary answers
    assert acc.bounds["exact"].epsilon < acc.bounds["optimal"].epsilon
    # one step further in ε (the bisection's tolerance) at the same δ no longer fits
    step = p.epsilon * (1 + 2 * EPS_RTOL)
    bigger = solve_pate(PateParams(11, step, p.delta))
    over = accounting.account([(step, p.delta, 10)], 1e-3, profiles=[(pate_profile(bigger.params, bigger.gamma), 10)])
    assert over.spend.epsilon > 2.0 and bigger.expected_error < result.expected_error
    # the plan is no worse than the naive split ε_B / Q, δ_B / Q
    naive = solve_pate(PateParams(11, 0.2, 1e-4))
    assert result.expected_error < naive.expected_error


def test_plan_cli_pate_json_is_a_verifiable_table(tmp_path, pate_plan):
    out = tmp_path / "plan.json"
    r = run("plan", "--K", "11", "--teachers", "disjoint-nonprivate", "--queries", "10", "--budget", "2,1e-3",
            "--format", "json", "--out", str(out), "-q")
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["plan"]["teachers"] == "disjoint-nonprivate" and doc["plan"]["spent_epsilon"] <= 2.0
    assert doc["gamma"] == list(pate_plan.solution.gamma) and doc["epsilon"] == pate_plan.table.params.epsilon
    assert run("verify", str(out)).exit_code == 0


def test_plan_cli_disjoint_private_majority_free():
    r = run("plan", "--K", "11", "--teachers", "disjoint-private", "--epsilon", "0.5", "--teacher-delta", "1e-5",
            "--queries", "1000", "--budget", "1,1e-4", "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["plan"]["majority_free"] and doc["gamma"] == [1.0] * 12 and doc["expected_error"] == 0.0
    assert (doc["plan"]["spent_epsilon"], doc["plan"]["spent_delta"]) == (0.5, 1e-5)
    job = Job(K=11, queries=10, budget_epsilon=1.0, budget_delta=1e-4, teachers="disjoint-private", epsilon=1.5,
              teacher_delta=1e-5)
    assert majority_free(job) is None  # the cap is above the budget
    free, _, _ = plan_job(Job(K=11, queries=1000, budget_epsilon=1.0, budget_delta=1e-4, teachers="disjoint-private",
                              epsilon=0.5, teacher_delta=1e-5))
    assert free.majority_free and free.table is None and (free.epsilon_spent, free.expected_error) == (0.5, 0.0)


def test_aggregate_pays_a_pate_table_into_a_local_ledger(pate_file, tmp_path):
    pytest.importorskip("sqlalchemy")
    votes = tmp_path / "votes.csv"
    votes.write_text("1,1,1,1,1,1,1,1,0,0,0\n0,0,0,0,0,0,0,0,0,0,0\n1,1,1,1,1,1,1,1,1,1,1\n")
    r = run("aggregate", "--table", str(pate_file), "--votes", str(votes), "--ledger", "job", "--ledger-db",
            f"sqlite:///{tmp_path / 'ledger.db'}", "--epsilon-budget", "2", "--delta-budget", "1e-3", "--format",
            "json", "--out", str(tmp_path / "answers.json"))
    assert r.exit_code == 0, r.output
    doc = json.loads((tmp_path / "answers.json").read_text())
    params, gamma = load_any_table(pate_file)
    from darrm_opt.privacy.table import table_id

    assert doc["table_id"] == table_id("darrm-pate", params, "disjoint-nonprivate", gamma) and len(doc["answers"]) == 3
    # far from the budget the ledger states the exact composition on the coarse grid
    expected = accounting.account([(0.2676, 3e-4, 3)], 1e-3, profiles=[(pate_profile(params, gamma), 3)],
                                  coarse=True).spend
    assert (doc["ledger"]["epsilon_spent"], doc["ledger"]["composition"]) == (expected.epsilon, expected.method)


def test_disjoint_private_teachers_above_the_budget_get_the_pate_settings_offers(tmp_path):
    """Teachers on disjoint shards that are also DP-trained, their own ε (3) above the budget (1): composing as
    for shared teachers needs ε ≥ 30 (the darrm kind refuses), but each record is still in one teacher's shard,
    so the PATE setting's tables serve the job: the same offer, bit for bit, as for disjoint-nonprivate
    teachers, its table stating that setting; the file verifies and a ledger pays it (CLI as a subprocess)."""
    from cli_helpers import run_cli

    job = dict(K=15, queries=10, budget_epsilon=1.0, budget_delta=1e-5)
    best, offers, refused = plan_job(Job(**job, teachers="disjoint-private", epsilon=3.0, teacher_delta=1e-6),
                                     kinds=["darrm", "darrm-pate"])
    pate, _, _ = plan_job(Job(**job, teachers="disjoint-nonprivate"), kinds=["darrm-pate"])
    assert best.mechanism == "darrm-pate" and best.table.teachers == "disjoint-nonprivate"
    assert (best.expected_error, best.epsilon_spent, best.table.id) == (pate.expected_error, pate.epsilon_spent,
                                                                       pate.table.id)
    assert best.epsilon_spent <= 1.0 and "smallest epsilon reachable" in refused["darrm"]
    assert [o.mechanism for o in offers] == ["darrm-pate"]
    args = ("plan", "--K", "15", "--queries", "10", "--budget", "1,1e-5", "--teachers", "disjoint-private",
            "--epsilon", "3", "--teacher-delta", "1e-6", "--mechanism", "darrm-pate")
    r = run_cli(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "planned as disjoint-nonprivate" in r.stdout and "chosen: darrm-pate" in r.stdout
    r = run_cli(*args, "-q", "--format", "json", "--out", "plan.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "plan.json").read_text())
    assert doc["teachers"] == "disjoint-nonprivate" and doc["plan"]["teachers"] == "disjoint-private"
    assert doc["id"] == pate.table.id
    assert run_cli("verify", "plan.json", cwd=tmp_path).returncode == 0
    (tmp_path / "votes.csv").write_text("1," * 14 + "1\n" + "0," * 14 + "1\n")
    r = run_cli("aggregate", "--table", "plan.json", "--votes", "votes.csv", "--ledger", "job", "--ledger-db",
                f"sqlite:///{tmp_path / 'l.db'}", "--epsilon-budget", "1", "--delta-budget", "1e-5", "--format",
                "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["answers"]) == 2
