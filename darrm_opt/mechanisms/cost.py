"""What a solve will cost, predicted from measured solves: a service admits a solve or refuses it by its
predicted wall time and memory, not by its count of corner multisets (which ranks a pure-DP K = 1001, 438 s
and 2.9 GB, below an approximate K = 101, 5-30 s).

Each kind says what drives its cost (:meth:`~darrm_opt.mechanisms.base.Mechanism.solve_cost_key`): the curve of
measured solves it follows and its size on that curve (K; K³·C for a multi-class table, whose exact prior
weights cost O(K³ C); K·slopes for a shaped table, ...). The model: each curve's measured (size, seconds, MB)
of :data:`MEASURED`, in ascending size, keeping for seconds and for MB only the points dearer than every
smaller one (a curve measured along two parameters has points off its main axis, cheaper than a smaller
size's; leaving them out errs towards refusing); between two kept sizes the cost is interpolated linearly in
log size / log cost (a power law per segment), above the largest it follows the power law of the last segment
at least :data:`SPAN` long, below the smallest it is the smallest's. A kind whose solve is no LP (its release
is defined by its parameters and certified in closed form) has nothing to solve: :data:`NO_LP`."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from .base import SolveCostKey

#: curve -> [(size, wall seconds, MB above the imports)], measured by ``python benchmarks/solve_cost.py`` (its
#: default cases: solver highs, each solve in a fresh process; 2 cores shared with other work, so the times are
#: on the slow side of an idle machine's). darrm: the larger of two runs (the second measured 1.5-4× less time,
#: on a less busy machine), and approximate K = 201 from ``--cases darrm:K=201``; darrm-multiclass-shaped
#: K = 501 at 2000 slopes from ``--cases darrm-multiclass-shaped:K=501,slopes=2000``; the PATE-setting kinds at
#: δ = 0 and 10⁻⁵ (both kept: the model reads the larger); a point marked "at least" was stopped at the
#: benchmark's ``--timeout`` (330 s).
MEASURED: dict[str, list[tuple[float, float, float]]] = {
    "darrm/pure": [(51, 0.65, 13), (101, 1.50, 35), (201, 5.15, 207), (401, 34.29, 604)],
    "darrm/approximate": [(11, 0.09, 10), (25, 0.53, 35), (51, 10.75, 177), (101, 16.69, 353),
                          (201, 430.72, 2370)],
    "darrm-pate": [(101, 0.05, 8), (101, 0.10, 9), (251, 0.11, 16), (251, 0.16, 17), (501, 0.27, 38),
                   (501, 0.37, 41), (1001, 0.62, 128), (1001, 0.95, 128)],
    "darrm-multiclass": [(1.0303e+07, 0.47, 35), (1.0303e+07, 0.51, 35), (1.5625e+08, 0.89, 64),
                         (1.5625e+08, 0.99, 65), (1.5625e+09, 2.16, 80), (1.5625e+09, 2.29, 85),
                         (1e+10, 8.21, 524), (1e+10, 8.74, 526), (9.6e+10, 43.38, 1880), (9.6e+10, 48.85, 1876),
                         (9.98973e+10, 53.59, 274), (9.98973e+10, 56.55, 246), (3.375e+10, 21.85, 1140)],
    "darrm-pate-shaped": [(12120, 0.62, 38), (30120, 1.04, 43), (60120, 3.22, 93), (1.002e+06, 39.89, 1114)],
    "darrm-multiclass-shaped": [(7320, 1.3, 52), (13320, 3.04, 67), (24120, 6.31, 95), (31200, 12.53, 145),
                                (61320, 25.81, 307), (111000, 18.01, 331), (260000, 62.25, 834),
                                (1.022e+06, 326.44, 3845)],
    "darrm-multiclass-top2/approximate": [(81250, 1.46, 92), (338130, 3.57, 233), (663065, 3.6, 395),
                                          (731250, 8.63, 356), (1.32613e+06, 7.01, 504),
                                          (1.69065e+06, 7.41, 1123), (2.03125e+06, 7.53, 645)],
    "darrm-multiclass-top2/pure": [(81250, 2.2, 90), (338130, 12.93, 242), (663065, 9.14, 495), (731250, 33.58, 421),
                                   (1.32613e+06, 330.0, 614),  # at least (stopped at the timeout)
                                   (1.69065e+06, 26.2, 1255)],
}


@dataclass(frozen=True)
class Cost:
    """A solve's predicted wall ``seconds`` and ``memory_mb`` (above the imports); ``key``: what it was
    predicted from (None: no LP, nothing to solve)."""

    seconds: float
    memory_mb: float
    key: SolveCostKey | None = None


#: the cost of a kind whose solve is no LP
NO_LP = Cost(0.0, 0.0, None)


#: above a curve's largest size x, the cost follows the power law from the largest kept size at most x / SPAN
#: to x (a shorter last segment, between two sizes measured along different parameters, has no slope to trust)
SPAN = 1.5


def _interpolate(points: list[tuple[float, float]], size: float) -> float:
    """The power-law interpolation of ``points`` (sizes ascending, values > 0) at ``size``: for the segment
    (x₀, v₀), (x₁, v₁) holding ``size``, v₀·(size/x₀)^b with b = log(v₁/v₀) / log(x₁/x₀); above the largest
    size, the same from the largest size at most x₁/:data:`SPAN` (else the smallest) to the largest x₁; the
    smallest's value below the smallest size."""
    xs = [x for x, _ in points]
    if size <= xs[0] or len(points) == 1:
        return points[0][1]
    i = bisect.bisect_left(xs, size)
    if i < len(xs) and xs[i] == size:
        return points[i][1]
    if i == len(xs):
        j = max(bisect.bisect_right(xs, xs[-1] / SPAN) - 1, 0)
        (x0, v0), (x1, v1) = points[j], points[-1]
    else:
        (x0, v0), (x1, v1) = points[i - 1], points[i]
    slope = math.log(v1 / v0) / math.log(x1 / x0)
    return v0 * (size / x0) ** slope


def envelope(points: list[tuple[float, float, float]], floor: tuple[float, float] = (1e-3, 1.0)
             ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """A curve's (size, seconds) and (size, MB) points as the model reads them: ascending size, the largest
    value at each size (at least ``floor``), and only the points dearer than every smaller one (a point at
    most as dear as a smaller one lies off the curve's main axis: it is left out, and the cost there is
    interpolated between dearer points, so the curve increases and errs towards refusing)."""
    out: tuple[list[tuple[float, float]], list[tuple[float, float]]] = ([], [])
    for size, *values in sorted(points):
        for kept, value, low in zip(out, values, floor):
            value = max(value, low)
            if kept and kept[-1][0] == size:
                kept[-1] = (size, max(kept[-1][1], value))
            elif not kept or value > kept[-1][1]:
                kept.append((size, value))
    return out


def predict_key(key: SolveCostKey) -> Cost | None:
    """The predicted cost at ``key``'s size on its curve (module doc); None for a curve not measured."""
    points = MEASURED.get(key.curve)
    if not points:
        return None
    seconds, memory = envelope(points)
    return Cost(_interpolate(seconds, key.size), _interpolate(memory, key.size), key)


def predict(params: Any) -> Cost | None:
    """The predicted wall seconds and memory of solving ``params``: :data:`NO_LP` for a kind whose solve is no
    LP, None for an LP whose curve has no measured solves (a kind added without measuring it)."""
    from . import mechanism_for

    key = mechanism_for(params).solve_cost_key(params)
    return NO_LP if key is None else predict_key(key)
