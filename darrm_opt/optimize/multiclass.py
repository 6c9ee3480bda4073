"""γ_opt for multi-class DaRRM in PATE's setting (disjoint non-private teachers), as one LP.

    maximise   Σ_g w_g γ(g)                              (exact expected accuracy, model.multiclass)
    subject to the rows of every neighbouring pair type   ((MC-2) linearised, model.multiclass.pair_rows)
               0 ≤ γ(g) ≤ 1 (γ(g) = 0 for gaps no histogram has)

The LP has K + 1 variables and O(K + C) pair types (a few rows each), so it is solved in full through the
``solvers`` layer against δ tightened by τ = min(1e-9, ρ/2), where ρ = δ + (e^ε − 1)/C is the smallest
right-hand side of a linearised row; the table is then certified over every type (certify.multiclass).
A table the certificate rejects by an excess x (solver tolerance) is scaled by ρ/(ρ + x): each row is
linear in γ with right-hand side ≥ ρ, so scaling turns a violation x into a margin.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from darrm_opt import solvers
from darrm_opt.certify.multiclass import MulticlassCertificate, certify_multiclass
from darrm_opt.errors import CertificationFailed, SolverFailed, SolverLimitExceeded, SolverUnavailable
from darrm_opt.model.multiclass import (
    MulticlassParams,
    accuracy_weights,
    expected_error,
    pair_rows,
    pair_types,
    reachable_gaps,
)
from darrm_opt.solvers import LP, ModelTooLargeError, SolverUnavailableError, Status

#: The LP's rows are tightened by this much (or half the smallest right-hand side ρ, if less).
TIGHTEN_ABS = 1e-9
#: Orders of magnitude of objective weight resolved per LP round (see solve_in_tiers).
TIER_ORDERS = 8
#: Weights below this fraction of the largest are not resolved (see solve_in_tiers).
TIER_FLOOR = 1e-15


@dataclass(frozen=True)
class MulticlassSolution:
    params: MulticlassParams
    gamma: tuple[float, ...]
    reachable: tuple[bool, ...]
    certificate: MulticlassCertificate
    expected_accuracy: float
    expected_error: float
    solver: str
    pair_types: int
    rows: int
    seconds: float
    lp_seconds: float

    def to_dict(self) -> dict:
        return {
            **self.params.canonical(),
            "solver": self.solver,
            "gamma": list(self.gamma),
            "reachable_gaps": [g for g, r in enumerate(self.reachable) if r],
            "certificate": self.certificate.to_dict(),
            "expected_accuracy": self.expected_accuracy,
            "expected_error": self.expected_error,
            "pair_types": self.pair_types,
            "lp_rows": self.rows,
            "seconds": self.seconds,
        }


def build_lp(params: MulticlassParams, delta_lp: float) -> tuple[LP, int]:
    """The LP (minimise −w·γ) with every pair type's rows at δ = ``delta_lp``; returns it and the type count."""
    K, C = params.K, params.C
    E = math.exp(params.epsilon)
    types = pair_types(K, C)
    parts = [pair_rows(pt, C, E, delta_lp, K) for pt in types]
    A = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, K + 1))
    b = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    w = accuracy_weights(K, C, params.prior)
    ub = reachable_gaps(K, C).astype(np.float64)
    return LP(-w, A, b, np.zeros(K + 1), ub), len(types)


def scale_into_bound(params: MulticlassParams, gamma: np.ndarray, divergence: float) -> np.ndarray:
    """γ·ρ/(ρ + 2x + 1e-15) for a table whose largest divergence exceeds δ by x = divergence − δ.

    Every linearised row is r·γ ≤ b with b ≥ ρ = δ + (e^ε − 1)/C (model.multiclass.pair_rows), and the
    divergence minus δ is the largest r·γ − b; so r·γ ≤ b + x ≤ b(1 + x/ρ), and the table scaled by
    ρ/(ρ + x) meets b (the doubled excess and 1e-15 cover the rounding of the product)."""
    rho = params.delta + math.expm1(params.epsilon) / params.C
    excess = max(0.0, divergence - params.delta)
    return np.asarray(gamma) * (rho / (rho + 2.0 * excess + 1e-15))


def _solve(backend, lp: LP):
    try:
        res = backend.solve(lp, feasibility_tol=1e-9)
    except ModelTooLargeError as exc:
        raise SolverLimitExceeded(f"{exc}; use --solver highs") from None
    if res.status is not Status.OPTIMAL or res.x is None:
        raise SolverFailed(f"LP solver {backend.name} returned {res.status.value}: {res.message}")
    return res


def solve_in_tiers(backend, lp: LP) -> tuple[np.ndarray, float]:
    """Solve ``lp`` so that objective weights far below the largest are not lost to the solver's
    tolerances (under a concentrated prior the weights span hundreds of orders of magnitude; a solver
    treats a cost of 1e-12 as 0 and leaves those γ at an arbitrary vertex).

    Each round solves over the variables not yet fixed (the fixed ones substituted out), with the weights
    divided by the largest of them, then fixes those within TIER_ORDERS orders of magnitude of it at the
    values found; every round's solution is feasible for the next (up to the solver's tolerance; a round
    the solver then declares infeasible ends the rounds with the γ found so far), so no tier's objective
    decreases. Weights below TIER_FLOOR times
    the largest are below the float precision of the weights themselves (differences of probabilities
    ~1e-17 apart): a last round gives those variables the largest sum of γ the fixed ones allow (as
    much release as privacy permits where the prior cannot tell). Returns γ and the total LP seconds."""
    w = -lp.c
    wmax = float(np.abs(w).max()) if w.size else 0.0
    free = lp.ub > 0
    x, seconds = np.zeros(lp.n_vars), 0.0
    while free.any():
        top = float(np.abs(w[free]).max())
        resolved = top > TIER_FLOOR * wmax
        # the fixed variables are substituted out (rows left with no free variable hold at x)
        rhs = lp.b_ub - lp.A_ub[:, ~free] @ x[~free]
        rows = np.any(lp.A_ub[:, free] != 0, axis=1)
        c = -w[free] / top if resolved else -np.ones(int(free.sum()))
        if not rows.any():  # only bounds remain
            x[free] = np.where(c < 0, lp.ub[free], lp.lb[free])
            if not resolved:
                break
            free &= np.abs(w) < top * 10.0**-TIER_ORDERS
            continue
        try:
            res = _solve(backend, LP(c, lp.A_ub[rows][:, free], rhs[rows], lp.lb[free], lp.ub[free]))
        except SolverFailed:
            if free.all() or not (lp.ub > 0)[~free].any():
                raise
            break  # fixed values at the solver's tolerance can leave a later round infeasible: keep γ so far
        seconds += res.seconds
        x[free] = np.clip(res.x, lp.lb[free], lp.ub[free])
        if not resolved:
            break
        free &= np.abs(w) < top * 10.0**-TIER_ORDERS
    return x, seconds


def solve_multiclass(params: MulticlassParams, *, solver: str = solvers.DEFAULT_BACKEND) -> MulticlassSolution:
    """The certified optimal multi-class γ for ``params``; raises CertificationFailed rather than return
    an uncertified table."""
    t0 = time.perf_counter()
    try:
        backend = solvers.get_backend(solver)
    except SolverUnavailableError as exc:
        raise SolverUnavailable(str(exc)) from None
    rho = params.delta + math.expm1(params.epsilon) / params.C  # the smallest right-hand side of a row
    tau = min(TIGHTEN_ABS, 0.5 * rho)
    lp, n_types = build_lp(params, params.delta - tau)
    gamma, lp_seconds = solve_in_tiers(backend, lp)
    cert = certify_multiclass(params, gamma)
    if not cert.certified and cert.max_hockey_stick > params.delta:
        gamma = scale_into_bound(params, gamma, cert.max_hockey_stick)
        cert = certify_multiclass(params, gamma)
    if not cert.certified:
        raise CertificationFailed(f"multi-class γ could not be certified: {cert.reason}", cert)
    err = expected_error(gamma, params.K, params.C, params.prior)  # non-negative terms: accurate when tiny
    return MulticlassSolution(
        params=params, gamma=tuple(float(x) for x in gamma),
        reachable=tuple(bool(x) for x in lp.ub > 0), certificate=cert,
        expected_accuracy=1.0 - err, expected_error=err, solver=backend.name, pair_types=n_types,
        rows=lp.n_rows, seconds=time.perf_counter() - t0, lp_seconds=lp_seconds)
