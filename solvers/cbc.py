"""CBC backend through PuLP.

Rows are scaled by powers of two first (exact; see :func:`darrm_opt.solvers.base.row_scales`) and every "optimal"
answer is checked against CBC's own duals (:func:`darrm_opt.solvers.base.check_solution`): on DaRRM rows at large mε
CBC's default geometric scaling returned the feasible γ ≡ 0 as optimal (K = 7, m = 3, ε = 3: error 0.429
instead of 2·10⁻⁵). A refused answer is re-solved with CBC's scaling off, then by primal simplex; if those fail too,
the result is an error, never a poor table.

CBC builds that tighten column bounds from the rows before the LP (cbcbox's, seen with 2.935: singleton rows
and bound propagation) report the multipliers of those rows as reduced costs of the tightened bounds, not as
row duals, which then cannot prove optimality against the original bounds (the PATE-setting and multi-class
LPs have such rows). Where the binary knows the options, the tightening is switched off
(:data:`NO_BOUND_TIGHTENING`) so that the row duals are complete.

The CBC binary comes from ``cbcbox`` (``pip install 'pulp[cbc]'``, PuLP's recommended way) and is driven
by ``COIN_CMD``; PuLP's own bundled binary (``PULP_CBC_CMD``, deprecated in PuLP 3.3) is the fallback.
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
import warnings

import numpy as np

from .base import LP, LPResult, SolverUnavailableError, StatelessSession, Status, check_solution, scaled

name = "cbc"


def _import():
    try:
        import pulp
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SolverUnavailableError("CBC backend needs the 'pulp' package (pip install 'pulp[cbc]')") from exc
    return pulp


#: CBC options that keep the rows' multipliers in the row duals: no column bounds tightened from rows before
#: the LP (only passed to a binary that knows them; see :func:`_knows`)
NO_BOUND_TIGHTENING = (("boundPropLevel", "off"), ("singletonBounds", "off"))


@functools.lru_cache(maxsize=8)
def _knows(path: str, option: str) -> bool:
    """Whether the CBC binary at ``path`` has the parameter ``option`` (an unknown one makes some builds
    stop without solving, others ignore it)."""
    try:
        out = subprocess.run([path, f"-{option}??", "-quit"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return f"Match for `{option}'" in out.stdout + out.stderr


def _tightening_off(path: str | None) -> list[str]:
    return [f"{k} {v}" for k, v in NO_BOUND_TIGHTENING if path and _knows(path, k)]


def _command(pulp, options: list[str]):
    try:
        import cbcbox

        path = os.path.join(cbcbox.cbc_dist_dir(), "bin", "cbc")
        cmd = pulp.COIN_CMD(msg=False, path=path, options=options)
        if cmd.available():
            cmd.options = [*options, *_tightening_off(cmd.path)]
            return cmd
    except ImportError:
        pass
    with warnings.catch_warnings():  # the fallback is deprecated by PuLP itself; it still works
        warnings.simplefilter("ignore", DeprecationWarning)
        cmd = pulp.PULP_CBC_CMD(msg=False, options=options)
    if not cmd.available():
        raise SolverUnavailableError("no runnable CBC binary: pip install 'pulp[cbc]'")
    cmd.options = [*options, *_tightening_off(cmd.path)]
    return cmd


def available() -> bool:
    try:
        _command(_import(), [])
    except Exception:
        return False
    return True


#: option sets tried in order until one gives a checked optimum
ATTEMPTS: tuple[tuple[str, ...], ...] = ((), ("scaling off",), ("primalSimplex",))
#: CBC's solution file (what PuLP reads back) carries about 8 significant digits, so a vertex it found
#: exactly reads back up to ~4e-8 (relative) off; the check allows that much. The optimizer tightens the
#: bound and certifies (and scales into the bound) after every solve, so this never reaches a table.
READ_TOL = 1e-7


def _build(pulp, lp: LP):
    prob = pulp.LpProblem("lp", pulp.LpMinimize)
    xs = [
        prob.add_variable(f"x{i}", float(lp.lb[i]) if np.isfinite(lp.lb[i]) else None,
                          float(lp.ub[i]) if np.isfinite(lp.ub[i]) else None)
        for i in range(lp.n_vars)
    ]
    prob += pulp.LpAffineExpression([(xs[i], float(lp.c[i])) for i in range(lp.n_vars)])
    cons = []
    for r in range(lp.n_rows):
        row = lp.A_ub[r]
        nz = np.flatnonzero(row)
        expr = pulp.LpAffineExpression([(xs[i], float(row[i])) for i in nz])
        con = pulp.LpConstraint(expr, pulp.LpConstraintLE, rhs=float(lp.b_ub[r]), name=f"r{r}")
        prob += con
        cons.append(prob.get_constraint_by_name(f"r{r}"))
    return prob, xs, cons


def _attempt(pulp, lp: LP, options: tuple[str, ...], tol: float) -> tuple[str, np.ndarray | None, str]:
    """(PuLP status, x, reason it is not a checked optimum or '') of one CBC run."""
    prob, xs, cons = _build(pulp, lp)
    prob.solve(_command(pulp, [f"primalTolerance {max(tol, 1e-10):g}", *options]))
    status = pulp.LpStatus[prob.status]
    if status != "Optimal":
        return status, None, f"CBC: {status}"
    x = np.array([v.varValue if v.varValue is not None else 0.0 for v in xs], dtype=np.float64)
    duals = np.array([c.pi if c.pi is not None else np.nan for c in cons], dtype=np.float64)
    reason = check_solution(lp, x, duals if np.all(np.isfinite(duals)) else None,
                            feasibility_tol=max(tol, READ_TOL), gap_tol=10 * READ_TOL)
    return status, x, reason and f"CBC{' (' + ', '.join(options) + ')' if options else ''}: {reason}"


def solve(lp: LP, *, feasibility_tol: float = 1e-9) -> LPResult:
    pulp = _import()
    start = time.perf_counter()
    lp = scaled(lp)
    reason = ""
    for options in ATTEMPTS:
        status, x, reason = _attempt(pulp, lp, options, feasibility_tol)
        seconds = time.perf_counter() - start
        if status == "Infeasible":
            return LPResult(Status.INFEASIBLE, None, None, name, seconds, "CBC: infeasible")
        if status == "Unbounded":
            return LPResult(Status.UNBOUNDED, None, None, name, seconds, "CBC: unbounded")
        if x is not None and not reason:
            return LPResult(Status.OPTIMAL, x, float(lp.c @ x), name, seconds)
    return LPResult(Status.ERROR, None, None, name, time.perf_counter() - start, reason)


def session(c, lb, ub, *, feasibility_tol: float = 1e-9, own_scaling: bool = True) -> StatelessSession:
    """No incremental solves here: each round re-solves the current rows (``own_scaling``, a hint, is not
    used: the rows are solved as :func:`darrm_opt.solvers.base.scaled` gives them, with the solver's defaults)."""
    import sys

    return StatelessSession(sys.modules[__name__], c, lb, ub, feasibility_tol=feasibility_tol)
