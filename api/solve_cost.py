"""What a solve will cost, predicted from measured solves: the service admits a solve or refuses it (422 naming
K and the predicted cost over the limit) by its predicted wall time and memory, not by its count of corner
multisets (which ranks a pure-DP K = 1001, 438 s and 2.9 GB, below an approximate K = 101, 5-30 s).

The model: for each kind it covers and each setting (pure DP or not), the measured (K, seconds, MB) of
:data:`MEASURED`; between two measured K the cost is interpolated linearly in log K / log cost (a power law per
segment), above the largest it follows the last segment's power law, below the smallest it is the smallest's.
Kinds it does not cover keep the multiset limit (``DARRM_MAX_MULTISETS``)."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from darrm_opt.mechanisms import mechanism_for

#: (kind, approximate teachers (Δ > 0)) -> [(K, wall seconds, MB above the imports)], measured by
#: ``python benchmarks/solve_cost.py`` (m = 3, ε = 0.1, solver highs; 2 cores shared with other work, so
#: the times are on the slow side of an idle machine's)
MEASURED: dict[tuple[str, bool], list[tuple[int, float, float]]] = {
    ("darrm", False): [(51, 0.65, 13), (101, 1.50, 35), (201, 5.15, 207), (401, 34.29, 604)],
    ("darrm", True): [(11, 0.09, 10), (25, 0.53, 35), (51, 10.75, 176), (101, 16.69, 353),
                         (201, 430.72, 2370)],
}


@dataclass(frozen=True)
class Cost:
    seconds: float
    memory_mb: float


def _interpolate(points: list[tuple[int, float]], K: int) -> float:
    """The power-law interpolation of ``points`` (K ascending, values > 0) at ``K`` (see the module doc)."""
    ks = [k for k, _ in points]
    if K <= ks[0]:
        return points[0][1]
    i = min(max(bisect.bisect_left(ks, K), 1), len(points) - 1)
    (k0, v0), (k1, v1) = points[i - 1], points[i]
    slope = math.log(v1 / v0) / math.log(k1 / k0)
    return v0 * (K / k0) ** slope


def predict(params: Any) -> Cost | None:
    """The predicted wall seconds and memory of solving ``params``; None for a kind the model does not cover."""
    kind = mechanism_for(params).kind
    approximate = getattr(params, "teacher_delta", 0.0) > 0
    points = MEASURED.get((kind, approximate))
    if not points:
        return None
    if len(points) == 1:
        return Cost(points[0][1], points[0][2])
    K = int(params.K)
    return Cost(_interpolate([(k, max(s, 1e-3)) for k, s, _ in points], K),
                _interpolate([(k, max(mb, 1.0)) for k, _, mb in points], K))
