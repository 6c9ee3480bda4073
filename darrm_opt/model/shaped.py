"""Composition-shaped tables in the binary PATE setting: a target privacy curve and the slopes it is imposed at.

A table optimised at one (ε₀, δ₀) saturates e^{ε₀} on every neighbouring pair, so Q of its answers compose
like Q randomised responses. A *shaped* table instead keeps its whole privacy profile under a target curve
δ_T(ε′) at J slopes ε′_j = j·ε_max/J (j = 1..J):

    δ_γ(ε′_j) ≤ δ_T(ε′_j),   j = 1..J,                                                   (S-1)

and δ_γ(ε′) ≤ δ_T(ε′) in the PATE setting is exactly the pair condition of
:mod:`darrm_opt.model.neighbours` at (ε, δ) = (ε′, δ_T(ε′)), so (S-1) is J pair certificates.

Target family: the privacy curve of a shift by one of a generalized normal noise (density
∝ exp(−|x/α|^β), scale α, shape β ≥ 1; β = 2 is the Gaussian N(0, α²/2), i.e. μ-GDP with μ = √2/α). With
P = law of X and Q = law of X + 1 the privacy loss ℓ(x) = (|x − 1|^β − |x|^β)/α^β is decreasing in x
(the density is log-concave), so {ℓ > ε} = {x < x_ε} with ℓ(x_ε) = ε and

    δ_T(ε) = F(x_ε) − e^ε F(x_ε − 1),   F(x) = ½ Γ(1/β, (|x|/α)^β)/Γ(1/β) for x < 0.               (S-2)

(For β = 2 this is Balle–Wang's δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).) A lighter tail (β > 2) pays
less where the answer is nearly certain. The scale α is calibrated (darrm_opt.planning.shaped_plan) so that
the exact composition of Q answers of the certified table fits the job's budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import special

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior
from darrm_opt.model.params import Prior, digest, finite_number

#: the family's shapes accepted (log-concave: β ≥ 1; the issue's range is [2, 4])
BETA_RANGE = (1.0, 8.0)
#: most slopes a table states (its LP has 4K rows per slope)
MAX_SLOPES = 2000
#: largest K of a shaped table (its cutting-plane LP holds K/2 + 1 columns)
MAX_K = 2001


def _log_cdf_left(beta: float, alpha: float, x: float) -> float:
    """log F(x) of the generalized normal (β, α) for x < 0: log(½ Γ(1/β, (|x|/α)^β)/Γ(1/β)) (upper tail,
    no cancellation); −inf where it underflows."""
    q = 0.5 * float(special.gammaincc(1.0 / beta, (abs(x) / alpha) ** beta))
    return math.log(q) if q > 0 else -math.inf


def target_delta(beta: float, alpha: float, eps: float) -> float:
    """δ_T(ε) of (S-2) in float64 (≥ 0): x_ε by Brent's method on ℓ(x) = ε (ℓ(½) = 0, ℓ decreasing),
    then F(x_ε)(1 − e^{ε + log F(x_ε − 1) − log F(x_ε)}) in logs; 0 where F(x_ε) underflows or ℓ stays
    below ε (for β = 1, the Laplace curve, ℓ ≤ 1/α: δ_T = 0 for ε ≥ 1/α)."""
    if eps <= 0:
        raise InvalidParameter("slope", "must be > 0", eps)
    ab = alpha**beta

    def loss(x: float) -> float:
        return (abs(x - 1.0) ** beta - abs(x) ** beta) / ab - eps

    lo = -1.0
    while loss(lo) < 0:
        lo *= 2.0
        if lo < -1e15 * max(alpha, 1.0):  # F(x_ε) < exp(−1e15): 0 (exactly 0 for β = 1, ε ≥ 1/α)
            return 0.0
    from scipy.optimize import brentq

    x = brentq(loss, lo, 0.5, xtol=1e-15, rtol=4 * np.finfo(float).eps)
    if x < 0:
        a = _log_cdf_left(beta, alpha, x)
    else:
        a = math.log1p(-0.5 * float(special.gammaincc(1.0 / beta, (x / alpha) ** beta)))
    c = _log_cdf_left(beta, alpha, x - 1.0)
    if a == -math.inf:
        return 0.0
    return max(0.0, math.exp(a) * -math.expm1(eps + c - a))


def slope_cap(beta: float, alpha: float, floor: float) -> float:
    """The ε with δ_T(ε) = ``floor`` (a slope range whose last slope leaves at most ``floor`` to the tail),
    rounded up to 6 significant digits."""
    hi = 0.01
    while target_delta(beta, alpha, hi) > floor:
        hi *= 2.0
    from scipy.optimize import brentq

    e = brentq(lambda t: math.log(max(target_delta(beta, alpha, t), 1e-300)) - math.log(floor), hi / 2, hi,
               xtol=1e-12)
    digits = 5 - math.floor(math.log10(e))
    return math.ceil(e * 10**digits) / 10**digits


def noise_table(K: int, beta: float, alpha: float) -> np.ndarray:
    """The table of the target's own mechanism: release 1{L − K/2 + X > 0}, X generalized normal (β, α), i.e.
    γ(l) = Pr[answer = majority | l] − Pr[answer ≠ majority | l] = 2F(|l − K/2|) − 1 = P(1/β, (|l − K/2|/α)^β)
    (P the regularised lower incomplete gamma function). One vote moves L − K/2 + X by one: the answer is a
    post-processing of the shift pair of (S-2), so this table meets the target at every ε′ (for β = 2 it is
    two-class GNMax with σ = α: :func:`darrm_opt.privacy.gnmax.gnmax_gamma`)."""
    d = np.abs(np.arange(K + 1) - K / 2.0)
    return np.asarray(special.gammainc(1.0 / beta, (d / alpha) ** beta), dtype=np.float64)


@lru_cache(maxsize=64)
def _points(beta: float, alpha: float, J: int, slope_max: float) -> tuple[np.ndarray, np.ndarray]:
    eps = slope_max * np.arange(1, J + 1) / J
    return eps, np.array([target_delta(beta, alpha, float(e)) for e in eps])


@dataclass(frozen=True)
class ShapedPateParams:
    """A composition-shaped PATE-setting table: K non-private teachers on disjoint shards, 0/1 votes, its
    profile under the generalized normal curve (β, ``scale`` α) at ``slopes`` = J slopes ε′_j = j·ε_max/J.

    Rules: K integer ≥ 1 (even K: the tie rule of :mod:`darrm_opt.model.neighbours`), K ≤ MAX_K;
    β ∈ BETA_RANGE; α > 0; 1 ≤ J ≤ MAX_SLOPES; 0 < ε_max ≤ 700."""

    K: int
    beta: float
    scale: float
    slopes: int
    slope_max: float
    prior: Prior = field(default_factory=Prior)

    def __post_init__(self) -> None:
        K = self.K
        if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or not 1 <= K <= MAX_K:
            raise InvalidParameter("K", f"must be an integer in [1, {MAX_K}]", K)
        beta = finite_number("beta", self.beta)
        if not BETA_RANGE[0] <= beta <= BETA_RANGE[1]:
            raise InvalidParameter("beta", f"must satisfy {BETA_RANGE[0]:g} <= beta <= {BETA_RANGE[1]:g}", beta)
        scale = finite_number("target_scale", self.scale)
        if not 0 < scale <= 1e9:
            raise InvalidParameter("target_scale", "must satisfy 0 < target_scale <= 1e9", self.scale)
        J = self.slopes
        if isinstance(J, bool) or not isinstance(J, (int, np.integer)) or not 1 <= J <= MAX_SLOPES:
            raise InvalidParameter("slopes", f"must be an integer in [1, {MAX_SLOPES}]", J)
        emax = finite_number("slope_max", self.slope_max)
        if not 0 < emax <= 700:
            raise InvalidParameter("slope_max", "must satisfy 0 < slope_max <= 700", self.slope_max)
        object.__setattr__(self, "K", int(K))
        object.__setattr__(self, "beta", beta)
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "slopes", int(J))
        object.__setattr__(self, "slope_max", emax)
        object.__setattr__(self, "prior", Prior.parse(self.prior))

    def slope_points(self) -> tuple[np.ndarray, np.ndarray]:
        """(ε′_j, δ_T(ε′_j)) for j = 1..J (S-1), floats; the certificate checks γ against exactly these."""
        eps, t = _points(self.beta, self.scale, self.slopes, self.slope_max)
        return eps.copy(), t.copy()

    def canonical(self) -> dict:
        return {"K": self.K, "teachers": "disjoint-nonprivate", "target_family": "gennorm", "beta": self.beta,
                "target_scale": self.scale, "slopes": self.slopes, "slope_max": self.slope_max,
                "prior": self.prior.spec}

    def key(self) -> str:
        return digest(self.canonical())


@dataclass(frozen=True)
class ShapedMulticlassParams:
    """A composition-shaped multi-class table (the rule MC-1 of :mod:`darrm_opt.model.multiclass`: the top
    class with probability γ(g), else a uniform class) whose profile stays under the generalized normal
    curve (β, ``scale`` α) at ``slopes`` = J slopes ε′_j = j·ε_max/J. In the multi-class PATE setting
    δ_γ(ε′) ≤ δ is exactly (MC-2) at (ε′, δ), so (S-1) is J multi-class certificates.

    Rules: K, C and the prior as :class:`~darrm_opt.model.multiclass.MulticlassParams`; K ≤ MAX_K; β, α, J,
    ε_max as :class:`ShapedPateParams`."""

    K: int
    C: int
    beta: float
    scale: float
    slopes: int
    slope_max: float
    prior: MulticlassPrior = field(default_factory=MulticlassPrior)

    def __post_init__(self) -> None:
        base = MulticlassParams(self.K, self.C, 1.0, 0.0, MulticlassPrior.parse(self.prior))  # validates K, C, prior
        if base.K > MAX_K:
            raise InvalidParameter("K", f"must be an integer in [1, {MAX_K}]", self.K)
        shape = ShapedPateParams(1, self.beta, self.scale, self.slopes, self.slope_max)  # validates the target
        object.__setattr__(self, "K", base.K)
        object.__setattr__(self, "C", base.C)
        object.__setattr__(self, "prior", base.prior)
        for name in ("beta", "scale", "slopes", "slope_max"):
            object.__setattr__(self, name, getattr(shape, name))

    def slope_points(self) -> tuple[np.ndarray, np.ndarray]:
        """(ε′_j, δ_T(ε′_j)) for j = 1..J, floats; the certificate checks γ against exactly these."""
        eps, t = _points(self.beta, self.scale, self.slopes, self.slope_max)
        return eps.copy(), t.copy()

    def at(self, j: int) -> MulticlassParams:
        """The multi-class parameters of slope j (0-based): per-answer (ε′_j, δ_T(ε′_j)), the same prior."""
        eps, t = _points(self.beta, self.scale, self.slopes, self.slope_max)
        return MulticlassParams(self.K, self.C, float(eps[j]), float(t[j]), self.prior)

    def canonical(self) -> dict:
        return {"K": self.K, "classes": self.C, "teachers": "disjoint-nonprivate", "target_family": "gennorm",
                "beta": self.beta, "target_scale": self.scale, "slopes": self.slopes, "slope_max": self.slope_max,
                "prior": self.prior.spec}

    def key(self) -> str:
        return digest(self.canonical())
