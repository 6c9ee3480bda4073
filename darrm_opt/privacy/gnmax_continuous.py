"""GNMax with continuous Gaussian noise at an exact per-answer (ε, δ): the figures ``solve --classes`` prints
beside a multi-class DaRRM table (and its table file stores, so that ``verify`` recomputes them).

GNMax releases argmax_c (h_c + N(0, σ²)) (PATE Sec. 4.1). It is post-processing of the Gaussian
mechanism h ↦ h + N(0, σ² I), whose L2 sensitivity is √2 when one vote moves, so the exact privacy curve
of that Gaussian mechanism (Balle & Wang 2018, Thm. 8),

    δ(ε) = Φ(−εσ/√2 + 1/(√2σ)) − e^ε Φ(−εσ/√2 − 1/(√2σ)),

is a valid (ε, δ) for GNMax; σ is calibrated exactly on it (bisection, then a 50-digit check that the
returned σ meets δ, nudged upwards otherwise). It is never larger than the RDP calibration of PATE's
Prop. 8 + Thm. 5 (:func:`darrm_opt.privacy.gnmax.calibrate_gnmax_sigma`), reported alongside. GNMax's
expected error under a product-form prior is :func:`gnmax_error` (:mod:`darrm_opt.experiments.multiclass_compare`
derives it and its accuracy).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy import special

from darrm_opt.errors import DarrmError
from darrm_opt.model.multiclass import MulticlassPrior, normaliser
from darrm_opt.privacy.gnmax import calibrate_gaussian_sigma, gaussian_delta, gaussian_delta_mp

__all__ = ["calibrate_gaussian_sigma", "gaussian_delta", "gaussian_delta_mp", "gnmax_error", "rdp_sigma"]

#: Gauss–Hermite nodes for GNMax's accuracy integral.
GH_NODES = 120


def rdp_sigma(epsilon: float, delta: float) -> float | None:
    """PATE's RDP calibration (Prop. 8 + Thm. 5), or None where it has none."""
    if delta <= 0:
        return None
    from darrm_opt.privacy.gnmax import calibrate_gnmax_sigma

    try:
        return calibrate_gnmax_sigma(epsilon, delta, 1).sigma
    except DarrmError:
        return None


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
