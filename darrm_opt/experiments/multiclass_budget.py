"""Multi-class DaRRM, GNMax and Confident-GNMax over Q answers at one total (ε, δ) budget (PATE setting).

Each mechanism gets its best valid accounting and the per-answer calibration that makes Q answers fit:

- **DaRRM**: for a per-answer δ₀ (a few fractions of δ/Q) the per-answer ε₀ is bisected; the table solved at
  (ε₀, δ₀) fits when the exact composition of its exact privacy profile over Q answers
  (:mod:`darrm_opt.privacy.pair_profile` → :func:`darrm_opt.privacy.pld.exact_epsilon`, pessimistic
  discretisation) gives ε(δ) ≤ ε. Only fitting tables are kept; the most accurate is reported.
- **GNMax**: Q answers are post-processing of Q Gaussian mechanisms h ↦ h + N(0, σ²I) of L2 sensitivity √2,
  whose composition is exactly one Gaussian mechanism of sensitivity √(2Q) (Dong, Roth & Su 2022, Cor. 3.3),
  i.e. of sensitivity √2 at noise σ/√Q. So σ = √Q·σ₁(ε, δ) with σ₁ the exact Balle & Wang calibration of
  one answer (:func:`~darrm_opt.experiments.multiclass_compare.calibrate_gaussian_sigma`) is the exact
  calibration. The RDP calibration (dp_accounting's RdpAccountant, orders 1.1…1024, improved conversion)
  is reported alongside; it is never smaller.
- **Confident-GNMax** (⊥ answered by a uniformly random class), data-independent accounting: each query's
  threshold check and answer are charged whether or not it is answered; together they are one Gaussian
  mechanism with 1/σ₁² + 2/σ₂² = 2/σ², so it gets exactly GNMax's Q-answer σ, split as in
  :func:`~darrm_opt.experiments.multiclass_compare.best_confident_gnmax`.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.multiclass import MulticlassParams, MulticlassPrior

#: per-answer δ₀ tried for DaRRM, as fractions of δ/Q (δ₀·Q must stay below δ: the infinite-loss mass adds up)
DELTA_FRACTIONS = (0.0, 0.1, 0.5)
#: bisection steps on the per-answer ε₀ (relative precision 2^-steps of the bracket)
BISECTION_STEPS = 10
#: RDP orders for GNMax's RDP calibration
RDP_ORDERS = tuple([1 + x / 10 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024])


@dataclass(frozen=True)
class DarrmChoice:
    """The most accurate DaRRM table found whose Q answers fit the budget."""

    accuracy: float
    error: float
    epsilon0: float
    delta0: float
    total_epsilon: float  #: ε(δ) of the exact composition of its profile over Q answers


def _darrm_at(K: int, C: int, prior: MulticlassPrior, eps0: float, delta0: float, Q: int, delta: float,
              solver: str) -> tuple[float, float, float]:
    """(ε of Q answers at δ, accuracy, error) of the table solved at per-answer (ε₀, δ₀)."""
    from darrm_opt.optimize.multiclass import solve_multiclass
    from darrm_opt.privacy.pair_profile import multiclass_profile
    from darrm_opt.privacy.pld import exact_epsilon

    params = MulticlassParams(K, C, eps0, delta0, prior)
    sol = solve_multiclass(params, solver=solver)
    total = exact_epsilon([(multiclass_profile(params, sol.gamma), Q)], delta)
    return total, sol.expected_accuracy, sol.expected_error


def darrm_over_answers(K: int, C: int, prior: MulticlassPrior, Q: int, epsilon: float, delta: float, *,
                       solver: str = "highs", fractions=DELTA_FRACTIONS) -> DarrmChoice | None:
    """For each δ₀ = f·δ/Q, the largest ε₀ in [ε/(8Q), ε] found by bisection whose table's Q answers
    compose (exactly, through its profile) to ε(δ) ≤ ε; the most accurate of those, or None."""
    best: DarrmChoice | None = None
    for f in fractions:
        d0 = f * delta / Q
        lo, hi = epsilon / (8.0 * Q), epsilon
        fit = _darrm_at(K, C, prior, lo, d0, Q, delta, solver)
        if fit[0] > epsilon:
            continue
        found = (lo, *fit)
        for _ in range(BISECTION_STEPS):
            mid = math.sqrt(lo * hi)
            res = _darrm_at(K, C, prior, mid, d0, Q, delta, solver)
            if res[0] <= epsilon:
                lo, found = mid, (mid, *res)
            else:
                hi = mid
        e0, total, acc, err = found
        if best is None or acc > best.accuracy:
            best = DarrmChoice(acc, err, e0, d0, total)
    return best


def gnmax_sigma_over_answers(Q: int, epsilon: float, delta: float) -> float:
    """σ = √Q·σ₁(ε, δ): the smallest σ for which Q GNMax answers are (ε, δ)-DP (module docstring)."""
    from darrm_opt.experiments.multiclass_compare import calibrate_gaussian_sigma

    sigma1 = calibrate_gaussian_sigma(epsilon, delta)
    if sigma1 is None:
        raise InvalidParameter("delta", "must be > 0 for GNMax (no Gaussian mechanism is pure DP)", delta)
    return math.sqrt(Q) * sigma1 * (1.0 + 1e-12)  # the product's rounding, upwards


def rdp_epsilon(sigma: float, Q: int, delta: float) -> float:
    """ε(δ) of Q GNMax answers at noise σ by RDP (dp_accounting, improved conversion)."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    acc = rdp.RdpAccountant(list(RDP_ORDERS))
    acc.compose(dp_event.GaussianDpEvent(sigma / math.sqrt(2.0)), Q)
    return float(acc.get_epsilon(delta))


def rdp_sigma_over_answers(Q: int, epsilon: float, delta: float) -> float:
    """The smallest σ (relative 1e-9) with :func:`rdp_epsilon` ≤ ε, by bisection."""
    lo, hi = 1e-3, 1.0
    while rdp_epsilon(hi, Q, delta) > epsilon:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rdp_epsilon(mid, Q, delta) > epsilon else (lo, mid)
    return hi


@dataclass(frozen=True)
class BudgetComparison:
    """DaRRM, GNMax and Confident-GNMax over Q answers at the total (ε, δ); accuracies are per answer."""

    K: int
    classes: int
    queries: int
    epsilon: float
    delta: float
    prior: str
    darrm: dict | None
    gnmax: dict
    confident_gnmax: dict | None
    seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


def _single_answer(params: MulticlassParams, solver: str) -> DarrmChoice:
    """Q = 1: the table solved at (ε, δ) itself, certified (ε, δ)-DP by its certificate."""
    from darrm_opt.optimize.multiclass import solve_multiclass

    sol = solve_multiclass(params, solver=solver)
    return DarrmChoice(sol.expected_accuracy, sol.expected_error, params.epsilon, params.delta, params.epsilon)


def compare_over_answers(K: int, C: int, Q: int, epsilon: float, delta: float, prior=None, *,
                         solver: str = "highs", confident: bool = True) -> BudgetComparison:
    """Each mechanism calibrated so that Q answers are (ε, δ)-DP in total (module docstring), with its
    exact expected accuracy per answer under ``prior``."""
    from darrm_opt.experiments.multiclass_compare import best_confident_gnmax, gnmax_accuracy, gnmax_error

    t0 = time.perf_counter()
    if isinstance(Q, bool) or not isinstance(Q, (int, np.integer)) or not 1 <= Q <= 5000:
        raise InvalidParameter("queries", "must be an integer in [1, 5000]", Q)
    params = MulticlassParams(K, C, epsilon, delta, MulticlassPrior.parse(prior))  # validates the rest
    if params.delta <= 0:
        raise InvalidParameter("delta", "must be > 0 to compare with GNMax (no Gaussian mechanism is pure DP)")
    sigma = gnmax_sigma_over_answers(int(Q), params.epsilon, params.delta)
    gn = {"accuracy": gnmax_accuracy(K, C, sigma, params.prior), "error": gnmax_error(K, C, sigma, params.prior),
          "sigma": sigma, "sigma_rdp": rdp_sigma_over_answers(int(Q), params.epsilon, params.delta),
          "accounting": "exact: Q Gaussian answers compose to one Gaussian of sensitivity sqrt(2Q) (GDP); "
                        "Balle & Wang calibration"}
    conf = None
    if confident:
        ch = best_confident_gnmax(K, C, sigma, params.prior)
        conf = {"accuracy": ch.accuracy, "error": 1.0 - ch.accuracy, "sigma1": ch.sigma1, "sigma2": ch.sigma2,
                "threshold": ch.threshold, "accounting": "data-independent: threshold check and answer charged "
                "every query, one Gaussian with 1/σ1² + 2/σ2² = 2/σ²"}
    choice = (_single_answer(params, solver) if Q == 1 else
              darrm_over_answers(K, C, params.prior, int(Q), params.epsilon, params.delta, solver=solver))
    return BudgetComparison(K, C, int(Q), params.epsilon, params.delta, params.prior.spec,
                            None if choice is None else {**asdict(choice), "accounting": "exact: PLD of the "
                            "table's exact privacy profile composed over Q answers" if Q > 1 else
                            "certificate of the (ε, δ) table"},
                            gn, conf, time.perf_counter() - t0)


def budget_text(cmp: BudgetComparison) -> str:
    """The table view of a :class:`BudgetComparison`."""
    lines = [f"K={cmp.K} teachers (disjoint, non-private), C={cmp.classes} classes, Q={cmp.queries} answers, "
             f"total (ε, δ) = ({cmp.epsilon:g}, {cmp.delta:g}), prior {cmp.prior}",
             f"{'mechanism':<16} {'E[accuracy]':>14} {'E[error]':>11}  per-answer calibration"]
    d = cmp.darrm
    if d is None:
        lines.append(f"{'DaRRM':<16} {'n/a':>14} {'':>11}  no table fits the budget")
    else:
        lines.append(f"{'DaRRM':<16} {d['accuracy']:>14.10f} {d['error']:>11.4g}  (ε0, δ0) = "
                     f"({d['epsilon0']:.6g}, {d['delta0']:.3g}); Q answers: ε = {d['total_epsilon']:.6g}")
    g = cmp.gnmax
    lines.append(f"{'GNMax':<16} {g['accuracy']:>14.10f} {g['error']:>11.4g}  σ = {g['sigma']:.6g} (exact GDP "
                 f"composition; RDP would need σ = {g['sigma_rdp']:.6g})")
    c = cmp.confident_gnmax
    if c is not None:
        lines.append(f"{'Confident-GNMax':<16} {c['accuracy']:>14.10f} {c['error']:>11.4g}  σ1 = {c['sigma1']:.6g}, "
                     f"σ2 = {c['sigma2']:.6g}, T = {c['threshold']:.4g} (⊥ → random class)")
    lines.append(f"({cmp.seconds:.1f} s)")
    return "\n".join(lines)
