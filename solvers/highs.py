"""HiGHS backend (``highspy``), the default."""

from __future__ import annotations

import time

import numpy as np

from .base import LP, LPResult, SolverUnavailableError, Status, check_solution, row_scales, scaled

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


def _new(highspy, feasibility_tol: float):
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("primal_feasibility_tolerance", feasibility_tol)
    h.setOptionValue("dual_feasibility_tolerance", feasibility_tol)
    return h


#: Retried in order when a solve ends without a proven verdict (seen: dual simplex at tolerance 1e-9 on LPs
#: whose rows span 1e-25..1e-1, pure DP with K = 301); each starts cold and the defaults are restored after.
FALLBACKS = ({"simplex_strategy": 4}, {"solver": "ipm"}, {"simplex_scale_strategy": 0})


def _option(h, key: str):
    value = h.getOptionValue(key)
    return value[1] if isinstance(value, tuple) else value  # (status, value) in some highspy versions


def _verdict(highspy, h, lp: LP, tol: float) -> str:
    """'' when HiGHS's answer is final: infeasible/unbounded, or optimal and checked by
    :func:`solvers.base.check_solution` (feasible, and optimal by its own duals); else why not."""
    S = highspy.HighsModelStatus
    status = h.getModelStatus()
    if status in (S.kInfeasible, S.kUnbounded, S.kUnboundedOrInfeasible):
        return ""
    if status != S.kOptimal:
        return f"HiGHS: {h.modelStatusToString(status)}"
    sol = h.getSolution()
    duals = np.asarray(sol.row_dual, dtype=np.float64) if sol.dual_valid else None
    return check_solution(lp, np.asarray(sol.col_value, dtype=np.float64), duals, feasibility_tol=tol)


def _run(highspy, h, lp: LP, tol: float) -> str:
    """Run; unless the answer is final (see :func:`_verdict`), retry cold with each of FALLBACKS. Returns
    '' or the last reason the answer is not final."""
    h.run()
    reason = _verdict(highspy, h, lp, tol)
    for opts in FALLBACKS:
        if not reason:
            return ""
        defaults = {k: _option(h, k) for k in opts}
        h.clearSolver()
        for k, v in opts.items():
            h.setOptionValue(k, v)
        h.run()
        for k, v in defaults.items():
            h.setOptionValue(k, v)
        reason = _verdict(highspy, h, lp, tol)
    return reason


def _result(highspy, h, c: np.ndarray, start: float, reason: str) -> LPResult:
    status = h.getModelStatus()
    seconds = time.perf_counter() - start
    S = highspy.HighsModelStatus
    if reason:
        return LPResult(Status.ERROR, None, None, name, seconds, reason if reason.startswith("HiGHS")
                        else f"HiGHS: {reason}")
    if status == S.kOptimal:
        x = np.array(h.getSolution().col_value, dtype=np.float64)
        return LPResult(Status.OPTIMAL, x, float(c @ x), name, seconds)
    if status == S.kInfeasible:
        return LPResult(Status.INFEASIBLE, None, None, name, seconds, "HiGHS: infeasible")
    return LPResult(Status.UNBOUNDED, None, None, name, seconds, f"HiGHS: {h.modelStatusToString(status)}")


class Session:
    """Incremental HiGHS model: rows are added and deleted in place and each solve starts from the last
    basis (a handful of dual simplex iterations per cutting-plane round instead of a fresh solve)."""

    def __init__(self, c, lb, ub, *, feasibility_tol: float = 1e-9) -> None:
        self._hs = _import()
        self.c = np.asarray(c, dtype=np.float64)
        n = self.c.size
        self.h = _new(self._hs, feasibility_tol)
        self.h.addVars(n, np.broadcast_to(np.asarray(lb, dtype=np.float64), n).copy(),
                       np.broadcast_to(np.asarray(ub, dtype=np.float64), n).copy())
        self.h.changeColsCost(n, np.arange(n, dtype=np.int32), self.c)
        self.lb = np.broadcast_to(np.asarray(lb, dtype=np.float64), n).copy()
        self.ub = np.broadcast_to(np.asarray(ub, dtype=np.float64), n).copy()
        self.tol = feasibility_tol
        self.A = np.zeros((0, n))  # the rows as HiGHS holds them: scaled by powers of two (exact)
        self.b = np.zeros(0)

    def add_rows(self, A: np.ndarray, b: np.ndarray) -> None:
        A = np.ascontiguousarray(A, dtype=np.float64).reshape(-1, self.c.size)
        r, n = A.shape
        if r == 0:
            return
        s = row_scales(A)
        A = A * s[:, None]
        b = np.asarray(b, dtype=np.float64).reshape(-1) * s
        self.h.addRows(r, np.full(r, -self._hs.kHighsInf), b,
                       r * n, np.arange(0, r * n, n, dtype=np.int32), np.tile(np.arange(n, dtype=np.int32), r),
                       A.ravel())
        self.A = np.concatenate([self.A, A])
        self.b = np.concatenate([self.b, b])

    @property
    def n_rows(self) -> int:
        return int(self.b.size)

    def remove_rows(self, idx: np.ndarray) -> None:
        idx = np.unique(np.asarray(idx, dtype=np.int32))
        if idx.size:
            self.h.deleteRows(int(idx.size), idx)
            keep = np.ones(self.b.size, dtype=bool)
            keep[idx] = False
            self.A, self.b = self.A[keep], self.b[keep]

    def solve(self) -> LPResult:
        start = time.perf_counter()
        reason = _run(self._hs, self.h, LP(self.c, self.A, self.b, self.lb, self.ub), self.tol)
        return _result(self._hs, self.h, self.c, start, reason)


def session(c, lb, ub, *, feasibility_tol: float = 1e-9) -> Session:
    return Session(c, lb, ub, feasibility_tol=feasibility_tol)


def solve(lp: LP, *, feasibility_tol: float = 1e-9) -> LPResult:
    highspy = _import()
    start = time.perf_counter()
    lp = scaled(lp)
    h = _new(highspy, feasibility_tol)
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
    reason = _run(highspy, h, lp, feasibility_tol)
    return _result(highspy, h, lp.c, start, reason)
