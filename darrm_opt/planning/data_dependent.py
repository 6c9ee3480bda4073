"""Planning a data-dependent GNMax job: the smallest σ whose sanitised ε, plus two of its noise standard
deviations, is expected to fit the budget (PATE App. B.6's tuning, done on public data).

For a job of Q queries at budget (ε_B, δ_B), given *public* histograms that stand for the job's votes (a
prior's samples, or public data: never the job's own votes, or the choice itself would leak them), for each
order λ of a grid and σ, with per-histogram β(q̃) and Alg. 4's A(d) on the pool and ``jobs`` simulated jobs
of Q histograms drawn from it:

    E[Σ β(q̃)] + ε_GNSS(λ, β, σ_SS) + tail(λ, δ_B) + 2 σ_SS E[SS_β] ≤ ε_B,

with σ_SS = (λ e^{2β}/E[SS_β])^{1/3} (it minimises the two terms in σ_SS) and the best β of ``betas``/λ.
The smallest such σ over the orders is returned (σ by bisection in log σ: the left side decreases with σ).
σ must also meet App. B's conditions C5/C6 at (σ, λ); where none of the grid's orders can, the job is
refused (:class:`~darrm_opt.planning.plan.BudgetInfeasible`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.privacy.calibrate import arithmetic, bisect
from darrm_opt.privacy.gnmax import log_q_tilde
from darrm_opt.privacy.query_costs import discrete_gnmax_shape, gnmax_sensitivity_at_distance
from darrm_opt.privacy.smooth_sensitivity import CONVERSIONS, dp_tail, gnss_rdp

from .plan import BudgetInfeasible, check_budget

DEFAULT_ORDERS = (3.0, 4.0, 5.0, 6.0, 8.0, 11.0, 15.0, 20.0, 27.0)
#: β·λ tried (Thm. 23 needs β·λ < ½; App. B.6's rule of thumb is 0.4)
DEFAULT_BETAS = (0.2, 0.3, 0.4, 0.45)


@dataclass(frozen=True)
class DataDependentPlan:
    """A data-dependent GNMax job's parameters and its expected sanitised ε (module docstring)."""

    sigma: float
    order: float
    beta: float
    sigma_ss: float
    rdp: float  #: E[Σ β(q̃)] over the simulated jobs
    ss: float  #: E[SS_β]
    gnss: float
    tail: float
    total: float  #: rdp + gnss + tail + 2 σ_SS ss ≤ the budget
    over: float  #: share of simulated jobs whose own rdp + gnss + tail + 2 σ_SS SS exceeds the budget

    def policy_fields(self) -> dict[str, float]:
        """The fields of a data-dependent ledger's policy (darrm_opt.ledger.data_dependent) this plan sets."""
        return {"sigma": self.sigma, "order": self.order, "beta": self.beta, "sigma_ss": self.sigma_ss}


class _Pool:
    def __init__(self, pool: np.ndarray, K: int, queries: int, budget: float, delta: float, jobs: int,
                 betas: Sequence[float], conversion: str, seed: int, discrete: bool = False) -> None:
        self.pool, self.K, self.budget, self.delta, self.discrete = pool, K, budget, delta, discrete
        self.betas, self.conversion = tuple(betas), conversion
        rng = np.random.default_rng(seed)
        self.jobs = [rng.integers(0, pool.shape[0], size=queries) for _ in range(jobs)]
        # q̃ and Alg. 4 depend on a histogram only through its sorted counts: each distinct one computed once
        self.distinct, self.of = np.unique(-np.sort(-pool, axis=1), axis=0, return_inverse=True)
        self.of = self.of.reshape(-1)

    def evaluate(self, sigma: float, lam: float) -> DataDependentPlan | None:
        shape = discrete_gnmax_shape(sigma, lam, self.pool.shape[1], self.discrete)
        if not shape.conditions:
            return None
        per_rdp = shape.beta(log_q_tilde(self.distinct.astype(float), shape.q_sigma))[self.of]
        per_reach = np.array([gnmax_sensitivity_at_distance(h, shape, self.K) for h in self.distinct])[self.of]
        job_reach = np.array([per_reach[j].sum(axis=0) for j in self.jobs])
        rdps = np.array([float(per_rdp[j].sum()) for j in self.jobs])
        rdp = float(rdps.mean())
        tail = dp_tail(lam, self.delta, self.conversion)
        best: DataDependentPlan | None = None
        for b in self.betas:
            beta = b / lam
            sss = np.max(job_reach * np.exp(-beta * np.arange(self.K + 1)), axis=1)
            ss = float(sss.mean())
            sigma_ss = (lam * math.exp(2 * beta) / max(ss, 1e-300)) ** (1.0 / 3.0)
            g = gnss_rdp(lam, beta, sigma_ss)
            total = rdp + g + tail + 2.0 * sigma_ss * ss
            if best is None or total < best.total:
                over = float(np.mean(rdps + g + tail + 2.0 * sigma_ss * sss > self.budget))
                best = DataDependentPlan(sigma, lam, beta, sigma_ss, rdp, ss, g, tail, total, over)
        return best


def plan_data_dependent(pool: object, K: int, queries: int, budget_epsilon: float, budget_delta: float, *,
                        orders: Sequence[float] = DEFAULT_ORDERS, betas: Sequence[float] = DEFAULT_BETAS,
                        conversion: str = "improved", jobs: int = 40, steps: int = 12, seed: int = 0,
                        sigma_range: tuple[float, float] = (1.0, 2000.0),
                        discrete: bool = False) -> DataDependentPlan:
    """The data-dependent GNMax plan of a Q-query job (module docstring); ``pool``: public histograms of K
    votes (shape (n, classes)); ``discrete``: the answers will be drawn with N_ℤ noise (the ledger's answer
    path: q̃ at :func:`~darrm_opt.privacy.query_costs.discrete_q_sigma`). BudgetInfeasible when no order
    of the grid fits the budget."""
    Q, eps, delta = check_budget(queries, budget_epsilon, budget_delta)
    if not 0.0 < delta:
        raise InvalidParameter("budget_delta", "a data-dependent plan needs δ > 0", budget_delta)
    if conversion not in CONVERSIONS:
        raise InvalidParameter("conversion", f"must be one of {', '.join(CONVERSIONS)}", conversion)
    if not all(0.0 < b < 0.5 for b in betas) or not betas:
        raise InvalidParameter("betas", "every β·λ must lie in (0, ½) (Thm. 23)", list(betas))
    votes = np.asarray(pool, dtype=np.int64)
    if votes.ndim != 2 or votes.shape[0] == 0 or votes.shape[1] < 2 or np.any(votes.sum(axis=1) != K):
        raise InvalidParameter("pool", f"must be histograms of K = {K} votes, shape (n, classes >= 2)", votes.shape)
    search = _Pool(votes, int(K), Q, eps, delta, int(jobs), betas, conversion, int(seed), bool(discrete))
    lo0, hi0 = math.log(sigma_range[0]), math.log(sigma_range[1])
    best: DataDependentPlan | None = None
    for lam in orders:
        top = search.evaluate(math.exp(hi0), float(lam))
        if top is None or top.total > eps:
            continue
        def fits(u: float, lam: float = float(lam)) -> bool:
            r = search.evaluate(math.exp(u), lam)
            return r is not None and r.total <= eps

        hi, _ = bisect(fits, hi0, lo0, arithmetic, done=steps)
        found = search.evaluate(math.exp(hi), float(lam))
        if found is not None and found.total <= eps and (best is None or found.sigma < best.sigma):
            best = found
    if best is None:
        raise BudgetInfeasible("budget_epsilon", f"no σ ≤ {sigma_range[1]:g} at the orders {list(orders)} fits "
                               f"ε = {eps:g} at δ = {delta:g} with a sanitised release", None)
    return best


#: public histograms drawn from the job's prior for a data-dependent offer, and the simulated jobs
OFFER_POOL = 300
OFFER_JOBS = 40
#: the RDP → DP conversion a data-dependent offer plans with (and its ledger's policy states)
OFFER_CONVERSION = "improved"


def prior_histograms(prior: object, K: int, C: int, n: int, seed: int = 0) -> np.ndarray:
    """``n`` vote histograms (shape (n, C), class 0 true) drawn from a class-label prior
    (:class:`darrm_opt.model.multiclass.MulticlassPrior`) with a fixed seed: ``paper`` and
    ``iid-uniform:A,B`` are Multinomial(K, q) with q₀ = (A + B)/2 and q_c = (1 − q₀)/(C − 1) (the teachers are
    independent), ``dirichlet:AY,AW`` is π ~ Dirichlet(AY, AW, …, AW) then Multinomial(K, π).

    The prior is public by definition (it is the planner's model of the votes, stated in the job), so these
    histograms are public data: planning on them reveals nothing about the job's own votes."""
    from darrm_opt.model.multiclass import MulticlassPrior

    if not isinstance(prior, MulticlassPrior):
        raise InvalidParameter("prior", "a data-dependent offer needs a class-label prior", prior)
    rng = np.random.default_rng(seed)
    if prior.kind == "dirichlet":
        pi = rng.dirichlet([prior.a] + [prior.b] * (C - 1), size=n)
    else:
        q0 = 0.5 * (prior.a + prior.b)
        pi = np.tile(np.array([q0] + [(1.0 - q0) / (C - 1)] * (C - 1)), (n, 1))
    return np.asarray(rng.multinomial(K, pi), dtype=np.int64).reshape(n, C)


def plan_from_prior(prior: object, K: int, C: int, queries: int, budget_epsilon: float,
                    budget_delta: float) -> DataDependentPlan:
    """:func:`plan_data_dependent` on OFFER_POOL histograms of the job's prior (:func:`prior_histograms`) and
    OFFER_JOBS simulated jobs, with the seeds fixed (the same job gets the same plan), for answers the
    ledger draws itself (discrete noise)."""
    pool = prior_histograms(prior, K, C, OFFER_POOL, seed=0)
    return plan_data_dependent(pool, K, queries, budget_epsilon, budget_delta, conversion=OFFER_CONVERSION,
                               jobs=OFFER_JOBS, seed=1, discrete=True)
