"""Parallel composition for teachers on disjoint shards: the teachers' own (ε, Δ) caps a ledger's total.

If K teachers are trained on disjoint shards and each is (ε_T, Δ_T)-DP on its shard, one record reaches
one teacher, so releasing all K teachers is (ε_T, Δ_T)-DP (parallel composition, McSherry 2009, Thm. 4),
and every answer computed from their votes is post-processing: any number of answers, the plain majority
included, costs at most (ε_T, Δ_T) in total (:mod:`darrm_opt.model.neighbours`, ``disjoint-private``).
The composed spend of the answers stays valid too; the ledger takes the tighter of the two.
"""

from __future__ import annotations

import math

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.accounting import Accounting, Spend, with_bound

#: The method name of the cap in a ledger's bounds and spend.
PARALLEL_CAP = "parallel-cap"


def check_cap(epsilon: float, delta: float) -> tuple[float, float]:
    """The teachers' (ε_T, Δ_T): ε_T > 0 finite, 0 ≤ Δ_T < 1."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise InvalidParameter("teacher_epsilon", "must be a finite number > 0", epsilon)
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        raise InvalidParameter("teacher_delta", "must satisfy 0 <= teacher_delta < 1", delta)
    return float(epsilon), float(delta)


def capped(acc: Accounting, cap: tuple[float, float] | None, delta_budget: float) -> Accounting:
    """``acc`` with the cap (ε_T, Δ_T) added to its bounds; the spend is the bound with the smaller ε among
    those with δ ≤ ``delta_budget`` (the composed one stays when the cap is not tighter)."""
    if cap is None:
        return acc
    eps_t, delta_t = check_cap(*cap)
    return with_bound(acc, Spend(eps_t, delta_t, PARALLEL_CAP), delta_budget)
