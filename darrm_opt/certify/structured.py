"""The exhaustive sweep for Δ > 0 in O(K⁵) instead of O(K⁷): an exact maximum over every multiset.

With the corners ordered as in :mod:`darrm_opt.model.corners`,

    prefix: (0,0) (0,Δ) (Δ,0) hi      counts u = (u0, u1, u2, u3), Σu = s
    suffix: (1,1) (1,1−Δ) (1−Δ,1) lo  counts v = (v0, v1, v2, v3), Σv = K − s

the D-side pmf α ignores the corners with p = 0 and shifts by those with p = 1, so it depends only on
(u2, u3) and (v2, v3) given s; the D′-side pmf α′ likewise depends only on (u1, u3) and (v1, v3). Hence

    f(u, v) = T1_{u3,v3}[u2, v2] − e^{mε} T2_{u3,v3}[u1, v1],    u1 + u2 ≤ s − u3,  v1 + v2 ≤ K − s − v3,

where T1 = Σ_l h_l α_l and T2 = Σ_l h_l α′_l are small matrix products (as in :mod:`darrm_opt.certify.sweep`). The
maximum over all (u1, v1) for a given (u2, v2) is attained at the minimum of T2 over the rectangle
[0, s−u3−u2] × [0, K−s−v3−v2], a 2-D prefix minimum. So

    max_n f(n) = max_{s, u3, v3, u2, v2} T1[u2, v2] − e^{mε} PM2[s−u3−u2, K−s−v3−v2],

computed with cumulative minima: every multiset is covered (C(K+7, 7) of them), none is evaluated one by
one. The minimum (for non-symmetric γ) is the same computation on (−T1, −T2). Multisets above a
threshold are enumerated on demand: for separation one per (u2, v2, u3, v3) with its best partner
(u1, v1); for the high-precision re-check all of them. The float error is that of the generic sweep: the
same products and one subtraction per cost; the minima and maxima are exact.

The tables T1, T2 of one prefix sum s are computed once per sweep (one work item per s), and each
(s, u3) block is scanned by the fused compiled kernel of :mod:`darrm_opt.certify.kernels` (bitwise equal to
its numpy form).

Reflection (symmetric γ). The reflection (p, p′) → (1 − p, 1 − p′) maps prefix corner i onto suffix corner i
(darrm_opt.model.corners: (0,0)↔(1,1), (0,Δ)↔(1,1−Δ), (Δ,0)↔(1−Δ,1), hi↔lo), so the reflected multiset of
n = (u, v) is n′ = (v, u), with prefix sum K − s. A count drawn at a reflected corner is c − Bin(c, p) for one
drawn at p, so the D-side sum of n′ is K minus that of n: α_l(n′) = α_{K−l}(n), and likewise α′_l(n′) =
α′_{K−l}(n). For a symmetric γ (K odd) h_{K−l} = −h_l, hence T1(n′) = −T1(n), T2(n′) = −T2(n) and
f(n′) = −f(n), for every e^{mε}. In table entries: the row (x, u3) of prefix sum K − s is the column (x, u3) of
prefix sum s (x = u2 of n′ is v2 of n, and so on), so

    T1_{K−s} = −T1_sᵀ,    T2_{K−s} = −T2_sᵀ    (exactly, rows and columns both ordered as :func:`_pairs`).

So a sweep of a symmetric γ computes the tables only for s ≤ (K − 1)/2 and reads those of K − s as their
negated transposes, block by block (:meth:`StructuredSweepProblem.blocks`: the rows of group u3 of T_{K−s}
are the columns of group u3 of T_s, so no whole reflected table is held): every multiset is still scanned once, by the
same scans, near sets and slope front, and only the table products are halved. Float error: the computed
tables of s meet the exact ones of s within the per-cost bound of :func:`darrm_opt.certify.sweep.error_bound`
(which already covers the rounding of the corners to floats); negation and transposition are exact, and the
exact tables of K − s are exactly those negated transposes, so the reflected entries meet the exact ones of
K − s within the same bound. Non-symmetric γ (or K even) take the direct tables for every s, as before.
The sweep's order is then s = 0, K, 1, K − 1, …; the order keys of the slope front follow it
(:meth:`StructuredSweepProblem.order_rank`), so first-in-order ties resolve the same in every consumer.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from darrm_opt.certify.kernels import block_scan
from darrm_opt.certify.sweep import SweepProblem, SweepResult, WorkItem
from darrm_opt.lazy import sfft


def structured_applies(probs: np.ndarray) -> bool:
    """True for the 8-corner (Δ > 0) set in the canonical order."""
    p = np.asarray(probs)
    return (
        p.shape == (8, 2)
        and p[0, 0] == 0 and p[0, 1] == 0 and p[1, 0] == 0 and p[2, 1] == 0
        and p[4, 0] == 1 and p[4, 1] == 1 and p[5, 0] == 1 and p[6, 1] == 1
    )


#: True: every sweep problem made in this context computes the tables of every s (no reflection), the sweep
#: of darrm-opt before the reflection, whose last bits ``verify`` needs to recompute the files it wrote
_FULL_TABLES: contextvars.ContextVar[bool] = contextvars.ContextVar("darrm_full_tables", default=False)


@contextlib.contextmanager
def full_tables() -> Iterator[None]:
    """Within the block, structured sweep problems compute every prefix sum's tables directly (no reflection):
    the same certificate up to the last bits of its maximum and the order of its ties, as darrm-opt computed
    it before the reflection."""
    token = _FULL_TABLES.set(True)
    try:
        yield
    finally:
        _FULL_TABLES.reset(token)


#: side of the square tiles of :func:`_neg_transposed` (a tile of each array stays in cache)
_TILE = 256


def _neg_transposed(T: np.ndarray) -> np.ndarray:
    """−Tᵀ as a C-contiguous array, copied tile by tile (5× faster than one strided copy at K = 251)."""
    out = np.empty((T.shape[1], T.shape[0]))
    for i in range(0, T.shape[0], _TILE):
        for j in range(0, T.shape[1], _TILE):
            np.negative(T[i : i + _TILE, j : j + _TILE].T, out=out[j : j + _TILE, i : i + _TILE])
    return out


def _pairs(total: int) -> np.ndarray:
    """All (x, y) ≥ 0 with x + y ≤ total, ordered by y then x (rows contiguous per y)."""
    ys, xs = [], []
    for y in range(total + 1):
        xs.append(np.arange(total - y + 1))
        ys.append(np.full(total - y + 1, y))
    return np.stack([np.concatenate(xs), np.concatenate(ys)], axis=1)


@dataclass(frozen=True)
class _Tables:
    """The per-s tables: T1 = Σ_l h_l α_l and T2 = Σ_l h_l α′_l, rows (x, u3) grouped by u3 from
    ``offsets[u3]``, columns (y, v3) grouped by v3 (see :func:`_pairs`)."""

    s: int
    T1: np.ndarray
    T2: np.ndarray
    offsets: np.ndarray


@dataclass(frozen=True)
class _Block:
    """One (s, u3) block of a sweep, as seen from the maximum (sign = 1) or minimum (sign = −1) side."""

    tabs: _Tables
    u3: int
    sign: float

    @property
    def r0(self) -> int:
        return int(self.tabs.offsets[self.u3])

    @property
    def A(self) -> int:
        return self.tabs.s - self.u3


class StructuredSweepProblem(SweepProblem):
    """Drop-in replacement of :class:`SweepProblem` for the 8-corner set (same plan/run interface)."""

    def __init__(self, probs, h, E, *, reflect=None) -> None:
        super().__init__(probs, h, E, reflect=False)
        if not structured_applies(self.probs):
            raise ValueError("the structured sweep needs the 8 canonical corners of Δ > 0")
        # the reflection (module docstring) needs h antisymmetric (γ symmetric, K odd) and the suffix corners
        # the reflections of the prefix ones (up to their rounding to floats, which error_bound covers)
        pairs = bool(np.all(np.abs(self.probs[4:] - (1.0 - self.probs[:4])) <= 2.0**-51))
        sym = bool(np.array_equal(self.h, -self.h[::-1])) and self.K % 2 == 1 and pairs
        if reflect is None:
            reflect = not _FULL_TABLES.get()
        self.reflect = bool(reflect) and sym

    def __setstate__(self, state):
        StructuredSweepProblem.__init__(self, state["probs"], state["h"], state["E"], reflect=state["reflect"])

    def plan(self, rows_per_item: int | None = None) -> list[WorkItem]:
        """One item per prefix sum s (all its u3), so each s's tables are computed once per sweep; for a
        symmetric γ one item per s ≤ (K − 1)/2 that also covers K − s (``mirror``: its tables are the reflected
        ones of s), in the order s = 0, K, 1, K − 1, …. ``rows_per_item`` splits the u3 ranges (tests only: the
        tables are then recomputed per item, and the reflected ones from a recomputation of s)."""
        items = []
        order = [s for t in range((self.K + 1) // 2) for s in (t, self.K - t)] if self.reflect else range(self.K + 1)
        for s in order:
            if self.reflect and rows_per_item is None:
                if 2 * s < self.K:
                    items.append(WorkItem(s, 0, s + 1, mirror=True))
                continue
            step = rows_per_item or s + 1
            for start in range(0, s + 1, step):
                items.append(WorkItem(s, start, min(s + 1, start + step)))
        return items

    def order_rank(self, s: int) -> int:
        """The place of prefix sum s in the sweep's order (see :meth:`plan`): s itself, or for a symmetric γ
        2s when s ≤ (K − 1)/2 and 2(K − s) + 1 otherwise."""
        if not self.reflect:
            return s
        return 2 * s if 2 * s < self.K else 2 * (self.K - s) + 1

    def _parts(self, it: WorkItem) -> list[WorkItem]:
        """``it`` as plain items: itself, and for a mirror item every block of K − s."""
        plain = WorkItem(it.s, it.start, it.stop)
        return [plain, WorkItem(self.K - it.s, 0, self.K - it.s + 1)] if it.mirror else [plain]

    def item_work(self, it: WorkItem) -> float:
        return sum((p.stop - p.start) * (self.K - p.s + 1) * (p.s + 1) * (self.K - p.s + 1) for p in self._parts(it))

    def item_multisets(self, it: WorkItem) -> int:
        total = 0
        for p in self._parts(it):
            b = math.comb(self.K - p.s + 3, 3)
            total += sum(math.comb(p.s - u3 + 2, 2) for u3 in range(p.start, p.stop)) * b
        return total

    def blocks(self, items):
        """(tables, plain item) for every part of ``items`` in the sweep's order, each s's tables computed once
        per run of items with that s; a mirror item's blocks of K − s follow its own, one (tables, item) per
        u3 read from the same tables (:meth:`_reflected_blocks`)."""
        tabs = None
        for it in items:
            if tabs is None or tabs.s != it.s:
                tabs = None  # a caller drops its reference too (see run), so the old tables go first
                tabs = self._tables(it.s)
            yield tabs, WorkItem(it.s, it.start, it.stop)
            if it.mirror:
                yield from self._reflected_blocks(tabs)

    def _reflected_blocks(self, tabs: _Tables):
        """The blocks (K − s, u3), u3 = 0..K − s, from the tables of s: the rows of group u3 of T_{K−s} are the
        negated transpose of the column group u3 of T_s (module docstring). Each block's tables hold only
        those rows (its ``offsets`` shifted so that group u3 starts at row 0, the only offset read for it), so
        no whole reflected table is held besides the direct ones."""
        Ks = self.K - tabs.s
        offsets = np.concatenate([[0], np.cumsum([Ks - u3 + 1 for u3 in range(Ks + 1)])])
        for u3 in range(Ks + 1):
            c0, c1 = int(offsets[u3]), int(offsets[u3 + 1])  # column groups of T_s are ordered as these rows
            part = _Tables(Ks, _neg_transposed(tabs.T1[:, c0:c1]), _neg_transposed(tabs.T2[:, c0:c1]),
                           offsets - c0)
            yield part, WorkItem(Ks, u3, u3 + 1)

    # -- per-s tables -------------------------------------------------------------------------------------
    def _tables(self, s: int) -> _Tables:
        """T1 and T2 for prefix sum s: computed (:meth:`_direct_tables`), or for a symmetric γ and 2s > K the
        reflected tables of K − s (module docstring)."""
        if self.reflect and 2 * s > self.K:
            return self._reflected(self._direct_tables(self.K - s))
        return self._direct_tables(s)

    def _reflected(self, tabs: _Tables) -> _Tables:
        """The whole tables of prefix sum K − s from those of s: T_{K−s} = −T_sᵀ (exact; module docstring)."""
        Ks, T1, T2 = self.K - tabs.s, tabs.T1, tabs.T2
        T1 = _neg_transposed(T1)
        T2 = _neg_transposed(T2)
        offsets = np.concatenate([[0], np.cumsum([Ks - u3 + 1 for u3 in range(Ks + 1)])])
        return _Tables(Ks, T1, T2, offsets)

    def _direct_tables(self, s: int) -> _Tables:
        """T1 (α side) and T2 (α′ side) for prefix sum s."""
        K, h = self.K, self.h
        Ks = K - s
        rows = _pairs(s)  # (x, u3): x = u2 for T1, u1 for T2
        cols = _pairs(Ks)  # (y, v3): y = v2 for T1, v1 for T2
        z_r = np.zeros(len(rows), dtype=np.intp)
        z_c = np.zeros(len(cols), dtype=np.intp)
        # representative count vectors (the p ∈ {0, 1} counts put on corner 0 / 4)
        u_a = np.stack([s - rows[:, 0] - rows[:, 1], z_r, rows[:, 0], rows[:, 1]], axis=1)
        u_b = np.stack([s - rows[:, 0] - rows[:, 1], rows[:, 0], z_r, rows[:, 1]], axis=1)
        v_a = np.stack([Ks - cols[:, 0] - cols[:, 1], z_c, cols[:, 0], cols[:, 1]], axis=1)
        v_b = np.stack([Ks - cols[:, 0] - cols[:, 1], cols[:, 0], z_c, cols[:, 1]], axis=1)
        Pa = self._side_pmfs(u_a, 0, 0, s + 1)
        Pb = self._side_pmfs(u_b, 0, 1, s + 1)
        Qa = self._side_pmfs(v_a, 4, 0, Ks + 1)
        Qb = self._side_pmfs(v_b, 4, 1, Ks + 1)
        short = min(s, Ks) + 1
        if s <= Ks:
            H = np.lib.stride_tricks.sliding_window_view(h, Ks + 1)[:short].T
            T1 = Pa @ (Qa @ H).T
            T2 = Pb @ (Qb @ H).T
        else:
            H = np.lib.stride_tricks.sliding_window_view(h, s + 1)[:short].T
            T1 = (Pa @ H) @ Qa.T
            T2 = (Pb @ H) @ Qb.T
        offsets = np.concatenate([[0], np.cumsum([s - u3 + 1 for u3 in range(s + 1)])])
        return _Tables(s, np.ascontiguousarray(T1), np.ascontiguousarray(T2), offsets)

    def _side_pmfs(self, counts: np.ndarray, first: int, side: int, length: int) -> np.ndarray:
        """The pmfs of one side (0: α with p, 1: α′ with p′) of the corners first..first+3 for each row of
        ``counts``: irfft(Π_c rfft(Bin(n_c, p_c))). Corners whose spectrum is identically 1 (p_c = 0, or a zero
        count column) are skipped; multiplying by 1 + 0i is exact, so this equals the generic product."""
        n, sp, sq = self.spectra()
        spec = (sp, sq)[side]
        out = None
        for j in range(counts.shape[1]):
            c = first + j
            if self.probs[c, side] == 0.0 or not counts[:, j].any():
                continue
            f = spec[c][counts[:, j]]
            out = f if out is None else out * f
        if out is None:
            return np.eye(1, length).repeat(counts.shape[0], axis=0)
        return sfft.irfft(out, n=n, axis=1)[:, :length]

    def run(self, items, *, threshold=None, top=0, near=None, two_sided=False, near_cap=200_000,
            front=None) -> SweepResult:
        """The sweep of ``items``. ``front``: a :class:`darrm_opt.certify.slopes.FrontRequest`; the slope
        front's points are then also kept from the same tables (``SweepResult.front``: this group's part)."""
        t0 = time.perf_counter()
        res = SweepResult(violators=np.zeros((0, 8), dtype=np.int16), near=np.zeros((0, 8), dtype=np.int16))
        collector = front.collector(self) if front is not None else None
        for tabs, it in self.blocks(items):
            for u3 in range(it.start, it.stop):
                self._block(_Block(tabs, u3, 1.0), res, threshold, top, near, near_cap)
                if two_sided:
                    self._block(_Block(tabs, u3, -1.0), res, None, 0, near, near_cap)
            if collector is not None:
                collector.add(tabs, it)
            res.multisets += self.item_multisets(it)
            del tabs  # see blocks(): the old tables go before the next ones are computed
        if collector is not None:
            res.front = front.part(collector)
        res.seconds = time.perf_counter() - t0
        return res

    # -- one block ----------------------------------------------------------------------------------------
    def _block(self, blk: _Block, res: SweepResult, threshold, top, near, near_cap) -> None:
        """All multisets with prefix sum s and u3 hi-corners; sign = −1 computes the minimum side."""
        levels = [x for x, on in ((threshold, top > 0), (near, not res.near_overflow)) if x is not None and on]
        level = min(levels) if levels else math.inf
        T = blk.tabs
        fmax, pos, above, vals = block_scan(T.T1, T.T2, blk.r0, blk.A, self.K - T.s, self.E, blk.sign, level)
        if blk.sign > 0 and fmax > res.max_cost:
            res.max_cost, res.worst = fmax, self._multiset(blk, *pos, *self._partner(blk, *pos))  # type: ignore[call-arg]
        if blk.sign < 0 and -fmax < res.min_cost:
            res.min_cost, res.best = -fmax, self._multiset(blk, *pos, *self._partner(blk, *pos))  # type: ignore[call-arg]
        if threshold is not None and top > 0 and fmax > threshold:
            self._collect_violators(blk, above, vals, res, threshold, top, near_cap)
        if near is not None and fmax > near and not res.near_overflow:
            self._collect_near(blk, above, vals, res, near, near_cap)

    def _multiset(self, blk: _Block, u2: int, v3: int, v2: int, u1: int, v1: int) -> tuple[int, ...]:
        s, u3, K = blk.tabs.s, blk.u3, self.K
        return (s - u1 - u2 - u3, u1, u2, u3, K - s - v1 - v2 - v3, v1, v2, v3)

    def _rect(self, blk: _Block, u2: int, v3: int, v2: int) -> np.ndarray:
        """σ T2 over the partners (u1, v1) of (u2, v3, v2): u1 ≤ A − u2, v1 ≤ K − s − v3 − v2."""
        T, s = blk.tabs, blk.tabs.s
        c0 = (self.K - s + 1) * v3 - v3 * (v3 - 1) // 2  # column offset of group v3
        return blk.sign * T.T2[blk.r0 : blk.r0 + blk.A - u2 + 1, c0 : c0 + self.K - s - v3 - v2 + 1]

    def _partner(self, blk: _Block, u2: int, v3: int, v2: int) -> tuple[int, int]:
        """The partner (u1, v1) attaining the prefix minimum (the first in row-major order)."""
        sub = self._rect(blk, u2, v3, v2)
        u1, v1 = np.unravel_index(int(sub.argmin()), sub.shape)
        return int(u1), int(v1)

    def _collect_violators(self, blk: _Block, above, vals, res, threshold, top, near_cap) -> None:
        """One violator per (u2, v3, v2) above ``threshold`` (with its best partner), at most ``top``."""
        idx = np.flatnonzero(vals > threshold)
        if idx.size > top:
            idx = idx[np.argpartition(-vals[idx], top - 1)[:top]]
        cnt = [self._multiset(blk, *above[k], *self._partner(blk, *above[k])) for k in idx]  # type: ignore[call-arg]
        part = SweepResult(violators=np.array(cnt, dtype=np.int16), violator_costs=vals[idx].copy())
        res.merge(part, top, near_cap)

    def _collect_near(self, blk: _Block, above, vals, res, near, near_cap) -> None:
        """Every multiset above ``near``: for each (u2, v3, v2) whose best partner passes, all partners that do
        (in row-major (u1, v1) order), at most ``near_cap`` in all."""
        found: list[np.ndarray] = []
        costs: list[np.ndarray] = []
        room = near_cap - res.near.shape[0]
        T1, E, s, u3, K = blk.tabs.T1, self.E, blk.tabs.s, blk.u3, self.K
        c_of = lambda v3: (K - s + 1) * v3 - v3 * (v3 - 1) // 2  # noqa: E731
        for k in np.flatnonzero(vals > near):
            u2, v3, v2 = (int(x) for x in above[k])
            x1 = blk.sign * T1[blk.r0 + u2, c_of(v3) + v2]
            sub = x1 - E * self._rect(blk, u2, v3, v2)
            u1, v1 = np.nonzero(sub > near)
            if u1.size > room:
                res.near_overflow = True
                u1, v1 = u1[:room], v1[:room]
            one = np.ones_like(u1)
            found.append(np.stack([s - u1 - u2 - u3, u1, u2 * one, u3 * one, K - s - v1 - v2 - v3, v1, v2 * one,
                                   v3 * one], axis=1))
            costs.append(sub[u1, v1])
            room -= u1.size
            if res.near_overflow:
                break
        if found:
            res.near = np.concatenate([res.near, *(f.astype(np.int16) for f in found)])
            res.near_costs = np.concatenate([res.near_costs, *costs])
