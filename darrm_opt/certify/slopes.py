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

For slopes x ≥ 1 the structured sweep need not be repeated per set of slopes: one pass
(:func:`slope_front`) keeps every point (B, A) of the sweep that can be the maximum at some x ≥ 1
(darrm_opt.certify.slope_kernels: a Pareto front with exact tie handling), and any later set of slopes is
answered from those points (:meth:`SlopeFront.evaluate`) with the same values and argmax multisets, bit for
bit, as the per-slope scan (tests/test_slopes.py).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from darrm_opt.certify.kernels import HAVE_NUMBA, block_scan, column_offsets
from darrm_opt.certify.slope_kernels import block_front, drop_margin, margin_front, staircase
from darrm_opt.certify.structured import StructuredSweepProblem, _Block, _Tables
from darrm_opt.certify.sweep import SweepProblem, WorkItem, balance_items, default_workers, single_threaded_blas
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


def sweep_slopes(problem: SweepProblem, xs, workers: int | None = None, two_sided: bool = True,
                 method: str = "auto") -> SlopeResult:
    """max_n F_x(n) and (``two_sided``) max_n −F_x(n) for every x in ``xs`` over every corner multiset of
    ``problem`` (its own E is ignored), on a thread pool. For a symmetric γ the multisets are closed under
    reflection, which maps F to −F, so one side suffices (``two_sided=False``; −F is then not kept).
    ``method``: "front" (structured problems, all x ≥ 1: :func:`slope_front`), "scan" (every block scanned
    once per slope), "auto" (the front where it applies)."""
    xs = np.asarray(xs, dtype=np.float64)
    if method not in ("auto", "front", "scan"):
        raise ValueError(f"unknown multi-slope method {method!r}")
    if method != "scan" and front_applies(problem, xs):
        return slope_front(problem, workers, two_sided).evaluate(xs)
    if method == "front":
        raise ValueError("the slope front needs a structured problem and slopes x >= 1")
    items = problem.plan()
    workers = workers or default_workers()
    groups = balance_items(problem, items, max(1, min(len(items), workers * 4)))
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
    for tabs, it in p.blocks(items):
        for u3 in range(it.start, it.stop):
            for sign in ((1.0, -1.0) if two_sided else (1.0,)):
                if HAVE_NUMBA:
                    _compiled_block(p, _Block(tabs, u3, sign), xs, res)
                else:
                    _structured_block(p, it.s, u3, tabs, xs, sign, res)
        del tabs  # see StructuredSweepProblem.blocks
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


# ---------------------------------------------------------------------------------------------------------
# One pass for all slopes x ≥ 1
# ---------------------------------------------------------------------------------------------------------
def front_applies(problem: SweepProblem, xs) -> TypeGuard[StructuredSweepProblem]:
    """The slope front answers structured problems at slopes x ≥ 1 (finite)."""
    xs = np.asarray(xs, dtype=np.float64)
    return isinstance(problem, StructuredSweepProblem) and bool(np.all(np.isfinite(xs)) and np.all(xs >= 1.0))


@dataclass
class _Side:
    """Kept points of one side (σ = ±1): values t = σA, p = σB-partner minimum, order keys, multisets."""

    t: np.ndarray
    p: np.ndarray
    key: np.ndarray
    counts: np.ndarray

    @classmethod
    def empty(cls) -> _Side:
        return cls(np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros((0, 8), dtype=np.int64))

    @classmethod
    def concat(cls, parts: list[_Side]) -> _Side:
        return cls(*(np.concatenate([getattr(x, f) for x in parts]) for f in ("t", "p", "key", "counts")))

    def take(self, idx: np.ndarray) -> _Side:
        return _Side(self.t[idx], self.p[idx], self.key[idx], self.counts[idx])

    def best(self, x: float) -> tuple[float, tuple[int, ...] | None]:
        """max fl(t − fl(x p)) and the multiset of the first (smallest key) point attaining it."""
        if self.t.size == 0:
            return -math.inf, None
        vals = self.t - x * self.p
        m = vals.max()
        ties = np.flatnonzero(vals == m)
        j = int(ties[np.argmin(self.key[ties])])
        return float(m), tuple(int(c) for c in self.counts[j])


@dataclass
class SlopeFront:
    """The points of a structured sweep that can be a maximum at some slope x ≥ 1, per side."""

    pos: _Side
    neg: _Side | None
    #: the signed table h of the problem swept (the points depend on it alone, not on the sweep's E)
    h: np.ndarray | None = field(default=None, compare=False, repr=False)

    def matches(self, h: np.ndarray, two_sided: bool) -> bool:
        """True when this front is that of ``h`` with the sides a sweep of that sidedness keeps."""
        return (self.h is not None and (self.neg is not None) == two_sided
                and np.array_equal(self.h, np.asarray(h, dtype=np.float64)))

    def __len__(self) -> int:
        return self.pos.t.size + (self.neg.t.size if self.neg is not None else 0)

    def evaluate(self, xs) -> SlopeResult:
        """The multi-slope sweep's result at slopes ``xs`` (all ≥ 1), from the kept points."""
        xs = np.asarray(xs, dtype=np.float64)
        if not (np.all(np.isfinite(xs)) and np.all(xs >= 1.0)):
            raise ValueError("the slope front answers finite slopes x >= 1 only")
        res = SlopeResult(xs)
        for k, x in enumerate(xs):
            for side, negative in ((self.pos, False), (self.neg, True)):
                if side is not None:
                    value, counts = side.best(float(x))
                    if math.isfinite(value):
                        res.offer(k, value, counts, negative)
        return res


def slope_front(problem: StructuredSweepProblem, workers: int | None = None, two_sided: bool = True) -> SlopeFront:
    """One structured pass keeping every point that can be a maximum at a slope x ≥ 1 (both signs when
    ``two_sided``), on a thread pool: each group of items keeps its own front, merged at the end."""
    S = _front_margin(problem)
    items = problem.plan()
    workers = workers or default_workers()
    groups = balance_items(problem, items, max(1, min(len(items), workers * 4)))
    signs = (1.0, -1.0) if two_sided else (1.0,)
    with single_threaded_blas(), ThreadPoolExecutor(workers) as pool:
        parts = list(pool.map(lambda g: _front_group(problem, g, S, signs), groups))
    return _merged_front(problem, parts, two_sided)


#: a group compacts its newly kept points into its front once this many are pending (or as many as it holds)
PENDING = 20_000


class FrontCollector:
    """The kept points of one group of work items, per sign, fed one prefix sum's tables at a time (by
    :func:`slope_front`, or by a certifying sweep that computes the same tables: see :class:`FrontRequest`).
    Each call of the kernel sees the front of the group's earlier blocks (all earlier in the sweep's order)
    as its staircase."""

    def __init__(self, problem: StructuredSweepProblem, S: float, signs) -> None:
        self.p, self.S, self.signs = problem, S, tuple(signs)
        self.kept = [_Side.empty() for _ in self.signs]
        self.pending: list[list[_Side]] = [[] for _ in self.signs]
        self.stairs = [staircase(self.kept[0].p, self.kept[0].t) for _ in self.signs]
        self.owner, self.groups = 0, 0  #: set by FrontRequest.collector

    def add(self, tabs: _Tables, it: WorkItem) -> None:
        """The blocks (s, u3), it.start ≤ u3 < it.stop, of the tables ``tabs`` (prefix sum s = it.s)."""
        p, S = self.p, self.S
        for j, sign in enumerate(self.signs):
            rows, vals = block_front(tabs.T1, tabs.T2, tabs.offsets, it.start, it.stop, it.s, p.K - it.s, sign, S,
                                     self.stairs[j])
            if rows.shape[0]:
                self.pending[j].append(_kept_rows(p, it.s, rows, vals))
            if sum(x.t.size for x in self.pending[j]) > max(PENDING, self.kept[j].t.size):
                self.kept[j] = _compact(self.kept[j], self.pending[j], S)
                self.pending[j] = []
                self.stairs[j] = staircase(self.kept[j].p, self.kept[j].t)

    def sides(self) -> list[_Side]:
        """The kept points so far, one :class:`_Side` per sign (compacted, and the staircase with them)."""
        for j in range(len(self.signs)):
            if self.pending[j]:
                self.kept[j] = _compact(self.kept[j], self.pending[j], self.S)
                self.pending[j] = []
                self.stairs[j] = staircase(self.kept[j].p, self.kept[j].t)
        return list(self.kept)


@dataclass(frozen=True)
class FrontRequest:
    """Asks a structured sweep (``StructuredSweepProblem.run(front=...)``) to keep, from the tables it computes
    anyway, the slope front of its problem's h (the points do not depend on the sweep's E), and
    :meth:`finish` merges what the groups kept into the :class:`SlopeFront` that :func:`slope_front` would
    answer with (the same values and argmax multisets at every slope x ≥ 1: both keep only points that the
    module's drop rules allow to drop).

    Each thread keeps one :class:`FrontCollector` for all the groups it runs: a thread takes the groups in the
    sweep's order, so its staircase is still the front of blocks earlier in that order (the weak drop rule
    needs this), and a new group starts from the points of the thread's earlier ones instead of none.
    ``SweepResult.front`` maps each collector to its latest (group count, sides)."""

    two_sided: bool
    _local: threading.local = field(default_factory=threading.local, compare=False, repr=False)
    _ids: Iterator[int] = field(default_factory=itertools.count, compare=False, repr=False)

    def fresh(self) -> FrontRequest:
        """The same request with no collectors yet: one per sweep, so that no staircase holds another sweep's
        points (a later block's point may weakly drop an earlier one only within the order of one sweep)."""
        return FrontRequest(self.two_sided)

    def collector(self, problem: StructuredSweepProblem) -> FrontCollector:
        """This thread's collector for ``problem`` (a new one on its first group)."""
        col = getattr(self._local, "collector", None)
        if col is None or col.p is not problem:
            col = FrontCollector(problem, _front_margin(problem), (1.0, -1.0) if self.two_sided else (1.0,))
            col.owner, col.groups = next(self._ids), 0
            self._local.collector = col
        return col

    @staticmethod
    def part(col: FrontCollector) -> dict[int, tuple[int, list[_Side]]]:
        """What a group's result carries: its collector's points so far, numbered by the groups it has run."""
        col.groups += 1
        return {col.owner: (col.groups, col.sides())}

    def finish(self, problem: StructuredSweepProblem, parts: dict | None) -> SlopeFront:
        return _merged_front(problem, [sides for _, sides in (parts or {}).values()], self.two_sided)


def _front_margin(problem: StructuredSweepProblem) -> float:
    M = 2.0 * float(np.abs(problem.h).max()) if problem.h.size else 0.0  # |σT1|, |σT2| ≤ max|h|·Σ|α|
    return drop_margin(M)


def _merged_front(problem: StructuredSweepProblem, parts: list[list[_Side]], two_sided: bool) -> SlopeFront:
    """The groups' kept points merged into one front per side."""
    S = _front_margin(problem)
    sides = []
    for j in range(2 if two_sided else 1):
        allp = _Side.concat([part[j] for part in parts]) if parts else _Side.empty()
        sides.append(allp.take(margin_front(allp.p, allp.t, allp.key, S)))
    return SlopeFront(sides[0], sides[1] if two_sided else None, np.array(problem.h, dtype=np.float64))


def _front_group(p: StructuredSweepProblem, items: list[WorkItem], S: float, signs) -> list[_Side]:
    """The kept points of one group of items, per sign (see :class:`FrontCollector`)."""
    col = FrontCollector(p, S, signs)
    for tabs, it in p.blocks(items):
        col.add(tabs, it)
        del tabs  # see StructuredSweepProblem.blocks
    return col.sides()


def _compact(kept: _Side, pending: list[_Side], S: float) -> _Side:
    allp = _Side.concat([kept, *pending])
    return allp.take(margin_front(allp.p, allp.t, allp.key, S))


def _kept_rows(p: StructuredSweepProblem, s: int, rows: np.ndarray, vals: np.ndarray) -> _Side:
    """Kernel rows (u3, u2, v3, v2, u1, v1) as order keys (the place of s in the sweep's order, u3, u2, v3, v2;
    :meth:`StructuredSweepProblem.order_rank`) and multisets."""
    K = p.K
    u3, u2, v3, v2, u1, v1 = rows.T
    key = (((p.order_rank(s) * (K + 1) + u3) * (K + 1) + u2) * (K + 1) + v3) * (K + 1) + v2
    counts = np.stack([s - u1 - u2 - u3, u1, u2, u3, K - s - v1 - v2 - v3, v1, v2, v3], axis=1)
    return _Side(vals[:, 0].copy(), vals[:, 1].copy(), key.astype(np.int64), counts.astype(np.int64))
