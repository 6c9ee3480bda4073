"""Composition-shaped multi-class DaRRM in the PATE setting: the rule of ``darrm-multiclass`` (the plurality
class with probability γ(g), else a uniform class) with its whole privacy profile under a target curve, for
jobs of many answers.

Its parameters (:class:`~darrm_opt.model.shaped.ShapedMulticlassParams`) state the target (generalized
normal, shape β, scale α) and its J slopes; its certificate checks (MC-2) under the target at every slope
(:mod:`darrm_opt.certify.shaped`); its profile is the exact histogram-type profile the ledger composes;
``plan`` calibrates α so that Q answers compose within the job's budget. Sampling is the multi-class sampler.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from darrm_opt.certify.shaped import ShapedMulticlassCertificate
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.shaped import ShapedMulticlassParams

from .base import Example, Mechanism, SolveCostKey, Solved
from .outputs import ShapedTableOut

#: the target shapes ``plan`` calibrates (K = 250, C = 10, Q = 100, (2, 1e-5), paper prior: β = 3 6.8e-4
#: against β = 2 9.4e-4; benchmarks/shaped_tables.py)
PLAN_SHAPES = (3.0,)


class DarrmMulticlassShapedTableOut(ShapedTableOut):
    """A served darrm-multiclass-shaped table."""

    kind: Literal["darrm-multiclass-shaped"]


class DarrmMulticlassShaped(Mechanism):
    kind = "darrm-multiclass-shaped"
    output_model = DarrmMulticlassShapedTableOut
    # today's multi-class rule keeps its shaped tables far above GNMax (0.028 → 6.8e-4 against 4.0e-5 at
    # K = 250, C = 10, Q = 100; docs/shaped-tables.md) and calibrating one costs ~45 s there: planned when
    # asked for (plan --mechanism darrm-multiclass-shaped)
    planned_by_default = False
    params_type = ShapedMulticlassParams
    settings = ("disjoint-nonprivate",)
    search_details = ("scales_tried",)
    labels = True
    summary = ("composition-shaped multi-class DaRRM (PATE setting): its privacy profile under a target curve, "
               "for many answers")
    max_K = 501
    document_fields = ("K", "classes", "teachers", "beta", "target_scale", "slopes", "slope_max", "gamma")
    absent_fields = ("m", "teacher_delta")
    absent_reason = "non-private teachers have no allowance m and no teacher Δ"

    def examples(self) -> tuple[Example, ...]:
        return (Example(ShapedMulticlassParams(5, 3, 3.0, 2.0, 8, 1.0), {"K": 5, "classes": 3, "queries": 10,
                                                                          "budget_epsilon": 4.0,
                                                                          "budget_delta": 1e-5}),)

    def params_from(self, data: Mapping[str, Any]) -> ShapedMulticlassParams:
        family = data.get("target_family", "gennorm")
        if family != "gennorm":
            raise InvalidParameter("target_family", "must be 'gennorm' (generalized normal)", family)
        return ShapedMulticlassParams(data.get("K"), data.get("classes"), data.get("beta"),  # type: ignore[arg-type]
                                      data.get("target_scale"), data.get("slopes"),  # type: ignore[arg-type]
                                      data.get("slope_max"), data.get("prior") or "paper")  # type: ignore[arg-type]

    def per_answer(self, params: ShapedMulticlassParams) -> tuple[float, float]:
        """The last slope point (ε_max, δ_T(ε_max)), one of the statements its certificate proves."""
        eps, target = params.slope_points()
        return float(eps[-1]), float(target[-1])

    def limit(self, params: ShapedMulticlassParams) -> float:
        return 1.0

    def certify(self, params: ShapedMulticlassParams, gamma: np.ndarray, **options: Any) -> ShapedMulticlassCertificate:
        from darrm_opt.certify.shaped import certify_shaped_multiclass

        return certify_shaped_multiclass(params, gamma)

    def profile(self, params: ShapedMulticlassParams, gamma: np.ndarray):  # noqa: ANN201
        from darrm_opt.planning.shaped_plan import shaped_multiclass_profile

        return shaped_multiclass_profile(params, gamma)

    def check_profile(self, params: ShapedMulticlassParams, gamma: np.ndarray, stored, certificate,  # noqa: ANN001
                      **options: Any):  # noqa: ANN201
        from darrm_opt.privacy.pair_profile import multiclass_family
        from darrm_opt.privacy.statements import check_family_profile

        return check_family_profile(multiclass_family(params.K, params.C, np.asarray(gamma, dtype=np.float64)),
                                    stored)

    def verdict_line(self, params: ShapedMulticlassParams, certificate) -> str:  # noqa: ANN001
        verdict = "CERTIFIED" if certificate.certified else "NOT CERTIFIED"
        return (f"certificate: {verdict}: multi-class table K = {params.K}, C = {params.C}, its profile under the "
                f"generalized normal target (β = {params.beta:g}, scale {params.scale:.6g}) at all "
                f"{certificate.slopes_checked} slopes up to ε′ = {params.slope_max:g}: largest divergence "
                f"{certificate.max_ratio:.12g} of its δ_T over {certificate.types_checked} (slope, histogram type) "
                f"pairs ({certificate.exact_checked} re-checked exactly)"
                + ("" if certificate.certified else f": {certificate.reason}"))

    def describe(self, params: ShapedMulticlassParams) -> str:
        return (f"the composition-shaped multi-class table K = {params.K}, C = {params.C} (disjoint-nonprivate), "
                f"target generalized normal β = {params.beta:g}, scale {params.scale:.6g}, {params.slopes} slopes "
                f"up to ε′ = {params.slope_max:g}")

    def private_as(self, params: ShapedMulticlassParams) -> str:
        return "under its target privacy curve at every slope"

    def solve(self, params: ShapedMulticlassParams, *, solver: str, teachers: str | None = None,
              progress=None) -> Solved:  # noqa: ANN001
        from darrm_opt.optimize.shaped import solve_shaped_multiclass

        return self.solved(params, solve_shaped_multiclass(params, solver=solver), teachers)

    def solve_size(self, params: ShapedMulticlassParams) -> int:
        return (params.K + 1) * params.slopes

    def solve_cost_key(self, params: ShapedMulticlassParams) -> SolveCostKey:
        """By (K + C)·slopes: each cutting-plane round evaluates every pair type (O(K + C) of them) at every
        slope."""
        return SolveCostKey(self.kind, float((params.K + params.C) * params.slopes), "(K+C)·slopes", value=params.K)

    def expected_error(self, params: ShapedMulticlassParams, gamma: np.ndarray) -> float:
        from darrm_opt.model.multiclass import expected_error

        return float(expected_error(np.asarray(gamma, dtype=np.float64), params.K, params.C, params.prior))

    def certificate_from(self, data: Mapping[str, Any]) -> ShapedMulticlassCertificate:
        fields = ShapedMulticlassCertificate.__dataclass_fields__
        return ShapedMulticlassCertificate(**{k: data[k] for k in fields if k in data})

    def sampler(self, table, random_bytes):  # noqa: ANN001, ANN201
        from .vote_samplers import MulticlassSampler

        return MulticlassSampler(table.gamma, table.params.C, random_bytes)

    def offer_details(self, table: Any, composition: str) -> dict[str, Any]:
        """The calibrated shape: β, the target's scale, its slopes and their cap, and γ."""
        p = table.params
        return {"beta": p.beta, "target_scale": p.scale, "slopes": p.slopes, "slope_max": p.slope_max,
                "gamma": list(table.gamma)}

    def plan(self, job: Any, progress: Any = None) -> Any:
        """The calibrated shaped multi-class table for a PATE-setting job with classes (None otherwise, or for
        K above ``max_K``): for each shape of PLAN_SHAPES the smallest scale whose Q answers compose within
        the budget, the most accurate offered, its ε the exact composition of its own profile."""
        if job.teachers != "disjoint-nonprivate" or job.classes is None or job.K > (self.max_K or job.K):
            return None
        from darrm_opt.planning.job import Offer
        from darrm_opt.planning.shaped_plan import calibrate_shaped

        plans: list[Any] = []
        for beta in PLAN_SHAPES:
            warm = plans[-1].solution.active if plans else None
            plans.append(calibrate_shaped(job.K, job.queries, job.budget_epsilon, job.budget_delta, job.prior,
                                          beta=beta, solver=job.solver, warm=warm, classes=job.classes))
        best = min(plans, key=lambda p: p.solution.expected_error)
        sol = best.solution
        table = self.table(sol.params, sol.gamma, sol.certificate, "disjoint-nonprivate", best.profile)
        return Offer(self.kind, table, table.expected_error, best.epsilon_spent,
                     {**self.offer_details(table, "exact"), "scales_tried": best.tried}, best.seconds)
