"""Probability mass functions of L = number of 1-votes.

For a multiset with counts n_c of corners with probabilities p_c, L is a sum of independent
Binomial(n_c, p_c), so its pmf α is the convolution of those binomial pmfs (Lemma 3.4's α, α′).
"""

from __future__ import annotations

import numpy as np

from darrm_opt.lazy import sfft


def binom_table(p: float, K: int) -> np.ndarray:
    """Rows n = 0..K hold the Binomial(n, p) pmf on 0..K (zero-padded), built by the recurrence
    Bin(n)(k) = (1 − p) Bin(n−1)(k) + p Bin(n−1)(k−1): additions of non-negative terms only, so each
    entry has a relative error of at most 2n units in the last place."""
    T = np.zeros((K + 1, K + 1), dtype=np.float64)
    T[0, 0] = 1.0
    q = 1.0 - p
    for n in range(1, K + 1):
        T[n, : n + 1] = q * T[n - 1, : n + 1]
        T[n, 1 : n + 1] += p * T[n - 1, :n]
    return T


def fft_length(K: int) -> int:
    """A fast FFT length ≥ K + 1 (circular convolution of length ≥ K + 1 is exact for sums ≤ K)."""
    return sfft.next_fast_len(K + 1, real=True)


class CornerSpectra:
    """Real FFTs of the binomial tables of each corner, for batched multiset pmfs.

    ``spectra[c][n]`` = rfft(Bin(n, p_c)), so α for many count vectors at once is α̂ = Π_c spectra[c][n_c], then
    one inverse FFT (:meth:`darrm_opt.model.constraints.RowBuilder._pmfs`). Absolute error per entry is a
    few units of 1e-16 times log2 of the length.
    """

    def __init__(self, probs: np.ndarray, K: int) -> None:
        self.K = K
        self.n = fft_length(K)
        self.probs = np.asarray(probs, dtype=np.float64)
        self.spectra = np.stack(
            [sfft.rfft(binom_table(float(p), K), n=self.n, axis=1) for p in self.probs]
        )  # (C, K+1, n//2+1)


def pmf_direct(counts, probs) -> np.ndarray:
    """Plain reference: the pmf of Σ_c Binomial(n_c, p_c) by direct sequential convolution."""
    out = np.array([1.0])
    for n, p in zip(counts, probs):
        for _ in range(int(n)):
            out = np.convolve(out, [1.0 - p, p])
    return out


def poisson_binomial(p: np.ndarray) -> np.ndarray:
    """pmf of the number of successes of independent Bernoulli(p_i), by direct convolution."""
    out = np.array([1.0])
    for pi in np.asarray(p, dtype=np.float64).ravel():
        out = np.convolve(out, [1.0 - pi, pi])
    return out


def binomial_pmf(K: int, p: float) -> np.ndarray:
    """Binomial(K, p) pmf on 0..K."""
    return binom_table(p, K)[K]
