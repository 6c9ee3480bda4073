"""The gaussian-mean kind: exact discrete Gaussian noise, its dominating pair, calibration against the paper
(eq. 15) and dp_accounting, the mechanism interface, the Python API and the CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.special import logsumexp

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms import document_header, mechanism, mechanism_for, read_document, table_from_document
from darrm_opt.mechanisms.gaussian_mean import clip_and_round, gaussian_mean_table
from darrm_opt.model.gaussian_params import GaussianMeanParams, gaussian_lattice
from darrm_opt.privacy.gaussian_mean import (
    calibrate,
    choose_dim,
    composed_epsilon,
    eq15_sigma,
    exact_sigma,
    mean_profile,
    pca_loss,
)
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.release.means import release_means

ROOT = Path(__file__).resolve().parents[1]
PAPER = GaussianMeanParams(8, 16, 1.0, 2.0**-9, 4397, 1.25e-5)  # the paper's K = 8, N = 80 at (8, 1e-3)


# --- exact sampling -----------------------------------------------------------------------------------------

# --- the dominating pair ------------------------------------------------------------------------------------

def _discrete_delta(n: int, shifts: tuple[int, ...], eps: float, span: int) -> float:
    """δ(ε) of (N_ℤ(0, n²)^l, N_ℤ(s, n²)^l) by direct summation over the box ±span·n, plus the mass outside."""
    x = np.arange(-span * n, span * n + 1)
    logp1 = -x.astype(float) ** 2 / (2 * n * n)
    logz = logsumexp(logp1)
    grids = np.meshgrid(*([x] * len(shifts)), indexing="ij", sparse=True)
    logp = sum(-g.astype(float) ** 2 / (2 * n * n) - logz for g in grids)
    logq = sum(-(g - s).astype(float) ** 2 / (2 * n * n) - logz for g, s in zip(grids, shifts))
    d = np.maximum(np.exp(logp) - np.exp(eps + logq), 0).sum()
    outside = 2 * stats.norm.sf(span - 1) * len(shifts)  # N_ℤ tails are below 2·the continuous one's here
    return float(d + outside)


@pytest.mark.parametrize("shifts", [(100,), (60, 80)])
def test_the_stored_pair_dominates_the_discrete_release_and_is_tight(shifts):
    """The release's discrete pair (exact δ by summation) is below the stored continuous pair at every ε,
    and at most 10⁻² relative below it at n = 256 (the pair is not loose)."""
    n = 256
    prof = GaussianProfile(math.nextafter(math.sqrt(n * n - 25), 0.0), (math.hypot(*shifts) * (1 + 1e-9),),
                           discrete=False)
    params = GaussianMeanParams(1, len(shifts), math.hypot(*shifts) / 2 * 2.0**-4, 2.0**-4, n, 1e-5)
    assert mean_profile(params).sigma == prof.sigma
    for eps in (0.0, 0.2, 0.5, 1.0, 1.5):
        ours = prof.delta(eps)
        true = _discrete_delta(n, shifts, eps, span=9 if len(shifts) == 1 else 7)
        assert true <= ours, (eps, true, ours)
        assert ours <= true * (1 + 1e-2) + 1e-12


def test_the_profile_is_in_lattice_units_with_the_clipped_sensitivity():
    prof = mean_profile(PAPER)
    assert prof.sensitivity == pytest.approx(2 * PAPER.radius / PAPER.lattice, rel=2e-9)
    assert prof.sensitivity > 2 * PAPER.radius / PAPER.lattice
    assert prof.sigma < PAPER.noise and prof.sigma == pytest.approx(PAPER.noise, rel=1e-6)
    assert prof.mu == pytest.approx(2 * PAPER.radius / (PAPER.K * PAPER.sigma), rel=1e-6)


# --- calibration --------------------------------------------------------------------------------------------

def test_the_papers_experiment_sigma_by_eq15_and_exactly():
    """K = 8, N = 80, autoencoded (S = 2/K), (8, 10⁻³): eq. 15 gives 1.283 (Alg. 2), the exact composition 1.073."""
    assert round(eq15_sigma(80, 8.0, 1e-3, 2 / 8), 3) == 1.283
    assert exact_sigma(80, 8.0, 1e-3, 2 / 8) == pytest.approx(1.0733, abs=1e-4)
    cal = calibrate(80, 8.0, 1e-3, K=8, dim=16)
    assert cal.sigma_eq15 == pytest.approx(1.28256391, rel=1e-8)
    assert cal.sigma_exact <= cal.sigma <= cal.sigma_exact * (1 + 1e-3)
    assert cal.epsilon_spent <= 8.0 and cal.epsilon_ledger is not None and cal.epsilon_ledger <= 8.0
    assert cal.params == PAPER


@pytest.mark.parametrize(("eps", "delta", "ratio"), [(8, 1e-3, 1.195), (2, 1e-5, 1.254), (1, 1e-5, 1.314)])
def test_eq15_needs_more_noise_than_the_exact_composition(eps, delta, ratio):
    for n in (1, 80, 10_000):  # the ratio does not depend on N or S
        assert eq15_sigma(n, eps, delta, 0.3) / exact_sigma(n, eps, delta, 0.3) == pytest.approx(ratio, abs=5e-4)


def _dp_accounting_sigma(N: int, eps: float, delta: float, S: float, guess: float) -> float:
    import dp_accounting

    def event(sigma: float):
        return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(sigma / S), N)

    return dp_accounting.calibrate_dp_mechanism(
        lambda: dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4), event, eps, delta,
        dp_accounting.ExplicitBracketInterval(0.9 * guess, 1.1 * guess), tol=1e-7 * guess)


@pytest.mark.parametrize("N", [1, 37, 10_000, *(pytest.param(n, marks=pytest.mark.slow) for n in (100, 1000, 4321))])
def test_calibration_agrees_with_dp_accounting_within_1e3(N):
    eps, delta, K = 1.0, 1e-5, 250
    cal = calibrate(N, eps, delta, K=K, dim=64)
    ref = _dp_accounting_sigma(N, eps, delta, 2 / K, cal.sigma_exact)
    assert cal.sigma_exact == pytest.approx(ref, rel=1e-6)
    assert abs(cal.sigma / ref - 1) < 1e-3  # the released σ, on its lattice
    assert cal.epsilon_spent <= eps
    assert composed_epsilon(mean_profile(cal.params), N, delta) == cal.epsilon_spent
    if cal.epsilon_ledger is not None:
        assert cal.epsilon_ledger <= eps


def test_choose_dim_keeps_the_components_above_the_noise():
    lam = [5.0, 3.0, 1.0, 0.5, 0.1]
    assert choose_dim(lam, math.sqrt(0.8)) == 3
    assert choose_dim(lam[::-1], math.sqrt(0.8)) == 3
    assert choose_dim(lam, 10.0) == 1 and choose_dim(lam, 0.01) == 5
    with pytest.raises(InvalidParameter, match="eigenvalues"):
        choose_dim([1.0, -1.0], 1.0)


@settings(max_examples=60, deadline=None)
@given(lam=st.lists(st.floats(0, 100), min_size=1, max_size=30), sigma=st.floats(0.01, 10))
def test_choose_dim_minimises_eq6(lam, sigma):
    best = choose_dim(lam, sigma)
    losses = [pca_loss(lam, d, sigma) for d in range(1, len(lam) + 1)]
    assert pca_loss(lam, best, sigma) <= min(losses) + 1e-9 * (1 + sum(lam))


def test_a_budget_beyond_mu_1_per_answer_is_not_spent_and_less_noise_is_refused():
    cal = calibrate(1, 8.0, 1e-5, K=8, dim=8)  # σ_exact = 0.15 would be μ = 1.67 per answer
    assert cal.sigma_exact == pytest.approx(0.1500573, rel=1e-6) and cal.sigma >= 2 / 8
    assert cal.epsilon_spent == pytest.approx(4.376, abs=1e-3)  # μ = 1: (4.376, 1e-5)
    with pytest.raises(InvalidParameter, match="noise"):
        GaussianMeanParams(8, 8, 1.0, 2.0**-12, 4096, 1e-5)  # μ = 2·1/(2^-12·4096) = 2


def test_gaussian_lattice_only_rounds_sigma_up():
    for sigma, K in ((1.0733, 8), (0.0298, 250), (123.4, 3)):
        g, n, s = gaussian_lattice(sigma, K)
        assert 4096 <= n < 8192 and math.frexp(g)[0] == 0.5
        assert s >= sigma and s <= sigma * (1 + 1 / 4096)


# --- the mechanism ------------------------------------------------------------------------------------------

def test_the_kind_is_registered_and_its_table_is_certified_by_its_parameters():
    m = mechanism("gaussian-mean")
    assert mechanism_for(PAPER) is m and m.table_size(PAPER) == 0
    table = m.solve(PAPER).table
    assert table.gamma == () and table.kind == "gaussian-mean" and table.teachers == "disjoint-nonprivate"
    cert = table.certificate
    assert cert.certified and cert.limit == PAPER.delta and cert.worst <= cert.limit and cert.checked == 1
    assert (table.epsilon0, table.delta0) == m.per_answer(PAPER)
    assert table.profile == mean_profile(PAPER) and table.profile.delta(table.epsilon0) <= table.delta0
    assert table.epsilon0 == pytest.approx(0.8441, abs=1e-4)
    assert table.expected_error == pytest.approx(16 * PAPER.sigma**2)
    assert "CERTIFIED" in m.verdict_line(PAPER, cert) and m.check_profile(PAPER, np.zeros(0), table.profile,
                                                                            cert).valid
    looser = GaussianProfile(table.profile.sigma * 1.01, table.profile.shifts, discrete=False)
    assert m.check_profile(PAPER, np.zeros(0), looser, cert).verdict == "optimistic"


def test_documents_read_back_to_the_same_table_and_refuse_a_gamma():
    table = gaussian_mean_table(PAPER)
    doc = {**document_header(PAPER), **PAPER.canonical(), "teachers": table.teachers,
           "certificate": table.certificate_dict(), "privacy_profile": table.profile.to_dict()}
    doc = json.loads(json.dumps(doc))
    assert table_from_document(doc).id == table.id
    assert table_from_document(doc, certify=False).id == table.id
    with pytest.raises(InvalidParameter, match="gamma"):
        read_document({**doc, "gamma": [0.5]})
    with pytest.raises(Exception, match="noise"):
        read_document({k: v for k, v in doc.items() if k != "noise"})


@pytest.mark.parametrize(("field", "value"), [("lattice", 0.003), ("noise", 100), ("noise", 1.5), ("K", 0),
                                              ("dim", 0), ("radius", math.nan), ("delta", 1.0)])
def test_bad_parameters_name_their_field(field, value):
    with pytest.raises(InvalidParameter, match=field):
        GaussianMeanParams(**{**PAPER.canonical(), field: value})


@settings(max_examples=80, deadline=None)
@given(z=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=12), radius=st.floats(1e-3, 1e3),
       e=st.integers(-20, 0))
def test_clip_and_round_never_leaves_the_ball(z, radius, e):
    g = 2.0**e
    if radius / g > 2**30:
        return
    q = clip_and_round(np.array([z]), radius, g)[0]
    assert int((q * q).sum()) * g * g <= radius * radius * (1 + 1e-15)
    assert np.all(np.abs(q) * g <= np.abs(z) + 1e-300)  # toward zero: no coordinate grows


def test_a_vector_on_the_sphere_is_proven_inside_in_integers():
    """Σ q² = ⌊(R/g)²⌋ exactly: the float check cannot prove it, the integer one does (nothing is removed)."""
    q = clip_and_round(np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0]]), 1.0, 2.0**-4)
    assert q.tolist()[0] == [16, 0, 0] and int((q[1] ** 2).sum()) <= 256


def test_the_sampler_checks_clips_and_adds_noise_of_sd_sigma():
    table = gaussian_mean_table(PAPER)
    sampler = mechanism("gaussian-mean").sampler(table, np.random.default_rng(0).bytes)
    v = np.full((4000, 8, 16), 0.1)  # norm 0.4: kept, 0.1 / 2^-9 = 51.2 → 51 units
    v[:, 0, :] = 1.0  # norm 4 > R = 1: clipped to radius 1 (coordinates 0.25 − ulps → 127 units)
    sums = sampler.prepare(v)
    assert sums.dtype == np.int64 and np.all(sums == 7 * 51 + 127)
    out = sampler.draw(sums)
    noise = out - sums * PAPER.lattice / PAPER.K
    assert out.shape == (4000, 16) and abs(noise.std() / PAPER.sigma - 1) < 0.01
    assert abs(noise.mean()) < 5 * PAPER.sigma / math.sqrt(noise.size)
    for bad, match in ((np.zeros((3, 8)), "shape"), (np.zeros((3, 7, 16)), "shape"),
                       (np.where(np.arange(3)[:, None, None] == 2, np.nan, np.zeros((3, 8, 16))), "row 2"),
                       (np.full((3, 8, 16), 1.5), "row 0: every value must be a number in \\[0, 1\\]")):
        with pytest.raises(InvalidParameter, match=match):
            sampler.prepare(bad)


def test_release_means_projects_on_a_public_basis_and_reconstructs():
    table = gaussian_mean_table(GaussianMeanParams(8, 2, 1.0, 2.0**-12, 8192, 1e-6))  # σ = 0.25
    rng = np.random.default_rng(3)
    basis = np.linalg.qr(rng.normal(size=(6, 2)))[0].T  # 2 × 6, orthonormal rows
    center = np.full(6, 0.5)
    y = np.clip(center + rng.normal(scale=0.05, size=(500, 8, 6)), 0, 1)
    got = release_means(table, y, basis=basis, center=center, random_bytes=rng.bytes)
    truth = ((y - center) @ basis.T).mean(axis=1)
    assert got.means.shape == (500, 2) and got.reconstructions.shape == (500, 6)
    assert abs((got.means - truth).std() / 0.25 - 1) < 0.1
    assert np.allclose(got.reconstructions, center + got.means @ basis)
    lat = release_means(table, rng.normal(size=(10, 8, 2)), latents=True, random_bytes=rng.bytes)
    assert lat.reconstructions is None and lat.means.shape == (10, 2)
    with pytest.raises(InvalidParameter, match="outputs"):
        release_means(table, np.full((2, 8, 2), -0.5))
    with pytest.raises(InvalidParameter, match="basis"):
        release_means(table, y, basis=basis[:, :5])


# --- the CLI (subprocesses) ---------------------------------------------------------------------------------

def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "darrm_opt", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow  # CLI subprocesses
def test_cli_calibrates_a_table_and_aggregates_an_npz_paid_from_a_ledger(tmp_path):
    r = _cli("gaussian", "--queries", "80", "--epsilon", "8", "--delta", "1e-3", "--K", "8", "--dim", "16",
             "--format", "json", "--out", "t.json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["kind"] == "gaussian-mean" and doc["noise"] == 4397 and doc["calibration"]["sigma_eq15"] > 1.28
    y = np.random.default_rng(0).random((5, 8, 16))
    np.savez(tmp_path / "o.npz", outputs=y)
    r = _cli("aggregate", "--table", "t.json", "--votes", "o.npz", "--format", "json", "--ledger", "L",
             "--ledger-db", "sqlite:///l.db", "--epsilon-budget", "8", "--delta-budget", "1e-3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert np.asarray(out["answers"]).shape == (5, 16) and out["ledger"]["answers"] == 5
    table = table_from_document(doc)
    spent = out["ledger"]["epsilon_spent"]  # the ledger's PLD composition of the pair, fine or coarse grid
    assert spent in (pytest.approx(exact_epsilon([(table.profile, 5)], 1e-3, coarse=c), rel=1e-12) for c in (0, 1))
    assert composed_epsilon(table.profile, 5, 1e-3) <= spent <= composed_epsilon(table.profile, 5, 1e-3) + 1e-6
    r = _cli("aggregate", "--table", "t.json", "--votes", "o.npz", cwd=tmp_path)  # csv, no ledger
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0].startswith("answer_0,answer_1") and len(lines) == 6
    assert all(len(line.split(",")) == 16 for line in lines)
    y[3, 2, 1] = np.nan
    np.save(tmp_path / "bad.npy", y)
    r = _cli("aggregate", "--table", "t.json", "--votes", "bad.npy", cwd=tmp_path)
    assert r.returncode == 2 and "votes" in r.stderr and "row 3" in r.stderr
    (tmp_path / "junk.npy").write_text("not an array")
    r = _cli("aggregate", "--table", "t.json", "--votes", "junk.npy", cwd=tmp_path)
    assert r.returncode != 0 and "junk.npy" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow  # a subprocess fitting 20 teachers
def test_the_digits_example_runs_small_and_writes_its_plot(tmp_path):
    plot = tmp_path / "gm.png"
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "gaussian_mean_digits.py"), str(plot), "--small"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert "ε = 4: eq. 15 asks for 1.199× the exact σ" in r.stdout
    rows = [line.split() for line in r.stdout.splitlines() if line.split()[:2] in (["16", "exact"],)]
    assert [int(row[3]) for row in rows] == [2, 8, 32]
    mse = [float(row[4]) for row in rows]
    predicted = [float(row[5]) for row in rows]
    assert mse[2] == pytest.approx(predicted[2], rel=0.2)  # at l = 32 the noise term l·σ² dominates both
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:4] == b"\x89PNG"
