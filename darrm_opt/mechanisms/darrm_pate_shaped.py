"""Composition-shaped DaRRM in the PATE setting: a binary table whose whole privacy profile stays under a target
curve, for jobs of many answers.

Non-private teachers on disjoint shards, 0/1 votes, the binary sampler of ``darrm-pate`` (Algorithm 1; a tie
of an even K is a fair coin). Its parameters (:class:`~darrm_opt.model.shaped.ShapedPateParams`) state the
target (generalized normal, shape β, scale α) and its J slopes; its certificate checks the profile under the
target at every slope exactly (:mod:`darrm_opt.certify.shaped`); its profile is the exact pair profile the
ledger composes. ``plan`` calibrates α so that Q answers compose within the job's budget
(:mod:`darrm_opt.planning.shaped_plan`) and offers that table.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from darrm_opt.certify.shaped import ShapedCertificate
from darrm_opt.model.shaped import ShapedPateParams

from .base import Example, Mechanism, SolveCostKey, Solved
from .darrm_pate import check_tie
from .outputs import ShapedTableOut

#: the target shapes ``plan`` calibrates, the most accurate offered (K = 250, Q = 100, (2, 1e-5): β = 3 under
#: the paper's prior, β = 2, GNMax's curve, under Beta(9, 1): benchmarks/shaped_tables.py)
PLAN_SHAPES = (2.0, 3.0)


class DarrmPateShapedTableOut(ShapedTableOut):
    """A served darrm-pate-shaped table."""

    kind: Literal["darrm-pate-shaped"]


class DarrmPateShaped(Mechanism):
    kind = "darrm-pate-shaped"
    output_model = DarrmPateShapedTableOut
    params_type = ShapedPateParams
    settings = ("disjoint-nonprivate",)
    search_details = ("scales_tried",)
    summary = ("composition-shaped DaRRM majority of 0/1 votes of non-private teachers (PATE setting): its privacy "
               "profile under a target curve, for many answers")
    max_K = 501  # a cutting-plane LP over 4K rows per slope
    document_fields = ("K", "teachers", "beta", "target_scale", "slopes", "slope_max", "gamma")
    absent_fields = ("m", "teacher_delta", "classes")
    absent_reason = "non-private teachers have no allowance m and no teacher Δ; the votes are 0/1"

    def examples(self) -> tuple[Example, ...]:
        return (Example(ShapedPateParams(6, 3.0, 2.0, 8, 1.0), {"K": 7, "queries": 10, "budget_epsilon": 2.0,
                                                                 "budget_delta": 1e-5}),)

    def params_from(self, data: Mapping[str, Any]) -> ShapedPateParams:
        family = data.get("target_family", "gennorm")
        if family != "gennorm":
            from darrm_opt.errors import InvalidParameter

            raise InvalidParameter("target_family", "must be 'gennorm' (generalized normal)", family)
        return ShapedPateParams(data.get("K"), data.get("beta"), data.get("target_scale"),  # type: ignore[arg-type]
                                data.get("slopes"), data.get("slope_max"),  # type: ignore[arg-type]
                                data.get("prior") or "paper")  # type: ignore[arg-type]

    def check_gamma(self, params: ShapedPateParams, gamma) -> np.ndarray:  # noqa: ANN001
        return check_tie(params.K, super().check_gamma(params, gamma))

    def per_answer(self, params: ShapedPateParams) -> tuple[float, float]:
        """The last slope point (ε_max, δ_T(ε_max)), one of the statements its certificate proves."""
        eps, target = params.slope_points()
        return float(eps[-1]), float(target[-1])

    def limit(self, params: ShapedPateParams) -> float:
        return 1.0

    def certify(self, params: ShapedPateParams, gamma: np.ndarray, **options: Any) -> ShapedCertificate:
        from darrm_opt.certify.shaped import certify_shaped

        return certify_shaped(params, gamma)

    def profile(self, params: ShapedPateParams, gamma: np.ndarray):  # noqa: ANN201
        from darrm_opt.planning.shaped_plan import shaped_profile

        return shaped_profile(params, gamma)

    def check_profile(self, params: ShapedPateParams, gamma: np.ndarray, stored, certificate,  # noqa: ANN001
                      **options: Any):  # noqa: ANN201
        from darrm_opt.privacy.pair_profile import pate_family
        from darrm_opt.privacy.statements import check_family_profile

        return check_family_profile(pate_family(params.K, np.asarray(gamma, dtype=np.float64)), stored)

    def verdict_line(self, params: ShapedPateParams, certificate) -> str:  # noqa: ANN001
        verdict = "CERTIFIED" if certificate.certified else "NOT CERTIFIED"
        return (f"certificate: {verdict}: the profile under the generalized normal target (β = {params.beta:g}, "
                f"scale {params.scale:.6g}) at all {certificate.slopes_checked} slopes up to ε′ = "
                f"{params.slope_max:g}: largest row cost {certificate.max_ratio:.12g} of its bound over "
                f"{certificate.rows_checked} (slope, l, l ± 1, output) rows ({certificate.high_precision_checked} "
                "re-checked in interval arithmetic)" + ("" if certificate.certified else f": {certificate.reason}"))

    def describe(self, params: ShapedPateParams) -> str:
        return (f"the composition-shaped PATE-setting table K = {params.K} (disjoint-nonprivate), target generalized "
                f"normal β = {params.beta:g}, scale {params.scale:.6g}, {params.slopes} slopes up to "
                f"ε′ = {params.slope_max:g}")

    def private_as(self, params: ShapedPateParams) -> str:
        return "under its target privacy curve at every slope"

    def solve(self, params: ShapedPateParams, *, solver: str, teachers: str | None = None,
              progress=None) -> Solved:  # noqa: ANN001
        from darrm_opt.optimize.shaped import solve_shaped

        return self.solved(params, solve_shaped(params, solver=solver), teachers)  # CertificationFailed if not

    def solve_size(self, params: ShapedPateParams) -> int:
        return 4 * params.K * params.slopes

    def solve_cost_key(self, params: ShapedPateParams) -> SolveCostKey:
        """By K·slopes: its cutting-plane LP draws its rows from 4K per slope."""
        return SolveCostKey(self.kind, float(params.K * params.slopes), "K·slopes", value=params.K)

    def expected_error(self, params: ShapedPateParams, gamma: np.ndarray) -> float:
        from darrm_opt.model.objective import expected_error

        return float(expected_error(np.asarray(gamma, dtype=np.float64), params.prior))

    def certificate_from(self, data: Mapping[str, Any]) -> ShapedCertificate:
        return ShapedCertificate(**{k: data[k] for k in ShapedCertificate.__dataclass_fields__ if k in data})

    def sampler(self, table, random_bytes):  # noqa: ANN001, ANN201
        from .vote_samplers import BinarySampler

        return BinarySampler(table.gamma, random_bytes)

    def offer_details(self, table: Any, composition: str) -> dict[str, Any]:
        """The calibrated shape: β, the target's scale, its slopes and their cap, and γ."""
        p = table.params
        return {"beta": p.beta, "target_scale": p.scale, "slopes": p.slopes, "slope_max": p.slope_max,
                "gamma": list(table.gamma)}

    def plan(self, job: Any, progress: Any = None) -> Any:
        """The calibrated shaped table for a binary PATE-setting job (None for other settings, class labels or
        K above ``max_K``): for each shape of PLAN_SHAPES the smallest scale whose Q answers compose within
        the budget, the most accurate offered, its ε the exact composition of its own profile."""
        if job.teachers != "disjoint-nonprivate" or job.classes is not None or job.K > (self.max_K or job.K):
            return None
        from darrm_opt.planning.job import Offer
        from darrm_opt.planning.shaped_plan import calibrate_shaped

        plans: list[Any] = []
        for beta in PLAN_SHAPES:
            warm = plans[-1].solution.active if plans else None
            plans.append(calibrate_shaped(job.K, job.queries, job.budget_epsilon, job.budget_delta, job.prior,
                                          beta=beta, solver=job.solver, warm=warm))
        best = min(plans, key=lambda p: p.solution.expected_error)
        sol = best.solution
        table = self.table(sol.params, sol.gamma, sol.certificate, "disjoint-nonprivate", best.profile)
        return Offer(self.kind, table, table.expected_error, best.epsilon_spent,
                     {**self.offer_details(table, "exact"), "scales_tried": best.tried}, best.seconds)
