"""γ_opt: the DaRRM optimisation problem (Sec. 5, App. C) solved as a linear program.

    minimise   −Σ_j w_j g_j                       (App. C.1, exact weights: darrm_opt.objective)
    subject to row(n) · g ≤ e^{mε} − 1 + 2δ       for every corner multiset n (Lemma 3.4, App. C.3)
               0 ≤ g_j ≤ 1

Two modes. ``full``: every row in one LP, the paper's method. ``lazy`` (default): cutting planes — solve
over an active set, add the most violated multisets found first in a cheap pool (multisets of ≤ 3 distinct
corners, within a memory budget) and otherwise by an exhaustive sweep, which returns many cuts at once,
until the sweep finds none. Rows that have been slack for a while are purged so the LP stays small.
The LP's optimal face is degenerate (most γ(l) carry objective weights below 1e-9 of the largest; at m = 1
every γ_Sub row is tight), so lazy mode uses in-out separation (:func:`_solve_in_out`): a core γ that meets
every known row is moved towards each LP point, and the loop stops when its objective is within ``gap`` of
the LP's value and an exhaustive sweep certifies it. Every solution reports ``objective_gap``, its distance to
the LP bound.

LP solvers meet rows only to a feasibility tolerance, so the LP is solved against a bound tightened by
τ = 1e-8·max(bound, 1). Two rescues keep an overshooting solver safe, both by scaling γ by
(target)/max_cost (f is linear in γ and the bound is positive, so every constraint is kept):
:func:`rescue_after_sweep` when the final sweep finds only active rows above bound − τ/2, and
:func:`_certified` when a certification sweep rejects γ (full mode). Whatever the path, the returned γ
carries a :class:`~darrm_opt.certify.certificate.Certificate` from a full sweep, and :func:`solve` raises
:class:`~darrm_opt.errors.CertificationFailed` rather than return an uncertified table.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from darrm_opt import solvers
from darrm_opt.certify.certificate import Certificate, certify_and_separate
from darrm_opt.certify.sweep import SweepResult
from darrm_opt.errors import (
    CertificationFailed,
    InvalidParameter,
    SolverFailed,
    SolverLimitExceeded,
    SolverUnavailable,
)
from darrm_opt.model.constraints import CandidatePool, RowBuilder, all_multisets, candidate_pool, spread_out
from darrm_opt.model.corners import n_corners, n_multisets
from darrm_opt.model.objective import expected_error, objective_weights
from darrm_opt.model.params import Params
from darrm_opt.solvers import LP, ModelTooLargeError, SolverUnavailableError, Status

MODES = ("lazy", "full")
TIGHTEN_REL = 1e-8
#: Full mode refuses problems whose rows would exceed this much memory.
FULL_MODE_MAX_BYTES = 1 << 30


def mirror(g: np.ndarray, K: int) -> np.ndarray:
    """Full symmetric γ(0..K) from its free values γ((K+1)/2..K)."""
    g = np.asarray(g, dtype=np.float64)
    return np.concatenate([g[::-1], g]) if K >= 1 else g


@dataclass(frozen=True)
class Solution:
    params: Params
    gamma: tuple[float, ...]
    certificate: Certificate
    solver: str
    mode: str
    expected_error: float
    iterations: int
    active_constraints: int
    sweeps: int
    seconds: float
    lp_seconds: float
    sweep_seconds: float
    active_set: tuple[tuple[int, ...], ...] = field(default=(), repr=False)
    #: the sweep behind ``certificate`` (its argmax multisets; with ``solve(wide=...)`` the multisets near the
    #: bound), for work that would otherwise repeat it: the privacy profile, certifying the printed decimals
    sweep: SweepResult | None = field(default=None, repr=False, compare=False)
    #: 1 − w·γ / U, U the LP relaxation's value (over the last LP's rows, scaled from bound − τ to the bound):
    #: how far the returned objective can be below the exact problem's optimum, relatively (≥ 0)
    objective_gap: float | None = None

    def to_dict(self) -> dict:
        return {
            **self.params.canonical(),
            "solver": self.solver,
            "mode": self.mode,
            "gamma": list(self.gamma),
            "certificate": self.certificate.to_dict(),
            "expected_error": self.expected_error,
            "iterations": self.iterations,
            "active_constraints": self.active_constraints,
            "sweeps": self.sweeps,
            "objective_gap": self.objective_gap,
            "seconds": self.seconds,
        }


class ActiveSet:
    """The cutting-plane rows: count vectors and their LP rows, with optional purging of slack rows."""

    def __init__(self, builder: RowBuilder, max_rows: int | None, session, rhs: float) -> None:
        self.builder = builder
        self.max_rows = max_rows
        self.session = session  #: the backend's LP kept in step with the rows
        self.rhs = rhs
        self.keys: list[tuple[int, ...]] = []
        self._index: set[tuple[int, ...]] = set()
        self.rows = np.zeros((0, builder.high.size))

    @property
    def size(self) -> int:
        return len(self.keys)

    def add(self, counts: np.ndarray, limit: int | None = None, rows: np.ndarray | None = None) -> int:
        """Add up to ``limit`` multisets not yet present (in the given order; ``rows`` are their LP rows if
        already built); returns how many."""
        new, pick = [], []
        for i, c in enumerate(counts):
            key = tuple(int(x) for x in c)
            if key not in self._index:
                self._index.add(key)
                new.append(key)
                pick.append(i)
                if limit is not None and len(new) >= limit:
                    break
        if new:
            new_rows = self.builder.rows(np.array(new)) if rows is None else np.asarray(rows)[pick]
            self.keys.extend(new)
            self.rows = np.concatenate([self.rows, new_rows])
            self.session.add_rows(new_rows, np.full(len(new), self.rhs))
        return len(new)

    def purge(self, g: np.ndarray, slack_level: float, keep: int) -> int:
        """Drop the rows whose cost at ``g`` is below ``slack_level`` (clearly not binding), keeping at least the
        ``keep`` costliest; the LP optimum is unchanged (their duals are zero). Returns how many went."""
        if self.size <= keep:
            return 0
        costs = self.rows @ g
        order = np.argsort(-costs, kind="stable")
        drop = order[keep:][costs[order[keep:]] < slack_level]
        self._drop(drop)
        return int(drop.size)

    def _drop(self, drop: np.ndarray) -> None:
        if drop.size == 0:
            return
        mask = np.ones(self.size, dtype=bool)
        mask[drop] = False
        self.session.remove_rows(drop)
        self.keys = [k for k, m in zip(self.keys, mask) if m]
        self._index = set(self.keys)
        self.rows = self.rows[mask]

    def make_room(self, incoming: int, g: np.ndarray, binding_level: float) -> None:
        """Keep size + incoming within max_rows by dropping rows that are not binding at ``g``."""
        if self.max_rows is None or self.size + incoming <= self.max_rows:
            return
        costs = self.rows @ g
        keep = costs >= binding_level
        excess = self.size + incoming - self.max_rows
        slack_idx = np.flatnonzero(~keep)
        drop = slack_idx[np.argsort(costs[slack_idx])][:excess]  # the slackest first
        self._drop(drop)


def _row_limit(backend) -> int | None:
    limit = getattr(backend, "SIZE_LIMIT", None)
    return None if limit is None else int(limit * 0.9)


def lp_backend(solver):
    """The backend for a name, or ``solver`` itself if it already is one (a module or object with ``name``,
    ``solve`` and ``session``, as :mod:`solvers` defines them)."""
    if not isinstance(solver, str):
        return solver
    try:
        return solvers.get_backend(solver)
    except SolverUnavailableError as exc:
        from darrm_opt.extras import EXTRAS, install_hint, missing_modules

        key = solver.strip().lower()
        hint = f" (install it with {install_hint(key)})" if key in EXTRAS and missing_modules(key) else ""
        raise SolverUnavailable(f"{exc}{hint}") from None


def solve_lp(backend, lp, mode: str):
    """Solve an :class:`LP` (or call a session's ``solve``), turning backend refusals into our errors."""
    try:
        res = lp() if callable(lp) else backend.solve(lp, feasibility_tol=1e-9)
    except ModelTooLargeError as exc:
        hint = "use --mode lazy (few active rows)" if mode == "full" else "use --solver highs"
        raise SolverLimitExceeded(f"{exc}; {hint}") from None
    if res.status is not Status.OPTIMAL:
        raise SolverFailed(f"LP solver {backend.name} returned {res.status.value}: {res.message}")
    return res


@dataclass
class _Run:
    """One solve's fixed inputs and running totals."""

    params: Params
    backend: Any
    mode: str
    progress: Any
    executor: Any
    workers: int | None
    sweep_method: str
    wide: float | None = None
    #: the certifying sweeps also keep the slope front of γ (SweepResult.front, for the privacy profile)
    front: bool = False
    builder: RowBuilder = field(init=False)
    w: np.ndarray = field(init=False)
    lp_seconds: float = 0.0
    sweep_seconds: float = 0.0
    iterations: int = 0
    sweeps: int = 0
    last_sweep: SweepResult | None = None
    #: an upper bound on the last LP's optimum (its proven dual bound where the backend gives one, else w·g)
    lp_value: float | None = None
    #: how much the backend lowered the last LP's row bounds to drop tiny entries (solvers.base.drop_small)
    lp_restriction: float = 0.0

    def __post_init__(self) -> None:
        self.builder = RowBuilder(self.params)
        self.w = objective_weights(self.params.K, self.params.prior)

    @property
    def bound(self) -> float:
        return self.params.bound

    @property
    def tighten(self) -> float:
        """τ: the LP's rows use bound − τ."""
        return TIGHTEN_REL * max(self.bound, 1.0)

    @property
    def b_lp(self) -> float:
        return self.bound - self.tighten

    @property
    def b_sep(self) -> float:
        """Separation level: a multiset costlier than bound − τ/2 is violated."""
        return self.bound - 0.5 * self.tighten

    def notify(self, stage: str, **info) -> None:
        if self.progress:
            self.progress(stage, **info)

    def lp(self, lp) -> np.ndarray:
        res = solve_lp(self.backend, lp, self.mode)
        self.lp_seconds += res.seconds
        g = np.clip(res.x, 0.0, 1.0)
        self.lp_value = float(self.w @ g) if res.dual_bound is None else max(float(self.w @ g), -res.dual_bound)
        self.lp_restriction = res.restriction
        return g

    def objective_gap(self, g: np.ndarray) -> float | None:
        """1 − w·g / U with U = lp_value · bound / (bound − τ − 2ρ), ρ = lp_restriction: if g* is optimal for the
        exact problem, c·g* with c = (bound − τ − 2ρ)/bound meets every LP row at bound − τ − 2ρ (rows are
        homogeneous in γ, 0 ≤ γ ≤ 1) and so the backend's rows, whose dropped entries add at most ρ; hence
        w·g* ≤ lp_value / c = U."""
        if self.lp_value is None or self.lp_value <= 0:
            return None
        return max(0.0, 1.0 - float(self.w @ g) / (self.lp_value * self.bound / (self.b_lp - 2 * self.lp_restriction)))

    def certify(self, gamma: np.ndarray, stage: str = "certify") -> Certificate:
        cert, self.last_sweep = certify_and_separate(
            self.params, gamma, executor=self.executor, workers=self.workers, method=self.sweep_method,
            progress=self._sweep_progress(f"{stage}-progress"), wide=self.wide, front=self.front)
        self.sweep_seconds += cert.seconds
        self.sweeps += 1
        return cert

    def separate(self, g: np.ndarray, top: int):
        """One exhaustive sweep of γ = mirror(g): its certificate and up to ``top`` violated multisets."""
        self.sweeps += 1
        self.notify("sweep", iteration=self.iterations)
        cert, sw = certify_and_separate(
            self.params, mirror(g, self.params.K), threshold=self.b_sep, top=top, executor=self.executor,
            workers=self.workers, method=self.sweep_method, progress=self._sweep_progress("sweep-progress"),
            wide=self.wide, front=self.front)
        self.sweep_seconds += sw.seconds
        self.last_sweep = sw
        return cert, sw

    def _sweep_progress(self, stage: str):
        return lambda d, t, worst: self.notify(stage, done=d, total=t, worst=worst)


def rescue_after_sweep(g: np.ndarray, max_cost: float, target: float) -> np.ndarray:
    """γ scaled by target / max_cost (rounded down) when the sweep's maximum exceeds ``target``.

    f(n; cγ) = c f(n; γ) for every multiset (Lemma 3.4 is linear in γ) and the bound is positive, so the
    scaled γ satisfies every constraint that γ met up to max_cost. Used when the only multisets above the
    separation level are already LP rows: the solver met them only to its tolerance. A level ≤ 0 (a bound
    below the sweep's float margin, e.g. ε = 5e-324) is met by γ ≡ 0 alone, the fair coin, whose every cost
    is 0."""
    if max_cost <= target:
        return g
    if target <= 0:
        return np.zeros_like(g)
    return g * np.nextafter(target / max_cost, 0.0)


def _certified(run: _Run, gamma: np.ndarray, cert: Certificate | None) -> tuple[np.ndarray, Certificate]:
    """γ and a certificate from a full sweep: ``cert`` if given, else a new one; a rejected γ (full mode, or a
    solver that overshoots its tolerance) is scaled into bound − τ (see :func:`rescue_after_sweep`) and
    certified again."""
    if cert is None:
        run.notify("certify")
        cert = run.certify(gamma)
    if not cert.certified and cert.max_privacy_cost > 0:
        gamma = rescue_after_sweep(gamma, cert.max_privacy_cost, run.b_lp)
        cert = run.certify(gamma)
    return gamma, cert


def _solve_full(run: _Run) -> tuple[np.ndarray, list]:
    """Every row in one LP (the paper's method); refused when the rows would not fit in memory."""
    params = run.params
    n_rows = n_multisets(params.K, n_corners(params))
    rows_bytes = n_rows * (params.n_free + 1) * 8
    if rows_bytes > FULL_MODE_MAX_BYTES:
        raise InvalidParameter(
            "mode", f"full mode holds all {n_rows:,} rows in memory "
            f"({rows_bytes / 2**30:.1f} GiB > {FULL_MODE_MAX_BYTES / 2**30:.0f} GiB); use --mode lazy")
    counts = all_multisets(params)
    run.notify("build", rows=counts.shape[0])
    rows = run.builder.rows(counts)
    n = run.w.size
    g = run.lp(LP(-run.w, rows, np.full(rows.shape[0], run.b_lp), np.zeros(n), np.ones(n)))
    run.iterations = 1
    active = [tuple(int(x) for x in c) for c in counts[np.abs(rows @ g - run.b_lp) <= 1e-7]]
    return g, active


@dataclass(frozen=True)
class LazyOptions:
    """Knobs of the cutting-plane loop (defaults chosen with benchmarks/solve_scaling.py)."""

    use_pool: bool = True
    #: rows added per round from the pool
    batch: int = 40
    #: rows added per exhaustive sweep (many cuts per sweep: sweeps are the expensive step)
    sweep_cuts: int = 400
    seed_multisets: Any = None
    max_iterations: int = 2000
    #: LP row cap (default: the backend's licence limit, if any)
    max_active: int | None = None
    #: purge rows slack by more than ``purge_gap``·bound once the LP has more than ``purge_at`` rows (the
    #: LP's simplex iterations per round grow with its rows: at pure K = 1001 the LP took 96 s of a solve with
    #: 4000, 27 s with 400; a purged row that matters again is found again in the pool or by the sweep)
    purge_at: int = 800
    purge_gap: float = 1e-3
    #: relative optimality gap: stop when no multiset costs more than (1 + gap)·(bound − τ/2) and return γ
    #: scaled into the bound. The LP over a subset of rows bounds the optimum from above, so the returned
    #: objective is within a factor 1 − gap of the optimal one.
    gap: float = 1e-9
    #: pool cuts of one round are at least spread_frac·K apart (L1 distance of count vectors); 0: off
    spread_frac: float = 0.2
    #: in-out separation (see :func:`_solve_in_out`), on by default with the pool: on the LP's degenerate
    #: optimal face plain cutting planes chase 0.1–1 % violations for hundreds of rounds (pure DP at K = 301),
    #: and at K = 101, m = 1 (Δ > 0) they took 72–93 rounds against in-out's 44
    inout: bool = True
    #: the in-out line search skips a round when more pool rows than this are near or above the level
    inout_rows: int = 50_000

    def spread(self, K: int) -> int:
        return int(round(self.spread_frac * K))


@dataclass(frozen=True)
class _Core:
    """The inner point of in-out separation: free values g that meet every pool row and every LP row at the
    separation level (checked in float64), and its objective w·g."""

    g: np.ndarray
    value: float


def _line_search(run: _Run, pool: CandidatePool, act: ActiveSet, core: _Core, g: np.ndarray, cap: int):
    """The best point on the segment from the core to the LP point g that meets every pool and LP row at
    b_sep, and the pool rows violated at g, most blocking first: (new core, their pool indices), or
    (core, None) when more than ``cap`` pool rows are near the level (far from the optimum: plain cuts).

    Each row is linear along the segment, cost(λ) = (1 − λ)·c_core + λ·c_g, and c_core ≤ b_sep, so the
    largest feasible λ is min (b_sep − c_core)/(c_g − c_core) over the rows with c_g > b_sep; pool rows the
    float32 screen puts below the level minus its margin cannot block (see :meth:`CandidatePool.near`)."""
    lev = run.b_sep
    pair = np.stack([g, core.g], axis=1)
    near = pool.near(g, lev, cap, points=pair)
    if near is None:
        return core, None
    idx, costs = near
    if act.size:
        costs = np.concatenate([costs, act.rows @ pair])  # the pool's near rows, then the LP's
    c_g, c_core = costs[:, 0], costs[:, 1]
    rise = c_g - c_core
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where((c_g > lev) & (rise > 0), (lev - c_core) / rise, np.inf)
    lam = float(ratio.min(initial=np.inf))
    lam = 1.0 if lam >= 1.0 else max(0.0, float(np.nextafter(lam, 0.0)))
    cand = core.g + lam * (g - core.g)
    # the LP point scaled into the same rows is inner too (rows are homogeneous in γ, the level is positive,
    # and a row not above the level stays so when γ shrinks); it wins when the LP point breaks its own rows
    # by the solver's tolerance only
    top = float(c_g.max(initial=0.0))
    scaled = rescue_after_sweep(g, top, lev)
    for point in (cand, scaled):
        value = float(run.w @ point)
        if value > core.value:
            core = _Core(point, value)
    viol = np.flatnonzero(c_g[: idx.size] > lev)
    return core, idx[viol[np.argsort(ratio[viol], kind="stable")]]


def _finish_core(run: _Run, opts: LazyOptions, act: ActiveSet, core: _Core):
    """Sweep the core: (γ, its certificate) when nothing exceeds the level (within ``gap``) and the sweep
    certifies it, else
    (None, the core scaled into every row) after adding the sweep's violators to the LP."""
    cert, sw = run.separate(core.g, opts.sweep_cuts)
    if sw.max_cost <= run.b_sep * (1.0 + opts.gap) and cert.certified:  # the line search's level, in float
        return (core.g, cert), core
    scaled = rescue_after_sweep(core.g, sw.max_cost, run.b_sep)
    act.make_room(opts.sweep_cuts, core.g, run.b_lp - 1e-9 * max(run.bound, 1.0))
    added = act.add(sw.violators, limit=opts.sweep_cuts)
    if added == 0:  # only LP rows are violated: the scaled core meets every row
        return (scaled, None), core
    return None, _Core(scaled, float(run.w @ scaled))


def _lp_round(run: _Run, opts: LazyOptions, act: ActiveSet, g: np.ndarray) -> np.ndarray:
    """One cutting-plane round's LP point: the LP over the active rows (``g`` while there are none), the
    round counted against ``max_iterations``, slack rows purged past ``purge_at``."""
    if act.size:
        g = run.lp(act.session.solve)
    run.iterations += 1
    if run.iterations > opts.max_iterations:
        raise SolverFailed(f"cutting planes did not converge in {opts.max_iterations} iterations")
    if act.size > opts.purge_at:
        act.purge(g, run.bound * (1.0 - opts.purge_gap), keep=opts.purge_at // 2)
    return g


def _solve_in_out(run: _Run, opts: LazyOptions, act: ActiveSet, pool: CandidatePool):
    """Cutting planes with in-out separation (Ben-Ameur & Neto): besides the LP point (an upper bound on the
    objective, infeasible until the end) keep a core point that meets every pool and LP row, moved each round
    as far towards the LP point as those rows allow (:func:`_line_search`). Cuts are the pool rows that block
    that move. Stop when the core's objective is within the relative ``gap`` of the LP's value and an
    exhaustive sweep finds the core within the level; the LP vertex itself need not become feasible (on a
    degenerate optimal face it may take hundreds of rounds to)."""
    core = _Core(np.zeros(run.w.size), 0.0)  # γ ≡ 0 meets every row (f = 0)
    g = np.ones(run.w.size)
    while True:
        g = _lp_round(run, opts, act, g)
        upper = float(run.w @ g)
        core, cuts = _line_search(run, pool, act, core, g, opts.inout_rows)
        run.notify("lp", iteration=run.iterations, active=act.size, objective=upper,
                   gap=1.0 - core.value / upper if upper > 0 else 0.0)
        if cuts is None:
            counts, rows, _ = pool.violated(g, run.b_sep, opts.batch, spread=opts.spread(run.params.K))
        else:
            picked = cuts[spread_out(pool.counts[cuts].astype(np.int32), opts.batch, opts.spread(run.params.K))]
            counts, rows = pool.counts[picked], pool.rows64(picked)
        if core.value < upper * (1.0 - opts.gap) and counts.shape[0]:
            act.make_room(counts.shape[0], g, run.b_lp - 1e-9 * max(run.bound, 1.0))
            if act.add(counts, limit=opts.batch, rows=rows):
                continue
        done, core = _finish_core(run, opts, act, core)
        if done is not None:
            return done[0], act.keys, done[1]


def own_scaling(params: Params) -> bool:
    """Whether the LP backend should scale the rows itself, on top of their power-of-two row scaling: not for
    pure DP (Δ = 0), whose rows that scaling balances and where HiGHS's own scaling made each warm dual simplex
    20–25× slower (K = 501); kept for Δ > 0, where turning it off made K = 151 slower (benchmarks/solve_targets.py)."""
    return params.teacher_delta != 0


def _session(run: _Run):
    """The backend's cutting-plane session (its own scaling per :func:`own_scaling`; the keyword is passed only
    when off, so backends without it keep working)."""
    extra = {} if own_scaling(run.params) else {"own_scaling": False}
    return run.backend.session(-run.w, 0.0, 1.0, feasibility_tol=1e-9, **extra)


def _solve_lazy(run: _Run, opts: LazyOptions) -> tuple[np.ndarray, list, Certificate | None]:
    """Cutting planes until an exhaustive sweep finds no new violated multiset (or only violations within
    the relative ``gap``); returns (g, active set, the last sweep's certificate, or None if γ was rescaled
    after it and still needs one)."""
    params = run.params
    limit = opts.max_active if opts.max_active is not None else _row_limit(run.backend)
    act = ActiveSet(run.builder, max_rows=limit, rhs=run.b_lp, session=_session(run))
    if opts.seed_multisets is not None and len(opts.seed_multisets):
        act.add(np.asarray(opts.seed_multisets), limit=act.max_rows // 2 if act.max_rows else None)
    inout = opts.use_pool and opts.inout
    pool = candidate_pool(params, run.builder, shift=inout) if opts.use_pool else None
    if pool is not None and inout:
        return _solve_in_out(run, opts, act, pool)
    binding = run.b_lp - 1e-9 * max(run.bound, 1.0)  # rows at least this costly are kept when purging
    within_gap = run.b_sep * (1.0 + opts.gap)
    g = np.ones(params.n_free)
    while True:
        g = _lp_round(run, opts, act, g)
        worst, counts, rows = -math.inf, None, None
        if pool is not None:
            counts, rows, worst = pool.violated(g, run.b_sep, opts.batch, spread=opts.spread(params.K))
        run.notify("lp", iteration=run.iterations, active=act.size, objective=float(run.w @ g),
                   violation=worst / run.b_sep - 1.0)
        if worst > within_gap and counts is not None:
            act.make_room(counts.shape[0], g, binding)
            if act.add(counts, limit=opts.batch, rows=rows):
                continue
        # no pool row is violated beyond the gap: sweep γ scaled into the pool's rows
        candidate = rescue_after_sweep(g, worst, run.b_sep)
        # the exhaustive sweep separates and certifies at once: when it finds nothing new to add, its
        # certificate is the final one
        cert, sw = run.separate(candidate, opts.sweep_cuts)
        if sw.max_cost <= within_gap:  # optimal within the gap (the LP's value bounds the optimum)
            scaled = rescue_after_sweep(candidate, sw.max_cost, run.b_sep)
            return scaled, act.keys, (cert if scaled is candidate else None)
        act.make_room(opts.sweep_cuts, g, binding)
        if act.add(sw.violators, limit=opts.sweep_cuts) == 0:  # only LP rows violate: solver tolerance
            return rescue_after_sweep(candidate, sw.max_cost, run.b_sep), act.keys, None


def solve(
    params: Params,
    *,
    solver: Any = solvers.DEFAULT_BACKEND,
    mode: str = "lazy",
    progress=None,
    executor=None,
    workers: int | None = None,
    sweep_method: str = "auto",
    wide: float | None = None,
    front: bool = False,
    **lazy: Any,
) -> Solution:
    """Compute the certified optimal γ for ``params``.

    ``solver`` is a backend name (or a backend object, see :func:`lp_backend`). ``progress(stage, **info)``
    receives events ("lp", "sweep", "certify") for display. ``executor`` distributes sweeps (see
    :func:`darrm_opt.certify.sweep.sweep`). The keyword arguments of :class:`LazyOptions` tune lazy mode:
    ``seed_multisets`` (count vectors, e.g. the active set of a nearby problem) warm-start it, and
    ``max_active`` caps the LP's rows (default: the backend's licence limit, if any) by dropping
    non-binding rows, which leaves the LP optimum as is. ``wide``: the certifying sweeps also keep the
    multisets within ``wide`` of the bound (see :func:`darrm_opt.certify.certificate.certify_and_separate`).
    ``front``: the exhaustive sweeps also keep the slope front of the swept γ (``Solution.sweep.front``), from
    which :func:`darrm_opt.privacy.profile.privacy_profile` answers without a pass of its own.
    """
    if mode not in MODES:
        raise InvalidParameter("mode", f"must be one of {', '.join(MODES)}", mode)
    t0 = time.perf_counter()
    run = _Run(params, lp_backend(solver), mode, progress, executor, workers, sweep_method, wide, front)
    cert: Certificate | None = None
    if mode == "full":
        g, active = _solve_full(run)
    else:
        g, active, cert = _solve_lazy(run, LazyOptions(**lazy))
    gamma, cert = _certified(run, mirror(g, params.K), cert)
    if not cert.certified:
        raise CertificationFailed(f"γ could not be certified: {cert.reason}", cert)
    return Solution(
        params=params,
        gamma=tuple(float(x) for x in gamma),
        certificate=cert,
        solver=run.backend.name,
        mode=mode,
        expected_error=expected_error(gamma, params.prior),
        iterations=run.iterations,
        active_constraints=len(active),
        sweeps=run.sweeps,
        seconds=time.perf_counter() - t0,
        lp_seconds=run.lp_seconds,
        sweep_seconds=run.sweep_seconds,
        active_set=tuple(active),
        sweep=run.last_sweep,
        objective_gap=run.objective_gap(np.asarray(gamma)[(params.K + 1) // 2 :]),
    )
