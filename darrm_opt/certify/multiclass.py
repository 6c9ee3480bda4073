"""Certificates for multi-class DaRRM tables (PATE setting): every neighbouring histogram type checked.

The table γ(0..K) is (ε, δ)-DP for disjoint non-private teachers iff (MC-2) of
:mod:`darrm_opt.model.multiclass` holds for every neighbouring pair, in both orders. The pair's output
laws depend only on its type (g, t, g′, t′, k), and :func:`~darrm_opt.model.multiclass.pair_types` lists
every type that occurs for (K, C) (checked against brute force over all histograms in the tests). Each
type's hockey-stick divergence Σ_grp n_grp·max(0, P_grp − e^ε P′_grp) is computed in float64; a type
within the float error bound η of δ is re-computed in exact rational arithmetic from the binary values
of γ and δ, with e^ε replaced by a rational lower bound (the divergence is non-increasing in e^ε, so
this over-estimates it), and passes only if that exact value is ≤ δ.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from fractions import Fraction

import mpmath
import numpy as np

from darrm_opt.certify.certificate import validate_gamma
from darrm_opt.certify.verdict import VerdictFields
from darrm_opt.model.multiclass import MulticlassParams, PairType, pair_types, type_hockey_sticks

#: Below this distance from δ a type is always re-checked exactly.
NEAR_TIGHT = 1e-12


@dataclass(frozen=True)
class MulticlassCertificate(VerdictFields):
    """The outcome of checking every neighbouring histogram type of a multi-class table."""

    verdict_fields = ("delta", "max_hockey_stick", "types_checked", "worst_type")
    what = "neighbouring histogram types"

    certified: bool
    max_hockey_stick: float
    delta: float
    types_checked: int
    worst_type: list[int]
    error_bound: float
    exact_checked: int
    seconds: float
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def exp_lower(epsilon: float) -> Fraction:
    """A rational lower bound of e^ε: mpmath's 256-bit value (error < 2^-250 relative) shrunk by 2^-240."""
    with mpmath.workprec(256):
        v = mpmath.exp(mpmath.mpf(epsilon))
        m, e = mpmath.frexp(v)
        num = int(mpmath.floor(mpmath.ldexp(m, 256)))
    lo = Fraction(num, 1 << 256) * (Fraction(2) ** int(e))
    return lo * (1 - Fraction(1, 1 << 240))


def exact_hockey_stick(pt: PairType, gamma, C: int, E: Fraction) -> Fraction:
    """(MC-2)'s left side for one ordered type in exact rationals."""
    n, inT, inT2 = pt.groups(C)
    g1, g2 = Fraction(float(gamma[pt.g])), Fraction(float(gamma[pt.g2]))
    total = Fraction(0)
    for cnt, a, b in zip(n.tolist(), inT.tolist(), inT2.tolist()):
        if cnt <= 0:
            continue
        P = (1 - g1) / C + (g1 / pt.t if a else 0)
        Q = (1 - g2) / C + (g2 / pt.t2 if b else 0)
        total += cnt * max(Fraction(0), P - E * Q)
    return total



def certify_multiclass(params: MulticlassParams, gamma) -> MulticlassCertificate:
    """Check (MC-2) for every neighbouring histogram type of (K, C), both orders (float sweep with an
    error bound, exact rational re-check near δ)."""
    t0 = time.perf_counter()
    K, C = params.K, params.C
    g = validate_gamma(gamma, K)
    E = math.exp(params.epsilon)
    types = pair_types(K, C)
    hs = type_hockey_sticks(types, g, C, E)
    # each group term is a few roundings of values ≤ E + 1, times n ≤ C, summed over four groups
    eta = 32.0 * (C + 4) * (E + 1.0) * 2.0**-53
    near = params.delta - max(eta, NEAR_TIGHT)
    worst_i, worst_j = np.unravel_index(int(np.argmax(hs)), hs.shape) if hs.size else (0, 0)
    max_hs = float(hs.max()) if hs.size else 0.0
    worst: PairType | None = types[worst_i] if types else None
    if worst is not None and worst_j == 1:
        worst = worst.reversed()
    certified, reason, exact_n = True, "", 0
    if max_hs > params.delta + eta:
        certified, reason = False, f"type {list(worst or ())} exceeds delta by {max_hs - params.delta:.3g}"
    else:
        E_lo = exp_lower(params.epsilon)
        d = Fraction(params.delta)
        best = None
        for i, j in zip(*np.nonzero(hs > near)):
            pt = types[i] if j == 0 else types[i].reversed()
            v = exact_hockey_stick(pt, g, C, E_lo)
            exact_n += 1
            if best is None or v > best[0]:
                best = (v, pt)
            if v > d:
                certified, reason = False, f"type {list(pt)} exceeds delta (exact re-check)"
        if best is not None:
            max_hs, worst = float(best[0]), best[1]
    return MulticlassCertificate(
        certified=certified, max_hockey_stick=max_hs, delta=params.delta, types_checked=2 * len(types),
        worst_type=[int(x) for x in (worst or ())], error_bound=eta, exact_checked=exact_n,
        seconds=time.perf_counter() - t0, reason=reason)


def round_down_certified(params: MulticlassParams, gamma, decimals: int) -> tuple[list[float], MulticlassCertificate]:
    """``gamma`` written with ``decimals`` decimals, safely: scaled by λ = 1 − 4(1 + e^ε)·10^{−d}/ρ first
    (ρ = δ + (e^ε − 1)/C, the smallest right-hand side of the linearised rows, so every row gains a margin
    (1 − λ)ρ, more than the ≤ 2(1 + e^ε)·10^{−d} that rounding each value down can add), then rounded down
    and certified. The certificate is of the written values."""
    g = validate_gamma(gamma, params.K)
    E = math.exp(params.epsilon)
    rho = params.delta + (E - 1.0) / params.C
    lam = max(0.0, 1.0 - 4.0 * (1.0 + E) * 10.0**-decimals / rho)
    q = 10.0**decimals
    shown = [math.floor(float(x) * lam * q) / q for x in g]
    return shown, certify_multiclass(params, shown)
