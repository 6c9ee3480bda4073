"""Budget planning: the most accurate certified table whose Q answers fit a total (ε_B, δ_B).

A user holds a total budget (ε_B, δ_B) for Q answers of one table. For a per-answer target (m, δ) the optimal
γ (Sec. 5, App. C; :func:`darrm_opt.optimize.optimizer.solve`) is certified (mε, δ)-DP and its certified
privacy profile (:mod:`darrm_opt.privacy.profile`) gives a dominating pair; the Q-fold adaptive composition
is dominated by the Q-fold product of that pair (Zhu, Dong, Wang 2022, Thm 10), whose ε at δ_B is read off
dp_accounting's pessimistic PLD (:mod:`darrm_opt.privacy.pld`):

    spent(m, δ) = ε_PLD( pair(γ*_{m,δ})^{⊗Q} ; δ_B ),       fits(m, δ)  ⟺  spent(m, δ) ≤ ε_B.

The plan is  argmin_{(m, δ) : fits} E[error(γ*_{m,δ})]  (App. C.1, exact weights). The expected error
decreases in m (the LP's bound e^{mε} − 1 + 2δ grows, so its feasible set grows) and spent(m, δ) increases in
m, so for each δ of a log grid the largest fitting m is found by a bracketed false-position search
(Illinois variant) on φ(m) = spent(m, δ) − ε_B over [1, K]; the δ with the least error wins.

Screening uses the pessimistic PLD on the coarser grid screen_interval(Q) (SCREEN_INTERVAL up to 100
answers, growing with Q as the ledger's grid does; its ε is an upper bound, like the ledger's, and above
the ledger's: connect-the-dots on a coarser grid interpolates the same convex hockey-stick curve between
fewer, farther-shifted knots). Each answer's screened losses lie at most 1.01 grid steps above the true
ones (connect-the-dots is dominated by rounding each loss up, and its knots are shifted by 0.01 of a step),
so a candidate the screen puts within SCREEN_WINDOW·Q·screen_interval(Q) above ε_B is decided by the
ledger's own composition (:func:`darrm_opt.privacy.pld.exact_epsilon`), and the planner accepts at the
budget's edge exactly what a ledger accepts. The chosen table's spent ε is recomputed by that composition
and checked again against ε_B. Every candidate is a certified table (``solve`` raises rather than return an
uncertified one) with its certified profile, read off the solve's own certifying sweep and the slope front it
kept (``solve(front=True)``, ``profile_and_certificate(certified=...)``: no second sweep; the same profile).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.params import Params, Prior, finite_number
from darrm_opt.optimize.optimizer import Solution, solve
from darrm_opt.privacy.calibrate import bisect, walk
from darrm_opt.privacy.pld import EXACT_MAX_ANSWERS, epsilon_at, exact_epsilon, profile_pld, self_compose
from darrm_opt.privacy.profile import PrivacyProfile, profile_and_certificate

#: loss interval of the screening PLDs (a multiple of pld.INTERVAL, so screening is pessimistic w.r.t. it)
SCREEN_INTERVAL = 1e-4
#: the screen's excess over the ledger's ε is below this many of its grid steps per answer
SCREEN_WINDOW = 1.02
#: per-answer δ grid: multiples of δ_B / Q (within [Δ, δ_B)), plus Δ itself; the last is tried after Δ
DELTA_FACTORS = (1.0, 0.5, 0.25, 2.0)
#: the m search stops when the bracket's ends differ by less than this factor ...
M_RTOL = 0.01
#: ... or when the fitting end spends at least this share of ε_B
FILL = 0.995
MAX_STEPS = 8
#: the bracket's first steps multiply or divide m by this
GROW = 1.25

Progress = Callable[..., None]


class BudgetInfeasible(InvalidParameter):
    """No certified table's Q answers fit the budget; the message says the least ε reachable at δ_B."""

    def __init__(self, parameter: str, rule: str, smallest_epsilon: float | None) -> None:
        super().__init__(parameter, rule)
        self.smallest_epsilon = smallest_epsilon


@dataclass(frozen=True)
class Candidate:
    """One evaluated per-answer target: its certified table's error and the ε its Q answers spend at δ_B
    (screening PLD; ``inf`` when δ_B is below what Q answers must spend)."""

    m: float
    delta: float
    expected_error: float
    spent_epsilon: float
    fits: bool

    def to_dict(self) -> dict[str, Any]:
        spent = self.spent_epsilon if math.isfinite(self.spent_epsilon) else None
        return {"m": self.m, "delta": self.delta, "expected_error": self.expected_error,
                "spent_epsilon": spent, "fits": self.fits}


def check_budget(queries: object, budget_epsilon: object, budget_delta: object) -> tuple[int, float, float]:
    """(Q, ε_B, δ_B) validated: 1 ≤ Q ≤ EXACT_MAX_ANSWERS an integer, ε_B > 0, 0 < δ_B < 1 (finite)."""
    if isinstance(queries, bool) or not isinstance(queries, int) or not 1 <= queries <= EXACT_MAX_ANSWERS:
        raise InvalidParameter("queries", f"must be an integer with 1 <= queries <= {EXACT_MAX_ANSWERS}", queries)
    be = finite_number("budget_epsilon", budget_epsilon)
    if be <= 0:
        raise InvalidParameter("budget_epsilon", "must be > 0", budget_epsilon)
    bd = finite_number("budget_delta", budget_delta)
    if not 0 < bd < 1:
        raise InvalidParameter("budget_delta", "must satisfy 0 < budget_delta < 1", budget_delta)
    return queries, be, bd


@dataclass(frozen=True)
class _Request:
    """A shared-setting job's inputs validated for the search (:func:`check_shared_job`)."""

    K: int
    epsilon: float
    teacher_delta: float
    queries: int
    budget_epsilon: float
    budget_delta: float
    prior: Prior

    @classmethod
    def make(cls, K, epsilon, teacher_delta, queries, budget_epsilon, budget_delta, prior) -> _Request:
        base = Params(K=K, m=1, epsilon=epsilon, teacher_delta=teacher_delta, prior=prior)  # K, ε, Δ, prior
        q, be, bd = check_budget(queries, budget_epsilon, budget_delta)
        return cls(base.K, base.epsilon, base.teacher_delta, q, be, bd, base.prior)

    def canonical(self) -> dict[str, Any]:
        return {"K": self.K, "epsilon": self.epsilon, "teacher_delta": self.teacher_delta, "queries": self.queries,
                "budget_epsilon": self.budget_epsilon, "budget_delta": self.budget_delta, "prior": self.prior.spec}

    def delta_grid(self) -> list[float]:
        """Per-answer δ values within [Δ, δ_B), in the order tried: δ_B/Q·(1, ½, ¼), then Δ, then 2·δ_B/Q
        (a larger per-answer δ rarely fits: Q answers' infinite-loss mass alone must stay below δ_B)."""
        unit = self.budget_delta / self.queries
        grid = [unit * f for f in DELTA_FACTORS[:-1]] + [self.teacher_delta, unit * DELTA_FACTORS[-1]]
        out: list[float] = []
        for d in grid:
            if (self.teacher_delta <= d < self.budget_delta or d == self.teacher_delta) and d not in out:
                out.append(d)
        return out


def check_shared_job(job: Any) -> _Request:
    """A 0/1-vote job of DP-trained teachers (:class:`darrm_opt.planning.job.Job`) validated for the
    shared-setting search before any solve: the teachers' (ε, Δ) (each required), K, the prior and
    (Q, ε_B, δ_B) as :func:`check_budget` checks them; InvalidParameter naming the field otherwise."""
    for name in ("epsilon", "teacher_delta"):
        if getattr(job, name) is None:
            raise InvalidParameter(name, f"is required for {job.teachers} teachers (the teachers' privacy)")
    return _Request.make(job.K, job.epsilon, job.teacher_delta, job.queries, job.budget_epsilon,
                         job.budget_delta, job.prior)


def majority_free(job: Any) -> tuple[float, float] | None:
    """For ``disjoint-private`` teachers, each (ε_T, Δ_T)-DP on its own shard: by parallel composition every
    answer (any γ, the plain majority γ ≡ 1 included), and any number of them, costs at most (ε_T, Δ_T) in
    total; that cap when it is within the job's (ε_B, δ_B), else None (None for other settings)."""
    if job.teachers != "disjoint-private":
        return None
    from darrm_opt.privacy.parallel import check_cap

    req = check_shared_job(job)
    eps_t, delta_t = check_cap(req.epsilon, req.teacher_delta)
    if eps_t <= req.budget_epsilon and delta_t <= req.budget_delta:
        return eps_t, delta_t
    return None


class _Search:
    """Evaluates per-answer targets (cached), warm-starting each solve with the last active set."""

    def __init__(self, req: _Request, solver: str, progress: Progress | None) -> None:
        self.req = req
        self.solver = solver
        self.progress = progress
        self.seen: dict[tuple[float, float], tuple[Candidate, Solution, PrivacyProfile]] = {}
        self.seed: tuple[tuple[int, ...], ...] = ()

    def __call__(self, m: float, delta: float) -> Candidate:
        key = (m, delta)
        if key not in self.seen:
            r = self.req
            params = Params(K=r.K, m=m, epsilon=r.epsilon, teacher_delta=r.teacher_delta, delta=delta,
                            prior=r.prior)
            sol = solve(params, solver=self.solver, seed_multisets=self.seed or None, front=True)
            self.seed = sol.active_set
            known = (sol.certificate, sol.sweep) if sol.sweep is not None else None  # the solve's last sweep
            profile, cert = profile_and_certificate(params, sol.gamma, certified=known)
            if not cert.certified:  # pragma: no cover - solve() returned a certified γ
                raise AssertionError("a solved table failed its re-certification")
            spent = screen_epsilon(profile, r.queries, r.budget_delta)
            if r.budget_epsilon < spent <= r.budget_epsilon + SCREEN_WINDOW * r.queries * screen_interval(r.queries):
                spent = exact_epsilon([(profile, r.queries)], r.budget_delta)  # the edge: the ledger decides
            cand = Candidate(params.m, float(params.delta), sol.expected_error,  # type: ignore[arg-type]
                             spent, spent <= r.budget_epsilon)
            self.seen[key] = (cand, sol, profile)
            if self.progress is not None:
                self.progress("plan", evaluations=len(self.seen), m=cand.m, delta=cand.delta, spent=spent,
                              fits=cand.fits, error=cand.expected_error)
        return self.seen[key][0]

    def largest_fitting_m(self, delta: float, start: float | None, best_error: float) -> Candidate | None:
        """The largest m in [1, K] whose table fits at this δ, or None when none fits or none can beat
        ``best_error`` (the error decreases in m: a table that does not fit and already errs at least
        ``best_error`` rules out every smaller m). ``start``: a first guess (another δ's answer)."""
        K = float(self.req.K)
        if start is None:
            one = self(1.0, delta)
            if not one.fits:
                return None
            ratio = self.req.budget_epsilon / one.spent_epsilon if one.spent_epsilon > 0 else math.inf
            start = min(K, max(1.0, ratio ** (1 / 1.3)))  # spent ε grows about like m^1.3 near m = 1
        budget = self.req.budget_epsilon

        def fits(m: float) -> bool:
            return self(m, delta).fits

        lo, hi = _bracket(self, delta, round(start, 6), K, best_error)
        if lo is None or hi is None:
            return None if lo is None else self(lo, delta)
        lo, _ = bisect(fits, lo, hi, lambda g, b: _false_position(self(g, delta), self(b, delta), budget),
                       done=lambda g, b: b / g - 1.0 <= M_RTOL or self(g, delta).spent_epsilon >= FILL * budget,
                       max_steps=MAX_STEPS)
        return self(lo, delta)


def _bracket(search: _Search, delta: float, m: float, K: float,
             best_error: float) -> tuple[float | None, float | None]:
    """(lo, hi): m = lo fits, m = hi does not (hi None when m = K fits), stepping m by a factor GROW from
    ``m`` (:func:`darrm_opt.privacy.calibrate.walk`); (None, hi) when m = 1 does not fit or a table that
    does not fit errs at least ``best_error``."""
    def fits(x: float) -> bool:
        return search(x, delta).fits

    if fits(m):
        return walk(lambda x: not fits(x), m, lambda x, _: round(min(K, x * GROW), 6), end=lambda x, _: x >= K)
    hi, lo = walk(fits, m, lambda x, _: round(max(1.0, x / GROW), 6),
                  end=lambda x, _: search(x, delta).expected_error >= best_error or x <= 1.0)
    return lo, hi


def _false_position(lo: Candidate, hi: Candidate, budget: float) -> float:
    """The next m: the root of log spent − log ε_B, linear in log m between lo and hi (a power law, as
    composed ε grows like m^p); the geometric midpoint when hi spends ∞; kept inside the bracket."""
    a, b = math.log(lo.m), math.log(hi.m)
    if math.isfinite(hi.spent_epsilon) and lo.spent_epsilon > 0 and hi.spent_epsilon > lo.spent_epsilon:
        fa, fb = math.log(lo.spent_epsilon / budget), math.log(hi.spent_epsilon / budget)
        x = a - fa * (b - a) / (fb - fa)
    else:
        x = 0.5 * (a + b)
    x = min(max(x, a + 0.1 * (b - a)), b - 0.1 * (b - a))  # never stall at one end
    return round(math.exp(x), 6)


def screen_epsilon(profile: PrivacyProfile, queries: int, budget_delta: float) -> float:
    """ε at δ_B of ``queries`` answers by the pessimistic PLD at screen_interval(Q) (an upper bound of the
    ledger's exact ε); ``inf`` when δ_B is below what the answers must spend."""
    if budget_delta < profile.infinite_mass:
        return math.inf
    return epsilon_at(self_compose(profile_pld(profile, screen_interval(queries)), queries), budget_delta)


def screen_interval(queries: int) -> float:
    """The screen's grid for Q answers: SCREEN_INTERVAL·max(1, √(Q/100)) (its PLD keeps about the same
    number of points at every Q, like the ledger's)."""
    return SCREEN_INTERVAL * max(1.0, math.sqrt(queries / 100.0))


def plan_shared(job: Any, progress: Progress | None = None) -> tuple[Solution, PrivacyProfile, float, dict[str, Any]]:
    """The certified table of least expected error whose Q-fold exact composition is within the job's
    (ε_B, δ_B) (see the module docstring), for 0/1 votes of DP-trained teachers: (its solution, its certified
    profile, the ε its Q answers spend at δ_B by the ledger's exact composition, the ``plan`` member of its
    table document: Q, the budget, that spend, the seconds taken and every candidate tried). Raises
    :class:`BudgetInfeasible` (an InvalidParameter naming ``budget``) when even m = 1 does not fit at any
    per-answer δ."""
    t0 = time.perf_counter()
    req = check_shared_job(job)
    search = _Search(req, job.solver, progress)
    best: list[Candidate] = []
    for d in req.delta_grid():
        lead = min(best, key=lambda c: c.expected_error) if best else None
        found = search.largest_fitting_m(d, lead.m if lead else None,
                                         lead.expected_error if lead else math.inf)
        if found is not None:
            best.append(found)
    for cand in sorted(best, key=lambda c: (c.expected_error, -c.m)):
        _, sol, profile = search.seen[(cand.m, cand.delta)]
        spent = exact_epsilon([(profile, req.queries)], req.budget_delta)
        if spent <= req.budget_epsilon:  # the ledger's own composition, at its own interval
            info = {"queries": req.queries, "budget_epsilon": req.budget_epsilon, "budget_delta": req.budget_delta,
                    "spent_epsilon": spent, "seconds": time.perf_counter() - t0,
                    "candidates": [c.to_dict() for c, _, _ in search.seen.values()]}
            return sol, profile, spent, info
    raise _infeasible(req, search)


def _infeasible(req: _Request, search: _Search) -> BudgetInfeasible:
    """The error for a budget no table fits: the least ε that m = 1 (the most private allowed target)
    spends at δ_B over the per-answer δ tried, or the δ that Q answers must at least spend."""
    ones = [(c, prof) for (m, _), (c, _, prof) in search.seen.items() if m == 1.0]
    finite = [(c.spent_epsilon, prof) for c, prof in ones if math.isfinite(c.spent_epsilon)]
    q = req.queries
    if finite:
        least = exact_epsilon([(min(finite, key=lambda t: t[0])[1], q)], req.budget_delta)  # as a ledger says
        return BudgetInfeasible(
            "budget", f"epsilon {req.budget_epsilon:g} is below the smallest epsilon reachable at delta "
            f"{req.budget_delta:g} for {q} answers: {least:.6g} (m = 1, the most private target; per-answer "
            f"delta tried: {', '.join(f'{c.delta:g}' for c, _ in ones)})", least)
    need = min(-math.expm1(q * math.log1p(-prof.infinite_mass)) for _, prof in ones)
    return BudgetInfeasible(
        "budget", f"delta {req.budget_delta:g} is below what {q} answers must spend: even at m = 1 they need "
        f"delta >= {need:.6g} at every epsilon (per-answer delta tried: "
        f"{', '.join(f'{c.delta:g}' for c, _ in ones)})", None)
