"""Exactly uniform integers from random 64-bit words, by rejection.

Uniform{0..b − 1} (1 ≤ b ≤ 2^63): a 64-bit word u is kept iff u < L = 2^64 − (2^64 mod b) = b·⌊2^64/b⌋ (the
largest multiple of b not above 2^64), else drawn again; every kept residue class has exactly ⌊2^64/b⌋
words, so the output is exactly uniform. Two read-outs of a kept word: ⌊u / ⌊2^64/b⌋⌋ (:func:`uniform_below`)
and u mod b (:func:`uniform_indices`); both map exactly ⌊2^64/b⌋ kept words to each value.
"""

from __future__ import annotations

import numpy as np

from .source import TWO64, RandomBytes, uint64_words


def uniform_below(b: int, m: int, random_bytes: RandomBytes) -> np.ndarray:
    """m draws of U uniform in {0..b − 1} (1 ≤ b < 2^63), uint64: a 64-bit word u below L = b·⌊2^64/b⌋ (words
    at or above L are drawn again), U = ⌊u / ⌊2^64/b⌋⌋; no word for b = 1."""
    if b == 1:
        return np.zeros(m, dtype=np.uint64)
    step = TWO64 // b
    limit = b * step
    out = np.zeros(m, dtype=np.uint64)
    todo = np.arange(m)
    while todo.size:
        u = uint64_words(random_bytes, todo.size)
        ok = u < np.uint64(limit) if limit < TWO64 else np.ones(todo.size, dtype=bool)
        out[todo[ok]] = u[ok] // np.uint64(step)
        todo = todo[~ok]
    return out


def uniform_limits(C: int) -> list[int]:
    """For n = 0..C: the number of 64-bit values kept by rejection sampling of Uniform{0..n−1},
    2^64 − (2^64 mod n) (0 for n = 0, unused)."""
    return [0] + [TWO64 - TWO64 % n for n in range(1, C + 1)]


def uniform_rejection(C: int) -> tuple[np.ndarray, np.ndarray]:
    """For n = 0..C, whether every 64-bit value is kept (n a power of two) and the kept count mod 2^64, the
    tables of a vectorised rejection draw of Uniform{0..n−1} (:func:`uniform_limits`)."""
    limits = uniform_limits(C)
    return (np.array([lim == TWO64 for lim in limits]),
            np.array([lim % TWO64 for lim in limits], dtype=np.uint64))


def uniform_indices(size: np.ndarray, all_kept: np.ndarray, limit: np.ndarray,
                    random_bytes: RandomBytes, *, every_row: bool = False) -> np.ndarray:
    """Uniform{0..size_i − 1} per row (0 without a draw where size_i = 1, unless ``every_row``: then every row
    draws, whatever its size), by rejection sampling of 64-bit integers against the tables of
    :func:`uniform_rejection` (8 bytes per pending row per round, in row order; U = u mod size_i)."""
    out = np.zeros(size.shape[0], dtype=np.int64)
    todo = np.arange(size.shape[0]) if every_row else np.flatnonzero(size > 1)
    while todo.size:
        u = uint64_words(random_bytes, todo.size)
        s = size[todo]
        ok = all_kept[s] | (u < limit[s])
        out[todo[ok]] = (u[ok] % s[ok].astype(np.uint64)).astype(np.int64)
        todo = todo[~ok]
    return out


def uniform_index(n: int, limits: list[int], random_bytes: RandomBytes) -> int:
    """One Uniform{0..n − 1} (no draw for n = 1): 64-bit words u until u < ``limits[n]``, then u mod n."""
    if n == 1:
        return 0
    while True:
        u = int.from_bytes(random_bytes(8), "little")
        if u < limits[n]:
            return u % n
