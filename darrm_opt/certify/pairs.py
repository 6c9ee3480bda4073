"""Certificates for the PATE setting: every neighbouring pair (l, l ± 1) and output, checked exactly.

DaRRM_γ is (ε, δ)-DP for non-private teachers on disjoint shards iff every row of
:func:`darrm_opt.model.neighbours.pair_rows` satisfies h_l − e^ε h_{l′} ≤ e^ε − 1 + 2δ (output 1) and
−h_l + e^ε h_{l′} ≤ e^ε − 1 + 2δ (output 0), h_l = s_l γ(l). All 4K rows are evaluated in float64; every row
within the float error bound (or 1e-12) of the bound is re-decided rigorously from the exact binary values
of γ, ε and δ, like :mod:`darrm_opt.certify.exact`: in the equivalent form P_l − e^ε P_{l′} − δ ≤ 0 with
P_l = Pr[out = o | L = l] = (1 ± h_l)/2 (so that γ = 1 rows give exact 0s instead of e^ε − e^ε), enclosed in
outward-rounded interval arithmetic (mpmath.iv) at 40, 80, 160, 320 digits. A row passes only when the upper
end is ≤ 0 and fails when the lower end is > 0; a row still straddling 0 at 320 digits is refused
("cannot be proven"). No row is an exact tie unless P_{l′} = 0 (then the excess P_l − δ is a difference of
two binary floats, computed exactly): otherwise P_l − e^ε P_{l′} − δ = 0 would make e^ε = (P_l − δ)/P_{l′}
rational, and e^ε is transcendental for rational ε ≠ 0 (Lindemann), so the refusal only meets rows within
~1e-320 of the bound.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import mpmath
import numpy as np
from mpmath import iv

from darrm_opt.certify.exact import DIGITS_LADDER, MP_DIGITS, exp_interval, interval_dps, interval_ends
from darrm_opt.certify.verdict import VerdictFields
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.neighbours import PateParams, pair_rows, signs

#: Rows closer to the bound than this are always re-checked in high precision.
NEAR_TIGHT = 1e-12
UNIT_ROUNDOFF = 2.0**-53


@dataclass(frozen=True)
class PairCertificate(VerdictFields):
    """The outcome of checking every neighbouring pair (l, l′) and output."""

    verdict_fields = ("bound", "max_privacy_cost", "pairs_checked", "worst_pair")
    what = "(l, l ± 1, output) rows"

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


def row_excess_interval(params: PateParams, gamma: np.ndarray, label: tuple[int, int, int], dps: int):
    """An interval containing the row's excess P_l − e^ε P_{l′} − δ, P = (1 + h)/2 for output 1 and
    (1 − h)/2 for output 0 (the row cost is 2·excess + e^ε − 1 + 2δ), at ``dps`` digits (module docstring)."""
    l, lp, out = label
    s = signs(params.K)
    sign = 1.0 if out == 1 else -1.0
    with interval_dps(dps):
        E = exp_interval(iv.mpf(params.epsilon))
        P = [(1 + sign * iv.mpf(float(s[i] * gamma[i]))) / 2 for i in (l, lp)]
        return P[0] - E * P[1] - iv.mpf(params.delta)


def decide_row(params: PateParams, gamma: np.ndarray, label: tuple[int, int, int]) -> tuple[str, mpmath.mpf]:
    """("pass" | "fail" | "undecided", midpoint of the excess enclosure) for one row, climbing
    :data:`darrm_opt.certify.exact.DIGITS_LADDER` while the enclosure straddles 0."""
    for dps in DIGITS_LADDER:
        lo, hi = interval_ends(row_excess_interval(params, gamma, label, dps))
        if hi <= 0 or lo > 0:
            break
    verdict = "pass" if hi <= 0 else "fail" if lo > 0 else "undecided"
    return verdict, (lo + hi) / 2


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
            decided = [(decide_row(params, g, labels[i]), labels[i]) for i in near]
            (_, top), worst = max(decided, key=lambda t: t[0][1])
            with mpmath.workdps(MP_DIGITS):
                max_cost = float(2 * top + mpmath.expm1(mpmath.mpf(params.epsilon)) + 2 * mpmath.mpf(params.delta))
            hp = int(near.size)
            bad = [(v, lab) for (v, _), lab in decided if v != "pass"]
            if bad:
                v, lab = min(bad)  # "fail" before "undecided"
                certified = False
                reason = (f"pair {list(lab)} exceeds the bound (proven by interval arithmetic)" if v == "fail" else
                          f"pair {list(lab)} meets the bound to 320 digits: whether it exceeds it cannot be proven")
    return PairCertificate(certified, max_cost, float(B), len(labels), [int(x) for x in worst], float(eta), hp,
                           time.perf_counter() - t0, reason)
