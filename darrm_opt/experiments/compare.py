"""DaRRM γ_opt against the baselines: expected errors, GNMax's error, error curves and composition tables.

Pure computation, no I/O (the CLI in :mod:`darrm_opt.cli.compare` and the plots in :mod:`darrm_opt.experiments.plots`
consume what is computed here).

The actual distribution (``--actual``)
--------------------------------------
γ_opt is optimised for a prior (``Params.prior``); its error may be evaluated under another distribution
of the teachers' probabilities p_i of voting 1:

- ``prior``: the prior γ_opt was optimised for (the default);
- ``paper``, ``iid-uniform:A,B``, ``common-uniform:A,B``: as :class:`~darrm_opt.model.params.Prior`;
- ``fixed:P``: every teacher votes 1 with probability P (0 ≤ P ≤ 1).

Every error is ``error_from_pmf(γ, E[α])``: exact for the priors (supported on p ≥ ½, where the error is
linear in E[α], see :func:`darrm_opt.model.objective.expected_error`) and for ``fixed:P`` (where α is the
Binomial(K, P) pmf itself).

GNMax as a DaRRM noise function (exact, no integration)
------------------------------------------------------
With two classes and L votes for class 1, GNMax releases argmax{L + N₁, K − L + N₂}, N_i ~ N(0, σ²)
independent. It outputs 1 iff N₁ − N₂ > K − 2L with N₁ − N₂ ~ N(0, 2σ²), so

    Pr[GNMax = majority | L = l] = Φ(|2l − K| / (√2 σ)).

DaRRM_γ outputs the majority with probability γ(l) + (1 − γ(l))/2, so GNMax *is* DaRRM with

    γ_GNMax(l) = 2 Φ(|2l − K| / (√2 σ)) − 1 = erf(|2l − K| / (2σ)),

symmetric, and its error (Def. 2.4) is ``error_from_pmf(γ_GNMax, α)`` exactly. σ is calibrated so that one
GNMax answer is (mε, δ)-DP, by each method of :data:`darrm_opt.privacy.gnmax.GNMAX_METHODS`: the paper's
RDP recipe (``rdp``, App. D.2.1: σ = 21.46 at (0.2676, 3·10⁻⁴)), the improved RDP conversion (14.63), the
analytic Gaussian (12.90) and the exact privacy of the one bit GNMax releases for K non-private teachers on
disjoint shards (``exact-one-bit``, 7.68 at K = 11). ``errors.gnmax`` is GNMax at the exact calibration;
``errors.gnmax_paper`` at the paper's, for reference. The Gaussian methods have no σ for δ = 0 (the error
is then ``None`` with a reason); the exact one-bit calibration does.

Constant randomized response: ``const`` is the paper's γ_const (eq. 16, with λ = 1 − (1 − Δ)^K by simple
composition) and ``const_opt`` the best certified constant c* = bound / max f(γ ≡ 1).

Note the different neighbouring relations: DaRRM's guarantee holds for (ε, Δ)-DP teachers trained on the
*same* data; GNMax's for non-private teachers on *disjoint* shards (one record moves one vote). The paper
compares them at the same per-query (mε, δ) all the same (Sec. 6.2); so do we. ``teachers`` chooses the
setting of γ_opt (:mod:`darrm_opt.model.neighbours`): ``disjoint-nonprivate`` optimises γ for the PATE
setting (:mod:`darrm_opt.optimize.pate_setting`), where GNMax's exact calibration is one feasible γ.

Composition tables (``budget``)
-------------------------------
For Q queries of an (ε, δ)-DP mechanism: ``simple`` (Thm 2.2: Qε, 1 − (1 − δ)^Q), ``general`` (Thm 2.3 with
δ′) and ``best``: the row with the smaller ε (ties: the smaller δ).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from darrm_opt.errors import DarrmError, InvalidParameter
from darrm_opt.model.composition import general_composition, simple_composition
from darrm_opt.model.objective import error_from_pmf, expected_pmf
from darrm_opt.model.params import Params, Prior
from darrm_opt.model.pmf import binomial_pmf

ERROR_KEYS = ("opt", "sub", "dsub", "const", "const_opt", "gnmax", "gnmax_paper", "majority")
#: The calibration behind ``errors.gnmax``: the exact privacy of the one bit two-class GNMax releases.
GNMAX_REPORTED = "exact-one-bit"


# ------------------------------------------------------------------------------------------------------
# The actual distribution of the teachers' probabilities
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Actual:
    """A parsed ``--actual`` SPEC: ``kind`` is ``prior``, ``fixed`` or a :class:`Prior` kind."""

    kind: str
    prior: Prior | None = None
    p: float | None = None

    @property
    def spec(self) -> str:
        if self.kind == "prior":
            return "prior"
        if self.kind == "fixed":
            return f"fixed:{self.p!r}"
        return self.prior.spec  # type: ignore[union-attr]

    def resolve(self, params: Params) -> Actual:
        """``prior`` replaced by the prior of ``params``."""
        if self.kind == "prior":
            return Actual(params.prior.kind, prior=params.prior)
        return self

    def pmf(self, K: int, params: Params | None = None) -> np.ndarray:
        """E[α_l], l = 0..K, under this distribution (``prior`` needs ``params``)."""
        if self.kind == "prior":
            if params is None:
                raise InvalidParameter("actual", "'prior' needs the problem parameters", self.spec)
            return expected_pmf(K, params.prior)
        if self.kind == "fixed":
            return binomial_pmf(K, float(self.p))  # type: ignore[arg-type]
        return expected_pmf(K, self.prior)  # type: ignore[arg-type]


def parse_actual(spec: str | Actual | None) -> Actual:
    """Parse ``prior``, ``paper``, ``iid-uniform:A,B``, ``common-uniform:A,B`` or ``fixed:P``.

    Raises ``InvalidParameter("actual", ...)`` for anything else.
    """
    if spec is None:
        return Actual("prior")
    if isinstance(spec, Actual):
        return spec
    if not isinstance(spec, str):
        raise InvalidParameter("actual", "must be a string such as 'prior' or 'fixed:0.8'", spec)
    text = spec.strip()
    if text in ("", "prior"):
        return Actual("prior")
    if text.startswith("fixed"):
        kind, sep, rest = text.partition(":")
        if kind != "fixed" or not sep:
            raise InvalidParameter("actual", "'fixed' takes one probability: fixed:P", spec)
        try:
            p = float(rest)
        except ValueError:
            raise InvalidParameter("actual", "'fixed:P' needs a number P", spec) from None
        if not (math.isfinite(p) and 0.0 <= p <= 1.0):
            raise InvalidParameter("actual", "'fixed:P' needs 0 <= P <= 1", spec)
        return Actual("fixed", p=p)
    try:
        prior = Prior.parse(text)
    except InvalidParameter as exc:
        raise InvalidParameter(
            "actual",
            f"must be 'prior', 'paper', 'iid-uniform:A,B', 'common-uniform:A,B' or 'fixed:P' ({exc.rule})",
            spec,
        ) from None
    return Actual(prior.kind, prior=prior)


# ------------------------------------------------------------------------------------------------------
# GNMax
# ------------------------------------------------------------------------------------------------------
def gamma_gnmax(K: int, sigma: float) -> np.ndarray:
    """γ_GNMax(l) = 2Φ(|2l − K|/(√2σ)) − 1 = erf(|2l − K|/(2σ)), l = 0..K (see the module docstring)."""
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise InvalidParameter("sigma", "must be > 0", sigma)
    from darrm_opt.privacy.gnmax import gnmax_gamma

    return gnmax_gamma(K, float(sigma))


def gnmax_sigma(epsilon: float, delta: float, method: str = "rdp", K: int | None = None):
    """The calibration of one GNMax answer to (ε, δ) by ``method`` (:data:`~darrm_opt.privacy.gnmax.GNMAX_METHODS`),
    or None where none exists (δ = 0 for the Gaussian methods, ε below every order's reach)."""
    from darrm_opt.privacy.gnmax import calibrate_gnmax

    if delta <= 0 and method != "exact-one-bit":
        return None
    try:
        return calibrate_gnmax(epsilon, delta, method, K=K)
    except DarrmError:
        return None


def gnmax_error(K: int, sigma: float, alpha: np.ndarray) -> float:
    """Exact error of GNMax with noise σ on K binary teachers whose vote count has (expected) pmf α."""
    return error_from_pmf(gamma_gnmax(K, sigma), np.asarray(alpha, dtype=np.float64))


# ------------------------------------------------------------------------------------------------------
# Comparison rows
# ------------------------------------------------------------------------------------------------------
@dataclass
class ComparisonRow:
    """One m: the errors of every method under ``actual``, the γ tables behind them, GNMax's σ by every
    calibration method, why a method is unavailable, and the teacher setting."""

    params: Params
    actual: str
    errors: dict[str, float | None]
    gammas: dict[str, np.ndarray | None] = field(default_factory=dict)
    sigma: float | None = None  #: GNMax's σ at :data:`GNMAX_REPORTED` (the exact calibration)
    sigmas: dict[str, float | None] = field(default_factory=dict)  #: σ by calibration method
    unavailable: dict[str, str] = field(default_factory=dict)
    teachers: str = "shared"
    note: dict = field(default_factory=dict)

    @property
    def m(self) -> float:
        return self.params.m

    def to_dict(self) -> dict:
        m = self.params.m
        return {
            "m": int(m) if float(m).is_integer() else m,
            "actual": self.actual,
            "teachers": self.teachers,
            "errors": {k: self.errors.get(k) for k in ERROR_KEYS if k != "majority" or k in self.errors},
            "sigma": {"gnmax": self.sigmas.get(GNMAX_REPORTED), "gnmax_paper": self.sigmas.get("rdp"),
                      "by_method": dict(self.sigmas)},
            "gnmax_calibration": {"gnmax": GNMAX_REPORTED, "gnmax_paper": "rdp"},
            "unavailable": dict(self.unavailable),
            "setting": self.note,
        }


def _gnmax_columns(params: Params, K: int) -> tuple[dict, dict]:
    """GNMax's σ by every calibration method at (mε, δ), and the γ of the reported and the paper's σ."""
    from darrm_opt.privacy.gnmax import GNMAX_METHODS

    eps, dlt = params.m * params.epsilon, float(params.delta)  # type: ignore[arg-type]
    cals = {meth: gnmax_sigma(eps, dlt, meth, K) for meth in GNMAX_METHODS}
    sigmas = {meth: (c.sigma if c is not None else None) for meth, c in cals.items()}
    gammas = {"gnmax": sigmas[GNMAX_REPORTED], "gnmax_paper": sigmas["rdp"]}
    return sigmas, {k: (gamma_gnmax(K, s) if s is not None else None) for k, s in gammas.items()}


def _setting_tables(params: Params, teachers: str, solver: str, const: str, delta_prime: float,
                    **kwargs) -> tuple[dict, dict[str, str]]:
    """γ_opt and the baselines for the teacher setting; reasons for those unavailable."""
    from darrm_opt.model.neighbours import PateParams
    from darrm_opt.optimize.optimizer import solve
    from darrm_opt.optimize.pate_setting import solve_pate
    from darrm_opt.release.table_file import BASELINE_NAMES, Unavailable, baseline_tables

    if teachers == "disjoint-nonprivate":
        pp = PateParams(params.K, params.m * params.epsilon, float(params.delta), params.prior)  # type: ignore[arg-type]
        gammas: dict[str, np.ndarray | None] = {"opt": np.asarray(solve_pate(pp, solver=solver).gamma)}
        why = "a shared-data construction; not offered for non-private teachers on disjoint shards"
        return gammas, {k: why for k in BASELINE_NAMES}
    gammas = {"opt": np.asarray(solve(params, solver=solver, **kwargs).gamma, dtype=np.float64)}
    base = baseline_tables(params, const=const, delta_prime=delta_prime, **kwargs)
    reasons = {}
    for k, t in base.items():
        if isinstance(t, Unavailable):
            gammas[k], reasons[k] = None, t.reason
        else:
            gammas[k] = np.asarray(t.gamma, dtype=np.float64)
    if teachers == "disjoint-private":
        gammas["majority"] = np.ones(params.K + 1)
    return gammas, reasons


def compare_params(params: Params, actual: str | Actual | None = None, *, solver: str = "highs",
                   const: str = "simple", delta_prime: float = 0.1, teachers: str = "shared",
                   **kwargs) -> ComparisonRow:
    """Expected errors of γ_opt, γ_Sub, γ_DSub, γ_const, γ_const_opt and GNMax for ``params`` under ``actual``.

    γ_opt is optimised for ``params.prior`` in the teacher setting ``teachers``
    (:mod:`darrm_opt.model.neighbours`); the baselines are those of
    :func:`darrm_opt.release.table_file.baseline_tables` (certified; unavailable ones carry a reason); GNMax is
    calibrated to the same (mε, δ) exactly for the bit it releases (``gnmax``) and by the paper's RDP recipe
    (``gnmax_paper``). ``disjoint-private`` adds the plain majority (``majority``), free under the cap.
    """
    from darrm_opt.model.neighbours import parse_teachers, setting_note

    teachers = parse_teachers(teachers)
    act = parse_actual(actual)
    alpha = act.pmf(params.K, params)
    gammas, reasons = _setting_tables(params, teachers, solver, const, delta_prime, **kwargs)
    sigmas, gn = _gnmax_columns(params, params.K)
    gammas.update(gn)
    for k, s in (("gnmax", sigmas[GNMAX_REPORTED]), ("gnmax_paper", sigmas["rdp"])):
        if s is None:
            reasons[k] = "no Gaussian noise level meets δ = 0" if not params.delta else "no calibration"
    errors = {k: (error_from_pmf(g, alpha) if g is not None else None) for k, g in gammas.items()}
    note = setting_note(teachers, params.epsilon, params.teacher_delta).to_dict()
    return ComparisonRow(params=params, actual=act.resolve(params).spec, errors=errors, gammas=gammas,
                         sigma=sigmas[GNMAX_REPORTED], sigmas=sigmas, unavailable=reasons, teachers=teachers,
                         note=note)


def compare(K: int, ms, *, epsilon: float = 0.1, teacher_delta: float = 1e-5, delta: float | None = None,
            prior: str | Prior = "paper", actual: str | Actual | None = None, **kwargs) -> list[ComparisonRow]:
    """One :class:`ComparisonRow` per m (the paper's Figures 2, 6–9)."""
    act = parse_actual(actual)
    rows = []
    for m in ms:
        params = Params(K=K, m=m, epsilon=epsilon, teacher_delta=teacher_delta, delta=delta,
                        prior=Prior.parse(prior))
        rows.append(compare_params(params, act, **kwargs))
    return rows


def error_curves(gammas: dict[str, np.ndarray | None], ps) -> dict[str, np.ndarray]:
    """E(DaRRM_γ) at i.i.d. p_i = p for each p in ``ps``, for every non-None γ (the paper's bottom panels)."""
    ps = np.asarray(ps, dtype=np.float64)
    out = {}
    for name, g in gammas.items():
        if g is None:
            continue
        g = np.asarray(g, dtype=np.float64)
        K = g.size - 1
        out[name] = np.array([error_from_pmf(g, binomial_pmf(K, float(p))) for p in ps])
    return out


# ------------------------------------------------------------------------------------------------------
# Composition tables
# ------------------------------------------------------------------------------------------------------
def budget_rows(epsilon: float, delta: float, queries, delta_prime: float = 1e-4) -> list[dict]:
    """Total privacy loss of Q answers of a per-query (ε, δ)-DP mechanism, for each Q in ``queries``.

    Three rows per Q: ``simple`` (Thm 2.2), ``general`` (Thm 2.3 with δ′) and ``best`` (the smaller ε, ties
    to the smaller δ), each ``{queries, epsilon, delta, method}``; ``best`` also names its ``rule``.
    """
    rows = []
    for q in queries:
        if isinstance(q, bool) or float(q) != int(float(q)) or int(float(q)) < 1:
            raise InvalidParameter("queries", "must be integers >= 1", q)
        q = int(float(q))
        s = simple_composition(epsilon, delta, q)
        g = general_composition(epsilon, delta, q, delta_prime)
        best = min((s, g), key=lambda r: (r.epsilon, r.delta))
        rows.append({"queries": q, "epsilon": s.epsilon, "delta": s.delta, "method": "simple"})
        rows.append({"queries": q, "epsilon": g.epsilon, "delta": g.delta, "method": "general"})
        rows.append({"queries": q, "epsilon": best.epsilon, "delta": best.delta, "method": "best",
                     "rule": "simple" if best is s else "general"})
    return rows
