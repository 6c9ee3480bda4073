"""The privacy profile of a Gaussian release: the dominating pair of additive Gaussian noise.

A release that adds noise N(0, σ²I) (or the discrete Gaussian N_ℤ(0, σ²) independently per coordinate) to a
statistic whose value moves between neighbouring datasets by at most the vector ``shifts`` (the worst pair:
a histogram when one teacher changes its vote from class a to class b moves by e_a − e_b, shifts (1, 1); a
mean of K clipped vectors moves by 2R/K in L2) is post-processing of that Gaussian mechanism, so it is
dominated by the pair (N(0, σ²I), N(shifts, σ²I)) (Zhu, Dong, Wang 2022, Thm 10 for its composition).

Continuous noise: with μ = ‖shifts‖₂ / σ the profile is exact (Balle and Wang 2018, Thm 8):

    δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ).

Discrete noise (Canonne, Kamath, Steinke 2020): the pair is the product over coordinates of
(N_ℤ(0, σ²), N_ℤ(s_i, σ²)) with integer shifts s_i; its PLD is dp_accounting's discrete Gaussian PLD per
coordinate, composed. Both PLDs are built pessimistically by the connect-the-dots discretisation (Doroshenko,
Ghazi, Kamath, Kumar, Manurangsi 2022, Thm 4.2: the discretised pair dominates the original), so δ and ε
read off them are upper bounds. Connect-the-dots matters for composition: the privacy-bucket rounding adds
up to one loss interval per composed PLD (2Q for Q answers of a two-coordinate shift, 0.03 in ε at Q = 1000,
which moves a calibrated σ by 0.3 %); connect-the-dots keeps the composed ε within 1e-6 of the exact value
at the ledger's grid (tests/test_gaussian_profile.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from darrm_opt.errors import InvalidParameter

#: ``type`` of a Gaussian profile's document (a tradeoff profile of a γ table has none)
TYPE = "gaussian"
#: relative margin on the closed-form δ(ε): the float evaluation of Thm 8 is within a few ulps of the exact
#: value, so this margin makes it an upper bound
RELATIVE_MARGIN = 1e-12


@dataclass(frozen=True)
class GaussianProfile:
    """The dominating pair (N(0, σ²I), N(shifts, σ²I)), continuous or discrete (module docstring)."""

    sigma: float
    shifts: tuple[float, ...]
    discrete: bool = True
    #: per-coordinate σ_i (empty: every coordinate has ``sigma``); Confident-GNMax's threshold check has σ₁,
    #: its argmax σ₂
    sigmas: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not (isinstance(self.sigma, (int, float)) and math.isfinite(self.sigma) and self.sigma > 0):
            raise InvalidParameter("sigma", "must be a finite number > 0", self.sigma)
        shifts = tuple(float(s) for s in self.shifts)
        if not shifts or not all(math.isfinite(s) and s >= 0 for s in shifts):
            raise InvalidParameter("shifts", "must be one or more finite numbers >= 0", self.shifts)
        if self.discrete and not all(s == int(s) for s in shifts):
            raise InvalidParameter("shifts", "must be integers for discrete Gaussian noise", self.shifts)
        sigmas = tuple(float(x) for x in self.sigmas)
        if sigmas and (len(sigmas) != len(shifts) or not all(math.isfinite(x) and x > 0 for x in sigmas)):
            raise InvalidParameter("sigmas", "must be one finite σ > 0 per shift", self.sigmas)
        object.__setattr__(self, "sigma", float(self.sigma))
        object.__setattr__(self, "shifts", shifts)
        object.__setattr__(self, "sigmas", sigmas)

    @property
    def coordinate_sigmas(self) -> tuple[float, ...]:
        """σ_i of every coordinate."""
        return self.sigmas or (self.sigma,) * len(self.shifts)

    @property
    def sensitivity(self) -> float:
        """‖shifts‖₂."""
        return math.sqrt(sum(s * s for s in self.shifts))

    @property
    def mu(self) -> float:
        """μ = ‖shifts‖₂ / σ, or (Σ_i (s_i/σ_i)²)^{1/2} with per-coordinate σ_i (the pair is μ-GDP when the
        noise is continuous)."""
        if self.sigmas:
            return math.sqrt(sum((s / x) ** 2 for s, x in zip(self.shifts, self.sigmas)))
        return self.sensitivity / self.sigma

    @property
    def infinite_mass(self) -> float:
        """No output is impossible under one neighbour and possible under the other."""
        return 0.0

    def sort_key(self) -> tuple:
        return (TYPE, self.discrete, self.sigma, self.shifts, self.sigmas)

    def delta(self, epsilon: float) -> float:
        """An upper bound of δ(ε′): Thm 8 (continuous; with a relative margin for its float evaluation) or
        the discrete pair's pessimistic PLD."""
        if not (isinstance(epsilon, (int, float)) and epsilon >= 0 and not math.isnan(epsilon)):
            raise InvalidParameter("epsilon", "must be a number >= 0", epsilon)
        if self.discrete:
            return float(self.to_pld(1e-4).get_delta_for_epsilon(float(epsilon)))
        mu = self.mu
        if mu == 0:
            return 0.0
        if math.isinf(epsilon):
            return 0.0
        from scipy.special import log_ndtr

        a = log_ndtr(mu / 2 - epsilon / mu)
        b = epsilon + log_ndtr(-mu / 2 - epsilon / mu)
        if b >= a:
            return 0.0
        d = math.exp(a) * -math.expm1(b - a)
        return min(1.0, d * (1 + RELATIVE_MARGIN) + 1e-300)

    def to_pld(self, interval: float) -> Any:
        """The pair's PLD (pessimistic, loss interval ``interval``)."""
        from dp_accounting.pld import privacy_loss_distribution as pld_lib

        if not self.discrete:
            if self.sigmas:  # N(0, diag σ_i²) against N(s, ·): the Gaussian pair of μ (whiten each coordinate)
                return pld_lib.from_gaussian_mechanism(
                    1.0, sensitivity=self.mu, pessimistic_estimate=True, value_discretization_interval=interval)
            return pld_lib.from_gaussian_mechanism(
                self.sigma, sensitivity=self.sensitivity, pessimistic_estimate=True,
                value_discretization_interval=interval)
        out = None
        for s, sig in zip(self.shifts, self.coordinate_sigmas):
            if s == 0:
                continue
            one = pld_lib.from_discrete_gaussian_mechanism(
                sig, sensitivity=int(s), pessimistic_estimate=True, value_discretization_interval=interval,
                use_connect_dots=True)
            out = one if out is None else out.compose(one)
        if out is None:  # nothing moves: the identity pair
            return pld_lib.from_gaussian_mechanism(1.0, sensitivity=0.0, value_discretization_interval=interval)
        return out

    def to_dict(self) -> dict[str, Any]:
        out = {"type": TYPE, "sigma": self.sigma, "shifts": list(self.shifts), "discrete": self.discrete,
               "mu": self.mu}
        if self.sigmas:
            out["sigmas"] = list(self.sigmas)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> GaussianProfile:
        if not isinstance(data, dict) or data.get("type") != TYPE:
            raise InvalidParameter("privacy_profile", f"must be an object with type {TYPE!r}")
        try:
            shifts = tuple(float(s) for s in data["shifts"])
            sigmas = tuple(float(x) for x in data.get("sigmas") or ())
            prof = cls(float(data["sigma"]), shifts, bool(data.get("discrete", True)), sigmas)
        except (KeyError, TypeError, ValueError):
            raise InvalidParameter("privacy_profile", "a Gaussian profile needs sigma and shifts") from None
        return prof
