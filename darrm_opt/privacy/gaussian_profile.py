"""The privacy profile of a Gaussian release: the dominating pair of additive Gaussian noise.

A release that adds noise N(0, σ²I) (or the discrete Gaussian N_ℤ(0, σ²) independently per coordinate) to a
statistic whose value moves between neighbouring datasets by at most the vector ``shifts`` (the worst pair:
a histogram when one teacher changes its vote from class a to class b moves by e_a − e_b, shifts (1, 1); a
mean of K clipped vectors moves by 2R/K in L2) is post-processing of that Gaussian mechanism, so it is
dominated by the pair (N(0, σ²I), N(shifts, σ²I)) (Zhu, Dong, Wang 2022, Thm 10 for its composition).

Continuous noise: with μ = ‖shifts‖₂ / σ the profile is exact (Balle and Wang 2018, Thm 8):

    δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ).

Discrete noise (Canonne, Kamath, Steinke 2020): the pair is the product over coordinates of
(N_ℤ(0, σ_i²), N_ℤ(s_i, σ_i²)) with integer shifts s_i. It is built here as an exact finite pair
(:func:`discrete_pair`): the coordinates of one σ depend on the outputs only through z = Σ s_i x_i (the loss is
(Σ s_i² − 2z)/(2σ²)), so each σ-group is the pair (P_z, P_z(· − Σ s_i²)) with P_z the convolution of the
dilated pmfs, computed by direct convolution of non-negative terms (relative error ≤ n·u per mass). Each
coordinate is truncated at |x| ≤ T, where the mass outside is at most TAIL_MASS (bounded by the Gaussian
integral); that mass is counted as an infinite-loss atom of P, so the finite pair dominates the true one:
P(S) − e^ε Q(S) ≤ P_T(S) − e^ε Q_T(S) + P(outside) for every event S. One answer's δ(ε) is summed term by term
(:meth:`GaussianProfile.delta`, no loss grid and no FFT), with a margin for its float error, so it is an upper
bound at every δ down to TAIL_MASS. For composition the pair's PLD is the finite pair's pessimistic
connect-the-dots PLD (:func:`darrm_opt.privacy.pld.pair_pld`); Confident-GNMax's two σ-groups are composed
through :func:`darrm_opt.privacy.pld.compose_bounded`, which carries a proven bound of the FFT's float error.

Subsampled teachers (``subsample`` (m, K), γ = m/K; :func:`subsampled_pair`, docs/maths.md "Subsampled
teachers"): each answer reads a uniform m-subset of K teachers on disjoint shards, drawn without replacement.
The one-σ pair above, atoms z with P-mass p, loss ℓ, Q-mass q = p·e^{−ℓ} and the infinite-loss P-mass t, is
symmetric (z ↦ S − z swaps P and Q), so it dominates the m-teacher answer in both orders, with curve h. Balle,
Barthe, Gaboardi 2018, Thm 10 (sampling without replacement, substitution) bounds the subsampled answer's
H_x by g(x) = γ·h(1 + (x − 1)/γ) for x ≥ 1 and by 1 − x + x·g(1/x) for x < 1. The finite pair (P′, Q′)

- each atom with ℓ > 0: P′-mass γp + (1 − γ)q = q·(1 + γ·expm1(ℓ)), Q′-mass q, loss ℓ′ = log1p(γ·expm1(ℓ)),
  and its mirror: P′-mass q, Q′-mass γp + (1 − γ)q, loss −ℓ′;
- the infinite-loss atom of P′-mass γt, and its mirror of Q′-mass γt (P′-mass 0: it adds nothing to δ);
- one atom of loss 0 holding the rest, m0 = 1 − Σ_{ℓ>0} ((2 − γ)q + γp) − γt (≥ 0, checked)

has exactly these curves: for x ≥ 1 only the atoms of positive loss contribute, Σ max(0, γp + (1 − γ)q − xq)
+ γt = γ(Σ max(0, p − (1 + (x − 1)/γ)q) + t) = g(x) (atoms of ℓ ≤ 0 add nothing to h at 1 + (x − 1)/γ ≥ 1);
the pair is its own mirror, so H_x(P′‖Q′) = 1 − x + x·H_{1/x}(Q′‖P′) = 1 − x + x·g(1/x) below 1. It is a
tight dominating pair of the subsampled answer and composes adaptively like any other pair (Zhu, Dong, Wang
2022, Thm 10). Float error: the hockey stick of a product of finite pairs, E_P[(1 − e^{ε−L})₊] + P[L = ∞], only
grows with every P-mass and every finite loss, so each P′-mass is rounded up (a relative (n + 16 + 4·max|ℓ|)·u
over the base masses' own error), m0 up (1 minus a lower bound of the other masses), each loss ℓ′ up and each
mirror loss −ℓ′ towards 0 (a relative margin (16 + 4/γ)·u over the float ℓ′): the rounded pair's δ, for one
answer and for every composition, is ≥ the exact pair's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.params import integer_in

#: ``type`` of a Gaussian profile's document (a tradeoff profile of a γ table has none)
TYPE = "gaussian"
#: relative margin on the closed-form δ(ε): the float evaluation of Thm 8 is within a few ulps of the exact
#: value, so this margin makes it an upper bound
RELATIVE_MARGIN = 1e-12
#: each coordinate of a discrete Gaussian pair is truncated where its two tails hold at most this P-mass,
#: which is added to the infinite-loss atom (no δ below it is ever claimed for one answer)
TAIL_MASS = 1e-40
#: unit roundoff of float64
UNIT = 2.0**-53


def _dgauss_pmf(sigma: float) -> tuple[np.ndarray, int, float]:
    """The pmf of N_ℤ(0, σ²) on [−T, T] (T = ⌈σ√(2 ln(2/TAIL_MASS))⌉ + 1), T and an upper bound of the mass
    outside: 2 Σ_{x > T} e^{−x²/2σ²} / Z ≤ 2 ∫_T^∞ e^{−x²/2σ²} dx / Z = σ√(2π) erfc(T/(σ√2)) / Z, with the
    normaliser Z summed over |x| ≤ T (a lower bound of the full sum, so the tail bound is an upper bound)."""
    from scipy.special import erfc

    T = int(math.ceil(sigma * math.sqrt(2.0 * math.log(2.0 / TAIL_MASS)))) + 1
    x = np.arange(-T, T + 1, dtype=float)
    w = np.exp(-(x * x) / (2.0 * sigma * sigma))
    z = math.fsum(w.tolist())
    tail = sigma * math.sqrt(2.0 * math.pi) * float(erfc(T / (sigma * math.sqrt(2.0)))) / z
    return w / z, T, math.nextafter(tail * (1.0 + 1e-9), math.inf) + 1e-300


@lru_cache(maxsize=64)
def discrete_pair(sigmas: tuple[float, ...], shifts: tuple[float, ...]) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The exact finite pair of each σ-group of a discrete Gaussian release (module docstring): a tuple of
    (p, ℓ) arrays over z, the P-masses and the exact losses ℓ(z) = (S − 2z)/(2σ²), S = Σ s_i² (the Q-mass is
    p·e^{−ℓ}, the P-mass at z − S; it may be below the float range, the loss never is). The P-mass outside
    the truncation is :func:`discrete_tail`. Coordinates with s_i = 0 are dropped (they do not move)."""
    groups: dict[float, list[int]] = {}
    for s, sig in zip(shifts, sigmas, strict=True):
        if s:
            groups.setdefault(sig, []).append(int(s))
    out = []
    for sig, ss in sorted(groups.items()):
        base, _, _ = _dgauss_pmf(sig)
        pz = np.ones(1)
        for s in ss:
            dil = np.zeros((base.size - 1) * s + 1)
            dil[::s] = base
            pz = np.convolve(pz, dil)  # non-negative terms: direct convolution, relative error ≤ n·u
        shift = sum(s * s for s in ss)
        top = (pz.size - 1) // 2  # z runs over −top..top
        z = np.arange(-top, top + 1, dtype=float)
        out.append((pz, (shift - 2.0 * z) / (2.0 * sig * sig)))
    return tuple(out)


def discrete_tail(sigmas: tuple[float, ...], shifts: tuple[float, ...]) -> float:
    """Upper bound of the P-mass that :func:`discrete_pair` truncated (every moving coordinate's tails)."""
    return math.fsum(_dgauss_pmf(sig)[2] for s, sig in zip(shifts, sigmas, strict=True) if s) * (1 + 1e-12)


@lru_cache(maxsize=64)
def subsampled_pair(sigma: float, shifts: tuple[float, ...], m: int, K: int) -> tuple[np.ndarray, np.ndarray, float]:
    """The finite pair of a one-σ discrete Gaussian answer on a uniform m-subset of K teachers (module
    docstring, BBG 2018 Thm 10): (P′-masses, losses, P′-mass of the infinite-loss atom), every mass and loss
    rounded outwards. The atoms: the amplified atoms of positive loss, their mirrors (negative loss) and the
    loss-0 atom m0. InvalidParameter naming ``subsample`` if m0 < 0 (the base pair is not symmetric)."""
    pairs = discrete_pair((sigma,) * len(shifts), shifts)
    tail = discrete_tail((sigma,) * len(shifts), shifts)
    if len(pairs) != 1:
        raise InvalidParameter("subsample", "applies to a pair of one noise scale with a moving coordinate", shifts)
    gamma = m / K
    p, loss = pairs[0]
    pos = (loss > 0) & (p > 0)
    pp, lp = p[pos], loss[pos]
    q = pp * np.exp(-lp)
    amp = gamma * pp + (1.0 - gamma) * q  # = q·(1 + γ·expm1(ℓ)), exactly; each term without cancellation
    with np.errstate(over="ignore"):  # ℓ′ = ℓ + log(γ + (1 − γ)e^{−ℓ}) where e^ℓ would overflow
        lam = np.where(lp > 30.0, lp + np.log(gamma + (1.0 - gamma) * np.exp(-lp)), np.log1p(gamma * np.expm1(lp)))
    n = p.size
    rel = (n + 16 + 4 * float(np.abs(loss).max())) * UNIT  # the base masses' error and q's exp(−ℓ)
    lmargin = (16 + 4 / gamma) * UNIT  # ℓ′ = log1p(γ expm1 ℓ) ≥ γℓ moves by ≤ ℓ′·(2u/γ) with ℓ's 2u, plus its own ulps
    lam_up = np.nextafter(lam * (1 + lmargin), np.inf)
    lam_down = np.maximum(lam * (1 - lmargin), 0.0)
    others = math.fsum(amp.tolist()) + math.fsum(q.tolist())
    if 1.0 - others - gamma * tail < -rel:
        raise InvalidParameter("subsample", "the base pair leaves negative mass at loss 0 (it is not symmetric)",
                               1.0 - others - gamma * tail)
    # 1 minus a lower bound of the other P′-masses (γt ≥ 0 left out): an upper bound of the exact m0
    m0 = math.nextafter(max(1.0 - others * (1.0 - rel), 0.0) + 4 * UNIT, math.inf)
    up = 1 + rel
    masses = np.concatenate([np.nextafter(amp * up, np.inf), np.nextafter(q * up, np.inf), [m0]])
    losses = np.concatenate([lam_up, -lam_down, [0.0]])
    return masses, losses, math.nextafter(gamma * tail * (1 + 1e-12), math.inf)


def _hockey(p: np.ndarray, loss: np.ndarray, log_x: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    """Σ_i max(0, p_i − e^{log_x} q_i) for each log_x, as (value, Σ_{ℓ_i > log_x} p_i), term by term
    p_i·(−expm1(log_x − ℓ_i)) with the losses ℓ_i = ln(p_i/q_i)."""
    keep = p > 0
    p, loss = p[keep], loss[keep]
    lxs = np.atleast_1d(np.asarray(log_x, dtype=float))
    vals, overs = np.empty(lxs.size), np.empty(lxs.size)
    step = max(1, 1_000_000 // max(p.size, 1))
    for i in range(0, lxs.size, step):
        lx = lxs[i:i + step, None]
        over = loss[None, :] > lx
        vals[i:i + step] = np.where(over, p[None, :] * -np.expm1(np.minimum(lx - loss[None, :], 0.0)), 0.0).sum(axis=1)
        overs[i:i + step] = np.where(over, p[None, :], 0.0).sum(axis=1)
    return vals, overs


@dataclass(frozen=True)
class GaussianProfile:
    """The dominating pair (N(0, σ²I), N(shifts, σ²I)), continuous or discrete (module docstring)."""

    sigma: float
    shifts: tuple[float, ...]
    discrete: bool = True
    #: per-coordinate σ_i (empty: every coordinate has ``sigma``); Confident-GNMax's threshold check has σ₁,
    #: its argmax σ₂
    sigmas: tuple[float, ...] = ()
    #: (m, K): each answer reads a uniform random m of K teachers on disjoint shards (module docstring);
    #: None (and m = K) for every teacher
    subsample: tuple[int, int] | None = None

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
        if self.subsample is not None:
            try:
                m, K = self.subsample
            except (TypeError, ValueError):
                raise InvalidParameter("subsample", "must be a pair (m, K)", self.subsample) from None
            K = integer_in("K", K, 1)
            m = integer_in("subsample", m, 1, K)
            if m < K and (not self.discrete or len(set(sigmas)) > 1):
                raise InvalidParameter("subsample", "applies to discrete noise of one σ", self.subsample)
            object.__setattr__(self, "subsample", None if m == K else (m, K))

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
        key = (TYPE, self.discrete, self.sigma, self.shifts, self.sigmas)
        return key if self.subsample is None else (*key, self.subsample)

    def delta(self, epsilon: float) -> float:
        """An upper bound of δ(ε′): Thm 8 (continuous; with a relative margin for its float evaluation) or the
        discrete pair's hockey stick summed over its finite atoms (:meth:`discrete_delta`)."""
        if not (isinstance(epsilon, (int, float)) and epsilon >= 0 and not math.isnan(epsilon)):
            raise InvalidParameter("epsilon", "must be a number >= 0", epsilon)
        if self.discrete:
            return self.discrete_delta(float(epsilon))
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

    def discrete_delta(self, epsilon: float) -> float:
        """δ(ε) of the discrete pair, an upper bound: with one σ-group, Σ_z max(0, p_z − e^ε q_z); with two
        (Confident-GNMax), Σ_i p1_i H2(ε − ℓ1_i) + p1[ℓ1 = ∞], H2(t) = Σ_j max(0, p2_j − e^t q2_j) (the hockey
        stick of a product pair, exact). Every term is ≥ 0 and carries a relative error of a few ulps, plus
        u·(|ε| + max|ℓ| + 4) of the mass above the threshold from the logarithms; the bound adds
        64·u·(|ε| + max|ℓ| + 4) of that mass, a relative (n + 16)·u of the sum, and the truncated tails."""
        if self.subsample is not None:
            return self._subsampled_delta(epsilon)
        sig, sh = self.coordinate_sigmas, self.shifts
        pairs = discrete_pair(sig, sh)
        tail = discrete_tail(sig, sh)
        if not pairs:
            return min(1.0, tail)
        if math.isinf(epsilon):
            return min(1.0, tail)
        if len(pairs) == 1:
            p, loss = pairs[0]
            val, over = _hockey(p, loss, epsilon)
            n = p.size
            lmax = float(np.abs(loss).max())
        elif len(pairs) == 2:
            (p1, l1), (p2, l2) = pairs
            keep = p1 > 0
            p1, l1 = p1[keep], l1[keep]
            vals, overs = _hockey(p2, l2, epsilon - l1)
            val = np.array([float(np.dot(p1, vals))])
            over = np.array([float(np.dot(p1, overs))])
            n = p1.size * p2.size
            lmax = float(np.abs(l1).max() + np.abs(l2).max())
        else:  # pragma: no cover - no release here has more than two noise scales
            raise InvalidParameter("sigmas", "at most two distinct σ are supported for discrete noise", sig)
        bound = float(val[0]) * (1 + (n + 16) * UNIT) + 64 * UNIT * (abs(epsilon) + abs(lmax) + 4) * float(over[0])
        return min(1.0, math.nextafter(bound + tail, math.inf))

    def _subsampled_delta(self, epsilon: float) -> float:
        """δ(ε) of the subsampled pair (:func:`subsampled_pair`), summed term by term over its atoms of loss
        > ε, with discrete_delta's margin for the float error of the sum and of the logarithms."""
        assert self.subsample is not None
        p, loss, inf = subsampled_pair(self.sigma, self.shifts, *self.subsample)
        if math.isinf(epsilon):
            return min(1.0, inf)
        val, over = _hockey(p, loss, epsilon)
        bound = float(val[0]) * (1 + (p.size + 16) * UNIT) + 64 * UNIT * (abs(epsilon) + float(np.abs(loss).max())
                                                                         + 4) * float(over[0])
        return min(1.0, math.nextafter(bound + inf, math.inf))

    def to_pld(self, interval: float) -> Any:
        """The pair's PLD (pessimistic, loss interval ``interval``)."""
        from dp_accounting.pld import privacy_loss_distribution as pld_lib

        if self.subsample is not None:
            from darrm_opt.privacy.pld import loss_pair_pld

            p, loss, inf = subsampled_pair(self.sigma, self.shifts, *self.subsample)
            return loss_pair_pld(p, loss, inf, interval)

        if not self.discrete:
            if self.sigmas:  # N(0, diag σ_i²) against N(s, ·): the Gaussian pair of μ (whiten each coordinate)
                return pld_lib.from_gaussian_mechanism(
                    1.0, sensitivity=self.mu, pessimistic_estimate=True, value_discretization_interval=interval)
            return pld_lib.from_gaussian_mechanism(
                self.sigma, sensitivity=self.sensitivity, pessimistic_estimate=True,
                value_discretization_interval=interval)
        from darrm_opt.privacy.pld import compose_bounded, loss_pair_pld

        pairs = discrete_pair(self.coordinate_sigmas, self.shifts)
        if not pairs:  # nothing moves: the identity pair
            return pld_lib.from_gaussian_mechanism(1.0, sensitivity=0.0, value_discretization_interval=interval)
        tail = discrete_tail(self.coordinate_sigmas, self.shifts)
        plds = [loss_pair_pld(p, loss, tail if i == 0 else 0.0, interval) for i, (p, loss) in enumerate(pairs)]
        return plds[0] if len(plds) == 1 else compose_bounded([(x, 1) for x in plds])

    def to_dict(self) -> dict[str, Any]:
        out = {"type": TYPE, "sigma": self.sigma, "shifts": list(self.shifts), "discrete": self.discrete,
               "mu": self.mu}
        if self.sigmas:
            out["sigmas"] = list(self.sigmas)
        if self.subsample is not None:
            out["subsample"] = list(self.subsample)
        return out

    @classmethod
    def from_dict(cls, data: Any) -> GaussianProfile:
        if not isinstance(data, dict) or data.get("type") != TYPE:
            raise InvalidParameter("privacy_profile", f"must be an object with type {TYPE!r}")
        try:
            shifts = tuple(float(s) for s in data["shifts"])
            sigmas = tuple(float(x) for x in data.get("sigmas") or ())
            sub = data.get("subsample")
            sub = None if sub is None else tuple(sub)
            prof = cls(float(data["sigma"]), shifts, bool(data.get("discrete", True)), sigmas, sub)
        except (KeyError, TypeError, ValueError):
            raise InvalidParameter("privacy_profile", "a Gaussian profile needs sigma and shifts") from None
        return prof


def gdp_mu(epsilon: float, delta: float) -> float:
    """The μ of μ-Gaussian DP with δ_μ(ε) = δ: the largest μ found with

        δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) < δ

    (Balle and Wang 2018, Thm 8; Dong, Roth, Su 2022, Cor. 2.13), evaluated in logs by
    :meth:`GaussianProfile.delta` (no overflow of e^ε). δ_μ(ε) increases with μ: a bracket is walked from
    [10⁻⁶, 1] (doubling the top up to 10⁶, dividing the bottom by 10³ down to 10⁻³⁰⁰) and bisected on log μ
    in 100 steps (:mod:`darrm_opt.privacy.calibrate`). Q answers of a μ₀-GDP mechanism are √Q·μ₀-GDP
    (Dong, Roth, Su 2022, Cor. 3.3), so a per-answer μ is this μ/√Q. InvalidParameter naming
    ``budget_epsilon`` when δ_μ(ε) ≥ δ at every representable μ."""
    from darrm_opt.privacy.calibrate import bisect, geometric, reach

    def ok(mu: float) -> bool:
        return GaussianProfile(1.0, (mu,), discrete=False).delta(epsilon) < delta

    hi = reach(lambda mu: mu >= 1e6 or not ok(mu), 1.0, lambda mu, _: mu * 2)
    lo = reach(lambda mu: mu < 1e-300 or ok(mu), 1e-6, lambda mu, _: mu / 1e3)
    if not ok(lo):
        raise InvalidParameter("budget_epsilon", "too small for any Gaussian release: δ_μ(ε) exceeds budget_delta "
                               "at every representable μ", epsilon)
    return bisect(ok, lo, hi, geometric, done=100)[0]
