"""Certificates of composition-shaped PATE-setting tables: the profile under the target at every slope, exactly.

A shaped table (:mod:`darrm_opt.model.shaped`) states J points (ε′_j, δ_T(ε′_j)) of a target curve (S-1).
In the PATE setting δ_γ(ε′) ≤ δ is exactly the pair condition at (ε′, δ) (:mod:`darrm_opt.model.neighbours`),
so each point is decided by :func:`darrm_opt.certify.pairs.certify_pairs` (every (l, l ± 1, output) row in
float64, rows near the bound re-decided in outward-rounded interval arithmetic): the table is certified
iff every point is. The certificate's ``worst`` is the largest of the row costs' relative use of their
bound, max_j max_row cost / (e^{ε′_j} − 1 + 2δ_T(ε′_j)) (≤ 1 when certified), its ``limit`` 1.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from darrm_opt.certify.multiclass import certify_multiclass
from darrm_opt.certify.pairs import certify_pairs
from darrm_opt.certify.verdict import VerdictFields
from darrm_opt.model.neighbours import PateParams
from darrm_opt.model.shaped import ShapedMulticlassParams, ShapedPateParams


@dataclass(frozen=True)
class ShapedCertificate(VerdictFields):
    """The outcome of certifying every slope point of a shaped table."""

    verdict_fields = ("limit_ratio", "max_ratio", "rows_checked", "worst_row")
    what = "(slope, l, l ± 1, output) rows"

    certified: bool
    max_ratio: float
    limit_ratio: float
    slopes_checked: int
    rows_checked: int
    worst_row: list[int]  #: [slope index j (1..J), l, l′, output]
    high_precision_checked: int
    seconds: float
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def certify_shaped(params: ShapedPateParams, gamma) -> ShapedCertificate:
    """Certify γ against every point (ε′_j, δ_T(ε′_j)) of ``params`` (module docstring)."""
    t0 = time.perf_counter()
    g = np.asarray(gamma, dtype=np.float64)
    eps, target = params.slope_points()
    ratio, worst, rows, hp, reason = -np.inf, [0, 0, 0, 0], 0, 0, ""
    for j, (e, d) in enumerate(zip(eps.tolist(), target.tolist(), strict=True), start=1):
        cert = certify_pairs(PateParams(params.K, e, d), g)
        rows += cert.pairs_checked
        hp += cert.high_precision_checked
        r = cert.max_privacy_cost / cert.bound
        if r > ratio:
            ratio, worst = r, [j, *cert.worst_pair]
        if not cert.certified and not reason:
            reason = f"slope {j} (ε′ = {e:.6g}, δ_T = {d:.6g}): {cert.reason}"
    return ShapedCertificate(not reason, float(ratio), 1.0, int(eps.size), rows, worst, hp,
                             time.perf_counter() - t0, reason)


@dataclass(frozen=True)
class ShapedMulticlassCertificate(VerdictFields):
    """The outcome of certifying every slope point of a shaped multi-class table: (MC-2) at every
    (ε′_j, δ_T(ε′_j)) over every neighbouring histogram type, both orders (:func:`certify_multiclass`)."""

    verdict_fields = ("limit_ratio", "max_ratio", "types_checked", "worst_type")
    what = "(slope, neighbouring histogram type) pairs"

    certified: bool
    max_ratio: float  #: max_j (largest divergence at slope j) / δ_T(ε′_j)
    limit_ratio: float
    slopes_checked: int
    types_checked: int
    worst_type: list[int]  #: [slope index j (1..J), g, t, g′, t′, k]
    exact_checked: int
    seconds: float
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def certify_shaped_multiclass(params: ShapedMulticlassParams, gamma) -> ShapedMulticlassCertificate:
    """Certify γ against every point (ε′_j, δ_T(ε′_j)) of ``params``: the multi-class certificate (float sweep
    with an error bound, exact rational re-check near δ) at each slope; certified iff every slope is."""
    t0 = time.perf_counter()
    g = np.asarray(gamma, dtype=np.float64)
    ratio, worst, types, exact, reason = -np.inf, [0], 0, 0, ""
    for j in range(params.slopes):
        p = params.at(j)
        cert = certify_multiclass(p, g)
        types += cert.types_checked
        exact += cert.exact_checked
        r = (cert.max_hockey_stick / p.delta if p.delta > 0 else
             (0.0 if cert.max_hockey_stick <= 0 else math.inf))
        if r > ratio:
            ratio, worst = r, [j + 1, *cert.worst_type]
        if not cert.certified and not reason:
            reason = f"slope {j + 1} (ε′ = {p.epsilon:.6g}, δ_T = {p.delta:.6g}): {cert.reason}"
    return ShapedMulticlassCertificate(not reason, float(ratio), 1.0, params.slopes, types, worst, exact,
                                       time.perf_counter() - t0, reason)
