"""CBC backend through PuLP.

The CBC binary comes from ``cbcbox`` (``pip install 'pulp[cbc]'``, PuLP's recommended way) and is driven
by ``COIN_CMD``; PuLP's own bundled binary (``PULP_CBC_CMD``, deprecated in PuLP 3.3) is the fallback.
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np

from .base import LP, LPResult, SolverUnavailableError, StatelessSession, Status

name = "cbc"


def _import():
    try:
        import pulp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SolverUnavailableError("CBC backend needs the 'pulp' package (pip install 'pulp[cbc]')") from exc
    return pulp


def _command(pulp, options: list[str]):
    try:
        import cbcbox

        path = os.path.join(cbcbox.cbc_dist_dir(), "bin", "cbc")
        cmd = pulp.COIN_CMD(msg=False, path=path, options=options)
        if cmd.available():
            return cmd
    except ImportError:
        pass
    with warnings.catch_warnings():  # the fallback is deprecated by PuLP itself; it still works
        warnings.simplefilter("ignore", DeprecationWarning)
        cmd = pulp.PULP_CBC_CMD(msg=False, options=options)
    if not cmd.available():
        raise SolverUnavailableError("no runnable CBC binary: pip install 'pulp[cbc]'")
    return cmd


def available() -> bool:
    try:
        _command(_import(), [])
    except Exception:
        return False
    return True


def solve(lp: LP, *, feasibility_tol: float = 1e-9) -> LPResult:
    pulp = _import()
    start = time.perf_counter()
    solver = _command(pulp, [f"primalTolerance {max(feasibility_tol, 1e-10):g}"])
    prob = pulp.LpProblem("lp", pulp.LpMinimize)
    xs = [
        prob.add_variable(f"x{i}", float(lp.lb[i]) if np.isfinite(lp.lb[i]) else None,
                          float(lp.ub[i]) if np.isfinite(lp.ub[i]) else None)
        for i in range(lp.n_vars)
    ]
    prob += pulp.LpAffineExpression([(xs[i], float(lp.c[i])) for i in range(lp.n_vars)])
    for r in range(lp.n_rows):
        row = lp.A_ub[r]
        nz = np.flatnonzero(row)
        expr = pulp.LpAffineExpression([(xs[i], float(row[i])) for i in nz])
        prob += pulp.LpConstraint(expr, pulp.LpConstraintLE, rhs=float(lp.b_ub[r]), name=f"r{r}")
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


def session(c, lb, ub, *, feasibility_tol: float = 1e-9) -> StatelessSession:
    """No incremental solves here: each round re-solves the current rows."""
    import sys

    return StatelessSession(sys.modules[__name__], c, lb, ub, feasibility_tol=feasibility_tol)
