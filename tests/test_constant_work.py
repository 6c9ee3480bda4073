"""Issue 33 ("Time"): what the samplers read and draw must not depend on the votes or on the noise.

No test here times anything (``benchmarks/timing.py`` does): the DaRRM γ coin reads the same bytes whatever
γ(L) or its outcome, and is exactly Bernoulli(γ(L)) (the exact count of the W-bit values it keeps, and a
seeded sample); GNMax reads a tie-breaking index for every row; the noise pool hands out each sample once,
in order, refills on a schedule set by the request sizes alone, and its samples have the discrete
Gaussian's law (the pmf test of tests/test_gnmax.py, through the pool).
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from darrm_opt.mechanisms import discrete_gaussian as dg
from darrm_opt.mechanisms.discrete_gaussian import POOL_BLOCK, DiscreteGaussian, NoisePool, noise_pool
from darrm_opt.mechanisms.samplers import (
    SMALL,
    BinarySampler,
    FixedWidthCoins,
    system_random,
    uniform_indices,
    uniform_rejection,
)
from darrm_opt.mechanisms.samplers_gaussian import GnmaxSampler
from darrm_opt.model.gnmax import discrete_gaussian_pmf

GAMMA = [1.0, 1.0, 0.5, 1 / 3, 3e-5, 0.0, 0.0, 3e-5, 1 / 3, 0.5, 1.0, 1.0]  # K = 11, as the benchmark's
K = 11
EDGES = [0.0, 1.0, 0.5, 1 / 3, 0.1, 3e-5, 2.0**-64, 2.0**-65, 1 - 2.0**-53, 5e-324, 2.2250738585072014e-308]


class Counting:
    """A seeded byte stream that records the size of every read; ``fill`` fixes every byte instead."""

    def __init__(self, seed: int = 0, fill: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.fill = fill
        self.reads: list[int] = []

    def __call__(self, n: int) -> bytes:
        self.reads.append(n)
        return bytes([self.fill]) * n if self.fill is not None else self.rng.randbytes(n)


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


def exact_keep_count(coins: FixedWidthCoins, j: int = 0) -> int:
    """The number of W-bit values U the coin keeps, counted exactly byte prefix by byte prefix: a prefix whose
    smallest and largest completions agree counts all or none of its completions (the coin is a threshold on
    U, checked at every prefix: no prefix goes from dropped to kept); a prefix where they differ is split
    over its next byte. At most one prefix per level is split."""
    nb = coins.nbytes

    def one(prefix: bytes, pad: int) -> bool:
        return bool(coins.one(prefix + bytes([pad]) * (nb - len(prefix)), j))

    def count(prefix: bytes) -> int:
        lo, hi = one(prefix, 0x00), one(prefix, 0xFF)
        assert lo or not hi, "kept above a value it drops: not a threshold"
        rest = 8 * (nb - len(prefix))
        if lo == hi:
            return (1 << rest) if lo else 0
        return sum(count(prefix + bytes([b])) for b in range(256))

    return count(b"")


@pytest.mark.parametrize("g", EDGES, ids=[repr(g) for g in EDGES])
def test_coin_keeps_exactly_gamma_of_its_values(g):
    """Pr[keep] = (kept values)/2^W = γ exactly, and every U is kept iff U < γ·2^W, on both paths."""
    coins = FixedWidthCoins([g])
    W = coins.bits
    assert W % 64 == 0 and coins.nbytes == W // 8
    assert Fraction(exact_keep_count(coins), 1 << W) == Fraction(g)
    T = coins.thresholds[0]
    assert Fraction(T, 1 << W) == Fraction(g)
    rng = random.Random(5)
    us = [0, (1 << W) - 1, T - 1, T, T + 1] + [rng.getrandbits(W) for _ in range(200)] + \
         [(T & ~((1 << 64) - 1)) | rng.getrandbits(64) for _ in range(50)]  # the same high limbs as T
    us = [u for u in us if 0 <= u < (1 << W)]
    raw = b"".join(u.to_bytes(coins.nbytes, "big") for u in us)
    many = coins.many(raw, np.zeros(len(us), dtype=np.intp))
    for i, u in enumerate(us):
        assert coins.one(u.to_bytes(coins.nbytes, "big"), 0) == (u < T) == bool(many[i]), (g, u)


def test_coin_width_is_the_table_s_widest_value():
    assert FixedWidthCoins([1.0, 0.5, 0.0]).bits == 64
    assert FixedWidthCoins([1 / 3]).bits == 64  # its last digit is 2^-54
    assert FixedWidthCoins([0.5, 3e-5]).bits == 128
    assert FixedWidthCoins([5e-324]).bits == 1088  # 2^-1074: 17 limbs
    assert BinarySampler([0.5, 0.5, 1.0, 5e-324]).coin_bytes == 136


def test_seeded_coin_frequencies_are_gamma_and_the_test_has_power():
    """400,000 coins per γ from a seeded stream: 0 and 1 exactly, ½ and ⅓ within 5 binomial standard
    deviations, and more than 5 standard deviations from γ ± 0.01 (the two windows are disjoint: no count
    passes for a coin 0.01 off)."""
    values = [0.0, 1.0, 0.5, 1 / 3]
    coins = FixedWidthCoins(values)
    n = 400_000
    gen = random.Random(20260633)
    for j, g in enumerate(values):
        kept = int(coins.many(gen.randbytes(coins.nbytes * n), np.full(n, j, dtype=np.intp)).sum())
        if g in (0.0, 1.0):
            assert kept == g * n
            continue
        sd = math.sqrt(n * g * (1 - g))
        assert abs(kept - n * g) <= 5 * sd, (g, kept / n)
        for wrong in (g - 0.01, g + 0.01):
            assert 5 * (sd + math.sqrt(n * wrong * (1 - wrong))) < n * abs(g - wrong)  # disjoint windows
            assert abs(kept - n * wrong) > 5 * math.sqrt(n * wrong * (1 - wrong))


# --- GNMax: the index and the pool -----------------------------------------------------------------------

def test_uniform_indices_of_every_row_read_the_same_bytes_whatever_the_sizes():
    all_kept, limit = uniform_rejection(5)
    for sizes in ([1, 1, 1, 1], [2, 1, 3, 1], [5, 5, 5, 5], [4, 2, 1, 1]):
        src = Counting(6)
        out = uniform_indices(np.array(sizes), all_kept, limit, src, every_row=True)
        assert src.reads == [32] and all(0 <= o < s for o, s in zip(out, sizes))
        assert [o for o, s in zip(out, sizes) if s == 1] == [0] * sizes.count(1)


class Refills:
    """A DiscreteGaussian that numbers its samples 0, 1, 2, … and records every refill's size."""

    sigma = 1.0

    def __init__(self) -> None:
        self.next = 0
        self.sizes: list[int] = []

    def sample(self, n: int, random_bytes) -> np.ndarray:  # noqa: ANN001
        self.sizes.append(n)
        out = np.arange(self.next, self.next + n, dtype=np.int64)
        self.next += n
        return out


def test_pool_hands_out_each_sample_once_in_order_drawn_before_the_call():
    fake = Refills()
    pool = NoisePool(fake, block=16)  # type: ignore[arg-type]
    src = Counting(7)
    taken: list[int] = []
    rng = random.Random(8)
    for call in range(400):
        n = rng.randint(1, 16)
        drawn_before = fake.next
        out = pool.sample(n, src)
        assert out.tolist() == list(range(len(taken), len(taken) + n))  # in order, none twice
        if call:  # after the first call every sample handed out was drawn by an earlier call
            assert out.max() < drawn_before
        assert pool.available() >= pool.block
        taken += out.tolist()
    assert all(s == 16 for s in fake.sizes[1:])  # every refill after the first is one block
    big = pool.sample(100, src)  # more than the reserve: the call draws what it lacks
    assert big.tolist() == list(range(len(taken), len(taken) + 100)) and pool.available() >= pool.block


def test_pool_refills_by_the_request_sizes_alone():
    """Two pools fed different bytes (different values) refill at the same calls with the same sizes."""
    sizes = [random.Random(9).randint(1, 40) for _ in range(300)]
    schedules = []
    for seed in (10, 11):
        noise = DiscreteGaussian(2.5)
        seen: list[int] = []
        real = noise.sample

        def recording(n, rb, real=real, seen=seen):  # noqa: ANN001, ANN202
            seen.append(n)
            return real(n, rb)

        noise.sample = recording  # type: ignore[method-assign]
        pool = NoisePool(noise, block=256)
        src = Counting(seed)
        values = [pool.sample(n, src) for n in sizes]
        schedules.append(seen)
        assert [v.size for v in values] == sizes
    assert schedules[0] == schedules[1]


def test_pool_restarts_on_another_source_and_in_a_forked_child():
    fake = Refills()
    pool = NoisePool(fake, block=8)  # type: ignore[arg-type]
    a, b = Counting(12), Counting(13)
    pool.sample(3, a)
    assert pool.available() == 8
    out = pool.sample(3, b)  # another source: what came from a is dropped, b draws afresh
    assert out.tolist() == [11, 12, 13] and fake.sizes[-1] == 11
    pool.sample(2, b)
    dg._forget_pools()  # what a forked child runs: nothing of the parent's is handed out again
    assert pool.available() == 0
    assert pool.sample(2, b).min() >= fake.next - 10


def test_shared_pools_are_for_the_system_source_only():
    assert noise_pool(3.0, system_random) is noise_pool(3.0, system_random)
    assert noise_pool(3.0, system_random) is not noise_pool(4.0, system_random)
    seeded = Counting(14)
    assert noise_pool(3.0, seeded) is not noise_pool(3.0, seeded)
    assert noise_pool(3.0, system_random).block == POOL_BLOCK


def chi2_pvalue(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> float:
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


@pytest.mark.parametrize("sigma, seed", [(0.4, 1), (1.0, 2), (3.7, 3), (25.0, 4)])
def test_pooled_samples_match_the_discrete_gaussian_pmf(sigma, seed):
    """tests/test_gnmax.py's pmf test, on 60,000 samples taken through a pool in requests of 1 to 7 (a block
    of 2048: about 30 refills)."""
    pool = NoisePool(DiscreteGaussian(sigma), block=2048)
    rng = np.random.default_rng(seed)
    src = rng.bytes
    parts, total = [], 0
    while total < 60_000:
        n = int(rng.integers(1, 8))
        parts.append(pool.sample(n, src))
        total += n
    x = np.concatenate(parts)[:60_000]
    L = int(12 * sigma) + 3
    p, _ = discrete_gaussian_pmf(sigma, L)
    assert np.abs(x).max() <= L
    assert chi2_pvalue(np.bincount(x + L, minlength=2 * L + 1), p) > 1e-3
    assert abs(x.mean()) < 5 * math.sqrt(float(p @ (np.arange(-L, L + 1) ** 2)) / x.size)


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


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_never_hands_out_its_parent_s_samples():
    """The parent's next samples and a forked child's first ones differ: the child dropped the parent's pool
    (without it both would hand out the same 64 values)."""
    import os

    pool = NoisePool(DiscreteGaussian(3.0), block=256)
    pool.sample(1, system_random)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(w, pool.sample(64, system_random).tobytes())
        finally:
            os._exit(0)
    os.close(w)
    child = b""
    while len(child) < 64 * 8:
        chunk = os.read(r, 64 * 8)
        if not chunk:
            break
        child += chunk
    os.close(r)
    os.waitpid(pid, 0)
    mine = pool.sample(64, system_random)
    assert len(child) == 64 * 8
    assert not np.array_equal(np.frombuffer(child, dtype=np.int64), mine)
