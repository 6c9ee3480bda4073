"""Exact composition of DaRRM answers through privacy loss distributions (dp_accounting).

Each table's profile (:data:`~darrm_opt.privacy.profile.Profile`) gives a dominating pair (P, Q) of discrete
distributions: the adaptive composition of answers of several tables is dominated by the product of their
pairs (Zhu, Dong, Wang 2022, Thm 10), whose privacy loss distribution (PLD) is the convolution of the pairs'
PLDs. Each PLD is discretised *pessimistically* on multiples of ``INTERVAL`` by connect-the-dots
(:func:`pair_pld`; dp_accounting's Gaussian and discrete Gaussian PLDs for Gaussian pairs), so every δ(ε) and
ε(δ) it returns is an upper bound on the true ones:

    δ(ε) = Σ_atoms max(0, P(o) − e^ε Q(o)) of the product pair = E_P[(1 − e^{ε − L})₊] + P[L = ∞].

``ε(δ)`` is the smallest ε on the discretised loss grid with δ(ε) ≤ δ, again an upper bound.

A generic (ε₀, δ₀)-DP binary mechanism has the canonical dominating pair of Kairouz, Oh, Viswanath (2015):
P = (δ₀, (1 − δ₀) e^{ε₀}/(1 + e^{ε₀}), (1 − δ₀)/(1 + e^{ε₀}), 0), Q the mirror image; :func:`generic_pld`
composes it the same way (it agrees with darrm_opt.privacy.accounting's closed form).
"""

from __future__ import annotations

import collections
import hashlib
import math
import threading
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution as PLD

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.profile import Profile

#: loss discretisation interval. Connect-the-dots keeps the ε of Q answers close to the true one (a
#: randomised-response pair against Kairouz et al.'s exact formula: +1e-5 at Q = 100, +3.2e-4 at Q = 1000,
#: the interval growing as :func:`interval_for`; privacy buckets on the same grid: +7.9e-4, +1.7e-2;
#: `python benchmarks/composition_grid.py`)
INTERVAL = 1e-5
#: the interval of a *coarse* composition: a valid, slightly looser ε (connect-the-dots at 1e-4: +1e-4 at
#: Q = 100, +3.2e-3 at Q = 1000 on the same pair) for 10-15× less time; ledgers state their spend with it
#: while the budget is far, and decide near the budget with the fine one
COARSE = 10.0
#: a pair's hockey stick at a support point ε_j of its PLD is taken at ε_j − SHIFT·interval and enlarged by
#: the relative DELTA_MARGIN (:func:`pair_pld`): upper bounds that stay upper bounds through float error
DELTA_MARGIN = 1e-10
SHIFT = 0.01



def pair_pld(atoms: Sequence[tuple[float, float]], infinite_mass: float, interval: float = INTERVAL) -> PLD:
    """The PLD of the pair with finite atoms (P-mass, Q-mass) and an infinite-loss atom of P-mass
    ``infinite_mass``, discretised pessimistically by connect-the-dots (Doroshenko, Ghazi, Kamath, Kumar,
    Manurangsi 2022, Alg. 1 and Thm 4.2). The pair dominates both orders of the neighbours, so the PLD is
    symmetric.

    With losses ℓ_i = ln(p_i/q_i), the support is the grid points ⌊ℓ_i/Δ⌋Δ, ⌈ℓ_i/Δ⌉Δ and one point beyond
    each (Δ = ``interval``), and at each support point ε_j the hockey stick

        δ(ε_j) = Σ_i max(0, p_i − e^{ε_j} q_i) + infinite_mass,

    computed term by term (no cancellation). δ(ε) is convex in e^ε with breaks only at the losses, so the
    connect-the-dots PLD, whose δ interpolates the δ(ε_j) (exact between support points with no loss between
    them), dominates the pair. The values given to it are δ(ε_j − SHIFT·Δ)(1 + DELTA_MARGIN) ≥ δ(ε_j): with
    T_j = P[L > ε_j] = δ(ε_j) + e^{ε_j} Q[L > ε_j], this adds at least about min(DELTA_MARGIN, SHIFT·Δ)·T_j,
    far above the float error of rebuilding δ from the PLD's masses (a few ulps of T_j), which otherwise made
    a single answer's ε fall 6e-13 (relative, in δ) below the true one. Privacy-bucket
    rounding moves each loss up by up to Δ, about Q·Δ/2 on the ε of Q answers (0.018 at Q = 1000,
    Δ = 3.2e-5 on a 200-atom pair, where connect-the-dots is within 1e-4 of its value at Δ = 3.2e-4)."""
    from dp_accounting.pld import pld_pmf

    p = np.array([a for a, _ in atoms], dtype=float)
    q = np.array([b for _, b in atoms], dtype=float)
    finite = (p > 0) & (q > 0)
    inf_mass = float(infinite_mass) + float(p[(p > 0) & (q <= 0)].sum())
    pf, qf = p[finite], q[finite]
    if pf.size == 0:  # no finite loss: the pair's P-mass is at +∞ or at −∞ (put at 0, pessimistic)
        d = min(inf_mass * (1 + DELTA_MARGIN), 1.0)
        return PLD(pld_pmf.create_pmf_pessimistic_connect_dots(interval, [0], [d]))
    scaled = (np.log(pf) - np.log(qf)) / interval
    lo, hi = np.floor(scaled).astype(np.int64), np.ceil(scaled).astype(np.int64)
    ks = np.unique(np.concatenate([lo - 1, lo, hi, hi + 1]))
    eps = (ks - SHIFT) * interval
    deltas = np.empty(ks.size)
    step = max(1, 2_000_000 // pf.size)
    for i in range(0, ks.size, step):
        e = np.exp(eps[i:i + step])[:, None]
        deltas[i:i + step] = np.maximum(pf[None, :] - e * qf[None, :], 0.0).sum(axis=1)
    deltas = np.minimum((deltas + inf_mass) * (1 + DELTA_MARGIN), 1.0)
    pmf = pld_pmf.create_pmf_pessimistic_connect_dots(interval, ks, deltas)
    return PLD(pmf)


def profile_pld(profile: Profile, interval: float = INTERVAL) -> PLD:
    """One answer of a table: the PLD of its profile's dominating pair (a tradeoff envelope's atoms, or a
    Gaussian pair)."""
    return profile.to_pld(interval)


def generic_pld(epsilon0: float, delta0: float, interval: float = INTERVAL) -> PLD:
    """One answer of a generic (ε₀, δ₀)-DP binary mechanism (the canonical pair of KOV 2015)."""
    if not (math.isfinite(epsilon0) and epsilon0 > 0):
        raise InvalidParameter("epsilon", "must be a finite number > 0", epsilon0)
    if not (0 <= delta0 < 1):
        raise InvalidParameter("delta", "must satisfy 0 <= delta < 1", delta0)
    hi = (1.0 - delta0) / (1.0 + math.exp(-epsilon0))
    lo = (1.0 - delta0) / (1.0 + math.exp(epsilon0))
    return pair_pld([(hi, lo), (lo, hi), (0.0, delta0)], delta0, interval)


def _check_count(count: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise InvalidParameter("queries", "must be an integer >= 1", count)


def self_compose(pld: PLD, count: int) -> PLD:
    """``count`` answers of one table."""
    _check_count(count)
    return pld if count == 1 else pld.self_compose(count)


def compose(parts: Iterable[tuple[PLD, int]]) -> PLD | None:
    """Answers of several tables: Π over (pld, count) of pld^{⊗count}; None when there is no answer."""
    out: PLD | None = None
    for pld, count in parts:
        if count == 0:
            continue
        piece = self_compose(pld, count)
        out = piece if out is None else out.compose(piece)
    return out


def epsilon_at(pld: PLD | None, delta: float) -> float:
    """Smallest ε (an upper bound) with δ(ε) ≤ ``delta``; ``inf`` when the infinite-loss mass exceeds it."""
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise InvalidParameter("delta", "must satisfy 0 <= delta < 1", delta)
    if pld is None:
        return 0.0
    return max(float(pld.get_epsilon_for_delta(delta)), 0.0)


def delta_at(pld: PLD | None, epsilon: float) -> float:
    """δ(ε), an upper bound."""
    if not (isinstance(epsilon, (int, float)) and epsilon >= 0):
        raise InvalidParameter("epsilon", "must be a number >= 0", epsilon)
    if pld is None:
        return 0.0
    return min(float(pld.get_delta_for_epsilon(epsilon)), 1.0)


@lru_cache(maxsize=256)
def _cached_generic(epsilon0: float, delta0: float, count: int) -> PLD:
    return self_compose(generic_pld(epsilon0, delta0), count)


def generic_epsilon(epsilon0: float, delta0: float, count: int, delta: float) -> float:
    """ε at ``delta`` of ``count`` answers of a generic (ε₀, δ₀)-DP mechanism, through the PLD path."""
    return epsilon_at(_cached_generic(float(epsilon0), float(delta0), int(count)), delta)


# ---------------------------------------------------------------------------------------------------------
# Exact accounting of a ledger (several tables, counts) with in-memory caches
# ---------------------------------------------------------------------------------------------------------
#: above this many answers the exact composition is not attempted; the other composition methods still
#: apply. The grid grows with the count (:func:`interval_for`), so time and memory stay flat (a randomised-
#: response pair: 0.8 s, 250 MB at 20000 answers), but the ε it reports drifts above the true one, +0.028
#: at 20000 answers of a (0.02, 0) pair against Kairouz et al.'s exact ε (tests/test_pld.py).
EXACT_MAX_ANSWERS = 20000


def interval_for(answers: int) -> float:
    """The discretisation interval used for ``answers`` answers: INTERVAL up to 100 answers, then growing
    like √(answers/100) so the composed grid keeps about the same number of points."""
    return INTERVAL * max(1.0, math.sqrt(answers / 100.0))


Parts = tuple[tuple[Profile, int], ...]


def canonical_parts(parts: Iterable[tuple[Profile, int]]) -> Parts:
    """Counts of equal profiles merged, empty ones dropped, in a canonical order (a cache key)."""
    counts: dict[Profile, int] = {}
    for prof, n in parts:
        _check_count_zero(n)
        if n:
            counts[prof] = counts.get(prof, 0) + n
    return tuple(sorted(counts.items(), key=lambda kv: (kv[0].sort_key(), kv[1])))


def _check_count_zero(count: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidParameter("count", "must be an integer >= 0", count)


@lru_cache(maxsize=128)
def _one_pld(profile: Profile, interval: float) -> PLD:
    return profile_pld(profile, interval)


@lru_cache(maxsize=8)  # each composed PLD holds up to ~10⁶ grid points; the ε results are cached below
def _composed(parts: Parts, interval: float) -> PLD | None:
    return compose((_one_pld(p, interval), n) for p, n in parts)


#: a ledger states and admits with the composition at its counts rounded up to this many significant bits
#: (:func:`bucket`): one composition then serves every count of its bucket
BUCKET_BITS = 3


def bucket(count: int) -> int:
    """The smallest count ≥ ``count`` with at most BUCKET_BITS significant bits: ``count`` itself up to
    2^BUCKET_BITS = 8, then rounded up to a multiple of 2^(bitlength − BUCKET_BITS), so the bucket exceeds the
    count by less than a factor 1 + 2^(2 − BUCKET_BITS) = 1.25 (4 buckets per doubling of the count).

    More answers never cost less: the k-fold product of a dominating pair is dominated by the (k + j)-fold one
    (the extra outputs can be dropped, a post-processing), so the ε of the composition at the bucketed counts
    is a valid, looser upper bound for the actual counts."""
    _check_count_zero(count)
    if count <= 1 << BUCKET_BITS:
        return count
    step = 1 << (count.bit_length() - BUCKET_BITS)
    return -(-count // step) * step


def bucketed(parts: Iterable[tuple[Profile, int]]) -> Parts:
    """``parts`` with every count rounded up by :func:`bucket` (canonical); the parts themselves when the
    bucketed total would be over EXACT_MAX_ANSWERS (where no composition is attempted)."""
    key = canonical_parts(parts)
    out = tuple((p, bucket(n)) for p, n in key)
    return key if sum(n for _, n in out) > EXACT_MAX_ANSWERS else out


def next_bucket(parts: Iterable[tuple[Profile, int]], grow: Iterable[Profile], by: int = 1) -> Parts:
    """The bucketed parts once ``by`` more answers (at least enough to fill the bucket) came from each table of
    ``grow``: the composition a ledger whose answers come from those tables will need next."""
    growing = set(grow)
    return bucketed((p, max(bucket(n) + 1, n + by) if p in growing else n) for p, n in canonical_parts(parts))


def covers(wide: Parts, parts: Parts) -> bool:
    """Whether the composition of ``wide`` bounds that of ``parts``: every table of ``parts`` is in ``wide``
    with at least as many answers (see :func:`bucket`)."""
    have = dict(wide)
    return all(have.get(p, 0) >= n for p, n in parts)


_EXACT: collections.OrderedDict[tuple[Parts, float, bool], float] = collections.OrderedDict()
_EXACT_LOCK = threading.Lock()
EXACT_CACHE_SIZE = 4096


def _exact_epsilon(parts: Parts, delta: float, coarse: bool) -> float:
    answers = sum(n for _, n in parts)
    if answers > EXACT_MAX_ANSWERS:
        return math.inf
    if delta < max(p.infinite_mass for p, _ in parts):
        return math.inf  # one answer alone already needs more than delta at every ε
    return epsilon_at(_composed(parts, interval_for(answers) * (COARSE if coarse else 1.0)), delta)


def exact_epsilon(parts: Iterable[tuple[Profile, int]], delta: float, *, coarse: bool = False) -> float:
    """ε at ``delta`` (an upper bound) of the adaptive composition of ``count`` answers of each table's
    profile; ``inf`` above EXACT_MAX_ANSWERS answers or when ``delta`` is below the infinite-loss mass.
    ``coarse``: on a grid COARSE times coarser (still an upper bound). Results are kept in an in-memory LRU
    cache keyed by the composition state, δ and the grid."""
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise InvalidParameter("delta", "must satisfy 0 <= delta < 1", delta)
    key = (canonical_parts(parts), float(delta), bool(coarse))
    hit = cached_exact_epsilon(key[0], key[1], coarse=key[2])
    if hit is not None:
        return hit
    value = _exact_epsilon(*key) if key[0] else 0.0
    remember_exact_epsilon(key[0], key[1], value, coarse=key[2])
    return value


#: bumped whenever a change to this module could change a value of :func:`exact_epsilon` (grid, margins, the
#: PLD construction): part of :func:`composition_key`, so a value stored by another version is never read
ACCOUNTING_VERSION = 1


def _exact_text(value: object) -> str:
    """A canonical, exact text of a profile's sort key: floats by :meth:`float.hex`, containers recursively."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_exact_text(v) for v in value) + ")"
    return repr(value)


def composition_key(parts: Iterable[tuple[Profile, int]], delta: float, *, coarse: bool = False) -> str:
    """SHA-256 (hex) naming the value of :func:`exact_epsilon` for these arguments across processes and
    versions: the canonical parts (each profile's exact sort key and its count), δ, the grid (INTERVAL, COARSE,
    SHIFT, DELTA_MARGIN) and :data:`ACCOUNTING_VERSION`."""
    h = hashlib.sha256()
    h.update(f"darrm-composition-v{ACCOUNTING_VERSION}|{INTERVAL.hex()}|{COARSE.hex()}|{SHIFT.hex()}|"
             f"{DELTA_MARGIN.hex()}|{float(delta).hex()}|{bool(coarse)}".encode())
    for prof, n in canonical_parts(parts):
        h.update(f"|{_exact_text(prof.sort_key())}#{n}".encode())
    return h.hexdigest()


def remember_exact_epsilon(parts: Iterable[tuple[Profile, int]], delta: float, value: float, *,
                           coarse: bool = False) -> None:
    """Put ``value``, :func:`exact_epsilon` of these arguments computed elsewhere (another process), in the
    cache."""
    key = (canonical_parts(parts), float(delta), bool(coarse))
    with _EXACT_LOCK:
        _EXACT[key] = value
        while len(_EXACT) > EXACT_CACHE_SIZE:
            _EXACT.popitem(last=False)


def cached_exact_epsilon(parts: Iterable[tuple[Profile, int]], delta: float, *,
                         coarse: bool = False) -> float | None:
    """:func:`exact_epsilon` if it is in the cache (no composition is computed), else None."""
    key = (canonical_parts(parts), float(delta), bool(coarse))
    with _EXACT_LOCK:
        value = _EXACT.get(key)
        if value is not None:
            _EXACT.move_to_end(key)
        return value


def exact_delta(parts: Iterable[tuple[Profile, int]], epsilon: float) -> float:
    """δ at ``epsilon`` (an upper bound) of the same composition; 1 above EXACT_MAX_ANSWERS answers."""
    key = canonical_parts(parts)
    answers = sum(n for _, n in key)
    if answers > EXACT_MAX_ANSWERS:
        return 1.0
    return delta_at(_composed(key, interval_for(answers)), epsilon)
