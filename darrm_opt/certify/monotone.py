"""Monotone tables: the corners with p ≥ p′ suffice to find the maximum privacy cost.

Write φ(l) = (1 + h_l)/2 = Pr[release 1 | L = l] with h_l = s_l γ(l) (Lemma 3.4), so that for teachers
(p_i, p′_i) the cost is f = (2q − 1) − e^{mε}(2q′ − 1) with q = Σ_l φ(l) α_l and q′ = Σ_l φ(l) α′_l.

Lemma. If h is non-decreasing in l (γ non-increasing up to (K − 1)/2 and non-decreasing from (K + 1)/2,
as γ_Sub, γ_DSub and every constant are), then

    max over (ε, Δ)-DP teachers of f  =  max over the corner multisets of the corners with p ≥ p′.

Proof. With L_{−i} the other teachers' sum, q′ = E φ(L_{−i}) + p′_i E[φ(L_{−i} + 1) − φ(L_{−i})] is
non-decreasing in p′_i, and q does not depend on p′_i. So replacing a teacher with p_i < p′_i by (p_i, p_i)
(always admissible) keeps q, lowers q′ and cannot lower f: the maximum is attained with every teacher in
G = F ∩ {p ≥ p′}, F the (ε, Δ)-DP region of one teacher. f is affine in each pair with the others fixed
(Lemma 5.1), so it is attained at vertices of G. G's vertices are F's vertices with p ≥ p′ (F meets the
diagonal only at its vertices (0, 0) and (1, 1)): (0, 0), (Δ, 0), hi, (1, 1) and (1, 1 − Δ) for Δ > 0 —
5 of the 8 corners, C(K + 4, 4) multisets instead of C(K + 7, 7) (4.8·10⁶ against 2.8·10¹⁰ at K = 101) —
and (0, 0), hi, (1, 1) for Δ = 0. Every such multiset is one of the full set's, so the two maxima are equal.

For a symmetric γ the certificate checks f only (the reflected multiset covers the output 0), so a
symmetric γ with non-decreasing h is certified by the sweep over the reduced corner set with the same float
error bound (darrm_opt.certify.sweep.error_bound: at most 8 spectra per pmf) and the same exact re-check,
its count vectors written in the full corner order. tests/test_monotone.py checks the equality of the
maxima against the exhaustive sweeps and by brute force.
"""

from __future__ import annotations

import numpy as np

from darrm_opt.certify.sweep import SweepProblem, signed_h


def monotone_applies(gamma: np.ndarray) -> bool:
    """True when γ is symmetric and h_l = s_l γ(l) is non-decreasing in l (exact float comparisons)."""
    g = np.asarray(gamma, dtype=np.float64)
    if g.ndim != 1 or g.size < 2 or g.size % 2 or not np.array_equal(g, g[::-1]):  # K + 1 values, K odd
        return False
    h = signed_h(g)
    return bool(np.all(h[1:] >= h[:-1]))


def upper_corner_ids(probs: np.ndarray) -> np.ndarray:
    """Indices of the corners (p, p′) with p ≥ p′, in the corner order."""
    p = np.asarray(probs, dtype=np.float64)
    return np.flatnonzero(p[:, 0] >= p[:, 1])


def reduced_problem(probs: np.ndarray, h: np.ndarray, E: float) -> SweepProblem:
    """The matrix sweep over the corners with p ≥ p′ only (count vectors in that subset's order)."""
    p = np.asarray(probs, dtype=np.float64)
    return SweepProblem(p[upper_corner_ids(p)], h, E)


def lift(counts, ids: np.ndarray, n_corners: int) -> np.ndarray:
    """Count vectors over the corner subset ``ids`` (rows) as count vectors over all ``n_corners`` corners."""
    c = np.asarray(counts, dtype=np.int16).reshape(-1, len(ids))
    out = np.zeros((c.shape[0], n_corners), dtype=np.int16)
    out[:, ids] = c
    return out
