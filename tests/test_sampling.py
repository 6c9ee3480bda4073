"""The law of every exact sampler of darrm_opt.sampling, from scripted bytes (each word's outcome) and from
seeded streams (χ² against the exact law, with power): uniform integers, the exact Bernoulli coins (rational,
fixed-width dyadic, exp(−γ)), the discrete Gaussian at a real σ and at a lattice scale, its pool (each sample
handed out once, in order, drawn before the call), the byte source, and the GNSS release's rounded Gaussian.
"""

from __future__ import annotations

import math
import os
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp
from scripted_bytes import Counting, Script, chi2_pvalue, seeded

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.gnmax import discrete_gaussian_pmf
from darrm_opt.sampling import (
    POOL_BLOCK,
    DiscreteGaussian,
    ExpNegTable,
    FixedWidthCoins,
    NoisePool,
    SystemRandom,
    bernoulli,
    bernoulli_exp,
    bernoulli_exp_exact,
    discrete_gaussian,
    exact_bernoulli,
    noise_pool,
    sample_gnss_noise,
    system_random,
    uniform_below,
    uniform_indices,
    uniform_rejection,
)
from darrm_opt.sampling import pool as pool_module

TWO64 = 1 << 64
EDGES = [0.0, 1.0, 0.5, 1 / 3, 0.1, 3e-5, 2.0**-64, 2.0**-65, 1 - 2.0**-53, 5e-324, 2.2250738585072014e-308]


def _u64(*values: int) -> bytes:
    return np.array(values, dtype=np.uint64).tobytes()


# --- the byte source --------------------------------------------------------------------------------------------------

def test_system_random_serves_each_block_byte_once():
    sr = SystemRandom(block=64)
    a, b = sr(8), sr(8)
    assert len(a) == len(b) == 8 and sr._buf[:16] == a + b and sr._pos == 16
    big = sr(16)  # 16·4 ≥ 64: straight from os.urandom, the block is untouched
    assert len(big) == 16 and sr._pos == 16
    block = sr._buf
    for _ in range(6):
        sr(8)
    assert sr._pos == 64 and sr._buf is block
    c = sr(8)  # the block is spent: a fresh one
    assert sr._pos == 8 and sr._buf is not block and sr._buf[:8] == c and len(sr._buf) == 64
    sr._reset()
    assert sr._buf == b"" and sr._pos == 0
    assert sr(15) and sr._pos == 15  # 15 < a quarter of 64: from the block
    assert SystemRandom().block == 1 << 16  # 64 KiB blocks, as documented
    assert len(SystemRandom()(8)) == 8 and len(os.urandom(1)) == 1


def test_system_random_hands_out_each_byte_once():
    r = SystemRandom(block=64)
    chunks = [r(8) for _ in range(40)]  # several blocks
    assert all(len(c) == 8 for c in chunks) and len(set(chunks)) == 40
    assert len(r(1000)) == 1000  # large requests go straight to os.urandom
    r._reset()  # what a forked child does
    assert r._buf == b"" and len(r(8)) == 8


# --- uniform integers -------------------------------------------------------------------------------------------------

def test_uniform_below_rejects_the_top_words_and_divides_the_rest():
    # b = 3: L = 3·⌊2^64/3⌋ = 2^64 − 1, so the word 2^64 − 1 is drawn again; U = ⌊u / ⌊2^64/3⌋⌋
    step = 2**64 // 3
    out = uniform_below(3, 1, Script([_u64(2**64 - 1), _u64(2 * step + 5)]))
    assert out.tolist() == [2]
    assert uniform_below(4, 1, Script([_u64(2**64 - 1)])).tolist() == [3]  # a power of two: nothing rejected
    assert uniform_below(1, 3, Script([])).tolist() == [0, 0, 0]  # b = 1: no word drawn


def test_uniform_indices_of_every_row_read_the_same_bytes_whatever_the_sizes():
    all_kept, limit = uniform_rejection(5)
    for sizes in ([1, 1, 1, 1], [2, 1, 3, 1], [5, 5, 5, 5], [4, 2, 1, 1]):
        src = Counting(6)
        out = uniform_indices(np.array(sizes), all_kept, limit, src, every_row=True)
        assert src.reads == [32] and all(0 <= o < s for o, s in zip(out, sizes))
        assert [o for o, s in zip(out, sizes) if s == 1] == [0] * sizes.count(1)


# --- exact Bernoulli coins --------------------------------------------------------------------------------------------

def test_exact_bernoulli_reads_64_bits_per_round():
    p = Fraction(1, 3 * TWO64)  # T = 0 in round one, then ⌊2^64/3⌋
    t2 = TWO64 // 3
    assert exact_bernoulli(p, Script([(0).to_bytes(8, "little"), (t2 - 1).to_bytes(8, "little")]))
    assert not exact_bernoulli(p, Script([(0).to_bytes(8, "little"), (t2 + 1).to_bytes(8, "little")]))
    assert not exact_bernoulli(p, Script([(1).to_bytes(8, "little")]))
    assert exact_bernoulli(Fraction(1, 2), Script([(TWO64 // 2 - 1).to_bytes(8, "little")]))
    assert not exact_bernoulli(Fraction(1, 2), Script([(TWO64 // 2).to_bytes(8, "little")]))
    assert not exact_bernoulli(Fraction(0), Script([]))


def test_bernoulli_is_exactly_u_below_a_times_the_step():
    step = 2**64 // 3
    a = np.array([1, 2, 0, 3])
    got = bernoulli(a, 3, Script([_u64(step - 1, step, 5, 2**64 - 2)]))  # U = 0, 1, 0, 2
    assert got.tolist() == [True, True, False, True]  # a = b: always
    got = bernoulli(np.array([1]), 3, Script([_u64(2**64 - 1), _u64(step)]))  # the top word is drawn again
    assert got.tolist() == [False]


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


@pytest.mark.parametrize(("a", "b"), [(1, 3), (5, 2), (7, 7), (0, 1)])
def test_bernoulli_exp_has_probability_e_to_minus_gamma(a, b):
    rng = np.random.default_rng(a * 31 + b)
    m = 200_000
    hits = int(bernoulli_exp(np.full(m, a, dtype=np.int64), b, rng.bytes).sum())
    p = math.exp(-a / b)
    assert abs(hits - m * p) <= 5 * math.sqrt(m * p * (1 - p)) + 1e-9
    py = sum(bernoulli_exp_exact(a, b, rng.bytes) for _ in range(20_000))  # the Python-integer path
    assert abs(py - 20_000 * p) <= 5 * math.sqrt(20_000 * p * (1 - p)) + 1e-9


def test_bernoulli_exp_resolves_a_64_bit_tie_exactly():
    """U = ⌊p·2^64⌋ (probability 2^-64) is decided by fresh bytes against the exact remainder."""
    t = (1 << 64) // 3  # ⌊(1/3)·2^64⌋: Bernoulli(γ/k) with γ = 1/3, k = 1
    top = (1 << 64) - 1
    b = lambda u: u.to_bytes(8, "little")  # noqa: E731
    keys = np.zeros(1, dtype=np.int64)
    # tie, then the remainder's coin says 1 (u = 0): k = 2; then U = 2^64 − 1 ≥ ⌊2^64/6⌋: stop, k even → 0
    assert not ExpNegTable(lambda key: Fraction(1, 3))(keys, Script([b(t), b(0), b(top)]))[0]
    # tie, then the remainder's coin says 0: stop at k = 1 → 1
    assert ExpNegTable(lambda key: Fraction(1, 3))(keys, Script([b(t), b(top)]))[0]


@pytest.mark.parametrize(("gamma", "seed"),
                         [(Fraction(1, 3), 1), (Fraction(1), 2), (Fraction(7, 10), 3), (Fraction(0), 4)])
def test_exp_neg_table_has_probability_e_to_minus_gamma(gamma, seed):
    """The cached-threshold form of Alg. 1 has the law of :func:`bernoulli_exp`'s: 200 000 coins within 5
    binomial standard deviations of m·e^{−γ} (exactly m for γ = 0)."""
    m = 200_000
    hits = int(ExpNegTable(lambda key: gamma)(np.zeros(m, dtype=np.int64), seeded(seed)).sum())
    p = math.exp(-float(gamma))
    assert abs(hits - m * p) <= 5 * math.sqrt(m * p * (1 - p)) + 1e-9
    if gamma == 0:
        assert hits == m


# --- the discrete Gaussian --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sigma, seed", [(0.4, 1), (1.0, 2), (3.7, 3), (25.0, 4)])
def test_discrete_gaussian_matches_its_pmf(sigma, seed):
    """χ² of 60 000 draws against the exact pmf, for real σ (0.4, 3.7: the cached-threshold coins) and
    integer σ (1, 25: the int64 coins)."""
    x = DiscreteGaussian(sigma)(60_000, seeded(seed))
    L = int(12 * sigma) + 3
    p, _ = discrete_gaussian_pmf(sigma, L)
    assert np.abs(x).max() <= L
    counts = np.bincount(x + L, minlength=2 * L + 1)
    assert chi2_pvalue(counts, p) > 1e-3
    assert abs(x.mean()) < 5 * math.sqrt(float(p @ (np.arange(-L, L + 1) ** 2)) / x.size)


@pytest.mark.parametrize("n", [1, 3, 256])
def test_discrete_gaussian_matches_its_pmf_at_a_lattice_scale(n):
    """χ² of 200 000 draws against Pr[x] ∝ exp(−x²/2n²) (cells with expectation ≥ 20, tails pooled)."""
    x = discrete_gaussian(n, 200_000, np.random.default_rng(n).bytes)
    width = max(1, n // 8)
    support = np.arange(-12 * n, 12 * n + 1)
    logp = -support.astype(float) ** 2 / (2 * n * n)
    p = np.exp(logp - logsumexp(logp))
    cells = np.floor_divide(support, width)
    cell_ids, inv = np.unique(cells, return_inverse=True)
    expected = np.bincount(inv, weights=p) * x.size
    observed = np.bincount(np.searchsorted(cell_ids, np.floor_divide(np.clip(x, -12 * n, 12 * n), width)),
                           minlength=cell_ids.size)
    keep = expected >= 20
    exp_cells = np.append(expected[keep], expected[~keep].sum())
    obs_cells = np.append(observed[keep], observed[~keep].sum())
    _, pvalue = stats.chisquare(obs_cells, exp_cells * obs_cells.sum() / exp_cells.sum())
    assert pvalue > 1e-4
    assert x.dtype == np.int64 and abs(x.std() / n - 1) < 0.01


def test_discrete_gaussian_detects_a_wrong_sigma():
    """The chi-square test has power: 2 % off in σ is rejected at this sample size."""
    x = DiscreteGaussian(10.0)(200_000, seeded(5))
    L = 130
    p, _ = discrete_gaussian_pmf(10.2, L)
    assert chi2_pvalue(np.bincount(x + L, minlength=2 * L + 1), p) < 1e-6


def test_discrete_gaussian_is_a_function_of_its_bytes():
    a = DiscreteGaussian(7.3)(1000, seeded(9))
    b = DiscreteGaussian(7.3)(1000, seeded(9))
    assert np.array_equal(a, b) and not np.array_equal(a, DiscreteGaussian(7.3)(1000, seeded(10)))


def test_discrete_gaussian_refuses_noise_outside_its_range():
    with pytest.raises(InvalidParameter, match="noise"):
        discrete_gaussian(0, 5)
    with pytest.raises(InvalidParameter, match="noise"):
        discrete_gaussian(1 << 14, 5)


# --- the pool ---------------------------------------------------------------------------------------------------------

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
    pool_module._forget_pools()  # what a forked child runs: nothing of the parent's is handed out again
    assert pool.available() == 0
    assert pool.sample(2, b).min() >= fake.next - 10


def test_shared_pools_are_for_the_system_source_only():
    assert noise_pool(3.0, system_random) is noise_pool(3.0, system_random)
    assert noise_pool(3.0, system_random) is not noise_pool(4.0, system_random)
    seeded = Counting(14)
    assert noise_pool(3.0, seeded) is not noise_pool(3.0, seeded)
    assert noise_pool(3.0, system_random).block == POOL_BLOCK


@pytest.mark.parametrize("sigma, seed", [(0.4, 1), (1.0, 2), (3.7, 3), (25.0, 4)])
def test_pooled_samples_match_the_discrete_gaussian_pmf(sigma, seed):
    """:func:`test_discrete_gaussian_matches_its_pmf`, on 60,000 samples taken through a pool in requests of 1
    to 7 (a block of 2048: about 30 refills)."""
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


# --- the GNSS release's rounded Gaussian ------------------------------------------------------------------------------

def test_gnss_sampler_is_exact_inverse_cdf():
    def const(b):
        return lambda n: bytes([b]) * n

    half = lambda n: b"\x80" + b"\x00" * (n - 1)  # noqa: E731
    assert sample_gnss_noise(1.23456, 0.1, 1e-4, half) == pytest.approx(1.2346, abs=1e-12)  # median cell
    assert sample_gnss_noise(1.0, 0.1, 1e-3, const(0x00)) < 1.0 - 3.0  # the far low tail
    # the upper quartile of N(1, 0.2²): 1 + 0.2·0.6745
    q3 = lambda n: (b"\xc0" + b"\x00" * (n - 1))  # noqa: E731
    assert sample_gnss_noise(1.0, 0.2, 1e-4, q3) == pytest.approx(1.0 + 0.2 * 0.67449, abs=1.5e-4)
    draws = np.array([sample_gnss_noise(0.0, 1.0, 1e-3, os.urandom) for _ in range(400)])
    assert abs(draws.mean()) < 0.25 and 0.8 < draws.std() < 1.2
