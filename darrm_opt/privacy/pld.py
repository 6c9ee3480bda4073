"""Exact composition of DaRRM answers through privacy loss distributions (dp_accounting).

Each table's profile (:data:`~darrm_opt.privacy.profile.Profile`, seen here as a :class:`DominatingPair`)
gives a dominating pair (P, Q) of discrete distributions: the adaptive composition of answers of several
tables is dominated by the product of their pairs (Zhu, Dong, Wang 2022, Thm 10), whose privacy loss
distribution (PLD) is the convolution of the pairs' PLDs. Each PLD is discretised *pessimistically* on
multiples of ``INTERVAL`` by connect-the-dots (:func:`pair_pld`; dp_accounting's Gaussian and discrete
Gaussian PLDs for Gaussian pairs), so every δ(ε) and ε(δ) it returns is an upper bound on the true ones:

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from scipy import fft as scipy_fft

from darrm_opt.errors import InvalidParameter

if TYPE_CHECKING:  # dp_accounting (with scipy.stats) loads on the first composition, not with the module
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution as PLD


class DominatingPair(Protocol):
    """What composition needs of a table's profile (:class:`darrm_opt.privacy.profile.PrivacyProfile`,
    :class:`darrm_opt.privacy.gaussian_profile.GaussianProfile`): the PLD of its dominating pair at a loss
    interval, the P-mass of its infinite-loss atom and a canonical order among profiles (hashable: equal
    profiles are counted together)."""

    @property
    def infinite_mass(self) -> float: ...

    def to_pld(self, interval: float) -> Any: ...

    def sort_key(self) -> tuple: ...

    def __hash__(self) -> int: ...


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
#: the shift of :func:`loss_pair_pld` (Gaussian pairs): SHIFT·Δ ≥ DELTA_MARGIN for every grid Δ ≥ 1e-5 as well
LOSS_PAIR_SHIFT = 1e-5



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
        return _new_pld(pld_pmf.create_pmf_pessimistic_connect_dots(interval, [0], [d]))
    scaled = (np.log(pf) - np.log(qf)) / interval

    def hockey(e: np.ndarray) -> np.ndarray:
        return np.maximum(pf[None, :] - e[:, None] * qf[None, :], 0.0).sum(axis=1)

    return _connect_dots(scaled, hockey, pf.size, inf_mass, interval, SHIFT)


def loss_pair_pld(p: np.ndarray, losses: np.ndarray, infinite_mass: float, interval: float = INTERVAL,
                  shift: float = LOSS_PAIR_SHIFT) -> PLD:
    """:func:`pair_pld` of a pair given by its P-masses and exact losses ℓ_i (Q-masses p_i e^{−ℓ_i}, which may
    be below the float range): the hockey stick at ε_j is Σ_i p_i·(−expm1(min(ε_j − ℓ_i, 0))), term by term.
    ``shift``·Δ·T_j stays above the ulps of T_j for every Δ ≥ 1e-5 at the default (the same argument as
    pair_pld's, without its drift of SHIFT·Δ per answer in ε)."""
    keep = p > 0
    pf, lf = np.asarray(p, dtype=float)[keep], np.asarray(losses, dtype=float)[keep]

    def hockey(e: np.ndarray) -> np.ndarray:
        le = np.log(e)[:, None]
        return (pf[None, :] * -np.expm1(np.minimum(le - lf[None, :], 0.0))).sum(axis=1)

    return _connect_dots(lf / interval, hockey, pf.size, float(infinite_mass), interval, shift)


def _connect_dots(scaled: np.ndarray, hockey: Any, size: int, inf_mass: float, interval: float,
                  shift: float) -> PLD:
    """The pessimistic connect-the-dots PLD whose support brackets every loss (``scaled`` in grid units) and
    whose δ at each support point ε_j is hockey(e^{ε_j − shift·Δ})·(1 + DELTA_MARGIN) (see :func:`pair_pld`)."""
    from dp_accounting.pld import pld_pmf

    lo, hi = np.floor(scaled).astype(np.int64), np.ceil(scaled).astype(np.int64)
    ks = np.unique(np.concatenate([lo - 1, lo, hi, hi + 1]))
    eps = (ks - shift) * interval
    deltas = np.empty(ks.size)
    step = max(1, 2_000_000 // max(size, 1))
    with np.errstate(over="ignore"):  # e^ε past the float range: every finite term is 0 there
        for i in range(0, ks.size, step):
            deltas[i:i + step] = hockey(np.exp(eps[i:i + step]))
    deltas = np.minimum((deltas + inf_mass) * (1 + DELTA_MARGIN), 1.0)
    pmf = pld_pmf.create_pmf_pessimistic_connect_dots(interval, ks, deltas)
    return _new_pld(pmf)


def profile_pld(profile: DominatingPair, interval: float = INTERVAL) -> PLD:
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


# ---------------------------------------------------------------------------------------------------------
# Composition with a proven bound of its float error
# ---------------------------------------------------------------------------------------------------------
#: unit roundoff of float64
UNIT = 2.0**-53
#: relative ℓ₂ error added by each pass of a floating-point FFT. Higham (2002, Thm 24.2) bounds a radix-2
#: Cooley–Tukey FFT of length N by log₂N·η, η = μ + γ₄(√2 + μ) ≈ 6.7u with accurately computed weights
#: (μ ≤ u); pocketfft's mixed-radix passes are taken at 10u each (log₂N passes bound their count)
FFT_PASS_ERROR = 10 * UNIT
#: mass a self-composition may truncate from its tails (dp_accounting adds it to the infinity mass, and its
#: cyclic wrap-around is counted in the error bound); small enough for every δ the product accepts
SELF_TAIL = 1e-18
#: a sparse PMF whose self-composition has at most this many products is composed directly (a Gaussian pair of
#: small σ spans a loss grid too wide to be dense)
SPARSE_DIRECT = 200_000
#: two sparse PMFs with at most this many pairs of atoms are composed directly (:func:`_convolve_sparse`)
SPARSE_PRODUCT = 1_000_000


@dataclass(frozen=True)
class Bounded:
    """A composed PLD with bounds of the float error of its probabilities against the exact-arithmetic
    composition of its parts' (pessimistic, dominating) PLDs: ``err_inf`` on every grid point, ``err_1`` in
    total.

    Every δ read off it (:func:`delta_at`, :func:`epsilon_at`) adds min(err_1, n·err_inf, √n·err_2) for the n
    grid points above ε (the hockey stick weights the probabilities by 1 − e^{ε−L} ∈ [0, 1]; Cauchy–Schwarz for
    the ℓ₂ bound ``err_2``), so it is an upper bound of the true δ at every δ, and a δ target within that error
    is refused (ε = ∞)."""

    pld: PLD
    err_inf: float = 0.0
    err_1: float = 0.0
    err_2: float = 0.0

    @property
    def errors(self) -> tuple[float, float, float]:
        return self.err_inf, self.err_1, self.err_2


def _unit(wide: bool) -> float:
    """Unit roundoff of the FFT's arithmetic: float64, or numpy's long double (80-bit extended on x86-64)."""
    return float(np.finfo(np.longdouble).eps) / 2 if wide else UNIT


def _fft_tau(n: int, wide: bool = False) -> float:
    """Componentwise relative error of a floating-point FFT of length n: ((1 + η)^L − 1) with L = ⌈log₂n⌉
    passes of η = 10·u (FFT_PASS_ERROR in float64); each output is then within τ·‖x‖₁ of the exact DFT (the
    product of the passes' moduli is the all-ones matrix: |fl(A_L⋯A_1 x) − A_L⋯A_1 x| ≤ ((1 + η)^L − 1)|A_L|⋯
    |A_1||x|, Higham 2002, §3.5 and Thm 24.2)."""
    passes = max(1, math.ceil(math.log2(max(n, 2))))
    eta = FFT_PASS_ERROR / UNIT * _unit(wide)
    return math.expm1(passes * math.log1p(eta)) * (1 + 1e-9)


def _spectral_bounds(d: np.ndarray, amp: np.ndarray, tau: float, size: int, half: bool) -> tuple[float, float]:
    """(per point, ℓ₂) bounds of the error of an inverse DFT of length ``size`` whose input errs by at most d_f
    at each frequency and has moduli amp_f: mean_f d_f + τ·mean_f amp_f, and the same with root-mean-squares
    (Parseval). ``half``: only the non-negative frequencies of a real transform are given; the others mirror
    them, so 2·Σ/size bounds the mean over all."""
    k = 2.0 if half else 1.0
    per = k * float(np.sum(d)) / size + tau * k * float(np.sum(amp)) / size
    l2 = math.sqrt(k * float(np.sum(d * d)) / size) + tau * math.sqrt(k * float(np.sum(amp * amp)) / size)
    return per * (1 + 1e-6), l2 * (1 + 1e-6)


def _pmfs(pld: PLD) -> list:
    """The PMFs of a PLD (one when it is symmetric, else remove and add), dense or sparse."""
    pmfs = [pld._pmf_remove]
    if not pld._symmetric:
        pmfs.append(pld._pmf_add)
    return pmfs


def _sparse(pmf: Any) -> bool:
    return hasattr(pmf, "_loss_probs")


def bounded(pld: PLD | Bounded) -> Bounded:
    """A PLD as built (its float probabilities are the dominating pair it represents: no error)."""
    return pld if isinstance(pld, Bounded) else Bounded(pld)


def _pld_of(pmfs: list) -> PLD:
    return _new_pld(*pmfs[:2])


def _new_pld(*pmfs: Any) -> PLD:
    """A dp_accounting PLD of one PMF (symmetric) or two (remove, add)."""
    from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

    return PrivacyLossDistribution(*pmfs)


def _atoms(pmf: Any) -> tuple[np.ndarray, np.ndarray]:
    """A non-empty sparse PMF's (grid indices, probabilities) as arrays."""
    keys = np.fromiter(pmf._loss_probs.keys(), dtype=np.int64)
    return keys, np.fromiter(pmf._loss_probs.values(), dtype=float, count=keys.size)


def _to_dense(pmf: Any) -> Any:
    """``pmf.to_dense_pmf()`` with the same values, filled by one indexed store instead of a dictionary lookup per
    grid point (seconds for the millions of points a wide pair spans)."""
    if not _sparse(pmf) or not pmf._loss_probs:
        return pmf.to_dense_pmf()
    from dp_accounting.pld.pld_pmf import DensePLDPmf

    keys, vals = _atoms(pmf)
    lower = int(keys.min())
    probs = np.zeros(int(keys.max()) - lower + 1)
    probs[keys - lower] = vals
    return DensePLDPmf(pmf._discretization, lower, probs, pmf._infinity_mass, pmf._pessimistic_estimate)


def _dense(discretization: float, lower: int, probs: np.ndarray, inf_mass: float) -> Any:
    from dp_accounting.pld.pld_pmf import DensePLDPmf

    return DensePLDPmf(discretization, int(lower), np.asarray(probs, dtype=float), min(float(inf_mass), 1.0), True)


def _convolve_pmf(a: Any, b: Any, wide: bool = False) -> tuple[Any, float, float]:
    """a ∗ b by FFT (in long double when ``wide``) and the bounds of its float error, on every grid point and in
    ℓ₂ (:func:`_spectral_bounds`), the frequencies erring by at most

        d_f = ē_a|B̂_f| + |Â_f|ē_b + ē_a ē_b + 3u|Â_f||B̂_f|,   ē = τ‖·‖₁

    (componentwise errors of the forward transforms and of the products; the inverse adds its own)."""
    dtype = np.longdouble if wide else np.float64
    pa, pb = np.asarray(a._probs, dtype=dtype), np.asarray(b._probs, dtype=dtype)
    n = pa.size + pb.size - 1
    size = scipy_fft.next_fast_len(n, real=True)
    fa, fb = scipy_fft.rfft(pa, size), scipy_fft.rfft(pb, size)
    prod = fa * fb
    out = np.asarray(scipy_fft.irfft(prod, size)[:n], dtype=float)
    _release_fft_plans(size)
    tau, u = _fft_tau(size, wide), _unit(wide)
    ea, eb = tau * float(np.abs(pa).sum()), tau * float(np.abs(pb).sum())
    aa, ab = np.abs(fa).astype(float), np.abs(fb).astype(float)
    d = ea * ab + aa * eb + ea * eb + 3 * u * aa * ab
    per, l2 = _spectral_bounds(d, aa * ab, tau, size, half=True)
    inf = a._infinity_mass + b._infinity_mass - a._infinity_mass * b._infinity_mass
    return _dense(a._discretization, a._lower_loss + b._lower_loss, out, inf), per, l2


def compose_two(a: PLD | Bounded, b: PLD | Bounded, wide: bool = False) -> Bounded:
    """a ⊗ b (FFT convolution of each PMF), its error bounds carried: the inputs' errors move by
    |(a + e_a) ∗ (b + e_b) − a ∗ b| ≤ |e_a| ∗ |b| + |a| ∗ |e_b| + |e_a| ∗ |e_b| (per point at most
    err_inf_a‖b‖₁ + ‖a‖₁err_inf_b + err_inf_a·err_1_b, in total err_1_a‖b‖₁ + ‖a‖₁err_1_b + err_1_a·err_1_b),
    plus this convolution's own (:func:`_convolve_pmf`). No tail is truncated."""
    x, y = bounded(a), bounded(b)
    xs, ys = _pmfs(x.pld), _pmfs(y.pld)
    if len(xs) != len(ys):
        xs, ys = (xs * 2)[:2], (ys * 2)[:2]
    pmfs, err_inf, err_1, err_2 = [], 0.0, 0.0, 0.0
    for pa, pb in zip(xs, ys, strict=True):
        na, nb = float(np.abs(_grid(pa)[1]).sum()), float(np.abs(_grid(pb)[1]).sum())
        if _sparse(pa) and _sparse(pb) and pa.size * pb.size <= SPARSE_PRODUCT:
            out, own = _convolve_sparse(pa, pb)
            own2 = own
        else:
            out, own, own2 = _convolve_pmf(_to_dense(pa), _to_dense(pb), wide)
        pmfs.append(out)
        carried_inf = x.err_inf * nb + na * y.err_inf + x.err_inf * y.err_1
        carried_1 = x.err_1 * nb + na * y.err_1 + x.err_1 * y.err_1
        carried_2 = x.err_2 * nb + na * y.err_2 + x.err_2 * y.err_1
        err_inf = max(err_inf, carried_inf + own)
        err_1 = max(err_1, carried_1 + min(own * out.size, own2 * math.sqrt(out.size)))
        err_2 = max(err_2, carried_2 + own2)
    return Bounded(_pld_of(pmfs), err_inf, err_1, err_2)


def compose_bounded(parts: Iterable[tuple[PLD | Bounded, int]], wide: bool = False) -> Bounded | None:
    """Π over (pld, count) of pld^{⊗count}, with its error bounds; None when there is no answer. ``wide``: the
    FFTs in long double (about 3× the time, bounds 2048× smaller on x86-64)."""
    out: Bounded | None = None
    for pld, count in parts:
        if count == 0:
            continue
        piece = self_compose(pld, count, wide)
        out = piece if out is None else compose_two(out, piece, wide)
    return out


#: answers of several tables (the name the ledger and plans use)
compose = compose_bounded


def _chernoff_window(pmf: Any, count: int, tail: float) -> tuple[int, int]:
    """dp_accounting's window for ``count`` self-convolutions of ``pmf`` made dense
    (``common.compute_self_convolve_bounds``: offsets (lo, hi) from the dense lower end outside which the result
    holds at most ``tail``, by the Chernoff bound Pr[S ≥ a] ≤ E[e^{λS}]·e^{−λa} at λ = ±1..20 over the dense
    length), for a sparse PMF evaluated on its support alone: the dense array's zeros add nothing to the moment
    generating function, and its millions of points cost seconds per composition."""
    from dp_accounting.pld import common

    if not _sparse(pmf):
        return common.compute_self_convolve_bounds(np.asarray(pmf._probs, dtype=float), count, tail)
    from scipy import special

    if not pmf._loss_probs:  # all mass at infinity: nothing to transform
        return 0, 0
    keys, probs = _atoms(pmf)
    pos = (keys - keys.min()).astype(float)
    length = int(keys.max() - keys.min()) + 1
    lower, upper = 0, (length - 1) * count
    if tail == 0:
        return lower, upper
    for order in np.concatenate((np.arange(-20, 0), np.arange(1, 21))) / length:
        bound = (count * float(special.logsumexp(pos * order, b=probs)) + math.log(2 / tail)) / order
        if not math.isfinite(bound):
            continue
        if order > 0:
            upper = min(upper, math.ceil(bound))
        else:
            lower = max(lower, math.floor(bound))
    return lower, upper


def _self_convolve_pmf(pmf: Any, count: int, wide: bool = False) -> tuple[Any, float, float]:
    """x^{∗count} by one FFT power (in long double when ``wide``) on the window that holds all but SELF_TAIL of
    the mass (dp_accounting's bounds; the mass outside is added to the infinity mass, pessimistic), and the
    bounds of its float error (:func:`_spectral_bounds`), the frequencies erring by at most

        d_f = k·ē·(|X̂_f| + ē)^{k−1} + (k·(|ln|X̂_f|| + 4) + 2)u·(|X̂_f| + ē)^k,   ē = τ‖x‖₁

    (ē bounds each frequency's error; the k-th power moves it at most k-fold times the (k−1)-th power of the
    modulus; the complex power exp(k log z) adds the second term), plus SELF_TAIL for the wrapped-around tail.
    ``pmf`` sparse or dense: its window is read off its support (:func:`_chernoff_window`) before it is made
    dense."""
    lo, hi = _chernoff_window(pmf, count, SELF_TAIL)
    x = _to_dense(pmf)
    probs = np.asarray(x._probs, dtype=float)
    out_len = hi - lo + 1
    size = scipy_fft.next_fast_len(max(out_len, probs.size))
    spec = scipy_fft.fft(probs.astype(np.longdouble) if wide else probs, size)
    tau, u = _fft_tau(size, wide), _unit(wide)
    e = tau * float(np.abs(probs).sum())
    mod = np.abs(spec).astype(float)
    # spec**count in place (spec is not needed again); ** computes a square by np.square, any other power by np.power
    power = np.square(spec, out=spec) if count == 2 else np.power(spec, count, out=spec)
    del spec
    amp = np.abs(power).astype(float)
    wrapped = np.real(scipy_fft.ifft(power, overwrite_x=True))
    del power
    out = _rolled(wrapped, lo, out_len).astype(float)
    del wrapped
    d = _power_error(mod, e, u, count)
    del mod
    _release_fft_plans(size)
    per, l2 = _spectral_bounds(d, amp, tau, size, half=False)
    inf = 1.0 if x._infinity_mass >= 1 else SELF_TAIL - math.expm1(count * math.log1p(-x._infinity_mass))
    lower = x._lower_loss * count + lo
    return _dense(x._discretization, lower, out, inf), per + SELF_TAIL, l2 + SELF_TAIL


#: an FFT of at least this many points drops pocketfft's cached plans once done (:func:`_release_fft_plans`)
FFT_PLAN_RELEASE = 1 << 18


def _release_fft_plans(size: int) -> None:
    """After an FFT of ``size`` ≥ FFT_PLAN_RELEASE points, evict it from pocketfft's plan caches. scipy.fft keeps
    the plans of the last 16 lengths of each transform kind and precision, each holding its twiddle factors (about
    90 MB at 4·10⁶ points); compositions rarely repeat a length, so 16 large plans stayed resident (1.5 GB).
    Transforms of 16 tiny lengths of each kind (complex and real, float64 and long double) replace them; a plan is
    deterministic, so a length transformed again later gets the same plan and the same values."""
    if size < FFT_PLAN_RELEASE:
        return
    for real, complex_ in ((np.float64, np.complex128), (np.longdouble, np.clongdouble)):
        for n in range(2, 18):
            scipy_fft.fft(np.zeros(n, dtype=complex_))
            scipy_fft.rfft(np.zeros(n, dtype=real))


def _rolled(values: np.ndarray, lo: int, length: int) -> np.ndarray:
    """``np.roll(values, -lo)[:length]`` (the same values, copied), without rolling the whole array."""
    n = values.size
    start = lo % n
    if start + length <= n:
        return values[start:start + length]
    return np.concatenate((values[start:], values[:length - (n - start)]))


#: log₂ of the float64 zero threshold of :func:`_power_error`: a power whose exact value is below 2^UNDERFLOW_LOG2
#: rounds to +0 under any pow within a few ulps (the smallest subnormal is 2^−1074)
UNDERFLOW_LOG2 = -1200.0


def _power_error(mod: np.ndarray, e: float, u: float, count: int) -> np.ndarray:
    """d_f of :func:`_self_convolve_pmf` at every frequency from the moduli |X̂_f| (float64):

        d_f = k·ē·t_f^{k−1} + (k·(|ln|X̂_f|| + 4) + 2)u·t_f^k,   t_f = min(|X̂_f| + ē, 1 + ē),  k = count,

    evaluated term by term as written, but only where t_f^{k−1} can be non-zero: where t_f ≤
    2^{UNDERFLOW_LOG2/(k−1)} both powers are below 2^UNDERFLOW_LOG2, round to +0, and d_f is +0, the value the
    full expression takes there (each factor is finite and non-negative)."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        top = np.minimum(mod + e, 1.0 + e)
        live = np.flatnonzero(top > 2.0 ** (UNDERFLOW_LOG2 / (count - 1)))
        t, m = top[live], mod[live]
        logs = np.where(m > 0, np.abs(np.log(np.where(m > 0, m, 1.0))), 0.0)
        d = np.zeros_like(top)
        d[live] = count * e * t ** (count - 1) + ((count * (logs + 4) + 2) * u) * t**count
    return d


def self_compose(pld: PLD | Bounded, count: int, wide: bool = False) -> Bounded:
    """``count`` answers of one table (:func:`_self_convolve_pmf`), its error bounds carried: an input error
    e grows to at most (‖x‖₁ + err_1)^k − ‖x‖₁^k ≤ k·err_1·(1 + err_1)^{k−1} in total (and per point)."""
    _check_count(count)
    x = bounded(pld)
    if count == 1:
        return x
    pmfs, err_inf, err_1, err_2 = [], 0.0, 0.0, 0.0
    grow = count * (1 + x.err_1) ** (count - 1)
    for m in _pmfs(x.pld):
        if _sparse(m) and m.size**count <= SPARSE_DIRECT:
            out, own = _self_convolve_sparse(m, count)
            pmfs.append(out)
            err_inf, err_1 = max(err_inf, grow * x.err_1 + own), max(err_1, grow * x.err_1 + own)
            err_2 = max(err_2, grow * x.err_2 + own)
            continue
        out, own, own2 = _self_convolve_pmf(m, count, wide)
        pmfs.append(out)
        err_inf = max(err_inf, grow * x.err_1 + own)
        err_1 = max(err_1, grow * x.err_1 + min(own * out.size, own2 * math.sqrt(out.size)))
        err_2 = max(err_2, grow * x.err_2 + own2)
    return Bounded(_pld_of(pmfs), err_inf, err_1, err_2)


def _self_convolve_sparse(x: Any, count: int) -> tuple[Any, float]:
    """x^{∗count} of a sparse PMF by direct products and sums (every term ≥ 0: each mass within a relative
    γ_{2·count} of the exact one, so the total error is at most γ_{2·count}·Σ masses ≤ 4·count·u); no tail is
    truncated."""
    from dp_accounting.pld.pld_pmf import SparsePLDPmf

    base = dict(x._loss_probs)
    out = dict(base)
    for _ in range(count - 1):
        nxt: dict[int, float] = {}
        for k1, v1 in out.items():
            for k2, v2 in base.items():
                nxt[k1 + k2] = nxt.get(k1 + k2, 0.0) + v1 * v2
        out = nxt
    inf = 1.0 if x._infinity_mass >= 1 else -math.expm1(count * math.log1p(-x._infinity_mass))
    return SparsePLDPmf(out, x._discretization, inf, True), 4 * count * UNIT


def _convolve_sparse(a: Any, b: Any) -> tuple[Any, float]:
    """a ∗ b of two sparse PMFs by direct products and sums (every term ≥ 0: each mass within a relative γ₂
    of the exact one, so at most 4u of the total mass in error); no tail is truncated. Used where the loss
    grid between their atoms is too wide to be dense (a Gaussian pair of small σ)."""
    from dp_accounting.pld.pld_pmf import SparsePLDPmf

    out: dict[int, float] = {}
    for k1, v1 in a._loss_probs.items():
        for k2, v2 in b._loss_probs.items():
            out[k1 + k2] = out.get(k1 + k2, 0.0) + v1 * v2
    inf = a._infinity_mass + b._infinity_mass - a._infinity_mass * b._infinity_mass
    return SparsePLDPmf(out, a._discretization, min(inf, 1.0), True), 4 * UNIT


def _grid(pmf: Any) -> tuple[np.ndarray, np.ndarray, float]:
    """(losses ascending, masses, infinity mass) of a dense or sparse PMF."""
    if _sparse(pmf):
        items = sorted(pmf._loss_probs.items())
        ks = np.array([k for k, _ in items], dtype=float)
        return ks * pmf._discretization, np.array([v for _, v in items], dtype=float), float(pmf._infinity_mass)
    losses = (np.arange(pmf.size) + pmf._lower_loss) * pmf._discretization
    return losses, np.asarray(pmf._probs, dtype=float), float(pmf._infinity_mass)


def _delta_bound(losses: np.ndarray, probs: np.ndarray, inf_mass: float, err: tuple[float, float, float],
                 epsilon: float) -> float:
    """An upper bound of the hockey stick at ``epsilon`` of the exact-arithmetic PMF:

        Σ_{L_i > ε} p_i(1 − e^{ε−L_i}) + P[∞],

    each term ≥ 0 with a relative error of a few ulps and an absolute one of u·(|L_i| + |ε| + 4)·p_i (the loss
    grid and the exponential), summed pairwise (relative (log₂n + 8)u of Σ|terms|), plus
    min(err_1, n·err_inf, √n·err_2) for the float error of the probabilities themselves (``err`` =
    :attr:`Bounded.errors`)."""
    start = int(np.searchsorted(losses, epsilon, side="right"))
    p, lo = probs[start:], losses[start:]
    n = p.size
    inf_part = inf_mass * (1 + 4 * UNIT)
    if n == 0:
        return min(1.0, inf_part)
    terms = p * -np.expm1(epsilon - lo)
    val = float(terms.sum())
    abs_terms = float(np.abs(terms).sum())
    over = float(np.abs(p).sum())
    lmax = max(abs(float(lo[0])), abs(float(lo[-1])))
    bound = (val + (math.log2(n) + 8) * UNIT * abs_terms + 8 * UNIT * (lmax + abs(epsilon) + 4) * over
             + min(err[1], n * err[0], math.sqrt(n) * err[2]) + inf_part)
    return min(1.0, math.nextafter(max(bound, 0.0), math.inf))


def delta_at(pld: PLD | Bounded | None, epsilon: float) -> float:
    """δ(ε), an upper bound (:func:`_delta_bound` over each PMF of the PLD)."""
    if not (isinstance(epsilon, (int, float)) and epsilon >= 0):
        raise InvalidParameter("epsilon", "must be a number >= 0", epsilon)
    if pld is None:
        return 0.0
    b = bounded(pld)
    return max(_delta_bound(*_grid(m), b.errors, float(epsilon)) for m in _pmfs(b.pld))


def _epsilon_for(pmf: Any, err: tuple[float, float, float], delta: float) -> float:
    """The smallest ε ≥ 0 (rounded up) whose :func:`_delta_bound` is ≤ ``delta`` for one PMF; ``inf`` when
    none is (the infinity mass or the float error bound alone exceeds ``delta``).

    The grid point is located by the cumulative sums (a guess), then proven by the term-by-term bound, walking
    by bisection where the guess is off; within the segment (L_{j−1}, L_j) below it no loss lies, so the
    hockey stick is U − e^ε W there (U, W the masses above): ε = ln((U − δ′)/W) with δ′ the target less the
    bound's other terms, rounded up and checked again."""
    losses, probs, inf_mass = _grid(pmf)

    def bound(e: float) -> float:
        return _delta_bound(losses, probs, inf_mass, err, e)

    if bound(0.0) <= delta:
        return 0.0
    if losses.size == 0 or bound(float(losses[-1])) > delta:
        return math.inf
    first = int(np.searchsorted(losses, 0.0, side="right"))  # the first loss > 0
    lo, hi = first, losses.size - 1  # bound(L_hi) ≤ δ; the answer is an index in [lo, hi]
    with np.errstate(over="ignore", invalid="ignore"):
        u_cum = np.cumsum(probs[::-1])[::-1]
        w_cum = np.cumsum((probs * np.exp(-np.clip(losses, -700, 700)))[::-1])[::-1]
        approx = np.zeros_like(u_cum)
        approx[:-1] = u_cum[1:] - np.exp(np.clip(losses[:-1], -700, 700)) * w_cum[1:]
    cand = np.nonzero(approx[lo:] + inf_mass <= delta * (1 - 1e-6))[0]
    guess = lo + int(cand[0]) if cand.size else hi
    for j in (guess, guess + 1, guess + 2):
        if j <= hi and bound(float(losses[j])) <= delta:
            hi = j
            break
    if hi > lo and bound(float(losses[hi - 1])) <= delta:  # the guess was high: bisect below it
        while lo < hi:
            mid = (lo + hi) // 2
            if bound(float(losses[mid])) <= delta:
                hi = mid
            else:
                lo = mid + 1
    j = hi
    left = float(losses[j - 1]) if j > first else 0.0
    right = float(losses[j])
    # within (left, right): U − e^ε W plus the bound's other terms, which are at most their value at `right`
    # over the same atoms (i ≥ j) with |ε| ≤ |right|
    p, lj = probs[j:], losses[j:]
    val_right = float((p * -np.expm1(right - lj)).sum())
    extra = max(bound(right) - val_right, 0.0) * (1 + 1e-9)
    u_mass = float(p.sum())
    w_mass = float((p * np.exp(-np.clip(lj, -700, 700))).sum())
    target = delta - extra
    if w_mass > 0 and target > 0 and u_mass - target > 0:
        eps = math.log((u_mass - target) / w_mass)
        eps = math.nextafter(eps * (1 + 1e-12) + 1e-15, math.inf)
        if left <= eps < right and eps >= 0 and bound(eps) <= delta:
            return eps
    return right


def epsilon_at(pld: PLD | Bounded | None, delta: float) -> float:
    """Smallest ε (an upper bound) with δ(ε) ≤ ``delta``, read with :func:`_delta_bound`; ``inf`` when the
    infinite-loss mass or the composition's float error bound exceeds it (see :class:`Bounded`)."""
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise InvalidParameter("delta", "must satisfy 0 <= delta < 1", delta)
    if pld is None:
        return 0.0
    b = bounded(pld)
    return max(_epsilon_for(m, b.errors, float(delta)) for m in _pmfs(b.pld))


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


#: the most grid points a composition's window may span (:func:`grid_interval`; 64 MB of float64, 128 MB of
#: complex spectrum). A pair of wide loss range (a Gaussian pair of large μ, spanning tens of loss units:
#: 10⁶–10⁷ points per answer at INTERVAL) composed a few times spans 10⁷–10⁸ points, minutes and gigabytes
#: per composition; there the interval doubles until the window fits
MAX_WINDOW = 1 << 23
#: the window is estimated on PLDs this many times coarser than the composition's grid
PROBE = 64.0


def _points(pmf: Any) -> int:
    """The grid points a PMF spans, sparse or dense (without making it dense)."""
    if _sparse(pmf):
        keys = pmf._loss_probs.keys()
        return max(keys) - min(keys) + 1 if keys else 1
    return int(np.asarray(pmf._probs).size)


def _window(parts: Parts, interval: float) -> float:
    """The loss span (in loss units) of the composition of ``parts`` that :func:`_self_convolve_pmf` transforms:
    per part, the larger of one answer's span and the Chernoff window of its self-composition (dp_accounting's
    bounds, the tail SELF_TAIL outside), summed over the parts (their convolution's span)."""
    width = 0.0
    for prof, n in parts:
        worst = 0
        for m in _pmfs(bounded(_one_pld(prof, interval)).pld):
            size = _points(m)
            lo, hi = _chernoff_window(m, n, SELF_TAIL) if n > 1 else (0, size - 1)
            worst = max(worst, hi - lo + 1, size)
        width += worst * interval
    return width


def grid_interval(parts: Parts, coarse: bool = False) -> float:
    """The discretisation interval of the composition of ``parts``: Δ₀ = :func:`interval_for` of the answers
    (COARSE times it when ``coarse``), doubled until the composed window spans at most MAX_WINDOW points,
    estimated on the grid PROBE·Δ₀ (:func:`_window`) once the plain bound Σ count·(one answer's span) exceeds
    it. Any grid gives an upper bound (connect-the-dots is pessimistic on every grid, Doroshenko et al. 2022,
    Thm 4.2); a coarser one adds at most about its interval per answer to ε, against an ε of several units
    where the window is that wide."""
    base = interval_for(sum(n for _, n in parts)) * (COARSE if coarse else 1.0)
    crude = sum(n * max(_points(m) for m in _pmfs(bounded(_one_pld(p, base)).pld)) for p, n in parts)
    if crude <= MAX_WINDOW:
        return base
    need = _window(parts, base * PROBE) / base / MAX_WINDOW
    return base if need <= 1 else base * 2.0 ** math.ceil(math.log2(need))


Parts = tuple[tuple[DominatingPair, int], ...]


def canonical_parts(parts: Iterable[tuple[DominatingPair, int]]) -> Parts:
    """Counts of equal profiles merged, empty ones dropped, in a canonical order (a cache key)."""
    counts: dict[DominatingPair, int] = {}
    for prof, n in parts:
        _check_count_zero(n)
        if n:
            counts[prof] = counts.get(prof, 0) + n
    return tuple(sorted(counts.items(), key=lambda kv: (kv[0].sort_key(), kv[1])))


def _check_count_zero(count: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidParameter("count", "must be an integer >= 0", count)


class _SizedCache:
    """A thread-safe LRU cache of PLDs bounded by ``entries`` and by ``limit`` bytes of probabilities (the most
    recent value is always kept); values are computed outside the lock."""

    def __init__(self, entries: int, limit: int) -> None:
        self.entries, self.limit = entries, limit
        self.items: collections.OrderedDict[Any, tuple[Any, int]] = collections.OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: Any, make: Any) -> Any:
        with self.lock:
            hit = self.items.get(key)
            if hit is not None:
                self.items.move_to_end(key)
                return hit[0]
        value = make()
        size = 0 if value is None else sum(_pmf_bytes(m) for m in _pmfs(bounded(value).pld))
        with self.lock:
            self.items[key] = (value, size)
            self.items.move_to_end(key)
            while len(self.items) > 1 and (len(self.items) > self.entries
                                           or sum(n for _, n in self.items.values()) > self.limit):
                self.items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self.lock:
            self.items.clear()


#: one answer's PLDs kept for reuse: at most this many, taking at most ONE_PLD_CACHE_BYTES together (a Gaussian
#: pair's PLD at the finest grid holds about 10⁶ points, 8 MB)
ONE_PLD_CACHE_SIZE = 128
ONE_PLD_CACHE_BYTES = 64 * 2**20
#: composed PLDs kept for reuse (one composition of 100 answers holds up to ~5·10⁶ grid points, 40 MB; the ε
#: and δ read off them are cached separately, :func:`exact_epsilon`)
COMPOSED_CACHE_SIZE = 8
COMPOSED_CACHE_BYTES = 96 * 2**20
_ONE = _SizedCache(ONE_PLD_CACHE_SIZE, ONE_PLD_CACHE_BYTES)
_COMPOSED = _SizedCache(COMPOSED_CACHE_SIZE, COMPOSED_CACHE_BYTES)


def _one_pld(profile: DominatingPair, interval: float) -> PLD:
    return _ONE.get((profile, float(interval)), lambda: profile_pld(profile, interval))


def _composed(parts: Parts, interval: float, wide: bool = False) -> Bounded | None:
    """The composition of ``parts`` on the grid ``interval`` (:func:`compose_bounded`), cached."""
    return _COMPOSED.get((parts, float(interval), bool(wide)),
                         lambda: compose_bounded(((_one_pld(p, interval), n) for p, n in parts), wide=wide))


def release_compositions() -> None:
    """Drop every cached PLD, one answer's or composed (the ε and δ read off them stay cached): a planner calls
    it between offers."""
    _ONE.clear()
    _COMPOSED.clear()


def _pmf_bytes(pmf: Any) -> int:
    """About how many bytes a PMF's probabilities take (dense: its array; sparse: its dictionary)."""
    return 100 * len(pmf._loss_probs) if _sparse(pmf) else int(np.asarray(pmf._probs).nbytes)


#: a composition is redone in long double when its float64 error bound exceeds this share of the δ target
WIDE_SHARE = 1e-5


def error_share(composed: Bounded | None, delta: float) -> float:
    """The float error bound of a composition's δ (over its whole grid) as a share of ``delta``."""
    if composed is None or delta <= 0:
        return 0.0
    n = max(m.size for m in _pmfs(composed.pld))
    return min(composed.err_1, n * composed.err_inf, math.sqrt(n) * composed.err_2) / delta


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


def bucketed(parts: Iterable[tuple[DominatingPair, int]]) -> Parts:
    """``parts`` with every count rounded up by :func:`bucket` (canonical); the parts themselves when the
    bucketed total would be over EXACT_MAX_ANSWERS (where no composition is attempted)."""
    key = canonical_parts(parts)
    out = tuple((p, bucket(n)) for p, n in key)
    return key if sum(n for _, n in out) > EXACT_MAX_ANSWERS else out


def next_bucket(parts: Iterable[tuple[DominatingPair, int]], grow: Iterable[DominatingPair], by: int = 1) -> Parts:
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
    interval = grid_interval(parts, coarse)
    composed = _composed(parts, interval)
    eps = epsilon_at(composed, delta)
    if error_share(composed, delta) > WIDE_SHARE:  # the float64 bound costs ε here: long double, 2048× smaller
        eps = min(eps, epsilon_at(_composed(parts, interval, True), delta))
    return eps


def exact_epsilon(parts: Iterable[tuple[DominatingPair, int]], delta: float, *, coarse: bool = False) -> float:
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
ACCOUNTING_VERSION = 3


def _exact_text(value: object) -> str:
    """A canonical, exact text of a profile's sort key: floats by :meth:`float.hex`, containers recursively."""
    if isinstance(value, float):
        return value.hex()
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(_exact_text(v) for v in value) + ")"
    return repr(value)


def composition_key(parts: Iterable[tuple[DominatingPair, int]], delta: float, *, coarse: bool = False) -> str:
    """SHA-256 (hex) naming the value of :func:`exact_epsilon` for these arguments across processes and
    versions: the canonical parts (each profile's exact sort key and its count), δ, the grid (INTERVAL, COARSE,
    SHIFT, DELTA_MARGIN, MAX_WINDOW, PROBE) and :data:`ACCOUNTING_VERSION`."""
    h = hashlib.sha256()
    h.update(f"darrm-composition-v{ACCOUNTING_VERSION}|{INTERVAL.hex()}|{COARSE.hex()}|{SHIFT.hex()}|"
             f"{DELTA_MARGIN.hex()}|{MAX_WINDOW}|{PROBE.hex()}|{float(delta).hex()}|{bool(coarse)}".encode())
    for prof, n in canonical_parts(parts):
        h.update(f"|{_exact_text(prof.sort_key())}#{n}".encode())
    return h.hexdigest()


def remember_exact_epsilon(parts: Iterable[tuple[DominatingPair, int]], delta: float, value: float, *,
                           coarse: bool = False) -> None:
    """Put ``value``, :func:`exact_epsilon` of these arguments computed elsewhere (another process), in the
    cache."""
    key = (canonical_parts(parts), float(delta), bool(coarse))
    with _EXACT_LOCK:
        _EXACT[key] = value
        while len(_EXACT) > EXACT_CACHE_SIZE:
            _EXACT.popitem(last=False)


def cached_exact_epsilon(parts: Iterable[tuple[DominatingPair, int]], delta: float, *,
                         coarse: bool = False) -> float | None:
    """:func:`exact_epsilon` if it is in the cache (no composition is computed), else None."""
    key = (canonical_parts(parts), float(delta), bool(coarse))
    with _EXACT_LOCK:
        value = _EXACT.get(key)
        if value is not None:
            _EXACT.move_to_end(key)
        return value


def exact_delta(parts: Iterable[tuple[DominatingPair, int]], epsilon: float, *, coarse: bool = False) -> float:
    """δ at ``epsilon`` (an upper bound) of the composition :func:`exact_epsilon` reads: the composed
    pessimistic PLD on the grid :func:`grid_interval` (``coarse``: COARSE times coarser, still an upper bound),
    read by :func:`delta_at`, the smaller with the long-double composition where the float64 error bound exceeds
    WIDE_SHARE of the value; 1 above EXACT_MAX_ANSWERS answers."""
    key = canonical_parts(parts)
    if not key:
        return 0.0
    answers = sum(n for _, n in key)
    if answers > EXACT_MAX_ANSWERS:
        return 1.0
    interval = grid_interval(key, coarse)
    composed = _composed(key, interval)
    d = delta_at(composed, epsilon)
    if error_share(composed, d) > WIDE_SHARE:
        d = min(d, delta_at(_composed(key, interval, True), epsilon))
    return d
