"""Composition of differential privacy guarantees (Sec. 2 of the DaRRM paper).

- Simple composition (Thm 2.2): k mechanisms, each (ε, δ)-DP, compose to (kε, 1 − (1 − δ)^k)-DP. The δ
  term is the i = 0 case of the optimal composition theorem (Kairouz, Oh, Viswanath 2015, Thm 3.3) and
  is never larger than the textbook kδ.
- General composition (Thm 2.3 = Thm 3.4 of Kairouz et al. 2015): for δ′ ∈ (0, 1],

      ε′ = min{ kε,
                (e^ε − 1) ε k / (e^ε + 1) + ε √(2k log(e + √(k ε²) / δ′)),
                (e^ε − 1) ε k / (e^ε + 1) + ε √(2k log(1/δ′)) },
      δ_total = 1 − (1 − δ)^k (1 − δ′).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from darrm_opt.errors import InvalidParameter


@dataclass(frozen=True)
class Guarantee:
    """An (ε, δ)-DP guarantee and the rule that produced it."""

    epsilon: float
    delta: float
    method: str

    def to_dict(self) -> dict:
        return {"epsilon": self.epsilon, "delta": self.delta, "method": self.method}


def _check(epsilon: float, delta: float, k: float) -> None:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise InvalidParameter("epsilon", "must be > 0", epsilon)
    if not (0 <= delta < 1):
        raise InvalidParameter("delta", "must satisfy 0 <= delta < 1", delta)
    if not (k >= 1):
        raise InvalidParameter("k", "must be >= 1", k)


def compose_delta(delta: float, k: float) -> float:
    """1 − (1 − δ)^k, computed without cancellation."""
    return -math.expm1(k * math.log1p(-delta))


def simple_composition(epsilon: float, delta: float, k: int) -> Guarantee:
    """Thm 2.2: (kε, 1 − (1 − δ)^k)."""
    _check(epsilon, delta, k)
    return Guarantee(k * epsilon, compose_delta(delta, k), "simple")


def general_epsilon(epsilon: float, k: float, delta_prime: float) -> float:
    """ε′ of Thm 2.3 (see the module docstring)."""
    if not (0 < delta_prime <= 1):
        raise InvalidParameter("delta_prime", "must satisfy 0 < delta_prime <= 1", delta_prime)
    e = math.exp(epsilon)
    drift = (e - 1) * epsilon * k / (e + 1)
    a = drift + epsilon * math.sqrt(2 * k * math.log(math.e + math.sqrt(k * epsilon**2) / delta_prime))
    b = drift + epsilon * math.sqrt(2 * k * math.log(1 / delta_prime))
    return min(k * epsilon, a, b)


def general_composition(epsilon: float, delta: float, k: int, delta_prime: float) -> Guarantee:
    """Thm 2.3: (ε′, 1 − (1 − δ)^k (1 − δ′))."""
    _check(epsilon, delta, k)
    eps = general_epsilon(epsilon, k, delta_prime)
    total_delta = -math.expm1(k * math.log1p(-delta) + math.log1p(-delta_prime))
    return Guarantee(eps, total_delta, "general")


def allowance_from_subsampling(epsilon: float, teacher_delta: float, M: int, delta_prime: float):
    """App. D.1.1: the majority of M subsampled (ε, Δ) mechanisms is (mε, δ)-DP with
    m = ε′/ε and δ = 1 − (1 − Δ)^M (1 − δ′) from Thm 2.3 (the paper's Table 3)."""
    g = general_composition(epsilon, teacher_delta, M, delta_prime)
    return g.epsilon / epsilon, g.delta
