"""The data-dependent Rényi-DP account of a run of queries (PATE Thm. 4 and 24), per aggregator.

References are to Papernot et al., "Scalable private learning with PATE" (ICLR 2018), *PATE* below. An
account sums, at one order λ, each answered query's data-dependent cost and its local sensitivity at
distance d (:mod:`darrm_opt.privacy.query_costs`):

* GNMax (:func:`account_gnmax`): every query pays β(q̃).
* **Confident-GNMax with real abstention** (Alg. 1, :func:`account_confident_gnmax`): every query pays the
  threshold check's data-dependent cost (a function of its top count), the GNMax step only when it was
  answered (the answered set is released, so it is public).
* Interactive-GNMax (Alg. 2, :func:`account_interactive_gnmax`): the check on the student-relative statistic
  (:mod:`darrm_opt.privacy.interactive_gnmax`) on every query, GNMax on those the teachers answered.
* γ tables (:func:`account_table`): the exact per-state cost.

The account is private; :func:`darrm_opt.privacy.smooth_sensitivity.sanitised_epsilon` is its release.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.dd_arguments import order_value, positive_value
from darrm_opt.privacy.gnmax import log_q_tilde
from darrm_opt.privacy.interactive_gnmax import interactive_check_statistic
from darrm_opt.privacy.query_costs import (
    TableShape,
    discrete_gnmax_shape,
    discrete_threshold_shape,
    gnmax_sensitivity_at_distance,
    threshold_shape,
)
from darrm_opt.privacy.smooth_sensitivity import smooth_sensitivity

__all__ = [
    "DataDependentAccount",
    "account_gnmax",
    "account_confident_gnmax",
    "account_interactive_gnmax",
    "account_table",
]


@dataclass(frozen=True)
class DataDependentAccount:
    """The private data-dependent state of a run of queries at one order: ``rdp`` = Σ of the per-query
    data-dependent RDP (Thm. 4), ``reach`` = Σᵢ Aᵢ(d) for d = 0..K (Thm. 24), ``answered`` the count.
    Never published as is: :func:`sanitised_epsilon` is its release."""

    order: float
    rdp: float
    reach: np.ndarray
    answered: int
    queries: int

    def smooth_sensitivity(self, beta: float) -> float:
        return smooth_sensitivity(self.reach, beta)


def account_gnmax(votes: object, sigma: float, order: float, K: int, discrete: bool = False) -> DataDependentAccount:
    """Every histogram (rows of ``votes``, shape (Q, m)) answered by GNMax at σ; ``discrete``: with N_ℤ noise
    (q̃ and its neighbour bounds at :func:`discrete_q_sigma`), else with N(0, σ²) noise."""
    n = np.asarray(votes, dtype=float)
    if n.ndim != 2 or n.shape[1] < 2:
        raise InvalidParameter("votes", "must have shape (queries, classes >= 2)", n.shape)
    shape = discrete_gnmax_shape(float(sigma), float(order), n.shape[1], discrete)
    rdp = float(np.sum(shape.beta(log_q_tilde(n, shape.q_sigma)))) if n.shape[0] else 0.0
    reach = np.zeros(K + 1)
    for row in n:
        reach += gnmax_sensitivity_at_distance(row, shape, K)
    return DataDependentAccount(shape.order, rdp, reach, n.shape[0], n.shape[0])


def account_confident_gnmax(votes: object, answered: object, threshold: float, sigma1: float, sigma2: float,
                            order: float, K: int, weights: object | None = None,
                            discrete: bool = False) -> DataDependentAccount:
    """Confident-GNMax (Alg. 1) with real abstention: the threshold check's cost on every query, GNMax's
    (at σ₂) only on the answered ones (``answered``: a boolean per query, public since ⊥ is released).
    ``weights`` (default: ``answered``) may instead weigh the GNMax part by Pr[answered], which gives
    the expectation over the first step's coins that PATE's Table 2 reports. ``discrete``: the answers drew
    N_ℤ noise (the check: :func:`discrete_threshold_shape` at i = the top count; GNMax: q̃ at
    :func:`discrete_q_sigma`), else N noise (:func:`threshold_shape`)."""
    n = np.asarray(votes, dtype=float)
    if n.ndim != 2 or n.shape[1] < 2:
        raise InvalidParameter("votes", "must have shape (queries, classes >= 2)", n.shape)
    ans = np.asarray(answered, dtype=bool)
    if ans.shape != (n.shape[0],):
        raise InvalidParameter("answered", "must hold one boolean per query", ans.shape)
    w = ans.astype(float) if weights is None else np.asarray(weights, dtype=float)
    th = (discrete_threshold_shape if discrete else threshold_shape)(float(threshold), float(sigma1), float(order),
                                                                    int(K))
    top = np.clip(np.rint(n.max(axis=1)).astype(int), 0, K)
    shape = discrete_gnmax_shape(float(sigma2), float(order), n.shape[1], discrete)
    rdp = float(th.cost[top].sum())
    reach = th.reach[top].sum(axis=0) if n.shape[0] else np.zeros(K + 1)
    for i in np.flatnonzero(w > 0):
        rdp += float(w[i] * shape.beta(log_q_tilde(n[i], shape.q_sigma)))
        reach = reach + w[i] * gnmax_sensitivity_at_distance(n[i], shape, K)
    return DataDependentAccount(shape.order, rdp, reach, int(ans.sum()), n.shape[0])


def account_interactive_gnmax(votes: object, answered: object, sigma1: float, sigma2: float, order: float,
                              K: int, student: object | None = None, threshold: float | None = None,
                              discrete: bool = False) -> DataDependentAccount:
    """Interactive-GNMax (Alg. 2): the check is paid on every query, GNMax at σ₂ (data-dependently) only on the
    queries the teachers answered; reinforcing the student or ⊥ reads no votes and costs nothing more.
    ``answered`` is public (the student sees the source). The check's cost: with the student's
    probabilities (and T), as the Confident check on the student-relative statistic (PATE Sec. 4.3), the
    exact discrete-noise data-dependent cost f(i) of :func:`discrete_threshold_shape` at
    i = :func:`interactive_check_statistic`, with its sensitivity; without them, its data-independent
    λ/(2σ₁²) (no sensitivity), an upper bound of the former. ``discrete``: GNMax drew N_ℤ noise
    (q̃ at :func:`discrete_q_sigma`)."""
    n = np.asarray(votes, dtype=float)
    if n.ndim != 2 or n.shape[1] < 2:
        raise InvalidParameter("votes", "must have shape (queries, classes >= 2)", n.shape)
    ans = np.asarray(answered, dtype=bool)
    if ans.shape != (n.shape[0],):
        raise InvalidParameter("answered", "must hold one boolean per query", ans.shape)
    lam = order_value(order)
    s1 = positive_value("sigma1", sigma1)
    reach = np.zeros(K + 1)
    if student is None:
        check = n.shape[0] * lam / (2.0 * s1**2)
    else:
        if threshold is None:
            raise InvalidParameter("threshold", "the check's data-dependent cost needs T", None)
        th = discrete_threshold_shape(float(threshold), s1, lam, int(K))
        i = interactive_check_statistic(n.astype(np.int64), student, float(threshold), int(K))
        check = float(th.cost[i].sum())
        reach = th.reach[i].sum(axis=0) if i.size else reach
    g = (account_gnmax(n[ans], sigma2, lam, K, discrete) if ans.any()
         else DataDependentAccount(lam, 0.0, np.zeros(K + 1), 0, 0))
    return DataDependentAccount(lam, check + g.rdp, reach + g.reach, int(ans.sum()), n.shape[0])


def account_table(votes: object, shape: TableShape) -> DataDependentAccount:
    """Every histogram answered by the γ table of ``shape``."""
    n = np.asarray(votes)
    if n.ndim != 2:
        raise InvalidParameter("votes", "must have shape (queries, classes)", n.shape)
    s = [shape.state(row) for row in n]
    return DataDependentAccount(shape.order, float(shape.cost[s].sum()), shape.reach[s].sum(axis=0),
                                len(s), len(s))
