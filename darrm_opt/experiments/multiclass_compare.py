"""Multi-class DaRRM against GNMax at the same per-answer (ε, δ), PATE setting (disjoint teachers).

GNMax releases argmax_c (h_c + N(0, σ²)) (PATE Sec. 4.1). It is post-processing of the Gaussian
mechanism h ↦ h + N(0, σ² I), whose L2 sensitivity is √2 when one vote moves, so the exact privacy curve
of that Gaussian mechanism (Balle & Wang 2018, Thm. 8),

    δ(ε) = Φ(−εσ/√2 + 1/(√2σ)) − e^ε Φ(−εσ/√2 − 1/(√2σ)),

is a valid (ε, δ) for GNMax; σ is calibrated exactly on it (bisection, then a 50-digit check that the
returned σ meets δ, nudged upwards otherwise). It is never larger than the RDP calibration of PATE's
Prop. 8 + Thm. 5 (:func:`darrm_opt.privacy.pate.calibrate_gnmax_sigma`), reported alongside.

GNMax's expected accuracy under a product-form prior (Pr[h] ∝ Y(h_y) Π_{c≠y} R(h_c)) is

    E[acc] = Σ_a Y(a)/Z ∫ φ(z) [(R(x) Φ((a − x)/σ + z))^{*(C−1)}](K − a) dz

(condition on the true class's count a and its noise z; the other classes are independent given both),
evaluated with Gauss–Hermite quadrature in z and an FFT convolution power per a.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import mpmath
import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import special

from darrm_opt.errors import DarrmError
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior

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
    from darrm_opt.privacy.pate import calibrate_gnmax_sigma

    try:
        return calibrate_gnmax_sigma(epsilon, delta, 1).sigma
    except DarrmError:
        return None


def gnmax_accuracy(K: int, C: int, sigma: float, prior: MulticlassPrior) -> float:
    """GNMax's exact expected accuracy (module docstring), quadrature in the true class's noise."""
    Y, R = prior.count_pmfs(K, C)
    z, wz = hermegauss(GH_NODES)
    wz = wz / math.sqrt(2 * math.pi)
    from darrm_opt.model.multiclass import normaliser

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


@dataclass(frozen=True)
class MulticlassComparisonRow:
    K: int
    classes: int
    epsilon: float
    delta: float
    prior: str
    darrm_accuracy: float
    gnmax_accuracy: float | None
    gnmax_sigma: float | None
    gnmax_sigma_rdp: float | None
    certified: bool
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def compare_multiclass(params: MulticlassParams, *, solver: str = "highs") -> MulticlassComparisonRow:
    """DaRRM's certified γ_opt against GNMax calibrated to the same per-answer (ε, δ)."""
    from darrm_opt.optimize.multiclass import solve_multiclass

    sol = solve_multiclass(params, solver=solver)
    sigma = calibrate_gaussian_sigma(params.epsilon, params.delta)
    acc = gnmax_accuracy(params.K, params.C, sigma, params.prior) if sigma is not None else None
    return MulticlassComparisonRow(
        K=params.K, classes=params.C, epsilon=params.epsilon, delta=params.delta, prior=params.prior.spec,
        darrm_accuracy=sol.expected_accuracy, gnmax_accuracy=acc, gnmax_sigma=sigma,
        gnmax_sigma_rdp=rdp_sigma(params.epsilon, params.delta), certified=sol.certificate.certified,
        seconds=sol.seconds)
