"""One exhaustive sweep that maximises the privacy cost at many slopes at once.

For slopes x_1..x_S the costs of a multiset n are F_x(n) = A(n) − x B(n) with A = Σ_l h_l α_l(n) and
B = Σ_l h_l α′_l(n) (Lemma 3.4 with E = x). The generic sweep (darrm_opt.certify.sweep) computes one block of
A − E B by one matrix product; here the two halves of that product are kept apart, A and B, so each extra
slope costs one subtraction and two reductions per block instead of a whole sweep. The structured sweep
(darrm_opt.certify.structured) picks, for each (u₂, v₃, v₂), the partner (u₁, v₁) minimising B's part, which
does not depend on E, so its prefix minima are shared by all slopes in the same way.

For every slope both max F and max (−F) are kept with their argmax multisets (−F at n is the cost of the
other output, the reflected multiset when γ is symmetric). The float error of each value is that of the
generic sweep with E = x (darrm_opt.certify.sweep.error_bound).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from darrm_opt.certify.kernels import HAVE_NUMBA, block_scan, column_offsets
from darrm_opt.certify.structured import StructuredSweepProblem, _Block, _Tables
from darrm_opt.certify.sweep import SweepProblem, WorkItem, _balance, default_workers, single_threaded_blas
from darrm_opt.model.corners import compositions


@dataclass
class SlopeResult:
    """Per slope: the largest F and −F and the count vectors attaining them."""

    xs: np.ndarray
    best: np.ndarray = field(init=False)
    best_neg: np.ndarray = field(init=False)
    arg: list = field(init=False)
    arg_neg: list = field(init=False)

    def __post_init__(self) -> None:
        self.best = np.full(self.xs.size, -np.inf)
        self.best_neg = np.full(self.xs.size, -np.inf)
        self.arg = [None] * self.xs.size
        self.arg_neg = [None] * self.xs.size

    def offer(self, k: int, value: float, counts, negative: bool) -> None:
        if negative:
            if value > self.best_neg[k]:
                self.best_neg[k], self.arg_neg[k] = value, counts
        elif value > self.best[k]:
            self.best[k], self.arg[k] = value, counts

    def merge(self, other: SlopeResult) -> None:
        for k in range(self.xs.size):
            self.offer(k, other.best[k], other.arg[k], False)
            self.offer(k, other.best_neg[k], other.arg_neg[k], True)


def sweep_slopes(problem: SweepProblem, xs, workers: int | None = None, two_sided: bool = True) -> SlopeResult:
    """max_n F_x(n) and (``two_sided``) max_n −F_x(n) for every x in ``xs`` over every corner multiset of
    ``problem`` (its own E is ignored), on a thread pool. For a symmetric γ the multisets are closed under
    reflection, which maps F to −F, so one side suffices (``two_sided=False``; −F is then not kept)."""
    xs = np.asarray(xs, dtype=np.float64)
    items = problem.plan()
    workers = workers or default_workers()
    groups = _balance(problem, items, max(1, min(len(items), workers * 4)))
    run: Callable[..., SlopeResult] = _run_structured if isinstance(problem, StructuredSweepProblem) else _run_matrix
    out = SlopeResult(xs)
    with single_threaded_blas(), ThreadPoolExecutor(workers) as pool:
        for part in pool.map(lambda g: run(problem, g, xs, two_sided), groups):
            out.merge(part)
    return out


def _run_matrix(p: SweepProblem, items: list[WorkItem], xs: np.ndarray, two_sided: bool) -> SlopeResult:
    """The generic sweep's blocks with A and B kept apart (see darrm_opt.certify.sweep.SweepProblem.run)."""
    K, a, h = p.K, p.a, p.h
    b = p.C - a
    res = SlopeResult(xs)
    cache_s = None
    for it in items:
        s = it.s
        if cache_s != s:
            V = compositions(K - s, b)
            Qa, Qb = p._pmfs(V, range(a, p.C), K - s + 1)
            short = min(s, K - s) + 1
            if s <= K - s:
                H = np.lib.stride_tricks.sliding_window_view(h, K - s + 1)[:short].T
                Ra, Rb = Qa @ H, Qb @ H
            else:
                Ra, Rb = Qa, Qb
            U_all = compositions(s, a)
            cache_s = s
        U = U_all[it.start: it.stop]
        Pa, Pb = p._pmfs(U, range(0, a), s + 1)
        if s > K - s:
            H = np.lib.stride_tricks.sliding_window_view(h, s + 1)[:short].T
            Pa, Pb = Pa @ H, Pb @ H
        FA, FB = Pa @ Ra.T, Pb @ Rb.T
        for k, x in enumerate(xs):
            F = FA - x * FB
            sides = ((False, int(F.argmax())), (True, int(F.argmin()))) if two_sided or p.reflect else (
                (False, int(F.argmax())),)
            for negative, idx in sides:
                i, j = divmod(idx, F.shape[1])
                value = float(-F.flat[idx] if negative else F.flat[idx])
                counts = tuple(int(c) for c in np.concatenate([U[i], V[j]]))
                if p.reflect and negative:  # the reflected multiset (v, u) has cost −F: its output-1 point
                    res.offer(k, value, tuple(int(c) for c in np.concatenate([V[j], U[i]])), False)
                else:
                    res.offer(k, value, counts, negative)
    return res


def _run_structured(p: StructuredSweepProblem, items: list[WorkItem], xs: np.ndarray,
                    two_sided: bool) -> SlopeResult:
    """The structured sweep's blocks for all slopes (see darrm_opt.certify.structured)."""
    res = SlopeResult(xs)
    tabs: _Tables | None = None
    for it in items:
        if tabs is None or it.s != tabs.s:
            tabs = p._tables(it.s)
        for u3 in range(it.start, it.stop):
            for sign in ((1.0, -1.0) if two_sided else (1.0,)):
                if HAVE_NUMBA:
                    _compiled_block(p, _Block(tabs, u3, sign), xs, res)
                else:
                    _structured_block(p, it.s, u3, tabs, xs, sign, res)
    return res


def _compiled_block(p: StructuredSweepProblem, blk: _Block, xs: np.ndarray, res: SlopeResult) -> None:
    """:func:`_structured_block` by the structured sweep's compiled block scan, once per slope: the scan
    returns the same maximum and (first, row-major) argmax as the numpy form, bit for bit."""
    T = blk.tabs
    Ks = p.K - T.s
    for k, x in enumerate(xs):
        fmax, pos, _, _ = block_scan(T.T1, T.T2, blk.r0, blk.A, Ks, float(x), blk.sign, math.inf)
        if not np.isfinite(fmax):
            continue
        u2, v3, v2 = (int(c) for c in pos)
        counts = p._multiset(blk, u2, v3, v2, *p._partner(blk, u2, v3, v2))
        res.offer(k, float(fmax), counts, blk.sign < 0)


def _column_layout(Ks: int) -> tuple[int, np.ndarray, np.ndarray]:
    """The padded (v3, y) grid of the structured tables' columns (ordered by v3, then y = 0..Ks − v3; see
    :func:`darrm_opt.certify.kernels.column_offsets`): its side n, each column's flat position, and the
    index K − s − v3 − y of the partner's last coordinate (0 where negative: those cells are padding)."""
    n = Ks + 1
    coff = column_offsets(Ks)
    v3 = np.repeat(np.arange(n), n - np.arange(n))
    colpos = v3 * n + (np.arange(coff[-1] + 1) - coff[v3])
    vrev = Ks - np.arange(n)[:, None] - np.arange(n)[None, :]
    return n, colpos, np.where(vrev >= 0, vrev, 0)


def _structured_block(p: StructuredSweepProblem, s: int, u3: int, tabs, xs: np.ndarray, sign: float,
                      res: SlopeResult) -> None:
    """max over the multisets with prefix sum s and u3 hi-corners of sign·F_x, for every x."""
    T1, T2, offsets = tabs.T1, tabs.T2, tabs.offsets
    K = p.K
    n, colpos, vrev = _column_layout(K - s)
    A = s - u3
    r0, r1 = offsets[u3], offsets[u3 + 1]
    X1: np.ndarray = np.full((A + 1, n * n), -np.inf)
    X1[:, colpos] = sign * T1[r0:r1]
    X2: np.ndarray = np.full((A + 1, n * n), np.inf)
    X2[:, colpos] = sign * T2[r0:r1]
    X1 = X1.reshape(A + 1, n, n)
    X2 = X2.reshape(A + 1, n, n)
    PM = np.minimum.accumulate(np.minimum.accumulate(X2, axis=0), axis=2)
    R = np.take_along_axis(PM[::-1], np.broadcast_to(vrev, (A + 1, n, n)), axis=2)
    for k, x in enumerate(xs):
        M = X1 - x * R
        idx = int(M.argmax())
        value = float(M.flat[idx])
        if not np.isfinite(value):
            continue
        u2, v3, v2 = (int(c) for c in np.unravel_index(idx, M.shape))
        sub = X2[: A - u2 + 1, v3, : K - s - v3 - v2 + 1]
        u1, v1 = (int(c) for c in np.unravel_index(int(sub.argmin()), sub.shape))
        counts = (s - u1 - u2 - u3, u1, u2, u3, K - s - v1 - v2 - v3, v1, v2, v3)
        res.offer(k, value, counts, sign < 0)
