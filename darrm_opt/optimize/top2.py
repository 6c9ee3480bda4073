"""The optimal top-two multi-class table (:mod:`darrm_opt.model.top2`) as one LP, solved by cutting planes.

    minimise   Σ_s (1 − p − q)(1 − 1/C) Pr[s] + p(s) A_T(s) + q(s) A_R(s)     (exact expected error)
    subject to (TT-2) for every ordered pair type, linearised: for the set S of groups where
               P_grp > e^ε P′_grp, Σ_{grp∈S} n_grp (P_grp − e^ε P′_grp) ≤ δ (one row per type and S);
               p + q ≤ 1; 0 ≤ p, q ≤ 1 (0 for unreachable states; q(0, ·) = 0).

(TT-2) holds iff every subset's row holds, so the LP over all rows is exact; the rows are added lazily:
each round solves the LP over the rows so far, evaluates every type's divergence at the solution and adds
the row of the positive-part set S of each violated type (at most ROUND_ROWS, most violated first),
until none is violated at δ + SLACK (the rows are solved at δ − τ, τ = min(1e-9, ρ/2)). The table is
then certified over every type (certify.top2); one rejected by
an excess x (solver tolerance) is scaled by ρ/(ρ + 2x) with ρ = δ + (e^ε − 1)/C ≤ every row's right-hand
side (scaling keeps p + q ≤ 1 and q(0, ·) = 0).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from darrm_opt import solvers
from darrm_opt.certify.multiclass import MulticlassCertificate
from darrm_opt.certify.top2 import certify_top2
from darrm_opt.errors import CertificationFailed, SolverFailed, SolverUnavailable
from darrm_opt.model.top2 import Top2Params, expected_error, pair_types, reachable_states, state_law, type_arrays
from darrm_opt.solvers import SolverUnavailableError, Status

TIGHTEN_ABS = 1e-9
#: most rows added per cutting-plane round
ROUND_ROWS = 4000
#: most rounds
MAX_ROUNDS = 200
#: violations of δ up to this are left to the final scaling (ρ/(ρ + 2x) costs a relative 2x/ρ of the table)
SLACK = 1e-9
#: the solver's feasibility tolerance (HiGHS meets rows to a few times this after its own scaling)
FEAS_TOL = 1e-10


@dataclass(frozen=True)
class Top2Solution:
    params: Top2Params
    gamma: tuple[float, ...]
    certificate: MulticlassCertificate
    expected_error: float
    solver: str
    pair_types: int
    rows: int
    rounds: int
    seconds: float
    lp_seconds: float

    def to_dict(self) -> dict:
        return {**self.params.canonical(), "solver": self.solver, "gamma": list(self.gamma),
                "certificate": self.certificate.to_dict(), "expected_error": self.expected_error,
                "pair_types": self.pair_types, "lp_rows": self.rows, "rounds": self.rounds, "seconds": self.seconds}


def solve_top2(params: Top2Params, *, solver: str = solvers.DEFAULT_BACKEND, progress=None) -> Top2Solution:  # noqa: ANN001
    """The certified optimal top-two table for ``params`` (CertificationFailed rather than an uncertified one)."""
    t0 = time.perf_counter()
    try:
        backend = solvers.get_backend(solver)
    except SolverUnavailableError as exc:
        raise SolverUnavailable(str(exc)) from None
    K, C, cap = params.K, params.C, params.cap
    S = params.states
    E = math.exp(params.epsilon)
    rho = params.delta + math.expm1(params.epsilon) / C
    d_lp = params.delta - min(TIGHTEN_ABS, 0.5 * rho)
    law = state_law(K, C, cap, params.prior)
    reach = reachable_states(K, C, cap).ravel().astype(np.float64)
    g1 = np.repeat(np.arange(K + 1), cap + 1)
    ub = np.concatenate([reach, reach * (g1 >= 1)])
    keep = 1.0 - 1.0 / C
    c = np.concatenate([(law.miss_T - keep * law.prob).ravel(), (law.miss_R - keep * law.prob).ravel()])
    c = c / max(float(np.abs(c).max()), 1e-300)
    ta = type_arrays(pair_types(K, C, cap), C, cap)
    sess = backend.session(c, np.zeros(2 * S), ub, feasibility_tol=FEAS_TOL)
    x = ub.copy()
    lp_seconds, rounds = 0.0, 0
    for rounds in range(1, MAX_ROUNDS + 1):
        p, q = x[:S], x[S:]
        P = 1.0 / C + p[ta.s][:, None] * ta.aT + q[ta.s][:, None] * ta.aR
        Q = 1.0 / C + p[ta.s2][:, None] * ta.bT + q[ta.s2][:, None] * ta.bR
        d = P - E * Q
        pos = (d > 0) & (ta.n > 0)
        viol = (ta.n * np.where(pos, d, 0.0)).sum(axis=1) - d_lp
        # rows are solved at δ − τ and re-added only when violated at δ + SLACK (a solver meets a row only
        # to its feasibility tolerance: re-adding those would add the same rows forever); what remains over δ
        # is removed by scaling after the certificate
        bad = np.flatnonzero(viol > params.delta - d_lp + SLACK)
        if progress is not None:
            progress(rounds, bad.size, float(viol.max()) + d_lp)
        sum_bad = np.flatnonzero(p + q > 1.0 + 1e-12)
        if bad.size == 0 and sum_bad.size == 0:
            break
        bad = bad[np.argsort(-viol[bad])][:ROUND_ROWS]
        w = ta.n[bad] * pos[bad]
        A = np.zeros((bad.size + sum_bad.size, 2 * S))
        ix = np.arange(bad.size)
        np.add.at(A, (ix, ta.s[bad]), (w * ta.aT[bad]).sum(axis=1))
        np.add.at(A, (ix, S + ta.s[bad]), (w * ta.aR[bad]).sum(axis=1))
        np.add.at(A, (ix, ta.s2[bad]), -E * (w * ta.bT[bad]).sum(axis=1))
        np.add.at(A, (ix, S + ta.s2[bad]), -E * (w * ta.bR[bad]).sum(axis=1))
        b = d_lp + (E - 1.0) * w.sum(axis=1) / C
        js = np.arange(sum_bad.size) + bad.size
        A[js, sum_bad] = 1.0
        A[js, S + sum_bad] = 1.0
        sess.add_rows(A, np.concatenate([b, np.ones(sum_bad.size)]))
        res = sess.solve()
        if res.status is not Status.OPTIMAL or res.x is None:
            raise SolverFailed(f"LP solver {backend.name} returned {res.status.value}: {res.message}")
        lp_seconds += res.seconds
        x = np.clip(res.x, 0.0, ub)
    else:
        raise SolverFailed(f"top-two LP: no convergence in {MAX_ROUNDS} cutting-plane rounds")
    # p + q ≤ 1 exactly (in rationals) after the solver's tolerance
    for i in np.flatnonzero(x[:S] + x[S:] >= 1.0 - 1e-12):
        x[i] = max(0.0, min(x[i], 1.0 - x[S + i]))
        while Fraction(x[i]) + Fraction(x[S + i]) > 1:
            x[i] = np.nextafter(x[i], 0.0)
    cert = certify_top2(params, x)
    if not cert.certified and cert.max_hockey_stick > params.delta:
        excess = cert.max_hockey_stick - params.delta
        x = x * (rho / (rho + 2.0 * excess + 1e-15))
        cert = certify_top2(params, x)
    if not cert.certified:
        raise CertificationFailed(f"top-two table could not be certified: {cert.reason}", cert)
    err = expected_error(x, K, C, cap, params.prior, law)
    return Top2Solution(params, tuple(float(v) for v in x), cert, err, backend.name, int(ta.rows.shape[0]),
                        int(getattr(sess, "n_rows", 0)), rounds, time.perf_counter() - t0, lp_seconds)
