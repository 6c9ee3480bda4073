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
"""

from __future__ import annotations

import math

import numpy as np

from darrm_opt.certify.sweep import SweepProblem, SweepResult, WorkItem


def structured_applies(probs: np.ndarray) -> bool:
    """True for the 8-corner (Δ > 0) set in the canonical order."""
    p = np.asarray(probs)
    return (
        p.shape == (8, 2)
        and p[0, 0] == 0 and p[0, 1] == 0 and p[1, 0] == 0 and p[2, 1] == 0
        and p[4, 0] == 1 and p[4, 1] == 1 and p[5, 0] == 1 and p[6, 1] == 1
    )


def _pairs(total: int) -> np.ndarray:
    """All (x, y) ≥ 0 with x + y ≤ total, ordered by y then x (rows contiguous per y)."""
    ys, xs = [], []
    for y in range(total + 1):
        xs.append(np.arange(total - y + 1))
        ys.append(np.full(total - y + 1, y))
    return np.stack([np.concatenate(xs), np.concatenate(ys)], axis=1)


class StructuredSweepProblem(SweepProblem):
    """Drop-in replacement of :class:`SweepProblem` for the 8-corner set (same plan/run interface)."""

    def __init__(self, probs, h, E, *, reflect=None) -> None:
        super().__init__(probs, h, E, reflect=False)
        if not structured_applies(self.probs):
            raise ValueError("the structured sweep needs the 8 canonical corners of Δ > 0")

    def __setstate__(self, state):
        self.__init__(state["probs"], state["h"], state["E"])

    def plan(self, rows_per_item: int | None = None) -> list[WorkItem]:
        """One item per (s, range of u3)."""
        items = []
        for s in range(self.K + 1):
            step = rows_per_item or max(1, (s + 1) // 4 or 1)
            for start in range(0, s + 1, step):
                items.append(WorkItem(s, start, min(s + 1, start + step)))
        return items

    def item_work(self, it: WorkItem) -> float:
        return sum(self.K - it.s + 1 for _ in range(it.start, it.stop)) * (it.s + 1) * (self.K - it.s + 1)

    def item_multisets(self, it: WorkItem) -> int:
        b = math.comb(self.K - it.s + 3, 3)
        return sum(math.comb(it.s - u3 + 2, 2) for u3 in range(it.start, it.stop)) * b

    # -- per-s tables -------------------------------------------------------------------------------------
    def _tables(self, s: int):
        """T1 (α side) and T2 (α′ side) as padded arrays [u3][x, v3, y] for this s."""
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
        Pa, _ = self._pmfs(u_a, range(0, 4), s + 1)
        _, Pb = self._pmfs(u_b, range(0, 4), s + 1)
        Qa, _ = self._pmfs(v_a, range(4, 8), Ks + 1)
        _, Qb = self._pmfs(v_b, range(4, 8), Ks + 1)
        short = min(s, Ks) + 1
        if s <= Ks:
            H = np.lib.stride_tricks.sliding_window_view(h, Ks + 1)[:short].T
            T1 = Pa @ (Qa @ H).T
            T2 = Pb @ (Qb @ H).T
        else:
            H = np.lib.stride_tricks.sliding_window_view(h, s + 1)[:short].T
            T1 = (Pa @ H) @ Qa.T
            T2 = (Pb @ H) @ Qb.T
        # pad the columns to a (v3, y) grid; rows stay grouped by u3
        n = Ks + 1
        colpos = cols[:, 1] * n + cols[:, 0]
        offsets = np.concatenate([[0], np.cumsum([s - u3 + 1 for u3 in range(s + 1)])])
        vrev = Ks - np.arange(n)[:, None] - np.arange(n)[None, :]  # [v3, y] -> K − s − v3 − y
        valid_v = vrev >= 0
        vrev = np.where(valid_v, vrev, 0)
        return T1, T2, colpos, offsets, n, vrev, valid_v

    def run(self, items, *, threshold=None, top=0, near=None, two_sided=False, near_cap=200_000) -> SweepResult:
        import time

        t0 = time.perf_counter()
        res = SweepResult(violators=np.zeros((0, 8), dtype=np.int16), near=np.zeros((0, 8), dtype=np.int16))
        cache_s, tabs = None, None
        for it in items:
            if it.s != cache_s:
                tabs = self._tables(it.s)
                cache_s = it.s
            for u3 in range(it.start, it.stop):
                self._block(it.s, u3, tabs, res, threshold, top, near, near_cap, sign=1.0)
                if two_sided:
                    self._block(it.s, u3, tabs, res, None, 0, near, near_cap, sign=-1.0)
            res.multisets += self.item_multisets(it)
        res.seconds = time.perf_counter() - t0
        return res

    def _block(self, s, u3, tabs, res, threshold, top, near, near_cap, sign) -> None:
        """All multisets with prefix sum s and u3 hi-corners; sign = −1 computes the minimum side."""
        T1, T2, colpos, offsets, n, vrev, valid_v = tabs
        K, E = self.K, self.E
        A = s - u3
        r0, r1 = offsets[u3], offsets[u3 + 1]
        X1 = np.full((A + 1, n * n), -np.inf)
        X1[:, colpos] = sign * T1[r0:r1]
        X2 = np.full((A + 1, n * n), np.inf)
        X2[:, colpos] = sign * T2[r0:r1]
        X1 = X1.reshape(A + 1, n, n)  # [u2, v3, v2]
        X2 = X2.reshape(A + 1, n, n)  # [u1, v3, v1]
        PM = np.minimum.accumulate(X2, axis=0)
        PM = np.minimum.accumulate(PM, axis=2)
        R = np.take_along_axis(PM[::-1], np.broadcast_to(vrev, (A + 1, n, n)), axis=2)
        M = X1 - E * R  # f for the best partner of each (u2, v3, v2); −inf where invalid
        fmax = float(M.max())
        best = fmax if sign > 0 else -fmax

        def multiset(u2, v3, v2, u1, v1):
            return (s - u1 - u2 - u3, u1, u2, u3, K - s - v1 - v2 - v3, v1, v2, v3)

        def partner(u2, v3, v2):
            sub = X2[: A - u2 + 1, v3, : K - s - v3 - v2 + 1]
            u1, v1 = np.unravel_index(int(sub.argmin()), sub.shape)
            return int(u1), int(v1)

        if sign > 0 and fmax > res.max_cost:
            u2, v3, v2 = (int(x) for x in np.unravel_index(int(M.argmax()), M.shape))
            res.max_cost = fmax
            res.worst = multiset(u2, v3, v2, *partner(u2, v3, v2))
        if sign < 0 and best < res.min_cost:
            u2, v3, v2 = (int(x) for x in np.unravel_index(int(M.argmax()), M.shape))
            res.min_cost = best
            res.best = multiset(u2, v3, v2, *partner(u2, v3, v2))
        if threshold is not None and top > 0 and fmax > threshold:
            flat = M.ravel()
            idx = np.flatnonzero(flat > threshold)
            if idx.size > top:
                idx = idx[np.argpartition(-flat[idx], top - 1)[:top]]
            cnt = []
            for k in idx:
                u2, v3, v2 = (int(x) for x in np.unravel_index(int(k), M.shape))
                cnt.append(multiset(u2, v3, v2, *partner(u2, v3, v2)))
            part = SweepResult(violators=np.array(cnt, dtype=np.int16), violator_costs=flat[idx].copy())
            res.merge(part, top, near_cap)
        if near is not None and fmax > near and not res.near_overflow:
            # every multiset above `near`: for each (u2, v3, v2) whose best partner passes, all partners that do
            found = []
            have = res.near.shape[0]
            for k in np.flatnonzero(M.ravel() > near):
                u2, v3, v2 = (int(x) for x in np.unravel_index(int(k), M.shape))
                sub = X1[u2, v3, v2] - E * X2[: A - u2 + 1, v3, : K - s - v3 - v2 + 1]
                for u1, v1 in zip(*np.nonzero(sub > near)):
                    if have + len(found) >= near_cap:
                        res.near_overflow = True
                        break
                    found.append(multiset(u2, v3, v2, int(u1), int(v1)))
                if res.near_overflow:
                    break
            if found:
                res.near = np.concatenate([res.near, np.array(found, dtype=np.int16)])
