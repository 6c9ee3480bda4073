"""Multi-class DaRRM for PATE's setting: the mechanism, its neighbouring histogram types and the prior.

Setting (PATE: teachers trained non-privately on disjoint shards). K teachers vote over C classes; the
votes form a histogram h with Σ_c h_c = K. One record changes one teacher's vote, so neighbouring
histograms are h′ = h − e_a + e_b (a ≠ b, h_a ≥ 1): one vote moves from class a to class b.

Mechanism. Let M = max_c h_c, T = {c : h_c = M} the top set, t = |T|, and the gap g = h₍₁₎ − h₍₂₎
(g = 0 exactly when t ≥ 2). With probability γ(g) release a class drawn uniformly from T (the plurality
class, ties split uniformly), otherwise a class drawn uniformly from all C:

    P(c) = (1 − γ(g))/C + γ(g)·1{c ∈ T}/t.                                              (MC-1)

Privacy. For neighbours the output laws P, P′ must satisfy the hockey-stick bound (the exact (ε, δ)-DP
condition for a finite output space) in both orders:

    Σ_c max(0, P(c) − e^ε P′(c)) ≤ δ.                                                     (MC-2)

P depends on h only through (g, T), so a neighbouring pair is described by its *type*
(g, t, g′, t′, k) with k = |T ∩ T′|: the classes fall into four groups (in T and T′: k; in T only: t − k;
in T′ only: t′ − k; in neither: C − t − t′ + k), P and P′ are constant on each group, and (MC-2) is
Σ_groups n_grp·max(0, P_grp − e^ε P′_grp) ≤ δ, i.e. the maximum over subsets S of groups of a linear
function of (γ(g), γ(g′)). The types that occur (derived in :func:`pair_types`, checked against brute force
over every histogram in tests/test_multiclass.py):

  1. one top class on both sides, same class: g ↔ g + 1 and g ↔ g + 2 (k = 1, t = t′ = 1);
  2. the top class changes (x → b where b is the runner-up, g = 1): (1, 1) ↔ (1, 1) with k = 0;
  3. a unique top with g = 1 ↔ a tie of t′ ∈ [2, C] classes containing it (k = 1); g = 2 ↔ a tie of 2;
  4. a tie of t ≥ 3 ↔ a tie of t − 1 of its classes (k = t − 1);
  5. a tie of t ≥ 2 ↔ another tie of t classes sharing t − 1 (k = t − 1).

Whether a type occurs depends on (K, C); a witness histogram is searched for each, in O(K) per type.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.lazy import LazyModule
from darrm_opt.model.params import digest, finite_number, integer_in, per_answer_epsilon, probability_below_one

# imported on first use: scipy.stats costs about 0.7 s of CPU, and binary tables never need it
special: Any = LazyModule("scipy.special")
stats: Any = LazyModule("scipy.stats")

MC_PRIOR_KINDS = ("paper", "iid-uniform", "dirichlet")
#: Largest number of classes accepted (the pair types grow with C; PATE's tasks use ≤ 100).
MAX_CLASSES = 1000
#: Largest number of teachers accepted.
MAX_TEACHERS = 2000
#: Largest K³·C accepted (about a minute for the prior weights).
MAX_WORK = 1e11


# ------------------------------------------------------------------------------------------------------
# Parameters and prior
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MulticlassPrior:
    """Distribution of the vote histogram given the true class y, used for the expected accuracy.

    - ``paper``: each teacher independently right with probability p_i ~ Uniform[0.5, 1], otherwise a
      uniformly random wrong class (as ``iid-uniform:0.5,1``);
    - ``iid-uniform:A,B``: the same with p_i ~ Uniform[A, B] i.i.d.; since the teachers are independent,
      h ~ Multinomial(K, q) with q_y = (A + B)/2 and q_c = (1 − q_y)/(C − 1) for c ≠ y (exact);
    - ``dirichlet:AY,AW``: per query the class probabilities π ~ Dirichlet(AY, AW, …, AW) (AY on the true
      class) and the K votes are i.i.d. from π: h ~ Dirichlet-multinomial(K; AY, AW, …, AW).
    """

    kind: str = "paper"
    a: float = 0.5
    b: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in MC_PRIOR_KINDS:
            raise InvalidParameter("prior", f"must be one of {', '.join(MC_PRIOR_KINDS)}", self.kind)
        a, b = finite_number("prior", self.a), finite_number("prior", self.b)
        if self.kind == "paper" and (a, b) != (0.5, 1.0):
            raise InvalidParameter("prior", "'paper' takes no parameters (it is iid-uniform:0.5,1)")
        if self.kind != "dirichlet" and not (0.0 <= a < b <= 1.0):
            raise InvalidParameter("prior", "iid-uniform bounds must satisfy 0 <= A < B <= 1", f"{a},{b}")
        if self.kind == "dirichlet" and not (a > 0 and b > 0):
            raise InvalidParameter("prior", "dirichlet concentrations AY,AW must be > 0", f"{a},{b}")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    @classmethod
    def parse(cls, spec: str | MulticlassPrior | None) -> MulticlassPrior:
        """Parse ``paper``, ``iid-uniform:A,B`` or ``dirichlet:AY,AW``."""
        if spec is None:
            return cls()
        if isinstance(spec, MulticlassPrior):
            return spec
        text = str(spec).strip()
        if text == "paper":
            return cls()
        kind, sep, rest = text.partition(":")
        if kind == "counts":
            raise InvalidParameter("prior", "'counts' is a law of the count of 1-votes: a prior for 0/1 votes "
                                            "(a job without classes), not for class labels", spec)
        parts = rest.split(",")
        if kind not in MC_PRIOR_KINDS or kind == "paper" or not sep or len(parts) != 2:
            raise InvalidParameter("prior", "must be 'paper', 'iid-uniform:A,B' or 'dirichlet:AY,AW'", spec)
        return cls(kind, finite_number("prior", parts[0]), finite_number("prior", parts[1]))

    @property
    def spec(self) -> str:
        return "paper" if self.kind == "paper" else f"{self.kind}:{self.a!r},{self.b!r}"

    def count_pmfs(self, K: int, C: int) -> tuple[np.ndarray, np.ndarray]:
        """Weights (Y, R) on 0..K such that Pr[h] ∝ Y(h_y) Π_{c≠y} R(h_c) on {Σ h = K}.

        Multinomial(K, q) is independent Poisson(K q_c) counts conditioned on the sum (Poissonisation);
        the Dirichlet-multinomial is independent NegBin(α_c, θ) counts conditioned on the sum, for any θ
        (θ = K/(K + Σα) keeps every weight ≤ 1 and the conditioning probability moderate)."""
        x = np.arange(K + 1)
        if self.kind == "dirichlet":
            theta = K / (K + self.a + (C - 1) * self.b)
            return stats.nbinom.pmf(x, self.a, 1 - theta), stats.nbinom.pmf(x, self.b, 1 - theta)
        q = 0.5 * (self.a + self.b)
        return stats.poisson.pmf(x, K * q), stats.poisson.pmf(x, K * (1 - q) / (C - 1))


@dataclass(frozen=True)
class MulticlassParams:
    """A multi-class problem: K teachers, C classes, target (ε, δ) per answer, prior for the objective."""

    K: int
    C: int
    epsilon: float
    delta: float = 0.0
    prior: MulticlassPrior = MulticlassPrior()

    def __post_init__(self) -> None:
        object.__setattr__(self, "K", integer_in("K", self.K, 1, MAX_TEACHERS))
        object.__setattr__(self, "C", integer_in("classes", self.C, 2, MAX_CLASSES))
        if self.K**3 * self.C > MAX_WORK:
            raise InvalidParameter("classes", f"K^3 * classes must be <= {MAX_WORK:.0e} (the exact prior weights "
                                   "cost O(K^3 C))", f"K={self.K}, classes={self.C}")
        eps = per_answer_epsilon(self.epsilon)
        d = probability_below_one("delta", self.delta)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", d)
        object.__setattr__(self, "prior", MulticlassPrior.parse(self.prior))

    def canonical(self) -> dict:
        return {"K": self.K, "classes": self.C, "teachers": "disjoint-nonprivate",
                "target_epsilon": self.epsilon, "delta": self.delta, "prior": self.prior.spec}

    def key(self) -> str:
        """A stable hash of the canonical parameters (the table id in the service; C is part of it)."""
        return digest(self.canonical())


# ------------------------------------------------------------------------------------------------------
# The mechanism
# ------------------------------------------------------------------------------------------------------
def top_structure(h) -> tuple[int, tuple[int, ...]]:
    """(gap g, top set T) of a histogram: g = h₍₁₎ − h₍₂₎ (0 for a tie), T = argmax set."""
    h = np.asarray(h, dtype=np.int64)
    M = int(h.max())
    T = tuple(int(c) for c in np.flatnonzero(h == M))
    if len(T) > 1:
        return 0, T
    return M - int(np.partition(h, -2)[-2]), T


def output_distribution(h, gamma) -> np.ndarray:
    """(MC-1): P(c) = (1 − γ(g))/C + γ(g)·1{c ∈ T}/|T| for one histogram h."""
    h = np.asarray(h)
    g, T = top_structure(h)
    C = h.size
    gam = float(gamma[g])
    P = np.full(C, (1.0 - gam) / C)
    P[list(T)] += gam / len(T)
    return P


def hockey_stick(P, Q, E: float) -> float:
    """(MC-2)'s left side: Σ_c max(0, P(c) − E·Q(c))."""
    return float(np.maximum(0.0, np.asarray(P) - E * np.asarray(Q)).sum())


# ------------------------------------------------------------------------------------------------------
# Neighbouring pair types
# ------------------------------------------------------------------------------------------------------
class PairType(NamedTuple):
    """A neighbouring pair's type: (gap, top-set size) on each side and the size k of T ∩ T′."""

    g: int
    t: int
    g2: int
    t2: int
    k: int

    def groups(self, C: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Group sizes (both, T only, T′ only, neither) and the membership in T and in T′."""
        n = np.array([self.k, self.t - self.k, self.t2 - self.k, C - self.t - self.t2 + self.k])
        return n, np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0])

    def reversed(self) -> PairType:
        return PairType(self.g2, self.t2, self.g, self.t, self.k)


def _fill(n: int, cap: int, rem: int) -> bool:
    """Whether n classes with counts in [0, cap] can hold exactly rem votes."""
    if n < 0 or rem < 0:
        return False
    if n == 0 or cap <= 0:
        return rem == 0
    return rem <= n * cap


def _fill_range(n: int, cap: int, rem_hi: int, rem_lo: int) -> bool:
    """Whether some rem in [rem_lo, rem_hi] (a free count moving it) can be held by n classes ≤ cap."""
    lo = max(rem_lo, 0)
    if n < 0 or rem_hi < lo:
        return False
    if n == 0 or cap <= 0:
        return lo == 0
    return lo <= n * cap


def unique_top(K: int, C: int, g: int) -> bool:
    """Some histogram has one top class and gap g ≥ 1 (top s + g, a runner-up at s, C − 2 others ≤ s)."""
    return any(_fill(C - 2, s, K - 2 * s - g) for s in range((K - g) // 2 + 1))


def tie_reachable(K: int, C: int) -> bool:
    """Some histogram has a tie for the top (gap 0)."""
    return any(_fill(C - t, M - 1, K - t * M) for t in range(2, C + 1) for M in range(1, K // t + 1))


def reachable_gaps(K: int, C: int) -> np.ndarray:
    """Boolean mask over g = 0..K of the gaps some histogram has."""
    out = np.array([unique_top(K, C, g) for g in range(K + 1)])
    out[0] = tie_reachable(K, C)
    return out


def _step_up(K: int, C: int, g: int) -> bool:
    """Type 1, g ↔ g + 1: top x = s + g and a vote moves to x from a class below the runner-up level
    (count in [1, s − 1]) or from a runner-up with r ≥ 2; or a unique runner-up gives a vote to a class
    ≤ s − 2 (the runner-up level falls by one)."""
    if C < 3:
        return False
    for s in range(0, K + 1):
        M = s + g
        rest = K - M - s
        if rest < 0:
            break
        if s >= 2 and _fill_range(C - 3, s, rest - 1, rest - (s - 1)):
            return True
        if s >= 1 and _fill(C - 3, s, rest - s):
            return True
        if s >= 2 and _fill_range(C - 3, s - 1, rest, rest - (s - 2)):
            return True
    return False


def _step_two(K: int, C: int, g: int) -> bool:
    """Type 1, g ↔ g + 2: the unique runner-up (s ≥ 1) gives a vote to the top; others ≤ s − 1."""
    return any(_fill(C - 2, s - 1, K - 2 * s - g) for s in range(1, (K - g) // 2 + 1))


def _unique_to_tie(K: int, C: int, t2: int) -> bool:
    """Type 3, (1, 1) ↔ (0, t2), k = 1: top x = s + 1 with r runner-ups at s. x gives a vote to a class b
    below: t2 = r + 1 (h_b ≤ s − 2) or r + 2 (h_b = s − 1); or a class with ≥ 1 vote gives one to a
    runner-up (t2 = 2)."""
    for s in range(1, K):
        r = t2 - 1
        if r >= 1 and s >= 2 and _fill_range(C - r - 2, s - 1, K - (s + 1) - r * s, K - (s + 1) - r * s - (s - 2)):
            return True
        r = t2 - 2
        if r >= 1 and _fill(C - r - 2, s - 1, K - (s + 1) - r * s - (s - 1)):
            return True
        if t2 == 2 and C >= 3 and _fill_range(C - 3, s, K - 2 * s - 2, K - 2 * s - 1 - s):
            return True
    return False


def _tie_shrinks(K: int, C: int, t: int) -> bool:
    """Type 4, (0, t) ↔ (0, t − 1), t ≥ 3: a top class gives a vote to a class b ≤ M − 2."""
    return t + 1 <= C and any(
        _fill_range(C - t - 1, M - 1, K - t * M, K - t * M - (M - 2)) for M in range(2, K // t + 1))


def _tie_swaps(K: int, C: int, t: int) -> bool:
    """Type 5, (0, t) ↔ (0, t), k = t − 1: a top class gives a vote to a class at M − 1."""
    return t + 1 <= C and any(_fill(C - t - 1, M - 1, K - t * M - (M - 1)) for M in range(1, K // t + 1))


def pair_types(K: int, C: int) -> list[PairType]:
    """Every type of neighbouring pair with distinct output laws, one orientation per unordered pair
    (the privacy condition is imposed in both orders). See the module docstring for the derivation."""
    out: list[PairType] = []
    for g in range(1, K + 1):
        if _step_up(K, C, g):
            out.append(PairType(g, 1, g + 1, 1, 1))
        if _step_two(K, C, g):
            out.append(PairType(g, 1, g + 2, 1, 1))
    if unique_top(K, C, 1):
        out.append(PairType(1, 1, 1, 1, 0))
    for t2 in range(2, C + 1):
        if _unique_to_tie(K, C, t2):
            out.append(PairType(1, 1, 0, t2, 1))
    if unique_top(K, C, 2):
        out.append(PairType(2, 1, 0, 2, 1))
    for t in range(3, C + 1):
        if _tie_shrinks(K, C, t):
            out.append(PairType(0, t, 0, t - 1, t - 1))
    for t in range(2, C + 1):
        if _tie_swaps(K, C, t):
            out.append(PairType(0, t, 0, t, t - 1))
    return out


def pair_type_of(h, h2) -> PairType | None:
    """The type of a concrete neighbouring pair, or None when both sides have the same (g, T)."""
    g, T = top_structure(h)
    g2, T2 = top_structure(h2)
    if g == g2 and T == T2:
        return None
    return PairType(g, len(T), g2, len(T2), len(set(T) & set(T2)))


def canonical(pt: PairType) -> PairType:
    """The orientation :func:`pair_types` lists (so that brute force and the generator compare)."""
    r = pt.reversed()
    if pt.t == 1 and pt.t2 == 1:
        return pt if pt.g <= pt.g2 else r
    if pt.t == 1 or pt.t2 == 1:
        return pt if pt.t == 1 else r
    return pt if pt.t >= pt.t2 else r


# ------------------------------------------------------------------------------------------------------
# Linear constraints (MC-2) per pair type
# ------------------------------------------------------------------------------------------------------
def pair_rows(pt: PairType, C: int, E: float, delta: float, K: int) -> tuple[np.ndarray, np.ndarray]:
    """The linear rows A γ ≤ b equivalent to (MC-2) for one pair type, both orders.

    For an order (P, P′) and a subset S of the four groups, Σ_{grp∈S} n_grp (P_grp − E P′_grp) ≤ δ with
    P_grp = 1/C + γ(g)(1{grp ⊂ T}/t − 1/C) (MC-1), i.e.
    γ(g)·Σ_S n (1{T}/t − 1/C) − E γ(g′)·Σ_S n (1{T′}/t′ − 1/C) ≤ δ + (E − 1)·n_S/C.
    (MC-2) holds iff every subset's row holds (Σ max(0, x_i) = max_S Σ_{i∈S} x_i). Rows that hold for
    every γ ∈ [0, 1]^{K+1} are dropped."""
    rows, rhs = [], []
    for a in (pt, pt.reversed()):
        n, inT, inT2 = a.groups(C)
        u = n * (inT / a.t - 1.0 / C)
        v = -E * n * (inT2 / a.t2 - 1.0 / C)
        for mask in range(1, 16):
            sel = np.array([(mask >> i) & 1 for i in range(4)], dtype=bool) & (n > 0)
            if not sel.any() or (mask != sel @ (1 << np.arange(4))):
                continue
            cu, cv = float(u[sel].sum()), float(v[sel].sum())
            b = delta + (E - 1.0) * float(n[sel].sum()) / C
            row = np.zeros(K + 1)
            row[a.g] += cu
            row[a.g2] += cv
            if np.maximum(row, 0.0).sum() <= b:
                continue
            rows.append(row)
            rhs.append(b)
    return (np.array(rows).reshape(-1, K + 1), np.array(rhs))


def type_hockey_sticks(types: list[PairType], gamma: np.ndarray, C: int, E: float) -> np.ndarray:
    """(MC-2)'s left side for every type, shape (len(types), 2): column 0 the order as listed, 1 reversed."""
    out = np.zeros((len(types), 2))
    for i, pt in enumerate(types):
        for j, a in enumerate((pt, pt.reversed())):
            n, inT, inT2 = a.groups(C)
            P = (1.0 - gamma[a.g]) / C + gamma[a.g] * inT / a.t
            Q = (1.0 - gamma[a.g2]) / C + gamma[a.g2] * inT2 / a.t2
            out[i, j] = float((n * np.maximum(0.0, P - E * Q)).sum())
    return out


# ------------------------------------------------------------------------------------------------------
# The objective: exact expected accuracy under a prior
# ------------------------------------------------------------------------------------------------------
class CappedPowers:
    """Iterates j = 0, 1, …: the arrays (first_{≤b}) * (P_{≤b})^{*j} truncated to 0..K, one row per cap
    b = −1..K (row b + 1). Memory O(K²) whatever the number of powers."""

    def __init__(self, P: np.ndarray, K: int, first: np.ndarray | None = None) -> None:
        self.P, self.K = P, K
        self.cur = np.zeros((K + 2, K + 1))
        for b in range(-1, K + 1):
            if first is None:
                self.cur[b + 1, 0] = 1.0
            else:
                self.cur[b + 1, : b + 1] = first[: b + 1]
        self.j = 0

    def step(self) -> None:
        """Convolve every row once more with its capped P (j → j + 1)."""
        K = self.K
        self.cur[0] = 0.0
        for b in range(0, K + 1):
            self.cur[b + 1] = np.convolve(self.cur[b + 1], self.P[: b + 1])[: K + 1]
        self.j += 1


def normaliser(Y: np.ndarray, R: np.ndarray, K: int, C: int) -> float:
    """Z = [Y * R^{*(C−1)}](K), the probability of Σ h = K under the independent count weights."""
    acc = Y[: K + 1].copy()
    for _ in range(C - 1):
        acc = np.convolve(acc, R[: K + 1])[: K + 1]
    return float(acc[K])


@dataclass(frozen=True)
class GapLaw:
    """The law of the top structure under a prior: for g ≥ 1, Pr[gap g, top = y] and Pr[gap g, top ≠ y];
    for ties, Pr[tie of t classes with y among them] and Pr[tie of t classes without y]."""

    top_true: np.ndarray  #: index g = 0..K (entry 0 unused)
    top_wrong: np.ndarray
    tie_true: np.ndarray  #: index t = 0..C
    tie_wrong: np.ndarray


def gap_law(K: int, C: int, prior: MulticlassPrior) -> GapLaw:
    """Exact law of (gap, is the true class y on top, tie size) for h ∝ Y(h_y) Π_{c≠y} R(h_c), Σ h = K.

    With G_j(b, n) = [(R_{≤b})^{*j}](n) and H_j(b, n) = [Y_{≤b} * (R_{≤b})^{*j}](n), Z = [Y * R^{*(C−1)}](K):
      Pr[gap g, top y]  = Σ_a Y(a) (G_{C−1}(a−g, K−a) − G_{C−1}(a−g−1, K−a)) / Z,
      Pr[gap g, top ≠ y] = (C−1) Σ_a R(a) (H_{C−2}(a−g, K−a) − H_{C−2}(a−g−1, K−a)) / Z,
      Pr[tie t, y ∈ T]  = C(C−1, t−1) Σ_a Y(a) R(a)^{t−1} G_{C−t}(a−1, K−ta) / Z,
      Pr[tie t, y ∉ T]  = C(C−1, t) Σ_a R(a)^t H_{C−1−t}(a−1, K−ta) / Z."""
    Y, R = prior.count_pmfs(K, C)
    Z = normaliser(Y, R, K, C)
    top_true, top_wrong = np.zeros(K + 1), np.zeros(K + 1)
    tie_true, tie_wrong = np.zeros(C + 1), np.zeros(C + 1)
    a = np.arange(K + 1)
    G, H = CappedPowers(R, K), CappedPowers(R, K, first=Y)
    for j in range(C):
        t = C - j  # G_j serves ties of t = C − j classes with y; H_j ties of t = C − 1 − j without y
        if 2 <= t <= C:
            aa = np.arange(1, K // t + 1)
            tie_true[t] = math.comb(C - 1, t - 1) * float((Y[aa] * R[aa] ** (t - 1)) @ G.cur[aa, K - t * aa])
        if 2 <= t - 1:
            aa = np.arange(1, K // (t - 1) + 1)
            tie_wrong[t - 1] = math.comb(C - 1, t - 1) * float((R[aa] ** (t - 1)) @ H.cur[aa, K - (t - 1) * aa])
        if j == C - 2:
            for g in range(1, K + 1):
                aa = a[a >= g]
                top_wrong[g] = (C - 1) * float(R[aa] @ (H.cur[aa - g + 1, K - aa] - H.cur[aa - g, K - aa]))
        if j == C - 1:
            for g in range(1, K + 1):
                aa = a[a >= g]
                top_true[g] = float(Y[aa] @ (G.cur[aa - g + 1, K - aa] - G.cur[aa - g, K - aa]))
        if j < C - 1:
            G.step()
            H.step()
    # differences of capped sums carry float noise of either sign where the true value is ~0
    return GapLaw(*(np.maximum(v, 0.0) / Z for v in (top_true, top_wrong, tie_true, tie_wrong)))


def top_pair_law(K: int, C: int, prior: MulticlassPrior) -> np.ndarray:
    """J[g, k] = Pr[y the unique top, gap g, h_y − h_w = k] for one fixed wrong class w (g = 1..K, k = g..K;
    row 0 and k < g are 0), for h ∝ Y(h_y) Π_{c≠y} R(h_c), Σ h = K. With a = h_y, b = h_w = a − k and
    G(m, n) = [(R_{≤m})^{*(C−2)}](n) (the other C − 2 classes, every one at most m):

      J[g, g] = Σ_a Y(a) R(a − g) G(a − g, K − 2a + g) / Z                       (w is a runner-up),
      J[g, k] = Σ_a Y(a) R(a − k) (G(a − g, n) − G(a − g − 1, n)) / Z,  n = K − 2a + k,  k > g
                                                                      (w lower, some other class at a − g),

      Z = [Y * R^{*(C−1)}](K) (:func:`gap_law`'s notation)."""
    Y, R = prior.count_pmfs(K, C)
    Z = normaliser(Y, R, K, C)
    G = CappedPowers(R, K)
    for _ in range(C - 2):
        G.step()
    a = np.arange(K + 1)[:, None]
    k = np.arange(K + 1)[None, :]
    n = K - 2 * a + k
    J = np.zeros((K + 1, K + 1))
    for g in range(1, K + 1):
        ok = (k >= g) & (a >= k) & (n >= 0)
        aa, kk = np.broadcast_to(a, ok.shape)[ok], np.broadcast_to(k, ok.shape)[ok]
        nn = n[ok]
        val = G.cur[aa - g + 1, nn] - np.where(kk > g, G.cur[aa - g, nn], 0.0)
        J[g] = np.bincount(kk, weights=Y[aa] * R[aa - kk] * val, minlength=K + 1)
    # differences of capped sums carry float noise of either sign where the true value is ~0
    return np.maximum(J, 0.0) / Z


def accuracy_weights(K: int, C: int, prior: MulticlassPrior) -> np.ndarray:
    """w with E[accuracy] = 1/C + Σ_g w_g γ(g) (from (MC-1)):
    w_g = Pr[gap g, top y] − Pr[gap g]/C for g ≥ 1, w_0 = Σ_t Pr[tie t, y ∈ T]/t − Pr[tie]/C."""
    law = gap_law(K, C, prior)
    w = law.top_true - (law.top_true + law.top_wrong) / C
    t = np.arange(C + 1)
    w[0] = float((law.tie_true[2:] / t[2:]).sum()) - float((law.tie_true + law.tie_wrong).sum()) / C
    return w


def expected_accuracy(gamma, K: int, C: int, prior: MulticlassPrior) -> float:
    """E[Pr(release = true class)] = 1/C + Σ_g w_g γ(g)."""
    return 1.0 / C + float(accuracy_weights(K, C, prior) @ np.asarray(gamma, dtype=np.float64))


def expected_error(gamma, K: int, C: int, prior: MulticlassPrior) -> float:
    """E[Pr(release ≠ true class)], summed from non-negative terms (no 1 − accuracy cancellation; the gap
    probabilities themselves are differences of capped sums, precise to ~1e-17 absolute):
    1 − P(y) = (1 − γ)(1 − 1/C) + γ(1 − 1{y ∈ T}/t), so
    E[err] = Σ_g (1 − γ_g)(1 − 1/C) Pr[gap g] + Σ_{g≥1} γ_g Pr[gap g, top ≠ y]
             + γ_0 Σ_t (Pr[tie t, y ∈ T](1 − 1/t) + Pr[tie t, y ∉ T])."""
    g = np.asarray(gamma, dtype=np.float64)
    law = gap_law(K, C, prior)
    p_gap = law.top_true + law.top_wrong
    t = np.arange(C + 1)
    p_gap[0] = float((law.tie_true + law.tie_wrong).sum())
    wrong = law.top_wrong.copy()
    wrong[0] = float((law.tie_true[2:] * (1 - 1 / t[2:])).sum() + law.tie_wrong.sum())
    return float(((1.0 - g) * (1.0 - 1.0 / C) * p_gap).sum() + (g * wrong).sum())
