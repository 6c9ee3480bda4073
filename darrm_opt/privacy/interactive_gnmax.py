"""Interactive-GNMax (PATE Alg. 2): the student's probabilities, the check statistic and a simulation.

References are to Papernot et al., "Scalable private learning with PATE" (ICLR 2018), *PATE* below. The
check compares s = max_j (n_j − K·p_j) (p: the student's public class probabilities) with a threshold T
under Gaussian noise; its integer form (:func:`interactive_check_statistic`) is what the ledger's answer
path draws on, priced by :func:`darrm_opt.privacy.query_costs.discrete_threshold_shape`.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.dd_arguments import positive_value

__all__ = [
    "student_probabilities",
    "interactive_statistic",
    "interactive_check_statistic",
    "interactive_gnmax",
]


def student_probabilities(student: object, queries: int, classes: int) -> np.ndarray:
    """The student's class probabilities (PATE Alg. 2, line 1), one vector of ``classes`` per query, checked:
    finite, non-negative, each summing to 1 within 1e-9; InvalidParameter naming ``student`` otherwise."""
    try:
        p = np.asarray(student, dtype=float)
    except (TypeError, ValueError):
        raise InvalidParameter("student", "must be one probability vector per query", None) from None
    if p.shape != (queries, classes):
        raise InvalidParameter("student", f"must hold one probability vector of {classes} classes per query "
                               f"({queries} queries)", list(p.shape))
    if np.any(~np.isfinite(p)) or np.any(p < 0):
        raise InvalidParameter("student", "probabilities must be finite and non-negative", None)
    bad = np.flatnonzero(np.abs(p.sum(axis=1) - 1.0) > 1e-9)
    if bad.size:
        raise InvalidParameter("student", f"every probability vector must sum to 1 (query {int(bad[0])} sums to "
                               f"{float(p[bad[0]].sum())!r})", None)
    return p


def interactive_statistic(votes: object, student: object, K: int) -> np.ndarray:
    """Interactive-GNMax's check statistic (PATE Alg. 2, line 2): s = max_j (n_j − K·p_j), per query.
    One teacher's vote moving from class a to b moves n_a and n_b by one and no p_j (the student's
    predictions are public), so every term, and s, moves by at most 1: a sensitivity-1 Gaussian check.
    Σ_j (n_j − K p_j) = 0, so s ∈ [0, K]."""
    n = np.asarray(votes, dtype=float)
    if n.ndim != 2:
        raise InvalidParameter("votes", "must have shape (queries, classes)", n.shape)
    p = student_probabilities(student, n.shape[0], n.shape[1])
    return np.max(n - K * p, axis=1)


def interactive_check_statistic(votes: object, student: object, threshold: float, K: int) -> np.ndarray:
    """The integer statistic the ledger's Interactive-GNMax check draws on: i = clip(⌈T⌉ − ⌈T − s⌉, 0, K),
    s = max_j (n_j − K p_j) computed exactly (the floats p_j and T as rationals). For Z ~ N_ℤ(0, σ₁²),
    s + Z ≥ T ⟺ Z ≥ ⌈T − s⌉ ⟺ i + Z ≥ ⌈T⌉ (s ∈ [0, K] puts i in 0..K; the clip only absorbs the 1e-9 slack
    of Σ p = 1). s moves by ≤ 1 between neighbours, ⌈·⌉ is monotone and the clip 1-Lipschitz, so i moves by
    ≤ 1: :func:`discrete_threshold_shape` prices the check."""
    n = np.asarray(votes, dtype=np.int64)
    if n.ndim != 2:
        raise InvalidParameter("votes", "must have shape (queries, classes)", n.shape)
    p = student_probabilities(student, n.shape[0], n.shape[1])
    T = Fraction(float(threshold))
    c = math.ceil(T)
    out = np.empty(n.shape[0], dtype=np.int64)
    for q in range(n.shape[0]):
        s = max(Fraction(int(n[q, j])) - K * Fraction(float(p[q, j])) for j in range(n.shape[1]))
        out[q] = min(max(c - math.ceil(T - s), 0), K)
    return out


def interactive_gnmax(votes: object, student: object, confidence: float, threshold: float, sigma1: float,
                      sigma2: float, K: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Interactive-GNMax (PATE Alg. 2), simulated with ``rng`` (numpy; for experiments, not for a release):
    if s + N(0, σ₁²) ≥ T the teachers answer by GNMax at σ₂; else if max_j p_j > ``confidence`` the
    student's own argmax is returned (reinforced, no vote read); else ⊥. Returns (labels, -1 for ⊥;
    ``answered``: which the teachers answered), the outcome :func:`account_interactive_gnmax` needs."""
    conf = positive_value("confidence", confidence)
    s = interactive_statistic(votes, student, K)
    n = np.asarray(votes, dtype=float)
    p = np.asarray(student, dtype=float)
    answered = s + rng.normal(0.0, positive_value("sigma1", sigma1), size=s.shape) >= float(threshold)
    teachers = np.argmax(n + rng.normal(0.0, positive_value("sigma2", sigma2), size=n.shape), axis=1)
    labels = np.where(answered, teachers, np.where(p.max(axis=1) > conf, np.argmax(p, axis=1), -1))
    return labels.astype(np.int64), answered
