"""GNMax and Confident-GNMax answers over a batch of vote rows, with exact discrete Gaussian noise.

For each row of K class labels (0..C−1): the histogram h; Confident-GNMax first draws Z ~ N_ℤ(0, σ₁²) per
row and answers ⊥ (−1) unless max h + Z ≥ T; then (for every row, or the rows that passed) noise N_ℤ(0, σ²)
per class, the noisy maxima, and a uniform choice among them (rejection-sampled 64-bit integers). Every coin
comes from ``random_bytes`` (the CSPRNG of :mod:`darrm_opt.mechanisms.samplers`), through the exact
samplers of :mod:`darrm_opt.mechanisms.discrete_gaussian`; the order of draws: the threshold noise of all
rows, then the class noise row-major over the answered rows, then the tie-breaking indices.

Against timing (issue 33): the noise comes from pools drawn ahead
(:func:`~darrm_opt.mechanisms.discrete_gaussian.noise_pool`: a request takes samples drawn before it, so the
rejection samplers' work on its values is not in its time), and a tie-breaking index is drawn for every
answered row, a tie or not (a top set of one takes index 0 of it), so whether the noisy counts tied does not
change the work either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from darrm_opt.errors import InvalidParameter

from .discrete_gaussian import noise_pool
from .samplers import (
    LabelSampler,
    RandomBytes,
    class_labels,
    label_histograms,
    system_random,
    uniform_indices,
    uniform_rejection,
)

#: the answer written for ⊥
ABSTAIN = -1
#: cells (rows × C) answered at once (bounds the (rows, C) temporaries)
CHUNK_CELLS = 1 << 18


class GnmaxSampler(LabelSampler):
    """GNMax (or, with ``threshold`` and ``sigma1``, Confident-GNMax) for one certified table."""

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
