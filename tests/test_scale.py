"""Speed-ups change nothing but speed; the Dask path gives the local path's certificate."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from darrm_opt.certify.certificate import certify
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.params import Params, parse_values
from darrm_opt.optimize.grid import solve_grid
from darrm_opt.optimize.optimizer import solve


@pytest.mark.parametrize("args", [dict(K=15, m=3), dict(K=21, m=2.5, teacher_delta=0.0), dict(K=13, m=4)])
def test_speedups_on_and_off_agree(args):
    params = Params(**args)
    fast = solve(params)
    plain = solve(params, use_pool=False, workers=1, batch=5)
    assert fast.certificate.certified and plain.certificate.certified
    assert fast.expected_error == pytest.approx(plain.expected_error, abs=1e-8)
    assert plain.sweeps > fast.sweeps  # the pool does save exhaustive sweeps


def test_warm_start_agrees_and_saves_iterations():
    a = solve(Params(21, 3))
    b = solve(Params(21, 3.5), seed_multisets=a.active_set)
    cold = solve(Params(21, 3.5))
    assert b.certificate.certified
    assert b.expected_error == pytest.approx(cold.expected_error, abs=1e-8)
    assert b.iterations <= cold.iterations


def test_grid_local_is_certified_and_matches_single_solves():
    params = [Params(k, m) for k in (11, 13) for m in (1, 2, 3)]
    sols = solve_grid(params)
    for p, s in zip(params, sols):
        assert s.params == p and s.certificate.certified
        assert s.expected_error == pytest.approx(solve(p).expected_error, abs=1e-8)


def test_parse_values():
    assert parse_values("K", "11..17", integer=True, odd=True) == [11, 13, 15, 17]
    assert parse_values("m", "1,2.5,1") == [1.0, 2.5]
    with pytest.raises(InvalidParameter, match="m"):
        parse_values("m", "1,x")


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


@pytest.mark.slow  # a Dask cluster
@pytest.mark.parametrize("K,method,total", [(21, "matrix", 1_184_040), (31, "structured", 12_620_256)])
def test_dask_sweep_gives_the_local_certificate(dask_client, K, method, total):
    from darrm_opt.certify.distributed import DaskSweepExecutor

    params = Params(K, 3)
    gamma = np.array(solve(params).gamma)
    ex = DaskSweepExecutor(dask_client)
    remote = certify(params, gamma, executor=ex, method=method)
    local = certify(params, gamma, method=method)
    assert remote.certified and local.certified
    assert remote.multisets_checked == local.multisets_checked == total
    assert remote.max_privacy_cost == local.max_privacy_cost
    assert remote.worst_multiset == local.worst_multiset
    # and a violating table is caught remotely as well
    bad = certify(params, np.ones(K + 1), executor=ex, method=method)
    assert not bad.certified and bad.worst_multiset == certify(params, np.ones(K + 1), method=method).worst_multiset


@pytest.mark.slow  # a Dask cluster
def test_dask_solve_and_grid_match_local(dask_client):
    from darrm_opt.certify.distributed import DaskSweepExecutor

    ex = DaskSweepExecutor(dask_client)
    p = Params(17, 3)
    assert solve(p, executor=ex).gamma == solve(p).gamma
    params = [Params(11, m) for m in (1, 2, 3)]
    remote = solve_grid(params, executor=ex)
    for p, s in zip(params, remote):
        assert s.params == p and s.certificate.certified
        assert s.expected_error == pytest.approx(solve(p).expected_error, abs=1e-12)


REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("DARRM_DASK_SCHEDULER", None)
    return env


@pytest.fixture(scope="module")
def dask_cli_cluster(tmp_path_factory):
    """A real ``dask scheduler`` and two ``dask worker`` processes on loopback, as a user starts them."""
    distributed = pytest.importorskip("distributed")
    dask_bin = Path(sys.executable).with_name("dask")
    if not dask_bin.exists():
        pytest.skip("the 'dask' command is not installed next to this Python")
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("dask")
    cmds = [[str(dask_bin), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]]
    cmds += [[str(dask_bin), "worker", address, "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"]] * 2
    procs = []
    try:
        for i, cmd in enumerate(cmds):
            procs.append(subprocess.Popen(cmd, env=_env(), stdout=open(logs / f"{i}.log", "w"),
                                          stderr=subprocess.STDOUT))
            if i == 0:
                time.sleep(1.0)
        with distributed.Client(address, timeout=30, set_as_default=False) as c:
            c.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def _cli_json(*args: str) -> object:
    out = subprocess.run([sys.executable, "-m", "darrm_opt", *args, "--format", "json", "--quiet"],
                         capture_output=True, text=True, env=_env(), cwd=REPO, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _cert(c: dict) -> dict:
    return {k: v for k, v in c.items() if k != "seconds"}


@pytest.mark.slow  # Dask scheduler and workers as processes
def test_cli_solve_on_a_dask_scheduler_gives_the_local_certificate(dask_cli_cluster):
    """`darrm-opt solve --dask-scheduler tcp://…` as a subprocess (no default client anywhere): the sweep
    of K = 21 (1,184,040 multisets, several task groups) runs on the two workers."""
    args = ("solve", "--K", "21", "--m", "3")
    remote = _cli_json(*args, "--dask-scheduler", dask_cli_cluster)
    local = _cli_json(*args)
    assert remote["certificate"]["certified"] and remote["certificate"]["multisets_checked"] == 1_184_040
    assert _cert(remote["certificate"]) == _cert(local["certificate"])
    assert remote["gamma"] == local["gamma"]
    for k in ("sub", "dsub", "const"):
        if local["baseline_certificates"][k] is not None:
            assert _cert(remote["baseline_certificates"][k]) == _cert(local["baseline_certificates"][k])


@pytest.mark.slow  # Dask scheduler and workers as processes
def test_cli_grid_on_a_dask_scheduler_matches_local(dask_cli_cluster):
    """`darrm-opt grid --dask-scheduler …`: one task per table on the workers; each table certified with the
    local run's certificate (the local run warm-starts, so equal optima are compared by value)."""
    args = ("grid", "--K", "11,13", "--m", "1,3")
    remote = _cli_json(*args, "--dask-scheduler", dask_cli_cluster)
    local = _cli_json(*args)
    assert [(r["K"], r["m"]) for r in remote] == [(r["K"], r["m"]) for r in local] == [
        (11, 1.0), (11, 3.0), (13, 1.0), (13, 3.0)]
    for r, l in zip(remote, local):
        assert r["certificate"]["certified"] and l["certificate"]["certified"]
        assert r["certificate"]["multisets_checked"] == l["certificate"]["multisets_checked"]
        assert r["certificate"]["bound"] == l["certificate"]["bound"]
        assert r["certificate"]["max_privacy_cost"] == pytest.approx(l["certificate"]["max_privacy_cost"], abs=1e-12)
        assert r["expected_error"] == pytest.approx(l["expected_error"], abs=1e-12)


@pytest.mark.slow  # waits out the Dask client's connect timeout (about 10 s)
def test_cli_dask_scheduler_unreachable_is_a_clear_error():
    from typer.testing import CliRunner

    from darrm_opt.cli import app

    r = CliRunner().invoke(app, ["solve", "--K", "5", "--m", "2", "--dask-scheduler", "tcp://127.0.0.1:9"])
    assert r.exit_code == 2 and "Dask scheduler" in r.output


def test_purging_slack_rows_keeps_the_optimum():
    """A cap on the LP's rows (Gurobi's size-limited licence) drops only non-binding rows."""
    p = Params(31, 3)
    capped = solve(p, max_active=150)
    free = solve(p)
    assert capped.active_constraints <= 150 < free.active_constraints
    assert capped.certificate.certified
    assert capped.expected_error == pytest.approx(free.expected_error, abs=1e-8)


@pytest.mark.parametrize("backend_name", ["highs", "gurobi", "cbc"])
def test_lp_sessions_track_added_and_removed_rows(backend_name):
    """Every backend's cutting-plane session gives the from-scratch optimum after adds and removals."""
    from darrm_opt import solvers
    from darrm_opt.solvers import LP

    if backend_name not in solvers.available_backends():
        pytest.skip(f"{backend_name} not available")
    backend = solvers.get_backend(backend_name)
    rng = np.random.default_rng(7)
    c = -rng.random(6)
    A = rng.random((40, 6))
    b = rng.random(40) + 0.5
    sess = backend.session(c, 0.0, 1.0)
    sess.add_rows(A[:25], b[:25])
    sess.solve()
    sess.remove_rows(np.array([0, 3, 24]))
    sess.add_rows(A[25:], b[25:])
    keep = np.ones(40, dtype=bool)
    keep[[0, 3, 24]] = False
    got = sess.solve()
    ref = backend.solve(LP(c, A[keep], b[keep], 0.0, 1.0))
    assert got.objective == pytest.approx(ref.objective, abs=1e-8)


@pytest.mark.slow  # 4.6 M multisets certified
def test_pure_k301_m3_solves_despite_hard_lp_numerics():
    """Regression: at K = 301 (pure DP) the LP rows span 1e-25..1e-1 and HiGHS's dual simplex at tolerance
    1e-9 ends without a verdict; the backend retries (primal simplex, IPM, unscaled) and the result certifies."""
    sol = solve(Params(301, 3, teacher_delta=0.0, delta=0.0))
    assert sol.certificate.certified
    assert sol.certificate.multisets_checked == 4_636_304
    assert 0.06 < sol.expected_error < 0.065


class _OvershootingHighs:
    """The real HiGHS backend whose every LP solution comes back scaled up by ``factor``: a solver that
    meets its rows only to a loose tolerance. The optimiser must rescue γ by scaling it into the bound."""

    name = "highs"

    def __init__(self, factor: float) -> None:
        from darrm_opt import solvers

        self.inner = solvers.get_backend("highs")
        self.factor = factor

    def _bump(self, res):
        import dataclasses

        return dataclasses.replace(res, x=res.x * self.factor)

    def solve(self, lp, **kw):
        return self._bump(self.inner.solve(lp, **kw))

    def session(self, c, lb, ub, **kw):
        sess = self.inner.session(c, lb, ub, **kw)
        outer = self

        class Session:
            add_rows = sess.add_rows
            remove_rows = sess.remove_rows

            def solve(self):
                return outer._bump(sess.solve())

        return Session()


def test_rescue_after_sweep_scales_into_the_target():
    from darrm_opt.optimize.optimizer import rescue_after_sweep

    g = np.array([0.5, 0.9, 1.0])
    assert rescue_after_sweep(g, 0.3, 0.35) is g  # within the target: untouched
    out = rescue_after_sweep(g, 0.4, 0.35)
    assert np.all(out < g) and np.max(out / g) <= 0.35 / 0.4  # rounded down, never up


@pytest.mark.parametrize("use_pool", [False, True])
def test_lazy_mode_rescues_an_overshooting_solver(use_pool):
    """Lazy mode: only LP rows exceed the bound (the solver's overshoot), so γ is scaled by bound/max_cost.
    Without the pool the final sweep finds them and the scaled γ gets a fresh certification sweep; with the
    pool (in-out separation), the LP point scaled into the known rows becomes the core, which the sweep then
    certifies directly."""
    p = Params(15, 3)
    events = []
    sol = solve(p, solver=_OvershootingHighs(1 + 2e-6), use_pool=use_pool,
                progress=lambda stage, **_: events.append(stage))
    ref = solve(p)
    assert sol.certificate.certified and sol.certificate.max_privacy_cost <= p.bound
    assert ("certify" in events) is (not use_pool)
    assert sol.gamma != ref.gamma
    assert sol.expected_error == pytest.approx(ref.expected_error, abs=1e-5)
    assert sol.expected_error >= ref.expected_error - 1e-12  # scaled down: never better than the optimum


def test_full_mode_rescues_an_overshooting_solver():
    """Full mode: the certificate of the LP's γ fails, γ is scaled into bound − τ and certified again."""
    p = Params(5, 2)
    sol = solve(p, mode="full", solver=_OvershootingHighs(1 + 1e-5))
    ref = solve(p, mode="full")
    assert ref.sweeps == 1 and sol.sweeps == 2  # the rejected sweep and the rescued one
    assert sol.certificate.certified and sol.certificate.max_privacy_cost <= p.bound - 0.9e-8
    assert sol.expected_error == pytest.approx(ref.expected_error, abs=1e-4)


def test_candidate_pool_within_a_memory_budget(monkeypatch):
    """No cliff: a small budget keeps every ≤ 2-corner multiset and thins the 3-corner ones evenly; the
    optimum is the same (the exhaustive sweep finds whatever the pool misses)."""
    from darrm_opt.model.constraints import candidate_counts
    from darrm_opt.model.corners import multisets_with_few_corners

    p = Params(31, 3)
    full = candidate_counts(p)
    assert full.shape[0] == multisets_with_few_corners(31, 8, 3).shape[0] == 8 + 28 * 30 + 56 * 435
    budget = 4 * p.n_free * 5_000
    thin = candidate_counts(p, budget_bytes=budget)
    assert 3_000 < thin.shape[0] <= 5_000
    two = {tuple(int(x) for x in c) for c in multisets_with_few_corners(31, 8, 2)}
    assert two <= {tuple(int(x) for x in c) for c in thin}
    assert {tuple(int(x) for x in c) for c in thin} <= {tuple(int(x) for x in c) for c in full}
    monkeypatch.setenv("DARRM_POOL_BYTES", str(budget))
    thin_sol = solve(p)
    monkeypatch.delenv("DARRM_POOL_BYTES")
    assert thin_sol.certificate.certified
    assert thin_sol.expected_error == pytest.approx(solve(p).expected_error, abs=1e-8)


def _objective(sol):
    from darrm_opt.model.objective import objective_weights

    K = sol.params.K
    return float(objective_weights(K, sol.params.prior) @ np.array(sol.gamma[(K + 1) // 2 :]))


def test_inout_stopping_rule_is_within_its_stated_gap_of_the_full_lp():
    """Pure DP uses in-out separation: it stops when a certified core is within ``gap`` (1e-9) of the LP's
    value. The reported objective_gap bounds the distance to the exact optimum: the full LP's certified γ
    (every row at once) is never above the bound it implies, and the core is within 1e-9 of the full LP."""
    p = Params(61, 3, teacher_delta=0.0, delta=0.0)
    lazy, full = solve(p), solve(p, mode="full")
    assert lazy.certificate.certified and full.certificate.certified
    assert 0.0 <= lazy.objective_gap < 1e-9 + 1.01e-8 / p.bound  # the convergence gap plus the LP's tightening τ
    upper = _objective(lazy) / (1.0 - lazy.objective_gap)
    assert _objective(full) <= upper
    assert _objective(lazy) >= _objective(full) * (1.0 - 1e-9)


def test_inout_agrees_with_plain_cutting_planes_and_saves_rounds():
    """At K = 101 (pure) the in-out loop returns a certified γ within 1e-9 of the plain loop's objective, with
    no more LP rounds; at K = 301 plain cutting planes chase a degenerate optimal face (236 rounds)."""
    p = Params(101, 3, teacher_delta=0.0, delta=0.0)
    inout, plain = solve(p), solve(p, inout=False)
    assert inout.certificate.certified and plain.certificate.certified
    assert _objective(inout) == pytest.approx(_objective(plain), rel=1e-9)
    assert inout.iterations <= plain.iterations
    assert inout.expected_error == pytest.approx(plain.expected_error, abs=1e-8)


def test_pool_rows_kept_between_rounds_are_bitwise_fresh_rows(monkeypatch):
    """The pool keeps float64 rows between rounds (in-out separation asks for the same near rows each round);
    a kept row, a row computed in another batch and a row after the cache starts afresh are the row computed
    with the query's batch, up to the FFT's batch-dependent last bits."""
    from darrm_opt.model.constraints import CandidatePool, candidate_pool

    p = Params(41, 3, teacher_delta=0.0, delta=0.0)
    pool = candidate_pool(p)
    rng = np.random.default_rng(0)
    a = rng.choice(pool.size, 300, replace=False)
    b = np.concatenate([a[:100], rng.choice(pool.size, 200, replace=False)])
    first, second = pool.rows64(a), pool.rows64(b)
    assert pool._used == np.unique(np.concatenate([a, b])).size  # each row computed once
    for idx, got in ((a, first), (b, second)):
        np.testing.assert_allclose(got, pool.builder.rows(pool.counts[idx]), rtol=0, atol=1e-13)
    assert np.array_equal(second[:100], first[:100])  # kept, not recomputed
    monkeypatch.setattr(CandidatePool, "CACHE_BYTES", 8 * pool.builder.high.size * 450)  # forces a restart
    c = rng.choice(pool.size, 200, replace=False)
    np.testing.assert_allclose(pool.rows64(c), pool.builder.rows(pool.counts[c]), rtol=0, atol=1e-13)
    assert pool._used == np.unique(c).size


def test_pool_costs_are_those_of_its_rows_kept_or_not(monkeypatch):
    """``costs64`` (what the line search reads) is ``rows64(idx) @ points`` from kept rows, and from fresh
    rows computed in chunks when they would not fit the cache (nothing is then kept)."""
    from darrm_opt.model.constraints import CandidatePool, candidate_pool

    p = Params(41, 3, teacher_delta=0.0, delta=0.0)
    pool = candidate_pool(p)
    rng = np.random.default_rng(1)
    idx = rng.choice(pool.size, 500, replace=False)
    pts = rng.random((p.n_free, 2))
    ref = pool.builder.rows(pool.counts[idx]) @ pts
    np.testing.assert_allclose(pool.costs64(idx, pts, chunk=64), ref, rtol=0, atol=1e-12)
    assert pool._used == idx.size
    np.testing.assert_allclose(pool.costs64(idx, pts), pool.rows64(idx) @ pts, rtol=0, atol=1e-12)
    fresh = candidate_pool(p)
    monkeypatch.setattr(CandidatePool, "CACHE_BYTES", 8 * p.n_free * 400)  # 500 rows do not fit
    np.testing.assert_allclose(fresh.costs64(idx, pts, chunk=64), ref, rtol=0, atol=1e-12)
    assert fresh._used == 0


@pytest.mark.slow  # 25 examples up to K = 41
@settings(max_examples=25, deadline=None)
@given(K=st.integers(1, 41).filter(lambda k: k % 2), eps=st.sampled_from([0.01, 0.1, 1.0]),
       td=st.sampled_from([0.0, 1e-3]), m=st.sampled_from([1.0, 3.0, 7.5]), seed=st.integers(0, 2**32 - 1))
def test_shift_families_cost_every_multiset_of_one_random_corner_as_its_row_does(K, eps, td, m, seed):
    """ShiftFamilies (one FFT correlation per random corner) gives each multiset of (0, 0), (1, 1) and one other
    corner the cost of its float64 LP row, well within its stated margin, and lists each such multiset once."""
    from darrm_opt.model.constraints import RowBuilder, ShiftFamilies, deterministic_corners
    from darrm_opt.model.corners import compositions

    K = K if td == 0 else min(K, 15)  # the expected set below lists every multiset: C(K + 7, 7) for Δ > 0
    p = Params(K, min(m, K), epsilon=eps, teacher_delta=td, delta=min(0.5, 3 * td))
    b = RowBuilder(p)
    fam = ShiftFamilies(p, b.corners, b.E)
    g = np.random.default_rng(seed).random(p.n_free)
    h = np.zeros(K + 1)
    h[b.high], h[b.low] = g, -g
    got, ref = fam.costs(h), b.rows(fam.counts) @ g
    assert np.abs(got - ref).max() <= fam.margin * 1e-3
    z, o = deterministic_corners(b.corners)
    every = compositions(K, b.corners.shape[0])
    random = np.ones(b.corners.shape[0], dtype=bool)
    random[[z, o]] = False
    expected = {tuple(int(x) for x in c) for c in every if (c[random] > 0).sum() <= 1}
    listed = [tuple(int(x) for x in c) for c in fam.counts]
    assert len(listed) == len(set(listed)) and set(listed) == expected


def test_pool_with_shift_families_holds_the_same_multisets_and_finds_the_same_violations():
    """The pure-DP pool (shift families exact, the other ≤ 3-corner multisets as rows) holds the multisets of
    the plain pool; ``near`` returns every multiset costing more than the level and ``violated`` the same
    most violated multiset, at a γ where many rows are violated."""
    from darrm_opt.model.constraints import candidate_pool

    p = Params(61, 3, teacher_delta=0.0, delta=0.0)
    plain, shift = candidate_pool(p), candidate_pool(p, shift=True)
    assert shift.shift is not None and shift.rows32.shape[0] < plain.rows32.shape[0]
    as_set = lambda pool: {tuple(int(x) for x in c) for c in pool.counts}  # noqa: E731
    assert as_set(plain) == as_set(shift) and shift.size == plain.size
    g = np.random.default_rng(3).random(p.n_free)
    level = 0.5 * p.bound
    costs = shift.builder.rows(shift.counts) @ g
    near = shift.near(g, level, cap=10**6)
    assert near is not None
    assert set(np.flatnonzero(costs > level)) <= set(near[0].tolist())
    a, b = plain.violated(g, level, 5), shift.violated(g, level, 5)
    assert a[2] == pytest.approx(b[2], rel=1e-12) and a[2] == pytest.approx(costs.max(), rel=1e-12)


def test_pool_screen_of_the_same_point_and_level_is_reused_and_equals_a_fresh_one():
    """In-out separation screens the same γ at the same level twice in a round (``near`` then ``violated``):
    the second screen returns the first's arrays (read-only), equal to a fresh screen; another point or level
    screens again."""
    from darrm_opt.model.constraints import candidate_pool

    p = Params(41, 3, teacher_delta=0.0, delta=0.0)
    pool = candidate_pool(p, shift=True)
    rng = np.random.default_rng(7)
    g, g2 = rng.random(p.n_free), rng.random(p.n_free)
    level = 0.5 * p.bound
    first = pool._screen(g, level)
    assert pool._screen(g.copy(), level) is first  # equal values, another array: reused
    assert not first[0].flags.writeable and not first[1].flags.writeable
    for a, b in zip(first, pool._screen_now(g, level), strict=True):
        np.testing.assert_array_equal(a, b)
    other = pool._screen(g2, level)
    assert other is not first and not np.array_equal(other[1], first[1])
    assert pool._screen(g2, 0.25 * p.bound) is not other
    near = pool.near(g, level, cap=10**6)
    assert near is not None
    np.testing.assert_array_equal(near[0], first[0])
    a = pool.violated(g, level, 5)
    costs = pool.builder.rows(pool.counts) @ g
    assert a[2] == pytest.approx(costs.max(), rel=1e-12)


def _spread_out_plain(counts, limit, spread):
    """The greedy rule row by row: a row is picked when it is ≥ spread (L1) from every earlier pick."""
    if counts.shape[0] == 0:
        return np.zeros(0, dtype=np.intp)
    if spread <= 0:
        return np.arange(min(limit, counts.shape[0]))
    picked = [0]
    for i in range(1, counts.shape[0]):
        if len(picked) >= limit:
            break
        if np.abs(counts[picked] - counts[i]).sum(axis=1).min() >= spread:
            picked.append(i)
    return np.array(picked)


@pytest.mark.slow  # 200 examples against a Python loop
@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 3000), limit=st.integers(1, 40), spread=st.integers(0, 25), seed=st.integers(0, 2**32 - 1))
def test_spread_out_is_the_row_by_row_greedy_rule(n, limit, spread, seed):
    from darrm_opt.model.constraints import spread_out

    counts = np.random.default_rng(seed).integers(0, 12, size=(n, 4)).astype(np.int32)  # n > 1024: the prefix grows
    assert np.array_equal(spread_out(counts, limit, spread), _spread_out_plain(counts, limit, spread))


def test_pool_budget_per_problem(monkeypatch):
    """Pure DP gets the thin pool's budget, Δ > 0 the large one; DARRM_POOL_BYTES overrides both, and the
    candidate multisets stay within the budget's rows."""
    from darrm_opt.model.constraints import POOL_BYTES, PURE_POOL_BYTES, candidate_counts, pool_budget

    monkeypatch.delenv("DARRM_POOL_BYTES", raising=False)
    pure, approx = Params(501, 3, teacher_delta=0.0, delta=0.0), Params(31, 3)
    assert (pool_budget(pure), pool_budget(approx), pool_budget()) == (PURE_POOL_BYTES, POOL_BYTES, POOL_BYTES)
    assert PURE_POOL_BYTES < POOL_BYTES
    assert candidate_counts(pure, shift=True).shape[0] <= PURE_POOL_BYTES // (4 * pure.n_free)
    monkeypatch.setenv("DARRM_POOL_BYTES", "4096")
    assert pool_budget(pure) == pool_budget(approx) == 4096
