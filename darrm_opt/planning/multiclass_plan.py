"""Planning a multi-class job with per-answer multi-class DaRRM tables (PATE setting).

A table solved for a per-answer (ε₀, δ₀) (:func:`darrm_opt.optimize.multiclass.solve_multiclass`) is priced
by the ledger's accounting (:func:`darrm_opt.privacy.accounting.account`: the tightest of basic, optimal
and the exact composition of its certified profile). Its error decreases in ε₀, its spend grows, so:

- Q = 1: the per-answer optimum at (ε₀, δ₀) = (ε_B, δ_B) itself (its one answer spends at most that);
- Q > 1: δ₀ = δ_B/(2Q); ε₀ starts at the largest value whose Q answers fit by the optimal composition of
  Q (ε₀, δ₀)-DP answers (no solve needed: it holds for every such table), then at most REFINE steps
  ε₀ ← ε₀·(ε_B/spent)^{1/2} try larger ε₀ against the table's exact profile; the most accurate table whose
  spend, recomputed by the ledger's accounting, fits is offered.

Each candidate costs one LP solve and one exact composition (about 1.5 s at K = 250, C = 10), so the
search is kept short; it finds a good, not the optimal, per-answer target.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior
from darrm_opt.privacy import accounting
from darrm_opt.privacy.calibrate import bisect, geometric, reach

from .job import Job, Offer

SETTING = "disjoint-nonprivate"
#: refinement steps after the generic start (each one LP solve)
REFINE = 2


def _generic_fit(budget_epsilon: float, budget_delta: float, delta0: float, queries: int) -> float:
    """The largest ε₀ (to 1e-4 relative) whose Q (ε₀, δ₀)-DP answers fit by the tightest generic bound."""
    def fits(e: float) -> bool:
        s = accounting.tightest([(e, delta0, queries)], budget_delta)
        return s.delta <= budget_delta and s.epsilon <= budget_epsilon

    lo = reach(fits, budget_epsilon / queries, lambda e, _: math.nextafter(e, 0.0))
    hi = budget_epsilon
    if fits(hi):
        return hi
    return bisect(fits, lo, hi, geometric, done=lambda g, b: b / g - 1 <= 1e-4)[0]


def plan_multiclass(mech: Any, job: Job) -> Offer | None:
    """The multi-class DaRRM offer for ``job`` (module docstring); None unless the job has classes and is
    in the PATE setting."""
    if job.classes is None or job.teachers != SETTING:
        return None
    from darrm_opt.optimize.multiclass import solve_multiclass
    from darrm_opt.privacy.pair_profile import multiclass_profile

    prior, C = MulticlassPrior.parse(job.prior), job.classes
    return plan_per_answer(mech, job, lambda e, d: MulticlassParams(job.K, C, e, d, prior),
                           lambda params: solve_multiclass(params, solver=job.solver), multiclass_profile)


def plan_per_answer(mech: Any, job: Job, make_params: Callable[[float, float], Any], solve: Callable[[Any], Any],
                    profile: Callable[[Any, Any], Any]) -> Offer:
    """The per-answer search of the module docstring for any kind whose tables are solved for a per-answer
    (ε₀, δ₀): ``make_params(ε₀, δ₀)`` its parameters, ``solve(params)`` its certified solution (``gamma``,
    ``certificate``, ``expected_error``), ``profile(params, gamma)`` its exact privacy profile."""
    t0 = time.perf_counter()
    q, be, bd = job.queries, job.budget_epsilon, job.budget_delta
    if bd <= 0 and q > 1:
        raise InvalidParameter("budget_delta", "must be > 0 to plan several multi-class DaRRM answers", bd)
    delta0 = bd if q == 1 else bd / (2 * q)
    eps0 = be if q == 1 else _generic_fit(be, bd, delta0, q)
    best: tuple[float, Any, Any, Any, float, str] | None = None
    for step in range(1 + (0 if q == 1 else REFINE)):
        params = make_params(eps0, delta0)
        sol = solve(params)
        prof = profile(params, sol.gamma)
        acc = accounting.account([(eps0, delta0, q)], bd, profiles=[(prof, q)])
        spent = acc.spend.epsilon
        if acc.spend.delta <= bd and spent <= be:
            if best is None or sol.expected_error < best[0]:
                best = (sol.expected_error, params, sol, prof, spent, acc.spend.method)
            if spent <= 0 or step == REFINE:
                break
            eps0 = eps0 * math.sqrt(be / spent) if spent < be * 0.999 else eps0
            if spent >= be * 0.999:
                break
        else:
            eps0 = eps0 * math.sqrt(be / spent) if math.isfinite(spent) and spent > 0 else eps0 / 2
    if best is None:
        raise InvalidParameter("budget_epsilon", f"no per-answer multi-class table tried fits {q} answers in "
                                                 f"(ε={be:g}, δ={bd:g})", be)
    err, params, sol, prof, spent, method = best
    table = mech.table(params, sol.gamma, sol.certificate, SETTING, prof)
    return Offer(mech.kind, table, table.expected_error, spent, mech.offer_details(table, method),
                 time.perf_counter() - t0)
