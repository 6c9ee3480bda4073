"""γ_opt for non-private teachers on disjoint shards (the PATE setting), as a small linear program.

    minimise   −Σ_j w_j g_j                                   (the exact objective, App. C.1)
    subject to ± (s_l γ(l) − e^ε s_{l′} γ(l′)) ≤ e^ε − 1 + 2δ  for every pair |l − l′| = 1 and output
               0 ≤ g_j ≤ 1,  γ = mirror(g)  (γ(l) = γ(K − l); g_0 = γ(K/2) = 0 for an even K)

(:mod:`darrm_opt.model.neighbours`; 4K rows over (K + 1)/2 free values). The constraints and objective are
invariant under l → K − l with the output flipped, so averaging any solution with its mirror image gives
a symmetric one that is as good: the symmetric restriction loses nothing. The LP is solved against a
bound tightened by τ = 1e-8·max(bound, 1); if the float check still finds a row above bound − τ/2 the
table is scaled by (bound − τ/2)/max cost (every row is linear in γ). The returned γ carries a
:class:`~darrm_opt.certify.pairs.PairCertificate` (every pair, exact re-check near the bound), and
:func:`solve_pate` raises :class:`~darrm_opt.errors.CertificationFailed` rather than return an uncertified
table.

GNMax with two classes is itself such a γ (γ_GNMax(l) = erf(|2l − K|/(2σ))), so at the same (ε, δ) the
optimum's error is at most that of GNMax calibrated exactly (:func:`darrm_opt.privacy.gnmax.calibrate_gnmax_one_bit`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from darrm_opt import solvers
from darrm_opt.certify.pairs import PairCertificate, certify_pairs
from darrm_opt.errors import CertificationFailed
from darrm_opt.model.neighbours import SETTING_NOTES, PateParams, pair_rows
from darrm_opt.model.objective import expected_error, objective_weights
from darrm_opt.optimize.optimizer import TIGHTEN_REL, lp_backend, solve_lp
from darrm_opt.solvers import LP


@dataclass(frozen=True)
class PateSolution:
    """A certified γ(0..K) for the PATE setting and its expected error under ``params.prior``."""

    params: PateParams
    gamma: tuple[float, ...]
    certificate: PairCertificate
    solver: str
    expected_error: float
    seconds: float
    note: str = SETTING_NOTES["disjoint-nonprivate"]

    def to_dict(self) -> dict:
        return {**self.params.canonical(), "solver": self.solver, "gamma": list(self.gamma),
                "certificate": self.certificate.to_dict(), "expected_error": self.expected_error,
                "note": self.note, "seconds": self.seconds}


def mirror_matrix(K: int) -> np.ndarray:
    """M with γ = M g: column j holds γ(⌈K/2⌉ + j) and its mirror γ(⌊K/2⌋ − j) (one entry for the tie
    l = K/2 of an even K)."""
    lo = K - K // 2
    M = np.zeros((K + 1, K // 2 + 1))
    for j in range(M.shape[1]):
        M[lo + j, j] = 1.0
        M[K - lo - j, j] = 1.0
    return M


def free_bounds(K: int) -> np.ndarray:
    """Upper bounds of the free values g_j = γ(⌈K/2⌉ + j): 1, and 0 for the tie of an even K (whose answer
    is a fair coin whatever γ(K/2); :mod:`darrm_opt.model.neighbours`)."""
    ub = np.ones(K // 2 + 1)
    if K % 2 == 0:
        ub[0] = 0.0
    return ub


def pate_lp(params: PateParams) -> LP:
    """The LP of the module docstring over the free values g, against the tightened bound."""
    K = params.K
    A, _ = pair_rows(K, math.exp(params.epsilon))
    Ag = A @ mirror_matrix(K)
    rhs = params.bound - TIGHTEN_REL * max(params.bound, 1.0)
    ub = free_bounds(K)
    return LP(-objective_weights(K, params.prior), Ag, np.full(Ag.shape[0], rhs), np.zeros(ub.size), ub)


def solve_pate(params: PateParams, *, solver: str = solvers.DEFAULT_BACKEND) -> PateSolution:
    """The certified optimal γ for the PATE setting (module docstring)."""
    t0 = time.perf_counter()
    backend = lp_backend(solver)
    res = solve_lp(backend, pate_lp(params), "full")
    g = mirror_matrix(params.K) @ np.clip(np.asarray(res.x, dtype=np.float64), 0.0, free_bounds(params.K))
    cert = certify_pairs(params, g)
    target = params.bound - 0.5 * TIGHTEN_REL * max(params.bound, 1.0)
    if cert.max_privacy_cost > target:
        g = g * (target / cert.max_privacy_cost)
        cert = certify_pairs(params, g)
    if not cert.certified:
        raise CertificationFailed(f"the PATE-setting γ is not (ε, δ)-DP: {cert.reason}", cert)
    return PateSolution(params, tuple(float(x) for x in g), cert, backend.name, expected_error(g, params.prior),
                        time.perf_counter() - t0)


def certified_pair_decimals(params: PateParams, gamma, decimals: int = 6) -> tuple[list[str], PairCertificate]:
    """γ printed with ``decimals`` decimals, rounded down, and the certificate *of the printed values*;
    if rounding down broke a row (a γ(l′) with s_{l′} = s_l enters with a minus sign), the table is scaled
    down by one unit of the last decimal until the printed values certify."""
    g = np.asarray(gamma, dtype=np.float64)
    scale = 10.0**decimals
    for _ in range(20):
        shown = np.floor(g * scale) / scale
        cert = certify_pairs(params, shown)
        if cert.certified:
            return [f"{x:.{decimals}f}" for x in shown], cert
        g = g * (1.0 - 10.0**-decimals)
    raise CertificationFailed(f"could not print a certified table with {decimals} decimals", cert)
