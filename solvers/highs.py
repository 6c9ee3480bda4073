"""HiGHS backend (``highspy``), the default."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

import numpy as np

from .base import (
    LP,
    LPResult,
    SolverUnavailableError,
    Status,
    check_solution,
    drop_small,
    dual_bound,
    row_scales,
)

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


_FD_LOCK = threading.Lock()


def _flush_c_stdio() -> None:
    """fflush(NULL): what a C library left in stdio's buffers is written now (while fd 1 is redirected)."""
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C runtime reachable this way (not on POSIX)
        pass


@contextlib.contextmanager
def _stdout_fd_silenced():
    """File descriptor 1 points at /dev/null inside the block (C libraries write there directly, past
    ``sys.stdout``); output Python buffered before it is flushed first and so still reaches stdout. One
    block at a time (a lock), so concurrent blocks cannot leave fd 1 pointing at /dev/null."""
    with _FD_LOCK:
        try:
            sys.stdout.flush()
        except (AttributeError, OSError, ValueError):
            pass
        try:
            saved = os.dup(1)
        except OSError:  # no fd 1 at all: nothing to protect
            yield
            return
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, 1)
            finally:
                os.close(null)
            yield
        finally:
            _flush_c_stdio()
            os.dup2(saved, 1)
            os.close(saved)


def _new(highspy, feasibility_tol: float, own_scaling: bool = True):
    # highspy 1.16 prints a banner on stdout while constructing the first Highs(), before any option can be
    # set; output_flag = False silences everything after it
    with _stdout_fd_silenced():
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
    h.setOptionValue("primal_feasibility_tolerance", feasibility_tol)
    h.setOptionValue("dual_feasibility_tolerance", feasibility_tol)
    # the rows come with their tiny entries already dropped and their bounds lowered (solvers.base.drop_small);
    # HiGHS must not drop any more on its own (its default drops entries below 1e-9 and keeps the bound)
    h.setOptionValue("small_matrix_value", 1e-12)
    if not own_scaling:  # the rows' power-of-two scaling (solvers.base.row_scales) only
        h.setOptionValue("simplex_scale_strategy", 0)
    return h


#: Retried in order when a solve ends without a proven verdict (seen: dual simplex at tolerance 1e-9 on LPs
#: whose rows span 1e-25..1e-1, pure DP with K = 301): first primal simplex from the basis at hand (in the
#: cutting-plane sessions a warm dual simplex ends in "Solve error" in about one round in ten, and the warm
#: primal retry proves nine in ten of those at a fraction of a cold solve's time), then each cold. The
#: defaults are restored after each.
FALLBACKS = (({"simplex_strategy": 4}, "warm"), ({"simplex_strategy": 4}, "cold"), ({"solver": "ipm"}, "cold"),
             ({"simplex_scale_strategy": 0}, "cold"))


def _option(h, key: str):
    value = h.getOptionValue(key)
    return value[1] if isinstance(value, tuple) else value  # (status, value) in some highspy versions


def _verdict(highspy, h, lp: LP, tol: float) -> str:
    """'' when HiGHS's answer is final: infeasible/unbounded, or optimal and checked by
    :func:`darrm_opt.solvers.base.check_solution` (feasible, and optimal by its own duals); else why not."""
    S = highspy.HighsModelStatus
    status = h.getModelStatus()
    if status in (S.kInfeasible, S.kUnbounded, S.kUnboundedOrInfeasible):
        return ""
    if status != S.kOptimal:
        return f"HiGHS: {h.modelStatusToString(status)}"
    sol = h.getSolution()
    duals = np.asarray(sol.row_dual, dtype=np.float64) if sol.dual_valid else None
    return check_solution(lp, np.asarray(sol.col_value, dtype=np.float64), duals, feasibility_tol=tol)


def _fallbacks(h) -> tuple:
    """FALLBACKS, whose last retry is HiGHS's own scaling when the session runs without it (``own_scaling``
    False) rather than without it again."""
    if _option(h, "simplex_scale_strategy") == 0:
        return (*FALLBACKS[:-1], ({"simplex_scale_strategy": SCALED}, "cold"))
    return FALLBACKS


#: HiGHS's default simplex scaling (equilibration), the retry of a session run without scaling
SCALED = 2


def _run(highspy, h, lp: LP, tol: float) -> str:
    """Run; unless the answer is final (see :func:`_verdict`), retry with each of :func:`_fallbacks`. Returns
    '' or the last reason the answer is not final."""
    h.run()
    reason = _verdict(highspy, h, lp, tol)
    for opts, start in _fallbacks(h):
        if not reason:
            return ""
        defaults = {k: _option(h, k) for k in opts}
        if start == "cold":
            h.clearSolver()
        for k, v in opts.items():
            h.setOptionValue(k, v)
        h.run()
        for k, v in defaults.items():
            h.setOptionValue(k, v)
        reason = _verdict(highspy, h, lp, tol)
    return reason


def _result(highspy, h, lp: LP, start: float, reason: str, restriction: float = 0.0) -> LPResult:
    status = h.getModelStatus()
    seconds = time.perf_counter() - start
    S = highspy.HighsModelStatus
    if reason:
        return LPResult(Status.ERROR, None, None, name, seconds, reason if reason.startswith("HiGHS")
                        else f"HiGHS: {reason}")
    if status == S.kOptimal:
        sol = h.getSolution()
        x = np.array(sol.col_value, dtype=np.float64)
        d = np.asarray(sol.row_dual, dtype=np.float64)  # _verdict proved optimality with these duals
        return LPResult(Status.OPTIMAL, x, float(lp.c @ x), name, seconds,
                        dual_bound=max(dual_bound(lp, d), dual_bound(lp, -d)), restriction=restriction)
    if status == S.kInfeasible:
        return LPResult(Status.INFEASIBLE, None, None, name, seconds, "HiGHS: infeasible")
    return LPResult(Status.UNBOUNDED, None, None, name, seconds, f"HiGHS: {h.modelStatusToString(status)}")


class Session:
    """Incremental HiGHS model: rows are added and deleted in place and each solve starts from the last
    basis (a handful of dual simplex iterations per cutting-plane round instead of a fresh solve)."""

    def __init__(self, c, lb, ub, *, feasibility_tol: float = 1e-9, own_scaling: bool = True) -> None:
        self._hs = _import()
        self.c = np.asarray(c, dtype=np.float64)
        n = self.c.size
        self.h = _new(self._hs, feasibility_tol, own_scaling)
        self.h.addVars(n, np.broadcast_to(np.asarray(lb, dtype=np.float64), n).copy(),
                       np.broadcast_to(np.asarray(ub, dtype=np.float64), n).copy())
        self.h.changeColsCost(n, np.arange(n, dtype=np.int32), self.c)
        self.lb = np.broadcast_to(np.asarray(lb, dtype=np.float64), n).copy()
        self.ub = np.broadcast_to(np.asarray(ub, dtype=np.float64), n).copy()
        self.tol = feasibility_tol
        self.A = np.zeros((0, n))  # the rows as HiGHS holds them: scaled by powers of two, tiny entries dropped
        self.b = np.zeros(0)
        self.lowered = np.zeros(0)  # per row, how much dropping lowered its bound, in the caller's units

    def add_rows(self, A: np.ndarray, b: np.ndarray) -> None:
        A = np.ascontiguousarray(A, dtype=np.float64).reshape(-1, self.c.size)
        r, n = A.shape
        if r == 0:
            return
        s = row_scales(A)
        A, b, lowered = drop_small(A * s[:, None], np.asarray(b, dtype=np.float64).reshape(-1) * s, self.lb, self.ub)
        nz = A != 0
        starts = np.concatenate([[0], np.cumsum(nz.sum(axis=1))[:-1]]).astype(np.int32)
        self.h.addRows(r, np.full(r, -self._hs.kHighsInf), b, int(nz.sum()), starts,
                       np.nonzero(nz)[1].astype(np.int32), A[nz])
        self.A = np.concatenate([self.A, A])
        self.b = np.concatenate([self.b, b])
        self.lowered = np.concatenate([self.lowered, lowered / s])

    @property
    def n_rows(self) -> int:
        return int(self.b.size)

    def remove_rows(self, idx: np.ndarray) -> None:
        idx = np.unique(np.asarray(idx, dtype=np.int32))
        if idx.size:
            self.h.deleteRows(int(idx.size), idx)
            keep = np.ones(self.b.size, dtype=bool)
            keep[idx] = False
            self.A, self.b, self.lowered = self.A[keep], self.b[keep], self.lowered[keep]

    def solve(self) -> LPResult:
        start = time.perf_counter()
        lp = LP(self.c, self.A, self.b, self.lb, self.ub)
        reason = _run(self._hs, self.h, lp, self.tol)
        return _result(self._hs, self.h, lp, start, reason, float(self.lowered.max(initial=0.0)))


def session(c, lb, ub, *, feasibility_tol: float = 1e-9, own_scaling: bool = True) -> Session:
    """An incremental HiGHS model; ``own_scaling=False``: HiGHS's simplex scaling is off
    (``simplex_scale_strategy`` 0), the rows keep only their power-of-two scaling (see :class:`Backend`)."""
    return Session(c, lb, ub, feasibility_tol=feasibility_tol, own_scaling=own_scaling)


def solve(lp: LP, *, feasibility_tol: float = 1e-9, own_scaling: bool = True) -> LPResult:
    highspy = _import()
    start = time.perf_counter()
    s = row_scales(lp.A_ub)
    A, b, lowered = drop_small(lp.A_ub * s[:, None], lp.b_ub * s, lp.lb, lp.ub)
    lp = LP(lp.c, A, b, lp.lb, lp.ub)
    h = _new(highspy, feasibility_tol, own_scaling)
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
    return _result(highspy, h, lp, start, reason, float((lowered / s).max(initial=0.0)))
