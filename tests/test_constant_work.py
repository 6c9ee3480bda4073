"""Issue 33 ("Time"): what the samplers read and draw must not depend on the votes or on the noise.

No test here times anything (``benchmarks/timing.py`` does): the DaRRM γ coin reads the same bytes whatever
γ(L) or its outcome; GNMax reads a tie-breaking index for every row. The laws of the primitives under them
are tests/test_sampling.py's: the coin is exactly Bernoulli(γ(L)) (the exact count of the W-bit values it
keeps, and a seeded sample), and the noise pool hands out each sample once, in order, refills on a schedule
set by the request sizes alone, and its samples have the discrete Gaussian's law.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from scripted_bytes import Counting

from darrm_opt.mechanisms.vote_samplers import SMALL, BinarySampler, GnmaxSampler
from darrm_opt.sampling import FixedWidthCoins

GAMMA = [1.0, 1.0, 0.5, 1 / 3, 3e-5, 0.0, 0.0, 3e-5, 1 / 3, 0.5, 1.0, 1.0]  # K = 11, as the benchmark's
K = 11


def row(L: int) -> list[int]:
    return [1] * L + [0] * (K - L)


# --- the DaRRM coin -------------------------------------------------------------------------------------

@pytest.mark.parametrize("fill", [None, 0x00, 0xFF], ids=["random", "every-coin-kept", "no-coin-kept"])
def test_coin_reads_the_same_bytes_whatever_gamma_or_outcome(fill):
    """One read of coin_bytes + 1 per one-row answer, and (coin_bytes·n, ⌈n/8⌉) per numpy batch, for every L
    (γ = 1, ½, ⅓, 3e-5, 0) and whatever the coins come out (all U = 0: every coin with γ > 0 kept; all
    U = 2^W − 1: none but γ = 1)."""
    src = Counting(1, fill)
    agg = BinarySampler(GAMMA, src)
    assert agg.coin_bytes == 16  # 3e-5 ends at 2^-68: two 64-bit limbs for every row of this table
    for L in range(K + 1):
        for _ in range(20):
            src.reads.clear()
            agg([row(L)])
            assert src.reads == [agg.coin_bytes + 1], (L, src.reads)
    rng = np.random.default_rng(2)
    for n in (SMALL + 1, 100, 1000):
        for L in (np.full(n, 0), np.full(n, 5), np.full(n, 3), rng.integers(0, K + 1, n)):
            votes = np.array([row(int(x)) for x in L], dtype=np.uint8)
            src.reads.clear()
            agg(votes)
            assert src.reads == [agg.coin_bytes * n, (n + 7) // 8]


def test_a_batch_of_few_rows_reads_once_whatever_the_mix():
    src = Counting(3)
    agg = BinarySampler(GAMMA, src)
    rng = random.Random(4)
    for n in range(1, SMALL + 1):
        src.reads.clear()
        agg([row(rng.randrange(K + 1)) for _ in range(n)])
        assert src.reads == [agg.coin_bytes * n + (n + 7) // 8]


def test_coin_width_is_the_table_s_widest_value():
    assert FixedWidthCoins([1.0, 0.5, 0.0]).bits == 64
    assert FixedWidthCoins([1 / 3]).bits == 64  # its last digit is 2^-54
    assert FixedWidthCoins([0.5, 3e-5]).bits == 128
    assert FixedWidthCoins([5e-324]).bits == 1088  # 2^-1074: 17 limbs
    assert BinarySampler([0.5, 0.5, 1.0, 5e-324]).coin_bytes == 136


# --- GNMax: the index and the pool -----------------------------------------------------------------------

def test_gnmax_reads_the_same_bytes_for_a_tie_or_not():
    """Outside the pool's refills a one-row GNMax answer reads exactly one 8-byte index, whatever the votes
    (unanimous, a tie) and the noise (a tie of the noisy counts or not)."""
    src = Counting(15)
    s = GnmaxSampler(20, 3, 0.3, src)  # σ small: the noisy counts of (10, 10, 0) often stay tied
    inner = s.noise.noise
    refilling = [False]
    real = inner.sample

    def marked(n, rb):  # noqa: ANN001, ANN202
        refilling[0] = True
        try:
            return real(n, rb)
        finally:
            refilling[0] = False

    inner.sample = marked  # type: ignore[method-assign]
    reads: list[int] = []
    seen = src.__call__

    def count(n: int) -> bytes:
        if not refilling[0]:
            reads.append(n)
        return seen(n)

    s.random_bytes = count
    s.noise.sample(3, count)  # bind the pool to this source and fill it
    h = {"unanimous": [20, 0, 0], "tie": [10, 10, 0]}
    for name in ("unanimous", "tie") * 50:
        reads.clear()
        s.answers_from_histograms(np.array([h[name]]))
        assert reads == [8], (name, reads)

