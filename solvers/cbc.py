"""CBC backend through PuLP (PuLP ships a CBC binary)."""

from __future__ import annotations

import time

import numpy as np

from .base import LP, LPResult, SolverUnavailableError, Status

name = "cbc"


def _import():
    try:
        import pulp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SolverUnavailableError("CBC backend needs the 'pulp' package (pip install pulp)") from exc
    return pulp


def available() -> bool:
    try:
        pulp = _import()
        return bool(pulp.PULP_CBC_CMD(msg=False).available())
    except Exception:
        return False


def solve(lp: LP, *, feasibility_tol: float = 1e-9) -> LPResult:
    pulp = _import()
    start = time.perf_counter()
    prob = pulp.LpProblem("lp", pulp.LpMinimize)
    xs = [
        pulp.LpVariable(f"x{i}", lowBound=float(lp.lb[i]) if np.isfinite(lp.lb[i]) else None,
                        upBound=float(lp.ub[i]) if np.isfinite(lp.ub[i]) else None)
        for i in range(lp.n_vars)
    ]
    prob += pulp.LpAffineExpression([(xs[i], float(lp.c[i])) for i in range(lp.n_vars)])
    for r in range(lp.n_rows):
        row = lp.A_ub[r]
        nz = np.flatnonzero(row)
        expr = pulp.LpAffineExpression([(xs[i], float(row[i])) for i in nz])
        prob += pulp.LpConstraint(expr, pulp.LpConstraintLE, rhs=float(lp.b_ub[r]), name=f"r{r}")
    solver = pulp.PULP_CBC_CMD(msg=False, options=[f"primalTolerance {max(feasibility_tol, 1e-10):g}"])
    if not solver.available():
        raise SolverUnavailableError("CBC binary shipped with PuLP is not runnable on this machine")
    prob.solve(solver)
    seconds = time.perf_counter() - start
    status = pulp.LpStatus[prob.status]
    if status == "Optimal":
        x = np.array([v.varValue if v.varValue is not None else 0.0 for v in xs], dtype=np.float64)
        return LPResult(Status.OPTIMAL, x, float(lp.c @ x), name, seconds)
    if status == "Infeasible":
        return LPResult(Status.INFEASIBLE, None, None, name, seconds, "CBC: infeasible")
    if status == "Unbounded":
        return LPResult(Status.UNBOUNDED, None, None, name, seconds, "CBC: unbounded")
    return LPResult(Status.ERROR, None, None, name, seconds, f"CBC: {status}")
