"""LP rows of the privacy constraints (Lemma 3.4 restricted to corner multisets, App. C.3).

For a symmetric γ with free values g_j = γ((K+1)/2 + j), j = 0..(K−1)/2, the constraint of a multiset n is

    Σ_j [d_l(n) − d_{K−l}(n)] g_j  ≤  e^{mε} − 1 + 2δ,   l = (K+1)/2 + j,   d = α − e^{mε} α′.
"""

from __future__ import annotations

import math
import os
from itertools import combinations

import numpy as np

from darrm_opt.lazy import sfft
from darrm_opt.model.corners import (
    compositions,
    corners,
    multisets_with_few_corners,
    n_corners,
)
from darrm_opt.model.params import Params
from darrm_opt.model.pmf import CornerSpectra, binom_table


class RowBuilder:
    """Builds constraint rows for batches of count vectors of one problem."""

    def __init__(self, params: Params) -> None:
        self.params = params
        self.K = params.K
        self.corners = corners(params)
        self.E = math.exp(params.m * params.epsilon)
        self._p = CornerSpectra(self.corners[:, 0], self.K)
        self._q = CornerSpectra(self.corners[:, 1], self.K)
        H = params.n_free
        self.high = np.arange(H) + (self.K + 1) // 2
        self.low = self.K - self.high

    #: rows per FFT batch: a batch's temporaries (spectra, pmfs) take about 50·(K + 1) bytes per row
    CHUNK = 4096

    def rows(self, counts: np.ndarray, chunk: int = CHUNK) -> np.ndarray:
        """Constraint rows, shape (M, (K+1)/2)."""
        counts = np.asarray(counts)
        out = np.empty((counts.shape[0], self.high.size))
        for start in range(0, counts.shape[0], chunk):
            c = counts[start : start + chunk].astype(np.intp)
            d = self._pmfs(self._p, c) - self.E * self._pmfs(self._q, c)
            out[start : start + chunk] = d[:, self.high] - d[:, self.low]
        return out

    def _pmfs(self, spectra: CornerSpectra, c: np.ndarray) -> np.ndarray:
        """α for each row of ``c``: irfft(Π_c rfft(Bin(n_c, p_c))), skipping corners whose count is 0 in every
        row (their spectrum is exactly 1 + 0i, so the product is unchanged)."""
        used = np.flatnonzero(c.any(axis=0))
        if used.size == 0:
            return np.eye(1, self.K + 1).repeat(c.shape[0], axis=0)
        out = spectra.spectra[used[0]][c[:, used[0]]]
        for j in used[1:]:
            out = out * spectra.spectra[j][c[:, j]]
        return sfft.irfft(out, n=spectra.n, axis=1)[:, : self.K + 1]


def all_multisets(params: Params) -> np.ndarray:
    """Every corner multiset: C(K+7, 7) count vectors for Δ > 0, C(K+3, 3) for Δ = 0."""
    return compositions(params.K, n_corners(params))


#: Default memory budget of the candidate pool's float32 rows (DARRM_POOL_BYTES overrides it).
POOL_BYTES = 1 << 30
#: The budget for pure DP (Δ = 0): each round screens every row, and there a thinner pool costs fewer CPU
#: seconds in all (more rounds, each far cheaper; the sweep of 4 corners finds what the pool misses) and far
#: less memory: K = 501 and 1001 in benchmarks/solve_targets.py.
PURE_POOL_BYTES = 128 << 20


def pool_budget(params: Params | None = None) -> int:
    """The pool's budget in bytes: DARRM_POOL_BYTES if set, else PURE_POOL_BYTES for pure DP, else POOL_BYTES."""
    env = os.environ.get("DARRM_POOL_BYTES")
    if env:
        return int(float(env))
    return PURE_POOL_BYTES if params is not None and params.teacher_delta == 0 else POOL_BYTES


def deterministic_corners(probs: np.ndarray) -> tuple[int, int] | None:
    """Indices of the corners (0, 0) and (1, 1) (every corner set has them), or None."""
    probs = np.asarray(probs)
    z = np.flatnonzero((probs[:, 0] == 0) & (probs[:, 1] == 0))
    o = np.flatnonzero((probs[:, 0] == 1) & (probs[:, 1] == 1))
    return (int(z[0]), int(o[0])) if z.size and o.size else None


class ShiftFamilies:
    """The cost of every multiset with at most one random corner, exactly (in float64) and without rows.

    Z = (0, 0) and O = (1, 1) vote deterministically, so a multiset of n_O corners O, k corners c and the rest
    Z has L = n_O + Bin(k, p_c) and L′ = n_O + Bin(k, p′_c) (Lemma 3.4's α, α′ shifted by n_O), and its cost is
    a correlation of h(l) = s_l γ(l) with one kernel per k:

        f(c, k, n_O) = Σ_x d_k(x) h(n_O + x),   d_k = Bin(k, p_c) − e^{mε} Bin(k, p′_c),   n_O = 0..K − k.

    All shifts of all k of one corner come from one batched FFT convolution (the kernels' spectra are kept),
    O(K² log K) per γ for the K²/2 multisets of the corner. ``counts`` lists the multisets in the order of
    :meth:`costs`: per random corner c, per k (k = 0, the Z/O-only multisets, once), per n_O.

    The FFT's absolute error is a few units of 1e-16 · log₂(N) · Σ_x |d_k(x)| ≤ 1e-16 · log₂(N) · (1 + e^{mε});
    :attr:`margin` is 10⁶ times that, so a multiset whose screened cost is below level − margin costs less
    than the level."""

    def __init__(self, params: Params, probs: np.ndarray, E: float) -> None:
        K = params.K
        det = deterministic_corners(probs)
        if det is None:
            raise ValueError("shift families need the corners (0, 0) and (1, 1)")
        z, o = det
        self.K = K
        self.n = sfft.next_fast_len(2 * K + 1, real=True)  # linear convolution of lengths K + 1 and ≤ K + 1
        self.margin = 1e-10 * math.log2(self.n) * (1.0 + E)
        self.spectra: list[np.ndarray] = []
        self.gather: list[np.ndarray] = []
        blocks = []
        randoms = [c for c in range(probs.shape[0]) if c not in det]
        for i, c in enumerate(randoms):
            k0 = 0 if i == 0 else 1
            d = binom_table(float(probs[c, 0]), K) - E * binom_table(float(probs[c, 1]), K)
            ks = np.arange(k0, K + 1)
            y = np.arange(K + 1)
            rev = np.where(y[None, :] <= ks[:, None], d[ks[:, None], np.maximum(ks[:, None] - y[None, :], 0)], 0.0)
            self.spectra.append(sfft.rfft(rev, n=self.n, axis=1))
            # row r = k − k0 of the convolution holds f(c, k, n_O) at column n_O + k, n_O = 0..K − k
            kk = np.repeat(ks, K - ks + 1)
            nn = np.concatenate([np.arange(K - k + 1) for k in ks])
            self.gather.append((kk - k0) * self.n + nn + kk)
            block = np.zeros((kk.size, probs.shape[0]), dtype=np.int16)
            block[:, z], block[:, o], block[:, c] = K - kk - nn, nn, kk
            blocks.append(block)
        self.counts = np.concatenate(blocks)

    @property
    def size(self) -> int:
        return self.counts.shape[0]

    def costs(self, h: np.ndarray) -> np.ndarray:
        """f of every multiset of :attr:`counts` at the signed γ ``h`` (length K + 1)."""
        hf = sfft.rfft(np.asarray(h, dtype=np.float64), n=self.n)
        return np.concatenate([sfft.irfft(spec * hf, n=self.n, axis=1).ravel()[idx]
                               for spec, idx in zip(self.spectra, self.gather)])


def candidate_counts(params: Params, budget_bytes: int | None = None, *, shift: bool = False) -> np.ndarray:
    """Multisets that mix at most 3 distinct corners, within a memory budget for their float32 rows
    (default :func:`pool_budget`).

    Every multiset of ≤ 2 distinct corners is kept (C(C, 2)·(K − 1) + C of them); the 3-corner ones
    (C(C, 3)·C(K − 1, 2)) are kept all if they fit, otherwise an evenly spaced subset of each corner triple's
    compositions that does. No cliff: the pool degrades gradually as K grows. With ``shift`` the multisets
    of at most one random corner are left out (:class:`ShiftFamilies` covers them, all of them, without
    rows), so the budget goes to the triples with two or three random corners."""
    K, C = params.K, n_corners(params)
    budget = pool_budget(params) if budget_bytes is None else budget_bytes
    max_rows = max(1, budget // (4 * params.n_free))
    two = multisets_with_few_corners(K, C, min(2, K))
    det = deterministic_corners(corners(params)) if shift else None
    random = np.ones(C, dtype=bool)
    if det is not None:
        random[list(det)] = False
        two = two[(two[:, random] > 0).sum(axis=1) >= 2]
    if K < 3:
        return two
    triples = [cs for cs in combinations(range(C), 3) if random[list(cs)].sum() >= 2]
    per_triple = math.comb(K - 1, 2)
    room = max(0, max_rows - two.shape[0]) // max(len(triples), 1)
    pos = compositions(K - 3, 3).astype(np.int16) + 1
    if room < per_triple:
        pos = pos[np.unique(np.linspace(0, per_triple - 1, max(room, 1)).round().astype(np.intp))]
    blocks = [two]
    for cs in triples:
        block = np.zeros((pos.shape[0], C), dtype=np.int16)
        block[:, cs] = pos
        blocks.append(block)
    return np.concatenate(blocks)


class CandidatePool:
    """Cheap separation for the cutting planes: the rows of :func:`candidate_counts`, screened in float32.

    Screening only proposes; each proposed multiset is re-evaluated with its float64 row and returned only if
    that cost exceeds the level. A row the float32 screen misses is found by the exhaustive sweep, so the
    screen's rounding (≲ 1e-6 here) costs at most an extra sweep, never correctness. With ``shift`` (a
    :class:`ShiftFamilies`) the pool also holds every multiset of at most one random corner, after the rows:
    those are screened by their exact correlation costs, which need no stored rows."""

    #: float32 screen margin, relative to max(1, level)
    MARGIN = 4e-6
    #: memory for the float64 rows kept between rounds (the same rows are near the level round after round)
    CACHE_BYTES = 96 << 20

    def __init__(self, builder: RowBuilder, counts: np.ndarray, block: int = RowBuilder.CHUNK,
                 shift: ShiftFamilies | None = None) -> None:
        self.builder = builder
        self.shift = shift
        self.counts = counts if shift is None else np.concatenate([counts, shift.counts])
        self.rows32 = np.empty((counts.shape[0], builder.high.size), dtype=np.float32)
        # rows in runs of one corner subset, so each run multiplies only the spectra of its ≤ 3 corners
        support = (counts > 0).astype(np.int64) @ (1 << np.arange(counts.shape[1], dtype=np.int64))
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(support)) + 1, [counts.shape[0]]])
        for a, b in zip(cuts[:-1], cuts[1:]):
            for start in range(a, b, block):
                stop = min(b, start + block)
                self.rows32[start:stop] = builder.rows(counts[start:stop])

        self._slot = np.full(self.counts.shape[0], -1, dtype=np.int64)
        self._store = np.empty((0, builder.high.size))
        self._used = 0
        #: the last screen: (g, level, its result); in-out separation screens the same g at the same level
        #: twice in a round whenever the line search finds too many near rows and plain cuts follow
        self._last: tuple[np.ndarray, float, tuple[np.ndarray, np.ndarray]] | None = None

    @property
    def size(self) -> int:
        return self.counts.shape[0]

    def rows64(self, idx: np.ndarray) -> np.ndarray:
        """The float64 rows of pool multisets ``idx``, computed once and kept (within CACHE_BYTES; a full
        cache starts afresh). Used by in-out separation, which asks for the same near rows every round. A
        row's last bits can depend on the batch it was computed in (the FFT product skips corners no row of
        the batch uses), so a kept row may differ from a fresh one by ~1e-16: rows only propose cuts and
        move the core within the pool's rows; every γ is certified by the exhaustive sweep."""
        idx = np.asarray(idx, dtype=np.intp)
        if not self._keep(idx):
            return self.builder.rows(self.counts[idx])
        return self._store[self._slot[idx]]

    def costs64(self, idx: np.ndarray, points: np.ndarray, chunk: int = 8192) -> np.ndarray:
        """The float64 costs ``rows64(idx) @ points`` (``points``: one column per γ's free values), without
        holding all those rows at once: kept rows are read in chunks, rows that do not fit the cache are
        computed in chunks and dropped."""
        idx = np.asarray(idx, dtype=np.intp)
        points = np.asarray(points, dtype=np.float64)
        out = np.empty((idx.size, points.shape[1]))
        kept = self._keep(idx)
        for a in range(0, idx.size, chunk):
            part = idx[a : a + chunk]
            rows = self._store[self._slot[part]] if kept else self.builder.rows(self.counts[part])
            out[a : a + chunk] = rows @ points
        return out

    def _keep(self, idx: np.ndarray) -> bool:
        """Compute and keep the rows of ``idx`` not yet kept; False (nothing changed) when they would take
        more than half the cache. A full cache starts afresh."""
        miss = np.unique(idx[self._slot[idx] < 0])
        if not miss.size:
            return True
        width = self._store.shape[1]
        if (self._used + miss.size) * width * 8 > self.CACHE_BYTES:
            if np.unique(idx).size * width * 8 > self.CACHE_BYTES // 2:
                return False
            self._slot[:] = -1
            self._used = 0
            miss = np.unique(idx)
        if self._used + miss.size > self._store.shape[0]:
            # the whole cache at once, never copied: its pages become resident only as rows are written
            self._store = np.empty((max(self.CACHE_BYTES // (8 * width), self._used + miss.size), width))
            self._slot[:] = -1
            self._used = 0
            miss = np.unique(idx)
        for a in range(0, miss.size, self.builder.CHUNK):
            part = miss[a : a + self.builder.CHUNK]
            self._store[self._used + a : self._used + a + part.size] = self.builder.rows(self.counts[part])
        self._slot[miss] = np.arange(self._used, self._used + miss.size)
        self._used += miss.size
        return True

    def _screen(self, g: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        """(indices, screened costs) of the pool multisets that may cost more than ``level`` at ``g``: the
        float32 rows' within :attr:`MARGIN`·max(1, |level|), the shift families' within their FFT margin.
        The same (g, level) as the last call returns the last result (the same arrays: callers only read)."""
        g = np.asarray(g, dtype=np.float64)
        last = self._last
        if last is not None and last[1] == level and np.array_equal(last[0], g):
            return last[2]
        out = self._screen_now(g, level)
        for a in out:
            a.flags.writeable = False
        self._last = (g.copy(), level, out)
        return out

    def _screen_now(self, g: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        screen = self.rows32 @ g.astype(np.float32)
        idx = np.flatnonzero(screen > level - self.MARGIN * max(1.0, abs(level)))
        if self.shift is None:
            return idx, screen[idx]
        h = np.zeros(self.builder.K + 1)
        h[self.builder.high], h[self.builder.low] = g, -g
        exact = self.shift.costs(h)
        more = np.flatnonzero(exact > level - self.shift.margin)
        return np.concatenate([idx, more + screen.size]), np.concatenate([screen[idx], exact[more]])

    def violated(self, g: np.ndarray, level: float, limit: int, spread: int = 0, max_checked: int | None = None):
        """Up to ``limit`` pool multisets whose float64 cost at ``g`` exceeds ``level``, most violated first:
        (count vectors, their float64 rows, the largest such cost or −inf).

        With ``spread`` > 0 the picks are kept at least ``spread`` apart in L1 distance of count vectors
        (greedily, most violated first): neighbouring multisets have nearly parallel rows, and cuts spread
        over the violated regions move the LP further per round."""
        cand, screen = self._screen(g, level)
        cand = cand[np.argsort(-screen, kind="stable")][: max_checked or 20 * limit]
        if cand.size == 0:
            return self.counts[:0], np.zeros((0, self.builder.high.size)), -math.inf
        rows = self.builder.rows(self.counts[cand])
        cost = rows @ g
        hit = np.flatnonzero(cost > level)
        if hit.size == 0:
            return self.counts[:0], np.zeros((0, self.builder.high.size)), -math.inf
        hit = hit[np.argsort(-cost[hit], kind="stable")]
        pick = spread_out(self.counts[cand[hit]].astype(np.int32), limit, spread)
        chosen = hit[pick]
        return self.counts[cand[chosen]], rows[chosen], float(cost[chosen[0]])

    def near(self, g: np.ndarray, level: float, cap: int,
             points: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray] | None:
        """Indices of every pool multiset whose screen at ``g`` is within its margin of ``level`` or above (so
        every pool row *not* returned costs at most ``level`` at ``g``) and their float64 costs at the columns
        of ``points`` (default: ``g`` alone; :meth:`costs64`); None when there are more than ``cap`` of them."""
        idx, _ = self._screen(g, level)
        if idx.size > cap:
            return None
        return idx, self.costs64(idx, g[:, None] if points is None else points)


def spread_out(counts: np.ndarray, limit: int, spread: int) -> np.ndarray:
    """Indices of up to ``limit`` rows of ``counts`` (in order), each at L1 distance ≥ ``spread`` from the
    earlier picks; the first row is always picked (none when there are no rows).

    Greedy in row order, vectorised: after each pick the running minimum distance of every row to the picks
    so far is updated, and the next pick is the first later row whose minimum is ≥ ``spread`` (every pick so
    far precedes it, so this is the row-by-row greedy rule)."""
    n = counts.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    if spread <= 0:
        return np.arange(min(limit, n))
    counts = np.asarray(counts)
    # the picks among the first w rows do not depend on the later ones: try a short prefix first
    w = min(n, max(1024, 64 * limit))
    while True:
        head = counts[:w]
        picked = [0]
        nearest = np.full(w, np.iinfo(np.int64).max)
        while len(picked) < limit:
            last = picked[-1]
            np.minimum(nearest, np.abs(head - head[last]).sum(axis=1), out=nearest)
            later = np.flatnonzero(nearest[last + 1 :] >= spread)
            if later.size == 0:
                break
            picked.append(last + 1 + int(later[0]))
        if len(picked) >= limit or w == n:
            return np.array(picked)
        w = min(n, 4 * w)


def candidate_pool(params: Params, builder: RowBuilder | None = None,
                   budget_bytes: int | None = None, *, shift: bool = False) -> CandidatePool:
    """The candidate pool of ``params`` (see :func:`candidate_counts`); with ``shift`` its multisets of at
    most one random corner are the exact :class:`ShiftFamilies` instead of float32 rows."""
    builder = builder or RowBuilder(params)
    families = ShiftFamilies(params, builder.corners, builder.E) if shift else None
    return CandidatePool(builder, candidate_counts(params, budget_bytes, shift=shift), shift=families)
