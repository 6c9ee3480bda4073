"""The total privacy loss of Q answers of one certified table, by every composition method.

Each answer of the table is (ε₀, δ₀)-DP (:func:`per_answer`: (mε, δ) for a shared-data table, the stated
per-answer (ε, δ) for a PATE-setting or multi-class one). Rows ``{queries, epsilon, delta, method}`` at a
total δ target δ_total:

- ``exact``: the Q-fold composition of the table's own privacy profile (darrm_opt.privacy.pld), ε at δ_total;
- ``basic``: (Q·ε₀, 1 − (1 − δ₀)^Q) (Thm 2.2; its δ is its own);
- ``general``: Thm 2.3 with δ′ = 1 − (1 − δ_total)/(1 − δ₀)^Q, so that its total δ is δ_total;
- ``optimal``: the optimal composition of Q generic (ε₀, δ₀)-DP answers (KOV 2015, Thm 3.3) at δ_total.

Without δ_total each Q is evaluated at the paper's target δ_total(Q) = 1 − (1 − δ₀)^Q (1 − δ′).

ε is ``inf`` (JSON null) where δ_total is below what Q answers must spend.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.composition import compose_delta, general_epsilon
from darrm_opt.privacy import accounting
from darrm_opt.privacy.pld import exact_epsilon
from darrm_opt.privacy.profile import Profile


def _row(q: int, epsilon: float, delta: float, method: str) -> dict:
    return {"queries": q, "epsilon": epsilon if math.isfinite(epsilon) else None, "delta": delta, "method": method}


def table_budget_rows(epsilon0: float, delta0: float, profile: Profile, queries: Iterable[int],
                      delta_total: float | None, delta_prime: float = 1e-4,
                      units: Callable[[int], int] | None = None) -> list[dict]:
    """Four rows per Q (exact, basic, general, optimal) for a table of any kind whose answers are each
    (``epsilon0``, ``delta0``)-DP with the certified ``profile``; see the module docstring.
    Without ``delta_total`` each Q has its own target 1 − (1 − δ₀)^Q (1 − δ′), the paper's convention
    (Table 2). ``units``: how many times Q answers compose the profile (``Mechanism.units``: Q by default;
    one for a kind whose (ε₀, δ₀) and profile state a whole job)."""
    if delta_total is not None and not (isinstance(delta_total, (int, float)) and 0 < delta_total < 1):
        raise InvalidParameter("delta-total", "must satisfy 0 < delta-total < 1", delta_total)
    if delta_total is None and not (isinstance(delta_prime, (int, float)) and 0 < delta_prime < 1):
        raise InvalidParameter("delta-prime", "must satisfy 0 < delta-prime < 1", delta_prime)
    eps0, d0 = float(epsilon0), float(delta0)
    rows = []
    for q in queries:
        if isinstance(q, bool) or not isinstance(q, int) or q < 1:
            raise InvalidParameter("queries", "must be integers >= 1", q)
        n = q if units is None else units(q)
        base = compose_delta(d0, n)
        target = (delta_total if delta_total is not None
                  else -math.expm1(n * math.log1p(-d0) + math.log1p(-delta_prime)))
        rows += [{**row, "queries": q} for row in _rows_at(n, eps0, d0, base, target, profile)]
    return rows


def _rows_at(q: int, eps0: float, d0: float, base: float, delta_total: float,
             profile: Profile) -> list[dict]:
    """The four rows of Q answers at one total δ."""
    general = math.inf
    if delta_total > base:
        dprime = -math.expm1(math.log1p(-delta_total) - q * math.log1p(-d0))
        general = general_epsilon(eps0, q, dprime)
    return [
        _row(q, exact_epsilon([(profile, q)], delta_total), delta_total, accounting.EXACT),
        _row(q, accounting.exact_sum([(q, eps0)]), base, accounting.BASIC),
        _row(q, general, delta_total, "general"),
        _row(q, accounting.optimal_epsilon(eps0, d0, q, delta_total), delta_total, accounting.OPTIMAL),
    ]
