"""Who the teachers are, and what one record can change: the three teacher settings.

DaRRM's guarantee (Lemma 3.4) is for K (ε, Δ)-DP mechanisms that all see the *same* data (``shared``, the
paper's setting). When the teachers are trained on *disjoint* shards, one record reaches one teacher:

- ``disjoint-private``: each teacher is (ε, Δ)-DP on its own shard. By parallel composition, releasing all
  K teachers (hence any number of answers computed from them, the plain majority included) is (ε, Δ)-DP in
  total. The teachers' own (ε, Δ) caps the total cost; the plain majority (γ ≡ 1) is free of further cost.
- ``disjoint-nonprivate`` (the PATE setting): the teachers are not private, but a neighbouring dataset
  changes one teacher's vote, so the vote count L moves by at most one: l → l ± 1. DaRRM_γ outputs 1
  with probability P₁(l) = ½ + ½ h_l, h_l = s_l γ(l) (s_l = −1 below K/2, +1 above), and it is (ε, δ)-DP
  iff for every neighbouring pair (l, l′), |l − l′| = 1, and each output

      output 1:   h_l − e^ε h_{l′} ≤ e^ε − 1 + 2δ,
      output 0:  −h_l + e^ε h_{l′} ≤ e^ε − 1 + 2δ

  (Pr[o | l] ≤ e^ε Pr[o | l′] + δ, with Pr[0 | l] = ½ − ½ h_l), 4K linear constraints in all. The
  smallest δ for which a given γ is (ε, δ)-DP is therefore δ(ε) = max(0, max_rows cost − (e^ε − 1)) / 2.

Even K (PATE setting). At the tie L = K/2 the majority is undefined; it is broken uniformly, as GNMax breaks
the tie of two equal counts (N₁ − N₂ is symmetric, so Pr[1 | L = K/2] = ½): the answer is a fair coin
whatever γ(K/2), i.e. s_{K/2} = 0 and h_{K/2} = 0. A table states γ(K/2) = 0 (the one value with that
meaning). Every row above holds with h_{K/2} = 0, and the error is counted against the uniformly broken tie:
the tie contributes nothing to Pr[answer ≠ majority] − Pr[coin ≠ majority] (its weight α_{K/2} − α_{K/2} = 0
in :func:`darrm_opt.model.objective.margin_weights`), exactly as for GNMax.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from darrm_opt.errors import InvalidParameter
from darrm_opt.model.params import Prior, digest, integer_in, per_answer_epsilon, probability_below_one

#: The teacher settings, the paper's first.
TEACHER_SETTINGS = ("shared", "disjoint-private", "disjoint-nonprivate")

#: What each setting means for the guarantee (shown by ``solve`` and ``compare`` and returned by the library).
SETTING_NOTES = {
    "shared": "teachers all see the same data, each (ε, Δ)-DP: DaRRM's (mε, δ) guarantee per answer "
              "(Lemma 3.4), answers compose",
    "disjoint-private": "teachers on disjoint shards, each (ε, Δ)-DP: by parallel composition releasing every "
                        "teacher, hence any number of answers (the plain majority included), is (ε, Δ)-DP in "
                        "total; the teachers' (ε, Δ) caps the total and the plain majority γ ≡ 1 is free",
    "disjoint-nonprivate": "non-private teachers on disjoint shards (PATE): one record moves the vote count by "
                           "at most one (l → l ± 1); γ is optimised for a per-answer (ε, δ) given directly",
}


def parse_teachers(value: object) -> str:
    """A teacher setting name from :data:`TEACHER_SETTINGS`."""
    text = getattr(value, "value", value)
    if text not in TEACHER_SETTINGS:
        raise InvalidParameter("teachers", f"must be one of {', '.join(TEACHER_SETTINGS)}", value)
    return str(text)


#: The options that state the teachers' privacy (shared data or private shards) and the one that states a
#: per-answer ε directly (non-private teachers); canonical names, as the API's fields spell them.
TEACHER_PRIVACY_OPTIONS = ("m", "epsilon", "teacher_delta")
PER_ANSWER_OPTION = "target_epsilon"


def cli_spelling(name: str) -> str:
    """``teacher_delta`` → ``teacher-delta`` (the command line's spelling of an option, as its errors name it)."""
    return name.replace("_", "-")


def check_setting_options(teachers: str, given: Iterable[str],
                          spell: Callable[[str], str] = lambda name: name, *, target_needed: bool = True,
                          m_needed: bool = False) -> str:
    """The one rule on which privacy options a teacher setting takes; returns the parsed setting.

    ``given``: the canonical names the user stated explicitly (defaults not included). Rules:
    ``disjoint-nonprivate`` (PATE) takes none of :data:`TEACHER_PRIVACY_OPTIONS` (its teachers are not
    private, there is no allowance m) and needs ``target_epsilon``; ``shared`` and ``disjoint-private``
    do not take ``target_epsilon`` (their per-answer ε is m·ε) and need ``m`` where ``m_needed`` (a
    problem to solve, not a plan). ``target_needed`` False: a caller that
    chooses the per-answer ε itself (``plan``). The error names the option as ``spell`` writes it
    (:func:`cli_spelling` on the command line, the field name in the API).
    """
    teachers = parse_teachers(teachers)
    stated = set(given)
    if teachers == "disjoint-nonprivate":
        for name in TEACHER_PRIVACY_OPTIONS:
            if name in stated:
                per_answer = (f"the per-answer ε is {spell(PER_ANSWER_OPTION)}, δ is {spell('delta')}" if target_needed
                              else "the per-answer (ε, δ) is planned")
                raise InvalidParameter(spell(name), "does not apply with teachers disjoint-nonprivate (non-private "
                                       f"teachers have no m and no (ε, Δ); {per_answer})")
        if target_needed and PER_ANSWER_OPTION not in stated:
            raise InvalidParameter(spell(PER_ANSWER_OPTION), "is required with teachers disjoint-nonprivate "
                                   "(the per-answer ε)")
    else:
        if PER_ANSWER_OPTION in stated:
            raise InvalidParameter(spell(PER_ANSWER_OPTION), f"applies only with teachers disjoint-nonprivate (with "
                                   f"{teachers} the per-answer ε follows from the teachers' {spell('epsilon')})")
        if m_needed and "m" not in stated:
            raise InvalidParameter(spell("m"), f"is required (1 <= m <= K) with teachers {teachers}")
    return teachers


@dataclass(frozen=True)
class SettingNote:
    """The teacher setting of a result and what it implies; ``cap`` is the total (ε, Δ) where one applies."""

    teachers: str
    note: str
    cap: tuple[float, float] | None = None

    def to_dict(self) -> dict:
        cap = None if self.cap is None else {"epsilon": self.cap[0], "delta": self.cap[1]}
        return {"teachers": self.teachers, "note": self.note, "total_cap": cap}


def setting_note(teachers: str, epsilon: float | None = None, teacher_delta: float | None = None) -> SettingNote:
    """The :class:`SettingNote` of ``teachers``; ``disjoint-private`` carries the cap (ε, Δ)."""
    teachers = parse_teachers(teachers)
    cap = None
    if teachers == "disjoint-private":
        if epsilon is None or teacher_delta is None:
            raise InvalidParameter("teachers", "disjoint-private needs the teachers' epsilon and teacher_delta")
        cap = (float(epsilon), float(teacher_delta))
    return SettingNote(teachers, SETTING_NOTES[teachers], cap)


@dataclass(frozen=True)
class PateParams:
    """One PATE-setting problem: K non-private teachers on disjoint shards, target (ε, δ)-DP per answer.

    Rules: K ≥ 1 (odd, or even with the tie rule of the module docstring); 0 < ε ≤ 700; 0 ≤ δ < 1.
    """

    K: int
    epsilon: float
    delta: float = 0.0
    prior: Prior = field(default_factory=Prior)
    #: m: each answer is the table of m teachers on a uniform m-subset of the K, drawn per answer without
    #: replacement (1 ≤ m ≤ K; None, or m = K: every teacher); (ε, δ) is then the m-teacher table's, and the
    #: answer's own cost is amplified (:mod:`darrm_opt.privacy.subsample`)
    subsample: int | None = None

    def __post_init__(self) -> None:
        K = integer_in("K", self.K, 1, odd=False)
        eps = per_answer_epsilon(self.epsilon)
        delta = probability_below_one("delta", self.delta)
        object.__setattr__(self, "K", K)
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)
        object.__setattr__(self, "prior", Prior.parse(self.prior))
        if self.subsample is not None:
            m = integer_in("subsample", self.subsample, 1, K)
            object.__setattr__(self, "subsample", None if m == K else m)

    @property
    def m(self) -> int:
        """The teachers each answer reads: ``subsample``, or K."""
        return self.K if self.subsample is None else self.subsample

    def inner(self) -> PateParams:
        """The m-teacher table's own parameters (itself without ``subsample``): its LP, certificate and
        profile before amplification. Its prior is the law of the sampled teachers' votes: the same prior for
        the exchangeable ones, the thinned law of L for a ``counts`` prior (:func:`thinned_pmf`)."""
        if self.subsample is None:
            return self
        prior = self.prior
        if prior.kind == "counts":
            w = thinned_pmf(prior.count_pmf(self.K), self.subsample)
            prior = Prior("counts", counts=tuple((j, j, float(x)) for j, x in enumerate(w) if x > 0))
        return PateParams(self.subsample, self.epsilon, self.delta, prior)

    @property
    def bound(self) -> float:
        """e^ε − 1 + 2δ (float64), the right-hand side of every pair constraint."""
        return math.expm1(self.epsilon) + 2.0 * self.delta

    def canonical(self) -> dict:
        """The parameters' one form; ``subsample`` only where set (a table of every teacher keeps its form
        and hash)."""
        out = {"K": self.K, "teachers": "disjoint-nonprivate", "epsilon": self.epsilon, "delta": self.delta,
               "prior": self.prior.spec}
        if self.subsample is not None:
            out["subsample"] = self.subsample
        return out

    def key(self) -> str:
        """A stable hash of the canonical parameters (the table id in the service; the setting is part of it)."""
        return digest(self.canonical())


def signs(K: int) -> np.ndarray:
    """s_l = −1 for l < K/2, +1 for l > K/2, and 0 at the tie l = K/2 of an even K (a fair coin: module
    docstring)."""
    return np.sign(2.0 * np.arange(K + 1) - K)


def tie_index(K: int) -> int | None:
    """K/2 for an even K (the tie, where the answer is a fair coin), None for an odd K."""
    return K // 2 if K % 2 == 0 else None


def pair_rows(K: int, E: float) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """The 4K constraint rows over γ(0..K) (module docstring) and their labels (l, l′, output)."""
    s = signs(K)
    rows, labels = [], []
    for l in range(K + 1):
        for lp in (l - 1, l + 1):
            if not 0 <= lp <= K:
                continue
            for out, sign in ((1, 1.0), (0, -1.0)):
                row = np.zeros(K + 1)
                row[l] += sign * s[l]
                row[lp] -= sign * E * s[lp]
                rows.append(row)
                labels.append((l, lp, out))
    return np.array(rows), labels


def pair_costs(gamma, epsilon: float) -> np.ndarray:
    """Every row's cost (:func:`pair_rows` order) for γ at per-answer ε, in float64."""
    g = np.asarray(gamma, dtype=np.float64)
    A, _ = pair_rows(g.size - 1, math.exp(epsilon))
    return A @ g


def pate_delta(gamma, epsilon: float) -> float:
    """The smallest δ with DaRRM_γ (ε, δ)-DP in the PATE setting: max(0, max cost − (e^ε − 1)) / 2 (float)."""
    return max(0.0, (float(pair_costs(gamma, epsilon).max()) - math.expm1(epsilon)) / 2.0)


def hypergeometric(K: int, m: int) -> np.ndarray:
    """Hyp[L, j] = C(L, j) C(K − L, m − j) / C(K, m): the law of the 1-votes j among m teachers drawn without
    replacement from K of which L vote 1 (rows L = 0..K, columns j = 0..m)."""
    from scipy import stats

    L = np.arange(K + 1)[:, None]
    j = np.arange(m + 1)[None, :]
    return stats.hypergeom.pmf(j, K, L, m)


def thinned_pmf(alpha: np.ndarray, m: int) -> np.ndarray:
    """The law of the 1-votes among m of the K teachers drawn without replacement, when L has the law
    ``alpha`` (length K + 1): Σ_L alpha_L Hyp[L, j], as column sums (no BLAS product)."""
    K = alpha.size - 1
    return (np.asarray(alpha, dtype=np.float64)[:, None] * hypergeometric(K, m)).sum(axis=0)


def subsampled_table(K: int, gamma: np.ndarray) -> np.ndarray:
    """The K-teacher table Γ of an m-teacher table ``gamma`` (m = len − 1) run on a uniform m-subset drawn
    without replacement: Pr[1 | L] = Σ_j Hyp[L, j](½ + ½ s_j γ(j)) = ½ + ½ s_L Γ(L), so
    Γ(L) = s_L Σ_j Hyp[L, j] s_j γ(j) (0 at the tie of an even K; docs/maths.md), as row sums."""
    g = np.asarray(gamma, dtype=np.float64)
    m = g.size - 1
    h = (hypergeometric(K, m) * (signs(m) * g)[None, :]).sum(axis=1)
    return np.clip(signs(K) * h, 0.0, 1.0)
