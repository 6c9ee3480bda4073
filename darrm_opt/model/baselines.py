"""Baseline noise functions the paper compares γ_opt with.

- γ_Sub (Lemma 3.1, App. A.2 eqs. 29–30), integer m: outputting the majority of m teachers drawn without
  replacement equals DaRRM with, for l ≤ (K−1)/2,

      γ_Sub(l) = 1 − 2 Σ_{j=(m+1)/2}^{m} C(l, j) C(K−l, m−j) / C(K, m)                   (m odd)
      γ_Sub(l) = 1 − 2 Σ_{j=m/2+1}^{m} C(l, j) C(K−l, m−j) / C(K, m) − C(l, m/2) C(K−l, m/2) / C(K, m)
                                                                                         (m even)

  and γ_Sub(l) = γ_Sub(K − l). It is (mε, 1 − (1 − Δ)^m)-DP by composition.
- γ_DSub (Thm 4.1, Lemma B.10), pure DP (Δ = δ = 0), integer m: γ ≡ 1 if m ≥ (K+1)/2, else γ_Sub with
  2m − 1 draws. It is mε-DP.
- γ_const (Lemma A.1, eq. 16): randomized response with constant probability
      p_const = (e^{mε} − 1 + 2δ) / (2(e^{τε} − e^{mε} + (1 + e^{mε})λ)/(e^{τε} + 1) + e^{mε} − 1),
  clipped to [0, 1], where the plain majority of the K teachers is (τε, λ)-DP. Simple composition (Thm 2.2)
  gives (τ, λ) = (K, 1 − (1 − Δ)^K); the paper's Figure 2 setting writes λ = 0, which is right only for
  Δ = 0 (for Δ > 0 it overstates p_const and the table fails certification). General composition
  (App. D.1.1, Thm 2.3 with δ′) gives the other (τ, λ).
  Eq. 16 follows from the corner ((A+λ)/(1+A), (1−λ)/(1+A)), A = e^{τε}, of the (τε, λ)-DP region, the
  worst pair for Pr[out = 1] ≤ e^{mε} Pr′[out = 1] + δ when τ ≥ m.
- γ_const_opt (the best certified constant): for γ ≡ c the privacy cost of Lemma 3.4 is
  f(p, p′; c) = c · f(p, p′; 1), so the largest certified constant is
      c* = min(1, (e^{mε} − 1 + 2δ) / max_{p, p′} f(p, p′; γ ≡ 1)),
  the maximum taken by the exhaustive corner sweep (:func:`darrm_opt.release.table_file.baseline_tables`
  computes it and certifies the result). K = 11, m = 3, ε = 0.1, Δ = 10⁻⁵: c* = 0.87202.

All values are computed in exact rational arithmetic where the formula is rational.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.composition import compose_delta, general_epsilon
from darrm_opt.model.params import Params


def _subsample_majority_prob(K: int, l: int, draws: int) -> Fraction:
    """Pr[majority of ``draws`` teachers drawn without replacement votes 1 | L = l] (ties count ½)."""
    total = math.comb(K, draws)
    win = Fraction(0)
    for j in range(draws + 1):
        ways = math.comb(l, j) * math.comb(K - l, draws - j)
        if 2 * j > draws:
            win += Fraction(ways, total)
        elif 2 * j == draws:
            win += Fraction(ways, 2 * total)
    return win


def gamma_sub(K: int, m: float) -> np.ndarray:
    """γ_Sub (Lemma 3.1) for integer 1 ≤ m ≤ K; see the module docstring."""
    if float(m) != int(m) or not (1 <= m <= K):
        raise InvalidParameter("m", f"γ_Sub needs an integer 1 <= m <= K (K = {K})", m)
    m = int(m)
    half = (K + 1) // 2
    low = [1 - 2 * _subsample_majority_prob(K, l, m) for l in range(half)]
    g = np.empty(K + 1)
    for l in range(half):
        g[l] = g[K - l] = float(low[l])
    return g


def gamma_dsub(K: int, m: float) -> np.ndarray:
    """γ_DSub (Thm 4.1) for integer m: all ones if m ≥ (K+1)/2, else γ_Sub with 2m − 1 draws."""
    if float(m) != int(m) or not (1 <= m <= K):
        raise InvalidParameter("m", f"γ_DSub needs an integer 1 <= m <= K (K = {K})", m)
    m = int(m)
    if m >= (K + 1) // 2:
        return np.ones(K + 1)
    return gamma_sub(K, 2 * m - 1)


def const_probability(params: Params, tau: float, lam: float) -> float:
    """p_const of Lemma A.1 (eq. 16) for a majority that is (τε, λ)-DP, clipped to [0, 1]."""
    eps, m, d = params.epsilon, params.m, float(params.delta)  # type: ignore[arg-type]
    Em = math.exp(m * eps)
    Et = math.exp(tau * eps)
    denom = 2 * (Et - Em + (1 + Em) * lam) / (Et + 1) + Em - 1
    if denom <= 0:
        return 1.0
    return min(1.0, max(0.0, (Em - 1 + 2 * d) / denom))


def const_parameters(params: Params, composition: str = "simple", delta_prime: float = 0.1):
    """(τ, λ) for γ_const: (K, 1 − (1 − Δ)^K) by simple composition (Thm 2.2), or by Thm 2.3 with δ′
    (App. D.1.1). The paper's simple setting takes λ = 0, exact only for Δ = 0."""
    if composition == "simple":
        return float(params.K), compose_delta(params.teacher_delta, params.K)
    if composition == "general":
        tau = general_epsilon(params.epsilon, params.K, delta_prime) / params.epsilon
        lam = 1 - (1 - compose_delta(params.teacher_delta, params.K)) * (1 - delta_prime)
        return tau, lam
    raise InvalidParameter("composition", "must be 'simple' or 'general'", composition)


def gamma_const(params: Params, composition: str = "simple", delta_prime: float = 0.1) -> np.ndarray:
    """Constant γ ≡ p_const (Lemma A.1)."""
    tau, lam = const_parameters(params, composition, delta_prime)
    return np.full(params.K + 1, const_probability(params, tau, lam))


def const_opt_value(bound: float, max_cost_of_ones: float) -> float:
    """c* = min(1, bound / max f(γ ≡ 1)) (module docstring): f is linear in γ, so γ ≡ c costs c·f(γ ≡ 1)."""
    if not (math.isfinite(bound) and bound > 0):
        raise InvalidParameter("bound", "must be a finite number > 0", bound)
    if max_cost_of_ones <= bound:
        return 1.0
    return bound / max_cost_of_ones

