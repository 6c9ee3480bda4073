"""The exact re-check behind every certificate: the sign of each near-tight excess, proven by interval arithmetic.

A multiset whose float64 cost lies within the sweep's error bound of the limit e^{mε} − 1 + 2δ is decided
here: its cost f(n) = Σ_l s_l γ(l) (α_l(n) − e^{mε} α′_l(n)) (Lemma 3.4) is recomputed by direct convolution
of Bernoulli pmfs from the exact binary values of γ, ε, Δ, m and δ. The verdict is decided in the
equivalent form Pr[out = 1 | p] − e^{mε} Pr[out = 1 | p′] ≤ δ (f = 2(Pr₁ − e^{mε} Pr′₁) + e^{mε} − 1), where a
structurally tight multiset (γ(l) = 1 beside outcomes of probability 0) gives an exact 0 rather than a
difference of two rounded copies of e^{mε} − 1.

The verdict is rigorous: :func:`excess_intervals` encloses x₁ (and x₀) in intervals computed with
``mpmath.iv`` (every +, −, ×, ÷ rounded outwards; e^{mε} and e^ε widened by a relative 2^{−(prec−8)} on top
of mpmath's outward-rounded exp, so the enclosure holds even if exp were off by 2^8 ulps). A multiset
passes only when the upper end of its interval is ≤ 0 and fails when the lower end is > 0; an interval
that straddles 0 is recomputed at :data:`DIGITS_LADDER` digits, and a multiset still undecided at the last
rung is refused ("cannot be proven") unless certify/ties.py proves its excess identically 0 as a
rational polynomial in e^{ε/s} (an exact tie, accepted: equality satisfies ≤). Probabilities that are
structurally 0 or 1 stay degenerate intervals [0, 0] / [1, 1] (0·[a, b] = [0, 0]), so the structural ties
keep their exact excess [0, 0] and pass at 40 digits. A tie that is not structural (γ ≡ 1 at K = 3, m = 2
in pure DP: a rational identity in e^ε) straddles 0 at every precision and is accepted by that algebraic
identity, whatever ε.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import mpmath
import numpy as np
from mpmath import iv

from darrm_opt.certify.sweep import signed_h
from darrm_opt.certify.ties import is_exact_tie
from darrm_opt.model.params import Params

#: Decimal digits of the exact re-check (the first rung of the interval ladder).
MP_DIGITS = 40
#: Precisions (decimal digits) at which a straddling excess interval is recomputed before it is refused.
DIGITS_LADDER = (40, 80, 160, 320)


@dataclass(frozen=True)
class Recheck:
    """The verdict of the exact re-check over a set of near-tight multisets."""

    certified: bool
    reason: str
    max_cost: float
    worst: tuple[int, ...]
    checked: int


def exact_bound_mp(params: Params) -> mpmath.mpf:
    with mpmath.workdps(MP_DIGITS):
        return mpmath.expm1(mpmath.mpf(params.m) * mpmath.mpf(params.epsilon)) + 2 * mpmath.mpf(params.delta)


_RANK = {"pass": 0, "tie": 0, "undecided": 1, "fail": 2}


def recheck(params: Params, gamma: np.ndarray, multisets, two_sided: bool) -> Recheck:
    """Decide every multiset of ``multisets`` (count vectors) by :func:`decide`; for a non-symmetric γ both
    f and −f (the output-0 condition) must be ≤ the bound. Certified iff every multiset passes (or is an
    exact tie). ``worst`` is a proven violation if there is one, else an undecided multiset, else the one
    with the largest upper end of its excess; the reported cost is f = bound + 2·excess at the midpoint of
    that multiset's enclosure."""
    best: Decision | None = None
    worst: tuple[int, ...] = ()
    for cnt in multisets:
        d = decide(params, gamma, cnt, two_sided)
        if best is None or (_RANK[d.verdict], d.hi) > (_RANK[best.verdict], best.hi):
            best, worst = d, tuple(int(c) for c in cnt)
    if best is None:
        return Recheck(True, "", float("-inf"), worst, len(multisets))
    reason = ""
    if best.verdict == "fail":
        reason = f"multiset {list(worst)} exceeds the bound (proven by interval arithmetic)"
    elif best.verdict == "undecided":
        reason = (f"multiset {list(worst)} meets the bound to within {mpmath.nstr(max(-best.lo, best.hi), 3)} "
                  f"at {best.digits} digits and is not an exact tie: whether it exceeds it cannot be proven")
    with mpmath.workdps(MP_DIGITS):
        max_cost = float(exact_bound_mp(params) + (best.lo + best.hi))
    return Recheck(not reason, reason, max_cost, worst, len(multisets))


@contextmanager
def interval_dps(dps: int) -> Iterator[None]:
    """``mpmath.iv`` at ``dps`` decimal digits for the block (its precision is a global of that context)."""
    saved = iv.prec
    iv.dps = dps
    try:
        yield
    finally:
        iv.prec = saved


def exp_interval(x):
    """An interval that contains e^x for every x in the interval ``x``: mpmath.iv's exp, widened by the
    relative 2^{−(prec−8)} (module docstring); call inside :func:`interval_dps`."""
    t = mpmath.mpf(2) ** (8 - iv.prec)
    return iv.exp(x) * iv.mpf([1 - t, 1 + t])


def _corners_iv(params: Params) -> list:
    """The vertices (corners.py) as intervals from the exact binary ε and Δ; the exact 0 and 1 stay Python
    ints, so that :func:`_add_teachers` handles them by an exact shift."""
    d = params.teacher_delta
    e = exp_interval(iv.mpf(params.epsilon))
    if d == 0:
        pairs = [(0, 0), (e / (e + 1), 1 / (e + 1)), (1, 1), (1 / (e + 1), e / (e + 1))]
    else:
        D = iv.mpf(d)
        hi, lo = (e + D) / (e + 1), (1 - D) / (e + 1)
        pairs = [(0, 0), (0, D), (D, 0), (hi, lo), (1, 1), (1, 1 - D), (1 - D, 1), (lo, hi)]
    return [(p if isinstance(p, int) else iv.mpf(p), q if isinstance(q, int) else iv.mpf(q)) for p, q in pairs]


def _add_teachers(v: list, p, n: int) -> list:
    """The pmf of L + B₁ + … + B_n, B_i ~ Bernoulli(p), from the pmf v of L (intervals): a shift by n
    (p = 1) or n trailing zeros (p = 0), exact, else n convolutions in interval arithmetic."""
    if isinstance(p, int):
        zeros = [iv.mpf(0)] * n
        return zeros + v if p == 1 else v + zeros
    q = 1 - p
    for _ in range(n):
        out = [q * x for x in v] + [iv.mpf(0)]
        for i, x in enumerate(v):
            out[i + 1] += p * x
        v = out
    return v


def output_intervals(params: Params, gamma: np.ndarray, counts) -> list:
    """Intervals that provably contain (Pr[out = o | p], Pr[out = o | p′]) for o = 1 and o = 0, with
    Pr[out = 1 | p] = Σ_l (1 + h_l)/2 · α_l(n) (Lemma 3.4), α the pmf of L under the multiset's p's (direct
    convolution), in outward-rounded interval arithmetic at the precision of the enclosing
    :func:`interval_dps`. A term of weight 0 is left out, so an output that is structurally impossible has
    probability exactly [0, 0]."""
    h = signed_h(gamma)
    a, b = [iv.mpf(1)], [iv.mpf(1)]
    for n, (p, q) in zip(counts, _corners_iv(params)):
        a, b = _add_teachers(a, p, int(n)), _add_teachers(b, q, int(n))
    out = []
    for sign in (1, -1):
        keep = [l for l, x in enumerate(h) if 1 + sign * float(x) != 0]  # weight 0: no term at all
        w = {l: (1 + sign * iv.mpf(float(h[l]))) / 2 for l in keep}
        pa = sum((w[l] * a[l] for l in keep), iv.mpf(0))
        pb = sum((w[l] * b[l] for l in keep), iv.mpf(0))
        out.append((pa, pb))
    return out


def excess_intervals(params: Params, gamma: np.ndarray, counts, dps: int) -> tuple:
    """Intervals that provably contain (x₁, x₀), x_o = Pr[out = o | p] − e^{mε} Pr[out = o | p′] − δ
    (Lemma 3.4 in the form f = 2x₁ + bound), from :func:`output_intervals` at ``dps`` digits."""
    with interval_dps(dps):
        E = exp_interval(iv.mpf(params.m) * iv.mpf(params.epsilon))
        delta = iv.mpf(params.delta)
        (a1, b1), (a0, b0) = output_intervals(params, gamma, counts)
        return a1 - E * b1 - delta, a0 - E * b0 - delta


def interval_ends(x) -> tuple[mpmath.mpf, mpmath.mpf]:
    """The two ends of an ``mpmath.iv`` interval as mpf's, exact (not rounded to mpmath.mp's precision)."""
    lo, hi = x._mpi_
    return mpmath.mp.make_mpf(lo), mpmath.mp.make_mpf(hi)


@dataclass(frozen=True)
class Decision:
    """The proven sign of one multiset's excess: ``verdict`` is "pass" (upper end ≤ 0), "fail" (lower end
    > 0), "tie" (straddles 0 at every rung, but proven exactly 0 algebraically: a pass) or "undecided"
    (straddles 0 at every rung, not an exact tie: refused); ``lo``, ``hi`` the final enclosure of the larger
    excess (max over the sides checked; [0, 0] for a tie), ``digits`` the last precision used."""

    verdict: str
    lo: mpmath.mpf
    hi: mpmath.mpf
    digits: int


def decide(params: Params, gamma: np.ndarray, counts, two_sided: bool) -> Decision:
    """Climb :data:`DIGITS_LADDER` until the excess of ``counts`` (x₁, and x₀ when ``two_sided``) is proven
    ≤ 0 or > 0: pass iff max(hi) ≤ 0, fail iff max(lo) > 0 (one side proven over the bound). Still straddling
    at the last rung: "tie" (a pass, excess exactly 0) when every straddling side's excess polynomial is
    identically zero (certify/ties.py), else "undecided"."""
    for dps in DIGITS_LADDER:
        x1, x0 = excess_intervals(params, gamma, counts, dps)
        ends = [interval_ends(x) for x in ((x1, x0) if two_sided else (x1,))]
        lo = max(e[0] for e in ends)
        hi = max(e[1] for e in ends)
        if hi <= 0:
            return Decision("pass", lo, hi, dps)
        if lo > 0:
            return Decision("fail", lo, hi, dps)
    if all(e[1] <= 0 or is_exact_tie(params, gamma, counts, side) for e, side in zip(ends, (1, -1))):
        return Decision("tie", mpmath.mpf(0), mpmath.mpf(0), DIGITS_LADDER[-1])
    return Decision("undecided", lo, hi, DIGITS_LADDER[-1])
