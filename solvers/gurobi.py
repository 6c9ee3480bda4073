"""Gurobi backend (``gurobipy``; the pip wheel carries a size-limited licence).

Rows are scaled by powers of two (exact) before the model is built, and an "optimal" answer is accepted
only when :func:`darrm_opt.solvers.base.check_solution` proves it with Gurobi's duals (``Pi``)."""

from __future__ import annotations

import time

import numpy as np

from .base import (
    LP,
    LPResult,
    ModelTooLargeError,
    SolverUnavailableError,
    StatelessSession,
    Status,
    check_solution,
    scaled,
)

name = "gurobi"

#: Limits of the size-limited licence shipped with the pip wheel.
SIZE_LIMIT = 2000


def _import():
    try:
        import gurobipy
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SolverUnavailableError("Gurobi backend needs the 'gurobipy' package (pip install gurobipy)") from exc
    return gurobipy


def available() -> bool:
    try:
        gp = _import()
        with gp.Env(empty=True) as env:
            env.setParam("OutputFlag", 0)
            env.start()
    except Exception:
        return False
    return True


def solve(lp: LP, *, feasibility_tol: float = 1e-9) -> LPResult:
    gp = _import()
    GRB = gp.GRB
    start = time.perf_counter()
    lp = scaled(lp)
    try:
        with gp.Env(empty=True) as env:
            env.setParam("OutputFlag", 0)
            env.start()
            with gp.Model(env=env) as model:
                model.Params.FeasibilityTol = max(feasibility_tol, 1e-9)
                model.Params.OptimalityTol = max(feasibility_tol, 1e-9)
                x = model.addMVar(lp.n_vars, lb=lp.lb, ub=lp.ub)
                rows = model.addMConstr(lp.A_ub, x, "<", lp.b_ub) if lp.n_rows else None
                model.setObjective(lp.c @ x, GRB.MINIMIZE)
                model.optimize()
                status = model.Status
                seconds = time.perf_counter() - start
                if status == GRB.OPTIMAL:
                    xv = np.array(x.X, dtype=np.float64)
                    duals = np.array(rows.Pi, dtype=np.float64) if rows is not None else np.zeros(0)
                    reason = check_solution(lp, xv, duals, feasibility_tol=max(feasibility_tol, 1e-9))
                    if reason:
                        return LPResult(Status.ERROR, None, None, name, seconds, f"Gurobi: {reason}")
                    return LPResult(Status.OPTIMAL, xv, float(lp.c @ xv), name, seconds)
                if status == GRB.INFEASIBLE:
                    return LPResult(Status.INFEASIBLE, None, None, name, seconds, "Gurobi: infeasible")
                if status in (GRB.UNBOUNDED, GRB.INF_OR_UNBD):
                    return LPResult(Status.UNBOUNDED, None, None, name, seconds, "Gurobi: unbounded")
                return LPResult(Status.ERROR, None, None, name, seconds, f"Gurobi: status code {status}")
    except gp.GurobiError as exc:
        text = str(exc)
        if "size-limited" in text.lower() or getattr(exc, "errno", None) == 10010:
            raise ModelTooLargeError(
                f"Gurobi refused a model with {lp.n_vars} variables and {lp.n_rows} constraints: {text}"
            ) from exc
        return LPResult(Status.ERROR, None, None, name, time.perf_counter() - start, f"Gurobi: {text}")


def session(c, lb, ub, *, feasibility_tol: float = 1e-9, own_scaling: bool = True) -> StatelessSession:
    """No incremental solves here: each round re-solves the current rows (``own_scaling``, a hint, is not
    used: the rows are solved as :func:`darrm_opt.solvers.base.scaled` gives them, with the solver's defaults)."""
    import sys

    return StatelessSession(sys.modules[__name__], c, lb, ub, feasibility_tol=feasibility_tol)
