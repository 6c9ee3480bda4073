"""Smooth sensitivity and the GNSS release of a data-dependent ε (PATE, App. B; Def. 12, 22, Thm. 23, 24).

References are to Papernot et al., "Scalable private learning with PATE" (ICLR 2018), *PATE* below.

* **smooth sensitivity** (Def. 12, Alg. 5, Thm. 24): given the per-query maxima of the local sensitivity at
  distance ≤ d (:mod:`darrm_opt.privacy.query_costs`) summed over the queries, SS_β = max_d e^{−βd} Σᵢ Aᵢ(d).
* **the GNSS release** (Def. 22, Thm. 23): publish f(D) + SS_β(D)·N(0, σ_SS²); it is
  (λ, λe^{2β}/σ_SS² + (βλ − ½ log(1 − 2λβ))/(λ − 1))-RDP for 1 < λ < 1/(2β). The published ε is
  ε̂ = f(D) + Z·σ_SS·SS_β(D) + ε_GNSS(λ) + log(1/δ)/(λ − 1) (Thm. 5; PATE's Table 2 divides by λ).

What ε̂ means: the data-dependent RDP is a bound for *this* dataset only (its neighbours may have a larger
one); ε̂ is a noisy, differentially private estimate of that bound plus the fixed cost of releasing it,
not a worst-case guarantee (docs/data-dependent.md). The noise itself is drawn by
:func:`darrm_opt.sampling.rounded_gaussian.sample_gnss_noise`.
"""

from __future__ import annotations

import math

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.dd_arguments import order_value, positive_value

__all__ = [
    "CONVERSIONS",
    "smooth_sensitivity",
    "gnss_rdp",
    "dp_tail",
    "sanitised_epsilon",
]


#: RDP → (ε, δ) conversions: PATE's Thm. 5, and the tighter one of Canonne, Kamath & Steinke (2020, Prop. 12)
CONVERSIONS = ("thm5", "improved")


def smooth_sensitivity(reach_sum: object, beta: float) -> float:
    """Alg. 5 with Thm. 24: SS_β = max_d e^{−βd} · Σᵢ Aᵢ(d), given the summed A(d) for d = 0, 1, …"""
    beta = positive_value("beta", beta)
    a = np.asarray(reach_sum, dtype=float)
    if a.ndim != 1 or a.size == 0 or np.any(~np.isfinite(a)) or np.any(a < 0):
        raise InvalidParameter("reach_sum", "must be a non-empty vector of non-negative numbers", reach_sum)
    return float(np.max(a * np.exp(-beta * np.arange(a.size))))


def gnss_rdp(order: float, beta: float, sigma_ss: float) -> float:
    """Thm. 23: the (β, σ)-GNSS mechanism is (λ, λe^{2β}/σ² + (βλ − ½ log(1 − 2λβ))/(λ − 1))-RDP for
    1 < λ < 1/(2β). Example: λ = 14, β = 0.0329, σ = 6.23 → 0.5185 (PATE Table 2: 0.52)."""
    lam = order_value(order)
    beta = positive_value("beta", beta)
    s = positive_value("sigma_ss", sigma_ss)
    if not lam < 1.0 / (2.0 * beta):
        raise InvalidParameter("beta", f"Thm. 23 needs order < 1/(2β) = {1 / (2 * beta):.6g}", beta)
    return lam * math.exp(2.0 * beta) / s**2 + (beta * lam - 0.5 * math.log1p(-2.0 * lam * beta)) / (lam - 1.0)


def dp_tail(order: float, delta: float, conversion: str = "thm5") -> float:
    """What (λ, ε_RDP)-RDP adds to reach (ε, δ)-DP: ``thm5`` (PATE Thm. 5) log(1/δ)/(λ − 1); ``improved``
    (Canonne, Kamath & Steinke 2020, Prop. 12; ``dp_accounting.rdp.compute_epsilon``)
    log(1 − 1/λ) − (log δ + log λ)/(λ − 1)."""
    lam = order_value(order)
    d = float(delta) if isinstance(delta, (int, float)) and not isinstance(delta, bool) else math.nan
    if not 0.0 < d < 1.0:
        raise InvalidParameter("delta", "must satisfy 0 < delta < 1", delta)
    if conversion == "thm5":
        return math.log(1.0 / d) / (lam - 1.0)
    if conversion == "improved":
        return math.log1p(-1.0 / lam) - (math.log(d) + math.log(lam)) / (lam - 1.0)
    raise InvalidParameter("conversion", f"must be one of {', '.join(CONVERSIONS)}", conversion)


def sanitised_epsilon(rdp: float, ss: float, z: float, order: float, beta: float, sigma_ss: float,
                      delta: float, conversion: str = "thm5") -> float:
    """The published ε (Thm. 23 + the conversion): rdp + z·σ_SS·SS + ε_GNSS(λ) + :func:`dp_tail`, z ~ N(0, 1)."""
    return rdp + z * sigma_ss * ss + gnss_rdp(order, beta, sigma_ss) + dp_tail(order, delta, conversion)
