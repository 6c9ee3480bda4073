"""The solver-agnostic linear-programming interface.

A problem is given in array form::

    minimise    c·x
    subject to  A_ub x <= b_ub,   lb <= x <= ub

and every backend returns an :class:`LPResult` whose status is our own :class:`Status`. Backends know
linear programs only; nothing here knows about privacy.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

#: an "optimal" point whose objective exceeds the dual bound by more than this (relative above 1) is refused
GAP_TOL = 1e-7


class Status(str, enum.Enum):
    OPTIMAL = "optimal"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    ERROR = "error"


class SolverUnavailableError(RuntimeError):
    """The backend's package is missing or the backend name is unknown."""


class ModelTooLargeError(RuntimeError):
    """The backend refused the model because of a licence size limit."""


@dataclass(frozen=True)
class LP:
    """A linear program in inequality form with variable bounds (bounds are never rows)."""

    c: np.ndarray
    A_ub: np.ndarray
    b_ub: np.ndarray
    lb: np.ndarray
    ub: np.ndarray

    def __post_init__(self) -> None:
        c = np.ascontiguousarray(self.c, dtype=np.float64)
        A = np.ascontiguousarray(self.A_ub, dtype=np.float64).reshape(-1, c.size)
        b = np.ascontiguousarray(self.b_ub, dtype=np.float64).reshape(-1)
        lb = np.broadcast_to(np.asarray(self.lb, dtype=np.float64), c.shape).copy()
        ub = np.broadcast_to(np.asarray(self.ub, dtype=np.float64), c.shape).copy()
        if A.shape[0] != b.size:
            raise ValueError(f"A_ub has {A.shape[0]} rows but b_ub has {b.size} entries")
        for name, arr in (("c", c), ("A_ub", A), ("b_ub", b)):
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} has non-finite entries")
        object.__setattr__(self, "c", c)
        object.__setattr__(self, "A_ub", A)
        object.__setattr__(self, "b_ub", b)
        object.__setattr__(self, "lb", lb)
        object.__setattr__(self, "ub", ub)

    @property
    def n_vars(self) -> int:
        return int(self.c.size)

    @property
    def n_rows(self) -> int:
        return int(self.b_ub.size)


@dataclass(frozen=True)
class LPResult:
    status: Status
    x: np.ndarray | None
    objective: float | None
    backend: str
    seconds: float
    message: str = ""
    #: a proven lower bound on the optimum of the LP the backend solved (weak duality, :func:`dual_bound`)
    dual_bound: float | None = None
    #: the most by which the backend's LP lowered a row's bound to drop its tiny entries (:func:`drop_small`;
    #: in the units of the rows as given): the solved LP is a restriction of the given one by at most this
    restriction: float = 0.0


class LPSession(Protocol):
    """An LP kept between solves (for cutting planes): fixed objective and bounds, rows added and removed.

    Row indices are positions in the current row list; removing rows shifts the later ones down."""

    def add_rows(self, A: np.ndarray, b: np.ndarray) -> None: ...

    def remove_rows(self, idx: np.ndarray) -> None: ...

    def solve(self) -> LPResult: ...


class StatelessSession:
    """A session for backends without incremental solves: keeps the rows and re-solves from scratch."""

    def __init__(self, backend: Backend, c, lb, ub, *, feasibility_tol: float = 1e-9) -> None:
        self.backend = backend
        self.c = np.asarray(c, dtype=np.float64)
        self.lb, self.ub = lb, ub
        self.tol = feasibility_tol
        self.A = np.zeros((0, self.c.size))
        self.b = np.zeros(0)

    def add_rows(self, A: np.ndarray, b: np.ndarray) -> None:
        self.A = np.concatenate([self.A, np.asarray(A, dtype=np.float64).reshape(-1, self.c.size)])
        self.b = np.concatenate([self.b, np.asarray(b, dtype=np.float64).reshape(-1)])

    def remove_rows(self, idx: np.ndarray) -> None:
        keep = np.ones(self.b.size, dtype=bool)
        keep[np.asarray(idx, dtype=np.intp)] = False
        self.A, self.b = self.A[keep], self.b[keep]

    def solve(self) -> LPResult:
        return self.backend.solve(LP(self.c, self.A, self.b, self.lb, self.ub), feasibility_tol=self.tol)


def row_scales(A: np.ndarray) -> np.ndarray:
    """Powers of two ``s_r`` with ``max_j |A_rj| · s_r`` in [0.5, 1) (1 for an all-zero row).

    Dividing a row and its right-hand side by a power of two is exact in binary floating point, so the
    scaled LP has exactly the same feasible set. It matters for LPs whose rows span many magnitudes (DaRRM
    rows at large mε hold entries from 1e-33 to 2e14 with a right-hand side e^{mε}): a solver's absolute
    feasibility tolerance (1e-9) is meaningless on a row of size 1e14, and CBC's own geometric scaling of
    such rows returns a feasible but far-from-optimal point as "optimal"."""
    A = np.asarray(A, dtype=np.float64)
    peak = np.abs(A).max(axis=1) if A.shape[1] else np.zeros(A.shape[0])
    _, exp = np.frexp(np.where(peak > 0, peak, 0.5))  # 0.5 = 0.5 · 2^0: scale 1
    return np.ldexp(1.0, -exp)


#: entries below this fraction of their row's largest are dropped before HiGHS sees them (:func:`drop_small`);
#: HiGHS itself would drop entries below 1e-9 of a row (its small_matrix_value) without lowering the bound
SMALL_ENTRY = 1e-9


def drop_small(A: np.ndarray, b: np.ndarray, lb: np.ndarray, ub: np.ndarray,
               rel: float = SMALL_ENTRY) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A restriction of A x ≤ b over the box lb ≤ x ≤ ub without the entries |A_rj| < rel·max_j |A_rj|.

    Each row's bound is lowered by the most those entries can add over the box, Σ_j |A_rj|·max(|lb_j|, |ub_j|)
    (rounded up; entries of unbounded columns are kept), so every x in the box that meets the returned rows
    meets the given ones. Returns (A′, b′, lowered), ``lowered`` per row (0 where nothing was dropped)."""
    A = np.asarray(A, dtype=np.float64)
    reach = np.maximum(np.abs(lb), np.abs(ub))
    absA = np.abs(A)
    peak = absA.max(axis=1, initial=0.0)
    small = (absA < rel * peak[:, None]) & (A != 0) & np.isfinite(reach)[None, :]
    if not small.any():
        return A, np.asarray(b, dtype=np.float64), np.zeros(A.shape[0])
    mass = np.where(small, absA, 0.0) @ np.where(np.isfinite(reach), reach, 0.0)
    lowered = mass * (1.0 + 1e-12) + np.where(mass > 0, np.finfo(np.float64).tiny, 0.0)
    b2 = np.asarray(b, dtype=np.float64) - lowered
    b2 = np.where(lowered > 0, np.nextafter(b2, -np.inf), b2)
    return np.where(small, 0.0, A), b2, lowered


def dual_bound(lp: LP, y: np.ndarray) -> float:
    """A lower bound on the LP's optimum from any row multipliers ``y`` (negative entries are clipped).

    Weak duality: for y ≥ 0 and every feasible x, c·x ≥ c·x + yᵀ(A x − b) ≥ −yᵀb + Σ_j min_{l_j≤x_j≤u_j}
    (c + Aᵀy)_j x_j. Exact for the optimal duals; valid (maybe loose, maybe −inf) for any others."""
    y = np.maximum(np.asarray(y, dtype=np.float64).reshape(-1), 0.0)
    if y.size != lp.n_rows:
        return -np.inf
    red = lp.c + lp.A_ub.T @ y if lp.n_rows else lp.c.copy()
    low = np.where(red >= 0, lp.lb, lp.ub)
    with np.errstate(invalid="ignore", over="ignore"):
        terms = np.where(red == 0, 0.0, red * low)
    return float(-y @ lp.b_ub + terms.sum())


def check_solution(lp: LP, x: np.ndarray, duals: np.ndarray | None, *, feasibility_tol: float,
                   gap_tol: float = GAP_TOL) -> str:
    """'' when ``x`` is feasible within ``feasibility_tol`` (rows of ``lp`` as given, bounds) and provably
    optimal within ``gap_tol`` (absolute, relative above 1) by :func:`dual_bound` with the solver's duals,
    tried with both sign conventions; otherwise the reason. Backends call it on the row-scaled LP, so no
    solver's "optimal" is taken on trust."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape != lp.c.shape or not np.all(np.isfinite(x)):
        return "the solution vector is malformed"
    slack = max(float((lp.A_ub @ x - lp.b_ub).max(initial=0.0)), float((lp.lb - x).max(initial=0.0)),
                float((x - lp.ub).max(initial=0.0)))
    if slack > 10 * feasibility_tol:
        return f"the solution violates a constraint by {slack:.3g}"
    obj = float(lp.c @ x)
    if duals is None:
        return "no dual values to prove optimality"
    d = np.asarray(duals, dtype=np.float64)
    bound = max(dual_bound(lp, d), dual_bound(lp, -d))
    gap = obj - bound
    if not gap <= gap_tol * max(1.0, abs(obj)):
        return f"the solution is not provably optimal (objective {obj:.12g}, dual bound {bound:.12g})"
    return ""


def scaled(lp: LP) -> LP:
    """The same LP with every row divided by its power-of-two :func:`row_scales` (exactly equivalent)."""
    s = row_scales(lp.A_ub)
    return LP(lp.c, lp.A_ub * s[:, None], lp.b_ub * s, lp.lb, lp.ub)


@runtime_checkable
class Backend(Protocol):
    """What every solver backend provides."""

    name: str

    def available(self) -> bool:
        """True when the backend's package can be imported and used."""
        ...

    def solve(self, lp: LP, *, feasibility_tol: float = 1e-9) -> LPResult:
        """Solve ``lp``; raise :class:`SolverUnavailableError` or :class:`ModelTooLargeError` when the
        backend cannot take it, otherwise return a result with a status."""
        ...

    def session(self, c, lb, ub, *, feasibility_tol: float = 1e-9, own_scaling: bool = True) -> LPSession:
        """An :class:`LPSession` for cutting planes (backends may return a :class:`StatelessSession`).
        ``own_scaling=False`` is a hint that the backend's own scaling of the rows should be off, leaving only
        the power-of-two :func:`row_scales` (an exact transformation): for LPs whose rows that scaling already
        balances (pure DP DaRRM rows, where HiGHS's scaling made warm dual simplex 20–25× slower); a backend
        may ignore it."""
        ...
