"""Which exhaustive sweep evaluates a problem: the structured O(K⁵) sweep or the generic matrix sweep."""

from __future__ import annotations

import numpy as np

from darrm_opt.certify.structured import StructuredSweepProblem, structured_applies
from darrm_opt.certify.sweep import SweepProblem

#: Sweep methods: "auto" (structured where it applies and K ≥ STRUCTURED_MIN_K), "structured", "matrix".
METHODS = ("auto", "structured", "matrix")
#: Below this K the matrix sweep is faster (benchmarks/sweep_rate.py).
STRUCTURED_MIN_K = 31


def make_problem(probs, h, E, method: str = "auto") -> SweepProblem:
    """The sweep problem for these corners: the O(K⁵) structured sweep for the 8 corners of Δ > 0 unless
    ``method == "matrix"``; the generic matrix-product sweep otherwise."""
    if method not in METHODS:
        raise ValueError(f"unknown sweep method {method!r}")
    small = np.asarray(h).size - 1 < STRUCTURED_MIN_K
    if method == "structured" or (method == "auto" and not small):
        if structured_applies(probs):
            return StructuredSweepProblem(probs, h, E)
    if method == "structured":
        raise ValueError("the structured sweep needs the 8 canonical corners of Δ > 0")
    return SweepProblem(probs, h, E)
