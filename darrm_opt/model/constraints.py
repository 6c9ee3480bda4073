"""LP rows of the privacy constraints (Lemma 3.4 restricted to corner multisets, App. C.3).

For a symmetric γ with free values g_j = γ((K+1)/2 + j), j = 0..(K−1)/2, the constraint of a multiset n is

    Σ_j [d_l(n) − d_{K−l}(n)] g_j  ≤  e^{mε} − 1 + 2δ,   l = (K+1)/2 + j,   d = α − e^{mε} α′.
"""

from __future__ import annotations

import math

import numpy as np

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
            d = self._p.pmfs(c) - self.E * self._q.pmfs(c)
            out[start : start + chunk] = d[:, self.high] - d[:, self.low]
        return out


def all_multisets(params: Params) -> np.ndarray:
    """Every corner multiset: C(K+7, 7) count vectors for Δ > 0, C(K+3, 3) for Δ = 0."""
    return compositions(params.K, n_corners(params))


def candidate_pool(params: Params, max_rows: int = 300_000) -> np.ndarray:
    """Multisets that mix at most 3 distinct corners (2 where 3 would exceed ``max_rows``)."""
    C = n_corners(params)
    three = math.comb(C, 3) * math.comb(params.K - 1, 2)
    return multisets_with_few_corners(params.K, C, 3 if three <= max_rows else 2)
