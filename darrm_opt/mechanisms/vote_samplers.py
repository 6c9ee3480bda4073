"""The answer samplers of the vote mechanisms: one released answer per row of votes, with exact coins.

Each sampler checks a batch of votes (``prepare``: no coin drawn) and releases one answer per row (``draw``)
from ``random_bytes`` (:data:`~darrm_opt.sampling.source.system_random` in the serving path; tests may
inject a seeded source), through the exact primitives of :mod:`darrm_opt.sampling`. Votes are never logged
or stored by this module.

**DaRRM Algorithm 1** (:class:`BinarySampler`): for each row of K votes (0/1), L = Σ votes,
majority = 1{L ≥ (K+1)/2}; with probability γ(L) output the majority, otherwise a fair coin. The γ(L) coin
is :class:`~darrm_opt.sampling.bernoulli.FixedWidthCoins`: every row draws the same W bits whatever γ(L) or
the outcome (issue 33), Pr[keep] = γ(L) exactly, and the answer is chosen without a branch on the coin. No
rounding of γ ever reaches the output, so the released mechanism is exactly the certified one.

**Multi-class DaRRM** (:class:`MulticlassSampler`), **the top-two rule** (:class:`Top2Sampler`) and
**GNMax / Confident-GNMax** (:class:`GnmaxSampler`) answer rows of class labels; each class docstring gives
its law and the order in which it reads random bytes.

Against timing (issue 33), GNMax: the noise comes from pools drawn ahead
(:func:`~darrm_opt.sampling.pool.noise_pool`: a request takes samples drawn before it, so the rejection
samplers' work on its values is not in its time), and a tie-breaking index is drawn for every answered
row, a tie or not (a top set of one takes index 0 of it), so whether the noisy counts tied does not change
the work either.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.sampling import (
    TWO64,
    FixedWidthCoins,
    RandomBytes,
    exact_bernoulli,
    noise_pool,
    system_random,
    uint64_words,
    uniform_index,
    uniform_indices,
    uniform_limits,
    uniform_rejection,
)

#: batches up to this many rows are answered without numpy
SMALL = 32
#: what a 0/1 vote may be (one hash lookup a vote, the same for 0 and 1)
_BITS = frozenset((0, 1))


class BinarySampler:
    """DaRRM_γ for one certified table; call it on a (rows, K) array of 0/1 votes."""

    def __init__(self, gamma: Sequence[float], random_bytes: RandomBytes = system_random) -> None:
        g = np.asarray(gamma, dtype=np.float64)
        if g.ndim != 1 or g.size < 2 or not np.all((g >= 0) & (g <= 1)):
            raise InvalidParameter("gamma", "must be K + 1 values in [0, 1]")
        self.K = g.size - 1
        if self.K % 2 == 0:  # the tie L = K/2 is a fair coin whatever γ(K/2) (model.neighbours)
            g = g.copy()
            g[self.K // 2] = 0.0
        self.gamma = g
        self.random_bytes = random_bytes
        self.coins = FixedWidthCoins(g)
        #: random bytes of one row's γ coin (the same for every row of this table)
        self.coin_bytes = self.coins.nbytes
        self._half = (self.K + 1) // 2
        self._majority = [int(L >= self._half) for L in range(self.K + 1)]

    def __call__(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """Answers (uint8 0/1, one per row) for ``votes`` of shape (rows, K) with entries 0/1."""
        return self.draw(self.prepare(votes))

    def prepare(self, votes: np.ndarray | Sequence[Sequence[int]]) -> list[int] | np.ndarray:
        """The vote counts L of ``votes`` (rows, K) of 0/1, checked (InvalidParameter naming ``votes``); no
        coin is drawn. Up to ``SMALL`` rows are counted in plain Python: a numpy call on a tiny array costs
        more than the arithmetic, and each one that releases the GIL lets the server's other threads in. Each
        vote is checked by one set lookup (the same work for a 0 as for a 1: the time does not count the
        ones)."""
        if isinstance(votes, np.ndarray) and votes.ndim != 2:
            raise InvalidParameter("votes", f"must be a 2-D array of rows of K = {self.K} votes (got "
                                   f"{votes.ndim} dimension(s))")
        if len(votes) <= SMALL:
            rows = votes.tolist() if isinstance(votes, np.ndarray) else votes
            counts = []
            for row in rows:
                if not isinstance(row, (list, tuple, np.ndarray)) or len(row) != self.K:
                    raise InvalidParameter("votes", f"must be rows of K = {self.K} votes")
                try:
                    valid = all([x in _BITS for x in row])
                except TypeError:  # an unhashable entry
                    valid = False
                if not valid:
                    raise InvalidParameter("votes", "every vote must be 0 or 1")
                counts.append(int(sum(row)))
            return counts
        v = np.asarray(votes)
        if v.ndim != 2 or v.shape[1] != self.K:
            raise InvalidParameter("votes", f"must be rows of K = {self.K} votes")
        if v.dtype != np.uint8:
            if not np.all((v == 0) | (v == 1)):
                raise InvalidParameter("votes", "every vote must be 0 or 1")
            v = v.astype(np.uint8)
        elif v.size and v.max() > 1:
            raise InvalidParameter("votes", "every vote must be 0 or 1")
        return v.sum(axis=1, dtype=np.uint16) if self.K < 65535 else v.sum(axis=1)

    @staticmethod
    def rows(prepared: list[int] | np.ndarray) -> int:
        return len(prepared)

    def draw(self, prepared: list[int] | np.ndarray) -> np.ndarray:
        """Algorithm 1 for the counts of :meth:`prepare`: the answers, with fresh exact coins."""
        if isinstance(prepared, list):
            return np.frombuffer(self._answers_small(prepared), dtype=np.uint8)
        return self.answers_from_counts(prepared)

    def _answers_small(self, counts: list[int]) -> bytes:
        """Algorithm 1 for a few vote counts, with the same exact coins as :meth:`answers_from_counts`: one
        read of ``coin_bytes`` per row then one fair bit per row (the lowest bit of the first byte first), the
        coin by :meth:`FixedWidthCoins.one`, the answer picked without a branch on the coin."""
        n = len(counts)
        w = self.coin_bytes
        coins = self.random_bytes(w * n + (n + 7) // 8)
        fair = int.from_bytes(coins[w * n :], "little")
        one, majority = self.coins.one, self._majority
        out = bytearray(n)
        for i, L in enumerate(counts):
            keep = one(coins[w * i : w * i + w], L)
            f = (fair >> i) & 1
            out[i] = f ^ ((majority[L] ^ f) & keep)  # the majority if kept, else the fair bit
        return bytes(out)

    def answers_from_counts(self, L: np.ndarray) -> np.ndarray:
        """Answers for vote counts L (0..K), the core of Algorithm 1: ``coin_bytes`` per row for the coins
        (one read, row order), then the fair bits (one read, ``np.packbits`` order)."""
        n = L.shape[0]
        if n == 0:
            return np.zeros(0, dtype=np.uint8)
        majority = L >= self._half
        keep = self.coins.many(self.random_bytes(self.coin_bytes * n), np.asarray(L, dtype=np.intp))
        fair = np.unpackbits(np.frombuffer(self.random_bytes((n + 7) // 8), dtype=np.uint8), count=n)
        return np.where(keep, majority.view(np.uint8), fair).astype(np.uint8, copy=False)

    def probability_of_one(self, L: int) -> float:
        """Pr[answer = 1 | L] = γ(L) + (1 − γ(L))/2 if L is a majority of ones, else (1 − γ(L))/2."""
        g = float(self.gamma[L])
        return g + (1 - g) / 2 if L >= self._half else (1 - g) / 2


class SubsampledBinarySampler:
    """A table of m teachers answering from a uniform m-subset of K teachers' 0/1 votes, drawn per row without
    replacement (PATE setting, ``subsample``): only the subset's count j of 1-votes reaches the table, and
    given the row's L ones j is drawn exactly as the subset is: m steps, each a uniform position among the
    K − t teachers not yet drawn (:func:`uniform_indices`, exact rejection of 64-bit words), a 1-vote iff it
    falls among the remaining ones. Then Algorithm 1 of the m-teacher table on j (:class:`BinarySampler`)."""

    def __init__(self, K: int, gamma: Sequence[float], random_bytes: RandomBytes = system_random) -> None:
        self.table = BinarySampler(gamma, random_bytes)
        self.m = self.table.K
        if not (1 <= self.m <= K):
            raise InvalidParameter("subsample", f"must be between 1 and K = {K}", self.m)
        self.K = K
        self.random_bytes = random_bytes
        self._votes = BinarySampler([0.0] * (K + 1), random_bytes)  # its checks of K-vote rows (no coin)
        self._all_kept, self._limit = uniform_rejection(K)

    def __call__(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        return self.draw(self.prepare(votes))

    def prepare(self, votes: np.ndarray | Sequence[Sequence[int]]) -> list[int] | np.ndarray:
        """The vote counts L of rows of K votes, checked (no coin)."""
        return self._votes.prepare(votes)

    @staticmethod
    def rows(prepared: list[int] | np.ndarray) -> int:
        return len(prepared)

    def subset_counts(self, counts: np.ndarray) -> np.ndarray:
        """j ~ Hypergeometric(K, L, m) per row, exactly (the class docstring)."""
        ones = np.asarray(counts, dtype=np.int64).copy()
        j = np.zeros(ones.size, dtype=np.int64)
        for t in range(self.m):
            size = np.full(ones.size, self.K - t, dtype=np.int64)
            u = uniform_indices(size, self._all_kept, self._limit, self.random_bytes)
            hit = u < ones
            j += hit
            ones -= hit
        return j

    def draw(self, prepared: list[int] | np.ndarray) -> np.ndarray:
        """The answers for the counts of :meth:`prepare`: a subset per row, then the table's coins."""
        if len(prepared) == 0:
            return np.zeros(0, dtype=np.uint8)
        return self.table.answers_from_counts(self.subset_counts(np.asarray(prepared)).astype(np.intp))


# ------------------------------------------------------------------------------------------------------
# Multi-class DaRRM (PATE setting, darrm_opt.model.multiclass): class-label votes

def class_labels(votes: np.ndarray | Sequence[Sequence[int]], K: int, C: int) -> np.ndarray:
    """The (rows, K) class labels in [0, C), checked; InvalidParameter naming ``votes`` and the first bad
    row."""
    if not isinstance(votes, np.ndarray):
        bad = next((i for i, r in enumerate(votes) if len(r) != K), None)
        if bad is not None:
            raise InvalidParameter("votes", f"row {bad}: every row must have K = {K} class labels")
    v = np.asarray(votes)
    if v.ndim != 2 or v.shape[1] != K:
        raise InvalidParameter("votes", f"must be rows of K = {K} class labels")
    if v.size and not np.issubdtype(v.dtype, np.integer):
        raise InvalidParameter("votes", "every vote must be an integer class label")
    bad_rows = np.flatnonzero(((v < 0) | (v >= C)).any(axis=1)) if v.size else np.zeros(0, np.int64)
    if bad_rows.size:
        raise InvalidParameter("votes", f"row {int(bad_rows[0])}: every label must be an integer in "
                               f"[0, {C - 1}] (C = {C} classes)")
    return v


def label_histograms(v: np.ndarray, C: int) -> np.ndarray:
    """(rows, C) histograms of checked (rows, K) labels."""
    n = v.shape[0]
    idx = (np.arange(n, dtype=np.int64)[:, None] * C + v.astype(np.int64)).ravel()
    return np.bincount(idx, minlength=n * C).reshape(n, C)


#: histogram cells (rows × C) formed at once by the label samplers (bounds their temporaries)
CHUNK_CELLS = 1 << 18


class LabelSampler:
    """A sampler of class-label votes: ``prepare`` checks the (rows, K) labels into what ``draw`` takes (no
    coin is drawn), ``draw`` releases one answer per row with fresh exact coins; calling it does both."""

    def prepare(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        raise NotImplementedError

    def draw(self, prepared: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @staticmethod
    def rows(prepared: np.ndarray) -> int:
        return int(prepared.shape[0])

    def __call__(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        return self.draw(self.prepare(votes))


class MulticlassSampler(LabelSampler):
    """Multi-class DaRRM_γ for one certified table (:func:`darrm_opt.model.multiclass.output_distribution`):
    for a histogram h of the K votes over C classes, gap g = h₍₁₎ − h₍₂₎ (0 for a tie) and top set T,

        P(c) = (1 − γ(g))/C + γ(g)·1{c ∈ T}/|T|                                        (MC-1)

    realised as: keep with probability exactly γ(g) (:func:`~darrm_opt.sampling.bernoulli.exact_bernoulli`: a
    uniform 64-bit U against ⌊γ·2^64⌋, recursing on the remainder when equal); if kept, a uniformly random class of T
    (no draw when |T| = 1), else a uniformly random class of all C. A uniform index in {0..n−1} is
    U mod n for a 64-bit U below 2^64 − (2^64 mod n) (rejection sampling, exactly uniform).

    Random bytes are read in this order: 8 per row for the coins (one call); 8 per tied coin, in row order;
    8 per row that needs an index (one call, row order); then 8 per rejected index, until none is rejected.
    """

    def __init__(self, gamma: Sequence[float], classes: int, random_bytes: RandomBytes = system_random) -> None:
        g = np.asarray(gamma, dtype=np.float64)
        if g.ndim != 1 or g.size < 2 or not np.all((g >= 0) & (g <= 1)):
            raise InvalidParameter("gamma", "must be K + 1 values in [0, 1]")
        if isinstance(classes, bool) or not isinstance(classes, (int, np.integer)) or not 2 <= classes <= 65535:
            raise InvalidParameter("classes", "must be an integer in [2, 65535]", classes)
        self.K, self.C = g.size - 1, int(classes)
        self.gamma = g
        self.random_bytes = random_bytes
        fracs = [Fraction(float(x)) for x in g]
        self._always = np.array([f == 1 for f in fracs])
        self._threshold = np.array([0 if f == 1 else int(f * TWO64) for f in fracs], dtype=np.uint64)
        self._remainder = [Fraction(0) if f == 1 else f * TWO64 - int(f * TWO64) for f in fracs]
        self._all_kept, self._limit = uniform_rejection(self.C)
        self.dtype = np.uint8 if self.C <= 256 else np.uint16

    def _labels(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        return class_labels(votes, self.K, self.C)

    def _count(self, v: np.ndarray) -> np.ndarray:
        return label_histograms(v, self.C)

    def histograms(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """The (rows, C) histograms of (rows, K) class labels; InvalidParameter naming the first bad row."""
        return self._count(self._labels(votes))

    def prepare(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """The (rows, K) class labels, checked (InvalidParameter naming ``votes``); no coin is drawn."""
        return self._labels(votes)

    def draw(self, prepared: np.ndarray) -> np.ndarray:
        """(MC-1) for the labels of :meth:`prepare`, with fresh exact coins; the histograms are formed
        :data:`CHUNK_CELLS` cells at a time (memory O(rows + CHUNK_CELLS), whatever C)."""
        return self._release(prepared.shape[0], lambda lo, hi: self._count(prepared[lo:hi]))

    def answers_from_histograms(self, h: np.ndarray) -> np.ndarray:
        """One released class per histogram row (counts over the C classes summing to K), by (MC-1)."""
        h = np.asarray(h, dtype=np.int64)
        n = h.shape[0]
        if h.ndim != 2 or h.shape[1] != self.C or (n and (h.min() < 0 or np.any(h.sum(axis=1) != self.K))):
            raise InvalidParameter("votes", f"histograms must be rows of C = {self.C} counts >= 0 summing to "
                                   f"K = {self.K}")
        return self._release(n, lambda lo, hi: h[lo:hi])

    def _release(self, n: int, rows: Callable[[int, int], np.ndarray]) -> np.ndarray:
        """(MC-1) for n histograms, ``rows(lo, hi)`` giving rows lo..hi − 1: the gaps and top-set sizes chunk
        by chunk, the coins and indices for all rows (the byte order of the class docstring), then the
        index-th top class chunk by chunk."""
        if n == 0:
            return np.zeros(0, dtype=self.dtype)
        step = max(1, CHUNK_CELLS // self.C)
        gap, t = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        for lo in range(0, n, step):
            h = rows(lo, lo + step)
            top = h == h.max(axis=1, keepdims=True)
            t[lo : lo + step] = top.sum(axis=1)
            second = np.partition(h, self.C - 2, axis=1)[:, self.C - 2]
            gap[lo : lo + step] = np.where(t[lo : lo + step] > 1, 0, h.max(axis=1) - second)
        keep = self._coins(gap)
        # among the top set, or among all classes
        index = uniform_indices(np.where(keep, t, self.C), self._all_kept, self._limit, self.random_bytes)
        out = index.astype(self.dtype)
        for lo in range(0, n, step):
            k = keep[lo : lo + step]
            if not k.any():
                continue
            h = rows(lo, lo + step)
            top = h == h.max(axis=1, keepdims=True)
            rank = np.cumsum(top, axis=1) - 1  # the index-th top class (classes in increasing order)
            kept_class = np.argmax(top & (rank == index[lo : lo + step, None]), axis=1)
            out[lo : lo + step] = np.where(k, kept_class, out[lo : lo + step])
        return out

    def _coins(self, gap: np.ndarray) -> np.ndarray:
        """Bernoulli(γ(g)) per row, exactly (8 bytes per row, then 8 per tie in row order)."""
        n = gap.shape[0]
        u = uint64_words(self.random_bytes, n)
        t = self._threshold[gap]
        always = self._always[gap]
        keep = (u < t) | always
        for i in np.flatnonzero((u == t) & ~always):  # probability 2^-64 per row
            keep[i] = exact_bernoulli(self._remainder[int(gap[i])], self.random_bytes)
        return keep

    def distribution(self, h: Sequence[int]) -> list[Fraction]:
        """(MC-1) in exact rationals for one histogram: the law of the released class."""
        h = list(map(int, h))
        M = max(h)
        T = [c for c in range(self.C) if h[c] == M]
        gap = 0 if len(T) > 1 else M - sorted(h)[-2]
        g = Fraction(float(self.gamma[gap]))
        return [(1 - g) / self.C + (g / len(T) if c in T else 0) for c in range(self.C)]



class Top2Sampler(LabelSampler):
    """The top-two multi-class rule for one certified table (:func:`darrm_opt.model.top2.output_distribution`):
    for a histogram in state s with top set T and runner-up set R,

        P(c) = (1 − p(s) − q(s))/C + p(s)·1{c ∈ T}/|T| + q(s)·1{c ∈ R}/|R|                       (TT-1)

    realised row by row as: with probability exactly p(s) a uniform class of T; else with probability
    exactly q(s)/(1 − p(s)) a uniform class of R; else a uniform class of all C (exact dyadic coins,
    :func:`exact_bernoulli`; uniform indices by 64-bit rejection sampling, no draw for a set of one).
    Random bytes are read row by row in that order."""

    def __init__(self, table: Sequence[float], K: int, classes: int, cap: int,
                 random_bytes: RandomBytes = system_random) -> None:
        from darrm_opt.model.top2 import split

        self.K, self.C, self.cap = int(K), int(classes), int(cap)
        self.p, self.q = split(table, self.K, self.cap)
        self.random_bytes = random_bytes
        self._limits = uniform_limits(self.C)
        self.dtype = np.uint8 if self.C <= 256 else np.uint16

    def prepare(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """The (rows, K) class labels, checked (InvalidParameter naming ``votes``); no coin is drawn."""
        return class_labels(votes, self.K, self.C)

    def draw(self, prepared: np.ndarray) -> np.ndarray:
        """(TT-1) for the labels of :meth:`prepare`, with fresh exact coins."""
        return self.answers_from_histograms(label_histograms(prepared, self.C))

    def _index(self, n: int) -> int:
        return uniform_index(n, self._limits, self.random_bytes)

    def answers_from_histograms(self, h: np.ndarray) -> np.ndarray:
        """One released class per histogram row (counts over the C classes summing to K), by (TT-1)."""
        from darrm_opt.model.top2 import structure

        h = np.asarray(h, dtype=np.int64)
        if h.ndim != 2 or h.shape[1] != self.C or (h.shape[0] and (h.min() < 0 or np.any(h.sum(axis=1) != self.K))):
            raise InvalidParameter("votes", f"histograms must be rows of C = {self.C} counts >= 0 summing to "
                                   f"K = {self.K}")
        out = np.zeros(h.shape[0], dtype=self.dtype)
        for i, row in enumerate(h):
            g1, g2, T, R = structure(row)
            s = (g1, min(g2, self.cap))
            p, q = Fraction(float(self.p[s])), Fraction(float(self.q[s]))
            if p == 1 or exact_bernoulli(p, self.random_bytes):
                out[i] = T[self._index(len(T))]
            elif R and q > 0 and (q == 1 - p or exact_bernoulli(q / (1 - p), self.random_bytes)):
                out[i] = R[self._index(len(R))]
            else:
                out[i] = self._index(self.C)
        return out

    def distribution(self, h: Sequence[int]) -> list[Fraction]:
        """(TT-1) in exact rationals for one histogram."""
        from darrm_opt.model.top2 import structure

        g1, g2, T, R = structure(np.asarray(h))
        s = (g1, min(g2, self.cap))
        p, q = Fraction(float(self.p[s])), Fraction(float(self.q[s]))
        return [(1 - p - q) / self.C + (p / len(T) if c in T else 0) + (q / len(R) if c in R else 0)
                for c in range(self.C)]


#: the answer written for ⊥
ABSTAIN = -1


class GnmaxSampler(LabelSampler):
    """GNMax (or, with ``threshold`` and ``sigma1``, Confident-GNMax) for one certified table.

    For each row of K class labels (0..C−1): the histogram h; Confident-GNMax first draws Z ~ N_ℤ(0, σ₁²) per
    row and answers ⊥ (−1) unless max h + Z ≥ T; then (for every row, or the rows that passed) noise
    N_ℤ(0, σ²) per class, the noisy maxima, and a uniform choice among them (rejection-sampled 64-bit
    integers, :func:`~darrm_opt.sampling.uniform.uniform_indices`). The noise is exact
    (:class:`~darrm_opt.sampling.discrete_gaussian.DiscreteGaussian`, through its pool). The order of
    draws: the threshold noise of all rows, then the class noise row-major over the answered rows, then the
    tie-breaking indices."""

    def __init__(self, K: int, C: int, sigma: float, random_bytes: RandomBytes = system_random, *,
                 threshold: float | None = None, sigma1: float | None = None) -> None:
        self.K, self.C = int(K), int(C)
        self.noise = noise_pool(sigma, random_bytes)
        self.check = None if threshold is None else (float(threshold), noise_pool(float(sigma1), random_bytes))  # type: ignore[arg-type]
        self.random_bytes = random_bytes
        self.dtype = np.int16
        self._all_kept, self._limit = uniform_rejection(self.C)

    def prepare(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """The (rows, C) histograms of (rows, K) class labels, checked (InvalidParameter naming ``votes``)."""
        return label_histograms(class_labels(votes, self.K, self.C), self.C)

    def draw(self, prepared: np.ndarray) -> np.ndarray:
        """The answers for the histograms of :meth:`prepare` (−1: ⊥), with fresh exact coins."""
        return self.answers_from_histograms(prepared)

    def answers_from_histograms(self, h: np.ndarray) -> np.ndarray:
        h = np.asarray(h, dtype=np.int64)
        n = h.shape[0]
        if h.ndim != 2 or h.shape[1] != self.C or (n and (h.min() < 0 or np.any(h.sum(axis=1) != self.K))):
            raise InvalidParameter("votes", f"histograms must be rows of C = {self.C} counts >= 0 summing to "
                                   f"K = {self.K}")
        out = np.full(n, ABSTAIN, dtype=self.dtype)
        rows = np.arange(n)
        if self.check is not None and n:
            T, dg = self.check
            z = dg.sample(n, self.random_bytes)
            rows = rows[h.max(axis=1) + z >= T]
        sizes = np.empty(rows.size, dtype=np.int64)
        tops = []
        step = max(1, CHUNK_CELLS // self.C)
        for lo in range(0, rows.size, step):
            r = rows[lo : lo + step]
            v = h[r] + self.noise.sample(r.size * self.C, self.random_bytes).reshape(r.size, self.C)
            top = v == v.max(axis=1, keepdims=True)
            tops.append(top)
            sizes[lo : lo + r.size] = top.sum(axis=1)
        index = uniform_indices(sizes, self._all_kept, self._limit, self.random_bytes, every_row=True)
        for i, lo in enumerate(range(0, rows.size, step)):
            top = tops[i]
            rank = np.cumsum(top, axis=1) - 1
            k = index[lo : lo + top.shape[0]]
            out[rows[lo : lo + top.shape[0]]] = np.argmax(top & (rank == k[:, None]), axis=1)
        return out

    def distribution(self, h: Sequence[int]) -> list[float]:
        """Pr[answer = c] for one histogram by direct summation over the noise (float; for tests of small
        K, C: ties split evenly)."""
        from darrm_opt.model.gnmax import discrete_gaussian_pmf, tail_cut

        sigma = self.noise.sigma
        L = tail_cut(sigma)
        p, _ = discrete_gaussian_pmf(sigma, L)
        F = np.concatenate([[0.0], np.cumsum(p)])  # F[i] = Pr[Z ≤ i − L − 1]
        h = [int(x) for x in h]
        out = []
        nodes, weights = np.polynomial.legendre.leggauss(max(1, (self.C + 1) // 2))
        u = 0.5 * (nodes + 1.0)
        w = 0.5 * weights
        for c in range(self.C):
            tot = 0.0
            for z in range(-L, L + 1):
                val = h[c] + z
                prod = np.ones_like(u)
                for d in range(self.C):
                    if d == c:
                        continue
                    k = val - h[d]
                    pk = p[k + L] if abs(k) <= L else 0.0
                    Fk = F[min(max(k + L, 0), 2 * L + 1)]
                    prod = prod * (Fk + u * pk)
                tot += p[z + L] * float(w @ prod)
            out.append(tot)
        if self.check is not None:
            T, dg = self.check
            L1 = tail_cut(dg.sigma)
            p1, _ = discrete_gaussian_pmf(dg.sigma, L1)
            need = math.ceil(T - max(h))
            passed = float(p1[max(need + L1, 0):].sum()) if need <= L1 else 0.0
            out = [passed * x for x in out]
        return out


class SubsampledGnmaxSampler(LabelSampler):
    """GNMax on a uniform m-subset of the K teachers, drawn per row without replacement (``subsample``): a
    partial Fisher–Yates shuffle of each row's labels, m steps, step t swapping position t with a uniform
    position among t..K−1 (:func:`uniform_indices`, exact rejection of 64-bit words, 8 bytes per row and
    step in row order); the first m labels are a uniform m-subset. Then :class:`GnmaxSampler` of m teachers
    on their histogram (its draws follow)."""

    def __init__(self, K: int, C: int, sigma: float, m: int, random_bytes: RandomBytes = system_random) -> None:
        self.K, self.C = int(K), int(C)
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m <= self.K:
            raise InvalidParameter("subsample", f"must be between 1 and K = {self.K}", m)
        self.m = int(m)
        self.gnmax = GnmaxSampler(self.m, self.C, sigma, random_bytes)
        self.random_bytes = random_bytes
        self.dtype = np.int16
        self._all_kept, self._limit = uniform_rejection(self.K)

    def prepare(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """The (rows, K) class labels, checked (InvalidParameter naming ``votes``)."""
        return np.array(class_labels(votes, self.K, self.C), dtype=np.int64)

    def subset_histograms(self, labels: np.ndarray) -> np.ndarray:
        """(rows, C) histograms of a uniform m-subset of each row's labels (the class docstring)."""
        v = np.array(labels, dtype=np.int64)
        n = v.shape[0]
        rows = np.arange(n)
        for t in range(self.m):
            u = uniform_indices(np.full(n, self.K - t, dtype=np.int64), self._all_kept, self._limit,
                                self.random_bytes)
            pick = t + u
            a, b = v[rows, t].copy(), v[rows, pick]
            v[rows, t] = b
            v[rows, pick] = a
        return label_histograms(v[:, : self.m], self.C)

    def draw(self, prepared: np.ndarray) -> np.ndarray:
        """The answers for the labels of :meth:`prepare`, with fresh exact coins."""
        if prepared.shape[0] == 0:
            return np.zeros(0, dtype=self.dtype)
        return self.gnmax.answers_from_histograms(self.subset_histograms(prepared))
