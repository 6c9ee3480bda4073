"""Multi-class DaRRM in the PATE setting: K non-private teachers on disjoint shards vote class labels.

For a histogram h of the votes over C classes with top-two gap g and top set T, the answer is a uniform
class of T with probability γ(g), else a uniform class of all C (MC-1, :mod:`darrm_opt.model.multiclass`);
(ε, δ)-DP per answer iff every neighbouring histogram type's hockey-stick divergence at e^ε is ≤ δ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from darrm_opt.certify.multiclass import MulticlassCertificate
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior

from .base import Example, Mechanism, SolveCostKey, Solved
from .outputs import MulticlassTableOut


class DarrmMulticlassTableOut(MulticlassTableOut):
    """A served darrm-multiclass table."""

    kind: Literal["darrm-multiclass"]


class DarrmMulticlass(Mechanism):
    kind = "darrm-multiclass"
    output_model = DarrmMulticlassTableOut
    solve_view = "darrm_opt.cli.solve:multiclass_view"
    per_answer_offers = True
    params_type = MulticlassParams
    settings = ("disjoint-nonprivate",)
    labels = True
    document_fields = ("K", "classes", "teachers", "target_epsilon", "delta", "gamma")
    summary = "multi-class DaRRM: a class label from class-label votes of non-private teachers (PATE setting)"

    def examples(self) -> tuple[Example, ...]:
        return (Example(MulticlassParams(5, 3, 1.0, 1e-5), {"K": 5, "classes": 3, "queries": 10,
                                                             "budget_epsilon": 4.0, "budget_delta": 1e-5}),)

    def params_from(self, data: Mapping[str, Any]) -> MulticlassParams:
        delta = 0.0 if data.get("delta") is None else data["delta"]
        return MulticlassParams(data.get("K"), data.get("classes"), data.get("target_epsilon"),  # type: ignore[arg-type]
                                delta, MulticlassPrior.parse(data.get("prior")))

    def per_answer(self, params: MulticlassParams) -> tuple[float, float]:
        return params.epsilon, params.delta

    def limit(self, params: MulticlassParams) -> float:
        return params.delta

    def check_profile(self, params: MulticlassParams, gamma: np.ndarray, stored, certificate,  # noqa: ANN001
                      **options: Any):  # noqa: ANN201
        from darrm_opt.privacy.pair_profile import multiclass_profile_check

        return multiclass_profile_check(params, gamma, stored)

    def verdict_line(self, params: MulticlassParams, certificate) -> str:  # noqa: ANN001
        return histogram_types_verdict(f"multi-class table, K={params.K}, C={params.C}, per-answer (ε, δ) = "
                                       f"({params.epsilon:g}, {params.delta:g})", certificate)

    def failure(self, params: MulticlassParams, gamma: np.ndarray, certificate) -> str:  # noqa: ANN001
        return histogram_types_failure(params.delta, certificate)

    def describe(self, params: MulticlassParams) -> str:
        return (f"the multi-class table K = {params.K}, C = {params.C} (disjoint-nonprivate), per answer "
                f"ε = {params.epsilon:g}, δ = {params.delta:.3g}")

    def certify(self, params: MulticlassParams, gamma: np.ndarray, **options: Any) -> MulticlassCertificate:
        from darrm_opt.certify.multiclass import certify_multiclass

        return certify_multiclass(params, gamma)

    def profile(self, params: MulticlassParams, gamma: np.ndarray):  # noqa: ANN201
        from darrm_opt.privacy.pair_profile import multiclass_profile

        return multiclass_profile(params, gamma)

    def solve(self, params: MulticlassParams, *, solver: str, teachers: str | None = None,
              progress=None) -> Solved:  # noqa: ANN001
        from darrm_opt.optimize.multiclass import solve_multiclass

        return self.solved(params, solve_multiclass(params, solver=solver), teachers)  # CertificationFailed if not

    def expected_error(self, params: MulticlassParams, gamma: np.ndarray) -> float:
        from darrm_opt.model.multiclass import expected_error

        return float(expected_error(np.asarray(gamma, dtype=np.float64), params.K, params.C, params.prior))

    def certificate_from(self, data: Mapping[str, Any]) -> MulticlassCertificate:
        return MulticlassCertificate(**{k: data[k] for k in MulticlassCertificate.__dataclass_fields__ if k in data})

    def solve_size(self, params: MulticlassParams) -> int:
        return params.K + 1  # an LP over γ(0..K), solved in seconds at K = 250, C = 10

    def solve_cost_key(self, params: MulticlassParams) -> SolveCostKey:
        """By K³·C: its exact prior weights cost O(K³ C), and its LP's rows grow with K and C."""
        return SolveCostKey(self.kind, float(params.K) ** 3 * params.C, "K³·C", value=params.K)

    def plan(self, job, progress=None):  # noqa: ANN001, ANN201
        """A per-answer multi-class table for a job with classes (:mod:`darrm_opt.planning.multiclass_plan`)."""
        from darrm_opt.planning.multiclass_plan import plan_multiclass

        return plan_multiclass(self, job)

    def sampler(self, table, random_bytes):  # noqa: ANN001, ANN201
        from .vote_samplers import MulticlassSampler

        return MulticlassSampler(table.gamma, table.params.C, random_bytes)


def histogram_types_verdict(head: str, certificate: MulticlassCertificate) -> str:
    """``verify``'s line for a table certified over ordered histogram types (``head``: what the table is)."""
    return (f"CERTIFIED: {head}; max divergence {certificate.max_hockey_stick:.12g} <= δ over "
            f"{certificate.types_checked} ordered histogram types ({certificate.exact_checked} re-checked "
            "exactly)" if certificate.certified else f"NOT CERTIFIED: {head}: {certificate.reason}")


def histogram_types_failure(delta: float, certificate: MulticlassCertificate) -> str:
    """The violation a failed certificate over histogram types reports."""
    return (f"[bold red]violation:[/] {certificate.reason} (max divergence {certificate.max_hockey_stick:.12g} "
            f"> δ = {delta:.12g})")
