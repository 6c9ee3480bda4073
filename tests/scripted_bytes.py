"""Sources of random bytes for the exactness tests: scripted chunks, and a seeded stream that counts its reads."""

from __future__ import annotations

import random

import numpy as np
from scipy import stats


class Script:
    """Hands out fixed chunks in order and checks the size of each request."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)

    def __call__(self, n: int) -> bytes:
        assert self.chunks, "more random bytes requested than scripted"
        chunk = self.chunks.pop(0)
        assert len(chunk) == n, (len(chunk), n)
        return chunk


class Counting:
    """A seeded byte stream that records the size of every read; ``fill`` fixes every byte instead."""

    def __init__(self, seed: int = 0, fill: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.fill = fill
        self.reads: list[int] = []

    def __call__(self, n: int) -> bytes:
        self.reads.append(n)
        return bytes([self.fill]) * n if self.fill is not None else self.rng.randbytes(n)


def seeded(seed: int):
    """Fixed bytes: a seeded stream (tests only; releases use the OS CSPRNG)."""
    rng = np.random.default_rng(seed)
    return rng.bytes


def chi2_pvalue(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> float:
    """Pearson's chi-square p-value, cells with expected count below ``min_expected`` pooled."""
    n = counts.sum()
    exp = probs / probs.sum() * n
    keep = exp >= min_expected
    obs = np.append(counts[keep], counts[~keep].sum())
    ex = np.append(exp[keep], exp[~keep].sum())
    if ex[-1] < min_expected:
        obs[-2] += obs[-1]
        ex[-2] += ex[-1]
        obs, ex = obs[:-1], ex[:-1]
    return float(stats.chisquare(obs, ex).pvalue)
