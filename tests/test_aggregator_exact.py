"""DaRRM Algorithm 1 (mechanisms/vote_samplers.py) with an asymmetric γ and scripted random bytes.

Pr[answer = 1 | L] must be exactly γ(L)·1{L ≥ (K+1)/2} + (1 − γ(L))/2. The aggregator keeps the majority iff
a uniform W-bit U (big-endian, W/8 bytes per row: the same W for every row of a table, W·γ(L) an integer
for every L) satisfies U < T(L) = γ(L)·2^W, else answers a fair bit. Here every byte it reads is scripted:
for each row the test picks U on both sides of T(L), limb by limb, the fair bit opposite to the majority,
and checks the answer row by row for all 2^K vote vectors, on both the small (pure Python) and the numpy
path. The coin reads the same bytes whatever γ(L) or its outcome (counted), its threshold is exact, and a
seeded sample checks the distribution.
"""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scripted_bytes import Script

from darrm_opt.errors import InvalidParameter
from darrm_opt.mechanisms.vote_samplers import SMALL, BinarySampler
from darrm_opt.sampling import FixedWidthCoins

TWO64 = 1 << 64
K = 5
# asymmetric; γ(0) = 3e-5 has its last binary digit at 2^-68, so W = 128 (two 64-bit limbs, the low one
# not zero); γ(4) = 1 exactly; γ(5) = 0
GAMMA = [3e-5, 0.85, 0.05, 0.6, 1.0, 0.0]
W = 128
VOTES = np.array(list(itertools.product((0, 1), repeat=K)), dtype=np.uint8)  # all 32 vote vectors


def majority(L: int) -> int:
    return int(L >= (K + 1) // 2)


def threshold(g: float, bits: int = W) -> int:
    """T = γ·2^W, an integer (checked)."""
    t = Fraction(g) * (1 << bits)
    assert t.denominator == 1
    return int(t)


def run(agg: BinarySampler, votes, us, fair) -> np.ndarray:
    """Answers with the W-bit U = ``us`` per row and fair bits ``fair`` per row, laid out as each path reads
    them: the small path one read (coins, then the fair bits as a little-endian integer), the numpy path two
    (coins, then ``np.packbits`` of the fair bits)."""
    n = len(votes)
    coins = b"".join(int(u).to_bytes(W // 8, "big") for u in us)
    if n <= SMALL:
        fair_int = sum(int(b) << i for i, b in enumerate(fair))
        chunks = [coins + fair_int.to_bytes((n + 7) // 8, "little")]
    else:
        chunks = [coins, np.packbits(np.array(fair, dtype=np.uint8)).tobytes()]
    agg.random_bytes = Script(chunks)
    out = agg(votes)
    assert not agg.random_bytes.chunks, "scripted bytes left unread"
    return out


WHERE = {  # U relative to T = (T_hi, T_lo) in 64-bit limbs
    "just below": lambda t: t - 1,
    "at": lambda t: t,
    "zero": lambda t: 0,
    "max": lambda t: (1 << W) - 1,
    "high limb below, low limb max": lambda t: (((t >> 64) - 1) << 64) | (TWO64 - 1),
    "high limb above, low limb zero": lambda t: ((t >> 64) + 1) << 64,
    "high limb equal, low limb below": lambda t: t - 1 if t % TWO64 else t - TWO64 + (TWO64 - 1),
    "high limb equal, low limb above": lambda t: t + 1 if (t + 1) >> 64 == t >> 64 else t,
}


@pytest.mark.parametrize("copies", [1, 3], ids=["small-path", "numpy-path"])
@pytest.mark.parametrize("where", list(WHERE))
def test_answer_is_the_majority_iff_u_below_gamma_two_to_the_w(copies, where):
    votes = np.tile(VOTES, (copies, 1))
    L = votes.sum(axis=1).astype(int)
    agg = BinarySampler(GAMMA)
    assert agg.coin_bytes == W // 8
    us = [min(max(WHERE[where](threshold(GAMMA[l])), 0), (1 << W) - 1) for l in L]
    fair = [1 - majority(l) for l in L]  # a fair coin that disagrees with the majority
    out = run(agg, votes, us, fair)
    for row, (l, u) in enumerate(zip(L, us)):
        keep = Fraction(u, 1 << W) < Fraction(GAMMA[l])
        assert out[row] == (majority(l) if keep else 1 - majority(l)), (row, l, u, where)
    assert out.dtype == np.uint8


def test_both_paths_answer_alike_on_the_same_bytes():
    rng = random.Random(7)
    agg = BinarySampler(GAMMA)
    for _ in range(20):
        L = [rng.randrange(K + 1) for _ in range(SMALL)]
        votes = np.array([[1] * l + [0] * (K - l) for l in L], dtype=np.uint8)
        us = [rng.choice([rng.getrandbits(W), threshold(GAMMA[l]) - 1, threshold(GAMMA[l])]) for l in L]
        us = [min(max(u, 0), (1 << W) - 1) for u in us]
        fair = [rng.getrandbits(1) for _ in L]
        small = run(agg, votes, us, fair)
        coins = b"".join(int(u).to_bytes(W // 8, "big") for u in us)
        agg.random_bytes = Script([coins, np.packbits(np.array(fair, dtype=np.uint8)).tobytes()])
        big = agg.answers_from_counts(np.array(L, dtype=np.uint16))
        assert small.tolist() == big.tolist()


def test_thresholds_are_exact():
    agg = BinarySampler(GAMMA)
    assert agg.coins.bits == W and agg.coins.limbs == 2 and agg.coin_bytes == 16
    for l, g in enumerate(GAMMA):
        assert Fraction(agg.coins.thresholds[l], 1 << W) == Fraction(g)
    assert agg.K == K and agg._half == 3
    # a table whose values all end by 2^-64 draws 64 bits a coin
    assert BinarySampler([1.0, 0.5, float(1 / 3), 0.85]).coin_bytes == 8
    # the smallest subnormal needs 1074 bits: 17 limbs
    tiny = FixedWidthCoins([5e-324, 1.0])
    assert tiny.bits == 1088 and Fraction(tiny.thresholds[0], 1 << 1088) == Fraction(5e-324)


def test_probability_of_one_is_gamma_majority_plus_half_the_rest():
    agg = BinarySampler(GAMMA)
    for l, g in enumerate(GAMMA):
        assert agg.probability_of_one(l) == g * majority(l) + (1 - g) / 2


@pytest.mark.parametrize("rows_per_call", [7, 400], ids=["small-path", "numpy-path"])
def test_seeded_answer_frequencies_match_the_exact_distribution(rows_per_call):
    """60,000 rows per L from a seeded byte stream: every count within 4.5 binomial standard deviations
    of n·Pr[1 | L] (a fixed seed, so the test is deterministic)."""
    gen = random.Random(20261122)
    agg = BinarySampler(GAMMA, random_bytes=gen.randbytes)
    n = 60_000
    rows = np.repeat(np.array([[1] * l + [0] * (K - l) for l in range(K + 1)], dtype=np.uint8), n, axis=0)
    rows = rows[np.random.default_rng(1).permutation(rows.shape[0])]
    out = np.concatenate([agg(rows[i : i + rows_per_call]) for i in range(0, rows.shape[0], rows_per_call)])
    L = rows.sum(axis=1)
    for l, g in enumerate(GAMMA):
        p = g * majority(l) + (1 - g) / 2
        ones = int(out[L == l].sum())
        assert (L == l).sum() == n
        if p in (0.0, 1.0):
            assert ones == p * n
        else:
            assert abs(ones - n * p) <= 4.5 * math.sqrt(n * p * (1 - p)), (l, ones / n, p)


def test_inputs_are_validated_on_both_paths():
    for bad in ([0.5], [0.5, 1.5], [0.5, 0.5, -0.1], [[0.5, 0.5]], [0.5, float("nan")]):
        with pytest.raises(InvalidParameter, match="gamma"):
            BinarySampler(bad)
    # an even K (PATE setting) is served: its tie L = K/2 is a fair coin whatever γ(K/2) says
    assert BinarySampler([0.5, 0.5, 0.5]).probability_of_one(1) == 0.5
    agg = BinarySampler([1.0, 0.5, 0.5, 1.0], random_bytes=random.Random(1).randbytes)
    for n in (1, SMALL + 1):
        with pytest.raises(InvalidParameter, match="K = 3"):
            agg(np.zeros((n, 4), dtype=np.uint8))
        for dtype in (np.uint8, np.int64):
            v = np.zeros((n, 3), dtype=dtype)
            v[0, 1] = 2
            with pytest.raises(InvalidParameter, match="0 or 1"):
                agg(v)
    with pytest.raises(InvalidParameter, match="0 or 1"):
        agg([[0, 1, -1]])
    neg = np.zeros((SMALL + 1, 3), dtype=np.int64)
    neg[3, 2] = -1
    with pytest.raises(InvalidParameter, match="0 or 1"):
        agg(neg)
    with pytest.raises(InvalidParameter, match="K = 3"):
        agg(np.zeros((SMALL + 1, 3, 1), dtype=np.uint8))
    assert agg(np.zeros((0, 3), dtype=np.uint8)).shape == (0,)
    assert agg.answers_from_counts(np.zeros(0, dtype=np.uint16)).shape == (0,)
    assert agg.answers_from_counts(np.array([3], dtype=np.uint16)).tolist() == [1]  # one row, γ(3) = 1
    assert agg.answers_from_counts(np.array([0], dtype=np.uint16)).tolist() == [0]
    one = BinarySampler([0.0, 1.0], random_bytes=Script([(0).to_bytes(8, "little") + b"\x01"]))  # K = 1
    assert one.K == 1 and one([[0]]).tolist() == [1]  # γ(0) = 0: the fair bit
    # plain lists and int votes on the numpy path give uint8 0/1 answers
    out = agg([[1, 1, 1]] * (SMALL + 5))
    assert out.dtype == np.uint8 and out.tolist() == [1] * (SMALL + 5)  # γ(3) = 1: always the majority
    out = agg(np.zeros((SMALL + 5, 3), dtype=np.int64))
    assert out.tolist() == [0] * (SMALL + 5)  # γ(0) = 1


def test_very_large_k_sums_votes_without_overflow():
    """K = 65,535: L no longer fits the uint16 fast path's headroom; the plain sum must still be exact."""
    K_big = 65_535
    agg = BinarySampler(np.ones(K_big + 1), random_bytes=random.Random(3).randbytes)
    rows = np.zeros((SMALL + 2, K_big), dtype=np.uint8)
    for i in range(rows.shape[0]):
        rows[i, : (i * 2000) % (K_big + 1)] = 1
    L = rows.sum(axis=1, dtype=np.int64)
    assert agg(rows).tolist() == [int(x >= (K_big + 1) // 2) for x in L]
