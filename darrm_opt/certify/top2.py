"""Certificates for top-two multi-class tables (:mod:`darrm_opt.model.top2`): every ordered neighbouring
histogram type checked.

The table (p, q) is (ε, δ)-DP iff (TT-2) holds for every ordered type of
:func:`~darrm_opt.model.top2.pair_types` (checked against brute force over all histograms in the tests).
Each type's divergence Σ_grp n_grp max(0, P_grp − e^ε P′_grp) is computed in float64; a type within the
float error bound η of δ is re-computed in exact rational arithmetic from the binary values of p, q and δ
with e^ε replaced by a rational lower bound (the divergence is non-increasing in e^ε, so this
over-estimates it), and passes only if that exact value is ≤ δ.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np

from darrm_opt.certify.multiclass import NEAR_TIGHT, MulticlassCertificate, exp_lower
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.top2 import Top2Params, hockey_sticks, pair_types, split, type_arrays


def validate_table(params: Top2Params, table) -> np.ndarray:
    """The flat table [p, q] as float64: 2(K + 1)(G + 1) values in [0, 1], p + q ≤ 1 and q(0, ·) = 0."""
    try:
        x = np.asarray(table, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameter("gamma", "must be a list of numbers") from None
    n = 2 * params.states
    if x.ndim != 1 or x.size != n:
        raise InvalidParameter("gamma", f"must have 2(K + 1)(gap_cap + 1) = {n} values", f"{x.size} values")
    if not np.all(np.isfinite(x)) or x.min() < 0 or x.max() > 1:
        raise InvalidParameter("gamma", "every value must be in [0, 1]")
    p, q = split(x, params.K, params.cap)
    if np.any(q[0] != 0):
        raise InvalidParameter("gamma", "q(0, ·) must be 0 (a tie at the top has no runner-up set)")
    if any(Fraction(a) + Fraction(b) > 1 for a, b in zip(p.ravel().tolist(), q.ravel().tolist()) if a + b >= 1 - 1e-12):
        raise InvalidParameter("gamma", "p + q must be <= 1 in every state")
    return x


def exact_hockey_stick(row, table, params: Top2Params, E: Fraction) -> Fraction:
    """(TT-2)'s left side for one ordered type in exact rationals."""
    K, C, cap = params.K, params.C, params.cap
    p, q = split(table, K, cap)
    g1, g2, t, r, h1, h2, t2, r2 = (int(v) for v in row[:8])
    n = [int(v) for v in row[8:]]
    pa, qa = Fraction(float(p[g1, g2])), Fraction(float(q[g1, g2]))
    pb, qb = Fraction(float(p[h1, h2])), Fraction(float(q[h1, h2]))
    total = Fraction(0)
    for i, cnt in enumerate(n):
        if cnt <= 0:
            continue
        ra, rb = divmod(i, 3)
        P = (1 - pa - qa) / C + (pa / t if ra == 0 else 0) + (qa / r if ra == 1 else 0)
        Q = (1 - pb - qb) / C + (pb / t2 if rb == 0 else 0) + (qb / r2 if rb == 1 else 0)
        total += cnt * max(Fraction(0), P - E * Q)
    return total


def certify_top2(params: Top2Params, table) -> MulticlassCertificate:
    """Check (TT-2) for every ordered neighbouring histogram type of (K, C, G)."""
    t0 = time.perf_counter()
    x = validate_table(params, table)
    E = math.exp(params.epsilon)
    types = pair_types(params.K, params.C, params.cap)
    ta = type_arrays(types, params.C, params.cap)
    hs = hockey_sticks(ta, x, params.K, params.C, params.cap, E)
    eta = 32.0 * (params.C + 9) * (E + 1.0) * 2.0**-53
    near = params.delta - max(eta, NEAR_TIGHT)
    i = int(np.argmax(hs)) if hs.size else 0
    max_hs = float(hs.max()) if hs.size else 0.0
    worst = [int(v) for v in types[i]] if hs.size else []
    certified, reason, exact_n = True, "", 0
    if max_hs > params.delta + eta:
        certified, reason = False, f"type {worst} exceeds delta by {max_hs - params.delta:.3g}"
    else:
        E_lo, d = exp_lower(params.epsilon), Fraction(params.delta)
        best: tuple[Fraction, list[int]] | None = None
        for j in np.flatnonzero(hs > near):
            v = exact_hockey_stick(types[j], x, params, E_lo)
            exact_n += 1
            if best is None or v > best[0]:
                best = (v, [int(u) for u in types[j]])
            if v > d:
                certified, reason = False, f"type {[int(u) for u in types[j]]} exceeds delta (exact re-check)"
        if best is not None:
            max_hs, worst = float(best[0]), best[1]
    return MulticlassCertificate(
        certified=certified, max_hockey_stick=max_hs, delta=params.delta, types_checked=int(len(types)),
        worst_type=worst, error_bound=eta, exact_checked=exact_n, seconds=time.perf_counter() - t0, reason=reason)
