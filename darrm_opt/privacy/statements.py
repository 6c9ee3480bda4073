"""What a stored privacy profile claims, and the proof of each claim (``darrm-opt verify``).

A :class:`~darrm_opt.privacy.profile.PrivacyProfile` read from a file makes finitely many statements about the
true hockey-stick curve D(x) = sup over neighbouring pairs and events S of Pr_D[S] − x Pr_D′[S] (x = e^{ε′};
the support function of the event points (b, a) = (Pr_D′[S], Pr_D[S]), darrm_opt.privacy.profile):

1. every support statement (ε_j, δ_j) says D(e^{ε_j}) ≤ δ_j (``delta`` reads them back);
2. its envelope is the least concave majorant S̃ of its vertices; ``delta`` (max_v a_v − e^{ε′} b_v) and the
   dominating pair (whose hockey stick is at least that) are valid iff S̃ ≥ the true tradeoff curve
   T(b) = min_{x ≥ 0} (D(x) + x b) on [0, 1]. S̃ is the minimum of its edge lines a = c_k + X_k b, so this holds
   iff every edge says the truth: D(X_k) ≤ c_k (X_k, c_k exact rationals from the stored floats);
3. a stored vertex strictly below S̃ (the stored polyline is not concave there) must still lie on or above T:
   it is accepted when D(X) ≤ a_v − X b_v at the slope X of the edge of S̃ above it.

Edges of slope X < 1 are decided in the mirrored form D(1/X) ≤ (c − 1 + X)/X: the event points are closed
under (b, a) → (1 − a, 1 − b) (the other order of D, D′ and the complementary event), whence
D(x) = 1 − x + x D(1/x) for x > 0; an edge of slope 0 holds iff c ≥ 1 (D(0) = 1, the event S = everything).

Every statement is decided *without tolerance*: it passes when an upper bound of the truth is proven ≤ the
stored value, fails when a lower bound is proven > it, and is refused (undecided) when neither can be proven.

- Pair families (binary PATE setting, multi-class tables, darrm_opt.privacy.pair_profile): D(X) at a rational X
  is a finite sum of rationals, computed exactly (``divergence_at``). At X = e^{ε_j} rational bounds
  X_lo ≤ e^{ε_j} ≤ X_hi at 256, 1024 and 4096 bits are used (D is non-increasing: D(X_lo) ≤ δ_j proves the
  statement, D(X_hi) > δ_j refutes it).
- Shared-data tables: D(x) = max(0, max over corner multisets n and outputs o of a − x b) for x ≥ 1 (Lemma 3.4,
  5.1). For each statement D(X) ≤ c with X ∈ [X_lo, X_hi], x̃ ≤ X_lo a float: a multi-slope sweep gives the float
  maximum M̃ of F_x̃ = 2(a − x̃ b) − 1 + x̃ over every (n, o) with error ≤ η(x̃)
  (darrm_opt.certify.sweep.error_bound); M̃ + η(x̃) ≤ 2c − 1 + x̃ proves the statement (D is non-increasing).
  Otherwise a sweep at x̃ keeps every multiset whose float cost exceeds 2c − 1 + x̃ − η(x̃) (the others are
  proven below c), their points are bounded by direct convolution with a relative error bound
  (darrm_opt.certify.direct), and a point still within that bound of c is decided in outward-rounded interval
  arithmetic at 40 to 320 digits (darrm_opt.certify.exact). A support statement at ε_j ≥ mε with δ_j ≥ δ of a
  certified table holds by the certificate (D non-increasing), exact ties included.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import mpmath
import numpy as np
from mpmath import iv

from darrm_opt.privacy.pair_family import PairFamily, divergence_at

if TYPE_CHECKING:  # pragma: no cover
    from darrm_opt.certify.certificate import Certificate
    from darrm_opt.model.params import Params
    from darrm_opt.privacy.profile import PrivacyProfile

#: support statements at ε′ above this are proven at this ε′ (D is non-increasing: pessimistic)
MAX_STATEMENT_EPS = 700.0
#: above this ε′ a support statement is refuted only by an event of probability exactly 0 under D′
MAX_REFUTE_EPS = 1e6
#: precisions (bits) of the rational bounds of e^{ε′} for pair families
EXP_BITS = (256, 1024, 4096)
#: at most this many multisets are examined per statement of a shared-data table; more: undecided
NEAR_CAP = 20_000
#: at most this many (multiset, output) points per statement go to interval arithmetic; more: undecided
INTERVAL_CAP = 2_000
#: float sweeps of a shared-data table run at slopes up to this (a statement at a steeper slope is examined
#: at this one, which is pessimistic)
SWEEP_SLOPE_CAP = 2.0**64


@dataclass(frozen=True)
class Statement:
    """The claim D(X) ≤ c: X = e^{eps} (a support statement) or the exact rational ``x`` ≥ 1, or x = 0 (then it
    says 1 ≤ c). ``what`` names it in messages. ``vertex``: a stored vertex (b, a) below the envelope, which
    claims T(b) ≤ a; D(x) ≤ c is then a sufficient condition only (its failure proves nothing)."""

    what: str
    c: Fraction
    eps: float | None = None
    x: Fraction | None = None
    vertex: tuple[Fraction, Fraction] | None = None

    def slope_bounds(self, bits: int = 256) -> tuple[Fraction, Fraction | None]:
        """Rationals X_lo ≤ X ≤ X_hi (X_hi None: unbounded). For ε > MAX_STATEMENT_EPS, X_lo is e^700's bound
        (D is non-increasing, so proving D(X_lo) ≤ c proves the statement)."""
        if self.x is not None:
            return self.x, self.x
        assert self.eps is not None
        if self.eps == 0:
            return Fraction(1), Fraction(1)
        lo = exp_bounds(min(self.eps, MAX_STATEMENT_EPS), bits)[0]
        hi = exp_bounds(self.eps, bits)[1] if self.eps <= MAX_REFUTE_EPS else None
        return lo, hi


@dataclass(frozen=True)
class ProfileCheck:
    """The verdict on a stored profile: "valid" (every statement proven), "optimistic" (one proven false:
    ``statement``, ``detail``) or "undecided" (one could be proven neither way, none false)."""

    verdict: str
    statements: int
    statement: str = ""
    detail: str = ""

    @property
    def valid(self) -> bool:
        return self.verdict == "valid"

    def to_dict(self) -> dict:
        return asdict(self)

    def message(self) -> str:
        if self.verdict == "optimistic":
            return (f"the stored privacy_profile is optimistic: its {self.statement} is below the true privacy "
                    f"profile of this γ ({self.detail})")
        if self.verdict == "undecided":
            return (f"the stored privacy_profile cannot be proven: its {self.statement} could be proven neither "
                    f"at nor below the true privacy profile of this γ ({self.detail})")
        return f"every one of the stored privacy_profile's {self.statements} statements is proven"


def exp_bounds(eps: float, bits: int) -> tuple[Fraction, Fraction]:
    """Rationals lo ≤ e^{eps} ≤ hi, relative width about 2^{16 − bits}: mpmath's value at bits + 32 bits (error
    below 2^{−bits−30} relative) widened by 2^{16 − bits} each way."""
    if eps == 0:
        return Fraction(1), Fraction(1)
    with mpmath.workprec(bits + 32):
        m, e = mpmath.frexp(mpmath.exp(mpmath.mpf(eps)))
        num = int(mpmath.floor(mpmath.ldexp(m, bits + 16)))
    base = Fraction(num, 1 << (bits + 16)) * Fraction(2) ** int(e)
    widen = Fraction(1, 1 << (bits - 16))
    return base * (1 - widen), (base + Fraction(2) ** int(e) / (1 << (bits + 16))) * (1 + widen)


_FLOAT_MAX = Fraction(np.finfo(np.float64).max)


def _float_down(v: Fraction) -> float:
    """The largest float ≤ v (the largest finite float beyond the range)."""
    if abs(v) > _FLOAT_MAX:
        return float(np.finfo(np.float64).max) if v > 0 else -math.inf
    f = float(v)
    return math.nextafter(f, -math.inf) if Fraction(f) > v else f


def _float_up(v: Fraction) -> float:
    """The smallest float ≥ v (∞ beyond the range)."""
    if abs(v) > _FLOAT_MAX:
        return math.inf if v > 0 else -float(np.finfo(np.float64).max)
    f = float(v)
    return math.nextafter(f, math.inf) if Fraction(f) < v else f


def _slope_statement(what: str, X: Fraction, c: Fraction,
                     vertex: tuple[Fraction, Fraction] | None = None) -> Statement:
    """D(X) ≤ c as a statement at a slope ≥ 1 (module docstring: the mirror for X < 1, slope 0)."""
    if X >= 1:
        return Statement(what, c, x=X, vertex=vertex)
    if X == 0:
        return Statement(what, c, x=Fraction(0), vertex=vertex)
    return Statement(what, (c - 1 + X) / X, x=1 / X, vertex=vertex)


def _pt(b: Fraction, a: Fraction) -> str:
    return f"({float(b)!r}, {float(a)!r})"


def profile_statements(profile: PrivacyProfile) -> tuple[list[Statement], str | None]:
    """The statements of ``profile`` (module docstring), and the first malformed support statement, if any (a
    negative or NaN ε′, or a δ that is not a finite number ≥ 0: it would bound δ(ε′) wrongly or not at all)."""
    from darrm_opt.privacy.profile import check_vertices

    check_vertices(profile.vertices)
    out: list[Statement] = []
    for e, d in profile.support:
        what = f"statement (ε′ = {e!r}, δ = {d!r})"
        if not (e >= 0 and math.isfinite(d) and d >= 0):  # NaN fails every comparison
            return out, what
        out.append(Statement(what, Fraction(d), eps=float(e)))
    V = [(Fraction(b), Fraction(a)) for b, a in profile.vertices]
    hull: list[tuple[Fraction, Fraction]] = []
    for p in V:  # b strictly increasing (PrivacyProfile.from_dict); exact upper hull, collinear points dropped
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) >= 0:
            hull.pop()
        hull.append(p)
    edges = list(zip(hull, hull[1:]))
    for (b1, a1), (b2, a2) in edges:
        X = (a2 - a1) / (b2 - b1)
        out.append(_slope_statement(f"envelope edge {_pt(b1, a1)}–{_pt(b2, a2)}", X, a1 - X * b1))
    on_hull = set(hull)
    for b, a in V:
        if (b, a) in on_hull:
            continue
        (b1, a1), (b2, a2) = next(e for e in edges if e[0][0] < b < e[1][0])
        X = (a2 - a1) / (b2 - b1)
        out.append(_slope_statement(f"vertex {_pt(b, a)}", X, a - X * b, (b, a)))
    return out, None


def _cross(o, a, b) -> Fraction:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _run(statements: list[Statement], decide: Callable[[int, Statement], tuple[str, str]]) -> ProfileCheck:
    """Decide the statements in turn: the first proven false ends it; otherwise the first undecided is reported."""
    undecided: tuple[str, str] | None = None
    for i, st in enumerate(statements):
        verdict, detail = decide(i, st)
        if verdict == "fail":
            return ProfileCheck("optimistic", len(statements), st.what, detail)
        if verdict == "undecided" and undecided is None:
            undecided = (st.what, detail)
    if undecided is not None:
        return ProfileCheck("undecided", len(statements), *undecided)
    return ProfileCheck("valid", len(statements))


def _sufficient(st: Statement, verdict: tuple[str, str]) -> tuple[str, str]:
    """The verdict of D(x) ≤ c for ``st``; for a vertex below the envelope that is a sufficient condition only,
    so its failure leaves the vertex undecided."""
    if st.vertex is None or verdict[0] != "fail":
        return verdict
    return "undecided", (f"it lies below the envelope, and the true profile rises above the line through it at "
                         f"the slope of the envelope there: {verdict[1]}")


def _prepare(profile: PrivacyProfile) -> tuple[list[Statement], ProfileCheck | None]:
    statements, bad = profile_statements(profile)
    if bad is not None:
        return statements, ProfileCheck("optimistic", len(statements) + 1, bad,
                                        "a statement at a negative or NaN ε′, or with a δ that is not a number ≥ 0")
    return statements, None


# ---------------------------------------------------------------------------------------------------------
# Pair families: exact rationals
# ---------------------------------------------------------------------------------------------------------
#: beyond this slope every pair family's D is constant (every positive output probability is ≥ 2^-1174)
FAMILY_FLAT = Fraction(2) ** 2000


def family_divergence(family: PairFamily, X: Fraction) -> Fraction:
    """D(X) = max_i Σ_j n_ij max(0, P_ij − X Q_ij) exactly (darrm_opt.privacy.pair_family)."""
    if X <= Fraction(2) ** 1000:
        return divergence_at(family, X)
    return max((family.exact(i, X) for i in range(family.n.shape[0])), default=Fraction(0))


def family_tradeoff(family: PairFamily) -> Callable[[Fraction], Fraction]:
    """b ↦ T(b), the exact upper concave hull of the family's event points (b, a) = (Q(S), P(S)) (every pair,
    every union S of groups) at b ∈ [0, 1]; needs ``family.laws``."""
    assert family.laws is not None
    pts = {(Fraction(0), Fraction(0)), (Fraction(1), Fraction(1))}
    for i in range(family.n.shape[0]):
        P, Q = family.laws(i)
        n = [int(x) for x in family.n[i]]
        G = len(n)
        for mask in range(1, 1 << G):
            pts.add((sum((n[j] * Q[j] for j in range(G) if mask >> j & 1), Fraction(0)),
                     sum((n[j] * P[j] for j in range(G) if mask >> j & 1), Fraction(0))))
    hull: list[tuple[Fraction, Fraction]] = []
    for p in sorted(pts):
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) >= 0:
            hull.pop()
        hull.append(p)
    while len(hull) >= 2 and hull[1][0] == hull[0][0]:  # several points at b = 0: the highest one
        hull.pop(0)

    def T(b: Fraction) -> Fraction:
        for (b1, a1), (b2, a2) in zip(hull, hull[1:]):
            if b1 <= b <= b2:
                return a1 + (a2 - a1) * (b - b1) / (b2 - b1)
        return hull[0][1] if b <= hull[0][0] else Fraction(1)

    return T


def decide_family(family: PairFamily, st: Statement, tradeoff=None) -> tuple[str, str]:
    if st.vertex is not None and tradeoff is not None:
        b, a = st.vertex
        t = tradeoff(b)
        return ("pass", "") if t <= a else ("fail", f"the true tradeoff there is T(b) = {float(t)!r}, exactly")
    return _sufficient(st, _decide_slope(family, st))


def _decide_slope(family: PairFamily, st: Statement) -> tuple[str, str]:
    if st.c >= 1:
        return "pass", ""
    if st.x is not None:
        if st.x == 0:
            return "fail", "D(0) = 1"
        v = family_divergence(family, st.x)
        return ("pass", "") if v <= st.c else ("fail", f"the exact value there is {float(v)!r}")
    assert st.eps is not None
    for bits in EXP_BITS:
        lo, _ = st.slope_bounds(bits)
        hi = FAMILY_FLAT if st.eps >= 1387 else exp_bounds(st.eps, bits)[1]  # e^1387 > 2^2000: D(e^ε) = D(2^2000)
        if family_divergence(family, lo) <= st.c:
            return "pass", ""
        v = family_divergence(family, hi)
        if v > st.c:
            return "fail", f"δ(ε′) ≥ {float(v)!r}, exact at a rational bound of e^ε′"
    return "undecided", "δ(ε′) is within 2^-4080 of the statement, relative"


def check_family_profile(family: PairFamily, profile: PrivacyProfile) -> ProfileCheck:
    """The verdict on a stored profile of a pair family (module docstring), in exact arithmetic."""
    statements, bad = _prepare(profile)
    if bad is not None:
        return bad
    tradeoff = family_tradeoff(family) if family.laws is not None and any(s.vertex for s in statements) else None
    return _run(statements, lambda _i, st: decide_family(family, st, tradeoff))


# ---------------------------------------------------------------------------------------------------------
# Shared-data tables: sweeps, direct convolution, interval arithmetic
# ---------------------------------------------------------------------------------------------------------
class _SharedDecider:
    """Decides statements about one shared-data γ table (module docstring)."""

    def __init__(self, params: Params, gamma: np.ndarray, cert: Certificate | None, workers, executor) -> None:
        from darrm_opt.certify.certificate import is_symmetric
        from darrm_opt.certify.sweep import signed_h
        from darrm_opt.model.corners import corners

        self.params, self.gamma, self.cert = params, gamma, cert
        self.h = signed_h(gamma)
        self.hmax = float(np.abs(self.h).max()) if self.h.size else 0.0
        self.C = corners(params)
        self.two_sided = not is_symmetric(gamma)
        self.workers, self.executor = workers, executor
        self.me = Fraction(params.m) * Fraction(params.epsilon)

    def slope(self, st: Statement) -> float:
        """x̃: a float ≤ X_lo (and ≤ SWEEP_SLOPE_CAP), ≥ 1."""
        lo, _ = st.slope_bounds()
        return max(1.0, min(_float_down(lo), SWEEP_SLOPE_CAP))

    def eta(self, x: float) -> Fraction:
        from darrm_opt.certify.sweep import error_bound

        return Fraction(error_bound(self.params.K, x, self.hmax))

    def maxima(self, xs: list[float]) -> list[float]:
        """The float maximum over every multiset and output of F_x = Σ_l h_l (α_l − x α′_l) (and −F_x) at each x,
        within error_bound(K, x, max|h|) of the exact one."""
        from darrm_opt.certify.problems import make_problem
        from darrm_opt.certify.slopes import front_applies, slope_front, sweep_slopes
        from darrm_opt.certify.sweep import sweep

        if not xs:
            return []
        if self.executor is not None:
            out = []
            for x in xs:
                r = sweep(make_problem(self.C, self.h, x), two_sided=self.two_sided, executor=self.executor)
                out.append(max(r.max_cost, -r.min_cost) if self.two_sided else r.max_cost)
            return out
        problem = make_problem(self.C, self.h, 1.0)
        res = (slope_front(problem, self.workers, self.two_sided).evaluate(xs) if front_applies(problem, xs)
               else sweep_slopes(problem, xs, workers=self.workers, two_sided=self.two_sided))
        best = np.maximum(res.best, res.best_neg) if self.two_sided else res.best
        return [float(v) for v in best]

    def quick(self, st: Statement) -> tuple[str, str] | None:
        """(verdict, detail) when the statement is decided without a sweep, else None."""
        if st.c >= 1:
            return "pass", ""
        if st.c < 0:
            return "fail", "δ(ε′) ≥ 0 (the empty event)"
        if st.x == 0:
            return "fail", "D(0) = 1 (the event of every output)"
        cert, eps, delta = self.cert, st.eps, Fraction(float(self.params.delta or 0.0))
        if (eps is not None and cert is not None and cert.certified
                and (math.isinf(eps) or Fraction(eps) >= self.me) and st.c >= delta):
            return "pass", ""  # the certificate proves D(e^{mε}) ≤ δ (exact ties included); D is non-increasing
        return None

    def by_float(self, st: Statement, x: float, M: float) -> bool:
        """M + η(x) ≤ 2c − 1 + x: every (n, o) has a − x b ≤ c, so D(X) ≤ D(x) ≤ c."""
        return math.isfinite(M) and Fraction(M) + self.eta(x) <= 2 * st.c - 1 + Fraction(x)

    def by_points(self, st: Statement, x: float) -> tuple[str, str]:
        """The near band at x (module docstring): direct convolution, then interval arithmetic."""
        from darrm_opt.certify.direct import MAX_SLOPE, event_points
        from darrm_opt.certify.problems import make_problem
        from darrm_opt.certify.sweep import sweep

        level = _float_down(2 * st.c - 1 + Fraction(x) - self.eta(x))
        res = sweep(make_problem(self.C, self.h, x), near=level, near_cap=NEAR_CAP, two_sided=self.two_sided,
                    workers=self.workers, executor=self.executor)
        rows = np.unique(np.asarray(res.near, dtype=np.int64), axis=0) if res.near.size else np.zeros((0, 0))
        undecided = ""
        if rows.shape[0]:
            lo_X, hi_X = st.slope_bounds()
            ev = event_points(self.params, self.gamma, rows)
            up = ev.upper(min(_float_down(lo_X), MAX_SLOPE))
            low = ev.lower(math.inf if hi_X is None else _float_up(hi_X))
            c_dn, c_up = _float_down(st.c), _float_up(st.c)
            bad = np.argwhere(low > c_up)
            if bad.size:
                i, o = bad[0]
                return "fail", (f"multiset {rows[i].tolist()}, output {1 - o}: Pr_D − e^ε′·Pr_D′ ≥ "
                                f"{float(low[i, o])!r}, proven by direct convolution")
            todo = np.argwhere(~(up <= c_dn))
            if todo.shape[0] > INTERVAL_CAP:
                undecided = f"{todo.shape[0]} points within the float error of the statement"
            else:
                for i, o in todo:
                    verdict, detail = self.by_intervals(st, rows[i], int(o))
                    if verdict == "fail":
                        return verdict, detail
                    if verdict == "undecided" and not undecided:
                        undecided = detail
        if res.near_overflow:
            return "undecided", f"more than {NEAR_CAP} multisets within the float error of the statement"
        return ("undecided", undecided) if undecided else ("pass", "")

    def by_intervals(self, st: Statement, counts, o: int) -> tuple[str, str]:
        """Pr_D[o] − X Pr_D′[o] − c of one multiset in interval arithmetic, climbing DIGITS_LADDER."""
        from darrm_opt.certify.exact import DIGITS_LADDER, exp_interval, interval_dps, interval_ends, output_intervals

        lo = hi = mpmath.mpf(0)
        for dps in DIGITS_LADDER:
            with interval_dps(dps):
                a, b = output_intervals(self.params, self.gamma, counts)[o]
                c = iv.mpf(st.c.numerator) / iv.mpf(st.c.denominator)
                if st.x is not None:
                    X = iv.mpf(st.x.numerator) / iv.mpf(st.x.denominator)
                    lo, hi = interval_ends(a - X * b - c)
                else:
                    assert st.eps is not None
                    _, hi = interval_ends(a - exp_interval(iv.mpf(min(st.eps, MAX_STATEMENT_EPS))) * b - c)
                    if st.eps <= MAX_REFUTE_EPS:
                        lo, _ = interval_ends(a - exp_interval(iv.mpf(st.eps)) * b - c)
                    else:  # X unbounded: refuted only by an output impossible under D′
                        lo = interval_ends(a - c)[0] if interval_ends(b) == (0, 0) else mpmath.mpf("-inf")
            if hi <= 0:
                return "pass", ""
            if lo > 0:
                return "fail", (f"multiset {list(map(int, counts))}, output {1 - o}: Pr_D − e^ε′·Pr_D′ − δ in "
                                f"[{mpmath.nstr(lo, 3)}, {mpmath.nstr(hi, 3)}], interval arithmetic at {dps} digits")
        return "undecided", (f"multiset {list(map(int, counts))}, output {1 - o}: Pr_D − e^ε′·Pr_D′ − δ in "
                             f"[{mpmath.nstr(lo, 3)}, {mpmath.nstr(hi, 3)}] at {DIGITS_LADDER[-1]} digits")


def check_shared_profile(params: Params, gamma, profile: PrivacyProfile, cert: Certificate | None = None, *,
                         workers: int | None = None, executor=None) -> ProfileCheck:
    """The verdict on a stored profile of a shared-data γ table (module docstring). ``cert``: the table's
    certificate, if computed (it proves the statements at ε′ ≥ mε, δ′ ≥ δ without a sweep)."""
    from darrm_opt.certify.certificate import validate_gamma

    statements, bad = _prepare(profile)
    if bad is not None:
        return bad
    dec = _SharedDecider(params, validate_gamma(gamma, params.K), cert, workers, executor)
    decided = {i: dec.quick(st) for i, st in enumerate(statements)}
    rest = [i for i, q in decided.items() if q is None]
    slope = {i: dec.slope(statements[i]) for i in rest}
    for i, M in zip(rest, dec.maxima([slope[i] for i in rest]), strict=True):
        if dec.by_float(statements[i], slope[i], M):
            decided[i] = ("pass", "")
    return _run(statements, lambda i, st: _sufficient(st, decided[i] or dec.by_points(st, slope[i])))
