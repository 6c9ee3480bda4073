"""The privacy profile of a γ table: brute force over every multiset, the LP's tight point, the file format."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.baselines import gamma_sub
from darrm_opt.model.corners import compositions, corners
from darrm_opt.model.params import Params
from darrm_opt.model.pmf import pmf_direct
from darrm_opt.optimize.optimizer import solve
from darrm_opt.privacy.profile import MARGIN, PrivacyProfile, privacy_profile

runner = CliRunner()


def brute_points(params, gamma):
    """(b, a) = (Pr_D′[S], Pr_D[S]) of every multiset, both outputs S, both orders of D, D′."""
    C = corners(params)
    g = np.asarray(gamma, dtype=float)
    K = params.K
    s = np.where(np.arange(K + 1) >= (K + 1) / 2, 1.0, -1.0)
    pts = []
    for n in compositions(K, C.shape[0]):
        a = 0.5 + 0.5 * float(np.dot(s * g, pmf_direct(n, C[:, 0])))
        b = 0.5 + 0.5 * float(np.dot(s * g, pmf_direct(n, C[:, 1])))
        pts += [(b, a), (1 - b, 1 - a), (a, b), (1 - a, 1 - b)]
    return np.array(pts)


def brute_delta(pts, eps):
    return max(0.0, float(np.max(pts[:, 1] - math.exp(eps) * pts[:, 0])))


EPS_GRID = [0.0, 0.01, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.9, 1.3, 2.0, 3.0]


@pytest.mark.parametrize("K,m,tdelta", [(3, 1, 1e-3), (5, 3, 1e-3), (5, 3, 0.0), (7, 3, 1e-5)])
@pytest.mark.parametrize("which", ["ones", "sub"])
def test_profile_matches_brute_force(K, m, tdelta, which):
    params = Params(K, m, 0.1, tdelta, delta=0.5 if which == "ones" else None)
    gamma = np.ones(K + 1) if which == "ones" else gamma_sub(K, m)
    prof = privacy_profile(params, gamma)
    pts = brute_points(params, gamma)
    for eps in EPS_GRID:
        true = brute_delta(pts, eps)
        got = prof.delta(eps)
        assert got >= true  # never optimistic
        assert got <= true + 1e-9, (eps, got, true)
    # the dominating pair: its hockey stick is the envelope, and P, Q are probability distributions
    P = prof.infinite_mass + sum(p for p, _ in prof.atoms)
    Q = sum(q for _, q in prof.atoms)
    assert P == pytest.approx(1.0, abs=1e-12) and Q == pytest.approx(1.0, abs=1e-12)
    for eps in EPS_GRID:
        hs = prof.infinite_mass + sum(max(0.0, p - math.exp(eps) * q) for p, q in prof.atoms)
        assert hs >= brute_delta(pts, eps) - 1e-15
        assert hs == pytest.approx(prof.delta(eps), abs=1e-9)


@pytest.fixture(scope="module")
def k11():
    params = Params(11, 3, 0.1, 1e-5)
    sol = solve(params)
    return params, np.array(sol.gamma), sol.certificate, privacy_profile(params, sol.gamma)


def test_tight_at_m_epsilon(k11):
    params, gamma, cert, prof = k11
    d = prof.delta(params.m * params.epsilon)
    assert d <= params.delta
    # the LP leaves γ_opt 1e-8 (relative) inside the bound; the profile is tight to what the sweep measured
    measured = 0.5 * (1 - math.exp(params.m * params.epsilon)) + 0.5 * cert.max_privacy_cost
    assert d == pytest.approx(measured, abs=1e-12)
    assert params.delta - d < 1e-8
    # the same γ as a table for the δ′ its measured cost pins down: δ′(mε) is within 1e-9 of δ′, not above
    d_tight = (cert.max_privacy_cost - math.expm1(params.m * params.epsilon)) / 2 + 1e-14
    p_tight = Params(11, 3, 0.1, 1e-5, delta=d_tight)
    tight = privacy_profile(p_tight, gamma)
    assert d_tight - 1e-9 <= tight.delta(params.m * params.epsilon) <= d_tight
    # profile is non-increasing and below the generic (mε, δ) profile everywhere above mε
    ds = [prof.delta(e) for e in np.linspace(0, 1.2, 25)]
    assert all(x >= y for x, y in zip(ds, ds[1:], strict=False))
    assert len(prof.vertices) >= 13


def test_roundtrip_and_tampering(k11):
    params, gamma, _, prof = k11
    again = PrivacyProfile.from_dict(json.loads(json.dumps(prof.to_dict())))
    assert again == prof and again.dominates(prof)
    bad = prof.to_dict()
    bad["atoms"][0][0] *= 0.5
    with pytest.raises(InvalidParameter, match="privacy_profile"):
        PrivacyProfile.from_dict(bad)
    with pytest.raises(InvalidParameter, match="privacy_profile"):
        PrivacyProfile.from_dict({"vertices": [[0.5, 0.1], [1, 1]], "support": []})


def _table_file(tmp_path, params, gamma, profile_dict):
    """The table file darrm-opt writes for (params, gamma) (``table_document``), holding ``profile_dict``."""
    from darrm_opt.mechanisms import certify_table, table_document

    doc = {**table_document(certify_table(params, gamma, profile=False)), "privacy_profile": profile_dict}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


def test_verify_rejects_optimistic_profile(k11, tmp_path):
    params, gamma, _, prof = k11
    good = _table_file(tmp_path, params, gamma, prof.to_dict())
    res = runner.invoke(app, ["verify", str(good), "--format", "json", "-q"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["privacy_profile_valid"] is True
    # lower every vertex but the last by 1e-9: optimistic, rejected
    d = prof.to_dict()
    verts = [[b, max(a - 1e-9, 0.0)] for b, a in d["vertices"][:-1]] + [d["vertices"][-1]]
    lowered = PrivacyProfile(tuple(map(tuple, d["support"])), tuple(map(tuple, verts))).to_dict()
    bad = _table_file(tmp_path, params, gamma, lowered)
    res = runner.invoke(app, ["verify", str(bad), "-q"])
    assert res.exit_code == 1 and "optimistic" in res.output
    # a swept statement below the truth is rejected too
    d = prof.to_dict()
    d["support"][0][1] *= 0.5
    res = runner.invoke(app, ["verify", str(_table_file(tmp_path, params, gamma, d)), "-q"])
    assert res.exit_code == 1


def test_solve_json_carries_profile(tmp_path):
    out = tmp_path / "t5.json"
    res = runner.invoke(app, ["solve", "--K", "5", "--m", "2", "--format", "json", "--out", str(out), "-q",
                              "--no-baselines"])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    prof = PrivacyProfile.from_dict(doc["privacy_profile"])
    assert doc["privacy_profile"]["infinite_mass"] == prof.infinite_mass
    assert prof.delta(doc["m"] * doc["epsilon"]) <= doc["delta"]
    assert runner.invoke(app, ["verify", str(out), "-q"]).exit_code == 0


def test_profile_at_a_large_m_epsilon_is_never_optimistic():
    """K = 7, m = 3, ε = 3 (mε = 9): the argmax points include ones of equal Pr_D′ (a vertical hull edge),
    which once divided by zero; the profile must still dominate every multiset's test points."""
    params = Params(7, 3, 3.0, 1e-5)
    sol = solve(params)
    prof = privacy_profile(params, sol.gamma)
    pts = brute_points(params, sol.gamma)
    for eps in [0.0, 0.5, 2.0, 5.0, 8.9, 9.0, 12.0]:
        assert prof.delta(eps) >= brute_delta(pts, eps)
    assert prof.delta(9.0) <= params.delta + 1e-12


PINS = json.load(open(Path(__file__).parent / "data" / "profile_pins.json"))


def _envelope_delta(prof: PrivacyProfile, eps: float) -> float:
    """max_v (a_v − e^{ε′} b_v): the envelope's own δ(ε′), without the swept statements."""
    x = math.exp(eps)
    return max(a - x * b for b, a in prof.vertices)


#: envelopes from the same lines agree to a few units of the last bit (2.2e-16 seen): how many vertices a
#: near-collinear stretch keeps moves with the last bit, their values do not
ENVELOPE_TOL = 1e-14


@pytest.mark.parametrize("pin", PINS, ids=[f"K{p['K']}-{p['kind']}" for p in PINS])
def test_profile_unchanged_against_pinned_values(pin):
    """Profiles pinned with main's code before the slope front (commit 483105e: a multi-slope sweep per
    hull-search round): γ_opt at K = 11, 31, 41 and a non-symmetric γ at K = 11, 31. Compared by value:

    - the envelope's δ(ε′) on a grid of ε′ (dense in [0, 3], every slope of the pinned hull and every swept
      statement's ε_j) within ENVELOPE_TOL;
    - δ(ε′) itself within MARGIN + ENVELOPE_TOL: at ε′ = ε_j one profile may answer from its statement (no
      margin) and the other, whose statement sits a bit above ε′, from its envelope (raised by MARGIN);
    - domination both ways (:meth:`PrivacyProfile.dominates`), within the same tolerance.

    K ≥ 31 runs the structured sweep: the certificate's sweep alone, which keeps the slope front too."""
    p = Params(pin["K"], pin["m"], pin["epsilon"], pin["teacher_delta"])
    prof = privacy_profile(p, np.array(pin["gamma"]), workers=2)
    ref = PrivacyProfile(tuple(map(tuple, pin["support"])), tuple(map(tuple, pin["vertices"])))
    v = ref.vertices
    hull_slopes = [(a2 - a1) / (b2 - b1) for (b1, a1), (b2, a2) in zip(v, v[1:]) if b2 > b1]
    grid = sorted({*np.linspace(0.0, 3.0, 601).tolist(), *(math.log(x) for x in hull_slopes if x >= 1.0),
                   *(e for e, _ in prof.support + ref.support)})
    assert len(grid) > 650
    env = np.array([_envelope_delta(prof, e) for e in grid])
    env_ref = np.array([_envelope_delta(ref, e) for e in grid])
    np.testing.assert_allclose(env, env_ref, rtol=0, atol=ENVELOPE_TOL)
    deltas = np.array([prof.delta(e) for e in grid])
    deltas_ref = np.array([ref.delta(e) for e in grid])
    np.testing.assert_allclose(deltas, deltas_ref, rtol=0, atol=MARGIN + ENVELOPE_TOL)
    assert deltas_ref[0] > 1e-3 and deltas_ref[-1] < 1e-4  # the grid spans the profile's range
    assert prof.infinite_mass == pytest.approx(ref.infinite_mass, rel=0, abs=ENVELOPE_TOL)
    assert prof.dominates(ref, tol=MARGIN + ENVELOPE_TOL) and ref.dominates(prof, tol=MARGIN + ENVELOPE_TOL)
    if pin["K"] >= 31:
        assert prof.sweeps == 1


def test_profile_by_the_numpy_twin_equals_the_compiled_one():
    """DARRM_NO_NUMBA=1's kernels (numpy twins of the block scan and of the slope front) give the same profile."""
    from darrm_opt.certify import kernels, slope_kernels, slopes

    pin = next(p for p in PINS if p["K"] == 31 and p["kind"] == "opt")
    p = Params(pin["K"], pin["m"], pin["epsilon"], pin["teacher_delta"])
    compiled = privacy_profile(p, np.array(pin["gamma"]), workers=2)
    with pytest.MonkeyPatch.context() as mp:
        for mod in (kernels, slope_kernels, slopes):
            mp.setattr(mod, "HAVE_NUMBA", False)
        twin = privacy_profile(p, np.array(pin["gamma"]), workers=2)
    assert twin == compiled  # vertices and support, bit for bit
    assert [list(v) for v in twin.vertices] == [list(v) for v in compiled.vertices]


def test_delta_beyond_exp_range_and_malformed_statements(k11, tmp_path):
    """δ(ε′) for ε′ past exp's range (709.78) is the infinite-loss mass or more, not an OverflowError; the
    same pair with an atom at b = 2^-1074 (the smallest positive double) keeps its a − e^{ε′}·b term; verify
    of a stored statement at ε′ = 800 or ε′ = −1 claiming δ = 0 answers 'optimistic' (exit 1), no traceback."""
    params, gamma, _, prof = k11
    for e in (709.0, 709.8, 800.0, 1e308, math.inf):
        assert prof.infinite_mass - MARGIN <= prof.delta(e) <= prof.delta(709.0)  # statements carry no margin
    tiny = PrivacyProfile(((0.0, 1.0),), ((0.0, 0.0), (5e-324, 0.5), (1.0, 1.0)))
    assert tiny.delta(800.0) >= 0.5 - 1e-15  # e^709·2^-1074 < 4e-16: the atom is still there
    for e in (800.0, -1.0):
        d = prof.to_dict()
        d["support"].append([e, 0.0])
        res = runner.invoke(app, ["verify", str(_table_file(tmp_path, params, gamma, d)), "-q"])
        assert res.exit_code == 1 and "optimistic" in res.output, (e, res.output)


@pytest.mark.parametrize("pin", [p for p in PINS if p["K"] >= 31], ids=lambda p: f"K{p['K']}-{p['kind']}")
def test_profile_from_the_certifying_sweep_equals_a_separate_pass(pin):
    """The slope front kept by the certifying sweep (``certify_and_separate(front=True)``, the tables it computes
    anyway) answers the hull search exactly as the separate pass of ``slope_front`` does: the same values and
    argmax multisets at every slope, hence the same profile, bit for bit, with one structured pass fewer."""
    from darrm_opt.certify.certificate import certify_and_separate
    from darrm_opt.certify.problems import make_problem
    from darrm_opt.certify.slopes import slope_front
    from darrm_opt.certify.sweep import signed_h

    p = Params(pin["K"], pin["m"], pin["epsilon"], pin["teacher_delta"])
    g = np.array(pin["gamma"])
    two_sided = not np.array_equal(g, g[::-1])
    cert, res = certify_and_separate(p, g, workers=2, front=True)
    plain_cert, plain = certify_and_separate(p, g, workers=2)
    assert res.front is not None and plain.front is None
    assert cert == dataclasses.replace(plain_cert, seconds=cert.seconds)  # the certificate is unchanged
    assert (res.max_cost, res.worst, res.min_cost, res.best) == (plain.max_cost, plain.worst, plain.min_cost,
                                                                 plain.best)
    separate = slope_front(make_problem(corners(p), signed_h(g), 1.0), workers=2, two_sided=two_sided)
    xs = sorted({1.0, *np.exp(np.linspace(0.0, 12.0, 301)).tolist(), math.exp(p.m * p.epsilon)})
    a, b = res.front.evaluate(xs), separate.evaluate(xs)
    assert a.best.tolist() == b.best.tolist() and a.arg == b.arg
    assert a.best_neg.tolist() == b.best_neg.tolist() and a.arg_neg == b.arg_neg
    fused = privacy_profile(p, g, workers=2, certified=(cert, res))
    alone = privacy_profile(p, g, workers=2, certified=(plain_cert, plain))
    assert fused == alone
    assert [list(v) for v in fused.vertices] == [list(v) for v in alone.vertices]
    assert fused.sweeps == alone.sweeps - 1  # the front's pass is not made again


def test_solve_keeps_the_front_of_the_gamma_it_returns():
    """solve(front=True): the last certifying sweep's front is that of the returned γ; the profile read off it
    equals a profile computed from scratch."""
    p = Params(41, 3, 0.1, 1e-5)
    sol = solve(p, front=True)
    assert sol.sweep is not None and sol.sweep.front is not None
    from darrm_opt.certify.sweep import signed_h

    assert sol.sweep.front.matches(signed_h(np.array(sol.gamma)), False)
    known = privacy_profile(p, sol.gamma, workers=2, certified=(sol.certificate, sol.sweep))
    fresh = privacy_profile(p, sol.gamma, workers=2)
    assert known == fresh and known.sweeps == fresh.sweeps - 1


def test_one_front_request_serves_repeated_single_thread_sweeps():
    """A front request reused by two sweeps on one thread (certify_and_separate may sweep twice): each sweep's
    front is its own, equal at every slope to the separate pass's."""
    from darrm_opt.certify.problems import make_problem
    from darrm_opt.certify.slopes import FrontRequest, slope_front
    from darrm_opt.certify.sweep import signed_h, sweep

    pin = next(p for p in PINS if p["K"] == 31 and p["kind"] == "opt")
    p = Params(pin["K"], pin["m"], pin["epsilon"], pin["teacher_delta"])
    h = signed_h(np.array(pin["gamma"]))
    problem = make_problem(corners(p), h, math.exp(p.m * p.epsilon))
    req = FrontRequest(False)
    fronts = [sweep(problem, workers=1, front=req).front for _ in range(2)]
    ref = slope_front(make_problem(corners(p), h, 1.0), workers=1, two_sided=False)
    xs = np.exp(np.linspace(0.0, 10.0, 201)).tolist()
    want = ref.evaluate(xs)
    for fr in fronts:
        got = fr.evaluate(xs)
        assert got.best.tolist() == want.best.tolist() and got.arg == want.arg
    assert len(fronts[0]) == len(fronts[1])
