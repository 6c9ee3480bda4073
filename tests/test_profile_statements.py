"""Issue 20: ``darrm-opt verify`` proves every statement of a stored privacy profile, without tolerance.

A stored statement passes only when it is proven at or above the truth and is refused when it is proven below
it (or cannot be proven either way). The truths here are computed independently of the library: every
corner multiset's event points in 50-digit arithmetic (shared-data tables), every neighbouring pair's output
laws in exact rationals (PATE setting, multi-class), and their upper concave hull.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import mpmath
import numpy as np
import pytest
from brute_profile import multiclass_points, pate_points, shared_delta, shared_points, tradeoff, upper_hull
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from darrm_opt.cli import app
from darrm_opt.model.neighbours import PateParams
from darrm_opt.model.params import Params
from darrm_opt.privacy.pair_profile import pate_family, pate_profile_check
from darrm_opt.privacy.profile import PrivacyProfile
from darrm_opt.privacy.statements import check_family_profile, check_shared_profile

ROOT = Path(__file__).resolve().parents[1]


def verify(path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "COLUMNS": "400"}
    return subprocess.run([sys.executable, "-m", "darrm_opt", "verify", str(path)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT, env=env)


def solved(tmp_path_factory, name: str, *args: str) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp(name) / f"{name}.json"
    r = CliRunner().invoke(app, ["solve", *args, "--format", "json", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    return out, json.loads(out.read_text())


def write(tmp_path: Path, doc: dict, profile: dict) -> Path:
    profile = dict(profile)
    profile.pop("atoms", None)
    profile.pop("infinite_mass", None)
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps({**doc, "privacy_profile": profile}))
    return path


def float_below(v: Fraction) -> float:
    f = float(v)
    return math.nextafter(f, -math.inf) if Fraction(f) >= v else f


# ---------------------------------------------------------------------------------------------------------
# Regression: statements just below the truth, through the CLI as a subprocess
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shared5(tmp_path_factory):
    return solved(tmp_path_factory, "shared5", "--K", "5", "--m", "3", "--no-baselines")


def test_shared_statement_just_below_the_truth_is_refused(shared5, tmp_path):
    """K = 5, m = 3: the stored statement (ε′ = 0, δ) lowered by 1e-13 is 2.7e-14 below the true total
    variation (50-digit brute force over all 792 multisets); verify proves it false (exit 1). A comparison with a
    recomputed profile less MARGIN (the recomputation carrying the sweep's float error bound) accepts it."""
    path, doc = shared5
    assert verify(path).returncode == 0
    params = Params(5, 3, doc["epsilon"], doc["teacher_delta"], delta=doc["delta"])
    truth = shared_delta(shared_points(params, doc["gamma"]), 0.0)
    prof = json.loads(json.dumps(doc["privacy_profile"]))
    i = next(j for j, (e, _) in enumerate(prof["support"]) if e == 0.0)
    assert prof["support"][i][1] >= truth  # the stored statement itself is true
    prof["support"][i][1] -= 1e-13
    assert truth - prof["support"][i][1] > 1e-14
    r = verify(write(tmp_path, doc, prof))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "optimistic" in r.stderr and "ε′ = 0.0" in r.stderr and "Traceback" not in r.stderr


def test_shared_vertex_below_the_truth_is_refused(shared5, tmp_path):
    """K = 5, m = 3: a vertex inserted on the widest edge of the stored envelope 1e-13 below the true tradeoff
    curve (50-digit hull of every multiset's points) is refused, exit 1 (as a statement that cannot be proven:
    the sufficient condition at the envelope's slope fails, and the true curve there is not computed). A check at
    the recomputed profile's vertices only accepts it."""
    path, doc = shared5
    params = Params(5, 3, doc["epsilon"], doc["teacher_delta"], delta=doc["delta"])
    verts = doc["privacy_profile"]["vertices"]
    with mpmath.workdps(50):
        hull = upper_hull(shared_points(params, doc["gamma"]))
        i = max(range(len(verts) - 1), key=lambda j: verts[j + 1][0] - verts[j][0])
        b = (verts[i][0] + verts[i + 1][0]) / 2
        t = tradeoff(hull, b)
        a = float(t - mpmath.mpf(1e-13))
        assert mpmath.mpf(a) < t
    prof = {**doc["privacy_profile"], "vertices": verts[: i + 1] + [[b, a]] + verts[i + 1:]}
    r = verify(write(tmp_path, doc, prof))
    assert r.returncode == 1 and "cannot be proven" in r.stderr and f"vertex ({b!r}" in r.stderr, (r.stdout, r.stderr)


@pytest.mark.parametrize("kind", ["pate", "multiclass"])
def test_pair_family_vertex_just_below_the_truth_is_refused(kind, tmp_path_factory, tmp_path):
    """K = 5 (PATE setting; multi-class with C = 3): a vertex inserted on the stored envelope 5e-17 below the true
    tradeoff curve T (exact rationals) is refused (exit 1); a check at the recomputed profile's vertices only
    accepts it. A stored vertex lowered 5e-17 below T is refused too; the untouched file passes."""
    if kind == "pate":
        path, doc = solved(tmp_path_factory, "pate5", "--K", "5", "--teachers", "disjoint-nonprivate",
                           "--target-epsilon", "0.5", "--delta", "1e-5")
        hull = upper_hull(pate_points(5, doc["gamma"]))
    else:
        path, doc = solved(tmp_path_factory, "mc5", "--K", "5", "--classes", "3", "--teachers",
                           "disjoint-nonprivate", "--target-epsilon", "0.5", "--delta", "1e-5", "--no-baselines")
        hull = upper_hull(multiclass_points(5, 3, doc["gamma"]))
    assert verify(path).returncode == 0
    verts = doc["privacy_profile"]["vertices"]
    assert all(Fraction(a) >= tradeoff(hull, b) for b, a in verts)  # the stored profile is true
    # the widest edge, its midpoint 5e-17 below T
    i = max(range(len(verts) - 1), key=lambda j: verts[j + 1][0] - verts[j][0])
    b = (verts[i][0] + verts[i + 1][0]) / 2
    a = float_below(tradeoff(hull, b) - Fraction(5, 10**17))
    prof = {**doc["privacy_profile"], "vertices": verts[: i + 1] + [[b, a]] + verts[i + 1:]}
    r = verify(write(tmp_path, doc, prof))
    assert r.returncode == 1 and "optimistic" in r.stderr and "exactly" in r.stderr, (r.stdout, r.stderr)
    # an interior stored vertex lowered to 5e-17 below T
    j = max(range(1, len(verts) - 1), key=lambda k: verts[k][1] - verts[k - 1][1])
    low = [list(v) for v in verts]
    low[j][1] = float_below(tradeoff(hull, low[j][0]) - Fraction(5, 10**17))
    r = verify(write(tmp_path, doc, {**doc["privacy_profile"], "vertices": low}))
    assert r.returncode == 1 and "optimistic" in r.stderr, (r.stdout, r.stderr)


# ---------------------------------------------------------------------------------------------------------
# Properties: the verdict is the truth's, whatever the rounding
# ---------------------------------------------------------------------------------------------------------
def _profile(support, vertices=((0.0, 1.0), (1.0, 1.0))) -> PrivacyProfile:
    return PrivacyProfile(tuple(support), tuple(vertices))


@settings(max_examples=25, deadline=None)
@given(K=st.sampled_from([1, 3]), td=st.sampled_from([0.0, 1e-5, 0.05]), eps=st.sampled_from([0.1, 0.7]),
       seed=st.integers(0, 2**32 - 1), e=st.sampled_from([0.0, 0.05, 0.3, 2.0]),
       offset=st.integers(-60, 60))
def test_shared_support_statement_verdict_is_the_truth(K, td, eps, seed, e, offset):
    """A statement (ε′, d) with d a few ulps (of 1e-15) around the 50-digit truth: valid iff d ≥ truth."""
    rng = np.random.default_rng(seed)
    gamma = rng.random(K + 1)
    gamma[rng.random(K + 1) < 0.3] = 1.0
    params = Params(K, 1, eps, td, delta=max(td, 1e-3))
    truth = shared_delta(shared_points(params, gamma), e)
    d = float(truth) + offset * 2.0**-50 * max(float(truth), 1e-3)
    assume(d >= 0 and abs(mpmath.mpf(d) - truth) > mpmath.mpf(10) ** -40)
    got = check_shared_profile(params, gamma, _profile([(e, d)]))
    assert got.verdict == ("valid" if d >= truth else "optimistic"), (got, float(truth), d)


@settings(max_examples=25, deadline=None)
@given(K=st.sampled_from([3, 4, 5]), seed=st.integers(0, 2**32 - 1), which=st.integers(0, 50),
       shift=st.integers(-8, 8), insert=st.booleans())
def test_pair_family_envelope_verdict_is_the_truth(K, seed, which, shift, insert):
    """A PATE-setting profile made of the true hull's vertices (floats at most a few 1e-17 off), one vertex moved
    by ``shift``·1e-17 or a vertex inserted on an edge: valid iff its concave envelope is above every true point
    and each of its vertices is above T (exact)."""
    rng = np.random.default_rng(seed)
    gamma = rng.random(K + 1)
    gamma[rng.random(K + 1) < 0.3] = 1.0
    hull = upper_hull(pate_points(K, gamma))
    verts = [(float(b), float(a)) for b, a in hull]
    verts = [(0.0, verts[0][1])] + [v for v in verts[1:] if 0 < v[0] < 1] + [(1.0, 1.0)]
    k = which % len(verts)
    if insert and k + 1 < len(verts):
        b = (verts[k][0] + verts[k + 1][0]) / 2
        assume(verts[k][0] < b < verts[k + 1][0])
        verts.insert(k + 1, (b, float(tradeoff(hull, b)) + shift * 1e-17))
    elif k + 1 < len(verts):
        verts[k] = (verts[k][0], verts[k][1] + shift * 1e-17)
    assume(all(0 <= a <= 1 for _, a in verts) and all(y[1] >= x[1] and y[0] > x[0] for x, y in zip(verts, verts[1:])))
    prof = _profile([], verts)
    V = [(Fraction(b), Fraction(a)) for b, a in verts]
    env = upper_hull(V)
    expected = (all(a <= tradeoff(env, b) for b, a in hull) and all(a >= tradeoff(hull, b) for b, a in V))
    got = check_family_profile(pate_family(K, gamma), prof)
    assert got.verdict == ("valid" if expected else "optimistic"), got


def test_pair_family_support_statements_bracket_the_truth():
    """The PATE-setting profile's statement at ε′ = 0.3, and the same lowered by one ulp below the exact truth
    (rational bounds of e^0.3 at 256 bits decide it)."""
    gamma = np.random.default_rng(7).random(6)
    hull = upper_hull(pate_points(5, gamma))
    with mpmath.workdps(60):
        E = mpmath.exp(mpmath.mpf(0.3))
        truth = max(mpmath.mpf(b.numerator) / b.denominator * -E + mpmath.mpf(a.numerator) / a.denominator
                    for b, a in hull)
    up = float(truth)
    up = up if mpmath.mpf(up) >= truth else math.nextafter(up, 1.0)
    fam = pate_family(5, gamma)
    assert check_family_profile(fam, _profile([(0.3, up)])).valid
    bad = check_family_profile(fam, _profile([(0.3, math.nextafter(up, 0.0))]))
    assert bad.verdict == "optimistic" and "0.3" in bad.statement
    params = PateParams(K=5, epsilon=0.5, delta=1e-5)
    assert pate_profile_check(params, gamma, _profile([(0.3, up)])).valid


@settings(max_examples=40, deadline=None)
@given(K=st.sampled_from([1, 3, 7]), td=st.sampled_from([0.0, 1e-5, 0.2, 5e-324]),
       eps=st.floats(0.01, 3.0), seed=st.integers(0, 2**32 - 1), x=st.floats(1.0, 1e12))
def test_direct_bounds_enclose_interval_arithmetic(K, td, eps, seed, x):
    """The float bounds of a − x b by direct convolution (darrm_opt.certify.direct) contain the 400-digit
    interval enclosure of every multiset's both outputs: the rounding never goes the wrong way (Δ = 2^-1074 too:
    probabilities in the subnormal range)."""
    from mpmath import iv

    from darrm_opt.certify.direct import event_points
    from darrm_opt.certify.exact import interval_dps, interval_ends, output_intervals

    rng = np.random.default_rng(seed)
    params = Params(K, 1, eps, td, delta=max(td, 1e-3))
    gamma = rng.random(K + 1)
    gamma[rng.random(K + 1) < 0.3] = 1.0
    C = 4 if td == 0 else 8
    counts = rng.multinomial(K, np.ones(C) / C)[None, :]
    ev = event_points(params, gamma, counts)
    up, lo = ev.upper(x), ev.lower(x)
    with interval_dps(400):  # 1 − Δ exact for Δ down to 2^-1074
        for o, (a, b) in enumerate(output_intervals(params, gamma, counts[0])):
            vlo, vhi = interval_ends(a - iv.mpf(x) * b)
            assert mpmath.mpf(up[0, o]) >= vhi and mpmath.mpf(lo[0, o]) <= vlo, (o, up[0, o], vhi, lo[0, o], vlo)


def test_malformed_statements_are_refused():
    """Statements at a negative or NaN ε′, or with a NaN δ, are refused; δ(ε′) ≤ 1 always holds."""
    fam = pate_family(5, np.random.default_rng(11).random(6))
    for bad in ([(-1.0, 1.0)], [(math.nan, 1.0)], [(0.5, math.nan)]):
        assert check_family_profile(fam, _profile(bad)).verdict == "optimistic"
    assert check_family_profile(fam, _profile([(0.0, 1.0), (3.0, 2.0)])).valid
