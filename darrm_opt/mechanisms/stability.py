"""Stability-based release with a sparse-vector test, run: the job's state and its exact sampler.

The release and its guarantee are :mod:`darrm_opt.privacy.stability` (docs/maths.md, "Stability-based
release"): one (ε, δ) statement for the whole job (:meth:`StabilityRelease.profile`, the dominating pair a
ledger composes with every other profile, paid once when the job opens). A job's runtime state
(:class:`StabilityState`: the noisy threshold ρ, the count of unstable queries, the queries seen) is private
(ρ must never be shown) and must outlive a restart: :meth:`StabilityRelease.open` draws ρ once, every batch
returns the next state, and whoever keeps the job stores that state durably before releasing the batch's
answers (a state lost or reset would draw a fresh ρ, a second job's cost).

Answers are class indices; ⊥ is written −1 (as Confident-GNMax's abstention). For 0/1 votes the histogram of
a row is (K − L, L) and the answer is the bit.

The kind :class:`Stability` (``stability`` in the registry, docs/stability.md) is this release behind the one
interface: parameters :class:`StabilityParams` (the quota is the planned job's Q), certificate
:class:`StabilityCertificate` (the job's (ε, δ) recomputed), profile the job's pair, ``units`` one per job of
``quota`` rows, and ``keeps_state``: a ledger keeps its current job's :class:`StabilityState` across calls
(``job_units``, ``run_job``; :mod:`darrm_opt.release.release`, :mod:`darrm_opt.ledger.job_state`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from darrm_opt.certify.verdict import VerdictFields
from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.stability import (
    Fallback,
    SvtParams,
    distance_from_gap,
    dp_pair_profile,
    fallback_statement,
    job_error,
    ptr_delta,
    svt_epsilon,
)
from darrm_opt.sampling import RandomBytes, discrete_laplace, uniform_index, uniform_limits

from .base import Example, Mechanism, Solved, certificate_of_fields, exact_pair_check
from .outputs import TableOutBase

#: the answer written for ⊥ (an unstable query, or any query after the cut-off)
BOTTOM = -1


@dataclass(frozen=True)
class StabilityParams:
    """A job: ``K`` teachers, ``classes`` C (None: 0/1 votes), the test ``svt``, the ``quota`` of queries
    (δ holds for any number of queries once the quota reaches c; the quota is a public limit), and the
    ``prior`` its expected error is stated under (a DaRRM prior for 0/1 votes, a class-label one for C).
    ``fallback_sigma`` and ``fallback_epsilon`` (both or neither): unstable queries before
    the cut-off answered by GNMax at σ, the job stated at ε = ε_svt + ε_G (:class:`Fallback`); without them
    the canonical form, key and table id are those of a job without fallback."""

    K: int
    classes: int | None
    svt: SvtParams
    quota: int
    prior: str = "paper"
    fallback_sigma: float | None = None
    fallback_epsilon: float | None = None

    def __post_init__(self) -> None:
        for name, low in (("K", 1), ("quota", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise InvalidParameter(name, f"must be an integer >= {low}", v)
        c = self.classes
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 2):
            raise InvalidParameter("classes", "must be an integer >= 2", c)
        if not isinstance(self.prior, str) or not self.prior.strip():
            raise InvalidParameter("prior", "must be a prior's name such as 'paper'", self.prior)
        if (self.fallback_sigma is None) != (self.fallback_epsilon is None):
            raise InvalidParameter("fallback", "fallback_sigma and fallback_epsilon are given together or not at all",
                                   {"fallback_sigma": self.fallback_sigma, "fallback_epsilon": self.fallback_epsilon})
        if self.fallback_sigma is not None:
            fb = Fallback(self.fallback_sigma, self.fallback_epsilon)  # type: ignore[arg-type]
            object.__setattr__(self, "fallback_sigma", fb.sigma)
            object.__setattr__(self, "fallback_epsilon", fb.epsilon)

    @property
    def fallback(self) -> Fallback | None:
        """The GNMax fallback, or None (⊥ for every unstable query)."""
        if self.fallback_sigma is None:
            return None
        return Fallback(self.fallback_sigma, self.fallback_epsilon)  # type: ignore[arg-type]

    def statement(self) -> tuple[float, float]:
        """The job's (ε, δ): (:func:`svt_epsilon`, :func:`ptr_delta`), or with the fallback
        :func:`~darrm_opt.privacy.stability.fallback_statement`."""
        fb = self.fallback
        if fb is None:
            return svt_epsilon(self.svt), ptr_delta(self.svt, self.quota)
        return _fallback_statement(self.svt, self.quota, fb)

    def profile(self) -> Any:
        """The job's statement as a dominating pair (:func:`~darrm_opt.privacy.stability.dp_pair_profile`)."""
        return dp_pair_profile(*self.statement())

    @property
    def C(self) -> int:
        return 2 if self.classes is None else self.classes

    def canonical(self) -> dict[str, Any]:
        out: dict[str, Any] = {"K": self.K, "classes": self.classes, **self.svt.canonical(), "quota": self.quota,
                               "prior": self.prior}
        if self.fallback_sigma is not None:
            out |= {"fallback_sigma": self.fallback_sigma, "fallback_epsilon": self.fallback_epsilon}
        return out

    def key(self) -> str:
        from darrm_opt.model.params import digest

        return digest({"kind": "stability", **self.canonical()})


@lru_cache(maxsize=256)
def _fallback_statement(svt: SvtParams, quota: int, fb: Fallback) -> tuple[float, float]:
    return fallback_statement(svt, quota, fb)


@dataclass(frozen=True)
class StabilityState:
    """A job's private runtime state: the threshold noise ``rho``, how many queries were ``unstable``,
    how many were asked (``queries``) and answered with a class (``answered``)."""

    rho: int
    unstable: int = 0
    queries: int = 0
    answered: int = 0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> StabilityState:
        data = json.loads(text)
        if not isinstance(data, dict) or set(data) != {"rho", "unstable", "queries", "answered"} or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in data.values()):
            raise InvalidParameter("state", "is not a stability job's state")
        return cls(**data)

    def public(self, params: StabilityParams) -> dict[str, Any]:
        """What may be shown: counts of the released answers (functions of the output), never ρ."""
        return {"queries": self.queries, "answered": self.answered, "bottom": self.queries - self.answered,
                "halted": self.unstable >= params.svt.cutoff}


class StabilityRelease:
    """The exact sampler of one job's answers (module docstring)."""

    def __init__(self, params: StabilityParams) -> None:
        self.params = params
        self._limits = uniform_limits(params.C)
        self._gnmax: Any = None

    # --- the statement ----------------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        return self.params.statement()[0]

    @property
    def delta(self) -> float:
        return self.params.statement()[1]

    def profile(self) -> Any:
        """The job's (ε, δ) as a dominating pair (:meth:`StabilityParams.profile`)."""
        return self.params.profile()

    def _fallback_answer(self, h: np.ndarray, random_bytes: RandomBytes) -> int:
        """GNMax's answer for one histogram (:class:`~darrm_opt.mechanisms.vote_samplers.GnmaxSampler`)."""
        from .vote_samplers import GnmaxSampler

        p = self.params
        if self._gnmax is None or self._gnmax.random_bytes is not random_bytes:
            self._gnmax = GnmaxSampler(p.K, p.C, p.fallback_sigma, random_bytes)  # type: ignore[arg-type]
        return int(self._gnmax.answers_from_histograms(h[None, :])[0])

    # --- running ----------------------------------------------------------------------------------------
    def open(self, random_bytes: RandomBytes) -> StabilityState:
        """A new job's state: ρ ~ DLap(t_ρ), drawn exactly once."""
        return StabilityState(int(discrete_laplace(self.params.svt.t_rho, 1, random_bytes)[0]))

    def histograms(self, votes: Any) -> np.ndarray:
        """Rows of C counts summing to K, checked: ``votes`` as (rows, C) histograms, or for 0/1 votes as
        (rows,) counts L of ones."""
        p = self.params
        h = np.asarray(votes, dtype=np.int64)
        if p.classes is None and h.ndim == 1:
            h = np.stack([p.K - h, h], axis=1)
        if h.ndim != 2 or h.shape[1] != p.C or (h < 0).any() or (h.sum(axis=1) != p.K).any():
            raise InvalidParameter("votes", f"must be rows of {p.C} counts summing to K = {p.K}")
        return h

    def answer(self, state: StabilityState, votes: Any, random_bytes: RandomBytes
               ) -> tuple[np.ndarray, StabilityState]:
        """The answers of one batch (int16, −1 for ⊥) and the job's next state. Query noise ν ~ DLap(t_ν) is
        drawn for every row of the batch at once (the same draws whatever the votes), then used in order: a
        row is unstable iff s·d + ν ≤ T + ρ; after c unstable rows every row is ⊥. A stable row releases its
        plurality, a tie a uniform class of its top set (8-byte words by rejection); an unstable row is ⊥, or
        with the fallback GNMax's answer (its noise drawn then, in the rows' order). InvalidParameter when
        the batch would pass the quota (nothing drawn)."""
        p, svt = self.params, self.params.svt
        h = self.histograms(votes)
        n = h.shape[0]
        if state.queries + n > p.quota:
            raise InvalidParameter("queries", f"the job's quota is {p.quota} queries; {state.queries} were asked",
                                   state.queries + n)
        nu = discrete_laplace(svt.t_nu, n, random_bytes)
        srt = np.sort(h, axis=1)
        d = distance_from_gap(srt[:, -1] - srt[:, -2])
        out = np.full(n, BOTTOM, dtype=np.int16)
        unstable, answered = state.unstable, state.answered
        for i in range(n):
            if unstable >= svt.cutoff:
                break
            if svt.scale * int(d[i]) + int(nu[i]) <= svt.threshold + state.rho:
                unstable += 1
                if p.fallback_sigma is not None:
                    out[i] = self._fallback_answer(h[i], random_bytes)
                    answered += 1
                continue
            top = np.flatnonzero(h[i] == srt[i, -1])
            out[i] = int(top[uniform_index(top.size, self._limits, random_bytes)])
            answered += 1
        return out, StabilityState(state.rho, unstable, state.queries + n, answered)


# ------------------------------------------------------------------------------------------------------
# The kind of release behind the one interface
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StabilityCertificate(VerdictFields):
    """The job's (ε, δ), recomputed from its parameters: ε = s/t_ρ + 2c·s/t_ν and δ of the test at its quota
    (:mod:`darrm_opt.privacy.stability`). ``delta`` is the limit the certificate proves."""

    certified: bool
    epsilon: float
    delta: float
    quota: int
    statement: str = "the whole job, any number of queries up to its quota, adaptively chosen"
    reason: str = ""

    verdict_fields: ClassVar[tuple[str, str, str, str]] = ("delta", "delta", "quota", "worst_case_queries")
    what: ClassVar[str] = "queries"

    @property
    def worst_case_queries(self) -> list[int]:
        return [self.quota]

    def to_dict(self) -> dict:
        return asdict(self)


def certificate_of(params: StabilityParams) -> StabilityCertificate:
    """The job's (ε, δ) recomputed from its parameters (:meth:`StabilityParams.statement`)."""
    eps, delta = params.statement()
    return StabilityCertificate(True, eps, delta, params.quota)


class StabilityTableOut(TableOutBase):
    """A served stability-based release: no γ table, its parameters define it (⊥ answers written −1)."""

    kind: Literal["stability"]
    classes: int | None = Field(None, description="C: class-label votes (null for 0/1 votes)")
    teachers: Literal["disjoint-nonprivate"]
    scale: int = Field(..., description="s: the lattice scale of the scores s·d")
    t_rho: int = Field(..., description="the threshold noise DLap(t_ρ)")
    t_nu: int = Field(..., description="each query's noise DLap(t_ν)")
    threshold: int = Field(..., description="T: a query is unstable iff s·d + ν ≤ T + ρ")
    cutoff: int = Field(..., description="c: after c unstable queries the job answers ⊥")
    quota: int = Field(..., description="the most queries one job answers")
    prior: str
    fallback_sigma: float | None = Field(None, description="σ of the GNMax answers of unstable queries before the "
                                                           "cut-off (null: ⊥)")
    fallback_epsilon: float | None = Field(None, description="ε_G: the job is stated at ε = ε_svt + ε_G (null: no "
                                                             "fallback)")
    gamma: list[float] = Field(..., description="empty: the release has no table")
    certificate: dict[str, Any] = Field(..., description="the job's (ε, δ) recomputed from its parameters")


class StabilitySampler:
    """Answers of one stability job per call (``draw``: a fresh threshold ρ, the batch's rows as its
    queries); a ledger that keeps a job across calls drives :class:`StabilityRelease` with its stored state."""

    def __init__(self, params: StabilityParams, random_bytes: RandomBytes) -> None:
        self.release = StabilityRelease(params)
        self.random_bytes = random_bytes

    def prepare(self, votes: Any) -> np.ndarray:
        """The (rows, C) histograms of (rows, K) votes (0/1 or class labels), checked."""
        from .vote_samplers import class_labels, label_histograms

        p = self.release.params
        return label_histograms(class_labels(votes, p.K, p.C), p.C)

    def rows(self, prepared: np.ndarray) -> int:
        return int(prepared.shape[0])

    def draw(self, prepared: np.ndarray) -> np.ndarray:
        """The answers, each run of ``quota`` rows one job with its own threshold (``Stability.units`` jobs)."""
        q = self.release.params.quota
        out = np.empty(prepared.shape[0], dtype=np.int16)
        for start in range(0, prepared.shape[0], q):
            state = self.release.open(self.random_bytes)
            out[start:start + q], _ = self.release.answer(state, prepared[start:start + q], self.random_bytes)
        return out

    def __call__(self, votes: Any) -> np.ndarray:
        return self.draw(self.prepare(votes))


#: the job of the stability kind's examples (planned in well under a second)
_EXAMPLE_JOB = {"K": 61, "classes": 3, "queries": 20, "budget_epsilon": 4.0, "budget_delta": 1e-5}


class Stability(Mechanism):
    """Stability-based release with a sparse-vector test (module docstring; docs/stability.md)."""

    kind = "stability"
    output_model = StabilityTableOut
    params_type = StabilityParams
    settings = ("disjoint-nonprivate",)
    summary = ("stability + sparse vector: the exact plurality where d (votes to change it) passes a noisy "
               "threshold, ⊥ (written −1) where not; one (ε, δ) for the whole job (PATE setting)")
    labels = True
    max_K = 100_000
    document_fields = ("K", "teachers", "scale", "t_rho", "t_nu", "threshold", "cutoff", "quota")
    absent_fields = ("m", "teacher_delta", "target_epsilon")
    absent_reason = "a stability-based release of non-private teachers has no allowance m, teacher Δ or target ε"
    settings_reason = ("its sparse-vector test needs the distance to instability to move by at most 1 when one "
                       "record changes, i.e. one record changes one teacher's vote: on shared data it can change "
                       "every teacher's vote (disjoint-private teachers are planned on their shards alone)")

    def examples(self) -> tuple[Example, ...]:
        return (Example(StabilityParams(61, 3, SvtParams(64, 43, 52, 619, 1), 20), _EXAMPLE_JOB),
                Example(StabilityParams(61, None, SvtParams(64, 43, 52, 619, 2), 20)),
                Example(StabilityParams(61, None, SvtParams(64, 43, 52, 619, 2), 20, "paper", 20.0, 0.5)))

    def table_size(self, params: Any) -> int:
        return 0

    def params_from(self, data: Mapping[str, Any]) -> StabilityParams:
        svt = SvtParams(*(data.get(k) for k in ("scale", "t_rho", "t_nu", "threshold", "cutoff")))  # type: ignore[arg-type]
        return StabilityParams(data.get("K"), data.get("classes"), svt, data.get("quota"),  # type: ignore[arg-type]
                               data.get("prior") or "paper", data.get("fallback_sigma"),
                               data.get("fallback_epsilon"))

    def per_answer(self, params: StabilityParams) -> tuple[float, float]:
        """The whole job's (ε, δ): a ledger pays it once per job (:meth:`units`)."""
        return params.statement()

    def units(self, params: Any, rows: int) -> int:
        """Rows answered together run as jobs of ``quota`` queries each: one job's statement per job."""
        return -(-rows // params.quota)

    def limit(self, params: StabilityParams) -> float:
        return params.statement()[1]

    def certify(self, params: StabilityParams, gamma: np.ndarray, **options: Any) -> StabilityCertificate:
        return certificate_of(params)

    def profile(self, params: StabilityParams, gamma: np.ndarray) -> Any:
        return params.profile()

    def table(self, params: Any, gamma: Any, certificate: Any, teachers: str | None = None,
              profile: Any = None) -> Any:
        """As every kind's; a stated certificate or profile must be exactly the one its parameters give."""
        cert = self.certificate_from(certificate) if isinstance(certificate, Mapping) else certificate
        if cert != certificate_of(params):
            raise InvalidParameter("certificate", f"does not hold for this {self.kind} release's parameters")
        if profile is not None and profile != self.profile(params, np.zeros(0)):
            raise InvalidParameter("privacy_profile", f"is not the (ε, δ) pair of this {self.kind} release")
        return super().table(params, gamma, cert, teachers, profile)

    def certificate_from(self, data: Mapping[str, Any]) -> StabilityCertificate:
        return certificate_of_fields(StabilityCertificate, data, "a stability release's certificate")

    def check_profile(self, params: Any, gamma: np.ndarray, stored: Any, certificate: Any, **options: Any) -> Any:
        return exact_pair_check(self.profile(params, gamma), stored, "(ε, δ) pair")

    def verdict_line(self, params: Any, certificate: Any) -> str:
        head = "CERTIFIED" if certificate.certified else "NOT CERTIFIED"
        fb = ("" if params.fallback_sigma is None
              else f", unstable queries answered by GNMax σ = {params.fallback_sigma:.6g}")
        return (f"certificate: {head}: the whole job of up to {certificate.quota} queries is "
                f"({certificate.epsilon:.6g}, {certificate.delta:.3g})-DP (sparse-vector test of the distance "
                f"to instability{fb})")

    def solve(self, params: Any, *, solver: str, teachers: str | None = None, progress: Any = None) -> Solved:
        t0 = time.perf_counter()
        table = self.certify_table(params, np.zeros(0), teachers=teachers)
        return Solved(table, "closed-form", time.perf_counter() - t0)

    def solve_size(self, params: Any) -> int:
        return 1

    def solve_cost_key(self, params: Any) -> None:
        return None

    def expected_error(self, params: StabilityParams, gamma: np.ndarray) -> float:
        return self.figures(params).error

    def figures(self, params: StabilityParams) -> Any:
        """The :class:`~darrm_opt.privacy.stability.JobError` of a job of ``quota`` queries under the
        parameters' prior: exact, except that a class-label job's GNMax fallback enters by its upper bound
        (:func:`~darrm_opt.privacy.stability.multiclass_fallback_wrong`), so its error is an upper bound."""
        from darrm_opt.planning.stability_plan import distance_law, fallback_wrong

        gw = None if params.fallback_sigma is None else fallback_wrong(params.K, params.classes, params.prior,
                                                                       params.fallback_sigma)
        return job_error(params.svt, distance_law(params.K, params.classes, params.prior), params.quota,
                         fallback_wrong=gw)

    def describe(self, params: StabilityParams) -> str:
        v = params.svt
        votes = "0/1 votes" if params.classes is None else f"C = {params.classes}"
        return (f"stability + sparse vector K = {params.K}, {votes} (disjoint-nonprivate): query unstable iff "
                f"{v.scale}·d + DLap({v.t_nu}) ≤ {v.threshold} + DLap({v.t_rho}); "
                + ("" if params.fallback_sigma is None else
                   f"unstable answered by GNMax σ = {params.fallback_sigma:.6g}, ")
                + f"⊥ after c = {v.cutoff} unstable; quota {params.quota} queries")

    def sampler(self, table: Any, random_bytes: Any) -> StabilitySampler:
        return StabilitySampler(table.params, random_bytes)

    keeps_state = True

    def _current(self, params: StabilityParams, state: str | None) -> tuple[int, StabilityState | None]:
        """(jobs opened, the current job's state) of a ledger's stored text."""
        if state is None:
            return 0, None
        data = json.loads(state)
        if not isinstance(data, dict) or set(data) != {"jobs", "current"}:
            raise InvalidParameter("state", "is not a stability job's state")
        cur = data["current"]
        return int(data["jobs"]), None if cur is None else StabilityState.from_json(json.dumps(cur))

    def job_units(self, params: StabilityParams, state: str | None, rows: int) -> int:
        """The jobs that ``rows`` more queries open: those beyond the current job's quota, ``quota`` each."""
        _, cur = self._current(params, state)
        left = 0 if cur is None else params.quota - cur.queries
        return self.units(params, max(0, rows - left))

    def run_job(self, params: StabilityParams, state: str | None, prepared: Any, random_bytes: Any
                ) -> tuple[np.ndarray, str]:
        """The rows answered in order: first by the current job up to its quota (its ρ, its count of unstable
        answers: ⊥ once it has c), then by new jobs of ``quota`` queries, each with a fresh ρ."""
        release = StabilityRelease(params)
        jobs, cur = self._current(params, state)
        h = release.histograms(prepared)
        out = np.empty(h.shape[0], dtype=np.int16)
        i = 0
        while i < h.shape[0]:
            if cur is None or cur.queries >= params.quota:
                cur, jobs = release.open(random_bytes), jobs + 1
            n = min(params.quota - cur.queries, h.shape[0] - i)
            out[i:i + n], cur = release.answer(cur, h[i:i + n], random_bytes)
            i += n
        current = None if cur is None else json.loads(cur.to_json())
        return out, json.dumps({"jobs": jobs, "current": current}, sort_keys=True)

    def offer_spend(self, table: Any, queries: int, budget_delta: float) -> Any:
        """The jobs ``queries`` answers open (one up to the quota), stated as a ledger states them: the
        tightest of its bounds on the job's (ε, δ) pair (the pair itself, its exact composition)."""
        from darrm_opt.privacy import accounting

        n = self.units(table.params, queries)
        eps, delta = self.per_answer(table.params)
        return accounting.account([(eps, delta, n)], budget_delta, profiles=[(table.profile, n)]).spend

    def offer_details(self, table: Any, composition: str) -> dict[str, Any]:
        """The job's figures: its (ε, δ), expected answered queries and share of ⊥ under the prior."""
        f = self.figures(table.params)
        eps, delta = self.per_answer(table.params)
        return {**table.params.svt.canonical(), "fallback_sigma": table.params.fallback_sigma,
                "fallback_epsilon": table.params.fallback_epsilon, "job_epsilon": eps, "job_delta": delta,
                "expected_answered": f.answered, "bottom_share": f.bottom_share}

    def plan(self, job: Any, progress: Any = None) -> Any:
        """The parameters of least exact expected error (:func:`darrm_opt.planning.stability_plan.plan_stability`)
        for the job's Q queries as one job; None outside the PATE setting. The GNMax fallback is searched only
        for a ``thorough`` job (the kind named): on issue 35's jobs it never beat GNMax alone, and its search adds
        20–80 CPU s to a binary plan (docs/stability.md)."""
        from darrm_opt.planning.job import Offer, normal_prior
        from darrm_opt.planning.stability_plan import plan_stability

        if job.teachers != "disjoint-nonprivate" or not job.budget_delta > 0:
            return None
        prior = normal_prior(job.prior, job.classes)
        plan = plan_stability(job.K, job.classes, prior, job.queries, job.budget_epsilon, job.budget_delta,
                              fallback=bool(getattr(job, "thorough", False)))
        fb = plan.best.fallback
        params = StabilityParams(job.K, job.classes, plan.best.params, job.queries, prior,
                                 None if fb is None else fb.sigma, None if fb is None else fb.epsilon)
        table = self.certify_table(params, np.zeros(0), teachers="disjoint-nonprivate")
        spent = self.offer_spend(table, job.queries, job.budget_delta)
        return Offer(self.kind, table, table.expected_error, spent.epsilon, self.offer_details(table, spent.method),
                     plan.seconds)

    def private_as(self, params: Any) -> str:
        return "(ε, δ)-DP for the whole job"
