"""γ_opt: the DaRRM optimisation problem (Sec. 5, App. C) solved as a linear program.

    minimise   −Σ_j w_j g_j                       (App. C.1, exact weights: darrm_opt.objective)
    subject to row(n) · g ≤ e^{mε} − 1 + 2δ       for every corner multiset n (Lemma 3.4, App. C.3)
               0 ≤ g_j ≤ 1

Two modes. ``full``: every row in one LP, the paper's method. ``lazy`` (default): cutting planes — solve
over an active set, add the most violated multisets found first in a cheap pool (multisets of ≤ 3 distinct
corners) and otherwise by an exhaustive sweep, until the sweep finds none.

LP solvers meet rows only to a feasibility tolerance, so the LP is solved against a bound tightened by
τ = 1e-8·max(bound, 1); a solution whose exhaustive sweep still exceeds bound − τ/2 on an active row is
scaled by (bound − τ/2)/max_cost (f is linear in γ, so every constraint is kept). Whatever the path, the
returned γ carries a :class:`~darrm_opt.certify.certificate.Certificate` from a full sweep, and :func:`solve` raises
:class:`~darrm_opt.errors.CertificationFailed` rather than return an uncertified table.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

import solvers
from darrm_opt.certify.certificate import Certificate, certify, certify_and_separate
from darrm_opt.errors import (
    CertificationFailed,
    InvalidParameter,
    SolverFailed,
    SolverLimitExceeded,
    SolverUnavailable,
)
from darrm_opt.model.constraints import RowBuilder, all_multisets, candidate_pool
from darrm_opt.model.corners import n_corners, n_multisets
from darrm_opt.model.objective import expected_error, objective_weights
from darrm_opt.model.params import Params
from solvers import LP, ModelTooLargeError, SolverUnavailableError, Status

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

    def add(self, counts: np.ndarray, limit: int | None = None) -> int:
        """Add up to ``limit`` multisets not yet present (in the given order); returns how many."""
        new = []
        for c in counts:
            key = tuple(int(x) for x in c)
            if key not in self._index:
                self._index.add(key)
                new.append(key)
                if limit is not None and len(new) >= limit:
                    break
        if new:
            rows = self.builder.rows(np.array(new))
            self.keys.extend(new)
            self.rows = np.concatenate([self.rows, rows])
            self.session.add_rows(rows, np.full(len(new), self.rhs))
        return len(new)

    def make_room(self, incoming: int, g: np.ndarray, binding_level: float) -> None:
        """Keep size + incoming within max_rows by dropping rows that are not binding at ``g``."""
        if self.max_rows is None or self.size + incoming <= self.max_rows:
            return
        costs = self.rows @ g
        keep = costs >= binding_level
        excess = self.size + incoming - self.max_rows
        slack_idx = np.flatnonzero(~keep)
        drop = slack_idx[np.argsort(costs[slack_idx])][:excess]  # the slackest first
        mask = np.ones(self.size, dtype=bool)
        mask[drop] = False
        self.session.remove_rows(drop)
        self.keys = [k for k, m in zip(self.keys, mask) if m]
        self._index = set(self.keys)
        self.rows = self.rows[mask]


def _row_limit(backend) -> int | None:
    limit = getattr(backend, "SIZE_LIMIT", None)
    return None if limit is None else int(limit * 0.9)


def _backend(name: str):
    try:
        return solvers.get_backend(name)
    except SolverUnavailableError as exc:
        from darrm_opt.extras import EXTRAS, install_hint, missing_modules

        key = (name or "").strip().lower()
        hint = f" (install it with {install_hint(key)})" if key in EXTRAS and missing_modules(key) else ""
        raise SolverUnavailable(f"{exc}{hint}") from None


def _solve_lp(backend, lp, mode: str):
    """Solve an :class:`LP` (or call a session's ``solve``), turning backend refusals into our errors."""
    try:
        res = lp() if callable(lp) else backend.solve(lp, feasibility_tol=1e-9)
    except ModelTooLargeError as exc:
        hint = "use --mode lazy (few active rows)" if mode == "full" else "use --solver highs"
        raise SolverLimitExceeded(f"{exc}; {hint}") from None
    if res.status is not Status.OPTIMAL:
        raise SolverFailed(f"LP solver {backend.name} returned {res.status.value}: {res.message}")
    return res


def solve(
    params: Params,
    *,
    solver: str = solvers.DEFAULT_BACKEND,
    mode: str = "lazy",
    progress=None,
    executor=None,
    workers: int | None = None,
    use_pool: bool = True,
    batch: int = 40,
    seed_multisets=None,
    max_iterations: int = 500,
    max_active: int | None = None,
    sweep_method: str = "auto",
) -> Solution:
    """Compute the certified optimal γ for ``params``.

    ``progress(stage, **info)`` receives events ("lp", "sweep", "certify") for display. ``executor``
    distributes sweeps (see :func:`darrm_opt.sweep.sweep`). ``seed_multisets`` (count vectors, e.g. the
    active set of a nearby problem) warm-start the lazy mode. ``max_active`` caps the LP's rows (default:
    the backend's licence limit, if any) by dropping non-binding rows, which leaves the LP optimum as is.
    """
    if mode not in MODES:
        raise InvalidParameter("mode", f"must be one of {', '.join(MODES)}", mode)
    t0 = time.perf_counter()
    backend = _backend(solver)
    K, H = params.K, params.n_free
    B = params.bound
    tighten = TIGHTEN_REL * max(B, 1.0)
    B_lp = B - tighten
    B_sep = B - 0.5 * tighten
    binding = B_lp - 1e-9 * max(B, 1.0)  # rows at least this costly are kept when purging
    w = objective_weights(K, params.prior)
    builder = RowBuilder(params)
    lp_seconds = sweep_seconds = 0.0
    iterations = sweeps = 0

    def notify(stage, **info):
        if progress:
            progress(stage, **info)

    if mode == "full":
        n_rows = n_multisets(K, n_corners(params))
        rows_bytes = n_rows * (H + 1) * 8
        if rows_bytes > FULL_MODE_MAX_BYTES:
            raise InvalidParameter(
                "mode", f"full mode holds all {n_rows:,} rows in memory "
                f"({rows_bytes / 2**30:.1f} GiB > {FULL_MODE_MAX_BYTES / 2**30:.0f} GiB); use --mode lazy")
        counts = all_multisets(params)
        notify("build", rows=counts.shape[0])
        rows = builder.rows(counts)
        res = _solve_lp(backend, LP(-w, rows, np.full(rows.shape[0], B_lp), 0.0, 1.0), mode)
        lp_seconds += res.seconds
        iterations = 1
        g = np.clip(res.x, 0.0, 1.0)
        active = [tuple(int(x) for x in c) for c in counts[np.abs(rows @ g - B_lp) <= 1e-7]]
        final_cert = None
    else:
        act = ActiveSet(builder, max_rows=max_active if max_active is not None else _row_limit(backend),
                        session=backend.session(-w, 0.0, 1.0, feasibility_tol=1e-9), rhs=B_lp)
        if seed_multisets is not None and len(seed_multisets):
            act.add(np.asarray(seed_multisets), limit=act.max_rows // 2 if act.max_rows else None)
        pool = candidate_pool(params) if use_pool else None
        pool_rows = builder.rows(pool) if pool is not None else None
        g = np.ones(H)
        while True:
            if act.size:
                res = _solve_lp(backend, act.session.solve, mode)
                lp_seconds += res.seconds
                g = np.clip(res.x, 0.0, 1.0)
            iterations += 1
            notify("lp", iteration=iterations, active=act.size, objective=float(w @ g))
            if iterations > max_iterations:
                raise SolverFailed(f"cutting planes did not converge in {max_iterations} iterations")
            if pool_rows is not None:
                costs = pool_rows @ g
                viol = np.flatnonzero(costs > B_sep)
                if viol.size:
                    order = viol[np.argsort(-costs[viol])]
                    act.make_room(batch, g, binding)
                    if act.add(pool[order], limit=batch):
                        continue
            # the exhaustive sweep separates and certifies at once: when it finds nothing new to add, its
            # certificate is the final one
            sweeps += 1
            notify("sweep", iteration=iterations)
            cert, sw = certify_and_separate(
                params, mirror(g, K), threshold=B_sep, top=batch, executor=executor, workers=workers,
                method=sweep_method,
                progress=(lambda d, t, worst: notify("sweep-progress", done=d, total=t, worst=worst)))
            sweep_seconds += sw.seconds
            act.make_room(batch, g, binding)
            if sw.violators.shape[0] == 0 or act.add(sw.violators, limit=batch) == 0:
                if sw.max_cost > B_sep:  # only active rows violate: solver tolerance; scale down
                    scale = np.nextafter((B_sep) / sw.max_cost, 0.0)
                    g = g * scale
                    cert = None
                final_cert = cert
                break
        active = act.keys
    gamma = mirror(g, K)
    cert = final_cert
    if cert is None:
        notify("certify")
        cert = certify(params, gamma, executor=executor, workers=workers, method=sweep_method,
                       progress=(lambda d, t, worst: notify("certify-progress", done=d, total=t, worst=worst)))
        sweep_seconds += cert.seconds
        sweeps += 1
    if not cert.certified and cert.max_privacy_cost > 0:
        # full mode (or a solver that overshoots its tolerance): scale γ into the bound and re-certify
        scale = np.nextafter((B - tighten) / cert.max_privacy_cost, 0.0)
        gamma = gamma * min(scale, 1.0)
        cert = certify(params, gamma, executor=executor, workers=workers, method=sweep_method)
        sweep_seconds += cert.seconds
        sweeps += 1
    if not cert.certified:
        raise CertificationFailed(f"γ could not be certified: {cert.reason}", cert)
    return Solution(
        params=params,
        gamma=tuple(float(x) for x in gamma),
        certificate=cert,
        solver=backend.name,
        mode=mode,
        expected_error=expected_error(gamma, params.prior),
        iterations=iterations,
        active_constraints=len(active),
        sweeps=sweeps,
        seconds=time.perf_counter() - t0,
        lp_seconds=lp_seconds,
        sweep_seconds=sweep_seconds,
        active_set=tuple(active),
    )
