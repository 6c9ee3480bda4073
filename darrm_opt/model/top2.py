"""Top-two multi-class DaRRM (PATE setting): fallback mass on the runner-up, governed by both top gaps.

Setting as :mod:`darrm_opt.model.multiclass`: K non-private teachers vote over C ≥ 3 classes, neighbouring
histograms are h′ = h − e_a + e_b.

Structure of a histogram. Order statistics v₁ ≥ v₂ ≥ v₃ (with multiplicity); T = {c : h_c = v₁}, t = |T|.
- t = 1: g₁ = v₁ − v₂ ≥ 1, R = {c : h_c = v₂} (the runner-up set), r = |R|, g₂ = v₂ − v₃ (0 when r ≥ 2);
- t = 2: g₁ = 0, g₂ = v₁ − v₃ ≥ 1 (the gap below the tied pair), R = ∅;
- t ≥ 3: g₁ = g₂ = 0, R = ∅.
The state is s = (g₁, min(g₂, G)) for a cap G ≥ 1 (a parameter of the table).

Mechanism (TT-1). A table gives p(s), q(s) ≥ 0 with p + q ≤ 1, and q(0, ·) = 0. The answer is

    P(c) = (1 − p(s) − q(s))/C + p(s)·1{c ∈ T}/t + q(s)·1{c ∈ R}/r,                        (TT-1)

i.e. with probability p a uniform class of T, with probability q a uniform class of R, else a uniform class
of all C. (For a tie at the top the tied classes share p: the rank positions 1 and 2 that they hold.)
The rule of :mod:`darrm_opt.model.multiclass` is the special case q ≡ 0, G = 1, p(g, ·) = γ(g).

Privacy (TT-2). The hockey-stick bound (MC-2) for every neighbouring pair, both orders. P depends on h only
through (s, T, R); each class has a role (T, R or O = neither) on each side, so a neighbouring pair is
described by its *type* (s, t, r, s′, t′, r′, n) with n the 3×3 matrix of role counts (role in h, role in
h′); P and P′ are constant on each of the nine groups and (MC-2) is Σ_grp n_grp max(0, P_grp − e^ε P′_grp) ≤ δ.

Derivation of the types (:func:`pair_types`). Let λ₁ > λ₂ > λ₃ be the three highest distinct counts. One
move changes two counts by one, so every order statistic moves by at most one and v′₂ ≥ v₃ ≥ λ₃,
v′₃ ≥ λ₃ − 1: the structure on both sides is decided by the classes at λ₁..λ₃ and the two moved classes a,
b. A *shape* fixes how many other classes sit at each level (m₁, m₂, m₃), where a sits (a level, or below
λ₃) and where b sits (a level, at λ₃ − 1, or lower); every other class is below λ₃ (role O on both sides).
For a shape the type is a function of the level gaps d₁ = λ₁ − λ₂, d₂ = λ₂ − λ₃ that is affine for d ≥ 4
(every comparison a move can change involves gaps ±2), computed exactly at d ∈ {1..5} and extended; a
shape with gaps (d₁, d₂) exists iff some base λ₃ = β lets the other classes, each in [0, β − 1], hold the
remaining votes (a closed-form interval test on β). Histograms with fewer than three distinct counts are
shapes with one or two levels and no class below. Checked against every histogram and move for small K, C
in tests/test_top2.py.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from darrm_opt.model.multiclass import MulticlassPrior, normaliser
from darrm_opt.model.params import digest, integer_in, per_answer_epsilon, probability_below_one

#: Largest number of classes accepted (the type derivation enumerates O(C³) shapes).
MAX_CLASSES = 16
#: Largest number of teachers accepted.
MAX_TEACHERS = 1000
#: Largest cap G accepted.
MAX_CAP = 64
#: Default cap G on the second gap.
DEFAULT_CAP = 12

T_, R_, O_ = 0, 1, 2


@dataclass(frozen=True)
class Top2Params:
    """A top-two multi-class problem: K teachers, C ≥ 3 classes, per-answer (ε, δ), prior, cap G on g₂."""

    K: int
    C: int
    epsilon: float
    delta: float = 0.0
    prior: MulticlassPrior = MulticlassPrior()
    cap: int = DEFAULT_CAP

    def __post_init__(self) -> None:
        object.__setattr__(self, "K", integer_in("K", self.K, 1, MAX_TEACHERS))
        object.__setattr__(self, "C", integer_in("classes", self.C, 3, MAX_CLASSES))
        object.__setattr__(self, "cap", integer_in("gap_cap", self.cap, 1, MAX_CAP))
        object.__setattr__(self, "epsilon", per_answer_epsilon(self.epsilon))
        object.__setattr__(self, "delta", probability_below_one("delta", self.delta))
        object.__setattr__(self, "prior", MulticlassPrior.parse(self.prior))

    @property
    def states(self) -> int:
        return (self.K + 1) * (self.cap + 1)

    def canonical(self) -> dict:
        return {"K": self.K, "classes": self.C, "teachers": "disjoint-nonprivate", "target_epsilon": self.epsilon,
                "delta": self.delta, "prior": self.prior.spec, "gap_cap": self.cap}

    def key(self) -> str:
        return digest({**self.canonical(), "rule": "top2"})


# ------------------------------------------------------------------------------------------------------
# The mechanism on a concrete histogram
# ------------------------------------------------------------------------------------------------------
def structure(h) -> tuple[int, int, tuple[int, ...], tuple[int, ...]]:
    """(g₁, g₂ uncapped, T, R) of a histogram (module docstring)."""
    h = np.asarray(h, dtype=np.int64)
    v = np.sort(h)[::-1]
    T = tuple(int(c) for c in np.flatnonzero(h == v[0]))
    if len(T) >= 3:
        return 0, 0, T, ()
    if len(T) == 2:
        return 0, int(v[0] - v[2]), T, ()
    R = tuple(int(c) for c in np.flatnonzero(h == v[1]))
    return int(v[0] - v[1]), (0 if len(R) >= 2 else int(v[1] - v[2])), T, R


def split(table, K: int, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """The flat table [p(0..K, 0..G), q(0..K, 0..G)] as two (K + 1, G + 1) arrays."""
    x = np.asarray(table, dtype=np.float64)
    S = (K + 1) * (cap + 1)
    return x[:S].reshape(K + 1, cap + 1), x[S:].reshape(K + 1, cap + 1)


def output_distribution(h, table, cap: int) -> np.ndarray:
    """(TT-1) for one histogram h."""
    h = np.asarray(h)
    C, K = h.size, int(h.sum())
    p, q = split(table, K, cap)
    g1, g2, T, R = structure(h)
    pp, qq = float(p[g1, min(g2, cap)]), float(q[g1, min(g2, cap)])
    P = np.full(C, (1.0 - pp - qq) / C)
    P[list(T)] += pp / len(T)
    if R:
        P[list(R)] += qq / len(R)
    return P


# ------------------------------------------------------------------------------------------------------
# Neighbouring pair types
# ------------------------------------------------------------------------------------------------------
#: An ordered pair type: (g1, g2, t, r, g1′, g2′, t′, r′, n_TT, n_TR, n_TO, n_RT, …, n_OO), g₂ capped.
TypeRow = tuple[int, ...]


def _struct_blocks(vals: list[int], cnts: list[int]) -> tuple[int, int, int, int, list[int]]:
    """(g₁, g₂, t, r, role per block) of blocks of ``cnts[i]`` classes at count ``vals[i]`` (≥ 3 classes)."""
    levels: dict[int, int] = {}
    for v, c in zip(vals, cnts):
        if c:
            levels[v] = levels.get(v, 0) + c
    lv = sorted(levels, reverse=True)
    t = levels[lv[0]]
    if t >= 2:
        g2 = 0 if t >= 3 else lv[0] - lv[1]
        return 0, g2, t, 0, [T_ if v == lv[0] else O_ for v in vals]
    r = levels[lv[1]]
    g2 = 0 if r >= 2 else lv[1] - lv[2]
    return lv[0] - lv[1], g2, 1, r, [T_ if v == lv[0] else R_ if v == lv[1] else O_ for v in vals]


def _shape_type(L: int, m: tuple[int, ...], apos: Any, bpos: Any, n_deep: int, d1: int, d2: int,
                beta: int) -> TypeRow | None:
    """The uncapped ordered type of one shape at gaps (d1, d2) and base β, or None if the laws agree."""
    lam = {3: [beta + d2 + d1, beta + d2, beta], 2: [beta + d1, beta], 1: [beta]}[L]
    vals = list(lam)
    cnts = list(m)
    va = lam[apos - 1] if isinstance(apos, int) else beta - 1
    vb = lam[bpos - 1] if isinstance(bpos, int) else (beta - 1 if bpos == "below" else beta - 2)
    before = _struct_blocks(vals + [va, vb], cnts + [1, 1])
    after = _struct_blocks(vals + [va - 1, vb + 1], cnts + [1, 1])
    n = np.zeros((3, 3), dtype=np.int64)
    for c, x, y in zip(cnts + [1, 1], before[4], after[4]):
        n[x, y] += c
    n[O_, O_] += n_deep
    if before[:2] == after[:2] and not (n - np.diag(np.diag(n))).any():
        return None
    return (*before[:4], *after[:4], *n.ravel().tolist())


def _shapes(C: int):
    """Every shape (L, m, apos, bpos, n_deep) for C classes (module docstring)."""
    for L in (1, 2, 3):
        apos_all: list[Any] = list(range(1, L + 1)) + (["deep"] if L == 3 else [])
        bpos_all: list[Any] = list(range(1, L + 1)) + (["below", "low"] if L == 3 else [])
        for apos in apos_all:
            for bpos in bpos_all:
                for m in itertools.product(range(C + 1), repeat=L):
                    mu = [m[i] + int(apos == i + 1) + int(bpos == i + 1) for i in range(L)]
                    if min(mu) < 1:
                        continue
                    n_deep = C - sum(m) - 2
                    if n_deep < 0 or (L < 3 and n_deep > 0):
                        continue
                    yield L, tuple(m), apos, bpos, n_deep, mu


def _feasible(K: int, L: int, mu: list[int], apos: Any, bpos: Any, n_deep: int, d1: np.ndarray,
              d2: np.ndarray) -> np.ndarray:
    """Whether some base β makes the shape a histogram with Σ h = K, for arrays of gaps (d1, d2)."""
    # fixed votes F = cb·β + c1·d1 + c2·d2 + c0 (levels, and b at λ₃ − 1)
    if L == 3:
        cb, c1, c2 = sum(mu), mu[0], mu[0] + mu[1]
    elif L == 2:
        cb, c1, c2 = sum(mu), mu[0], 0
    else:
        cb, c1, c2 = sum(mu), 0, 0
    c0 = 0
    bmin = 0
    if isinstance(apos, int) and apos == L:
        bmin = 1
    if bpos == "below":
        cb, c0, bmin = cb + 1, -1, max(bmin, 1)
    a_deep, b_low = int(apos == "deep"), int(bpos == "low")
    if a_deep or b_low:
        bmin = 2
    if n_deep:
        bmin = max(bmin, 1)
    H = a_deep + b_low + n_deep
    h0 = a_deep + 2 * b_low + n_deep
    lo = a_deep
    rest = K - c1 * d1 - c2 * d2 - c0
    U = rest - lo  # cb·β ≤ U
    V = rest + h0  # (cb + H)·β ≥ V
    hi_beta = np.floor_divide(U, cb)
    lo_beta = np.maximum(bmin, -np.floor_divide(-V, cb + H))
    return (U >= 0) & (lo_beta <= hi_beta)


@lru_cache(maxsize=8)
def _pair_types_cached(K: int, C: int, cap: int) -> tuple[np.ndarray, np.ndarray]:
    keys: dict[tuple[int, ...], list[np.ndarray]] = {}
    states = np.zeros((K + 1, cap + 1), dtype=bool)
    D = np.arange(1, K + 1)
    for L, m, apos, bpos, n_deep, mu in _shapes(C):
        d1g: np.ndarray
        d2g: np.ndarray
        if L == 3:
            d1g, d2g = (a.ravel() for a in np.meshgrid(D, D, indexing="ij"))
            keep = d1g + 2 * d2g <= K
            d1g, d2g = d1g[keep], d2g[keep]
        elif L == 2:
            d1g, d2g = D.copy(), np.zeros(K, dtype=np.int64)
        else:
            d1g, d2g = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
        ok = _feasible(K, L, mu, apos, bpos, n_deep, d1g, d2g)
        if not ok.any():
            continue
        d1g, d2g = d1g[ok], d2g[ok]
        # the type does not depend on β (module docstring): β = 2 serves every shape
        r1 = np.minimum(d1g, 4) if L >= 2 else d1g
        r2 = np.minimum(d2g, 4) if L == 3 else d2g

        shape = (L, m, apos, bpos, n_deep)

        def at(x1: int, x2: int, shape: tuple[Any, ...] = shape) -> np.ndarray | None:
            t = _shape_type(shape[0], shape[1], shape[2], shape[3], shape[4], x1, x2, 2)
            return None if t is None else np.array(t, dtype=np.int64)

        for k1, k2 in set(zip(r1.tolist(), r2.tolist())):
            sel = (r1 == k1) & (r2 == k2)
            base = at(k1, k2)
            s1 = s2 = None
            if L >= 2 and k1 == 4:
                nxt = at(5, k2)
                if (base is None) != (nxt is None):
                    raise AssertionError("shape type not affine in d1")
                s1 = None if base is None or nxt is None else nxt - base
            if L == 3 and k2 == 4:
                nxt = at(k1, 5)
                if (base is None) != (nxt is None):
                    raise AssertionError("shape type not affine in d2")
                s2 = None if base is None or nxt is None else nxt - base
            if base is None:
                continue
            block = np.repeat(base[None, :], int(sel.sum()), axis=0)
            if s1 is not None:
                block += (d1g[sel] - 4)[:, None] * s1[None, :]
            if s2 is not None:
                block += (d2g[sel] - 4)[:, None] * s2[None, :]
            block[:, 1] = np.minimum(block[:, 1], cap)
            block[:, 5] = np.minimum(block[:, 5], cap)
            states[block[:, 0], block[:, 1]] = True
            states[block[:, 4], block[:, 5]] = True
            # within a block only the gaps vary: key them as one integer per (t, r, t′, r′, n)
            head = (int(base[2]), int(base[3]), int(base[6]), int(base[7]), *base[8:].tolist())
            diag = not (base[8:].reshape(3, 3) - np.diag(np.diag(base[8:].reshape(3, 3)))).any()
            key = ((block[:, 0] * 128 + block[:, 1]) * 2048 + block[:, 4]) * 128 + block[:, 5]
            if diag:  # a move inside a capped state that keeps every role is no pair
                key = key[(block[:, 0] != block[:, 4]) | (block[:, 1] != block[:, 5])]
            keys.setdefault(head, []).append(key)
    parts = []
    for head, ks in keys.items():
        k = np.unique(np.concatenate(ks))
        g = np.stack([k >> 25, (k >> 18) & 127, (k >> 7) & 2047, k & 127], axis=1)
        rows_h = np.empty((k.size, 17), dtype=np.int64)
        rows_h[:, [0, 1, 4, 5]] = g
        rows_h[:, [2, 3, 6, 7]] = head[:4]
        rows_h[:, 8:] = head[4:]
        parts.append(rows_h)
    out = np.unique(np.concatenate(parts), axis=0) if parts else np.zeros((0, 17), dtype=np.int64)
    out.setflags(write=False)
    states.setflags(write=False)
    return out, states


def pair_types(K: int, C: int, cap: int) -> np.ndarray:
    """Every ordered neighbouring pair type with distinct output laws, one row each (``TypeRow``)."""
    return _pair_types_cached(K, C, cap)[0]


def reachable_states(K: int, C: int, cap: int) -> np.ndarray:
    """Boolean (K + 1, G + 1): the states some histogram with a neighbour has."""
    return _pair_types_cached(K, C, cap)[1]


def pair_type_of(h, h2, cap: int) -> TypeRow | None:
    """The ordered type of a concrete neighbouring pair, or None when the laws agree."""
    a1, a2, T, R = structure(h)
    b1, b2, T2, R2 = structure(h2)
    C = len(h)

    def role(c: int, T: tuple, R: tuple) -> int:
        return T_ if c in T else R_ if c in R else O_

    n = np.zeros((3, 3), dtype=np.int64)
    for c in range(C):
        n[role(c, T, R), role(c, T2, R2)] += 1
    s, s2 = (a1, min(a2, cap)), (b1, min(b2, cap))
    if s == s2 and not (n - np.diag(np.diag(n))).any():
        return None
    return (s[0], s[1], len(T), len(R), s2[0], s2[1], len(T2), len(R2), *n.ravel().tolist())


# ------------------------------------------------------------------------------------------------------
# Group laws of the types: P_grp = 1/C + p·aT + q·aR per role
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TypeArrays:
    """Vectorised types: state indices (into the flat table) and per-group coefficients (pairs, 9)."""

    n: np.ndarray
    s: np.ndarray  #: flat state index of h
    s2: np.ndarray  #: of h′
    aT: np.ndarray  #: coefficient of p(s) in P_grp
    aR: np.ndarray  #: of q(s)
    bT: np.ndarray  #: of p(s′) in P′_grp
    bR: np.ndarray
    rows: np.ndarray


def type_arrays(types: np.ndarray, C: int, cap: int) -> TypeArrays:
    """P_grp = 1/C + p(s)·aT + q(s)·aR with aT = 1{role T}/t − 1/C, aR = 1{role R}/r − 1/C (TT-1)."""
    ty = np.asarray(types, dtype=np.int64)
    n = ty[:, 8:].astype(np.float64)
    role_b = np.repeat(np.arange(3), 3)[None, :]
    role_a = np.tile(np.arange(3), 3)[None, :]
    t, r = ty[:, 2:3].astype(float), np.maximum(ty[:, 3:4], 1).astype(float)
    t2, r2 = ty[:, 6:7].astype(float), np.maximum(ty[:, 7:8], 1).astype(float)
    aT = (role_b == T_) / t - 1.0 / C
    aR = (role_b == R_) / r - 1.0 / C
    bT = (role_a == T_) / t2 - 1.0 / C
    bR = (role_a == R_) / r2 - 1.0 / C
    s = ty[:, 0] * (cap + 1) + ty[:, 1]
    s2 = ty[:, 4] * (cap + 1) + ty[:, 5]
    return TypeArrays(n, s, s2, aT, aR, bT, bR, ty)


def group_laws(ta: TypeArrays, table, K: int, C: int, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """(P_grp, P′_grp), each (pairs, 9), in float64."""
    x = np.asarray(table, dtype=np.float64)
    S = (K + 1) * (cap + 1)
    p, q = x[:S], x[S:]
    P = 1.0 / C + p[ta.s][:, None] * ta.aT + q[ta.s][:, None] * ta.aR
    Q = 1.0 / C + p[ta.s2][:, None] * ta.bT + q[ta.s2][:, None] * ta.bR
    return P, Q


def hockey_sticks(ta: TypeArrays, table, K: int, C: int, cap: int, E: float) -> np.ndarray:
    """(TT-2)'s left side for every ordered type."""
    P, Q = group_laws(ta, table, K, C, cap)
    return (ta.n * np.maximum(0.0, P - E * Q)).sum(axis=1)


# ------------------------------------------------------------------------------------------------------
# The objective: the exact law of (state, role of the true class)
# ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StateLaw:
    """Per state (K + 1, G + 1): Pr[s], A_T = E[1{s}(1 − 1{y ∈ T}/t)], A_R = E[1{s}(1 − 1{y ∈ R}/r)]."""

    prob: np.ndarray
    miss_T: np.ndarray
    miss_R: np.ndarray


def _capped_tables(P: np.ndarray, K: int, first: np.ndarray | None, upto: int) -> list[np.ndarray]:
    """[(first_{≤b}) * (P_{≤b})^{*j}](n) for j = 0..upto as arrays (K + 2, K + 1), row b + 1 = cap b."""
    cur = np.zeros((K + 2, K + 1))
    for b in range(-1, K + 1):
        if first is None:
            cur[b + 1, 0] = 1.0
        else:
            cur[b + 1, : b + 1] = first[: b + 1]
    out = [cur.copy()]
    for _ in range(upto):
        cur[0] = 0.0
        for b in range(0, K + 1):
            cur[b + 1] = np.convolve(cur[b + 1], P[: b + 1])[: K + 1]
        out.append(cur.copy())
    return out


def state_law(K: int, C: int, cap: int, prior: MulticlassPrior) -> StateLaw:
    """Exact law for h ∝ Y(h_y) Π_{c≠y} R(h_c), Σ h = K (the prior of :mod:`darrm_opt.model.multiclass`).

    With G_j(b, n) = [(R_{≤b})^{*j}](n), H_j(b, n) = [Y_{≤b} * (R_{≤b})^{*j}](n), W = C − 1 and "exactly v"
    differences E_j(v, n) = G_j(v, n) − G_j(v − 1, n) (likewise E^H), summed over the top count M:
      unique top M, unique runner-up s, rest max v (g₁ = M − s, g₂ = s − v):
        y top: Y(M)·W R(s)·E_{C−2}(v, K−M−s); y runner-up: W R(M) Y(s) E_{C−2}; y other:
        W(W−1) R(M) R(s) E^H_{C−3}(v, K−M−s);
      unique top M, r ≥ 2 runner-ups at s, rest ≤ s − 1 (g₂ = 0):
        y top: Y(M) C(W, r) R(s)^r G_{C−1−r}(s−1, ·); y runner-up: W R(M) C(W−1, r−1) Y(s) R(s)^{r−1} G_{C−1−r};
        y other: W R(M) C(W−1, r) R(s)^r H_{C−2−r}(s−1, ·);
      tie of 2 at M, rest max v (g₂ = M − v): y in T: W Y(M) R(M) E_{C−2}(v, K−2M);
        y not: C(W, 2) R(M)² E^H_{C−3}(v, K−2M);
      tie of t ≥ 3 at M, rest ≤ M − 1: C(W, t−1) Y(M) R(M)^{t−1} G_{C−t}(M−1, ·) and
        C(W, t) R(M)^t H_{C−1−t}(M−1, ·);
    all divided by Z = [Y * R^{*(C−1)}](K). A g₂ ≥ G is summed as "rest ≤ s − G"."""
    Y, Rw = prior.count_pmfs(K, C)
    Z = normaliser(Y, Rw, K, C)
    W = C - 1
    G = _capped_tables(Rw, K, None, C - 1)
    H = _capped_tables(Rw, K, Y, C - 1)
    shape = (K + 1, cap + 1)
    prob, mT, mR = np.zeros(shape), np.zeros(shape), np.zeros(shape)

    def upto(tab: np.ndarray, b: int, n: np.ndarray) -> np.ndarray:
        """tab at cap b (b ≥ −1) for the totals n (0 where n < 0)."""
        out = np.zeros(n.shape)
        ok = n >= 0
        out[ok] = tab[b + 1, n[ok]]
        return out

    def add_top(s: int, M: np.ndarray, g2c: int, w_top, w_run, w_oth, r: int) -> None:
        g1 = M - s
        prob[g1, g2c] += w_top + w_run + w_oth
        mT[g1, g2c] += w_run + w_oth
        mR[g1, g2c] += w_top + w_run * (1 - 1 / r) + w_oth

    GE, HE = G[C - 2], H[C - 3]
    for s in range(0, K + 1):
        M = np.arange(s + 1, K - s + 1)
        if M.size == 0:
            break
        n = K - M - s
        # unique runner-up at s, the rest's maximum exactly v = s − g₂ (g₂ < G) or ≤ s − G (g₂ ≥ G)
        for g2 in range(1, min(s, cap) + 1):
            v = s - g2
            if g2 < cap:
                eG = np.maximum(upto(GE, v, n) - upto(GE, v - 1, n), 0.0)
                eH = np.maximum(upto(HE, v, n) - upto(HE, v - 1, n), 0.0)
            else:
                eG, eH = upto(GE, v, n), upto(HE, v, n)
            add_top(s, M, g2, Y[M] * W * Rw[s] * eG, W * Rw[M] * Y[s] * eG,
                    W * (W - 1) * Rw[M] * Rw[s] * eH, 1)
        # r ≥ 2 runner-ups at s, the rest ≤ s − 1
        for r in range(2, C):
            n = K - M - r * s
            if not (n >= 0).any():
                break
            g = upto(G[C - 1 - r], s - 1, n)
            hh = upto(H[C - 2 - r], s - 1, n) if r <= C - 2 else np.zeros(n.shape)
            add_top(s, M, 0, Y[M] * math.comb(W, r) * Rw[s] ** r * g,
                    W * Rw[M] * math.comb(W - 1, r - 1) * Y[s] * Rw[s] ** (r - 1) * g,
                    W * Rw[M] * math.comb(W - 1, r) * Rw[s] ** r * hh, r)
    # a tie of two at M, the rest's maximum exactly v = M − g₂
    for top in range(1, K // 2 + 1):
        nn = np.array([K - 2 * top])
        for g2 in range(1, min(top, cap) + 1):
            vv = top - g2
            if g2 < cap:
                e_g = max(float((upto(GE, vv, nn) - upto(GE, vv - 1, nn))[0]), 0.0)
                e_h = max(float((upto(HE, vv, nn) - upto(HE, vv - 1, nn))[0]), 0.0)
            else:
                e_g, e_h = float(upto(GE, vv, nn)[0]), float(upto(HE, vv, nn)[0])
            wt, wo = W * Y[top] * Rw[top] * e_g, math.comb(W, 2) * Rw[top] ** 2 * e_h
            prob[0, g2] += wt + wo
            mT[0, g2] += wt * 0.5 + wo
            mR[0, g2] += wt + wo
    # a tie of t ≥ 3 at M, the rest ≤ M − 1
    for t in range(3, C + 1):
        for top in range(1, K // t + 1):
            nn = np.array([K - t * top])
            wt = math.comb(W, t - 1) * Y[top] * Rw[top] ** (t - 1) * float(upto(G[C - t], top - 1, nn)[0])
            wo = (math.comb(W, t) * Rw[top] ** t * float(upto(H[C - 1 - t], top - 1, nn)[0])) if t <= W else 0.0
            prob[0, 0] += wt + wo
            mT[0, 0] += wt * (1 - 1 / t) + wo
            mR[0, 0] += wt + wo
    return StateLaw(prob / Z, mT / Z, mR / Z)


def expected_error(table, K: int, C: int, cap: int, prior: MulticlassPrior, law: StateLaw | None = None) -> float:
    """E[Pr(answer ≠ y)] from non-negative terms: 1 − P(y) = (1 − p − q)(1 − 1/C) + p(1 − 1{y∈T}/t)
    + q(1 − 1{y∈R}/r), so E[err] = Σ_s (1 − p − q)(1 − 1/C) Pr[s] + p A_T(s) + q A_R(s)."""
    law = law or state_law(K, C, cap, prior)
    p, q = split(table, K, cap)
    return float((np.maximum(0.0, 1.0 - p - q) * (1 - 1 / C) * law.prob + p * law.miss_T + q * law.miss_R).sum())
