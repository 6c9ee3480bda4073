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

    def session(self, c, lb, ub, *, feasibility_tol: float = 1e-9) -> LPSession:
        """An :class:`LPSession` for cutting planes (backends may return a :class:`StatelessSession`)."""
        ...
