"""DaRRM Algorithm 1 over a batch of vote rows, vectorised, with exact coins from the OS CSPRNG.

For each row of K votes (0/1): L = Σ votes, majority = 1{L ≥ (K+1)/2}; with probability γ(L) output the
majority, otherwise a fair coin. Two coins per row, both from ``random_bytes`` (``os.urandom`` in the
serving path; tests may inject a seeded source).

The γ(L) coin is exact: a float64 γ is a dyadic rational, so Pr[keep] = γ is realised by comparing a
uniform 64-bit integer U with T = ⌊γ·2^64⌋ (U < T: keep; U > T: not) and, in the 2^-64-probability event
U = T, recursing on the remainder γ·2^64 − T with fresh bits. No rounding of γ ever reaches the output, so
the released mechanism is exactly the certified one. γ = 1 always keeps the majority.

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


class Aggregator:
    """DaRRM_γ for one certified table; call it on a (rows, K) array of 0/1 votes."""

    def __init__(self, gamma: Sequence[float], random_bytes: RandomBytes = system_random) -> None:
        g = np.asarray(gamma, dtype=np.float64)
        if g.ndim != 1 or g.size < 2 or g.size % 2 or not np.all((g >= 0) & (g <= 1)):
            raise InvalidParameter("gamma", "must be K + 1 values in [0, 1] with K odd")
        self.K = g.size - 1
        self.gamma = g
        self.random_bytes = random_bytes
        fracs = [Fraction(float(x)) for x in g]
        self._always = np.array([f == 1 for f in fracs])
        # thresholds T(l) = ⌊γ(l)·2^64⌋ (< 2^64 since γ < 1 where used) and the exact remainders
        self._threshold = np.array(
            [0 if f == 1 else int(f * _TWO64) for f in fracs], dtype=np.uint64
        )
        self._remainder = [Fraction(0) if f == 1 else f * _TWO64 - int(f * _TWO64) for f in fracs]
        self._always_list = self._always.tolist()
        self._threshold_list = [int(t) for t in self._threshold]
        self._half = (self.K + 1) // 2

    def __call__(self, votes: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
        """Answers (uint8 0/1, one per row) for ``votes`` of shape (rows, K) with entries 0/1.

        Up to ``SMALL`` rows are answered in plain Python: a numpy call on a tiny array costs more than the
        arithmetic, and each one that releases the GIL lets the server's other threads in."""
        if len(votes) <= SMALL:
            rows = votes.tolist() if isinstance(votes, np.ndarray) else votes
            counts = []
            for row in rows:
                if len(row) != self.K:
                    raise InvalidParameter("votes", f"must be rows of K = {self.K} votes")
                if not all(x == 0 or x == 1 for x in row):
                    raise InvalidParameter("votes", "every vote must be 0 or 1")
                counts.append(int(sum(row)))
            return np.frombuffer(self._answers_small(counts), dtype=np.uint8)
        v = np.asarray(votes)
        if v.ndim != 2 or v.shape[1] != self.K:
            raise InvalidParameter("votes", f"must be rows of K = {self.K} votes")
        if v.dtype != np.uint8:
            if not np.all((v == 0) | (v == 1)):
                raise InvalidParameter("votes", "every vote must be 0 or 1")
            v = v.astype(np.uint8)
        elif v.size and v.max() > 1:
            raise InvalidParameter("votes", "every vote must be 0 or 1")
        L = v.sum(axis=1, dtype=np.uint16) if self.K < 65535 else v.sum(axis=1)
        return self.answers_from_counts(L)

    def _answers_small(self, counts: list[int]) -> bytes:
        """Algorithm 1 for a few vote counts, with the same exact coins as :meth:`answers_from_counts`."""
        n = len(counts)
        coins = self.random_bytes(8 * n + (n + 7) // 8)
        fair = int.from_bytes(coins[8 * n :], "little")
        out = bytearray(n)
        for i, L in enumerate(counts):
            if self._always_list[L]:
                keep = True
            else:
                u = int.from_bytes(coins[8 * i : 8 * i + 8], "little")
                t = self._threshold_list[L]
                keep = u < t or (u == t and _exact_bernoulli(self._remainder[L], self.random_bytes))
            out[i] = (L >= self._half) if keep else (fair >> i) & 1
        return bytes(out)

    def answers_from_counts(self, L: np.ndarray) -> np.ndarray:
        """Answers for vote counts L (0..K), the core of Algorithm 1."""
        n = L.shape[0]
        if n == 0:
            return np.zeros(0, dtype=np.uint8)
        majority = L >= self._half
        u = np.frombuffer(self.random_bytes(8 * n), dtype=np.uint64, count=n)
        t = self._threshold[L]
        keep = u < t
        always = self._always[L]
        keep |= always
        ties = np.flatnonzero((u == t) & ~always)
        for i in ties:  # probability 2^-64 per row
            keep[i] = _exact_bernoulli(self._remainder[int(L[i])], self.random_bytes)
        fair = np.unpackbits(np.frombuffer(self.random_bytes((n + 7) // 8), dtype=np.uint8), count=n)
        return np.where(keep, majority.view(np.uint8), fair).astype(np.uint8, copy=False)

    def probability_of_one(self, L: int) -> float:
        """Pr[answer = 1 | L] = γ(L) + (1 − γ(L))/2 if L is a majority of ones, else (1 − γ(L))/2."""
        g = float(self.gamma[L])
        return g + (1 - g) / 2 if L >= self._half else (1 - g) / 2
