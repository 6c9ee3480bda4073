"""DaRRM Algorithm 1 over a batch of vote rows, vectorised, with exact coins from the OS CSPRNG.

For each row of K votes (0/1): L = Σ votes, majority = 1{L ≥ (K+1)/2}; with probability γ(L) output the
majority, otherwise a fair coin. Two coins per row, both from ``random_bytes`` (``os.urandom`` in the
serving path; tests may inject a seeded source).

The γ(L) coin is exact and drawn from a fixed number of random bits (:class:`FixedWidthCoins`): a float64
γ is a dyadic rational, γ = T/2^W with T an integer once W is at least the position of its last binary
digit (W ≤ 1074 + 53 for any float in [0, 1]). The table's W is the largest of its values' (a multiple of
64, at least 64), so every row draws the same W bits U, uniform on {0..2^W − 1}, and keeps the majority
iff U < T(L): Pr[keep] = T(L)/2^W = γ(L) exactly, and neither the number of bits nor the work that
compares them depends on γ(L) or on the outcome (the comparison is one ``memcmp`` of W/8 bytes per row,
the answer chosen without a branch). No rounding of γ ever reaches the output, so the released mechanism is
exactly the certified one. (Issue 33: the coin used to draw 64 bits and recurse on a tie, short-cut γ = 1
and branch on the outcome, which ``benchmarks/timing.py`` measured.)

The serving path draws from :data:`system_random`: ``os.urandom`` read in 64 KiB blocks and handed out
once each (two syscalls per request cost more than the rest of a one-row answer).

Votes are never logged or stored by this module.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from darrm_opt.errors import InvalidParameter

RandomBytes = Callable[[int], bytes]
#: batches up to this many rows are answered without numpy
SMALL = 32
_TWO64 = 1 << 64
#: what a 0/1 vote may be (one hash lookup a vote, the same for 0 and 1)
_BITS = frozenset((0, 1))


class SystemRandom:
    """``os.urandom`` in blocks: requests below a quarter block are served from the current block, every
    byte once; larger ones go straight to ``os.urandom``. A forked child drops the parent's block."""

    def __init__(self, block: int = 1 << 16) -> None:
        self.block = block
        self._lock = threading.Lock()
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._buf = b""
        self._pos = 0

    def __call__(self, n: int) -> bytes:
        if n * 4 >= self.block:
            return os.urandom(n)
        with self._lock:
            if self._pos + n > len(self._buf):
                self._buf = os.urandom(self.block)
                self._pos = 0
            out = self._buf[self._pos : self._pos + n]
            self._pos += n
            return out


#: the serving path's coin source: the operating system's CSPRNG
system_random = SystemRandom()


class FixedWidthCoins:
    """Bernoulli(γ_j), exactly, for a fixed table of floats γ_j ∈ [0, 1], each coin from the same number of
    random bytes (``nbytes`` = W/8) whatever j or the outcome.

    γ_j = T_j / 2^W with T_j an integer (W: the largest position of a last binary digit in the table,
    rounded up to a multiple of 64; at least 64). A coin reads W random bits as a big-endian integer U
    (uniform on {0..2^W − 1}) and is 1 iff U < T_j, so Pr[1] = T_j/2^W = γ_j exactly.

    One row (:meth:`one`): the W/8 bytes of U compared with a precomputed ``bytearray`` (Python's bytearray
    comparison is one ``memcmp`` of the shorter length, then the lengths): T_j − 1 followed by one byte for
    T_j ≥ 1 (U ≤ T_j − 1 ⟺ U < T_j; equal prefixes leave U the shorter, hence smaller), W/8 zero bytes for
    T_j = 0 (U < 0 never). Every coin is that one ``memcmp`` of W/8 bytes. Many rows (:meth:`many`): U as
    W/64 big-endian 64-bit limbs, compared limb by limb with T_j − 1 by the same numpy operations for every
    row, and ANDed with T_j ≥ 1."""

    def __init__(self, gamma: Sequence[float] | np.ndarray) -> None:
        fracs = [Fraction(float(x)) for x in gamma]
        if any(not 0 <= f <= 1 for f in fracs):
            raise InvalidParameter("gamma", "must be values in [0, 1]")
        last = max(f.denominator.bit_length() - 1 for f in fracs)  # γ·2^last is an integer for every γ
        self.limbs = max(1, -(-last // 64))
        self.nbytes = 8 * self.limbs
        self.bits = 64 * self.limbs
        self.thresholds = [f.numerator << (self.bits - (f.denominator.bit_length() - 1)) for f in fracs]  # T_j
        assert all(Fraction(t, 1 << self.bits) == f for t, f in zip(self.thresholds, fracs))
        self._below = [bytearray(self.nbytes) if t == 0 else bytearray((t - 1).to_bytes(self.nbytes, "big") + b"\0")
                       for t in self.thresholds]
        mask = (1 << 64) - 1
        #: limb k (0: the most significant) of T_j − 1 (0 for T_j = 0), one array per limb, indexed by j
        self._cols = [np.array([(max(t - 1, 0) >> (64 * (self.limbs - 1 - k))) & mask for t in self.thresholds],
                               dtype=np.uint64) for k in range(self.limbs)]
        self._some = np.array([t > 0 for t in self.thresholds])

    def one(self, u: bytes, j: int) -> bool:
        """The coin of γ_j from the ``nbytes`` bytes ``u``."""
        return u < self._below[j]  # bytes < bytearray: bytearray's comparison, one memcmp

    def many(self, u: bytes, j: np.ndarray) -> np.ndarray:
        """The coins of γ_{j_i}, i = 0..n − 1, from ``nbytes``·n bytes ``u`` (row i's U at i·nbytes)."""
        n = j.shape[0]
        limbs = np.frombuffer(u, dtype=">u8", count=n * self.limbs).astype(np.uint64)
        if self.limbs == 1:
            le = limbs <= self._cols[0][j]
        else:  # U ≤ T − 1, from the lowest limb up
            limbs = limbs.reshape(n, self.limbs)
            le = limbs[:, -1] <= self._cols[-1][j]
            for k in range(self.limbs - 2, -1, -1):
                u_k, t_k = limbs[:, k], self._cols[k][j]
                le = (u_k < t_k) | ((u_k == t_k) & le)
        le &= self._some[j]
        return le


def _exact_bernoulli(p: Fraction, random_bytes: RandomBytes) -> bool:
    """True with probability exactly ``p`` (a dyadic rational in [0, 1)), 64 fresh bits at a time."""
    while p > 0:
        scaled = p * _TWO64
        t = scaled.numerator // scaled.denominator
        u = int.from_bytes(random_bytes(8), "little")
        if u != t:
            return u < t
        p = scaled - t
    return False


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


# ------------------------------------------------------------------------------------------------------
# Multi-class DaRRM (PATE setting, darrm_opt.model.multiclass): class-label votes

def _uniform_limits(C: int) -> list[int]:
    """For n = 0..C: the number of 64-bit values kept by rejection sampling of Uniform{0..n−1},
    2^64 − (2^64 mod n) (0 for n = 0, unused)."""
    return [0] + [_TWO64 - _TWO64 % n for n in range(1, C + 1)]


def uniform_rejection(C: int) -> tuple[np.ndarray, np.ndarray]:
    """For n = 0..C, whether every 64-bit value is kept (n a power of two) and the kept count mod 2^64, the
    tables of a vectorised rejection draw of Uniform{0..n−1} (:func:`_uniform_limits`)."""
    limits = _uniform_limits(C)
    return (np.array([lim == _TWO64 for lim in limits]),
            np.array([lim % _TWO64 for lim in limits], dtype=np.uint64))


def uniform_indices(size: np.ndarray, all_kept: np.ndarray, limit: np.ndarray,
                    random_bytes: RandomBytes, *, every_row: bool = False) -> np.ndarray:
    """Uniform{0..size_i − 1} per row (0 without a draw where size_i = 1, unless ``every_row``: then every row
    draws, whatever its size), by rejection sampling of 64-bit integers against the tables of
    :func:`uniform_rejection` (8 bytes per pending row per round, in row order)."""
    out = np.zeros(size.shape[0], dtype=np.int64)
    todo = np.arange(size.shape[0]) if every_row else np.flatnonzero(size > 1)
    while todo.size:
        u = np.frombuffer(random_bytes(8 * todo.size), dtype=np.uint64, count=todo.size)
        s = size[todo]
        ok = all_kept[s] | (u < limit[s])
        out[todo[ok]] = (u[ok] % s[ok].astype(np.uint64)).astype(np.int64)
        todo = todo[~ok]
    return out


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


#: histogram cells (rows × C) formed at once by the multi-class aggregator (bounds its temporaries)
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

    realised as: keep with probability exactly γ(g) (the binary aggregator's exact coin: a uniform 64-bit
    U against ⌊γ·2^64⌋, recursing on the remainder when equal); if kept, a uniformly random class of T
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
        self._threshold = np.array([0 if f == 1 else int(f * _TWO64) for f in fracs], dtype=np.uint64)
        self._remainder = [Fraction(0) if f == 1 else f * _TWO64 - int(f * _TWO64) for f in fracs]
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
        u = np.frombuffer(self.random_bytes(8 * n), dtype=np.uint64, count=n)
        t = self._threshold[gap]
        always = self._always[gap]
        keep = (u < t) | always
        for i in np.flatnonzero((u == t) & ~always):  # probability 2^-64 per row
            keep[i] = _exact_bernoulli(self._remainder[int(gap[i])], self.random_bytes)
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
    :func:`_exact_bernoulli`; uniform indices by 64-bit rejection sampling, no draw for a set of one).
    Random bytes are read row by row in that order."""

    def __init__(self, table: Sequence[float], K: int, classes: int, cap: int,
                 random_bytes: RandomBytes = system_random) -> None:
        from darrm_opt.model.top2 import split

        self.K, self.C, self.cap = int(K), int(classes), int(cap)
        self.p, self.q = split(table, self.K, self.cap)
        self.random_bytes = random_bytes
        self._limits = _uniform_limits(self.C)
        self.dtype = np.uint8 if self.C <= 256 else np.uint16

    def prepare(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """The (rows, K) class labels, checked (InvalidParameter naming ``votes``); no coin is drawn."""
        return class_labels(votes, self.K, self.C)

    def draw(self, prepared: np.ndarray) -> np.ndarray:
        """(TT-1) for the labels of :meth:`prepare`, with fresh exact coins."""
        return self.answers_from_histograms(label_histograms(prepared, self.C))

    def _index(self, n: int) -> int:
        if n == 1:
            return 0
        while True:
            u = int.from_bytes(self.random_bytes(8), "little")
            if u < self._limits[n]:
                return u % n

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
            if p == 1 or _exact_bernoulli(p, self.random_bytes):
                out[i] = T[self._index(len(T))]
            elif R and q > 0 and (q == 1 - p or _exact_bernoulli(q / (1 - p), self.random_bytes)):
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
