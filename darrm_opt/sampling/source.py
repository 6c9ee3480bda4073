"""The source of random bytes every exact sampler draws from: the operating system's CSPRNG.

A sampler takes its randomness as ``random_bytes(n) -> bytes`` (:data:`RandomBytes`): :data:`system_random`
in the serving path, a seeded stream or a scripted one in tests. Every draw reads whole 64-bit words
(:func:`uint64_words`, little-endian) or single bytes, in the order each sampler documents.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import numpy as np

RandomBytes = Callable[[int], bytes]
#: 2^64, the number of values of one random word
TWO64 = 1 << 64


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


#: the serving path's coin source: the operating system's CSPRNG, read in 64 KiB blocks (two syscalls per
#: request cost more than the rest of a one-row answer)
system_random = SystemRandom()


def uint64_words(random_bytes: RandomBytes, n: int) -> np.ndarray:
    """n uniform 64-bit words (uint64) from one read of 8n bytes, little-endian."""
    return np.frombuffer(random_bytes(8 * n), dtype=np.uint64, count=n)
