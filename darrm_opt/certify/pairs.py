"""Certificates for the PATE setting: every neighbouring pair (l, l ± 1) and output, checked exactly.

DaRRM_γ is (ε, δ)-DP for non-private teachers on disjoint shards iff every row of
:func:`darrm_opt.model.neighbours.pair_rows` satisfies h_l − e^ε h_{l′} ≤ e^ε − 1 + 2δ (output 1) and
−h_l + e^ε h_{l′} ≤ e^ε − 1 + 2δ (output 0), h_l = s_l γ(l). All 4K rows are evaluated in float64; every row
within the float error bound (or 1e-12) of the bound is re-evaluated in 40-digit arithmetic from the
exact binary values of γ, ε and δ, like :mod:`darrm_opt.certify.exact`, and passes only if it is ≤ the
bound in the same precision.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import mpmath
import numpy as np

from darrm_opt.certify.exact import MP_DIGITS
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.neighbours import PateParams, pair_rows, signs

#: Rows closer to the bound than this are always re-checked in high precision.
NEAR_TIGHT = 1e-12
UNIT_ROUNDOFF = 2.0**-53


@dataclass(frozen=True)
class PairCertificate:
    """The outcome of checking every neighbouring pair (l, l′) and output."""

    certified: bool
    max_privacy_cost: float
    bound: float
    pairs_checked: int
    worst_pair: list[int]  #: [l, l′, output]
    error_bound: float
    high_precision_checked: int
    seconds: float
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def _validate(gamma, K: int) -> np.ndarray:
    g = np.asarray(gamma, dtype=np.float64)
    if g.ndim != 1 or g.size != K + 1:
        raise InvalidParameter("gamma", f"must have K + 1 = {K + 1} values", f"{g.size} values")
    if not np.all(np.isfinite(g)) or g.min() < 0 or g.max() > 1:
        raise InvalidParameter("gamma", "every value must be in [0, 1]")
    return g


def exact_row_cost(params: PateParams, gamma: np.ndarray, label: tuple[int, int, int]) -> mpmath.mpf:
    """One row's cost ±(h_l − e^ε h_{l′}) in MP_DIGITS-digit arithmetic (+ for output 1, − for output 0)."""
    l, lp, out = label
    s = signs(params.K)
    with mpmath.workdps(MP_DIGITS):
        E = mpmath.exp(mpmath.mpf(params.epsilon))
        val = mpmath.mpf(float(s[l] * gamma[l])) - E * mpmath.mpf(float(s[lp] * gamma[lp]))
        return val if out == 1 else -val


def certify_pairs(params: PateParams, gamma) -> PairCertificate:
    """Certify γ (K + 1 values) for the PATE setting by checking all 4K rows (module docstring)."""
    t0 = time.perf_counter()
    g = _validate(gamma, params.K)
    E = math.exp(params.epsilon)
    A, labels = pair_rows(params.K, E)
    costs = A @ g
    B = params.bound
    # |row| ≤ 1 + E; E and the products carry a few roundings each
    eta = 8 * UNIT_ROUNDOFF * (1.0 + E) + 4 * UNIT_ROUNDOFF * B
    i_max = int(np.argmax(costs))
    max_cost, worst, hp = float(costs[i_max]), labels[i_max], 0
    certified, reason = True, ""
    if max_cost > B + eta:
        certified, reason = False, f"pair {list(worst)} exceeds the bound by {max_cost - B:.3g}"
    else:
        near = np.flatnonzero(costs > B - max(eta, NEAR_TIGHT))
        if near.size:
            with mpmath.workdps(MP_DIGITS):
                bound_mp = mpmath.expm1(mpmath.mpf(params.epsilon)) + 2 * mpmath.mpf(params.delta)
                exact = [(exact_row_cost(params, g, labels[i]), labels[i]) for i in near]
                top, worst = max(exact, key=lambda t: t[0])
                max_cost, hp = float(top), int(near.size)
                if top > bound_mp:
                    certified, reason = False, f"pair {list(worst)} exceeds the bound in {MP_DIGITS}-digit arithmetic"
    return PairCertificate(certified, max_cost, float(B), len(labels), [int(x) for x in worst], float(eta), hp,
                           time.perf_counter() - t0, reason)
