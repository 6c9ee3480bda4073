"""Validated, immutable problem parameters.

All user input (CLI flags, JSON bodies, table files) goes through :class:`Params` and :class:`Prior`, which
validate once and are frozen afterwards; everything downstream can trust them.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from darrm_opt.errors import InvalidParameter

if TYPE_CHECKING:
    import numpy as np

PRIOR_KINDS = ("paper", "iid-uniform", "common-uniform", "beta", "counts")
#: a ``counts:`` prior's weights must sum to 1 within this (they are then divided by their sum)
COUNTS_TOLERANCE = 1e-9


def finite_number(name: str, value: object) -> float:
    """``value`` as a finite float, or InvalidParameter naming ``name``."""
    if isinstance(value, bool):
        raise InvalidParameter(name, "must be a number", value)
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameter(name, "must be a number", value) from None
    if not math.isfinite(x):
        raise InvalidParameter(name, "must be finite", value)
    return x


def integer_in(name: str, value: object, lo: int, hi: int | None = None, *, odd: bool = False) -> int:
    """``value`` as an int in [lo, hi] (odd when ``odd``): one rule for K, C and every count, in messages and
    on the wire. Accepts an int, a numpy integer, an integral float or a numeric string (a CLI flag); never a
    bool."""
    what = f"an odd integer >= {lo}" if odd else f"an integer >= {lo}"
    if hi is not None:
        what = f"{'an odd integer' if odd else 'an integer'} in [{lo}, {hi}]"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) and not hasattr(value, "__index__"):
        raise InvalidParameter(name, f"must be {what}", value)
    try:
        n = int(value)
        integral = float(n) == float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidParameter(name, f"must be {what}", value) from None
    if not integral or n < lo or (hi is not None and n > hi) or (odd and n % 2 == 0):
        raise InvalidParameter(name, f"must be {what}", value)
    return n


def per_answer_epsilon(value: object, name: str = "target_epsilon") -> float:
    """A per-answer ε: a finite number with 0 < ε ≤ 700 (e^ε stays finite)."""
    eps = finite_number(name, value)
    if not 0 < eps <= 700:
        raise InvalidParameter(name, f"must satisfy 0 < {name} <= 700", value)
    return eps


def probability_below_one(name: str, value: object, lower: float = 0.0, lower_name: str = "0") -> float:
    """A δ: a finite number with ``lower`` <= δ < 1."""
    d = finite_number(name, value)
    if not lower <= d < 1:
        raise InvalidParameter(name, f"must satisfy {lower_name} <= {name} < 1", value)
    return d


def parse_float_list(text: str, name: str) -> list[float]:
    """``"1,3,5"`` → [1.0, 3.0, 5.0]; InvalidParameter(name, ...) for anything else."""
    parts = [s.strip() for s in str(text).split(",") if s.strip()]
    if not parts:
        raise InvalidParameter(name, "must be a comma-separated list of numbers", text)
    return [finite_number(name, s) for s in parts]


def parse_values(name: str, text: str, *, integer: bool = False, odd: bool = False) -> list[float]:
    """Parse ``"1,3,5"`` or ranges ``"11..31"`` (step 1, or 2 for odd values) into a sorted list."""
    out: set[float] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if ".." in part:
                lo_s, hi_s = part.split("..", 1)
                lo, hi = int(lo_s), int(hi_s)
                if hi < lo:
                    raise ValueError
                out.update(v for v in range(lo, hi + 1) if not odd or v % 2 == 1)
            else:
                v = float(part)
                if integer and not v.is_integer():
                    raise ValueError
                out.add(int(v) if integer else v)
        except ValueError:
            raise InvalidParameter(name, "must be a comma-separated list of numbers or ranges A..B", part) from None
    if not out:
        raise InvalidParameter(name, "needs at least one value", text)
    return sorted(out)


def parse_counts(text: str, spec: object) -> tuple[tuple[int, int, float], ...]:
    """The items of a ``counts:`` prior, ``L=W`` or ``A..B=W`` separated by commas, as (A, B, W) (L = A = B);
    InvalidParameter naming ``prior`` for anything else (the weights' rules are checked by :class:`Prior`)."""
    items = []
    for part in text.split(","):
        where, eq, weight = part.strip().partition("=")
        lo_s, dots, hi_s = where.strip().partition("..")
        if not eq:
            raise InvalidParameter("prior", "a 'counts' item is L=W or A..B=W (e.g. counts:225=0.9,126..224=0.1)",
                                   spec)
        lo = integer_in("prior", lo_s.strip(), 0)
        hi = integer_in("prior", hi_s.strip(), 0) if dots else lo
        items.append((lo, hi, finite_number("prior", weight.strip())))
    return tuple(items)


def digest(doc: dict) -> str:
    """A stable hash of a JSON document: SHA-256 (first 128 bits, hex) of its canonical text (sorted keys,
    no spaces, floats as their shortest round-trip repr; NaN and infinities refused). Parameter keys and
    table ids are such digests."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Prior:
    """Distribution of the teachers' probabilities of voting 1, used by the objective (App. C.1).

    - ``paper``: p_i i.i.d. Uniform[0.5, 1] (the paper's prior; exactly Binomial(K, 0.75) weights);
    - ``iid-uniform:A,B``: p_i i.i.d. Uniform[A, B];
    - ``common-uniform:A,B``: one p ~ Uniform[A, B] shared by every teacher;
    - ``beta:A,B``: one p ~ Beta(A, B) shared by every teacher (A > B > 0: the teachers lean to the label,
      e.g. ``beta:9,1``); L is beta-binomial. p < ½ has positive probability, so the error counted is
      Pr[answer ≠ label] − Pr[majority ≠ label] (the absolute error less the noiseless majority's own,
      a constant of the prior; ties of an even K broken uniformly), which is linear in E[α].
    - ``counts:ITEM,ITEM,...``: the law of L (the number of 1-votes, 1 the label) written out: an item
      ``L=W`` puts weight W on L, ``A..B=W`` spreads W uniformly over L = A..B (weights of overlapping
      items add), e.g. ``counts:225=0.9,126..224=0.1``. Weights ≥ 0 summing to 1 within COUNTS_TOLERANCE
      (then divided by their sum); every L ≤ K, checked when K is known (:meth:`check_K`: a job, a
      table). The error counted is the ``beta`` prior's, Pr[answer ≠ 1] − Pr[majority ≠ 1]: Pr[answer ≠
      majority] when every L > K/2.
    """

    kind: str = "paper"
    a: float = 0.5
    b: float = 1.0
    #: a ``counts`` prior's items (A, B, W): weight W spread uniformly over L = A..B; () for other kinds
    counts: tuple[tuple[int, int, float], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in PRIOR_KINDS:
            raise InvalidParameter("prior", f"must be one of {', '.join(PRIOR_KINDS)}", self.kind)
        if self.kind == "counts":
            self._check_counts()
            return
        if self.counts:
            raise InvalidParameter("prior", f"'{self.kind}' takes no counts", self.counts)
        a = finite_number("prior", self.a)
        b = finite_number("prior", self.b)
        if self.kind == "paper" and (a, b) != (0.5, 1.0):
            raise InvalidParameter("prior", "'paper' takes no bounds (it is Uniform[0.5, 1])")
        if self.kind == "beta":
            if not (a > b > 0):
                raise InvalidParameter("prior", "beta concentrations must satisfy A > B > 0", f"{a},{b}")
        elif not (0.5 <= a < b <= 1.0):
            raise InvalidParameter("prior", "bounds must satisfy 0.5 <= A < B <= 1", f"{a},{b}")
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    def _check_counts(self) -> None:
        if (self.a, self.b) != (0.5, 1.0):
            raise InvalidParameter("prior", "'counts' takes no bounds, only its items L=W or A..B=W")
        items = []
        for item in self.counts:
            if not isinstance(item, tuple) or len(item) != 3:
                raise InvalidParameter("prior", "a 'counts' item is (A, B, W)", item)
            lo = integer_in("prior", item[0], 0)
            hi = integer_in("prior", item[1], 0)
            w = finite_number("prior", item[2])
            if hi < lo:
                raise InvalidParameter("prior", "a 'counts' range A..B needs A <= B", f"{lo}..{hi}")
            if w < 0:
                raise InvalidParameter("prior", "'counts' weights must be >= 0", w)
            items.append((lo, hi, w))
        if not items:
            raise InvalidParameter("prior", "'counts' needs at least one item L=W or A..B=W", self.counts)
        total = math.fsum(w for _, _, w in items)
        if not abs(total - 1.0) <= COUNTS_TOLERANCE:
            raise InvalidParameter("prior", f"'counts' weights must sum to 1 (within {COUNTS_TOLERANCE:g})", total)
        object.__setattr__(self, "counts", tuple(items))

    def check_K(self, K: int) -> Prior:
        """``self`` if it can describe K votes (a ``counts`` prior: every L ≤ K); InvalidParameter naming
        ``prior`` otherwise."""
        if self.kind == "counts":
            top = max(hi for _, hi, _ in self.counts)
            if top > K:
                raise InvalidParameter("prior", f"'counts' puts weight on L = {top} > K = {K} (L counts the "
                                                f"1-votes of the K teachers: 0 <= L <= K)", self.spec)
        return self

    def count_pmf(self, K: int) -> np.ndarray:
        """A ``counts`` prior's Pr[L = l], l = 0..K: each item's weight W/(B − A + 1) added over its range in the
        items' order (elementwise, the same floats on every machine), divided by the weights' math.fsum."""
        import numpy as np

        self.check_K(K)
        total = math.fsum(w for _, _, w in self.counts)
        out = np.zeros(K + 1)
        for lo, hi, w in self.counts:
            out[lo : hi + 1] += w / (hi - lo + 1)
        return out / total

    @classmethod
    def parse(cls, spec: str | Prior | None) -> Prior:
        """Parse ``paper``, ``iid-uniform:A,B``, ``common-uniform:A,B``, ``beta:A,B`` or
        ``counts:L=W,A..B=W,...``."""
        if spec is None:
            return cls()
        if isinstance(spec, Prior):
            return spec
        if not isinstance(spec, str):
            raise InvalidParameter("prior", "must be a string such as 'paper' or 'iid-uniform:0.7,1'", spec)
        text = spec.strip()
        if text == "paper":
            return cls()
        kind, sep, rest = text.partition(":")
        if kind not in PRIOR_KINDS or kind == "paper" or not sep:
            raise InvalidParameter(
                "prior", "must be 'paper', 'iid-uniform:A,B', 'common-uniform:A,B', 'beta:A,B' or "
                "'counts:L=W,A..B=W,...'", spec
            )
        if kind == "counts":
            return cls("counts", counts=parse_counts(rest, spec))
        parts = rest.split(",")
        if len(parts) != 2:
            raise InvalidParameter("prior", f"'{kind}' takes two bounds A,B", spec)
        return cls(kind, finite_number("prior", parts[0]), finite_number("prior", parts[1]))

    @property
    def spec(self) -> str:
        """Canonical text form, the inverse of :meth:`parse`."""
        if self.kind == "paper":
            return "paper"
        if self.kind == "counts":
            return "counts:" + ",".join(f"{lo}={w!r}" if lo == hi else f"{lo}..{hi}={w!r}"
                                        for lo, hi, w in self.counts)
        return f"{self.kind}:{self.a!r},{self.b!r}"

    def __str__(self) -> str:
        return self.spec


@dataclass(frozen=True)
class Params:
    """One DaRRM problem: K teachers, each (ε, Δ)-DP; target (mε, δ)-DP.

    Rules: K odd ≥ 1; 1 ≤ m ≤ K (real); ε > 0; 0 ≤ Δ < 1; Δ ≤ δ < 1. δ defaults to 1 − (1 − Δ)^m, the
    paper's comparison setting.
    """

    K: int
    m: float
    epsilon: float = 0.1
    teacher_delta: float = 1e-5
    delta: float | None = None
    prior: Prior = field(default_factory=Prior)

    if TYPE_CHECKING:  # the constructor also takes a prior spec string ("paper", "iid-uniform:A,B")
        def __init__(self, K: int, m: float, epsilon: float = 0.1, teacher_delta: float = 1e-5,
                     delta: float | None = None, prior: Prior | str = ...) -> None: ...

    def __post_init__(self) -> None:
        K_int = integer_in("K", self.K, 1, odd=True)
        m = finite_number("m", self.m)
        if not (1.0 <= m <= K_int):
            raise InvalidParameter("m", f"must satisfy 1 <= m <= K (K = {K_int})", self.m)
        eps = finite_number("epsilon", self.epsilon)
        if eps <= 0:
            raise InvalidParameter("epsilon", "must be > 0", self.epsilon)
        if m * eps > 700:
            raise InvalidParameter("epsilon", "m * epsilon must be <= 700 (e^(m*epsilon) overflows)", m * eps)
        tdelta = probability_below_one("teacher_delta", self.teacher_delta)
        if self.delta is None:
            delta = -math.expm1(m * math.log1p(-tdelta))
            delta = max(delta, tdelta)
        else:
            delta = probability_below_one("delta", self.delta, tdelta, "teacher_delta")
        object.__setattr__(self, "K", K_int)
        object.__setattr__(self, "m", m)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "teacher_delta", tdelta)
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "prior", Prior.parse(self.prior))

    # Derived quantities -------------------------------------------------------------------------------
    @property
    def pure(self) -> bool:
        """True when the teachers are pure ε-DP (Δ = 0): 4 corners instead of 8."""
        return self.teacher_delta == 0.0

    @property
    def n_free(self) -> int:
        """Number of free values of a symmetric γ: γ((K+1)/2), ..., γ(K)."""
        return (self.K + 1) // 2

    @property
    def bound(self) -> float:
        """The privacy budget of Lemma 3.4, e^{mε} − 1 + 2δ (float64)."""
        return math.expm1(self.m * self.epsilon) + 2.0 * float(self.delta)  # type: ignore[arg-type]

    @property
    def m_is_integer(self) -> bool:
        return float(self.m).is_integer()

    def canonical(self) -> dict:
        """The parameters as a canonical JSON-ready dict (floats as exact repr)."""
        return {
            "K": self.K,
            "m": self.m,
            "epsilon": self.epsilon,
            "teacher_delta": self.teacher_delta,
            "delta": self.delta,
            "prior": self.prior.spec,
        }

    def key(self) -> str:
        """A stable hash of the canonical parameters (the table id in the service)."""
        return digest(self.canonical())
