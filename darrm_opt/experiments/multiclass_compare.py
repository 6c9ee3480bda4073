"""Multi-class DaRRM against GNMax at the same per-answer (ε, δ), PATE setting (disjoint teachers).

GNMax releases argmax_c (h_c + N(0, σ²)) (PATE Sec. 4.1). It is post-processing of the Gaussian
mechanism h ↦ h + N(0, σ² I), whose L2 sensitivity is √2 when one vote moves, so the exact privacy curve
of that Gaussian mechanism (Balle & Wang 2018, Thm. 8),

    δ(ε) = Φ(−εσ/√2 + 1/(√2σ)) − e^ε Φ(−εσ/√2 − 1/(√2σ)),

is a valid (ε, δ) for GNMax; σ is calibrated exactly on it (bisection, then a 50-digit check that the
returned σ meets δ, nudged upwards otherwise). It is never larger than the RDP calibration of PATE's
Prop. 8 + Thm. 5 (:func:`darrm_opt.privacy.gnmax.calibrate_gnmax_sigma`), reported alongside.

GNMax's expected accuracy under a product-form prior (Pr[h] ∝ Y(h_y) Π_{c≠y} R(h_c)) is

    E[acc] = Σ_a Y(a)/Z ∫ φ(z) [(R(x) Φ((a − x)/σ + z))^{*(C−1)}](K − a) dz

(condition on the true class's count a and its noise z; the other classes are independent given both),
evaluated with Gauss–Hermite quadrature in z and an FFT convolution power per a.

Confident-GNMax (PATE Alg. 1) is compared per answer with ⊥ replaced by a uniformly random class (so
every query gets a label, as with DaRRM); its threshold check and answer compose exactly as one Gaussian
mechanism (Gaussian DP), so it gets the same budget as GNMax split between the two (see
:func:`best_confident_gnmax`). Its exact accuracy is in :func:`confident_terms`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath
import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import special

from darrm_opt.errors import DarrmError
from darrm_opt.model.multiclass import MulticlassPrior, normaliser

#: Gauss–Hermite nodes for GNMax's accuracy integral.
GH_NODES = 120


def gaussian_delta(epsilon: float, sigma: float, sensitivity: float = math.sqrt(2.0)) -> float:
    """Balle & Wang (2018) Thm. 8: the exact δ(ε) of the Gaussian mechanism with this L2 sensitivity."""
    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return float(special.ndtr(a - b) - math.exp(epsilon) * special.ndtr(-a - b))


def gaussian_delta_mp(epsilon: float, sigma: float, sensitivity: float = math.sqrt(2.0)) -> mpmath.mpf:
    with mpmath.workdps(50):
        s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.sqrt(2) if sensitivity == math.sqrt(2.0) \
            else mpmath.mpf(sensitivity)
        a, b = d / (2 * s), e * s / d
        return mpmath.ncdf(a - b) - mpmath.exp(e) * mpmath.ncdf(-a - b)


def calibrate_gaussian_sigma(epsilon: float, delta: float) -> float | None:
    """The smallest σ (to float resolution) for which GNMax's Gaussian release is (ε, δ)-DP exactly; None
    for δ = 0 (no Gaussian mechanism is pure DP)."""
    if delta <= 0:
        return None
    lo, hi = 1e-6, 1.0
    while gaussian_delta(epsilon, hi) > delta:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_delta(epsilon, mid) > delta:
            lo = mid
        else:
            hi = mid
    sigma = hi
    while gaussian_delta_mp(epsilon, sigma) > mpmath.mpf(delta):
        sigma = math.nextafter(sigma, math.inf) * (1 + 1e-12)
    return sigma


def rdp_sigma(epsilon: float, delta: float) -> float | None:
    """PATE's RDP calibration (Prop. 8 + Thm. 5), or None where it has none."""
    if delta <= 0:
        return None
    from darrm_opt.privacy.gnmax import calibrate_gnmax_sigma

    try:
        return calibrate_gnmax_sigma(epsilon, delta, 1).sigma
    except DarrmError:
        return None


def gnmax_accuracy(K: int, C: int, sigma: float, prior: MulticlassPrior) -> float:
    """GNMax's exact expected accuracy (module docstring), quadrature in the true class's noise."""
    Y, R = prior.count_pmfs(K, C)
    z, wz = hermegauss(GH_NODES)
    wz = wz / math.sqrt(2 * math.pi)
    Zn = normaliser(Y, R, K, C)
    total = 0.0
    for a in range(K + 1):
        if Y[a] == 0.0:
            continue
        n = K - a
        x = np.arange(n + 1)
        f = R[: n + 1] * special.ndtr((a - x)[None, :] / sigma + z[:, None])
        N = 1 << max(1, int(math.ceil(math.log2((C - 1) * n + 1))))
        coef = np.fft.irfft(np.fft.rfft(f, N, axis=1) ** (C - 1), N, axis=1)[:, n]
        total += Y[a] * float(wz @ coef)
    return total / Zn


def gnmax_error(K: int, C: int, sigma: float, prior: MulticlassPrior) -> float:
    """GNMax's expected error (C − 1)·Pr[GNMax = a given wrong class], without the 1 − accuracy
    cancellation (the FFT powers are precise to ~1e-17 absolute):
    condition on that class's count b and noise z; the true class contributes Y(x)Φ((b − x)/σ + z) and the
    C − 2 others R(x)Φ((b − x)/σ + z)."""
    Y, R = prior.count_pmfs(K, C)
    z, wz = hermegauss(GH_NODES)
    wz = wz / math.sqrt(2 * math.pi)
    total = 0.0
    for b in range(K + 1):
        if R[b] == 0.0:
            continue
        n = K - b
        x = np.arange(n + 1)
        phi = special.ndtr((b - x)[None, :] / sigma + z[:, None])
        N = 1 << max(1, int(math.ceil(math.log2((C - 1) * n + 1))))
        spec = np.fft.rfft(Y[: n + 1] * phi, N, axis=1) * np.fft.rfft(R[: n + 1] * phi, N, axis=1) ** (C - 2)
        total += R[b] * float(wz @ np.fft.irfft(spec, N, axis=1)[:, n])
    return (C - 1) * total / normaliser(Y, R, K, C)


def _max_law(K: int, C: int, Y: np.ndarray, R: np.ndarray) -> np.ndarray:
    """Pr[max_c h_c = m] · Z for m = 0..K: differences of [Y_{≤m} * R_{≤m}^{*(C−1)}](K)."""
    N = 1 << max(1, int(math.ceil(math.log2(C * K + 1))))
    caps = np.arange(K + 1)[:, None] >= np.arange(K + 1)[None, :]
    le = np.fft.irfft(np.fft.rfft(Y * caps, N, axis=1) * np.fft.rfft(R * caps, N, axis=1) ** (C - 1), N,
                      axis=1)[:, K]
    return np.diff(le, prepend=0.0)


def confident_terms(K: int, C: int, sigma2: float, prior: MulticlassPrior) -> tuple[np.ndarray, np.ndarray]:
    """For Confident-GNMax with answer noise σ₂: (c_m, p_m) for m = 0..K with
    c_m = E[1{max h = m} Pr(GNMax_σ₂(h) = y)] and p_m = Pr[max h = m], so that with threshold noise σ₁ and
    threshold T (⊥ replaced by a uniformly random class)

        E[acc] = 1/C + Σ_m Φ((m − T)/σ₁) (c_m − p_m/C).

    c_m integrates over the noisy count u = a + σ₂z of the true class (trapezoid rule, step σ₂/4, which is
    spectrally accurate for these Gaussian-smooth integrands): given u the other classes are independent
    with weights R(x) Φ((u − x)/σ₂), and the (C−1)-fold convolution over every cap m gives the law of the max."""
    Y, R = prior.count_pmfs(K, C)
    Z = normaliser(Y, R, K, C)
    N = 1 << max(1, int(math.ceil(math.log2((C - 1) * K + 1))))
    caps = np.arange(K + 1)[:, None] >= np.arange(K + 1)[None, :]  # [m, x]: x ≤ m
    a = np.arange(K + 1)
    step = sigma2 / 4.0
    us = np.arange(-9.0 * sigma2, K + 9.0 * sigma2 + step, step)
    c = np.zeros(K + 1)
    for u in us:
        g = R * special.ndtr((u - a) / sigma2)
        F = np.fft.irfft(np.fft.rfft(g * caps, N, axis=1) ** (C - 1), N, axis=1)[:, : K + 1]
        Fa = F[:, K - a]  # [m, a] = F_m(K − a)
        D = np.diff(Fa, axis=0, prepend=0.0)  # max of the others = m exactly
        D[a, a] = Fa[a, a]  # max(a, others) = a: every others ≤ a
        D[np.arange(K + 1)[:, None] < a[None, :]] = 0.0
        wa = Y * np.exp(-0.5 * ((u - a) / sigma2) ** 2) / (sigma2 * math.sqrt(2 * math.pi)) * step
        c += D @ wa
    return c / Z, _max_law(K, C, Y, R) / Z


@dataclass(frozen=True)
class ConfidentChoice:
    """The best Confident-GNMax found on a grid at a fixed total budget μ² = 1/σ₁² + 2/σ₂²."""

    accuracy: float
    sigma1: float
    sigma2: float
    threshold: float


def best_confident_gnmax(K: int, C: int, sigma_gnmax: float, prior: MulticlassPrior,
                         splits=(0.05, 0.2, 0.5)) -> ConfidentChoice:
    """Confident-GNMax (PATE Alg. 1, ⊥ answered by a uniformly random class) at the privacy of GNMax with
    σ = ``sigma_gnmax``: the threshold check (sensitivity 1, noise σ₁) and the answer (sensitivity √2,
    noise σ₂) compose exactly as one Gaussian mechanism with 1/σ₁² + 2/σ₂² = 2/σ² (Gaussian DP, Dong, Roth
    & Su 2022, Cor. 3.3), so a split ρ gives σ₂ = σ/√(1−ρ), σ₁ = σ/√(2ρ). The best (ρ, T) on a grid is
    chosen under the prior (a public choice)."""
    best = ConfidentChoice(-1.0, math.inf, math.inf, 0.0)
    for rho in splits:
        s2, s1 = sigma_gnmax / math.sqrt(1 - rho), sigma_gnmax / math.sqrt(2 * rho)
        cm, pm = confident_terms(K, C, s2, prior)
        m = np.arange(K + 1)
        for T in np.linspace(-4 * s1, K + 4 * s1, 400):
            acc = 1.0 / C + float(special.ndtr((m - T) / s1) @ (cm - pm / C))
            if acc > best.accuracy:
                best = ConfidentChoice(acc, s1, s2, float(T))
    return best
