"""DaRRM (Jiang, Zhang, Joshi 2024) for K teachers trained on the same data, each (ε, Δ)-DP.

The table γ(0..K) releases the majority of the 0/1 votes with probability γ(L) (L = Σ votes), else a fair
coin (Algorithm 1); it is (mε, δ)-DP iff the privacy cost f(n) = Σ_l s_l γ(l)(α_l(n) − e^{mε} α′_l(n))
stays ≤ e^{mε} − 1 + 2δ on every multiset n of K corners (Lemma 3.4, Lemma 5.1). Settings: ``shared`` (the
paper's) and ``disjoint-private`` (teachers on disjoint shards, each (ε, Δ)-DP on its shard: the same
table, and the teachers' (ε, Δ) caps a ledger's total).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from darrm_opt.certify.certificate import Certificate
from darrm_opt.model.params import Params

from .base import Example, Mechanism, SolveCostKey, Solved
from .outputs import BinaryTableOut


class DarrmTableOut(BinaryTableOut):
    """A served darrm table."""

    kind: Literal["darrm"]


class Darrm(Mechanism):
    kind = "darrm"
    output_model = DarrmTableOut
    solve_view = "darrm_opt.cli.solve:darrm_view"
    params_type = Params
    settings = ("shared", "disjoint-private")
    summary = "DaRRM majority of 0/1 votes, teachers each (ε, Δ)-DP on the same data (or on disjoint shards)"
    profile_on_read_max_K = 25  # its sweeps cost about as much as the certificate's
    document_fields = ("K", "m", "epsilon", "teacher_delta", "delta", "gamma")

    def examples(self) -> tuple[Example, ...]:
        return (Example(Params(5, 2), {"K": 5, "queries": 20, "budget_epsilon": 3.0, "budget_delta": 0.01,
                                       "teachers": "shared", "epsilon": 0.2, "teacher_delta": 1e-4}),)

    def params_from(self, data: Mapping[str, Any]) -> Params:
        self.refuse_subsample(data)
        return Params(K=data.get("K"), m=data.get("m"), epsilon=data.get("epsilon", 0.1),  # type: ignore[arg-type]
                      teacher_delta=data.get("teacher_delta", 1e-5), delta=data.get("delta"),
                      prior=data.get("prior") or "paper")

    def per_answer(self, params: Params) -> tuple[float, float]:
        return params.m * params.epsilon, float(params.delta or 0.0)

    def limit(self, params: Params) -> float:
        return params.bound

    def private_as(self, params: Params) -> str:
        return "(mε, δ)-DP"

    def certify(self, params: Params, gamma: np.ndarray, **options: Any) -> Certificate:
        from darrm_opt.certify.certificate import certify

        return certify(params, gamma, **options)

    def profile(self, params: Params, gamma: np.ndarray):  # noqa: ANN201 - a PrivacyProfile
        from darrm_opt.privacy.profile import privacy_profile

        return privacy_profile(params, gamma)

    def certify_with_profile(self, params: Params, gamma: np.ndarray, progress=None):  # noqa: ANN001, ANN201
        from darrm_opt.privacy.profile import profile_and_certificate

        prof, cert = profile_and_certificate(params, gamma, progress=progress)  # one sweep for both
        return cert, (prof if cert.certified else None)

    def solve(self, params: Params, *, solver: str, teachers: str | None = None, progress=None) -> Solved:  # noqa: ANN001
        from darrm_opt.optimize.optimizer import solve
        from darrm_opt.privacy.profile import privacy_profile

        sol = solve(params, solver=solver, mode="lazy", progress=progress, front=True)
        known = (sol.certificate, sol.sweep) if sol.sweep is not None else None
        prof = privacy_profile(params, sol.gamma, progress=progress, certified=known)  # no second sweep
        return self.solved(params, sol, teachers, prof)

    def expected_error(self, params: Params, gamma: np.ndarray) -> float:
        from darrm_opt.model.objective import expected_error

        return float(expected_error(np.asarray(gamma, dtype=np.float64), params.prior))

    def check_profile(self, params: Params, gamma: np.ndarray, stored, certificate, **options: Any):  # noqa: ANN001, ANN201
        from darrm_opt.privacy.statements import check_shared_profile

        return check_shared_profile(params, gamma, stored, certificate, executor=options.get("executor"))

    def verdict_line(self, params: Params, certificate) -> str:  # noqa: ANN001
        from darrm_opt.certify.words import certificate_line

        return certificate_line(certificate)

    def failure(self, params: Params, gamma: np.ndarray, certificate) -> str:  # noqa: ANN001
        from darrm_opt.certify.words import tight_note

        note = tight_note(params, gamma, certificate)
        return (f"[bold red]not certified:[/] {note}" if note else
                f"[bold red]violation:[/] multiset {certificate.worst_multiset} of corners {certificate.corners} "
                f"has privacy cost {certificate.max_privacy_cost:.12g} > bound {certificate.bound:.12g}")

    def describe(self, params: Params) -> str:
        return f"the table K = {params.K}, m = {params.m:g}, ε = {params.epsilon:g}, δ = {params.delta:.3g}"

    def setting_note(self, params: Params, teachers: str) -> dict[str, Any]:
        from darrm_opt.model.neighbours import setting_note

        return setting_note(teachers, params.epsilon, params.teacher_delta).to_dict()

    def baselines(self, params: Params) -> dict[str, np.ndarray | None]:
        """γ_Sub (Lemma 3.1, integer m), γ_DSub (Thm 4.1, pure DP) and γ_const (Sec. 3.1), for display."""
        from darrm_opt.errors import DarrmError
        from darrm_opt.model.baselines import gamma_const, gamma_dsub, gamma_sub

        out: dict[str, np.ndarray | None] = dict.fromkeys(("sub", "dsub", "const"))
        if params.m_is_integer:
            out["sub"] = gamma_sub(params.K, params.m)
            if params.pure and params.delta == 0:
                out["dsub"] = gamma_dsub(params.K, params.m)
        try:
            out["const"] = gamma_const(params)
        except DarrmError:
            out["const"] = None
        return out

    def certificate_from(self, data: Mapping[str, Any]) -> Certificate:
        return Certificate.from_dict(dict(data))

    def solve_size(self, params: Params) -> int:
        from darrm_opt.model.corners import n_corners, n_multisets

        return n_multisets(params.K, n_corners(params))

    def solve_cost_key(self, params: Params) -> SolveCostKey:
        """By K, on one curve for pure-DP teachers (4 corners) and one for approximate (Δ > 0: 8 corners)."""
        return SolveCostKey("darrm/pure" if params.pure else "darrm/approximate", float(params.K), value=params.K)

    def plan(self, job, progress=None):  # noqa: ANN001, ANN201
        """The shared-setting plan (:func:`darrm_opt.planning.plan.plan_shared`) for 0/1-vote jobs of
        DP-trained teachers (shared or disjoint-private: the answers are composed as for shared teachers),
        or, for disjoint-private teachers whose own (ε, Δ) is within the budget
        (:func:`darrm_opt.planning.plan.majority_free`), the plain majority γ ≡ 1, free of further cost."""
        if job.classes is not None or job.teachers not in self.settings:
            return None
        from darrm_opt.planning.job import Offer
        from darrm_opt.planning.plan import majority_free, plan_shared

        cap = majority_free(job)
        if cap is not None:
            from darrm_opt.model.objective import expected_error
            from darrm_opt.model.params import Prior

            error = float(expected_error(np.ones(job.K + 1), Prior.parse(job.prior)))
            free = {"teachers": "disjoint-private", "majority_free": True, "queries": job.queries,
                    "budget_epsilon": job.budget_epsilon, "budget_delta": job.budget_delta,
                    "spent_epsilon": cap[0], "spent_delta": cap[1], "accounting": "parallel-cap"}
            return Offer(self.kind, None, error, cap[0], {}, 0.0, plan=free)
        sol, profile, spent, info = plan_shared(job, progress)
        table = self.table(sol.params, sol.gamma, sol.certificate, job.teachers, profile)
        return Offer(self.kind, table, sol.expected_error, spent, self.offer_details(table, "exact"),
                     info["seconds"], plan=info, solution=sol)

    def offer_details(self, table, composition: str) -> dict[str, Any]:  # noqa: ANN001
        """The per-answer target the plan chose: m and δ."""
        return {"m": table.params.m, "delta": float(table.params.delta)}

    def sampler(self, table, random_bytes):  # noqa: ANN001, ANN201
        from .vote_samplers import BinarySampler

        return BinarySampler(table.gamma, random_bytes)
