"""Gaussian mean release of teachers' vectors (PCA-PATE / autoencoded PATE; Fay, Sjölund, Oechtering).

Per query, K teachers on disjoint shards each give a vector of ``dim`` numbers (PCA coefficients A_l y of an
output y ∈ [0, 1]^d, an autoencoder's latent, or the output itself). Each vector is clipped to the L2 ball of
radius R, rounded toward zero onto the lattice gℤ^dim, the lattice vectors summed, and exact discrete Gaussian
noise N_ℤ(0, n²) added per coordinate (:func:`darrm_opt.sampling.discrete_gaussian.discrete_gaussian`); the
release is the noisy mean (sum + noise)·g/K, whose noise has standard deviation σ = n g/K. Its dominating
pair, the calibration of σ and the choice of l are in :mod:`darrm_opt.privacy.gaussian_mean`.

The release is defined by its parameters alone: its table has no γ (``table_size`` 0), its certificate is the
pair's computed per-answer statement (ε₀ at δ₀), and its ``expected_error`` is the expected squared L2 error of
the released mean against the teachers' lattice mean, dim·σ².
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from fractions import Fraction
from functools import lru_cache
from typing import Any, ClassVar, Literal

import numpy as np

from darrm_opt.certify.verdict import VerdictFields
from darrm_opt.errors import CertificationFailed, InvalidParameter
from darrm_opt.model.gaussian_params import GaussianMeanParams
from darrm_opt.privacy.gaussian_profile import GaussianProfile
from darrm_opt.privacy.table import CertifiedTable
from darrm_opt.sampling import RandomBytes, system_random

from .base import Example, Mechanism, Solved
from .outputs import MeanTableOut

#: the clipped vector is scaled by this much less than R/‖z‖ (float rounding), then checked exactly
_CLIP_SLACK = 1 - 1e-10


@dataclass(frozen=True)
class GaussianMeanCertificate(VerdictFields):
    """The computed statement of one answer: the pair (N(0, τ²), N(Δ′, τ²)) (lattice units) gives δ(ε₀) =
    ``delta_at_epsilon0`` ≤ δ₀ = ``delta0``; ``eta``: the smoothing bound of the discrete noise."""

    certified: bool
    reason: str
    delta0: float
    delta_at_epsilon0: float
    epsilon0: float
    noise: int
    tau: float
    sensitivity: float
    mu: float
    eta: float
    verdict_fields: ClassVar[tuple[str, str, str, str]] = ("delta0", "delta_at_epsilon0", "_one", "_none")
    what: ClassVar[str] = "Gaussian pair"

    @property
    def _one(self) -> int:
        return 1

    @property
    def _none(self) -> list[int]:
        return []

    def to_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=256)
def _statement(params: GaussianMeanParams) -> GaussianMeanCertificate:
    from darrm_opt.privacy.gaussian_mean import epsilon_of, mean_profile, smoothing_eta

    prof = mean_profile(params)
    eps0 = epsilon_of(prof, params.delta)
    d = prof.delta(eps0)
    eta = smoothing_eta()
    ok = d <= params.delta and eta < 1e-200 and math.isfinite(eps0)
    reason = "" if ok else f"δ(ε₀) = {d!r} exceeds δ₀ = {params.delta!r} or the smoothing bound η = {eta!r} fails"
    return GaussianMeanCertificate(ok, reason, params.delta, d, eps0, params.noise, prof.sigma, prof.sensitivity,
                               prof.mu, eta)


def _bound(radius: float, lattice: float) -> int:
    """⌊(R/g)²⌋: integers q satisfy Σ q² ≤ (R/g)² iff Σ q² ≤ ⌊(R/g)²⌋."""
    r = Fraction(radius) / Fraction(lattice)
    return (r * r).numerator // (r * r).denominator


def _clip_round_float(z: np.ndarray, radius: float, lattice: float, bound: int) -> np.ndarray:
    """:func:`clip_and_round` on a block, in float64 (integers below 2^31 are exact there): vectors scaled by
    R/‖z‖·(1 − 10⁻¹⁰) when ‖z‖ > R, divided by g and truncated; Σ q² is then checked in float with a margin
    above its rounding error (dim·2^-53 relative), and a vector not proven inside by it is checked, and
    corrected, in exact integers."""
    norm2 = np.einsum("...i,...i->...", z, z)
    factor = np.full(norm2.shape, 1.0 / lattice)
    big = norm2 > radius * radius
    factor[big] = radius / np.sqrt(norm2[big]) * _CLIP_SLACK / lattice
    q = z * factor[..., None]
    np.trunc(q, out=q)
    threshold = float(bound) * (1 - 8 * (z.shape[-1] + 1) * 2.0**-53)
    doubt = np.einsum("...i,...i->...", q, q) > threshold
    if doubt.any():
        for idx in zip(*np.nonzero(doubt)):
            row = q[idx].astype(np.int64)
            while int((row * row).sum()) > bound:  # float rounding only: at most a few units
                j = int(np.argmax(np.abs(row)))
                row[j] -= np.sign(row[j])
            q[idx] = row
    return q


def clip_and_round(z: np.ndarray, radius: float, lattice: float) -> np.ndarray:
    """Each vector of ``z`` (..., dim) clipped to L2 radius R and rounded toward zero onto gℤ^dim: int64 lattice
    coordinates q with Σ q_i² ≤ (R/g)², proven exactly (rounding toward zero never increases a norm; a vector
    float rounding left outside loses one unit from its largest coordinate until it is inside)."""
    z = np.asarray(z, dtype=np.float64)
    return _clip_round_float(z, radius, lattice, _bound(radius, lattice)).astype(np.int64)


#: values (rows × K × dim) checked, clipped and summed per block: the block stays in cache between passes
BLOCK_VALUES = 1 << 17


class GaussianMeanSampler:
    """The release of one certified table: ``prepare`` (checks, clips, rounds and sums the teachers' vectors; no
    coin), ``rows``, ``draw`` (the noisy means, (rows, dim) float64)."""

    def __init__(self, params: GaussianMeanParams, random_bytes: RandomBytes = system_random) -> None:
        self.params = params
        self.random_bytes = random_bytes

    def __call__(self, votes: np.ndarray) -> np.ndarray:
        return self.draw(self.prepare(votes))

    def prepare(self, votes: Any, *, unit: bool = True) -> np.ndarray:
        """The lattice sums (rows, dim) int64 of ``votes``: an array (rows, K, dim) of finite numbers, in [0, 1]
        when ``unit`` (teachers' outputs; the front ends' form), else any finite numbers (latents); each vector
        clipped to the radius (InvalidParameter naming ``votes`` for a bad shape or value)."""
        p = self.params
        try:
            v = np.asarray(votes, dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidParameter("votes", f"must be an array of shape (rows, K = {p.K}, dim = {p.dim}) of "
                                   "numbers") from None
        if v.ndim != 3 or v.shape[1:] != (p.K, p.dim):
            raise InvalidParameter("votes", f"must have shape (rows, K = {p.K}, dim = {p.dim})", tuple(v.shape))
        step = max(1, BLOCK_VALUES // max(1, p.K * p.dim))
        bound = _bound(p.radius, p.lattice)
        out = np.empty((v.shape[0], p.dim), dtype=np.int64)
        for lo in range(0, v.shape[0], step):
            block = v[lo : lo + step]
            if block.size:
                low, high = block.min(), block.max()  # NaN propagates into both
                if not ((0 <= low and high <= 1) if unit else (math.isfinite(low) and math.isfinite(high))):
                    self._refuse(block, lo, unit)
            out[lo : lo + step] = _clip_round_float(block, p.radius, p.lattice, bound).sum(axis=1)
        return out  # float sums of integers below 2^50: exact

    @staticmethod
    def _refuse(block: np.ndarray, start: int, unit: bool) -> None:
        bad = ~np.isfinite(block)
        if unit:
            bad |= (block < 0) | (block > 1)
        row = start + int(np.flatnonzero(bad.any(axis=(1, 2)))[0])
        rule = "every value must be a number in [0, 1]" if unit else "every value must be finite"
        raise InvalidParameter("votes", f"row {row}: {rule}")

    @staticmethod
    def rows(prepared: np.ndarray) -> int:
        return int(prepared.shape[0])

    def draw(self, prepared: np.ndarray) -> np.ndarray:
        """(S + Z)·g/K with Z ~ N_ℤ(0, n²) per coordinate, exactly."""
        return self.means(self.noisy_sums(prepared))

    def noisy_sums(self, prepared: np.ndarray) -> np.ndarray:
        """S + Z (int64, the shape of ``prepared``) with Z ~ N_ℤ(0, n²) per coordinate: the release before its
        scaling (what a ledger stores to replay it)."""
        from darrm_opt.sampling import discrete_gaussian

        p = self.params
        return prepared + discrete_gaussian(p.noise, prepared.size, self.random_bytes).reshape(prepared.shape)

    def means(self, sums: np.ndarray) -> np.ndarray:
        """The noisy means (rows, dim) float64 of :meth:`noisy_sums`' lattice sums: (S + Z)·g/K."""
        p = self.params
        return np.asarray(sums, dtype=np.int64).reshape(-1, p.dim).astype(np.float64) * (p.lattice / p.K)


class GaussianMeanTableOut(MeanTableOut):
    """A served gaussian-mean table."""

    kind: Literal["gaussian-mean"]


class GaussianMean(Mechanism):
    kind = "gaussian-mean"
    output_model = GaussianMeanTableOut
    params_type = GaussianMeanParams
    settings = ("disjoint-nonprivate",)
    summary = "the noisy mean of K teachers' vectors (PCA-PATE / autoencoded PATE), exact discrete Gaussian noise"
    votes_file = "npy"
    document_fields = ("K", "dim", "radius", "lattice", "noise", "delta")
    absent_fields = ("m", "teacher_delta", "classes", "epsilon")
    absent_reason = "a Gaussian mean release is defined by K, dim, radius, lattice, noise and delta"

    def table_size(self, params: Any) -> int:
        return 0

    def examples(self) -> tuple[Example, ...]:
        return (Example(GaussianMeanParams(5, 2, 1.0, 2.0**-12, 8192, 1e-6)),)

    def params_from(self, data: Mapping[str, Any]) -> GaussianMeanParams:
        return GaussianMeanParams(data.get("K"), data.get("dim"), data.get("radius"),  # type: ignore[arg-type]
                                  data.get("lattice"), data.get("noise"), data.get("delta"))  # type: ignore[arg-type]

    def per_answer(self, params: GaussianMeanParams) -> tuple[float, float]:
        return _statement(params).epsilon0, params.delta

    def limit(self, params: GaussianMeanParams) -> float:
        return params.delta

    def certify(self, params: GaussianMeanParams, gamma: np.ndarray, **options: Any) -> GaussianMeanCertificate:
        if np.asarray(gamma).size:
            return GaussianMeanCertificate(False, "a Gaussian mean release has no γ", params.delta, math.inf, math.inf,
                                       params.noise, 0.0, 0.0, 0.0, 0.0)
        return _statement(params)

    def profile(self, params: GaussianMeanParams, gamma: np.ndarray) -> GaussianProfile:
        from darrm_opt.privacy.gaussian_mean import mean_profile

        return mean_profile(params)

    def solve(self, params: GaussianMeanParams, *, solver: str = "closed-form", teachers: str | None = None,
              progress: Any = None) -> Solved:
        t = time.perf_counter()
        table = self.certify_table(params, [], teachers=teachers)
        return Solved(table, "closed-form", time.perf_counter() - t)

    def solve_cost_key(self, params: GaussianMeanParams) -> None:
        """No LP: the release its parameters define, certified in closed form."""
        return None

    def expected_error(self, params: GaussianMeanParams, gamma: np.ndarray) -> float:
        return params.dim * params.sigma**2

    def certificate_from(self, data: Mapping[str, Any]) -> GaussianMeanCertificate:
        try:
            return GaussianMeanCertificate(**{f.name: data[f.name] for f in fields(GaussianMeanCertificate)})
        except (KeyError, TypeError):
            raise InvalidParameter("certificate", "is not a Gaussian mean certificate") from None

    def check_profile(self, params: GaussianMeanParams, gamma: np.ndarray, stored: Any, certificate: Any,
                      **options: Any) -> Any:
        """Valid when the stored pair dominates the release's: a Gaussian pair with continuous noise, σ at most
        τ and shift at least Δ′ (its δ(ε) is then at least the release's at every ε)."""
        from darrm_opt.privacy.statements import ProfileCheck

        ours = self.profile(params, gamma)
        if not isinstance(stored, GaussianProfile) or stored.discrete:
            return ProfileCheck("optimistic", 1, "type", "the release's pair is a continuous Gaussian pair")
        if stored.sigma > ours.sigma or stored.sensitivity < ours.sensitivity:
            return ProfileCheck("optimistic", 1, "pair", f"σ {stored.sigma!r} > τ {ours.sigma!r} or shift "
                                f"{stored.sensitivity!r} < Δ′ {ours.sensitivity!r}")
        return ProfileCheck("valid", 1)

    def verdict_line(self, params: GaussianMeanParams, certificate: Any) -> str:
        verdict = "CERTIFIED" if certificate.certified else "NOT CERTIFIED"
        return (f"certificate: {verdict}: one answer is ({certificate.epsilon0:.6g}, {certificate.delta0:.3g})-DP: "
                f"δ({certificate.epsilon0:.6g}) = {certificate.delta_at_epsilon0:.6g} for the pair N(0, τ²), "
                f"N(Δ′, τ²), τ = {certificate.tau:.10g}, Δ′ = {certificate.sensitivity:.10g} (lattice units, "
                f"μ = {certificate.mu:.6g}; discrete noise n = {certificate.noise}, smoothing η ≤ "
                f"{certificate.eta:.3g})")

    def describe(self, params: GaussianMeanParams) -> str:
        return (f"the Gaussian mean of K = {params.K} vectors of dim {params.dim}, clip radius {params.radius:g}, "
                f"σ = {params.sigma:.6g} (lattice {params.lattice!r}, noise {params.noise}), per answer "
                f"δ₀ = {params.delta:.3g}")

    def private_as(self, params: GaussianMeanParams) -> str:
        return f"(ε₀, {params.delta:.3g})-DP per answer"

    def sampler(self, table: CertifiedTable, random_bytes: RandomBytes) -> GaussianMeanSampler:
        return GaussianMeanSampler(table.params, random_bytes)


def gaussian_mean_table(params: GaussianMeanParams) -> CertifiedTable:
    """The certified table of a Gaussian mean release (CertificationFailed if its statement does not hold)."""
    table = GaussianMean().certify_table(params, [], teachers="disjoint-nonprivate")
    if table.profile is None:  # pragma: no cover - certify_table computes it
        raise CertificationFailed("the release has no profile")
    return table
