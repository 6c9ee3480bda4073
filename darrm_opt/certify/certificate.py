"""Privacy certificates: a computed proof that a γ table satisfies every corner constraint.

DaRRM_γ is (mε, δ)-DP iff f(p, p′; γ) ≤ e^{mε} − 1 + 2δ for every admissible pair (Lemma 3.4), and it
suffices to check every corner multiset (Lemma 5.1, App. C.3). For a non-symmetric γ the output-0 condition
is −f ≤ bound, so both signs are checked; for symmetric γ the reflected multiset covers it. For a symmetric γ
that is non-increasing up to the middle (γ_Sub, the constants) the multisets of the corners with p ≥ p′
already attain the maximum (darrm_opt.certify.monotone), and ``reduce=True`` sweeps only those.

The check is exact in the following sense. Every multiset is swept in float64 with an a-priori error bound
η (:func:`darrm_opt.certify.sweep.error_bound`). Multisets whose float cost is ≤ bound − max(η, 1e-12) pass. Every
other multiset is re-evaluated in 40-digit arithmetic (mpmath) from the exact binary values of γ, ε, Δ, m
and δ, and passes only if that value is ≤ the bound computed in the same precision.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from darrm_opt.certify.exact import recheck
from darrm_opt.certify.monotone import lift, monotone_applies, reduced_problem, upper_corner_ids
from darrm_opt.certify.problems import make_problem
from darrm_opt.certify.slopes import FrontRequest
from darrm_opt.certify.structured import StructuredSweepProblem
from darrm_opt.certify.sweep import SweepResult, error_bound, signed_h, sweep, sweep_many
from darrm_opt.certify.verdict import VerdictFields
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.corners import corners
from darrm_opt.model.params import Params

#: Below this distance from the bound a multiset is always re-evaluated in high precision.
NEAR_TIGHT = 1e-12
#: At most this many multisets are re-checked in high precision; more means "cannot certify".
NEAR_CAP = 20_000
#: At most this many multisets are kept for certifying a rounded copy (``wide``; 7·10⁴ at K = 101, growing
#: about as K⁴); more: the sweep is repeated without them and the rounded copy needs its own sweep.
WIDE_CAP = 2_000_000


@dataclass(frozen=True)
class Certificate(VerdictFields):
    """The outcome of a full certification sweep."""

    verdict_fields = ("bound", "max_privacy_cost", "multisets_checked", "worst_multiset")
    what = "corner multisets"

    certified: bool
    max_privacy_cost: float
    bound: float
    multisets_checked: int
    worst_multiset: list[int]
    corners: list[list[float]]
    error_bound: float
    high_precision_checked: int
    seconds: float
    reason: str = ""
    #: indices of the corners whose multisets were swept; None: all of them. A subset (those with p ≥ p′)
    #: only for a symmetric γ with non-decreasing signed values, where it finds the same maximum
    #: (darrm_opt.certify.monotone); the worst multiset is still written over all corners.
    corners_swept: list[int] | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Certificate:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def validate_gamma(gamma, K: int) -> np.ndarray:
    """A γ table as a float64 array: K + 1 finite values in [0, 1]."""
    try:
        g = np.asarray(gamma, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameter("gamma", "must be a list of numbers") from None
    if g.ndim != 1 or g.size != K + 1:
        raise InvalidParameter("gamma", f"must have K + 1 = {K + 1} values", f"{g.size} values")
    if not np.all(np.isfinite(g)) or g.min() < 0 or g.max() > 1:
        raise InvalidParameter("gamma", "every value must be in [0, 1]")
    return g


def is_symmetric(gamma: np.ndarray) -> bool:
    return bool(np.array_equal(gamma, gamma[::-1]))


def certify(
    params: Params,
    gamma,
    *,
    progress=None,
    executor=None,
    workers: int | None = None,
    method: str = "auto",
    reduce: bool = False,
) -> Certificate:
    """Certify ``gamma`` (K + 1 values) for ``params`` by an exhaustive sweep over every corner multiset.

    Returns a :class:`Certificate`; ``certified`` is False (with ``reason``) when some multiset violates the
    bound or cannot be verified. ``reduce``: sweep only the corners with p ≥ p′ where the lemma of
    :mod:`darrm_opt.certify.monotone` makes that enough (symmetric γ, non-decreasing signed values, method
    "auto"); the maximum found is the same.
    """
    return certify_and_separate(params, gamma, progress=progress, executor=executor, workers=workers,
                                method=method, reduce=reduce)[0]


def certify_and_separate(
    params: Params,
    gamma,
    *,
    threshold: float | None = None,
    top: int = 0,
    progress=None,
    executor=None,
    workers: int | None = None,
    method: str = "auto",
    reduce: bool = False,
    wide: float | None = None,
    front: bool = False,
) -> tuple[Certificate, SweepResult]:
    """One exhaustive sweep that both certifies ``gamma`` and, for cutting planes, collects up to ``top``
    multisets whose cost exceeds ``threshold`` (``SweepResult.violators``). ``reduce``: as in
    :func:`certify` (never while separating: the cuts of a non-monotone LP iterate need every corner).
    ``wide`` (symmetric γ): also keep every multiset whose swept cost exceeds bound − ``wide``, with that cost
    (``SweepResult.wide``), from which :mod:`darrm_opt.certify.rounded` certifies a rounded copy of γ; the
    certificate is the same as without it. ``front`` (structured sweeps, no executor): also keep the slope
    front of γ from the sweep's own tables (``SweepResult.front``, a
    :class:`darrm_opt.certify.slopes.SlopeFront`: what the privacy profile's hull search reads), else None."""
    t0 = time.perf_counter()
    g = validate_gamma(gamma, params.K)
    two_sided = not is_symmetric(g)
    C = corners(params)
    E = math.exp(params.m * params.epsilon)
    h = signed_h(g)
    B = params.bound
    eta = error_bound(params.K, E, float(np.abs(h).max()) if h.size else 0.0)
    near = B - max(eta, NEAR_TIGHT)
    swept = upper_corner_ids(C) if reduce and method == "auto" and top == 0 and monotone_applies(g) else None
    problem = make_problem(C, h, E, method) if swept is None else reduced_problem(C, h, E)
    kw = dict(two_sided=two_sided, progress=progress, executor=executor, workers=workers, threshold=threshold,
              top=top)
    if front and swept is None and executor is None and isinstance(problem, StructuredSweepProblem):
        kw["front"] = FrontRequest(two_sided)
    res = _wide_sweep(problem, near, B - wide, B + eta, kw) if wide is not None and not two_sided else None
    if res is None:
        res = sweep(problem, near=near, near_cap=NEAR_CAP, **kw)
    if swept is not None:
        res = _lifted(res, swept, C.shape[0])
    return _verdict(params, g, res, eta, swept, t0), res


def _verdict(params: Params, g: np.ndarray, res: SweepResult, eta: float, swept, t0: float) -> Certificate:
    """The certificate from a sweep of γ (count vectors over all corners): a proven violation, too many
    near-tight multisets, or the exact re-check of those within the float error of the bound."""
    B, C, two_sided = params.bound, corners(params), not is_symmetric(g)
    fast_max = max(res.max_cost, -res.min_cost) if two_sided else res.max_cost
    worst = res.worst if (not two_sided or res.max_cost >= -res.min_cost) else res.best
    max_cost, hp = fast_max, 0
    certified, reason = True, ""
    if fast_max > B + eta:
        # above the bound by more than the float error: a proven violation, no exact re-check needed
        certified, reason = False, f"multiset {list(worst or ())} exceeds the bound by {fast_max - B:.3g}"
    elif res.near_overflow:
        certified, reason = False, "too many multisets within the float error of the bound to verify exactly"
    elif res.near.shape[0]:
        exact = recheck(params, g, res.near, two_sided)
        certified, reason, max_cost = exact.certified, exact.reason, exact.max_cost
        worst, hp = exact.worst, exact.checked
    return Certificate(
        certified=certified,
        max_privacy_cost=float(max_cost),
        bound=float(B),
        multisets_checked=int(res.multisets),
        worst_multiset=[int(x) for x in (worst or ())],
        corners=[[float(p), float(q)] for p, q in C],
        error_bound=float(eta),
        high_precision_checked=hp,
        seconds=time.perf_counter() - t0,
        reason=reason,
        corners_swept=None if swept is None else [int(i) for i in swept],
    )


def certify_many(params: Params, gammas, *, reduce: bool = False, workers: int | None = None,
                 progress=None, executor=None) -> list[Certificate]:
    """:func:`certify` of several tables; monotone ones with ``reduce`` (see :func:`certify`) share one
    sweep over the corners with p ≥ p′ (:func:`darrm_opt.certify.sweep.sweep_many`: the pmfs computed once,
    each certificate that of its own sweep). The others, or any on ``executor``, are certified one by one."""
    gs = [validate_gamma(g, params.K) for g in gammas]
    shared = [i for i, g in enumerate(gs) if reduce and executor is None and monotone_applies(g)]
    out: list[Certificate | None] = [None] * len(gs)
    if len(shared) > 1:
        t0 = time.perf_counter()
        C, E = corners(params), math.exp(params.m * params.epsilon)
        hs = [signed_h(gs[i]) for i in shared]
        etas = [error_bound(params.K, E, float(np.abs(h).max())) for h in hs]
        kws = [dict(threshold=None, top=0, near=params.bound - max(eta, NEAR_TIGHT), two_sided=False,
                    near_cap=NEAR_CAP) for eta in etas]
        ids = upper_corner_ids(C)
        results = sweep_many([reduced_problem(C, h, E) for h in hs], kws, workers=workers, progress=progress)
        for i, res, eta in zip(shared, results, etas, strict=True):
            out[i] = _verdict(params, gs[i], _lifted(res, ids, C.shape[0]), eta, ids, t0)
    return [c if c is not None else certify(params, g, reduce=reduce, workers=workers, progress=progress,
                                            executor=executor) for c, g in zip(out, gs, strict=True)]


def _wide_sweep(problem, near: float, level: float, violated: float, kw: dict) -> SweepResult | None:
    """The sweep with ``near`` collected down to ``level`` (with costs), split into the multisets above
    ``near`` (``SweepResult.near``, exactly those of a sweep at ``near``, NEAR_CAP applied as there) and all
    of them (``SweepResult.wide``). More than WIDE_CAP above ``level``: no ``wide``, and None (sweep again)
    unless the maximum exceeds ``violated`` (a proven violation, which needs no near set)."""
    level = min(level, near)
    res = sweep(problem, near=level, near_cap=WIDE_CAP, **kw)
    if res.near_overflow:
        return res if res.max_cost > violated else None
    res.wide, res.wide_costs, res.wide_level = res.near, res.near_costs, level
    keep = res.near_costs > near
    res.near, res.near_costs = res.near[keep], res.near_costs[keep]
    if res.near.shape[0] > NEAR_CAP:
        res.near, res.near_costs, res.near_overflow = res.near[:NEAR_CAP], res.near_costs[:NEAR_CAP], True
    return res


def _lifted(res: SweepResult, ids: np.ndarray, n_corners: int) -> SweepResult:
    """A sweep over the corner subset ``ids`` with its count vectors written over all ``n_corners`` corners."""
    def one(counts):
        return None if counts is None else tuple(int(x) for x in lift(counts, ids, n_corners)[0])

    res.worst, res.best = one(res.worst), one(res.best)
    res.near = lift(res.near, ids, n_corners)
    res.wide = None if res.wide is None else lift(res.wide, ids, n_corners)
    res.violators = lift(res.violators, ids, n_corners)
    return res
