"""HiGHS backend (``highspy``), the default."""

from __future__ import annotations

import time

import numpy as np

from .base import LP, LPResult, SolverUnavailableError, Status

name = "highs"


def _import():
    try:
        import highspy
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SolverUnavailableError("HiGHS backend needs the 'highspy' package (pip install highspy)") from exc
    return highspy


def available() -> bool:
    try:
        _import()
    except SolverUnavailableError:
        return False
    return True


def solve(lp: LP, *, feasibility_tol: float = 1e-9) -> LPResult:
    highspy = _import()
    start = time.perf_counter()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("primal_feasibility_tolerance", feasibility_tol)
    h.setOptionValue("dual_feasibility_tolerance", feasibility_tol)
    model = highspy.HighsLp()
    n, r = lp.n_vars, lp.n_rows
    model.num_col_ = n
    model.num_row_ = r
    model.col_cost_ = lp.c
    model.col_lower_ = lp.lb
    model.col_upper_ = lp.ub
    model.row_lower_ = np.full(r, -highspy.kHighsInf)
    model.row_upper_ = lp.b_ub
    # Dense column-wise matrix: these LPs have few columns and dense rows.
    A = np.asfortranarray(lp.A_ub)
    model.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    model.a_matrix_.start_ = np.arange(0, (n + 1) * r, r, dtype=np.int32)
    model.a_matrix_.index_ = np.tile(np.arange(r, dtype=np.int32), n)
    model.a_matrix_.value_ = A.reshape(-1, order="F")
    h.passModel(model)
    h.run()
    status = h.getModelStatus()
    seconds = time.perf_counter() - start
    S = highspy.HighsModelStatus
    if status == S.kOptimal:
        x = np.array(h.getSolution().col_value, dtype=np.float64)
        return LPResult(Status.OPTIMAL, x, float(lp.c @ x), name, seconds)
    if status == S.kInfeasible:
        return LPResult(Status.INFEASIBLE, None, None, name, seconds, "HiGHS: infeasible")
    if status in (S.kUnbounded, S.kUnboundedOrInfeasible):
        return LPResult(Status.UNBOUNDED, None, None, name, seconds, f"HiGHS: {h.modelStatusToString(status)}")
    return LPResult(Status.ERROR, None, None, name, seconds, f"HiGHS: {h.modelStatusToString(status)}")
