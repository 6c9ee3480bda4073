"""Multi-class DaRRM against GNMax at the same per-answer (ε, δ), PATE setting (disjoint teachers).

GNMax's σ at an exact per-answer (ε, δ) is :func:`darrm_opt.privacy.gnmax_continuous.calibrate_gaussian_sigma`
(the exact privacy curve of the Gaussian mechanism it post-processes; its module docstring gives the formula).

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

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import special

from darrm_opt.model.multiclass import MulticlassPrior, normaliser
from darrm_opt.privacy.gnmax_continuous import (  # noqa: F401  (moved below the release layer; re-exported)
    GH_NODES,
    calibrate_gaussian_sigma,
    gaussian_delta,
    gaussian_delta_mp,
    gnmax_error,
    rdp_sigma,
)


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
