"""Multi-class DaRRM, GNMax and Confident-GNMax over Q answers at one total (ε, δ) budget (PATE setting).

Each mechanism gets its best valid accounting and the per-answer calibration that makes Q answers fit:

- **DaRRM**: for a per-answer δ₀ (a few fractions of δ/Q) the per-answer ε₀ is bisected; the table solved at
  (ε₀, δ₀) fits when the exact composition of its exact privacy profile over Q answers
  (:mod:`darrm_opt.privacy.pair_profile` → :func:`darrm_opt.privacy.pld.exact_epsilon`, pessimistic
  discretisation) gives ε(δ) ≤ ε. Only fitting tables are kept; the most accurate is reported.
- **DaRRM (shaped)**: a table optimised for one per-answer (ε₀, δ₀) has a randomized-response-like worst
  pair, which composes about linearly for small Q. Since (MC-2) is linear in γ at *every* slope, one LP can
  instead bound the whole profile: δ_γ(ε′_j) ≤ δ_G(ε′_j; σ) on a grid of ε′_j, δ_G the profile of one
  Gaussian answer (:func:`shaped_table`); σ is then calibrated on the exact composition of the resulting
  table's exact profile, as above (the LP's rows are only a design device, never the accounting).
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
from darrm_opt.privacy.calibrate import arithmetic, bisect, geometric, walk

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
        at = {lo: fit}

        def fits(e0: float, d0: float = d0, at: dict = at) -> bool:
            if e0 not in at:
                at[e0] = _darrm_at(K, C, prior, e0, d0, Q, delta, solver)
            return at[e0][0] <= epsilon

        e0, _ = bisect(fits, lo, hi, geometric, done=BISECTION_STEPS)
        total, acc, err = at[e0]
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
    def ok(s: float) -> bool:
        return rdp_epsilon(s, Q, delta) <= epsilon

    lo, hi = 1e-3, 1.0
    if not ok(hi):
        lo, top = walk(ok, hi, lambda s, _: s * 2.0)
        assert top is not None  # a walk without an end ends where ok holds
        hi = top
    return bisect(ok, hi, lo, arithmetic, done=lambda g, b: g - b <= 1e-9 * g)[0]


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
    darrm_shaped: dict | None
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
                         solver: str = "highs", confident: bool = True, shaped: bool = True) -> BudgetComparison:
    """Each mechanism calibrated so that Q answers are (ε, δ)-DP in total (module docstring), with its
    exact expected accuracy per answer under ``prior``; ``shaped`` adds the Gaussian-shaped DaRRM."""
    from darrm_opt.experiments.multiclass_compare import best_confident_gnmax, gnmax_accuracy, gnmax_error

    t0 = time.perf_counter()
    if isinstance(Q, bool) or not isinstance(Q, (int, np.integer)) or not 1 <= Q <= 5000:
        raise InvalidParameter("queries", "must be an integer in [1, 5000]", Q)
    try:  # validates the rest; here ε is the total of the Q answers, not a per-answer target
        params = MulticlassParams(K, C, epsilon, delta, MulticlassPrior.parse(prior))
    except InvalidParameter as exc:
        if exc.parameter != "target_epsilon":
            raise
        raise InvalidParameter("total-epsilon", "must satisfy 0 < epsilon <= 700", exc.value) from None
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
        # its error is 1 − accuracy, precise to ~1e-15 absolute only (the others are summed without cancellation)
        conf = {"accuracy": ch.accuracy, "error": max(0.0, 1.0 - ch.accuracy), "sigma1": ch.sigma1, "sigma2": ch.sigma2,
                "threshold": ch.threshold, "accounting": "data-independent: threshold check and answer charged "
                "every query, one Gaussian with 1/σ1² + 2/σ2² = 2/σ²"}
    shape = shaped_over_answers(K, C, params.prior, int(Q), params.epsilon, params.delta, sigma,
                                solver=solver) if shaped else None
    choice = (_single_answer(params, solver) if Q == 1 else
              darrm_over_answers(K, C, params.prior, int(Q), params.epsilon, params.delta, solver=solver))
    return BudgetComparison(K, C, int(Q), params.epsilon, params.delta, params.prior.spec,
                            None if choice is None else {**asdict(choice), "accounting": "exact: PLD of the "
                            "table's exact privacy profile composed over Q answers" if Q > 1 else
                            "certificate of the (ε, δ) table"},
                            None if shape is None else {**asdict(shape), "accounting": "exact: PLD of the "
                            "table's exact privacy profile composed over Q answers"},
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
    sh = cmp.darrm_shaped
    if sh is not None:
        lines.append(f"{'DaRRM (shaped)':<16} {sh['accuracy']:>14.10f} {sh['error']:>11.4g}  δ(ε′) ≤ Gaussian "
                     f"σ = {sh['shape_sigma']:.6g} at {SHAPE_POINTS} ε′; Q answers: ε = {sh['total_epsilon']:.6g}")
    g = cmp.gnmax
    lines.append(f"{'GNMax':<16} {g['accuracy']:>14.10f} {g['error']:>11.4g}  σ = {g['sigma']:.6g} (exact GDP "
                 f"composition; RDP would need σ = {g['sigma_rdp']:.6g})")
    c = cmp.confident_gnmax
    if c is not None:
        lines.append(f"{'Confident-GNMax':<16} {c['accuracy']:>14.10f} {c['error']:>11.4g}  σ1 = {c['sigma1']:.6g}, "
                     f"σ2 = {c['sigma2']:.6g}, T = {c['threshold']:.4g} (⊥ → random class)")
    lines.append(f"({cmp.seconds:.1f} s)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------
# DaRRM shaped like the Gaussian: one LP with divergence rows at several slopes
# ---------------------------------------------------------------------------------------------------------
#: slopes of the shaped LP: ε′ = 0 and SHAPE_POINTS − 1 more, evenly up to where the Gaussian's δ is SHAPE_FLOOR
SHAPE_POINTS = 12
SHAPE_FLOOR = 1e-12


def shape_grid(sigma: float) -> list[tuple[float, float]]:
    """(ε′_j, δ_G(ε′_j; σ)): the Gaussian profile (sensitivity √2, noise σ) at ε′ = 0 and evenly spaced
    ε′ up to the ε′ where it falls to SHAPE_FLOOR."""
    from darrm_opt.experiments.multiclass_compare import gaussian_delta

    hi = 1.0 / sigma**2
    while gaussian_delta(hi, sigma) > SHAPE_FLOOR:
        hi *= 1.5
    eps = [hi * j / (SHAPE_POINTS - 1) for j in range(SHAPE_POINTS)]
    return [(e, max(0.0, gaussian_delta(e, sigma))) for e in eps]


def shaped_table(K: int, C: int, prior: MulticlassPrior, sigma: float, solver: str = "highs") -> np.ndarray:
    """γ maximising E[accuracy] = 1/C + Σ_g w_g γ(g) subject to (MC-2) at every slope of
    :func:`shape_grid`: δ_γ(ε′_j) ≤ δ_G(ε′_j; σ) (every pair type's rows, model.multiclass.pair_rows, at
    E = e^{ε′_j}, δ = δ_G(ε′_j)). Its privacy is not taken from the LP (solver tolerance, slopes between
    the grid): the caller computes its exact profile."""
    from darrm_opt import solvers
    from darrm_opt.model.multiclass import accuracy_weights, pair_rows, pair_types, reachable_gaps
    from darrm_opt.optimize.multiclass import solve_in_tiers
    from darrm_opt.solvers import LP

    types = pair_types(K, C)
    parts = [pair_rows(pt, C, math.exp(e), d, K) for e, d in shape_grid(sigma) for pt in types]
    A = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, K + 1))
    b = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    lp = LP(-accuracy_weights(K, C, prior), A, b, np.zeros(K + 1), reachable_gaps(K, C).astype(np.float64))
    gamma, _ = solve_in_tiers(solvers.get_backend(solver), lp)
    return np.clip(gamma, 0.0, 1.0)


@dataclass(frozen=True)
class ShapedChoice:
    """The most accurate Gaussian-shaped DaRRM table found whose Q answers fit the budget."""

    accuracy: float
    error: float
    shape_sigma: float  #: the σ of the Gaussian profile its LP was constrained by
    total_epsilon: float


def _shaped_at(K: int, C: int, prior: MulticlassPrior, sigma: float, Q: int, delta: float,
               solver: str) -> tuple[float, float, float]:
    """(ε of Q answers at δ by the exact profile, accuracy, error) of :func:`shaped_table` at σ."""
    from darrm_opt.model.multiclass import expected_error
    from darrm_opt.privacy.pair_profile import family_profile, multiclass_family
    from darrm_opt.privacy.pld import exact_epsilon

    gamma = shaped_table(K, C, prior, sigma, solver)
    total = exact_epsilon([(family_profile(multiclass_family(K, C, gamma)), Q)], delta)
    err = expected_error(gamma, K, C, prior)
    return total, 1.0 - err, err


def shaped_over_answers(K: int, C: int, prior: MulticlassPrior, Q: int, epsilon: float, delta: float,
                        sigma0: float, *, solver: str = "highs", steps: int = 6) -> ShapedChoice | None:
    """The smallest shape σ = s·σ₀ found whose table's Q answers compose (exactly, through its profile)
    to ε(δ) ≤ ε: s is walked from 1 by factors 0.85 / 1.2 to bracket the boundary, then bisected
    (geometrically) ``steps`` times. Only fitting tables are returned."""
    def at(s: float) -> tuple[float, float, float]:
        return _shaped_at(K, C, prior, s * sigma0, Q, delta, solver)

    s, res = 1.0, at(1.0)
    fit: tuple[float, tuple] | None = (s, res) if res[0] <= epsilon else None
    miss = None if fit else s
    factor = 0.85 if fit else 1.2
    for _ in range(10):
        if fit is not None and miss is not None:
            break
        s *= factor
        res = at(s)
        if res[0] <= epsilon:
            fit = (s, res)
        else:
            miss = s
    if fit is None:
        return None
    if miss is not None:
        seen = {fit[0]: fit[1]}

        def fits(x: float) -> bool:
            if x not in seen:
                seen[x] = at(x)
            return seen[x][0] <= epsilon

        good, _ = bisect(fits, fit[0], miss, geometric, done=steps)
        fit = (good, seen[good])
    s, (total, acc, err) = fit
    return ShapedChoice(acc, err, s * sigma0, total)
