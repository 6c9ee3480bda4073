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
from darrm_opt.model.pmf import CornerSpectra


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

    def rows(self, counts: np.ndarray, chunk: int = 50_000) -> np.ndarray:
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


def pool_budget() -> int:
    env = os.environ.get("DARRM_POOL_BYTES")
    return int(float(env)) if env else POOL_BYTES


def candidate_counts(params: Params, budget_bytes: int | None = None) -> np.ndarray:
    """Multisets that mix at most 3 distinct corners, within a memory budget for their float32 rows.

    Every multiset of ≤ 2 distinct corners is kept (C(C, 2)·(K − 1) + C of them); the 3-corner ones
    (C(C, 3)·C(K − 1, 2)) are kept all if they fit, otherwise an evenly spaced subset of each corner triple's
    compositions that does. No cliff: the pool degrades gradually as K grows."""
    K, C = params.K, n_corners(params)
    budget = pool_budget() if budget_bytes is None else budget_bytes
    max_rows = max(1, budget // (4 * params.n_free))
    two = multisets_with_few_corners(K, C, min(2, K))
    if K < 3:
        return two
    per_triple = math.comb(K - 1, 2)
    room = max(0, max_rows - two.shape[0]) // math.comb(C, 3)
    pos = compositions(K - 3, 3).astype(np.int16) + 1
    if room < per_triple:
        pos = pos[np.unique(np.linspace(0, per_triple - 1, max(room, 1)).round().astype(np.intp))]
    blocks = [two]
    for cs in combinations(range(C), 3):
        block = np.zeros((pos.shape[0], C), dtype=np.int16)
        block[:, cs] = pos
        blocks.append(block)
    return np.concatenate(blocks)


class CandidatePool:
    """Cheap separation for the cutting planes: the rows of :func:`candidate_counts`, screened in float32.

    Screening only proposes; each proposed multiset is re-evaluated with its float64 row and returned only if
    that cost exceeds the level. A row the float32 screen misses is found by the exhaustive sweep, so the
    screen's rounding (≲ 1e-6 here) costs at most an extra sweep, never correctness."""

    #: float32 screen margin, relative to max(1, level)
    MARGIN = 4e-6
    #: memory for the float64 rows kept between rounds (the same rows are near the level round after round)
    CACHE_BYTES = 256 << 20

    def __init__(self, builder: RowBuilder, counts: np.ndarray, block: int = 20_000) -> None:
        self.builder = builder
        self.counts = counts
        self.rows32 = np.empty((counts.shape[0], builder.high.size), dtype=np.float32)
        # rows in runs of one corner subset, so each run multiplies only the spectra of its ≤ 3 corners
        support = (counts > 0).astype(np.int64) @ (1 << np.arange(counts.shape[1], dtype=np.int64))
        cuts = np.concatenate([[0], np.flatnonzero(np.diff(support)) + 1, [counts.shape[0]]])
        for a, b in zip(cuts[:-1], cuts[1:]):
            for start in range(a, b, block):
                stop = min(b, start + block)
                self.rows32[start:stop] = builder.rows(counts[start:stop])

        self._slot = np.full(counts.shape[0], -1, dtype=np.int64)
        self._store = np.empty((0, builder.high.size))
        self._used = 0

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
        miss = np.unique(idx[self._slot[idx] < 0])
        if miss.size:
            width = self._store.shape[1]
            if (self._used + miss.size) * width * 8 > self.CACHE_BYTES:
                if miss.size * width * 8 > self.CACHE_BYTES // 2:
                    return self.builder.rows(self.counts[idx])
                self._slot[:] = -1
                self._used = 0
                miss = np.unique(idx)
            if self._used + miss.size > self._store.shape[0]:
                grown = np.empty((max(2 * self._store.shape[0], self._used + miss.size), width))
                grown[: self._used] = self._store[: self._used]
                self._store = grown
            self._store[self._used : self._used + miss.size] = self.builder.rows(self.counts[miss])
            self._slot[miss] = np.arange(self._used, self._used + miss.size)
            self._used += miss.size
        return self._store[self._slot[idx]]

    def violated(self, g: np.ndarray, level: float, limit: int, spread: int = 0, max_checked: int | None = None):
        """Up to ``limit`` pool multisets whose float64 cost at ``g`` exceeds ``level``, most violated first:
        (count vectors, their float64 rows, the largest such cost or −inf).

        With ``spread`` > 0 the picks are kept at least ``spread`` apart in L1 distance of count vectors
        (greedily, most violated first): neighbouring multisets have nearly parallel rows, and cuts spread
        over the violated regions move the LP further per round."""
        screen = self.rows32 @ g.astype(np.float32)
        cand = np.flatnonzero(screen > level - self.MARGIN * max(1.0, abs(level)))
        cand = cand[np.argsort(-screen[cand], kind="stable")][: max_checked or 20 * limit]
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


    def near(self, g: np.ndarray, level: float, cap: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Indices and float64 rows of every pool multiset whose float32 screen at ``g`` is within the screen
        margin of ``level`` or above (so every pool row *not* returned costs at most ``level`` at ``g``);
        None when there are more than ``cap`` of them."""
        screen = self.rows32 @ g.astype(np.float32)
        idx = np.flatnonzero(screen > level - self.MARGIN * max(1.0, abs(level)))
        if idx.size > cap:
            return None
        return idx, self.rows64(idx)


def spread_out(counts: np.ndarray, limit: int, spread: int) -> np.ndarray:
    """Indices of up to ``limit`` rows of ``counts`` (in order), each at L1 distance ≥ ``spread`` from the
    earlier picks; the first row is always picked (none when there are no rows)."""
    if counts.shape[0] == 0:
        return np.zeros(0, dtype=np.intp)
    if spread <= 0:
        return np.arange(min(limit, counts.shape[0]))
    picked = [0]
    for i in range(1, counts.shape[0]):
        if len(picked) >= limit:
            break
        if np.abs(counts[picked] - counts[i]).sum(axis=1).min() >= spread:
            picked.append(i)
    return np.array(picked)


def candidate_pool(params: Params, builder: RowBuilder | None = None,
                   budget_bytes: int | None = None) -> CandidatePool:
    """The candidate pool of ``params`` (see :func:`candidate_counts`)."""
    return CandidatePool(builder or RowBuilder(params), candidate_counts(params, budget_bytes))
