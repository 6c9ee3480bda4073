"""Privacy of a Gaussian mean release: its dominating pair, the calibration of σ, the choice of l.

**The release** (:mod:`darrm_opt.model.gaussian_params`): K teachers' vectors clipped to L2 radius R and rounded
toward zero onto gℤ^l (rounding toward zero never increases a norm), summed to S ∈ ℤ^l in lattice units, and
S + Z released with Z ~ N_ℤ(0, n²)^l (exact discrete Gaussian, :mod:`darrm_opt.sampling.discrete_gaussian`).
Changing one teacher's data changes one of the K lattice vectors, so S moves by an integer vector s with
‖s‖₂ ≤ Δ = 2R/g (Fay et al., Prop. 2 with the clip radius R: 2R/K on the mean, 2R/g on the lattice sum).

**Its dominating pair** (smoothing). For ρ > 0 with ρ < n let τ² = n² − ρ², and k(x | y) = e^{−(x−y)²/(2ρ²)}/θ(y)
for x ∈ ℤ, y ∈ ℝ, with θ(y) = Σ_z e^{−(z−y)²/(2ρ²)}. Integrating the Gaussian product,

    ∫ N(y; c, τ²) e^{−(x−y)²/(2ρ²)} dy = (ρ/n) e^{−(x−c)²/(2n²)},

and by Poisson summation θ(y) = √(2π) ρ (1 + 2 Σ_{k≥1} e^{−2π²ρ²k²} cos 2πky) lies within a factor 1 ± η of
√(2π)ρ, η = 2 Σ_{k≥1} e^{−2π²ρ²k²} ≤ 2e^{−2π²ρ²}/(1 − e^{−2π²ρ²}). So the law D_c of "y ~ N(c, τ²), then x ~ k(·|y)"
(post-processing of the continuous Gaussian N(c, τ²)) and the discrete Gaussian N_ℤ(c, n²) satisfy
D_c(x) / N_ℤ(c, n²)(x) ∈ [r⁻¹, r], r = (1 + η)/(1 − η), for every x (both are normalised, the ratio of their
unnormalised forms lies in [1/(1+η), 1/(1−η)]). Per coordinate, hence for a release of l coordinates, and for
m answers composed adaptively (the ratio bound holds for each conditional law): for every event E,

    P(E) − e^ε Q(E) ≤ r^{lm} · H_{e^{ε − 2 lm log r}}(N(0, τ²I) ‖ N(s, τ²I))  composed,

i.e. the continuous Gaussian pair with σ = τ and shift ‖s‖ ≤ Δ (Balle–Wang 2018, Thm 8), whose m-fold
composition is the pair with shift Δ√m, up to the factor r^{lm} and the shift 2lm log r of ε. With ρ = 5,
η < 3·10⁻²¹⁴: for every lm ≤ 10¹⁵ coordinates ever released, r^{lm} − 1 and 2lm log r are below 10⁻¹⁹⁸.
The stored pair inflates Δ by the relative margin :data:`SENSITIVITY_MARGIN` (10⁻⁹) and rounds τ down;
raising μ = Δ√m/τ by μ·10⁻⁹ raises δ_μ(ε) by at least 10⁻⁹ μ φ(ε/μ − μ/2) (∂δ/∂μ = φ(ε/μ − μ/2)), which
exceeds both 10⁻¹⁹⁸·δ and the ε-shift's effect 10⁻¹⁹⁸ e^ε Φ(−ε/μ − μ/2) ≤ 10⁻¹⁹⁸ φ(ε/μ − μ/2)·2/μ wherever
δ_μ(ε) ≥ 10⁻¹⁵⁰ … ≤ 1 − 10⁻¹⁵⁰ (every statement a ledger makes: smaller δ is not representable next to its
other terms). So the continuous pair (N(0, τ²), N(Δ(1 + 10⁻⁹), τ²)) is the release's dominating pair; its
composition is exact (a Gaussian pair; the ledger composes it by PLD like every other kind).

**Calibration.** N answers at total (ε, δ): the smallest σ with δ_{Δ√N/σ}(ε) ≤ δ (Balle–Wang's exact δ of the
N-fold composition, bisection on σ), then the lattice is chosen, n rounded up, and the actual pair's
composition verified. The paper's σ (eq. 15, RDP with the classic conversion) is reported beside it:

    σ₁₅ = S √N (√(log 1/δ + ε) + √(log 1/δ)) / (√2 ε),     S = 2R/K (autoencoded; √d/K for PCA, Prop. 1).

**The number of components** (PCA-PATE, eq. 7): the error of a PCA reconstruction with l components and noise
σ is Σ_{j>l} λ_j + l σ² (eq. 6), minimised by keeping the components with λ_j > σ².
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.gaussian_params import MU_MAX, GaussianMeanParams, gaussian_lattice
from darrm_opt.privacy.calibrate import arithmetic, bisect, reach, walk
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.pld import EXACT_MAX_ANSWERS, exact_epsilon

#: the smoothing parameter ρ of the module docstring (lattice units)
SMOOTHING_RHO = 5
#: relative inflation of the stored sensitivity (covers the smoothing factor, module docstring)
SENSITIVITY_MARGIN = 1e-9


def smoothing_eta(rho: float = SMOOTHING_RHO) -> float:
    """η ≥ 2 Σ_{k≥1} e^{−2π²ρ²k²}: the bound 2q/(1 − q), q = e^{−2π²ρ²}, rounded up."""
    q = math.exp(-2 * math.pi**2 * rho**2)
    return math.nextafter(2 * q / (1 - q) * (1 + 1e-12), math.inf)


def smoothed_sigma(noise: int) -> float:
    """τ = √(n² − ρ²), rounded down: the continuous σ (lattice units) whose pair dominates N_ℤ(0, n²)."""
    if noise <= SMOOTHING_RHO:
        raise InvalidParameter("noise", f"must exceed ρ = {SMOOTHING_RHO}", noise)
    return math.nextafter(math.sqrt(noise * noise - SMOOTHING_RHO**2), 0.0)


def lattice_sensitivity(radius: float, lattice: float) -> float:
    """Δ(1 + margin) in lattice units, Δ = 2R/g exactly (g a power of two), rounded up."""
    return math.nextafter(2.0 * radius / lattice * (1 + SENSITIVITY_MARGIN), math.inf)


def mean_profile(params: GaussianMeanParams) -> GaussianProfile:
    """The release's dominating pair: (N(0, τ²), N(Δ(1 + 10⁻⁹), τ²)), continuous (module docstring)."""
    return GaussianProfile(smoothed_sigma(params.noise), (lattice_sensitivity(params.radius, params.lattice),),
                           discrete=False)


def _check(name: str, value: float, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo < value < hi:
        raise InvalidParameter(name, f"must be a number in ({lo:g}, {hi:g})", value)
    return float(value)


def _queries(queries: int) -> int:
    if isinstance(queries, bool) or not isinstance(queries, (int, np.integer)) or not 1 <= queries <= 10**9:
        raise InvalidParameter("queries", "must be an integer in [1, 10^9]", queries)
    return int(queries)


def composed_profile(profile: GaussianProfile, queries: int) -> GaussianProfile:
    """The N-fold composition of a continuous Gaussian pair: the pair with shift Δ√N (exact; the shift rounded
    up)."""
    n = _queries(queries)
    shift = math.nextafter(profile.sensitivity * math.sqrt(n), math.inf)
    return GaussianProfile(profile.sigma, (shift,), discrete=False)


def epsilon_of(profile: GaussianProfile, delta: float) -> float:
    """The smallest ε (to 10⁻¹² relative, rounded up) with δ(ε) ≤ ``delta`` for a continuous Gaussian pair
    (Balle–Wang Thm 8, bisection by :mod:`darrm_opt.privacy.calibrate`: δ(ε) is decreasing)."""
    delta = _check("delta", delta, 0.0, 1.0)
    if profile.delta(0.0) <= delta:
        return 0.0
    def ok(e: float) -> bool:
        return profile.delta(e) <= delta

    lo, hi = 0.0, 1.0
    if not ok(hi):
        lo, top = walk(ok, hi, lambda e, _: e * 2, end=lambda e, _: e * 2 > 1e6)
        if top is None:
            return math.inf
        hi = top
    return bisect(ok, hi, lo, arithmetic, done=lambda g, b: g - b <= 1e-12 * g)[0]


def composed_epsilon(profile: GaussianProfile, queries: int, delta: float) -> float:
    """ε at ``delta`` of ``queries`` answers of one continuous Gaussian pair (exact closed form)."""
    return epsilon_of(composed_profile(profile, queries), delta)


def eq15_sigma(queries: int, epsilon: float, delta: float, sensitivity: float) -> float:
    """The paper's σ (eq. 15): S √N (√(log 1/δ + ε) + √(log 1/δ)) / (√2 ε)."""
    n = _queries(queries)
    epsilon = _check("epsilon", epsilon, 0.0, math.inf)
    delta = _check("delta", delta, 0.0, 1.0)
    b = math.log(1 / delta)
    return sensitivity * math.sqrt(n) * (math.sqrt(b + epsilon) + math.sqrt(b)) / (math.sqrt(2) * epsilon)


def exact_sigma(queries: int, epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest continuous σ (to 10⁻¹⁰ relative, rounded up) with which N answers of the Gaussian mechanism of
    L2 sensitivity S are (ε, δ)-DP, by the exact composition: δ_μ(ε) ≤ δ with μ = S√N/σ (bisection on σ)."""
    n = _queries(queries)
    epsilon = _check("epsilon", epsilon, 0.0, math.inf)
    delta = _check("delta", delta, 0.0, 1.0)
    sensitivity = _check("sensitivity", sensitivity, 0.0, math.inf)

    def ok(sigma: float) -> bool:
        return GaussianProfile(sigma, (sensitivity * math.sqrt(n),), discrete=False).delta(epsilon) <= delta

    hi = reach(ok, eq15_sigma(n, epsilon, delta, sensitivity), lambda s, _: s * 2)
    lo = reach(lambda s: not ok(s), hi / 2, lambda s, _: s / 2)
    return bisect(ok, hi, lo, arithmetic, done=lambda g, b: g - b <= 1e-10 * g)[0]


def choose_dim(eigenvalues: Sequence[float] | np.ndarray, sigma: float) -> int:
    """l minimising Σ_{j>l} λ_j + l σ² over l ∈ {1..d} (eq. 6; eq. 7: the components with λ_j > σ²); the
    eigenvalues in any order, each ≥ 0."""
    lam = np.sort(np.asarray(eigenvalues, dtype=np.float64).ravel())[::-1]
    if lam.size == 0 or not np.all(np.isfinite(lam)) or np.any(lam < 0):
        raise InvalidParameter("eigenvalues", "must be one or more finite numbers >= 0")
    tails = np.concatenate([np.cumsum(lam[::-1])[::-1][1:], [0.0]])  # Σ_{j>l} λ_j for l = 1..d
    loss = tails + np.arange(1, lam.size + 1) * float(sigma) ** 2
    return int(np.argmin(loss)) + 1


def pca_loss(eigenvalues: Sequence[float] | np.ndarray, dim: int, sigma: float) -> float:
    """Σ_{j>l} λ_j + l σ² (eq. 6), the expected squared reconstruction error with l components."""
    lam = np.sort(np.asarray(eigenvalues, dtype=np.float64).ravel())[::-1]
    return float(lam[dim:].sum() + dim * sigma**2)


@dataclass(frozen=True)
class Calibration:
    """σ for N answers within (ε, δ): the exact continuous σ, the paper's eq. 15 σ, and the release's own
    parameters (σ rounded up onto the lattice) with their verified composition ``epsilon_spent``."""

    queries: int
    epsilon: float
    delta: float
    sigma_exact: float
    sigma_eq15: float
    params: GaussianMeanParams
    epsilon_spent: float
    #: the ledger's own PLD composition of the N answers (:func:`darrm_opt.privacy.pld.exact_epsilon`), None
    #: above its EXACT_MAX_ANSWERS
    epsilon_ledger: float | None = None

    @property
    def sigma(self) -> float:
        return self.params.sigma

    @property
    def ratio(self) -> float:
        """σ₁₅ / σ_exact: how much more noise eq. 15 asks for."""
        return self.sigma_eq15 / self.sigma_exact

    def to_dict(self) -> dict:
        """The calibration's inputs (N, the total (ε, δ)), its σs and spent ε, and the release's parameters;
        the release's per-answer δ₀ is ``answer_delta`` (``delta`` is the total δ of the N answers)."""
        release = {k: v for k, v in self.params.canonical().items() if k != "delta"}
        return {"queries": self.queries, "epsilon": self.epsilon, "delta": self.delta,
                "sigma_exact": self.sigma_exact, "sigma_eq15": self.sigma_eq15, "sigma": self.sigma,
                "eq15_over_exact": self.ratio, "epsilon_spent": self.epsilon_spent,
                "epsilon_ledger": self.epsilon_ledger, **release, "answer_delta": self.params.delta}


def calibrate(queries: int, epsilon: float, delta: float, *, K: int, radius: float = 1.0, dim: int | None = None,
              eigenvalues: Sequence[float] | np.ndarray | None = None, answer_delta: float | None = None,
              verify_ledger: bool = True) -> Calibration:
    """The release for N answers within a total (ε, δ): σ_exact by :func:`exact_sigma` (S = 2R/K), the lattice by
    :func:`~darrm_opt.model.gaussian_params.gaussian_lattice` (n ≥ 4096), n raised until the actual pair's N-fold
    composition is verified within ε, by the closed form (:func:`composed_epsilon`) and, up to the ledger's
    EXACT_MAX_ANSWERS, by the ledger's own PLD composition (so a ledger with budget ε accepts all N); l = ``dim``,
    or chosen from ``eigenvalues`` by eq. 7 at the released σ. ``answer_delta``: the δ₀ of the per-answer
    statement (default δ/N). σ is at least S/MU_MAX (per-answer μ ≤ 1): a budget that would allow less noise
    per answer is not spent in full (``epsilon_spent`` says what is). ``verify_ledger`` False: the closed form
    alone (the ledger's PLD of N answers costs up to seconds at μ = 1; ``epsilon_ledger`` is then None)."""
    n = _queries(queries)
    if (dim is None) == (eigenvalues is None):
        raise InvalidParameter("dim", "give either dim or eigenvalues")
    S = 2.0 * _check("radius", radius, 0.0, math.inf) / K
    sig_exact = exact_sigma(n, epsilon, delta, S)
    sig15 = eq15_sigma(n, epsilon, delta, S)
    # at least the noise of μ = MU_MAX per answer (a larger budget per answer is not spent)
    lattice, noise, _ = gaussian_lattice(max(sig_exact, S / MU_MAX * (1 + 1e-9)), K)
    d0 = delta / n if answer_delta is None else answer_delta
    while True:
        params = GaussianMeanParams(K, dim or 1, radius, lattice, noise, d0)
        prof = mean_profile(params)
        spent = composed_epsilon(prof, n, delta)
        ledger = exact_epsilon([(prof, n)], delta) if verify_ledger and n <= EXACT_MAX_ANSWERS else None
        if spent <= epsilon and (ledger is None or ledger <= epsilon):
            break
        noise += 1
        if noise > 2 * 4096 - 1:
            raise InvalidParameter("epsilon", "no lattice noise within range meets the budget", epsilon)
    if eigenvalues is not None:
        params = GaussianMeanParams(K, choose_dim(eigenvalues, params.sigma), radius, lattice, noise, d0)
    return Calibration(n, float(epsilon), float(delta), sig_exact, sig15, params, spent, ledger)
