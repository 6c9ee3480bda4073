"""GNMax and Confident-GNMax (PATE, Papernot et al. 2018) as kinds of release, with discrete Gaussian noise.

GNMax answers argmax_c (h_c + Z_c), Z_c ~ N_ℤ(0, σ²) independent (Canonne, Kamath, Steinke 2020), ties
among the noisy maxima broken uniformly. When one teacher changes its vote the histogram moves by
e_a − e_b, so a GNMax answer is post-processing of the pair (N_ℤ(0, σ²)², N_ℤ((1, 1), σ²)) (by symmetry
of each coordinate): :class:`darrm_opt.privacy.gaussian_profile.GaussianProfile` ``(σ, (1, 1))``, which the
ledger composes exactly. Confident-GNMax (PATE Alg. 1) releases 1{max_c h_c + Z ≥ T}, Z ~ N_ℤ(0, σ₁²)
(the maximum moves by at most 1), and then, if it passed, GNMax with σ₂; the adaptive composition of the
two is dominated by the product pair, shifts (1, 1, 1) with σ = (σ₁, σ₂, σ₂). Otherwise it abstains: the
answer ⊥ is written −1 (in the sampler's int16 output, JSON, CSV and the service alike).

The release is defined by its parameters alone: ``gamma`` is empty. The certificate (:class:`GaussianPldCertificate`)
states the per-answer (ε₀, δ₀) at δ₀ = DELTA0, read off the exact profile's pessimistic PLD and checked
(δ(ε₀) ≤ δ₀ recomputed). Its expected error: :mod:`darrm_opt.model.gnmax`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from darrm_opt.certify.verdict import VerdictFields
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.gnmax import (
    ConfidentGnmaxParams,
    GnmaxParams,
    abstain_probability,
    confident_error,
    subsampled_gnmax_error,
)
from darrm_opt.privacy.gaussian_profile import GaussianProfile

from .base import Example, Mechanism, Solved, certificate_of_fields, exact_pair_check
from .outputs import GaussianTableOut

#: the per-answer δ₀ at which a Gaussian table's certificate states its ε₀
DELTA0 = 1e-10
#: loss interval of the PLD the certificate reads ε₀ off (pessimistic: every loss rounded up)
CERT_INTERVAL = 1e-4
#: the answer written for ⊥ (Confident-GNMax abstains)
ABSTAIN = -1


@dataclass(frozen=True)
class GaussianPldCertificate(VerdictFields):
    """The per-answer (ε₀, δ₀) of a Gaussian release: ε₀ read off its dominating pair's pessimistic PLD at
    δ₀, and δ(ε₀) recomputed from that PLD (``delta_at_epsilon0`` ≤ δ₀ certifies)."""

    certified: bool
    epsilon0: float
    delta0: float
    delta_at_epsilon0: float
    pair: str
    pld_interval: float
    reason: str = ""

    verdict_fields: ClassVar[tuple[str, str, str, str]] = ("delta0", "delta_at_epsilon0", "checked_pairs",
                                                           "worst_pair")
    what: ClassVar[str] = "dominating pairs"

    @property
    def checked_pairs(self) -> int:
        return 1

    @property
    def worst_pair(self) -> list[int]:
        return []

    def to_dict(self) -> dict:
        return asdict(self)


@lru_cache(maxsize=256)
def _certificate(profile: GaussianProfile) -> GaussianPldCertificate:
    """ε₀ at DELTA0 off the pessimistic PLD, bumped until δ(ε₀) ≤ δ₀ holds on that PLD."""
    from darrm_opt.privacy.pld import delta_at, epsilon_at

    pld = profile.to_pld(CERT_INTERVAL)
    eps = epsilon_at(pld, DELTA0)
    d = delta_at(pld, eps) if math.isfinite(eps) else 1.0
    for _ in range(64):
        if d <= DELTA0 or not math.isfinite(eps):
            break
        eps = math.nextafter(eps, math.inf) + CERT_INTERVAL
        d = delta_at(pld, eps)
    ok = d <= DELTA0 and math.isfinite(eps)
    pair = ", ".join(f"N_Z({s:g}, {x:g}^2)" for s, x in zip(profile.shifts, profile.coordinate_sigmas))
    pair = f"N_Z(0, σ²) per coordinate against {pair}"
    if profile.subsample is not None:
        pair += (f", amplified for {profile.subsample[0]} of {profile.subsample[1]} teachers sampled per answer "
                 "(BBG 2018 Thm 10)")
    return GaussianPldCertificate(ok, eps, DELTA0, d, pair, CERT_INTERVAL,
                               "" if ok else f"δ(ε₀) = {d:g} > δ₀ = {DELTA0:g}")


#: the job of the Gaussian kinds' examples: 3 classes, one answer within (4, 1e-3) (a few seconds to calibrate;
#: more answers at a smaller δ take a minute)
_EXAMPLE_JOB = {"K": 5, "classes": 3, "queries": 1, "budget_epsilon": 4.0, "budget_delta": 1e-3}


class GnmaxTableOut(GaussianTableOut):
    """A served gnmax release."""

    kind: Literal["gnmax"]
    subsample: int | None = Field(None, description="m: each answer runs GNMax on a uniform random m of the K "
                                                    "teachers (null: all K)")


class ConfidentGnmaxTableOut(GaussianTableOut):
    """A served confident-gnmax release."""

    kind: Literal["confident-gnmax"]


class _GaussianKind(Mechanism):
    """What GNMax and Confident-GNMax share."""

    settings = ("disjoint-nonprivate",)
    labels = True
    max_K = 2000
    absent_fields = ("m", "teacher_delta", "target_epsilon")
    absent_reason = "a Gaussian release of non-private teachers has no allowance m, teacher Δ or target ε"

    def table_size(self, params: Any) -> int:
        return 0

    def per_answer(self, params: Any) -> tuple[float, float]:
        cert = _certificate(self.profile(params, np.zeros(0)))
        return cert.epsilon0, cert.delta0

    def limit(self, params: Any) -> float:
        return DELTA0

    def certify(self, params: Any, gamma: np.ndarray, **options: Any) -> GaussianPldCertificate:
        return _certificate(self.profile(params, gamma))

    def table(self, params: Any, gamma: Any, certificate: Any, teachers: str | None = None,
              profile: Any = None) -> Any:
        """As every kind's, and the certificate's statement (stored or given) is proven for these parameters
        (one PLD read): δ(ε₀) ≤ δ₀ on this release's pessimistic PLD. A document whose σ was lowered under
        its certificate is refused."""
        cert = self.certificate_from(certificate) if isinstance(certificate, Mapping) else certificate
        if cert != self.certify(params, np.zeros(0)):
            from darrm_opt.privacy.pld import delta_at

            ok = cert.certified is True and cert.delta0 == DELTA0 and math.isfinite(cert.epsilon0) and \
                cert.epsilon0 >= 0 and delta_at(self.profile(params, np.zeros(0)).to_pld(CERT_INTERVAL),
                                                cert.epsilon0) <= DELTA0
            if not ok:
                raise InvalidParameter("certificate", f"does not hold for this {self.kind} table's parameters")
        if profile is not None and profile != self.profile(params, np.zeros(0)):
            raise InvalidParameter("privacy_profile", f"is not the Gaussian pair of this {self.kind} table")
        return super().table(params, gamma, cert, teachers, profile)

    def certificate_from(self, data: Mapping[str, Any]) -> GaussianPldCertificate:
        return certificate_of_fields(GaussianPldCertificate, data, "a Gaussian release's certificate")

    def check_profile(self, params: Any, gamma: np.ndarray, stored: Any, certificate: Any, **options: Any) -> Any:
        """A stored Gaussian profile is valid iff it is exactly this release's pair (any other is refused)."""
        return exact_pair_check(self.profile(params, gamma), stored, "Gaussian pair")

    def verdict_line(self, params: Any, certificate: Any) -> str:
        head = "CERTIFIED" if certificate.certified else "NOT CERTIFIED"
        return (f"certificate: {head}: per answer (ε₀, δ₀) = ({certificate.epsilon0:.6g}, {certificate.delta0:g}) "
                f"read off the exact dominating pair ({certificate.pair}; pessimistic PLD, interval "
                f"{certificate.pld_interval:g}), δ(ε₀) = {certificate.delta_at_epsilon0:.3g}")

    def solve(self, params: Any, *, solver: str, teachers: str | None = None, progress: Any = None) -> Solved:
        """Nothing to optimise: the release its parameters define, certified."""
        t0 = time.perf_counter()
        table = self.certify_table(params, np.zeros(0), teachers=teachers)
        return Solved(table, "closed-form", time.perf_counter() - t0)

    def solve_size(self, params: Any) -> int:
        return 1

    def solve_cost_key(self, params: Any) -> None:
        """No LP: the release its parameters define (its certificate is one PLD read)."""
        return None

    def private_as(self, params: Any) -> str:
        return f"(ε₀, δ₀ = {DELTA0:g})-DP by its Gaussian pair"


class Gnmax(_GaussianKind):
    kind = "gnmax"
    output_model = GnmaxTableOut
    params_type = GnmaxParams
    summary = "GNMax: the argmax of the vote histogram plus discrete Gaussian noise per class (PATE setting)"
    document_fields = ("K", "classes", "teachers", "sigma")
    subsampling = True
    search_details = ("candidates",)  # every m its plan tried (planning.gaussian_plan.plan_gnmax)

    def examples(self) -> tuple[Example, ...]:
        return (Example(GnmaxParams(5, 3, 2.0), _EXAMPLE_JOB),
                Example(GnmaxParams(5, 3, 1.5, subsample=3), {**_EXAMPLE_JOB, "subsample": 3}))

    def params_from(self, data: Mapping[str, Any]) -> GnmaxParams:
        return GnmaxParams(data.get("K"), data.get("classes"), data.get("sigma"),  # type: ignore[arg-type]
                           data.get("prior") or "paper", data.get("subsample"))

    def profile(self, params: GnmaxParams, gamma: np.ndarray) -> GaussianProfile:
        """The pair (σ, (1, 1)); with ``subsample`` m of K, its amplified pair (BBG 2018 Thm 10 as an exact
        finite pair: :mod:`darrm_opt.privacy.gaussian_profile`)."""
        sub = None if params.subsample is None else (params.subsample, params.K)
        return GaussianProfile(params.sigma, (1, 1), subsample=sub)

    def expected_error(self, params: GnmaxParams, gamma: np.ndarray) -> float:
        """:func:`~darrm_opt.model.gnmax.subsampled_gnmax_error` (GNMax's error when every teacher is read)."""
        return subsampled_gnmax_error(params.K, params.m, params.C, params.sigma, params.prior)

    def describe(self, params: GnmaxParams) -> str:
        reads = "" if params.subsample is None else f", each answer on a uniform {params.m} of the {params.K} teachers"
        return (f"GNMax K = {params.K}, C = {params.C} (disjoint-nonprivate), noise N_Z(0, σ²) per class with "
                f"σ = {params.sigma:.6g}{reads}")

    def sampler(self, table: Any, random_bytes: Any) -> Any:
        from .vote_samplers import GnmaxSampler, SubsampledGnmaxSampler

        p = table.params
        if p.subsample is not None:
            return SubsampledGnmaxSampler(p.K, p.C, p.sigma, p.subsample, random_bytes)
        return GnmaxSampler(p.K, p.C, p.sigma, random_bytes)

    def offer_details(self, table: Any, composition: str) -> dict[str, Any]:
        """The calibrated σ and the teachers each answer reads."""
        return {"sigma": table.params.sigma, "subsample": table.params.m}

    def plan(self, job: Any, progress: Any = None) -> Any:
        from darrm_opt.planning.gaussian_plan import plan_gnmax

        return plan_gnmax(self, job)

    def plan_data_dependent(self, job: Any) -> Any:
        """GNMax under data-dependent accounting: σ, λ, β, σ_SS from
        :func:`darrm_opt.planning.data_dependent.plan_from_prior` (public histograms of the job's prior),
        the certified GNMax table at that σ (its expected error under the prior), and the data-dependent
        ledger's policy that runs it (validated here). None outside the PATE setting or without a class-label
        prior (0/1 votes)."""
        from darrm_opt.ledger.dd_account import DataDependentPolicy
        from darrm_opt.model.multiclass import MulticlassPrior
        from darrm_opt.planning.data_dependent import OFFER_CONVERSION, plan_from_prior
        from darrm_opt.planning.gaussian_plan import SETTING, classes_and_prior
        from darrm_opt.planning.job import Offer
        from darrm_opt.privacy.pld import exact_epsilon

        if job.teachers != SETTING or job.subsample is not None:  # its policy reads every teacher
            return None
        t0 = time.perf_counter()
        C, prior = classes_and_prior(job)
        checked = GnmaxParams(job.K, C, 1.0, prior)
        if not isinstance(checked.prior, MulticlassPrior):
            return None
        if not job.budget_delta > 0:
            raise InvalidParameter("budget_delta", "data-dependent accounting needs δ > 0", job.budget_delta)
        plan = plan_from_prior(checked.prior, job.K, C, job.queries, job.budget_epsilon, job.budget_delta)
        policy = DataDependentPolicy("gnmax", job.K, C, plan.sigma, plan.order, plan.beta, plan.sigma_ss,
                                     job.budget_delta, job.queries, conversion=OFFER_CONVERSION)
        params = GnmaxParams(job.K, C, plan.sigma, prior)
        table = self.certify_table(params, np.zeros(0), teachers=SETTING)
        details = {"sigma": plan.sigma, "order": plan.order, "beta": plan.beta, "sigma_ss": plan.sigma_ss,
                   "expected_rdp": plan.rdp, "expected_smooth_sensitivity": plan.ss, "gnss_epsilon": plan.gnss,
                   "dp_tail": plan.tail, "over_share": plan.over,
                   "data_independent_epsilon": exact_epsilon([(self.profile(params, np.zeros(0)), job.queries)],
                                                             job.budget_delta)}
        return Offer(self.kind, table, table.expected_error, plan.total, details, time.perf_counter() - t0,
                     accounting="data-dependent", policy=json.loads(policy.to_json()))


class ConfidentGnmax(_GaussianKind):
    kind = "confident-gnmax"
    output_model = ConfidentGnmaxTableOut
    params_type = ConfidentGnmaxParams
    summary = ("Confident-GNMax: ⊥ (written −1) unless the top count plus discrete Gaussian noise reaches T, "
               "else GNMax (PATE setting)")
    document_fields = ("K", "classes", "teachers", "threshold", "sigma1", "sigma2")

    def examples(self) -> tuple[Example, ...]:
        return (Example(ConfidentGnmaxParams(5, 3, 3.0, 2.5, 2.0), _EXAMPLE_JOB),)

    def params_from(self, data: Mapping[str, Any]) -> ConfidentGnmaxParams:
        return ConfidentGnmaxParams(data.get("K"), data.get("classes"), data.get("threshold"),  # type: ignore[arg-type]
                                    data.get("sigma1"), data.get("sigma2"),  # type: ignore[arg-type]
                                    data.get("prior") or "paper")

    def profile(self, params: ConfidentGnmaxParams, gamma: np.ndarray) -> GaussianProfile:
        return GaussianProfile(params.sigma2, (1, 1, 1), sigmas=(params.sigma1, params.sigma2, params.sigma2))

    def expected_error(self, params: ConfidentGnmaxParams, gamma: np.ndarray) -> float:
        return confident_error(params)

    def describe(self, params: ConfidentGnmaxParams) -> str:
        return (f"Confident-GNMax K = {params.K}, C = {params.C} (disjoint-nonprivate): ⊥ unless the top count "
                f"+ N_Z(0, σ₁²) ≥ T = {params.threshold:g} (σ₁ = {params.sigma1:.6g}), else GNMax with "
                f"σ₂ = {params.sigma2:.6g}")

    def sampler(self, table: Any, random_bytes: Any) -> Any:
        from .vote_samplers import GnmaxSampler

        p = table.params
        return GnmaxSampler(p.K, p.C, p.sigma2, random_bytes, threshold=p.threshold, sigma1=p.sigma1)

    def offer_details(self, table: Any, composition: str) -> dict[str, Any]:
        """The calibrated σ₁, σ₂ and threshold, and how often it abstains under the prior."""
        p = table.params
        return {"sigma1": p.sigma1, "sigma2": p.sigma2, "threshold": p.threshold,
                "abstain_probability": abstain_probability(p)}

    def plan(self, job: Any, progress: Any = None) -> Any:
        from darrm_opt.planning.gaussian_plan import plan_confident

        return plan_confident(self, job)
