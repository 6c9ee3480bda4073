"""Multi-class DaRRM, GNMax and Confident-GNMax over Q answers at a total (ε, δ): each calibration fits the
budget under its accounting and sits at its boundary; Q = 1 is the per-answer comparison; the CLI."""

import json
import math

import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.experiments.multiclass_budget import (
    _darrm_at,
    _shaped_at,
    compare_over_answers,
    gnmax_sigma_over_answers,
    rdp_epsilon,
    rdp_sigma_over_answers,
    shape_grid,
    shaped_table,
)
from darrm_opt.experiments.multiclass_compare import calibrate_gaussian_sigma, gaussian_delta, gnmax_accuracy
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior
from darrm_opt.optimize.multiclass import solve_multiclass
from darrm_opt.privacy.pair_profile import family_profile, multiclass_family

K, C, Q, EPS, DELTA = 12, 3, 4, 1.0, 1e-5


@pytest.fixture(scope="module")
def cmp():
    return compare_over_answers(K, C, Q, EPS, DELTA)


@pytest.mark.parametrize("q,eps,delta", [(4, 1.0, 1e-5), (50, 2.0, 1e-6)])
def test_gnmax_sigma_is_the_exact_gaussian_composition(q, eps, delta):
    """dp_accounting's Gaussian PLD (sensitivity √2) composed q times meets (ε, δ) at σ and not at 0.99σ;
    the RDP calibration needs more noise, and meets ε by RDP."""
    sigma = gnmax_sigma_over_answers(q, eps, delta)

    def pld_eps(s):
        one = pld_lib.from_gaussian_mechanism(s, sensitivity=math.sqrt(2.0), value_discretization_interval=1e-4)
        return one.self_compose(q).get_epsilon_for_delta(delta)

    assert eps - 5e-3 <= pld_eps(sigma) <= eps + q * 1e-4
    assert pld_eps(0.99 * sigma) > eps
    s_rdp = rdp_sigma_over_answers(q, eps, delta)
    assert s_rdp > sigma and rdp_epsilon(s_rdp, q, delta) <= eps < rdp_epsilon(0.999 * s_rdp, q, delta)


@pytest.mark.slow  # the cmp fixture: calibrations by bisection
def test_darrm_calibration_fits_and_is_at_the_boundary(cmp):
    d = cmp.darrm
    prior = MulticlassPrior()
    total, acc, _ = _darrm_at(K, C, prior, d["epsilon0"], d["delta0"], Q, DELTA, "highs")
    assert total == d["total_epsilon"] <= EPS and acc == d["accuracy"]
    assert _darrm_at(K, C, prior, 1.02 * d["epsilon0"], d["delta0"], Q, DELTA, "highs")[0] > EPS
    # at Q = 4 the optimal tables compose like randomized response: about ε/Q each (less the PLD's pessimism)
    assert 0.99 * EPS / Q < d["epsilon0"] < EPS


def test_shaped_table_profile_follows_the_gaussian():
    """The shaped LP's table: its exact profile is below the Gaussian's at every grid slope (up to the
    solver's tolerance) and touches it at some."""
    sigma = 6.0
    gamma = shaped_table(K, C, MulticlassPrior(), sigma)
    prof = family_profile(multiclass_family(K, C, gamma))
    gaps = [gaussian_delta(e, sigma) - prof.delta(e) for e, _ in shape_grid(sigma)]
    assert min(gaps) > -1e-8 and min(abs(g) for g in gaps) < 1e-8
    assert prof.delta(1.0) <= gaussian_delta(1.0, sigma) + 1e-3  # between grid slopes: close, not enforced


@pytest.mark.slow  # the cmp fixture: calibrations by bisection
def test_shaped_calibration_fits_and_is_at_the_boundary(cmp):
    sh = cmp.darrm_shaped
    prior = MulticlassPrior()
    total, acc, err = _shaped_at(K, C, prior, sh["shape_sigma"], Q, DELTA, "highs")
    assert total == sh["total_epsilon"] <= EPS and acc == sh["accuracy"] and err == sh["error"]
    assert _shaped_at(K, C, prior, 0.97 * sh["shape_sigma"], Q, DELTA, "highs")[0] > EPS


def test_single_answer_is_the_per_answer_comparison():
    one = compare_over_answers(K, C, 1, 0.5, DELTA, confident=False, shaped=False)
    sol = solve_multiclass(MulticlassParams(K, C, 0.5, DELTA))
    assert one.darrm["accuracy"] == sol.expected_accuracy and one.darrm["total_epsilon"] == 0.5
    assert one.gnmax["sigma"] == pytest.approx(calibrate_gaussian_sigma(0.5, DELTA), rel=1e-11)
    assert one.darrm["accuracy"] > one.gnmax["accuracy"] and one.confident_gnmax is None


@pytest.mark.slow  # the cmp fixture and one more comparison
def test_more_answers_cost_accuracy(cmp):
    one = compare_over_answers(K, C, 1, EPS, DELTA)
    for name in ("darrm", "darrm_shaped", "gnmax", "confident_gnmax"):
        assert getattr(cmp, name)["accuracy"] < getattr(one, name)["accuracy"]
    assert cmp.gnmax["sigma"] == pytest.approx(2.0 * one.gnmax["sigma"], rel=1e-11)  # √Q
    want = gnmax_accuracy(K, C, cmp.gnmax["sigma"], MulticlassPrior())
    assert cmp.gnmax["accuracy"] == pytest.approx(want, abs=1e-12)


@pytest.mark.slow  # two compare runs, each calibrating DaRRM and GNMax
def test_cli_json_and_table(tmp_path):
    out = tmp_path / "cmp.json"
    r = CliRunner().invoke(app, ["compare", "--K", "8", "--classes", "3", "--queries", "3", "--total-epsilon", "1",
                                 "--delta", "1e-5", "--no-confident", "--no-shaped", "--format", "json", "--out",
                                 str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert doc["queries"] == 3 and doc["darrm"]["total_epsilon"] <= 1.0
    assert doc["confident_gnmax"] is None and doc["darrm_shaped"] is None
    assert 1 / 3 < doc["gnmax"]["accuracy"] < 1 and doc["gnmax"]["sigma_rdp"] > doc["gnmax"]["sigma"]
    r = CliRunner().invoke(app, ["compare", "--K", "8", "--classes", "3", "--queries", "3", "--total-epsilon", "1",
                                 "--delta", "1e-5", "--no-confident"])
    assert r.exit_code == 0 and "DaRRM" in r.output and "GNMax" in r.output


@pytest.mark.parametrize("args,needle", [
    (["--queries", "0", "--total-epsilon", "1", "--delta", "1e-5"], "queries"),
    (["--delta", "1e-5"], "total-epsilon"),
    (["--total-epsilon", "1"], "delta"),
    (["--total-epsilon", "1", "--delta", "0"], "delta"),
    (["--total-epsilon", "-1", "--delta", "1e-5"], "invalid total-epsilon: must satisfy 0 < epsilon"),
])
def test_cli_bad_input_exit_2(args, needle):
    r = CliRunner().invoke(app, ["compare", "--K", "8", "--classes", "3", *args])
    assert r.exit_code == 2 and needle in r.output and "Traceback" not in r.output, r.output
    assert "target-epsilon" not in r.output  # compare takes a total ε, not a per-answer target
