"""PATE's GNMax and Confident-GNMax aggregators and their Rényi-DP accounting (the GNMax baseline).

Pure computation (numpy / scipy), no I/O. References are to Papernot et al., "Scalable private learning
with PATE" (ICLR 2018), called *PATE* below, and to App. D.2.1 of the DaRRM paper for the calibration of
GNMax's σ to a per-query (ε, δ).

Conventions
-----------
* A vote histogram ``n = (n_1, ..., n_m)`` holds non-negative counts, one per class, in its last axis.
* *Order* is the Rényi order λ > 1.  RDP values are in nats.
* PATE's neighbouring relation: one teacher changes its vote, so two counts move by one each
  (decrement one, increment another).  Hence GNMax with per-count noise N(0, σ²) is (λ, λ/σ²)-RDP
  (Prop. 8), twice the λ/(2σ²) of a sensitivity-1 Gaussian mechanism.  In ``dp_accounting`` terms GNMax
  is a ``GaussianDpEvent`` with noise multiplier σ/√2.
* The threshold check of Confident-GNMax (Algorithm 1, line 1) releases ``max_i n_i + N(0, σ₁²) ≥ T``;
  the maximum count moves by at most one, so it is a sensitivity-1 Gaussian: (λ, λ/(2σ₁²))-RDP.

Summary of the formulas
-----------------------
* GNMax (Sec. 4.1): ``M_σ(n) = argmax_i {n_i + N(0, σ²)}``.
* Data-independent RDP (Prop. 8): ``ε(λ) = λ / σ²``.
* Prop. 7: ``Pr[M_σ(n) ≠ i*] ≤ q̃ = ½ Σ_{i≠i*} erfc((n_{i*} − n_i) / (2σ))``.
* Thm. 6 (eq. 2): with (μ₁, ε₁)- and (μ₂, ε₂)-RDP,
  ``D_λ ≤ 1/(λ−1) · log((1−q̃)·A^{λ−1} + q̃·B^{λ−1})``, ``A = (1−q̃) / (1 − (q̃ e^{ε₂})^{(μ₂−1)/μ₂})``,
  ``B = e^{ε₁} / q̃^{1/(μ₁−1)}``; valid when ``λ ≤ μ₁`` and
  ``q̃ ≤ e^{(μ₂−1)ε₂} / (μ₁/(μ₁−1) · μ₂/(μ₂−1))^{μ₂}``.
* Prop. 10: ``μ₂ = σ √(log 1/q̃)``, ``μ₁ = μ₂ + 1``, ``ε_i = μ_i / σ²``; the bound used is
  ``β_σ(q̃) = min{eq. 2, λ/σ²}`` (App. A, after Prop. 10), eq. 2 only where its conditions hold
  (q̃ < 1, μ₁ ≥ λ, μ₂ > 1, the q̃ condition above, and q̃ e^{ε₂} < 1 so that A > 0).
* Thm. 5: (λ, ε)-RDP ⇒ (ε + log(1/δ)/(λ−1), δ)-DP.

Calibrating one GNMax answer to a target (ε, δ) (:data:`GNMAX_METHODS`, loosest first)
------------------------------------------------------------------------------------
* ``rdp``: Prop. 8 + Thm. 5, the DaRRM paper's App. D.2.1 (σ = 21.46 at (0.2676, 3·10⁻⁴)).
* ``rdp-improved``: Prop. 8 + the improved conversion ε = ε_RDP + log(1 − 1/λ) − (log δ + log λ)/(λ − 1)
  (Canonne, Kamath & Steinke 2020, Prop. 12; ``dp_accounting.rdp.compute_epsilon``): σ = 14.63.
* ``analytic-gaussian``: the exact (ε, δ) of the Gaussian mechanism with L2 sensitivity √2 (Balle & Wang
  2018, Thm. 8; :func:`darrm_opt.privacy.gnmax_continuous.calibrate_gaussian_sigma`): σ = 12.90.
* ``exact-one-bit``: with two classes GNMax releases one bit, 1{L + N₁ > K − L + N₂}; it is DaRRM with
  γ_GNMax(l) = erf(|2l − K|/(2σ)), and in the PATE setting (one record moves L by one) its exact
  (ε, δ) is the maximum over neighbouring pairs (l, l ± 1) and outputs of Pr[o | l] − e^ε Pr[o | l′]
  (:mod:`darrm_opt.model.neighbours`): σ = 7.68 at K = 11. Every σ is verified in 40-digit arithmetic.

The RDP order grid (:data:`DEFAULT_ORDERS`) runs to 500: at m = 1 the optimum order is λ = 232.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.params import finite_number as _finite

__all__ = [
    "GnmaxCalibration",
    "BestEpsilon",
    "gnmax_aggregate",
    "confident_gnmax",
    "gnmax_output_probabilities",
    "rdp_gnmax_data_independent",
    "log_q_tilde",
    "q_tilde",
    "rdp_data_dependent",
    "rdp_data_dependent_from_log_q",
    "data_dependent_bound_applies",
    "rdp_gnmax",
    "prob_answered",
    "log_prob_answered",
    "rdp_threshold_check",
    "rdp_to_dp",
    "best_epsilon",
    "calibrate_gnmax_sigma",
    "DEFAULT_ORDERS",
    "GNMAX_METHODS",
    "gnmax_gamma",
    "calibrate_gnmax",
    "calibrate_gnmax_rdp_improved",
    "calibrate_gnmax_analytic",
    "calibrate_gnmax_one_bit",
]

#: The order grid of DaRRM App. D.2.1 (steps of 0.5), starting just above 1, extended to 500 (the paper
#: stops at 200; at (0.0892, 1e-4) the optimum is at λ = 232).
DEFAULT_ORDERS = np.arange(1.5, 500.5, 0.5)


# --------------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------------


def _positive(name: str, value: object) -> float:
    x = _finite(name, value)
    if x <= 0:
        raise InvalidParameter(name, "must be a finite number > 0", value)
    return x


def _delta(value: object) -> float:
    x = _finite("delta", value)
    if not 0.0 < x < 1.0:
        raise InvalidParameter("delta", "must satisfy 0 < delta < 1", value)
    return x


def _orders(value: object, name: str = "order") -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameter(name, "must be a number or an array of numbers", value) from None
    if arr.size == 0:
        raise InvalidParameter(name, "must not be empty", value)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 1.0):
        raise InvalidParameter(name, "every Rényi order must be finite and > 1", value)
    return arr


def _counts(value: object, name: str = "votes", min_classes: int = 1) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameter(name, "must be an array of vote counts", value) from None
    if arr.ndim == 0:
        raise InvalidParameter(name, "must have a class axis (shape (..., n_classes))", value)
    if arr.shape[-1] < min_classes:
        raise InvalidParameter(name, f"needs at least {min_classes} classes", value)
    if arr.size and (not np.all(np.isfinite(arr)) or np.any(arr < 0)):
        raise InvalidParameter(name, "counts must be finite and non-negative", value)
    return arr


def _count_scalar_or_array(name: str, value: object) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameter(name, "must be a count", value) from None
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise InvalidParameter(name, "must be finite and non-negative", value)
    return arr


def _rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameter("rng", "must be a numpy.random.Generator", type(rng).__name__)
    return rng


def _out(x: np.ndarray) -> float | np.ndarray:
    """Return a Python float for 0-d results, the array otherwise."""
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def _log1mexp(x: np.ndarray | float) -> np.ndarray:
    """log(1 − e^x) for x ≤ 0, accurate for x near 0 and for very negative x (Mächler 2012)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(np.minimum(x, 0.0))), np.log1p(-np.exp(x)))


# --------------------------------------------------------------------------------------------------
# the aggregators
# --------------------------------------------------------------------------------------------------


def gnmax_aggregate(votes_hist: object, sigma: float, rng: np.random.Generator) -> int | np.ndarray:
    """GNMax (PATE Sec. 4.1): ``argmax_i {n_i + N(0, σ²)}`` with independent noise on every count.

    ``votes_hist`` has shape ``(..., n_classes)``; every leading index is an independent query.
    Returns a Python ``int`` for a single histogram (1-D input) and an ``int64`` array of shape ``(...)``
    otherwise.  ``rng`` (a ``numpy.random.Generator``) is required so that every draw is reproducible.
    """
    sigma = _positive("sigma", sigma)
    rng = _rng(rng)
    votes = _counts(votes_hist, "votes_hist")
    noisy = votes + rng.normal(0.0, sigma, size=votes.shape)
    answer = np.argmax(noisy, axis=-1)
    return int(answer) if votes.ndim == 1 else answer.astype(np.int64)


def confident_gnmax(
    votes_hist: object, threshold: float, sigma1: float, sigma2: float, rng: np.random.Generator
) -> int | None | np.ndarray:
    """Confident-GNMax (PATE Sec. 4.2, Algorithm 1).

    If ``max_i n_i + N(0, σ₁²) ≥ T`` answer with GNMax at noise σ₂, else return ⊥.
    For a single histogram (1-D input) ⊥ is ``None`` and an answer is an ``int``; for a batch of shape
    ``(..., n_classes)`` the result is an ``int64`` array of shape ``(...)`` with ``-1`` for ⊥.

    Privacy: every query pays :func:`rdp_threshold_check`; only answered queries also pay
    :func:`rdp_gnmax` at σ₂ (RDP composition, PATE Thm. 4).
    """
    threshold = _finite("threshold", threshold)
    sigma1 = _positive("sigma1", sigma1)
    sigma2 = _positive("sigma2", sigma2)
    rng = _rng(rng)
    votes = _counts(votes_hist, "votes_hist")
    top = votes.max(axis=-1)
    answered = top + rng.normal(0.0, sigma1, size=top.shape) >= threshold
    noisy = votes + rng.normal(0.0, sigma2, size=votes.shape)
    answer = np.where(answered, np.argmax(noisy, axis=-1), -1).astype(np.int64)
    if votes.ndim == 1:
        return int(answer) if answered else None
    return answer


def gnmax_output_probabilities(votes: object, sigma: float) -> np.ndarray:
    """Exact output distribution of GNMax for one histogram, by 1-D quadrature.

    ``Pr[M_σ(n) = i] = ∫ φ(z) Π_{j≠i} Φ((n_i − n_j)/σ + z) dz`` (condition on the noise of class i).
    Used to check Prop. 7 (``q̃ ≥ 1 − Pr[M_σ(n) = i*]``) and to test :func:`gnmax_aggregate`.
    """
    sigma = _positive("sigma", sigma)
    n = _counts(votes, "votes")
    if n.ndim != 1:
        raise InvalidParameter("votes", "must be a single histogram (1-D)", n.shape)
    from scipy.integrate import quad

    m = n.size
    probs = np.empty(m)
    for i in range(m):
        gaps = (n[i] - np.delete(n, i)) / sigma

        def integrand(z: float, gaps: np.ndarray = gaps) -> float:
            return math.exp(-0.5 * z * z + float(np.sum(special.log_ndtr(gaps + z)))) / math.sqrt(2 * math.pi)

        lo = -12.0 - max(0.0, float(gaps.max(initial=0.0)))
        probs[i] = quad(integrand, lo, 12.0, epsabs=1e-13, epsrel=1e-11, limit=200)[0]
    return probs / probs.sum()


# --------------------------------------------------------------------------------------------------
# RDP of GNMax
# --------------------------------------------------------------------------------------------------


def rdp_gnmax_data_independent(order: object, sigma: float) -> float | np.ndarray:
    """Data-independent RDP of GNMax (PATE Prop. 8): ``ε(λ) = λ / σ²``.

    PATE's convention: changing one teacher's vote moves two counts by one each, so GNMax is twice as
    expensive as a sensitivity-1 Gaussian mechanism (``λ / (2σ²)``, Mironov 2017).
    Example: λ = 14, σ = 40 gives 0.00875.  Vectorised over ``order``.
    """
    sigma = _positive("sigma", sigma)
    lam = _orders(order)
    return _out(lam / sigma**2)


def logsumexp_last(a: np.ndarray) -> float | np.ndarray:
    """log Σ_i exp(a_i) over the last axis of a float64 array: ``scipy.special.logsumexp(a, axis=-1)``,
    the same operations in the same order (shift by the maximum a*, whose k copies contribute log k:
    log1p(Σ_{a_i < a*} e^{a_i − a*} / k) + log k + a*; log Σ e^{a_i} where that is not finite; Blanchard, Higham
    & Higham 2021), without scipy's array-API dispatch, which costs about 1 ms a call."""
    a = np.atleast_1d(np.asarray(a, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out_inf = np.log(np.sum(np.exp(a), axis=-1, keepdims=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        a_max = np.max(a, axis=-1, keepdims=True)
        at_max = a == a_max
        shifted = np.where(at_max, -np.inf, a)
        m = np.sum(at_max.astype(np.float64), axis=-1, keepdims=True, dtype=np.float64)
        s = np.sum(np.exp(shifted - a_max), axis=-1, keepdims=True, dtype=np.float64)
        s = np.where(s == 0, s, s / m)
        sgn = np.sign(s + 1) * np.sign(m)
        s = np.where(s < -1, -s - 2, s)
        out = np.log1p(s) + np.log(np.abs(m)) + a_max
        out[sgn < 0] = np.nan
    out = np.squeeze(np.where(np.isfinite(out), out, out_inf), axis=-1)
    return out[()] if out.ndim == 0 else out


def log_q_tilde(votes: object, sigma: float) -> float | np.ndarray:
    """log of PATE Prop. 7's bound q̃ on ``Pr[M_σ(n) ≠ i*]``, with i* the (first) plurality class.

    ``q̃ = ½ Σ_{i≠i*} erfc((n_{i*} − n_i)/(2σ)) = Σ_{i≠i*} Φ(−(n_{i*} − n_i)/(√2 σ))`` (the difference of
    two N(0, σ²) is N(0, 2σ²)); computed as a log-sum-exp of ``scipy.special.log_ndtr`` terms, so it is
    accurate where q̃ underflows.

    The union bound can exceed 1 (many near-tied classes); it is capped at ``1 − 1/m``, which is still a
    valid bound: the plurality class is the most likely GNMax output (swap its noise with another
    class's), so ``Pr[M_σ(n) = i*] ≥ 1/m``.  Hence ``q̃ ∈ (0, 1 − 1/m]``.

    ``votes`` has shape ``(..., m)`` with m ≥ 2; the result has shape ``(...)``.
    """
    sigma = _positive("sigma", sigma)
    n = _counts(votes, "votes", min_classes=2)
    m = n.shape[-1]
    top = np.max(n, axis=-1, keepdims=True)
    gaps = top - n  # ≥ 0, exactly 0 at i* (and at ties)
    terms = special.log_ndtr(-gaps / (math.sqrt(2.0) * sigma))
    # drop exactly one term: the first argmax (i*)
    istar = np.argmax(n, axis=-1)
    mask = np.ones(n.shape, dtype=bool)
    np.put_along_axis(mask, istar[..., None], False, axis=-1)
    terms = np.where(mask, terms, -np.inf)
    logq = logsumexp_last(terms)
    logq = np.minimum(logq, math.log1p(-1.0 / m))
    return _out(logq)


def q_tilde(votes: object, sigma: float) -> float | np.ndarray:
    """PATE Prop. 7's q̃ (see :func:`log_q_tilde`), in linear space."""
    return _out(np.exp(log_q_tilde(votes, sigma)))


def _dd_pieces(log_q: float, sigma: float, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Thm. 6 bound (eq. 2) at the Prop. 10 orders, and the mask where its conditions hold."""
    variance = sigma**2
    data_indep = lam / variance
    if log_q == -math.inf:
        # q̃ = 0: the mechanism puts no mass off i* at D; RDP at any order μ₂ > 1 forces the same at D',
        # so the divergence is 0 (also the limit of eq. 2 as q̃ → 0).
        return np.zeros_like(lam), np.ones(lam.shape, dtype=bool)
    if log_q >= 0.0:  # q̃ ≥ 1: Thm. 6 needs q̃ < 1
        return data_indep, np.zeros(lam.shape, dtype=bool)
    mu2 = sigma * math.sqrt(-log_q)  # Prop. 10
    mu1 = mu2 + 1.0
    eps1 = mu1 / variance  # Prop. 8 at the higher orders
    eps2 = mu2 / variance
    if mu2 <= 1.0:
        return data_indep, np.zeros(lam.shape, dtype=bool)
    # Thm. 6's condition on q̃ (also Lemma 9's range of monotonicity), in logs
    log_q_max = (mu2 - 1.0) * eps2 - mu2 * (math.log1p(1.0 / (mu1 - 1.0)) + math.log1p(1.0 / (mu2 - 1.0)))
    if not (log_q <= log_q_max and log_q + eps2 < 0.0):  # the second keeps A finite and positive
        return data_indep, np.zeros(lam.shape, dtype=bool)
    applies = lam <= mu1
    log1mq = float(_log1mexp(log_q))
    log_a = log1mq - _log1mexp((log_q + eps2) * (1.0 - 1.0 / mu2))  # log A
    log_b = eps1 - log_q / (mu1 - 1.0)  # log B
    lm1 = lam - 1.0
    bound = np.logaddexp(log1mq + lm1 * log_a, log_q + lm1 * log_b) / lm1
    return np.where(applies, bound, data_indep), applies


def rdp_data_dependent_from_log_q(log_q: float, order: object, sigma: float) -> float | np.ndarray:
    """As :func:`rdp_data_dependent` but from ``log q̃`` (stable when q̃ underflows)."""
    sigma = _positive("sigma", sigma)
    lam = _orders(order)
    try:
        lq = float(log_q)
    except (TypeError, ValueError):
        raise InvalidParameter("log_q", "must be a number", log_q) from None
    if math.isnan(lq) or lq == math.inf:
        raise InvalidParameter("log_q", "must be a log-probability (≤ 0 or -inf)", log_q)
    lq = min(lq, 0.0)
    bound, _ = _dd_pieces(lq, sigma, lam)
    return _out(np.minimum(bound, lam / sigma**2))


def rdp_data_dependent(q: float, order: object, sigma: float) -> float | np.ndarray:
    """Data-dependent RDP of GNMax given q̃ ≥ Pr[M_σ(D) ≠ i*]: PATE Thm. 6 (eq. 2) with Prop. 10's orders.

    ``μ₂ = σ √(log 1/q̃)``, ``μ₁ = μ₂ + 1``, ``ε_i = μ_i/σ²``,
    ``β = 1/(λ−1) · log((1−q̃) A^{λ−1} + q̃ B^{λ−1})`` with
    ``A = (1−q̃)/(1 − (q̃ e^{ε₂})^{1−1/μ₂})`` and ``B = e^{ε₁}/q̃^{1/(μ₁−1)}``, evaluated in log space.

    The bound is used only where Thm. 6 applies: q̃ < 1, μ₂ > 1, λ ≤ μ₁,
    ``q̃ ≤ e^{(μ₂−1)ε₂} / (μ₁/(μ₁−1) · μ₂/(μ₂−1))^{μ₂}`` and q̃ e^{ε₂} < 1.  Elsewhere the result is the
    data-independent λ/σ² (Prop. 8); everywhere it is ``min(bound, λ/σ²)`` as in App. A after Prop. 10.

    Note: the result depends on the private votes; publishing it needs PATE App. B's smooth-sensitivity
    sanitisation, which this module does not do.
    """
    try:
        qf = float(q)
    except (TypeError, ValueError):
        raise InvalidParameter("q", "must be a probability", q) from None
    if not 0.0 <= qf <= 1.0:
        raise InvalidParameter("q", "must satisfy 0 <= q <= 1", q)
    log_q = math.log(qf) if qf > 0 else -math.inf
    return rdp_data_dependent_from_log_q(log_q, order, sigma)


def data_dependent_bound_applies(votes: object, sigma: float, order: object) -> bool | np.ndarray:
    """Whether Thm. 6's conditions (with Prop. 10's orders) hold for one histogram at ``order``.

    (Whether it also *improves* on λ/σ² is a separate question; :func:`rdp_gnmax` takes the minimum.)
    """
    sigma = _positive("sigma", sigma)
    lam = _orders(order)
    n = _counts(votes, "votes", min_classes=2)
    if n.ndim != 1:
        raise InvalidParameter("votes", "must be a single histogram (1-D)", n.shape)
    _, applies = _dd_pieces(float(log_q_tilde(n, sigma)), sigma, lam)
    return bool(applies) if applies.ndim == 0 else applies


def rdp_gnmax(votes: object, sigma: float, order: object) -> float | np.ndarray:
    """RDP of one GNMax answer on the histogram ``votes`` at ``order``: the smaller valid bound.

    ``min(Thm. 6 with q̃ = Prop. 7's bound, λ/σ²)`` (PATE App. A, the β_σ(q) after Prop. 10).
    Vectorised over ``order`` (one histogram).  Examples (PATE reference implementation):
    [250, 0×9], σ = 40, λ = 14 → 3.1202e-5; [6, 5], σ = 2, λ = 5 → 1.25 (data-independent).
    """
    sigma = _positive("sigma", sigma)
    lam = _orders(order)
    n = _counts(votes, "votes", min_classes=2)
    if n.ndim != 1:
        raise InvalidParameter("votes", "must be a single histogram (1-D)", n.shape)
    return rdp_data_dependent_from_log_q(float(log_q_tilde(n, sigma)), lam, sigma)


# --------------------------------------------------------------------------------------------------
# Confident-GNMax's threshold check
# --------------------------------------------------------------------------------------------------


def log_prob_answered(max_count: object, threshold: float, sigma1: float) -> float | np.ndarray:
    """``log Pr[max_count + N(0, σ₁²) ≥ T] = log Φ((max_count − T)/σ₁)`` (Algorithm 1, line 1)."""
    threshold = _finite("threshold", threshold)
    sigma1 = _positive("sigma1", sigma1)
    top = _count_scalar_or_array("max_count", max_count)
    return _out(special.log_ndtr((top - threshold) / sigma1))


def prob_answered(max_count: object, threshold: float, sigma1: float) -> float | np.ndarray:
    """Probability that Confident-GNMax answers: ``Φ((max_count − T)/σ₁)``.

    Example: T = 200, σ₁ = 150, max count 250 → Φ(1/3) = 0.63056.
    """
    return _out(np.exp(log_prob_answered(max_count, threshold, sigma1)))


def rdp_threshold_check(max_count: object, threshold: float, sigma1: float, order: object) -> float | np.ndarray:
    """RDP cost of Confident-GNMax's noisy threshold check at ``order`` (paid by every query).

    The check releases one bit, ``max_i n_i + N(0, σ₁²) ≥ T``.  The maximum count has sensitivity 1
    under PATE's neighbouring relation, so the check is (λ, λ/(2σ₁²))-RDP — the GNMax formulas with
    σ' = √2·σ₁.  Its data-dependent cost applies Thm. 6 (generic in the mechanism) with Prop. 10's orders
    at σ', taking as the "likely outcome" the more likely of answered / not answered, so
    ``q̃ = min(Pr[answered], 1 − Pr[answered])`` (exact here, no union bound), and keeps the smaller of
    that bound and λ/(2σ₁²).

    Example: T = 200, σ₁ = 150, max count 250 (Pr[answered] = 0.63056, q̃ = 0.36944), λ = 14 →
    3.111e-4.  With q̃ this large Thm. 6's q̃ condition fails, so the value is the data-independent
    14/(2·150²) = 3.1111e-4; the data-dependent branch only helps when the max count is many σ₁ from T.
    Vectorised over ``order`` for a scalar ``max_count``.
    """
    threshold = _finite("threshold", threshold)
    sigma1 = _positive("sigma1", sigma1)
    lam = _orders(order)
    top = _count_scalar_or_array("max_count", max_count)
    if top.ndim != 0:
        raise InvalidParameter("max_count", "must be a single count", max_count)
    z = (float(top) - threshold) / sigma1
    log_q = min(float(special.log_ndtr(z)), float(special.log_ndtr(-z)))
    return rdp_data_dependent_from_log_q(log_q, lam, math.sqrt(2.0) * sigma1)


# --------------------------------------------------------------------------------------------------
# RDP → DP and calibration
# --------------------------------------------------------------------------------------------------


def rdp_to_dp(rdp: object, order: object, delta: float) -> float | np.ndarray:
    """PATE Thm. 5: (λ, ε_RDP)-RDP implies (ε_RDP + log(1/δ)/(λ − 1), δ)-DP.

    The denominator is λ − 1, as in the theorem (PATE's Table 2 arithmetic divides by λ instead).
    Example: ε_RDP = 1.18 at λ = 14, δ = 1e-5 → 2.066.  Broadcasts over ``rdp`` and ``order``.
    """
    delta = _delta(delta)
    lam = _orders(order)
    try:
        r = np.asarray(rdp, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameter("rdp", "must be a number or an array of numbers", rdp) from None
    if np.any(np.isnan(r)) or np.any(r < 0):
        raise InvalidParameter("rdp", "must be non-negative", rdp)
    return _out(r + math.log(1.0 / delta) / (lam - 1.0))


@dataclass(frozen=True)
class BestEpsilon:
    """The smallest Thm. 5 ε over an order grid, and the order attaining it."""

    epsilon: float
    order: float


def best_epsilon(rdp_fn: Callable[[float], float], orders: object, delta: float) -> BestEpsilon:
    """``min_λ rdp_fn(λ) + log(1/δ)/(λ−1)`` over the grid ``orders`` (PATE Thm. 5 at the best order).

    ``rdp_fn`` maps one order to the (composed) RDP at that order, e.g.
    ``lambda lam: n_queries * rdp_gnmax_data_independent(lam, sigma)``.
    Ties go to the first (smallest-index) order.
    """
    if not callable(rdp_fn):
        raise InvalidParameter("rdp_fn", "must be callable", type(rdp_fn).__name__)
    delta = _delta(delta)
    lam = np.atleast_1d(_orders(orders, "orders")).ravel()
    rdp = np.array([float(rdp_fn(float(o))) for o in lam])
    if np.any(np.isnan(rdp)) or np.any(rdp < 0):
        raise InvalidParameter("rdp_fn", "must return non-negative RDP values", rdp)
    eps = rdp + math.log(1.0 / delta) / (lam - 1.0)
    i = int(np.argmin(eps))
    return BestEpsilon(epsilon=float(eps[i]), order=float(lam[i]))


@dataclass(frozen=True)
class GnmaxCalibration:
    """Smallest GNMax σ meeting a target (ε, δ), the order certifying it, and the ε actually achieved."""

    sigma: float
    order: float | None
    epsilon: float
    method: str = "rdp"  #: one of :data:`GNMAX_METHODS`; ``order`` is None for the non-RDP methods


def calibrate_gnmax_sigma(
    target_epsilon: float,
    target_delta: float,
    n_queries: int = 1,
    orders: object = DEFAULT_ORDERS,
) -> GnmaxCalibration:
    """Smallest σ such that ``n_queries`` GNMax answers are (target_ε, target_δ)-DP by Prop. 8 + Thm. 5.

    For an order λ the composed RDP is ``k λ/σ²`` (PATE Thm. 4, Prop. 8), so Thm. 5 gives
    ``k λ/σ² + log(1/δ)/(λ−1) ≤ ε  ⇔  σ² ≥ k λ / (ε − log(1/δ)/(λ−1))`` for the orders with
    ``ε > log(1/δ)/(λ−1)``.  This is DaRRM App. D.2.1's recipe: σ_min² is the minimum of that closed form
    over the order grid (steps of 0.5).  σ is exact (no rounding); it is nudged up by a few ulps when
    needed so that the achieved ε never exceeds the target in floating point.

    Reproduces DaRRM Table 4's σ_min: (0.2676, 3e-4) → 21.4605 at λ = 62, (0.2556, 3e-4) → 22.4599 at
    λ = 65.  (App. D.2.1's own grid starts at λ_min = 1 + log(1/δ)/ε in steps of 0.5; it gives the same
    σ to 4 decimals.)  Table 4 prints these rounded to nearest (21.46, 22.46); σ = 21.46 itself gives
    ε ≈ 0.267606 at its best order, slightly above 0.2676, so a σ written to two decimals must be rounded
    *up* (21.47).  Table 4's λ column (34.31, 35.74) does not match its σ column.

    Raises ``InvalidParameter`` when no order of the grid can meet the target (ε too small for the
    largest order).
    """
    eps = _positive("target_epsilon", target_epsilon)
    delta = _delta(target_delta)
    if isinstance(n_queries, bool) or not isinstance(n_queries, (int, np.integer)) or n_queries < 1:
        raise InvalidParameter("n_queries", "must be an integer >= 1", n_queries)
    k = int(n_queries)
    lam = np.atleast_1d(_orders(orders, "orders")).ravel()
    log_inv_delta = math.log(1.0 / delta)
    slack = eps - log_inv_delta / (lam - 1.0)
    ok = slack > 0
    if not np.any(ok):
        raise InvalidParameter(
            "orders",
            f"no order meets epsilon {eps} at delta {delta}: need order > 1 + log(1/delta)/epsilon "
            f"= {1.0 + log_inv_delta / eps:.6g}",
            f"max order {lam.max():g}",
        )
    with np.errstate(divide="ignore"):
        sigma2 = np.where(ok, k * lam / np.where(ok, slack, 1.0), np.inf)
    i = int(np.argmin(sigma2))
    order = float(lam[i])
    sigma = math.sqrt(float(sigma2[i]))

    def achieved(s: float) -> float:
        # the same quantity evaluated in the orders of operations callers use; the largest must fit
        tail = log_inv_delta / (order - 1.0)
        return max(k * order / s**2 + tail, k * (order / s**2) + tail, (k * order) / (s * s) + tail)

    while achieved(sigma) > eps:
        sigma = math.nextafter(sigma, math.inf)
    return GnmaxCalibration(sigma=sigma, order=order, epsilon=achieved(sigma))


# --------------------------------------------------------------------------------------------------
# tighter calibrations of one GNMax answer (module docstring)
# --------------------------------------------------------------------------------------------------

#: Calibration methods, loosest first; ``rdp`` is the DaRRM paper's.
GNMAX_METHODS = ("rdp", "rdp-improved", "analytic-gaussian", "exact-one-bit")


def gnmax_gamma(K: int, sigma: float) -> np.ndarray:
    """Two-class GNMax as a DaRRM noise function: γ_GNMax(l) = 2Φ(|2l − K|/(√2σ)) − 1 = erf(|2l − K|/(2σ)).

    GNMax outputs class 1 iff N₁ − N₂ > K − 2L with N₁ − N₂ ~ N(0, 2σ²), so it outputs the majority with
    probability Φ(|2l − K|/(√2σ)) = ½ + ½ γ(l), DaRRM's probability (Alg. 1).
    """
    sigma = _positive("sigma", sigma)
    l = np.arange(int(K) + 1, dtype=np.float64)
    return special.erf(np.abs(2.0 * l - K) / (2.0 * sigma))


def _smallest_sigma(ok: Callable[[float], bool], start: float) -> float:
    """The smallest σ (to relative 1e-13) with ``ok(σ)``, for a monotone ``ok`` (False below, True above): a
    bracket walked from ``start`` by doublings (up to 10¹²) then halvings (down to 10⁻¹²), bisected
    (:mod:`darrm_opt.privacy.calibrate`)."""
    from darrm_opt.privacy.calibrate import arithmetic, bisect, reach, walk

    hi = reach(lambda s: s > 1e12 or ok(s), start, lambda s, _: s * 2.0)
    if hi > 1e12:
        raise InvalidParameter("target_epsilon", "no GNMax noise level meets this (ε, δ)", start)
    good, bad = walk(lambda s: not ok(s), hi, lambda s, _: s / 2.0, end=lambda s, i: i > 0 and s <= 1e-12)
    if bad is None:
        return good
    return bisect(ok, good, bad, arithmetic, done=lambda g, b: g - b <= 1e-13 * g)[0]


def calibrate_gnmax_rdp_improved(target_epsilon: float, target_delta: float,
                                 orders: object = DEFAULT_ORDERS) -> GnmaxCalibration:
    """Smallest σ with one GNMax answer (λ/σ²-RDP, Prop. 8) (ε, δ)-DP by the improved conversion
    ε = min_λ λ/σ² + log(1 − 1/λ) − (log δ + log λ)/(λ − 1) (``dp_accounting.rdp.compute_epsilon``)."""
    from dp_accounting.rdp import compute_epsilon

    eps = _positive("target_epsilon", target_epsilon)
    delta = _delta(target_delta)
    lam = np.atleast_1d(_orders(orders, "orders")).ravel()

    def achieved(s: float) -> tuple[float, float]:
        e, order = compute_epsilon(lam, lam / s**2, delta)
        return float(e), float(order)

    sigma = _smallest_sigma(lambda s: achieved(s)[0] <= eps, 1.0)
    e, order = achieved(sigma)
    return GnmaxCalibration(sigma=sigma, order=order, epsilon=e, method="rdp-improved")


def gaussian_delta(epsilon: float, sigma: float, sensitivity: float = math.sqrt(2.0)) -> float:
    """Balle & Wang (2018) Thm. 8: the exact δ(ε) of the Gaussian mechanism with this L2 sensitivity."""
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return float(special.ndtr(a - b) - math.exp(epsilon) * special.ndtr(-a - b))


def gaussian_delta_mp(epsilon: float, sigma: float, sensitivity: float = math.sqrt(2.0)) -> Any:
    """:func:`gaussian_delta` in 50-digit arithmetic (an ``mpmath.mpf``)."""
    import mpmath

    with mpmath.workdps(50):
        s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.sqrt(2) if sensitivity == math.sqrt(2.0) \
            else mpmath.mpf(sensitivity)
        a, b = d / (2 * s), e * s / d
        return mpmath.ncdf(a - b) - mpmath.exp(e) * mpmath.ncdf(-a - b)


def calibrate_gaussian_sigma(epsilon: float, delta: float) -> float | None:
    """The smallest σ (to float resolution) for which GNMax's Gaussian release is (ε, δ)-DP exactly; None
    for δ = 0 (no Gaussian mechanism is pure DP). GNMax's one σ calibration at a per-answer (ε, δ): a
    bracket [10⁻⁶, σ_hi] (σ_hi doubled from 1 until δ(ε) ≤ δ), 200 bisection steps on the float δ(ε) of
    Balle & Wang (2018) Thm. 8, then σ raised until its 50-digit δ(ε) is within δ."""
    if delta <= 0:
        return None
    from darrm_opt.privacy.calibrate import arithmetic, bisect, reach

    def ok(s: float) -> bool:
        return gaussian_delta(epsilon, s) <= delta

    import mpmath

    sigma, _ = bisect(ok, reach(ok, 1.0, lambda s, _: s * 2.0), 1e-6, arithmetic, done=200)
    while gaussian_delta_mp(epsilon, sigma) > mpmath.mpf(delta):
        sigma = math.nextafter(sigma, math.inf) * (1 + 1e-12)
    return sigma


def gnmax_sigma_over_answers(queries: int, epsilon: float, delta: float) -> float:
    """The smallest σ for which Q GNMax answers are (ε, δ)-DP together: Q Gaussian mechanisms
    h ↦ h + N(0, σ²I) of L2 sensitivity √2 compose exactly into one of sensitivity √(2Q) (Dong, Roth & Su
    2022, Cor. 3.3), i.e. one of sensitivity √2 at noise σ/√Q, so σ = √Q·σ₁(ε, δ) with σ₁ GNMax's one σ
    calibration (:func:`calibrate_gaussian_sigma`), the product rounded upwards. InvalidParameter naming
    ``delta`` for δ = 0 (no Gaussian mechanism is pure DP)."""
    sigma1 = calibrate_gaussian_sigma(epsilon, delta)
    if sigma1 is None:
        raise InvalidParameter("delta", "must be > 0 for GNMax (no Gaussian mechanism is pure DP)", delta)
    return math.sqrt(queries) * sigma1 * (1.0 + 1e-12)


def calibrate_gnmax_analytic(target_epsilon: float, target_delta: float) -> GnmaxCalibration:
    """Smallest σ with one GNMax answer (ε, δ)-DP as a Gaussian mechanism of L2 sensitivity √2 (changing
    one vote moves two counts by one), by the analytic Gaussian mechanism (Balle & Wang 2018, Thm. 8):
    δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ), Δ = √2: GNMax's one σ calibration
    (:func:`calibrate_gaussian_sigma`, exact in 50 digits), nudged up
    until dp_accounting's ε at σ (``get_epsilon_gaussian``) is within the target too."""
    from dp_accounting import get_epsilon_gaussian

    eps = _positive("target_epsilon", target_epsilon)
    delta = _delta(target_delta)
    found = calibrate_gaussian_sigma(eps, delta)
    if found is None:
        raise InvalidParameter("target_delta", "must be > 0 for a Gaussian mechanism", target_delta)
    sigma = found
    while float(get_epsilon_gaussian(sigma / math.sqrt(2.0), delta)) > eps:
        sigma *= 1.0 + 1e-12
    return GnmaxCalibration(sigma=sigma, order=None, epsilon=float(get_epsilon_gaussian(sigma / math.sqrt(2.0),
                                                                                          delta)),
                            method="analytic-gaussian")


def _one_bit_exact_ok(K: int, sigma: float, epsilon: float, delta: float) -> bool:
    """Every pair (l, l ± 1) and output of the released bit meets (ε, δ), in 40-digit arithmetic:
    Pr[1 | l] = Φ((2l − K)/(√2σ)) = ½ erfc(−(2l − K)/(2σ))."""
    import mpmath

    with mpmath.workdps(40):
        s, E, d = mpmath.mpf(sigma), mpmath.exp(mpmath.mpf(epsilon)), mpmath.mpf(delta)
        p1 = [mpmath.erfc(-(2 * l - K) / (2 * s)) / 2 for l in range(K + 1)]
        for l in range(K + 1):
            for lp in (l - 1, l + 1):
                if 0 <= lp <= K and (p1[l] > E * p1[lp] + d or 1 - p1[l] > E * (1 - p1[lp]) + d):
                    return False
    return True


def calibrate_gnmax_one_bit(target_epsilon: float, target_delta: float, K: int) -> GnmaxCalibration:
    """Smallest σ with the one bit that two-class GNMax releases (ε, δ)-DP for K non-private teachers on
    disjoint shards (neighbours: L → L ± 1), exactly: the float search uses
    :func:`darrm_opt.model.neighbours.pate_delta` of :func:`gnmax_gamma`, and σ is then raised until every
    pair and output passes in 40-digit arithmetic. Works for δ = 0 too (L is bounded)."""
    from darrm_opt.model.neighbours import PateParams, pate_delta

    p = PateParams(K=K, epsilon=target_epsilon, delta=target_delta)
    sigma = _smallest_sigma(lambda s: pate_delta(gnmax_gamma(p.K, s), p.epsilon) <= p.delta, 1.0)
    while not _one_bit_exact_ok(p.K, sigma, p.epsilon, p.delta):
        sigma *= 1.0 + 1e-12
    return GnmaxCalibration(sigma=sigma, order=None, epsilon=p.epsilon, method="exact-one-bit")


def calibrate_gnmax(target_epsilon: float, target_delta: float, method: str = "exact-one-bit",
                    K: int | None = None) -> GnmaxCalibration:
    """One GNMax answer calibrated to (ε, δ) by ``method`` (:data:`GNMAX_METHODS`; ``exact-one-bit`` needs K)."""
    if method == "rdp":
        return calibrate_gnmax_sigma(target_epsilon, target_delta, 1)
    if method == "rdp-improved":
        return calibrate_gnmax_rdp_improved(target_epsilon, target_delta)
    if method == "analytic-gaussian":
        return calibrate_gnmax_analytic(target_epsilon, target_delta)
    if method == "exact-one-bit":
        if K is None:
            raise InvalidParameter("K", "the exact one-bit calibration needs the number of teachers")
        return calibrate_gnmax_one_bit(target_epsilon, target_delta, K)
    raise InvalidParameter("method", f"must be one of {', '.join(GNMAX_METHODS)}", method)
