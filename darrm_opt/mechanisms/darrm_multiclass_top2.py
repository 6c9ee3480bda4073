"""Top-two multi-class DaRRM in the PATE setting: the fallback mass goes to the runner-up, governed by both
top gaps (:mod:`darrm_opt.model.top2`, TT-1).

For a histogram in state s = (g₁, min(g₂, G)) with top set T and runner-up set R the answer is a uniform
class of T with probability p(s), of R with probability q(s), else a uniform class of all C; (ε, δ)-DP per
answer iff every ordered neighbouring histogram type's hockey-stick divergence at e^ε is ≤ δ
(certify.top2). Its table (``gamma`` in documents) is the flat [p(0..K, 0..G), q(0..K, 0..G)].
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from darrm_opt.certify.multiclass import MulticlassCertificate
from darrm_opt.model.multiclass import MulticlassPrior
from darrm_opt.model.top2 import DEFAULT_CAP, Top2Params

from .base import Example, Mechanism, SolveCostKey, Solved
from .darrm_multiclass import histogram_types_failure, histogram_types_verdict
from .outputs import MulticlassTableOut


class DarrmMulticlassTop2TableOut(MulticlassTableOut):
    """A served darrm-multiclass-top2 table."""

    kind: Literal["darrm-multiclass-top2"]


class DarrmMulticlassTop2(Mechanism):
    kind = "darrm-multiclass-top2"
    output_model = DarrmMulticlassTop2TableOut
    per_answer_offers = True
    # at K = 250, C = 10, Q = 100, (2, 1e-5) its plan takes ~7 min and several GB (three LPs at ε₀ ≈ 0.05, where the
    # cutting planes need many rounds) for 2.2e-2 against GNMax's 4.0e-5 (benchmarks/multiclass_top2.py):
    # planned when asked for (plan --mechanism darrm-multiclass-top2)
    planned_by_default = False
    params_type = Top2Params
    settings = ("disjoint-nonprivate",)
    labels = True
    max_K = 501
    document_fields = ("K", "classes", "teachers", "target_epsilon", "delta", "gap_cap", "gamma")
    summary = ("top-two multi-class DaRRM (PATE setting): the plurality, else the runner-up, else a uniform class, "
               "by both top gaps")

    def examples(self) -> tuple[Example, ...]:
        return (Example(Top2Params(5, 3, 1.0, 1e-5, cap=2), {"K": 5, "classes": 3, "queries": 10,
                                                              "budget_epsilon": 4.0, "budget_delta": 1e-5}),)

    def params_from(self, data: Mapping[str, Any]) -> Top2Params:
        delta = 0.0 if data.get("delta") is None else data["delta"]
        cap = DEFAULT_CAP if data.get("gap_cap") is None else data["gap_cap"]
        return Top2Params(data.get("K"), data.get("classes"), data.get("target_epsilon"),  # type: ignore[arg-type]
                          delta, MulticlassPrior.parse(data.get("prior")), cap)

    def table_size(self, params: Top2Params) -> int:
        return 2 * params.states

    def check_gamma(self, params: Top2Params, gamma: Sequence[float] | np.ndarray) -> np.ndarray:
        from darrm_opt.certify.top2 import validate_table

        return validate_table(params, gamma)

    def per_answer(self, params: Top2Params) -> tuple[float, float]:
        return params.epsilon, params.delta

    def limit(self, params: Top2Params) -> float:
        return params.delta

    def certify(self, params: Top2Params, gamma: np.ndarray, **options: Any) -> MulticlassCertificate:
        from darrm_opt.certify.top2 import certify_top2

        return certify_top2(params, gamma)

    def profile(self, params: Top2Params, gamma: np.ndarray):  # noqa: ANN201
        from darrm_opt.privacy.pair_profile import top2_profile

        return top2_profile(params, gamma)

    def check_profile(self, params: Top2Params, gamma: np.ndarray, stored, certificate,  # noqa: ANN001
                      **options: Any):  # noqa: ANN201
        from darrm_opt.certify.top2 import validate_table
        from darrm_opt.privacy.pair_profile import top2_family
        from darrm_opt.privacy.statements import check_family_profile

        return check_family_profile(top2_family(params, validate_table(params, gamma)), stored)

    def verdict_line(self, params: Top2Params, certificate) -> str:  # noqa: ANN001
        return histogram_types_verdict(f"top-two multi-class table, K={params.K}, C={params.C}, gap cap "
                                       f"{params.cap}, per-answer (ε, δ) = ({params.epsilon:g}, {params.delta:g})",
                                       certificate)

    def failure(self, params: Top2Params, gamma: np.ndarray, certificate) -> str:  # noqa: ANN001
        return histogram_types_failure(params.delta, certificate)

    def describe(self, params: Top2Params) -> str:
        return (f"the top-two multi-class table K = {params.K}, C = {params.C}, gap cap {params.cap} "
                f"(disjoint-nonprivate), per answer ε = {params.epsilon:g}, δ = {params.delta:.3g}")

    def solve(self, params: Top2Params, *, solver: str, teachers: str | None = None,
              progress=None) -> Solved:  # noqa: ANN001
        from darrm_opt.optimize.top2 import solve_top2

        return self.solved(params, solve_top2(params, solver=solver), teachers)

    def expected_error(self, params: Top2Params, gamma: np.ndarray) -> float:
        from darrm_opt.model.top2 import expected_error

        return expected_error(gamma, params.K, params.C, params.cap, params.prior)

    def certificate_from(self, data: Mapping[str, Any]) -> MulticlassCertificate:
        return MulticlassCertificate(**{k: data[k] for k in MulticlassCertificate.__dataclass_fields__ if k in data})

    def solve_size(self, params: Top2Params) -> int:
        return 2 * params.states

    def solve_cost_key(self, params: Top2Params) -> SolveCostKey:
        """By K²·C·(G + 1): its (K + 1)(G + 1) states times the pair types each cutting-plane round evaluates,
        which grow with K and C; on one curve for δ = 0 and one for δ > 0 (at δ = 0 the cutting planes take
        far more rounds). Its cost depends on ε too, which the curves, measured at ε = 1, omit."""
        curve = f"{self.kind}/{'pure' if params.delta == 0 else 'approximate'}"
        return SolveCostKey(curve, float(params.K) ** 2 * params.C * (params.cap + 1), "K²·C·(G+1)", value=params.K)

    def plan(self, job, progress=None):  # noqa: ANN001, ANN201
        """A per-answer top-two table for a PATE-setting job with C ≥ 3 classes, calibrated as darrm-multiclass
        (:func:`darrm_opt.planning.multiclass_plan.plan_per_answer`); None otherwise."""
        if job.classes is None or job.teachers != "disjoint-nonprivate" or job.classes < 3 or job.K > self.max_K:
            return None
        from darrm_opt.optimize.top2 import solve_top2
        from darrm_opt.planning.multiclass_plan import plan_per_answer
        from darrm_opt.privacy.pair_profile import top2_profile

        prior = MulticlassPrior.parse(job.prior)
        return plan_per_answer(self, job, lambda e, d: Top2Params(job.K, job.classes, e, d, prior),
                               lambda params: solve_top2(params, solver=job.solver), top2_profile)

    def sampler(self, table, random_bytes):  # noqa: ANN001, ANN201
        from .vote_samplers import Top2Sampler

        p = table.params
        return Top2Sampler(table.gamma, p.K, p.C, p.cap, random_bytes)
