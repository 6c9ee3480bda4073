"""A family of neighbouring pair types and its divergence D(x) = max_i Σ_j n_ij max(0, P_ij − x Q_ij): in
float64 with its error bound η(x), and exactly in rational arithmetic (the maths of
:mod:`darrm_opt.privacy.pair_profile`, whose profiles are built from it, and of
:mod:`darrm_opt.privacy.statements`, which proves their statements with it).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

UNIT_ROUNDOFF = 2.0**-53


@dataclass(frozen=True)
class PairFamily:
    """Every ordered neighbouring pair type's grouped output laws (arrays of shape (pairs, groups)) and its
    divergence in exact arithmetic: ``exact(i, X)`` = Σ_j n_ij max(0, P_ij − X Q_ij) for a rational X;
    ``laws(i)``: the exact (P_ij)_j and (Q_ij)_j of pair i."""

    n: np.ndarray
    P: np.ndarray
    Q: np.ndarray
    exact: Callable[[int, Fraction], Fraction]
    laws: Callable[[int], tuple[list[Fraction], list[Fraction]]] | None = None

    def divergences(self, x: float) -> np.ndarray:
        """Σ_j n_ij max(0, P_ij − x Q_ij) for every pair i, in float64."""
        return (self.n * np.maximum(0.0, self.P - x * self.Q)).sum(axis=1)

    def error_bound(self, x: float) -> float:
        """η(x): float error of one divergence. Each P, Q (≤ 1) carries ≤ 4 roundings, P − xQ ≤ 3 more
        (relative to 1 + x), each group term one more times n_ij, the sum ≤ G more, so
        η = 8·(Σ_j n_ij + G)(1 + x)·u with u = 2^-53, with a factor 4 to spare."""
        groups = self.n.shape[1]
        width = float(self.n.sum(axis=1).max()) if self.n.size else 0.0
        return 32.0 * (width + groups) * (1.0 + x) * UNIT_ROUNDOFF

    def points(self) -> np.ndarray:
        """Every event point (b, a) = (Q(S), P(S)) for S a union of groups, shape (pairs·2^G, 2)."""
        G = self.n.shape[1]
        masks = ((np.arange(1 << G)[:, None] >> np.arange(G)[None, :]) & 1).astype(np.float64)
        a = (self.n * self.P) @ masks.T
        b = (self.n * self.Q) @ masks.T
        return np.clip(np.stack([b.ravel(), a.ravel()], axis=1), 0.0, 1.0)


def round_up(v: Fraction) -> float:
    """The smallest float ≥ v."""
    f = float(v)
    return math.nextafter(f, math.inf) if Fraction(f) < v else f


def divergence_bound(family: PairFamily, x: float) -> float:
    """An upper bound on D(x) = max_i Σ_j n_ij max(0, P_ij − x Q_ij), exact up to rounding to float:
    every pair whose float value is within 2η(x) of the float maximum is re-computed exactly."""
    hs = family.divergences(x)
    if hs.size == 0:
        return 0.0
    eta = family.error_bound(x)
    top = float(hs.max())
    X = Fraction(x)
    best = max(family.exact(int(i), X) for i in np.flatnonzero(hs >= top - 2.0 * eta))
    return round_up(best)


def divergence_at(family: PairFamily, X: Fraction) -> Fraction:
    """D(X) = max_i Σ_j n_ij max(0, P_ij − X Q_ij) exactly, for a rational X ≥ 0 below the float range.

    The float values at x = fl(X) are within η(x) + |x − X|·Σ_j n_ij Q_ij ≤ η(x) + u·X ≤ 2η(x) of the exact
    ones at X (each pair's divergence is 1-Lipschitz in X since Σ_j n_ij Q_ij = 1), so every pair within
    4η of the float maximum is re-computed exactly and the true maximiser is among them."""
    x = float(X)
    hs = family.divergences(x)
    if hs.size == 0:
        return Fraction(0)
    near = np.flatnonzero(hs >= float(hs.max()) - 4.0 * family.error_bound(x))
    return max(family.exact(int(i), X) for i in near)
