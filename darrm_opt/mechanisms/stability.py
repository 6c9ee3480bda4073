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
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.stability import SvtParams, distance_from_gap, job_profile, ptr_delta, svt_epsilon
from darrm_opt.sampling import RandomBytes, discrete_laplace, uniform_index, uniform_limits

#: the answer written for ⊥ (an unstable query, or any query after the cut-off)
BOTTOM = -1


@dataclass(frozen=True)
class StabilityParams:
    """A job: ``K`` teachers, ``classes`` C (None: 0/1 votes), the test ``svt``, the ``quota`` of queries
    (δ holds for any number of queries once the quota reaches c; the quota is a public limit)."""

    K: int
    classes: int | None
    svt: SvtParams
    quota: int

    def __post_init__(self) -> None:
        for name, low in (("K", 1), ("quota", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise InvalidParameter(name, f"must be an integer >= {low}", v)
        c = self.classes
        if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 2):
            raise InvalidParameter("classes", "must be an integer >= 2", c)

    @property
    def C(self) -> int:
        return 2 if self.classes is None else self.classes

    def canonical(self) -> dict[str, Any]:
        return {"K": self.K, "classes": self.classes, **self.svt.canonical(), "quota": self.quota}


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

    # --- the statement ----------------------------------------------------------------------------------
    @property
    def epsilon(self) -> float:
        return svt_epsilon(self.params.svt)

    @property
    def delta(self) -> float:
        return ptr_delta(self.params.svt, self.params.quota)

    def profile(self) -> Any:
        """The job's (ε, δ) as a dominating pair (:func:`darrm_opt.privacy.stability.job_profile`)."""
        return job_profile(self.params.svt, self.params.quota)

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
        plurality, a tie a uniform class of its top set (8-byte words by rejection). InvalidParameter when
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
                continue
            top = np.flatnonzero(h[i] == srt[i, -1])
            out[i] = int(top[uniform_index(top.size, self._limits, random_bytes)])
            answered += 1
        return out, StabilityState(state.rho, unstable, state.queries + n, answered)
