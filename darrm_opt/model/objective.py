"""The exact LP objective (App. C.1–C.2) and the error of DaRRM (Def. 2.4).

The paper estimates E_p[α_l − α_{K−l}] by Monte Carlo over p_i i.i.d. Uniform[0.5, 1]. α_l is multilinear
in (p_1..p_K), so for independent p_i the expectation is the pmf at the means: for i.i.d. Uniform[a, b] it
is exactly Binomial(K, (a+b)/2) (Binomial(K, 0.75) for the paper's prior). For one p shared by all
teachers, p ~ Uniform[a, b], it is ∫ Binomial(K, p)(l) dp / (b − a) = [I_b(l+1, K−l+1) − I_a(l+1, K−l+1)]
/ ((K+1)(b − a)) with I the regularised incomplete beta function. For one p ~ Beta(A, B) shared by all
teachers it is the beta-binomial pmf C(K, l) B(l + A, K − l + B) / B(A, B). A ``counts`` prior states
E[α_l] = Pr[L = l] itself (:meth:`~darrm_opt.model.params.Prior.count_pmf`).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from darrm_opt.model.params import Prior
from darrm_opt.model.pmf import binomial_pmf


def expected_pmf(K: int, prior: Prior) -> np.ndarray:
    """E_prior[α_l], l = 0..K."""
    if prior.kind in ("paper", "iid-uniform"):
        return binomial_pmf(K, 0.5 * (prior.a + prior.b))
    if prior.kind == "common-uniform":
        l = np.arange(K + 1)
        Ib = special.betainc(l + 1, K - l + 1, prior.b)
        Ia = special.betainc(l + 1, K - l + 1, prior.a)
        return (Ib - Ia) / ((K + 1) * (prior.b - prior.a))
    if prior.kind == "beta":
        from scipy import stats

        return stats.betabinom.pmf(np.arange(K + 1), K, prior.a, prior.b)
    if prior.kind == "counts":
        return prior.count_pmf(K)
    raise ValueError(f"unknown prior kind {prior.kind!r}")


def margin_weights(alpha: np.ndarray) -> np.ndarray:
    """w_j = ½ (α_l − α_{K−l}) for l = (K+1)/2 + j: the weight of γ(l) in Pr[correct] − ½."""
    K = alpha.size - 1
    high = np.arange((K + 1) // 2, K + 1)
    return 0.5 * (alpha[high] - alpha[K - high])


def objective_weights(K: int, prior: Prior) -> np.ndarray:
    """The LP minimises −Σ_j w_j g_j with w from :func:`margin_weights` of the prior's expected pmf."""
    return margin_weights(expected_pmf(K, prior))


def error_from_pmf(gamma: np.ndarray, alpha: np.ndarray) -> float:
    """E(DaRRM_γ) = |½ Σ_{l > K/2} (α_l − α_{K−l}) (1 − γ(l))| (Def. 2.4), γ symmetric."""
    gamma = np.asarray(gamma, dtype=np.float64)
    K = gamma.size - 1
    high = np.arange((K + 1) // 2, K + 1)
    return float(abs(np.sum(margin_weights(alpha) * (1.0 - gamma[high]))))


def expected_error(gamma: np.ndarray, prior: Prior) -> float:
    """E_prior[E(DaRRM_γ)]. Exact: for priors supported on p ≥ ½ every α_l − α_{K−l} (l > K/2) is ≥ 0, so
    the absolute value commutes with the expectation and the error is linear in E[α]. For a ``beta`` prior
    it is Pr[answer ≠ label] − Pr[majority ≠ label] (:class:`~darrm_opt.model.params.Prior`), the same
    linear form."""
    gamma = np.asarray(gamma, dtype=np.float64)
    return error_from_pmf(gamma, expected_pmf(gamma.size - 1, prior))
