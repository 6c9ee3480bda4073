"""A certificate in words: its verdict line, its worst multiset as teachers per corner, and why a table
refused at an undecided tie is refused."""

from __future__ import annotations

import mpmath
import numpy as np

from darrm_opt.certify.certificate import Certificate, certify, is_symmetric
from darrm_opt.certify.exact import decide
from darrm_opt.model.params import Params


def corner_words(p: float, q: float) -> str:
    """A corner (p, p′) of one teacher's (ε, Δ)-DP region in words: p = Pr[vote 1 | D], p′ = Pr[vote 1 | D′]."""
    if p == q:
        return f"always vote {int(p)}"
    if p == 0 or q == 0:
        return f"vote 1 only on {'D′' if p == 0 else 'D'} (probability {max(p, q):.3g})"
    if p == 1 or q == 1:
        return f"vote 0 only on {'D′' if p == 1 else 'D'} (probability {1 - min(p, q):.3g})"
    return f"vote 1 with probability {p:.4g} on D and {q:.4g} on D′ (randomised response)"


def multiset_words(counts: list[int], corners: list[list[float]]) -> str:
    """The worst multiset as teachers per corner, in words ("4 teachers always vote 0; 7 ...")."""
    parts = [f"{n} teacher{'s' if n != 1 else ''} {corner_words(*corners[i])}"
             for i, n in enumerate(counts) if n]
    return "; ".join(parts)


def certificate_line(cert: Certificate) -> str:
    """The certificate: the largest privacy cost f(n) over every corner multiset n against the Lemma 3.4 bound
    e^{mε} − 1 + 2δ, and the worst multiset as counts of the corners and in words."""
    unproven = not cert.certified and "cannot be proven" in cert.reason  # an undecided tie, not a violation
    status = "CERTIFIED" if cert.certified else "NOT CERTIFIED" if unproven else "VIOLATED"
    rel = "<=" if cert.certified else "~" if unproven else ">"
    line = (
        f"certificate: {status}: max privacy cost {cert.max_privacy_cost:.12g} {rel} bound e^(mε) − 1 + 2δ = "
        f"{cert.bound:.12g} over {cert.multisets_checked:,} corner multisets{subset_words(cert)} (worst multiset "
        f"{cert.worst_multiset}; {cert.high_precision_checked} re-checked in interval arithmetic, 40 to 320 digits)"
    )
    if cert.corners and len(cert.worst_multiset) == len(cert.corners):
        line += "\nworst multiset: " + multiset_words(cert.worst_multiset, cert.corners)
    return line


def subset_words(cert: Certificate) -> str:
    """How a sweep over part of the corners covers them all (darrm_opt.certify.monotone)."""
    if cert.corners_swept is None:
        return ""
    return (f" of the {len(cert.corners_swept)} corners with p ≥ p′, which suffice for a γ non-increasing up to "
            "the middle and symmetric")


#: the relative shrink tried on a table refused at an undecided tie
SHRINK = 1e-12


def tight_note(params: Params, gamma: np.ndarray, cert: Certificate) -> str | None:
    """A plain explanation when the rejected table's worst multiset is an undecided tie: its excess interval
    still straddles 0 at the last precision of the interval re-check (certify/exact.py), as for exactly
    tight tables (γ_DSub; γ ≡ 1 at K = 3, m = 2). Equality cannot be proven in interval arithmetic, so the
    table is not accepted; says whether γ·(1 − 1e-12) certifies (checked here)."""
    g = np.asarray(gamma, dtype=np.float64)
    if not cert.worst_multiset:
        return None
    d = decide(params, g, cert.worst_multiset, not is_symmetric(g))
    if d.verdict != "undecided":
        return None
    shrunk = certify(params, g * (1.0 - SHRINK))
    if shrunk.certified:
        fix = (f"the table scaled by (1 - {SHRINK:g}) certifies "
               f"(bound - max cost = {shrunk.bound - shrunk.max_privacy_cost:.3g})")
    else:
        fix = f"scaling it by (1 - {SHRINK:g}) does not certify either"
    return (f"the table meets the bound with equality to {d.digits} digits at multiset {cert.worst_multiset} "
            f"(interval arithmetic at {d.digits} digits puts (cost - bound)/2 in [{mpmath.nstr(d.lo, 3)}, "
            f"{mpmath.nstr(d.hi, 3)}], bound {cert.bound:.12g}); whether it exceeds the bound cannot be proven, "
            f"so the verifier does not accept it; {fix}.")
