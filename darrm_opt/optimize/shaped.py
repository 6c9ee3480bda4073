"""The most accurate table whose privacy profile stays under a target curve (composition-shaped tables).

    minimise   −Σ_j w_j g_j                                              (the exact objective, App. C.1)
    subject to ±(s_l γ(l) − x_k s_{l′} γ(l′)) ≤ x_k − 1 + 2 δ_T(ε′_k)   every pair |l − l′| = 1, output,
                                                                     and slope x_k = e^{ε′_k}, k = 1..J
               0 ≤ g ≤ 1 (g_0 = 0 at the tie of an even K),  γ = mirror(g)

(:mod:`darrm_opt.model.shaped` (S-1), rows of :mod:`darrm_opt.model.neighbours` at each slope; 4K·J rows over
⌊K/2⌋ + 1 free values; the symmetric restriction loses nothing, as in :mod:`darrm_opt.optimize.pate_setting`).
With J = 120 and K = 250 that is 120,000 dense rows, most never binding, so the LP is solved by cutting
planes in a HiGHS session (rows scaled by powers of two, every "optimal" checked against its dual bound:
:mod:`darrm_opt.solvers`): each round adds, per slope, the ``per_round`` rows the current table violates
most, until none is violated. Rows are imposed against bounds tightened by τ_k = 1e-8·max(bound_k, 1); if
a float check still finds a row above bound_k − τ_k/2, γ is scaled by min_k (bound_k − τ_k/2)/max cost_k
(each row is linear in γ). The table returned carries a
:class:`~darrm_opt.certify.shaped.ShapedCertificate`; CertificationFailed rather than an uncertified table.

The first rows are, per slope, the ``per_round`` rows nearest their bound at the target's own noise table
(:func:`darrm_opt.model.shaped.noise_table`, feasible and for β = 2 GNMax itself); ``warm``: instead, the
(slope, row) pairs active in a previous solve (of the same K and J): a calibration that re-solves with a
nearby scale needs a few rounds instead of tens.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from darrm_opt import solvers
from darrm_opt.certify.shaped import (
    ShapedCertificate,
    ShapedMulticlassCertificate,
    certify_shaped,
    certify_shaped_multiclass,
)
from darrm_opt.errors import CertificationFailed, SolverFailed
from darrm_opt.model.multiclass import accuracy_weights, pair_types, reachable_gaps
from darrm_opt.model.multiclass import expected_error as mc_expected_error
from darrm_opt.model.neighbours import signs
from darrm_opt.model.objective import expected_error, objective_weights
from darrm_opt.model.shaped import ShapedMulticlassParams, ShapedPateParams, noise_table
from darrm_opt.optimize.optimizer import TIGHTEN_REL, lp_backend
from darrm_opt.optimize.pate_setting import free_bounds, mirror_matrix
from darrm_opt.solvers import Status

#: rows added per slope and round
PER_ROUND = 16
#: the most cutting-plane rounds before giving up
MAX_ROUNDS = 400


@dataclass(frozen=True)
class ShapedSolution:
    """A certified shaped table γ(0..K), its expected error under the prior and how it was solved."""

    params: ShapedPateParams
    gamma: tuple[float, ...]
    certificate: ShapedCertificate
    solver: str
    expected_error: float
    seconds: float
    rounds: int
    rows: int
    active: np.ndarray = field(repr=False, compare=False)  #: (slope, row) pairs of the final LP, shape (n, 2)

    def to_dict(self) -> dict:
        return {**self.params.canonical(), "solver": self.solver, "gamma": list(self.gamma),
                "certificate": self.certificate.to_dict(), "expected_error": self.expected_error,
                "seconds": self.seconds, "rounds": self.rounds, "rows": self.rows}


def _pair_index(K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 4K rows as (l, l′, sign): sign +1 for output 1, −1 for output 0 (cost sign·(h_l − x h_{l′}))."""
    l = np.arange(K)
    a = np.stack([l, l + 1, l, l + 1], axis=1).ravel()
    b = np.stack([l + 1, l, l + 1, l], axis=1).ravel()
    sg = np.tile([1.0, 1.0, -1.0, -1.0], K)
    return a, b, sg


def solve_shaped(params: ShapedPateParams, *, solver: str = solvers.DEFAULT_BACKEND,
                 warm: np.ndarray | None = None, per_round: int = PER_ROUND) -> ShapedSolution:
    """The certified most accurate γ whose profile meets (S-1) at every slope (module docstring)."""
    t0 = time.perf_counter()
    K = params.K
    eps, target = params.slope_points()
    x = np.exp(eps)
    bound = np.expm1(eps) + 2.0 * target
    tau = TIGHTEN_REL * np.maximum(bound, 1.0)
    s = signs(K)
    a, b, sg = _pair_index(K)
    lo = K - K // 2
    ls = np.arange(K + 1)
    col = np.where(ls >= lo, ls - lo, K - lo - ls)  # γ(l) = g[col(l)]
    M = mirror_matrix(K)
    ub = free_bounds(K)
    w = objective_weights(K, params.prior)
    backend = lp_backend(solver)
    session = backend.session(-w, np.zeros(ub.size), ub, feasibility_tol=1e-9)
    active = np.zeros((eps.size, a.size), dtype=bool)

    def add(jj: np.ndarray, rr: np.ndarray) -> None:
        A = np.zeros((jj.size, ub.size))
        n = np.arange(jj.size)
        np.add.at(A, (n, col[a[rr]]), sg[rr] * s[a[rr]])
        np.add.at(A, (n, col[b[rr]]), -sg[rr] * x[jj] * s[b[rr]])
        session.add_rows(A, bound[jj] - tau[jj])
        active[jj, rr] = True

    def slack(gamma: np.ndarray) -> np.ndarray:
        h = s * gamma
        return sg[None, :] * (h[a][None, :] - x[:, None] * h[b][None, :]) - (bound - tau / 2)[:, None]

    if warm is not None and len(warm):
        wj, wr = np.asarray(warm, dtype=np.intp).T
        ok = (wj < eps.size) & (wr < a.size)
        add(wj[ok], wr[ok])
    else:  # the rows nearest their bound at the target's own (feasible) noise table
        top = np.argsort(-slack(noise_table(K, params.beta, params.scale)), axis=1)[:, :per_round]
        add(np.repeat(np.arange(eps.size), top.shape[1]), top.ravel())
    g = None
    rounds = 0
    while True:
        if g is None:
            res = session.solve()
            if res.status is not Status.OPTIMAL or res.x is None:
                raise SolverFailed(f"LP solver {backend.name} returned {res.status.value}: {res.message}")
            g = np.clip(np.asarray(res.x, dtype=np.float64), 0.0, ub)
            rounds += 1
        viol = slack(M @ g)
        viol[active] = -np.inf
        top = np.argsort(-viol, axis=1)[:, :per_round]
        jj = np.repeat(np.arange(eps.size), top.shape[1])
        rr = top.ravel()
        new = viol[jj, rr] > 0
        if not new.any():
            break
        if rounds >= MAX_ROUNDS:
            raise SolverFailed(f"the shaped LP did not converge in {MAX_ROUNDS} cutting-plane rounds")
        add(jj[new], rr[new])
        g = None
    gamma = M @ g
    cert = certify_shaped(params, gamma)
    for _ in range(3):
        if cert.certified:
            break
        h = s * gamma
        costs = sg[None, :] * (h[a][None, :] - x[:, None] * h[b][None, :])
        peak = costs.max(axis=1)
        scale = float(np.min(np.where(peak > 0, (bound - tau / 2) / np.where(peak > 0, peak, 1.0), math.inf)))
        gamma = gamma * min(scale, 1.0 - 1e-12)
        cert = certify_shaped(params, gamma)
    if not cert.certified:
        raise CertificationFailed(f"the shaped table is not under its target curve: {cert.reason}", cert)
    pairs = np.argwhere(active)
    return ShapedSolution(params, tuple(float(v) for v in gamma), cert, backend.name,
                          expected_error(gamma, params.prior), time.perf_counter() - t0, rounds,
                          int(pairs.shape[0]), pairs)


# ---------------------------------------------------------------------------------------------------------
# multi-class (rule MC-1): the rows of (MC-2) at every slope
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShapedMulticlassSolution:
    """A certified shaped multi-class table γ(0..K) over the top gap, its expected error and how it was solved."""

    params: ShapedMulticlassParams
    gamma: tuple[float, ...]
    certificate: ShapedMulticlassCertificate
    solver: str
    expected_error: float
    seconds: float
    rounds: int
    rows: int
    active: np.ndarray = field(repr=False, compare=False)  #: (slope, row) pairs of the final LP, shape (n, 2)


def _type_rows(K: int, C: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every (ordered pair type, subset S of its four groups) of :func:`darrm_opt.model.multiclass.pair_rows`
    as (g, g′, c_u, c_v, n_S): at slope x the row is c_u γ(g) − x c_v γ(g′) ≤ δ + (x − 1) n_S / C, with
    c_u = Σ_S n (1{T}/t − 1/C), c_v = Σ_S n (1{T′}/t′ − 1/C)."""
    g, g2, cu, cv, ns = [], [], [], [], []
    masks = ((np.arange(1, 16)[:, None] >> np.arange(4)[None, :]) & 1).astype(bool)
    for pt in pair_types(K, C):
        for a in (pt, pt.reversed()):
            n, inT, inT2 = a.groups(C)
            u = n * (inT / a.t - 1.0 / C)
            v = n * (inT2 / a.t2 - 1.0 / C)
            for sel in masks:
                if np.any(sel & (n <= 0)):
                    continue
                g.append(a.g)
                g2.append(a.g2)
                cu.append(float(u[sel].sum()))
                cv.append(float(v[sel].sum()))
                ns.append(float(n[sel].sum()))
    return (np.array(g, dtype=np.intp), np.array(g2, dtype=np.intp), np.array(cu), np.array(cv), np.array(ns))


def solve_shaped_multiclass(params: ShapedMulticlassParams, *, solver: str = solvers.DEFAULT_BACKEND,
                            warm: np.ndarray | None = None, per_round: int = PER_ROUND) -> ShapedMulticlassSolution:
    """The certified most accurate multi-class γ (MC-1) whose profile meets (S-1) at every slope:

        maximise Σ_g w_g γ(g)  s.t.  (MC-2) at (ε′_j, δ_T(ε′_j)) for every j,  0 ≤ γ ≤ 1 (0 at unreachable gaps)

    (the LP of :mod:`darrm_opt.optimize.multiclass` at every slope), by cutting planes as the binary one, rows
    tightened by τ_j = min(1e-9, ρ_j/2), ρ_j = δ_T(ε′_j) + (e^{ε′_j} − 1)/C the smallest right-hand side at
    slope j; a table still above a row is scaled by min_j ρ_j/(ρ_j + excess_j) (each row is linear in γ with
    right-hand side ≥ ρ_j); certified at every slope (:func:`certify_shaped_multiclass`)."""
    t0 = time.perf_counter()
    K, C = params.K, params.C
    eps, target = params.slope_points()
    x = np.exp(eps)
    g1, g2, cu, cv, ns = _type_rows(K, C)
    bound = target[:, None] + np.expm1(eps)[:, None] * ns[None, :] / C
    rho = target + np.expm1(eps) / C
    tau = np.minimum(1e-9, rho / 2)
    ub = reachable_gaps(K, C).astype(np.float64)
    w = accuracy_weights(K, C, params.prior)
    backend = lp_backend(solver)
    session = backend.session(-w, np.zeros(K + 1), ub, feasibility_tol=1e-9)
    active = np.zeros((eps.size, g1.size), dtype=bool)

    def slack(gamma: np.ndarray) -> np.ndarray:
        return cu[None, :] * gamma[g1][None, :] - x[:, None] * cv[None, :] * gamma[g2][None, :] - bound

    def add(jj: np.ndarray, rr: np.ndarray) -> None:
        A = np.zeros((jj.size, K + 1))
        n = np.arange(jj.size)
        np.add.at(A, (n, g1[rr]), cu[rr])
        np.add.at(A, (n, g2[rr]), -x[jj] * cv[rr])
        session.add_rows(A, bound[jj, rr] - tau[jj])
        active[jj, rr] = True

    if warm is not None and len(warm):
        wj, wr = np.asarray(warm, dtype=np.intp).T
        ok = (wj < eps.size) & (wr < g1.size)
        add(wj[ok], wr[ok])
    gamma = None if active.any() else ub.copy()
    rounds = 0
    while True:
        if gamma is None:
            res = session.solve()
            if res.status is not Status.OPTIMAL or res.x is None:
                raise SolverFailed(f"LP solver {backend.name} returned {res.status.value}: {res.message}")
            gamma = np.clip(np.asarray(res.x, dtype=np.float64), 0.0, ub)
            rounds += 1
        viol = slack(gamma) + (tau / 2)[:, None]
        viol[active] = -np.inf
        top = np.argsort(-viol, axis=1)[:, :per_round]
        jj = np.repeat(np.arange(eps.size), top.shape[1])
        rr = top.ravel()
        new = viol[jj, rr] > 0
        if not new.any():
            break
        if rounds >= MAX_ROUNDS:
            raise SolverFailed(f"the shaped LP did not converge in {MAX_ROUNDS} cutting-plane rounds")
        add(jj[new], rr[new])
        gamma = None
    cert = certify_shaped_multiclass(params, gamma)
    for _ in range(3):
        if cert.certified:
            break
        excess = np.maximum(slack(gamma).max(axis=1), 0.0) + tau
        gamma = gamma * float(np.min(rho / (rho + excess)))
        cert = certify_shaped_multiclass(params, gamma)
    if not cert.certified:
        raise CertificationFailed(f"the shaped multi-class table is not under its target curve: {cert.reason}",
                                  cert)
    pairs = np.argwhere(active)
    return ShapedMulticlassSolution(params, tuple(float(v) for v in gamma), cert, backend.name,
                                    float(mc_expected_error(gamma, K, C, params.prior)), time.perf_counter() - t0,
                                    rounds, int(pairs.shape[0]), pairs)
