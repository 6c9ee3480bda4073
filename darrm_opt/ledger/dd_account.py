"""The data-dependent ledger mode: PATE's data-dependent accounting, published only as a sanitised ε.

A data-dependent ledger is one job of at most ``quota`` queries answered by GNMax, Confident-GNMax,
Interactive-GNMax (PATE Alg. 2, the student's predictions deciding which queries reach the teachers) or a
multi-class γ table with finite RDP (its exact per-state data-dependent RDP, :func:`table_shape`) at
fixed parameters (:class:`DataDependentPolicy`). It keeps the *private* data-dependent state — the sum of
each query's data-dependent RDP at order λ and Thm. 24's summed sensitivity-at-distance vector, computed
from the actual vote histograms (:mod:`darrm_opt.privacy.query_accounts`) — and publishes exactly one
number about it, once: the GNSS release (PATE Thm. 23)

    ε̂ = Σ β(qᵢ) + Z·σ_SS·SS_β + ε_GNSS(λ) + log(1/δ)/(λ − 1),   Z ~ N(0, 1),

rounded to ``grid`` (post-processing), drawn by :func:`~darrm_opt.sampling.rounded_gaussian.sample_gnss_noise`
from a CSPRNG. After publication the ledger is sealed (no more queries): a second release would cost a
second ε_GNSS. Everything else it shows is a function of public values only: the policy, the number of
queries and answered queries (⊥ is released to the student), and the data-independent bound of the quota.

Admission is data-independent: a query is refused when the quota is used, never because of the private
state (a refusal that depended on the votes would itself leak them).

What ε̂ is: a differentially private estimate of a privacy bound that holds for *this* dataset, plus the
fixed cost of releasing it; it is not a worst-case guarantee and can come out below the truth
(docs/data-dependent.md). :meth:`DataDependentPolicy.data_independent_epsilon` is the worst case.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np

from darrm_opt.errors import BudgetExceeded, InvalidParameter
from darrm_opt.privacy.query_accounts import (
    account_confident_gnmax,
    account_gnmax,
    account_interactive_gnmax,
    account_table,
)
from darrm_opt.privacy.query_costs import TableShape, gnmax_shape, table_shape
from darrm_opt.privacy.smooth_sensitivity import CONVERSIONS, dp_tail, gnss_rdp, smooth_sensitivity
from darrm_opt.sampling import RandomBytes, sample_gnss_noise


@lru_cache(maxsize=16)
def _table_shape(K: int, classes: int, gamma: tuple[float, ...], order: float) -> TableShape:
    return table_shape(K, classes, gamma, order)


AGGREGATORS = ("gnmax", "confident-gnmax", "interactive-gnmax", "table")
MODE = "data-dependent"


def _num(name: str, value: object, *, low: float = 0.0, strict: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidParameter(name, "must be a number", value)
    x = float(value)
    if not math.isfinite(x) or (x <= low if strict else x < low):
        raise InvalidParameter(name, f"must be a finite number {'>' if strict else '>='} {low:g}", value)
    return x


#: the range of a noise scale (σ, σ₁, σ_SS): its square and the reciprocal of its square are finite, nonzero
#: floats, so every cost computed from it is a number
SCALE_RANGE = (1e-100, 1e100)


def _scale(name: str, value: object) -> float:
    x = _num(name, value)
    low, high = SCALE_RANGE
    if not low <= x <= high:
        raise InvalidParameter(name, f"must be a noise scale in [{low:g}, {high:g}]", value)
    return x


def _int(name: str, value: object, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < low:
        raise InvalidParameter(name, f"must be an integer >= {low}", value)
    return int(value)


@dataclass(frozen=True)
class DataDependentPolicy:
    """The public parameters of a data-dependent job (validated once)."""

    aggregator: str  #: gnmax | confident-gnmax | interactive-gnmax | table (a multi-class γ table, MC-1)
    K: int
    classes: int
    sigma: float | None  #: GNMax's noise (σ₂ of Confident-GNMax); None for a table
    order: float  #: the Rényi order λ of the account and of GNSS
    beta: float  #: smoothness β, with λ < 1/(2β) (Thm. 23)
    sigma_ss: float  #: GNSS noise σ_SS
    delta: float
    quota: int  #: the most queries the job may make
    threshold: float | None = None  #: Confident- and Interactive-GNMax's T
    sigma1: float | None = None  #: their check's σ₁
    grid: float = 1e-4  #: the published ε is rounded to a multiple of this
    conversion: str = "thm5"  #: RDP → DP: thm5 (PATE Thm. 5) or improved (Canonne, Kamath & Steinke 2020)
    gamma: tuple[float, ...] | None = None  #: the table's γ(0..K) (aggregator "table"), with finite RDP
    #: Interactive-GNMax's confidence γ (Alg. 2, line 4): a query that fails the check gets the student's own
    #: label when its top probability exceeds it, else ⊥; needed by the ledger's answer path
    confidence: float | None = None

    def __post_init__(self) -> None:
        if self.conversion not in CONVERSIONS:
            raise InvalidParameter("conversion", f"must be one of {', '.join(CONVERSIONS)}", self.conversion)
        if self.aggregator not in AGGREGATORS:
            raise InvalidParameter("aggregator", f"must be one of {', '.join(AGGREGATORS)}", self.aggregator)
        object.__setattr__(self, "K", _int("K", self.K))
        object.__setattr__(self, "classes", _int("classes", self.classes, 2))
        for name in ("beta", "grid"):
            object.__setattr__(self, name, _num(name, getattr(self, name)))
        object.__setattr__(self, "sigma_ss", _scale("sigma_ss", self.sigma_ss))
        object.__setattr__(self, "order", _num("order", self.order, low=1.0))
        delta = _num("delta", self.delta)
        if not delta < 1.0:
            raise InvalidParameter("delta", "must satisfy 0 < delta < 1", self.delta)
        object.__setattr__(self, "quota", _int("quota", self.quota))
        if not self.order < 1.0 / (2.0 * self.beta):
            raise InvalidParameter("beta", f"GNSS (Thm. 23) needs order < 1/(2β) = {1 / (2 * self.beta):.6g}",
                                   self.beta)
        if self.aggregator == "table":
            if self.confidence is not None:
                raise InvalidParameter("confidence", "only interactive-gnmax takes a confidence", self.confidence)
            if self.sigma is not None or self.threshold is not None or self.sigma1 is not None:
                raise InvalidParameter("sigma", "a table takes gamma, not sigma, threshold or sigma1", self.sigma)
            if self.gamma is None:
                raise InvalidParameter("gamma", "a table ledger needs the table's gamma", None)
            object.__setattr__(self, "gamma", tuple(float(g) for g in self.gamma))
            self.table()  # validates γ and refuses tables with infinite RDP
            return
        if self.gamma is not None:
            raise InvalidParameter("gamma", "only a table ledger takes gamma", "…")
        if self.confidence is not None:
            if self.aggregator != "interactive-gnmax":
                raise InvalidParameter("confidence", "only interactive-gnmax takes a confidence", self.confidence)
            c = _num("confidence", self.confidence, strict=False)
            if not c < 1.0:
                raise InvalidParameter("confidence", "must satisfy 0 <= confidence < 1", self.confidence)
            object.__setattr__(self, "confidence", c)
        object.__setattr__(self, "sigma", _scale("sigma", self.sigma))
        if self.aggregator != "gnmax":
            if self.threshold is None or self.sigma1 is None:
                raise InvalidParameter("threshold", f"{self.aggregator} needs threshold and sigma1", self.threshold)
            object.__setattr__(self, "threshold", _num("threshold", self.threshold, strict=False))
            object.__setattr__(self, "sigma1", _scale("sigma1", self.sigma1))
        elif self.threshold is not None or self.sigma1 is not None:
            raise InvalidParameter("threshold", "plain GNMax takes no threshold or sigma1", self.threshold)
        if not gnmax_shape(self.sigma, self.order, self.classes).conditions:
            raise InvalidParameter("sigma", "PATE App. B's conditions C5/C6 fail at this σ and order: no "
                                   "smooth-sensitivity release (choose a larger σ or another order)", self.sigma)

    def table(self) -> TableShape:
        """The table's data-dependent RDP per state and its sensitivity (:func:`table_shape`, cached)."""
        if self.gamma is None:
            raise InvalidParameter("aggregator", "only a table ledger has a table", self.aggregator)
        return _table_shape(self.K, self.classes, self.gamma, self.order)

    @property
    def fixed_epsilon(self) -> float:
        """ε_GNSS(λ) + the RDP → DP term: what the release adds to the data-dependent RDP (Thm. 23, Thm. 5)."""
        return gnss_rdp(self.order, self.beta, self.sigma_ss) + dp_tail(self.order, self.delta, self.conversion)

    def data_independent_epsilon(self, queries: int | None = None) -> float:
        """The worst case of ``queries`` (default: the quota) queries at order λ, by Thm. 5, with no release of
        a data-dependent value: Q·(λ/σ² [+ λ/(2σ₁²)]) + the RDP → DP term (Prop. 8; the threshold check is a
        sensitivity-1 Gaussian)."""
        q = self.quota if queries is None else queries
        if self.aggregator == "table":  # the table's own RDP at λ: the largest over its states
            return q * float(self.table().cost.max()) + dp_tail(self.order, self.delta, self.conversion)
        per = self.order / self.sigma**2  # type: ignore[operator]
        if self.sigma1 is not None:
            per += self.order / (2.0 * self.sigma1**2)
        return q * per + dp_tail(self.order, self.delta, self.conversion)

    def to_json(self) -> str:
        d = asdict(self)
        if d["confidence"] is None:  # absent, as in policies written before it existed
            del d["confidence"]
        return json.dumps(d, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> DataDependentPolicy:
        names = set(cls.__dataclass_fields__)
        extra = set(data) - names
        if extra:
            raise InvalidParameter("policy", f"unknown fields {sorted(extra)}", sorted(extra))
        try:
            return cls(**data)
        except TypeError as e:
            raise InvalidParameter("policy", f"incomplete: {e}", dict(data)) from None

    @classmethod
    def from_json(cls, text: str) -> DataDependentPolicy:
        return cls.from_mapping(json.loads(text))


@dataclass(frozen=True)
class DataDependentState:
    """The ledger's state. ``rdp`` and ``reach`` are private (functions of the votes): never shown."""

    queries: int = 0
    answered: int = 0
    rdp: float = 0.0
    reach: tuple[float, ...] = ()
    published: float | None = None
    #: the answers of the last :data:`KEPT_KEYS` requests sent with an idempotency key: (key, digest of the
    #: request, answers), oldest first (private like the votes they answer)
    keyed: tuple[tuple[str, str, tuple[int, ...]], ...] = ()

    def to_json(self) -> str:
        d: dict[str, Any] = {"queries": self.queries, "answered": self.answered, "rdp": self.rdp,
                             "reach": list(self.reach), "published": self.published}
        if self.keyed:
            d["keyed"] = [[k, digest, list(answers)] for k, digest, answers in self.keyed]
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> DataDependentState:
        d = json.loads(text)
        return cls(int(d["queries"]), int(d["answered"]), float(d["rdp"]), tuple(float(x) for x in d["reach"]),
                   None if d["published"] is None else float(d["published"]),
                   tuple((str(k), str(digest), tuple(int(a) for a in answers))
                         for k, digest, answers in d.get("keyed", ())))

    def answers_of(self, key: str) -> tuple[str, tuple[int, ...]] | None:
        """(digest, answers) of the request first sent with ``key``, if it is among the kept ones."""
        return next(((digest, answers) for k, digest, answers in self.keyed if k == key), None)

    def keep(self, key: str, digest: str, answers: tuple[int, ...]) -> DataDependentState:
        """This state with the answers of ``key`` kept (the oldest key dropped beyond :data:`KEPT_KEYS`)."""
        return replace(self, keyed=(*self.keyed, (key, digest, answers))[-KEPT_KEYS:])


#: the idempotency keys a data-dependent ledger remembers (its last keyed requests)
KEPT_KEYS = 64


def new_state(policy: DataDependentPolicy) -> DataDependentState:
    return DataDependentState(reach=(0.0,) * (policy.K + 1))


def histograms(policy: DataDependentPolicy, votes: object) -> np.ndarray:
    """``votes`` as the (queries, classes) int64 histograms of ``policy`` (InvalidParameter naming votes)."""
    return _votes(policy, votes)


def _votes(policy: DataDependentPolicy, votes: object) -> np.ndarray:
    try:
        v = np.asarray(votes, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        raise InvalidParameter("votes", "must be vote histograms (queries × classes)", votes) from None
    if v.ndim != 2 or v.shape[1] != policy.classes:
        raise InvalidParameter("votes", f"must have shape (queries, {policy.classes})", v.shape)
    if np.any(v < 0) or np.any(v.sum(axis=1) != policy.K):
        raise InvalidParameter("votes", f"every histogram must hold K = {policy.K} non-negative votes", None)
    return v


def admit(policy: DataDependentPolicy, state: DataDependentState, queries: int) -> None:
    """BudgetExceeded when ``queries`` more would pass the quota or the ledger is sealed (counts only)."""
    if state.published is not None:
        raise BudgetExceeded("the ledger is sealed: its sanitised ε has been published", binding="sealed")
    if state.queries + queries > policy.quota:
        raise BudgetExceeded(f"the job's quota of {policy.quota} queries would be exceeded "
                             f"({state.queries} made, {queries} asked)", binding="quota",
                             largest_batch=policy.quota - state.queries)


def record(policy: DataDependentPolicy, state: DataDependentState, votes: object,
           answered: Sequence[bool] | None = None, student: object | None = None,
           discrete: bool = True) -> DataDependentState:
    """The state after ``votes`` (one histogram per query); ``answered`` (Confident- and Interactive-GNMax:
    which passed the check and were answered by the teachers, a public outcome) is required for them and
    must be absent for GNMax. An Interactive-GNMax query that failed the check (the student's confident
    prediction reinforced, or ⊥) pays only the check: its data-dependent cost on the student-relative
    statistic when ``student`` (the student's class probabilities per query, PATE Alg. 2) is given, else
    its data-independent λ/(2σ₁²). ``discrete``: the answers were drawn with discrete Gaussian noise, as
    every sampler of this product draws them (the ledger's own answers, GNMax tables' answers), so GNMax's
    q̃ is taken at :func:`~darrm_opt.privacy.query_costs.discrete_q_sigma` and Confident-GNMax's check is
    priced for the discrete law; False only for answers drawn elsewhere with continuous Gaussian noise (the
    PATE paper's setting). Refused (BudgetExceeded) beyond the
    quota or after publication; the refusal depends on counts only."""
    v = _votes(policy, votes)
    admit(policy, state, v.shape[0])
    if student is not None and policy.aggregator != "interactive-gnmax":
        raise InvalidParameter("student", "only interactive-gnmax takes the student's probabilities", None)
    if policy.aggregator in ("gnmax", "table"):
        if answered is not None:
            raise InvalidParameter("answered", f"{policy.aggregator} answers every query", answered)
        acc = (account_table(v, policy.table()) if policy.aggregator == "table"
               else account_gnmax(v, policy.sigma, policy.order, policy.K, discrete))  # type: ignore[arg-type]
    else:
        if answered is None:
            raise InvalidParameter("answered", f"{policy.aggregator} needs which queries were answered", None)
        ans = np.asarray(answered)
        if ans.dtype != bool or ans.shape != (v.shape[0],):
            raise InvalidParameter("answered", "must be one boolean per query", answered)
        if policy.aggregator == "confident-gnmax":
            acc = account_confident_gnmax(v, ans, policy.threshold, policy.sigma1,  # type: ignore[arg-type]
                                          policy.sigma, policy.order, policy.K,  # type: ignore[arg-type]
                                          discrete=discrete)
        else:
            acc = account_interactive_gnmax(v, ans, policy.sigma1, policy.sigma,  # type: ignore[arg-type]
                                            policy.order, policy.K, student, policy.threshold, discrete)
    reach = tuple((np.asarray(state.reach) + acc.reach).tolist())
    return replace(state, queries=state.queries + v.shape[0], answered=state.answered + acc.answered,
                   rdp=state.rdp + acc.rdp, reach=reach)


def release_law(policy: DataDependentPolicy, state: DataDependentState) -> tuple[float, float]:
    """(mean, standard deviation) of the GNSS release before rounding: (Σβ + fixed part, σ_SS·SS_β).
    Private: what :func:`publish` samples from, exposed for the privacy tests only."""
    ss = smooth_sensitivity(np.asarray(state.reach), policy.beta)
    return state.rdp + policy.fixed_epsilon, policy.sigma_ss * ss


def publish(policy: DataDependentPolicy, state: DataDependentState,
            random_bytes: RandomBytes) -> DataDependentState:
    """Draw and keep the sanitised ε (once; the ledger is sealed after). A job with no query publishes the
    fixed part alone (its data-dependent RDP is 0 and so is its sensitivity)."""
    if state.published is not None:
        return state
    mean, sd = release_law(policy, state)
    if sd > 0:
        value = sample_gnss_noise(mean, sd, policy.grid, random_bytes)
    else:
        value = math.ceil(mean / policy.grid) * policy.grid
    return replace(state, published=value)


def public_view(policy: DataDependentPolicy, state: DataDependentState) -> dict[str, Any]:
    """Everything the ledger shows: the policy, counts, bounds of public values and, once published, the
    sanitised ε. Never the data-dependent RDP or its smooth sensitivity."""
    return {
        "mode": MODE,
        "policy": json.loads(policy.to_json()),
        "queries": state.queries,
        "answered": state.answered,
        "quota": policy.quota,
        "delta": policy.delta,
        "fixed_epsilon": policy.fixed_epsilon,
        "data_independent_epsilon": policy.data_independent_epsilon(),
        "sealed": state.published is not None,
        "sanitised_epsilon": state.published,
        "guarantee": ("sanitised data-dependent: a noisy, differentially private estimate of the (ε, δ) bound "
                      "that holds for this dataset, including the cost of its release; not a worst case"),
    }

