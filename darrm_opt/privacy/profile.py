"""The privacy profile of one γ table: a certified dominating pair for exact accounting.

For a fixed γ the output of DaRRM is one bit with q = Pr[1 | D] = ½ + ½ Σ_l s_l γ(l) α_l and q′ likewise
under D′ (Lemma 3.4). Every event S ⊆ {0, 1} gives a point (b, a) = (Pr_{D′}[S], Pr_D[S]); the hockey-stick
divergence at slope x = e^{ε′} ≥ 0 is the support function

    D(x) = sup over admissible teachers and S of  a − x b
         = ½ (1 − x) + ½ max_n max(F_x(n), −F_x(n)),   F_x(n) = Σ_l h_l (α_l(n) − x α′_l(n)),  h_l = s_l γ(l).

a − x b is affine in each teacher's pair (p_i, p′_i) with the others fixed, so the maximum is attained at
corner multisets n (Lemma 5.1, App. C.3): F_x is exactly the certificate's sweep with E = x, and the sweep's
float error bound η (darrm_opt.certify.sweep.error_bound) gives the rigorous line a ≤ D̄(x) + x b with
D̄(x) = ½(1 − x) + ½(max F + η). The point set is closed under (a, b) → (1 − a, 1 − b) (the other output)
and (a, b) → (b, a) (the other order of D, D′: the corner set is closed under p ↔ p′), hence

    D(1/x) = (D(x) − 1 + x) / x     for every x > 0,

and only slopes x ≥ 1 are swept. The mechanism is f-DP for the tradeoff read off the concave envelope
A(b) = min(1, min_j (D̄(x_j) + x_j b)) of the swept lines (Dong, Roth, Su 2022, Prop. 2.12, in the (b, a)
coordinates), an *outer* bound of the true hull at every b, exact at the swept slopes. The slopes are chosen
as a support-function hull search: each sweep's argmax multiset is a point on the true hull; a first
multi-slope sweep (darrm_opt.certify.slopes) over a grid of slopes finds most vertices, then every edge of
the hull of the points found is swept at its own slope, all edges of a round in one multi-slope sweep,
until each is confirmed as a hull edge (13 vertices at K = 11, m = 3). For K ≥ 31 (the structured sweep)
all rounds are answered from one pass that keeps every point that can be a maximum at a slope x ≥ 1, with
the same values and argmax multisets as a sweep at each slope (darrm_opt.certify.slopes.slope_front).

Steep edges. The float error of a swept D̄(x) grows like x (η(x) ∝ 1 + x), so the grid stops at a slope x_cap
(MAX_SLOPE_ERROR) and the hull's steeper edges, near b = 0, are not resolved by the sweeps' float values: at
K = 5, m = 3 (ε = 0.1, Δ = 1e-5) the true hull rises from (0, 6.0·10⁻¹⁰) by edges of slopes 2566, 2101 and
1901, where η(x)/2 ≈ 10⁻¹⁰. Those edges are found from the infinite-loss point (0, a₀) (:func:`infinite_loss_mass`,
the largest Pr_D[S] with Pr_D′[S] = 0), and every edge of slope x > x_cap is evaluated *tightly*: the sweep at x
keeps the multisets within 3η(x) of its float maximum (every other one is proven below it), and their points are
bounded by direct convolution with a relative error bound (darrm_opt.certify.direct), so that
D̄(x) = max(0, max over those multisets and outputs of an upper bound of a − x b) exceeds D(x) by at most
θ(a + x b) at the maximiser (θ ≈ 2·10⁻¹⁴ relative; ≈ 6·10⁻¹⁹ at K = 5, x = 2566).
With the edge from (0, a₀) confirmed this way the infinite-loss mass of the pair is a₀ + MARGIN.

The dominating pair (Zhu, Dong, Wang 2022, Def. 7) is read off A's vertices (b_0 = 0, a_0), …, (1, 1): an atom
of mass a_0 under P and 0 under Q (infinite loss), and one atom per segment with mass Δa under P and Δb under
Q. Its hockey-stick divergence is H_x(P‖Q) = max_v (a_v − x b_v) ≥ D(x) for all x ≥ 0, in both orders of the
neighbours, so adaptive composition of answers is dominated by the product of the pairs (ibid., Thm 10).

Safety margins: each line's value is rounded up, mirrored slopes are rounded down (D is non-increasing, so
the mirrored bound stays valid), and every line is raised by ``MARGIN`` before the envelope is intersected,
which covers the float error of the intersection points and of the chords between them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from darrm_opt.certify.certificate import Certificate, certify_and_separate, is_symmetric, validate_gamma
from darrm_opt.certify.problems import make_problem
from darrm_opt.certify.slopes import SlopeFront, front_applies, slope_front, sweep_slopes
from darrm_opt.certify.sweep import SweepResult, error_bound, signed_h, sweep
from darrm_opt.errors import InvalidParameter
from darrm_opt.model.corners import corners
from darrm_opt.model.params import Params
from darrm_opt.model.pmf import pmf_direct
from darrm_opt.privacy.gaussian_profile import TYPE as GAUSSIAN
from darrm_opt.privacy.gaussian_profile import GaussianProfile

#: added to every line's value before the envelope is intersected (float error of intersections, chords).
MARGIN = 1e-13
#: the hull search stops refining a chord when the sweep at its slope rises less than this above it.
HULL_TOL = 1e-12
#: at most this many rounds of hull-edge sweeps after the first grid. The lines of every sweep are valid
#: bounds, so stopping early only leaves unconfirmed edges slightly loose: at K = 41, m = 3 the ε of 100
#: answers differs by 3e-11 between 2 rounds and full confirmation (5 rounds), by 6e-5 with 1 round.
MAX_ROUNDS = 2
#: rounds enough to confirm every edge (the envelope is then the true hull plus MARGIN)
FULL_ROUNDS = 32
#: the steepest slope is raised until ½·η·x would exceed this (the sweeps' float error grows like x).
MAX_SLOPE_ERROR = 1e-10
#: at most this many tight evaluations of steep edges (slopes above the grid's), each one sweep
STEEP_SWEEPS = 24
#: a tight evaluation keeping more multisets than this is dropped (its slope keeps only the float lines)
TIGHT_CAP = 20_000


@dataclass(frozen=True)
class PrivacyProfile:
    """A certified upper bound on the privacy profile δ(ε′) of one γ table, and its dominating pair.

    ``support``: the swept statements "(ε_j, δ_j)-DP", ε_j ≥ 0. ``vertices``: the envelope's vertices
    (b, a) = (Q-mass, P-mass), from (0, infinite_mass) to (1, 1). ``atoms``: the pair's finite atoms
    (P-mass, Q-mass), one per segment; ``infinite_mass``: P-mass of the infinite-loss atom.
    """

    support: tuple[tuple[float, float], ...]
    vertices: tuple[tuple[float, float], ...]
    sweeps: int = field(default=0, compare=False)
    seconds: float = field(default=0.0, compare=False)

    @property
    def infinite_mass(self) -> float:
        return self.vertices[0][1]

    @property
    def atoms(self) -> tuple[tuple[float, float], ...]:
        v = self.vertices
        return tuple((v[i][1] - v[i - 1][1], v[i][0] - v[i - 1][0]) for i in range(1, len(v)))

    def delta(self, epsilon: float) -> float:
        """δ(ε′) = min( max_v (a_v − e^{ε′} b_v), min_{ε_j ≤ ε′} δ_j ), an upper bound for every ε′ ≥ 0 (the
        profile is non-increasing, so a swept statement at ε_j ≤ ε′ also holds at ε′)."""
        if not (isinstance(epsilon, (int, float)) and epsilon >= 0 and not math.isnan(epsilon)):
            raise InvalidParameter("epsilon", "must be a number >= 0", epsilon)
        # y ≤ e^{ε′}; past exp's range y = e^709 (rounded down) is still ≤ e^{ε′} (pessimistic, no overflow)
        y = math.nextafter(math.exp(min(epsilon, 709.0)), 0.0) if math.isfinite(epsilon) else math.inf
        env = max(a - y * b if b > 0 else a for b, a in self.vertices)
        env = max(math.nextafter(env, math.inf), 0.0)
        swept = [d for e, d in self.support if e <= epsilon]
        return min([env, *swept])

    def dominates(self, other: PrivacyProfile, tol: float = 0.0) -> bool:
        """True when this profile is never below ``other`` (less ``tol``): its envelope at every b (so
        δ(ε′) ≥ other's everywhere; ``other``'s envelope is piecewise linear and this one concave, so
        other's vertices suffice) and each of its swept statements (ε_j, δ_j) against other's δ(ε_j) (a
        statement at a negative or NaN ε_j is not dominated: it would bound δ at every ε′)."""
        return all(self.envelope(b) >= a - tol for b, a in other.vertices) and all(
            e >= 0 and d >= other.delta(e) - tol for e, d in self.support)

    def sort_key(self) -> tuple:
        """A canonical order among profiles of every type (a composition cache key)."""
        return ("tradeoff", self.vertices, self.support)

    def to_pld(self, interval: float) -> Any:
        """The PLD of the dominating pair (:func:`darrm_opt.privacy.pld.pair_pld`, pessimistic)."""
        from darrm_opt.privacy.pld import pair_pld

        return pair_pld(self.atoms, self.infinite_mass, interval)

    def envelope(self, b: float) -> float:
        """A(b): linear interpolation of the vertices."""
        bs = [v[0] for v in self.vertices]
        return float(np.interp(b, bs, [v[1] for v in self.vertices]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "support": [list(s) for s in self.support],
            "vertices": [list(v) for v in self.vertices],
            "atoms": [list(a) for a in self.atoms],
            "infinite_mass": self.infinite_mass,
            "sweeps": self.sweeps,
            "seconds": self.seconds,
        }

    @classmethod
    def from_dict(cls, data: Any) -> PrivacyProfile:
        """Rebuild from :meth:`to_dict`; the atoms, if present, must be those of the vertices."""
        if not isinstance(data, dict) or "vertices" not in data or "support" not in data:
            raise InvalidParameter("privacy_profile", "must be an object with vertices and support")
        try:
            vertices = tuple((float(b), float(a)) for b, a in data["vertices"])
            support = tuple((float(e), float(d)) for e, d in data["support"])
        except (TypeError, ValueError):
            raise InvalidParameter("privacy_profile", "vertices and support must be lists of number pairs") from None
        check_vertices(vertices)
        prof = cls(support, vertices, int(data.get("sweeps", 0)), float(data.get("seconds", 0.0)))
        if "atoms" in data:
            got = [tuple(map(float, a)) for a in data["atoms"]]
            if len(got) != len(prof.atoms) or any(
                abs(x - y) > 1e-15 or abs(u - w) > 1e-15 for (x, u), (y, w) in zip(got, prof.atoms, strict=True)
            ):
                raise InvalidParameter("privacy_profile", "atoms must be the differences of the vertices")
        if "infinite_mass" in data and float(data["infinite_mass"]) != prof.infinite_mass:
            raise InvalidParameter("privacy_profile", "infinite_mass must be the first vertex's P-mass")
        return prof


#: a certified privacy profile of one answer, of any type: the ledger composes each by its ``to_pld``
Profile = PrivacyProfile | GaussianProfile


def profile_from_dict(data: Any) -> Profile:
    """A stored profile of any type: a Gaussian pair (``type`` "gaussian") or a tradeoff envelope."""
    if isinstance(data, dict) and data.get("type") == GAUSSIAN:
        return GaussianProfile.from_dict(data)
    return PrivacyProfile.from_dict(data)


def check_vertices(vertices: tuple[tuple[float, float], ...]) -> None:
    ok = len(vertices) >= 2 and vertices[0][0] == 0.0 and vertices[-1] == (1.0, 1.0)
    ok = ok and all(math.isfinite(b) and math.isfinite(a) and 0 <= b <= 1 and 0 <= a <= 1 for b, a in vertices)
    ok = ok and all(vertices[i][0] > vertices[i - 1][0] and vertices[i][1] >= vertices[i - 1][1]
                    for i in range(1, len(vertices)))
    if not ok:
        raise InvalidParameter("privacy_profile", "vertices must rise from (0, a0) to (1, 1) with b increasing")


# ---------------------------------------------------------------------------------------------------------
# The sweeps
# ---------------------------------------------------------------------------------------------------------
class _Oracle:
    """max over corner multisets of (a − x b), by one certificate sweep with E = x."""

    def __init__(self, params: Params, gamma: np.ndarray, sweep_kwargs: dict, progress=None) -> None:
        self.params = params
        self.gamma = gamma
        self.C = corners(params)
        self.h = signed_h(gamma)
        self.hmax = float(np.abs(self.h).max()) if self.h.size else 0.0
        self.two_sided = not is_symmetric(gamma)
        self.kw = dict(sweep_kwargs, progress=_sweep_progress(progress))
        self.calls = 0
        self._front: SlopeFront | None = None

    def point(self, counts, flip: bool) -> tuple[float, float]:
        """(b, a) = (q′, q) of a multiset (or (1 − q′, 1 − q) for output 0), as sums of non-negative terms:
        q = Σ_l α_l (1 + s_l γ(l)) / 2."""
        w = (1.0 + self.h) / 2.0
        alpha = pmf_direct(counts, self.C[:, 0])
        alpha_p = pmf_direct(counts, self.C[:, 1])
        if flip:
            w = (1.0 - self.h) / 2.0
        return float(np.dot(alpha_p, w)), float(np.dot(alpha, w))

    def __call__(self, x: float) -> tuple[float, tuple[float, float]]:
        """(D̄(x), argmax point): D̄(x) = ½(1 − x) + ½(max F + η), rounded up."""
        self.calls += 1
        res = sweep(make_problem(self.C, self.h, x), two_sided=self.two_sided, **self.kw)
        return self._bound(x, res.max_cost, res.worst, res.min_cost, res.best)

    def many(self, xs: list[float]) -> list[tuple[float, tuple[float, float]]]:
        """(D̄(x), argmax point) for every x. Structured problems (K ≥ 31): the first call makes one pass
        that keeps every point that can be a maximum at a slope x ≥ 1 (darrm_opt.certify.slopes.slope_front),
        and every call is answered from those points, with the values and argmax multisets of a sweep at
        each x. Otherwise one multi-slope sweep per call (each extra slope costs a subtraction and two
        reductions per block, not a sweep)."""
        if not xs:
            return []
        if self.kw.get("executor") is not None:
            return [self(x) for x in xs]
        problem = make_problem(self.C, self.h, 1.0)
        if front_applies(problem, xs):
            if self._front is None:
                self.calls += 1
                self._front = slope_front(problem, self.kw.get("workers"), self.two_sided)
            res = self._front.evaluate(xs)
        else:
            self.calls += 1
            res = sweep_slopes(problem, xs, workers=self.kw.get("workers"), two_sided=self.two_sided)
        return [self._bound(x, res.best[k], res.arg[k], -res.best_neg[k], res.arg_neg[k])
                for k, x in enumerate(xs)]

    def tight(self, xs: list[float]) -> list[tuple[float, tuple[float, float]] | None]:
        """(D̄(x), argmax point) for every x, tight at steep slopes (module docstring): the float maxima M̃ of
        one multi-slope pass, then per x a sweep keeping every multiset whose float cost exceeds M̃ − 3η(x) (a
        true maximiser has F̃ ≥ F − η ≥ M̃ − 2η; every other multiset has F ≤ F̃ + η ≤ M̃ − 2η, below the true
        value of M̃'s multiset), bounded by direct convolution. None where more than NEAR_CAP multisets are kept."""
        from darrm_opt.certify.direct import MAX_SLOPE, event_points

        out: list[tuple[float, tuple[float, float]] | None] = []
        raw = [x for x in xs if 1.0 <= x <= MAX_SLOPE]
        maxima = dict(zip(raw, self._maxima(raw), strict=True))
        for x in xs:
            if x not in maxima or not math.isfinite(maxima[x]):
                out.append(None)
                continue
            self.calls += 1
            eta = error_bound(self.params.K, x, self.hmax)
            res = sweep(make_problem(self.C, self.h, x), near=maxima[x] - 3.0 * eta, near_cap=TIGHT_CAP,
                        two_sided=self.two_sided, **self.kw)
            if res.near_overflow or not res.near.size:
                out.append(None)
                continue
            rows = np.unique(np.asarray(res.near, dtype=np.int64), axis=0)
            ev = event_points(self.params, self.gamma, rows)
            up = ev.upper(x)
            i, o = np.unravel_index(int(np.argmax(up)), up.shape)
            D = max(math.nextafter(float(up[i, o]), math.inf), 0.0)
            out.append((D, (float(ev.b[i, o]), float(ev.a[i, o]))))
        return out

    def _maxima(self, xs: list[float]) -> list[float]:
        """The float maxima of F_x and −F_x over every multiset (the multi-slope pass of :meth:`many`)."""
        if not xs:
            return []
        if self.kw.get("executor") is not None:
            out = []
            for x in xs:
                r = sweep(make_problem(self.C, self.h, x), two_sided=self.two_sided, **self.kw)
                out.append(max(r.max_cost, -r.min_cost) if self.two_sided else r.max_cost)
            return out
        problem = make_problem(self.C, self.h, 1.0)
        self.calls += 1
        if front_applies(problem, xs):
            if self._front is None:
                self._front = slope_front(problem, self.kw.get("workers"), self.two_sided)
            res = self._front.evaluate(xs)
        else:
            res = sweep_slopes(problem, xs, workers=self.kw.get("workers"), two_sided=self.two_sided)
        best = np.maximum(res.best, res.best_neg) if self.two_sided else res.best
        return [float(v) for v in best]

    def _bound(self, x, max_cost, worst, min_cost, best) -> tuple[float, tuple[float, float]]:
        F, counts, flip = max_cost, worst, False
        if self.two_sided and -min_cost > F:
            F, counts, flip = -min_cost, best, True
        eta = error_bound(self.params.K, x, self.hmax)
        D = 0.5 * (1.0 - x) + 0.5 * (F + eta)
        D = max(math.nextafter(D + 4e-16 * (1.0 + x), math.inf), 0.0)
        return D, self.point(counts, flip)


def _sweep_progress(progress, stage: str = "sweep-progress"):
    """Adapt ``progress(stage, **info)`` to the sweep's ``progress(done, total, worst)``."""
    if progress is None:
        return None
    return lambda done, total, worst: progress(stage, done=done, total=total, worst=worst)


def _certified_slope(params: Params) -> float:
    """ε_c ≥ m·ε (the exact product of the binary values), the ε of the certified statement."""
    e = params.m * params.epsilon
    if Fraction(params.m) * Fraction(params.epsilon) > Fraction(e):
        e = math.nextafter(e, math.inf)
    return e


def privacy_profile(params: Params, gamma, *, workers: int | None = None, executor=None,
                    progress=None, rounds: int = MAX_ROUNDS,
                    certified: tuple[Certificate, SweepResult] | None = None, steep: bool = True) -> PrivacyProfile:
    """The certified privacy profile of ``gamma`` for ``params`` (see the module docstring)."""
    return profile_and_certificate(params, gamma, workers=workers, executor=executor, progress=progress,
                                   rounds=rounds, certified=certified, steep=steep)[0]


def profile_and_certificate(params: Params, gamma, *, workers: int | None = None, executor=None,
                            progress=None, rounds: int = MAX_ROUNDS,
                            certified: tuple[Certificate, SweepResult] | None = None, steep: bool = True,
                            ) -> tuple[PrivacyProfile, Certificate]:
    """The profile and the certificate of ``gamma``, from one certification sweep plus the hull search.
    ``certified``: that sweep's result if already at hand — a certificate of ``gamma`` for ``params`` and the
    sweep behind it (``Solution.certificate``, ``Solution.sweep``), which then is not repeated. When that sweep
    kept the slope front of ``gamma`` (``certify_and_separate(front=True)``, ``solve(front=True)``) the hull
    search is answered from it: the structured pass of :func:`darrm_opt.certify.slopes.slope_front` is not
    made again (the same values and argmax multisets at every slope, so the same profile).

    Sweeps: the certificate's own sweep at x = e^{mε} (its interval re-check makes (mε, δ) exact), x = 1,
    the steepest slope, then ``rounds`` rounds confirming hull edges (FULL_ROUNDS: until every edge is
    confirmed, the envelope is then the true hull plus MARGIN), then (``steep``) the edges steeper than the
    grid evaluated tightly from the infinite-loss point (module docstring). The profile bounds the privacy of
    ``gamma`` whether or not the certificate certifies (mε, δ); only then does it contain (mε, δ). Each
    swept line at slope x gives the statement (ε′, D̄(x)) at ε′ ≥ log x (rounded up: D is non-increasing)."""
    t0 = time.perf_counter()
    g = validate_gamma(gamma, params.K)
    oracle = _Oracle(params, g, {"workers": workers, "executor": executor}, progress)
    lines: dict[float, tuple[float, tuple[float, float]]] = {}  # slope -> (D̄, point)
    support: list[tuple[float, float]] = []

    if certified is None:
        cert, res = certify_and_separate(params, g, workers=workers, executor=executor, front=True,
                                         progress=_sweep_progress(progress, "certify-progress"))
    else:
        cert, res = certified
    if isinstance(res.front, SlopeFront) and res.front.matches(oracle.h, oracle.two_sided):
        oracle._front = res.front  # the certifying sweep kept the front: the hull search needs no pass of its own
    eps_c = _certified_slope(params)
    x_c = math.exp(params.m * params.epsilon)
    D_c, p_c = oracle._bound(x_c, res.max_cost, res.worst, res.min_cost, res.best)
    lines[x_c] = (D_c, p_c)
    support.append((0.0, 0.0))  # placeholder, replaced below
    if cert.certified:
        # (ε_c, δ)-DP exactly: the line a ≤ δ + x b for any float x ≥ e^{ε_c}
        x_up = math.nextafter(math.nextafter(math.exp(eps_c), math.inf), math.inf)
        lines[x_up] = (float(params.delta), p_c)  # type: ignore[arg-type]
        support.append((eps_c, min(float(params.delta), D_c)))  # type: ignore[arg-type]
    first = [1.0, *_grid(params, oracle)]
    lines.update(zip(first, oracle.many(first), strict=True))
    _refine(oracle, lines, progress, rounds)
    if steep:
        _steep(oracle, lines, max(first), progress)
    support[0] = (0.0, lines[1.0][0])
    support += [(_log_up(x), D) for x, (D, _) in lines.items() if x > 1.0]
    vertices = envelope_vertices([(x, D) for x, (D, _) in lines.items()])
    sup = tuple(sorted(set(support)))
    return PrivacyProfile(sup, vertices, oracle.calls + (certified is None), time.perf_counter() - t0), cert


#: slopes e^{ε′} of the first pass: GRID values of ε′ in (0, 1.5 mε] (where the hull's vertices crowd: the
#: LP makes mε the active slope), GRID / 4 more up to Kε, then Kε·2^i up to the error cap.
GRID = 24


def _grid(params: Params, oracle: _Oracle) -> list[float]:
    """The first pass's slopes above 1: dense up to 1.5 mε, coarse up to e^{Kε} (the teachers' basic
    composition, beyond which only Δ-events remain) and doublings of ε′ while ½·η·x stays below
    MAX_SLOPE_ERROR, so the steepest slope reaches the infinite-loss mass (its argmax has b = 0)."""
    me, top = params.m * params.epsilon, params.K * params.epsilon
    dense = min(1.5 * me, top)
    eps = [dense * j / GRID for j in range(1, GRID + 1)]
    eps += [dense + (top - dense) * j / (GRID // 4) for j in range(1, GRID // 4 + 1)] if top > dense else []
    while eps[-1] < 350:
        nxt = 2 * eps[-1]
        if 0.5 * error_bound(params.K, math.exp(nxt), oracle.hmax) * math.exp(nxt) > MAX_SLOPE_ERROR:
            break
        eps.append(nxt)
    return [math.exp(e) for e in eps]




def _refine(oracle: _Oracle, lines: dict, progress=None, rounds: int = MAX_ROUNDS) -> None:
    """Confirm every edge of the upper hull of the argmax points found so far: an edge of slope s ≥ 1 is a
    hull edge of the true point set iff the sweep at s rises at most HULL_TOL + η above it. The slopes of
    all unconfirmed edges are swept together in one multi-slope sweep per round; new points change the hull
    and the next round checks its new edges."""
    for _ in range(rounds):
        todo = []
        hull = upper_hull({p for _, p in lines.values()})
        for (b1, a1), (b2, a2) in zip(hull, hull[1:], strict=False):
            if b2 == b1:  # a vertical edge has no finite slope to sweep; skipping it only leaves a line out,
                continue  # and every swept line is itself a valid bound
            x = (a2 - a1) / (b2 - b1)
            if not (math.isfinite(x) and x >= 1.0):
                continue
            chord = a1 - x * b1
            tol = HULL_TOL + 0.5 * error_bound(oracle.params.K, x, oracle.hmax)
            if x in lines and lines[x][0] <= chord + tol:
                continue
            todo.append(x)
        todo = sorted(set(todo) - set(lines))
        if not todo:
            return
        lines.update(zip(todo, oracle.many(todo), strict=True))
        if progress is not None:
            progress("profile", sweeps=oracle.calls)


def _steep(oracle: _Oracle, lines: dict, x_cap: float, progress=None) -> None:
    """Evaluate tightly (:meth:`_Oracle.tight`) every edge steeper than ``x_cap`` of the upper hull of the points
    found so far and the infinite-loss point (0, a₀), until each is confirmed (the tight value rises at most
    HULL_TOL above the chord) or STEEP_SWEEPS evaluations are spent. A tight line replaces a float one at the
    same slope when lower; every line is a valid bound either way."""
    pts = {p for _, p in lines.values()}
    a0 = float(infinite_loss_mass(oracle.params, oracle.gamma))
    if not any(b == 0.0 and a >= a0 - HULL_TOL for b, a in pts):
        pts.add((0.0, a0))
    tight: dict[float, tuple[float, tuple[float, float]]] = {}
    tried: set[float] = set()
    while len(tried) < STEEP_SWEEPS:
        todo = []
        hull = upper_hull(pts)
        for (b1, a1), (b2, a2) in zip(hull, hull[1:], strict=False):
            if b2 == b1:
                continue
            x = (a2 - a1) / (b2 - b1)
            if not (math.isfinite(x) and x > x_cap) or x in tried:
                continue
            todo.append(x)
        todo = sorted(set(todo))[: STEEP_SWEEPS - len(tried)]
        if not todo:
            break
        for x, r in zip(todo, oracle.tight(todo), strict=True):
            tried.add(x)
            if r is not None:
                tight[x] = r
                pts.add(r[1])
        if progress is not None:
            progress("profile", sweeps=oracle.calls)
    for x, (D, p) in tight.items():
        if x not in lines or D < lines[x][0]:
            lines[x] = (D, p)


def _log_up(x: float) -> float:
    """ε′ ≥ log x (math.log is within one ulp), 0 at x = 1."""
    return 0.0 if x == 1.0 else math.nextafter(math.log(x), math.inf)


def infinite_loss_mass(params: Params, gamma) -> Fraction:
    """a₀ = max { Pr_D[S] : Pr_D′[S] = 0 } over admissible teachers and events S, exactly: the P-mass of the
    infinite-loss atom of the true tradeoff curve (its value at b = 0).

    With output o (Alg. 1), Pr_D′[out = o] = Σ_l w^o_l α′_l = 0, w^o_l = (1 + σ_o s_l γ(l))/2 (Lemma 3.4), needs
    the law of L′ to live on Z_o = {l : w^o_l = 0} (γ(l) = 1 on the side that outputs the other bit). Pr_D[o] is
    linear in each teacher's p with the others fixed (Lemma 5.1), and whether L′ stays in Z_o depends only on
    which teachers have p′ = 0, p′ = 1 or neither; so each teacher can take the extreme p of its corners: p′ = 0:
    p ∈ {0, Δ}; p′ = 1: p ∈ {1 − Δ, 1}; 0 < p′ < 1: p ∈ {0, 1} (corners (0, Δ), (1, 1 − Δ)), and the last kind
    is better moved to (0, 0) or (1, 1), which keeps L's law and narrows L′'s. Hence L′ = t ∈ Z_o is fixed
    (t teachers with p′ = 1, of which u at p = 1 − Δ; K − t with p′ = 0, of which z at p = Δ) and

        a₀ = max over o, t ∈ Z_o, u ≤ t, z ≤ K − t of  Σ_l w^o_l Pr[t − Bin(u, Δ) + Bin(z, Δ) = l],

    0 for Δ = 0. The maximum is searched in float64 (every term non-negative: relative error below 1e-12) and
    the candidates within a relative 1e-9 of it are evaluated in exact rationals."""
    from darrm_opt.certify.direct import binomial_rows

    g = validate_gamma(gamma, params.K)
    K, d = params.K, params.teacher_delta
    h = signed_h(g)
    if d == 0:
        return Fraction(0)
    T = binomial_rows(float(d), float(Fraction(1) - Fraction(d)), K)
    cands: list[tuple[float, int, int, int, int]] = []  # (float value, σ_o, t, u, z)
    for sign in (1, -1):
        w = (1.0 + sign * h) / 2.0
        Z = np.flatnonzero(w == 0.0)
        if Z.size == 0:
            continue
        for u in range(int(Z.max()) + 1):
            for z in range(K - u + 1):
                dist = np.convolve(T[z, : z + 1], T[u, : u + 1][::-1])  # index j: Bin(z) − Bin(u) = j − u
                vals = np.correlate(w, dist, mode="valid")  # vals[t − u] = Σ_j w[t − u + j] dist[j]
                ts = Z[(Z >= u) & (Z <= K - z)]
                cands += [(float(vals[t - u]), sign, int(t), u, z) for t in ts]
    top = max((c[0] for c in cands), default=0.0)
    if top == 0.0:
        return Fraction(0)
    D = Fraction(d)
    best = Fraction(0)
    for _, sign, t, u, z in sorted(c for c in cands if c[0] >= top * (1 - 1e-9))[-16:]:
        we = [(1 + sign * Fraction(float(x))) / 2 for x in h]
        bz = [math.comb(z, k) * D**k * (1 - D) ** (z - k) for k in range(z + 1)]
        bu = [math.comb(u, k) * D**k * (1 - D) ** (u - k) for k in range(u + 1)]
        best = max(best, sum((bz[i] * bu[k] * we[t - k + i] for i in range(z + 1) for k in range(u + 1)),
                             Fraction(0)))
    return best


def upper_hull(points) -> list[tuple[float, float]]:
    """The upper concave hull of points (b, a), by increasing b."""
    hull: list[tuple[float, float]] = []
    for p in sorted(points):
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) >= 0:
            hull.pop()
        hull.append(p)
    return hull


def envelope_vertices(lines: list[tuple[float, float]], margin: float = MARGIN) -> tuple[tuple[float, float], ...]:
    """Vertices of A(b) = min(1, min_j (D_j + margin + x_j b)) on [0, 1], with the lines (x_j ≥ 1) and
    their mirror images (slope 1/x_j rounded down, value (D_j − 1 + x_j)/x_j rounded up) — the envelope of
    a point set closed under (a, b) → (1 − b, 1 − a)."""
    full: list[tuple[float, float]] = [(0.0, 1.0)]
    for x, D in lines:
        if not (x >= 1.0 and math.isfinite(x)):
            continue
        full.append((x, D + margin))
        y = math.nextafter(1.0 / x, 0.0)
        Dm = math.nextafter((D - 1.0 + x) / x, math.inf) * (1 + 4e-16) + 4e-16
        full.append((y, min(Dm, 1.0) + margin))
    slopes = np.array([s for s, _ in full])
    values = np.array([d for _, d in full])

    def A(b: float) -> float:
        return float(min(1.0, np.min(values + slopes * b)))

    cands = {0.0, 1.0}
    for i in range(len(full)):
        for j in range(i + 1, len(full)):
            ds = slopes[i] - slopes[j]
            if ds != 0:
                b = (values[j] - values[i]) / ds
                if 0.0 < b < 1.0:
                    cands.add(float(b))
    pts = sorted((b, A(b)) for b in cands)
    hull: list[tuple[float, float]] = []
    for p in pts:  # upper concave hull (monotone chain)
        while len(hull) >= 2 and _cross(hull[-2], hull[-1], p) >= 0:
            hull.pop()
        hull.append(p)
    hull[-1] = (1.0, 1.0)
    # the envelope is non-decreasing; drop the flat tail's interior points
    out = [hull[0]]
    for p in hull[1:]:
        if out[-1][1] >= 1.0:
            break
        out.append((p[0], max(p[1], out[-1][1])))
    if out[-1] != (1.0, 1.0):
        out.append((1.0, 1.0))
    return tuple(out)


def _cross(o: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
