"""DaRRM in the PATE setting (Papernot et al. 2018): K non-private teachers on disjoint shards, 0/1 votes.

A neighbouring dataset changes one shard, so one teacher's vote: L moves to L ± 1. The table γ(0..K) is
(ε, δ)-DP per answer iff every (l, l ± 1, output) row of :mod:`darrm_opt.model.neighbours` holds; its
privacy profile is exact over those finitely many pairs (:mod:`darrm_opt.privacy.pair_profile`). For an
even K the tie L = K/2 is answered by a fair coin, so its table states γ(K/2) = 0 (the tie rule of
:mod:`darrm_opt.model.neighbours`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import Field

from darrm_opt.certify.pairs import PairCertificate
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.neighbours import PateParams

from .base import Example, Mechanism, Solved
from .outputs import BinaryTableOut


def check_tie(K: int, gamma: np.ndarray) -> np.ndarray:
    """``gamma``, refused (InvalidParameter naming ``gamma``) unless γ(K/2) = 0 for an even K: the tie is
    answered by a fair coin whatever γ(K/2), and a table states the one value with that meaning."""
    if K % 2 == 0 and gamma[K // 2] != 0.0:
        raise InvalidParameter("gamma", f"γ(K/2) = γ({K // 2}) must be 0 for an even K (the tie L = K/2 is "
                               "answered by a fair coin)", float(gamma[K // 2]))
    return gamma


class DarrmPateTableOut(BinaryTableOut):
    """A served darrm-pate table."""

    kind: Literal["darrm-pate"]
    subsample: int | None = Field(None, description="m: each answer reads a uniform random m of the K teachers "
                                                    "(null: all K); gamma is then the m-teacher table γ(0..m)")


class DarrmPate(Mechanism):
    kind = "darrm-pate"
    output_model = DarrmPateTableOut
    solve_view = "darrm_opt.cli.solve:pate_view"
    per_answer_offers = True
    subsampling = True
    params_type = PateParams
    settings = ("disjoint-nonprivate",)
    summary = "DaRRM majority of 0/1 votes of non-private teachers on disjoint shards (PATE setting)"
    max_K = 1001  # its LP holds a dense 4K × (K + 1) matrix: 32 MB at 1001
    document_fields = ("K", "teachers", "epsilon", "delta", "gamma")  # epsilon: the per-answer ε
    absent_fields = ("m", "teacher_delta")
    absent_reason = "non-private teachers have no allowance m and no teacher Δ"

    def examples(self) -> tuple[Example, ...]:
        return (Example(PateParams(5, 0.5, 1e-5), {"K": 5, "queries": 10, "budget_epsilon": 2.0,
                                                    "budget_delta": 1e-5}),
                Example(PateParams(7, 0.8, 1e-5, subsample=3), {"K": 7, "queries": 10, "budget_epsilon": 2.0,
                                                                "budget_delta": 1e-5, "subsample": 3}))

    def params_from(self, data: Mapping[str, Any]) -> PateParams:
        """Documents state the per-answer ε as ``epsilon``, requests as ``target_epsilon``; δ defaults to 0."""
        eps = data["target_epsilon"] if data.get("target_epsilon") is not None else data.get("epsilon")
        delta = 0.0 if data.get("delta") is None else data["delta"]
        return PateParams(data.get("K"), eps, delta, data.get("prior") or "paper",  # type: ignore[arg-type]
                          data.get("subsample"))

    def table_size(self, params: PateParams) -> int:
        """m + 1 values: the table of the m teachers each answer reads."""
        return params.m + 1

    def check_gamma(self, params: PateParams, gamma) -> np.ndarray:  # noqa: ANN001
        return check_tie(params.m, super().check_gamma(params, gamma))

    def per_answer(self, params: PateParams) -> tuple[float, float]:
        """(ε, δ) of the table; with ``subsample`` m of K, (ln(1 + γ(e^ε − 1)), γδ) rounded up, γ = m/K (Balle,
        Barthe, Gaboardi 2018, Thm 10)."""
        if params.subsample is None:
            return params.epsilon, params.delta
        from darrm_opt.privacy.subsample import amplified_delta, amplified_epsilon

        return (amplified_epsilon(params.epsilon, params.m, params.K),
                amplified_delta(params.delta, params.m, params.K))

    def limit(self, params: PateParams) -> float:
        return params.bound

    def check_profile(self, params: PateParams, gamma: np.ndarray, stored, certificate, **options: Any):  # noqa: ANN001, ANN201
        from darrm_opt.privacy.pair_profile import pate_profile_check

        if params.subsample is None:
            return pate_profile_check(params, gamma, stored)
        from darrm_opt.privacy.statements import ProfileCheck

        true = self.profile(params, gamma)  # the amplified pair: a stored one is valid iff it is never below it
        if stored.dominates(true):
            return ProfileCheck("valid", len(true.vertices) + len(true.support))
        return ProfileCheck("optimistic", len(true.vertices) + len(true.support), "envelope",
                            "below the amplified pair of the m-teacher table's exact profile")

    def verdict_line(self, params: PateParams, certificate) -> str:  # noqa: ANN001
        verdict = "CERTIFIED" if certificate.certified else "NOT CERTIFIED"
        return (f"certificate: {verdict}: max privacy cost {certificate.max_privacy_cost:.12g} vs bound "
                f"{certificate.bound:.12g} over all {certificate.pairs_checked} (l, l ± 1, output) rows of the PATE "
                f"setting ({certificate.high_precision_checked} re-checked in interval arithmetic, 40 to 320 "
                "digits)")

    def describe(self, params: PateParams) -> str:
        if params.subsample is not None:
            eps0, delta0 = self.per_answer(params)
            return (f"the PATE-setting table of m = {params.m} teachers sampled from K = {params.K} per answer "
                    f"(disjoint-nonprivate), table ε = {params.epsilon:g}, δ = {params.delta:.3g}, per answer "
                    f"ε = {eps0:.6g}, δ = {delta0:.3g} by amplification")
        return (f"the PATE-setting table K = {params.K} (disjoint-nonprivate), per answer ε = {params.epsilon:g}, "
                f"δ = {params.delta:.3g}")

    def certify(self, params: PateParams, gamma: np.ndarray, **options: Any) -> PairCertificate:
        from darrm_opt.certify.pairs import certify_pairs

        return certify_pairs(params.inner(), gamma)

    def profile(self, params: PateParams, gamma: np.ndarray):  # noqa: ANN201
        from darrm_opt.privacy.pair_profile import pate_profile

        if params.subsample is None:
            return pate_profile(params, gamma)
        from darrm_opt.privacy.subsample import amplify_profile

        return amplify_profile(pate_profile(params.inner(), gamma), params.m, params.K)

    def solve(self, params: PateParams, *, solver: str, teachers: str | None = None, progress=None) -> Solved:  # noqa: ANN001
        from darrm_opt.optimize.pate_setting import solve_pate

        return self.solved(params, solve_pate(params.inner(), solver=solver), teachers)  # CertificationFailed if not

    def expected_error(self, params: PateParams, gamma: np.ndarray) -> float:
        from darrm_opt.model.objective import expected_error

        g = np.asarray(gamma, dtype=np.float64)
        if params.subsample is not None:  # against the majority of all K (docs/maths.md, subsampled teachers)
            from darrm_opt.model.neighbours import subsampled_table

            g = subsampled_table(params.K, g)
        return float(expected_error(g, params.prior))

    def certificate_from(self, data: Mapping[str, Any]) -> PairCertificate:
        return PairCertificate(**{k: data[k] for k in PairCertificate.__dataclass_fields__ if k in data})

    def plan(self, job, progress=None):  # noqa: ANN001, ANN201
        """The PATE-setting plan (:func:`darrm_opt.planning.pate_plan.plan_pate`) for 0/1-vote jobs."""
        if job.classes is not None or job.teachers not in self.settings:
            return None
        from darrm_opt.planning.job import Offer
        from darrm_opt.planning.pate_plan import plan_pate

        sol, profile, spent, info = plan_pate(job, progress)
        table = self.table(sol.params, sol.gamma, sol.certificate, job.teachers, profile)
        return Offer(self.kind, table, sol.expected_error, spent, self.offer_details(table, info["accounting"]),
                     info["seconds"], plan=info, solution=sol)

    def sampler(self, table, random_bytes):  # noqa: ANN001, ANN201
        from .vote_samplers import BinarySampler, SubsampledBinarySampler

        if table.params.subsample is not None:
            return SubsampledBinarySampler(table.params.K, table.gamma, random_bytes)
        return BinarySampler(table.gamma, random_bytes)
