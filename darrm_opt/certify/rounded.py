"""A rounded-down copy of a certified γ, certified from the sweep that certified γ (no sweep of its own).

Let γ′ ≤ γ entrywise with d = γ − γ′ < D. The privacy cost is linear in γ (Lemma 3.4), so for every
corner multiset n

    f(n; γ′) = f(n; γ) − f(n; d),   −f(n; d) = Σ_l s_l d_l (e^{mε} α′_l − α_l) ≤ D (e^{mε} + 1),

since the terms with s_l = +1 are at most d_l e^{mε} α′_l, those with s_l = −1 at most d_l α_l, and α, α′
are pmfs. γ's sweep (``certify_and_separate(wide=w)``) keeps every multiset whose float cost under γ
exceeds the level L = bound − w (``SweepResult.wide``); every other multiset has f(n; γ) ≤ L + η (η: the
sweep's error bound), hence

    f(n; γ′) ≤ U = L + η + D (e^{mε} + 1)       (U ≤ bound proven in outward-rounded interval arithmetic).

On the kept multisets f(n; γ′) is evaluated from FFT pmfs with the sweep's float error bound η′, and those
within max(η′, 1e-12) of the bound are decided by the exact re-check (darrm_opt.certify.exact), exactly as in
:func:`darrm_opt.certify.certificate.certify_and_separate`. When U ≤ bound and the kept maximum M is at least
U, M is the maximum over every multiset and the certificate is what a sweep of γ′ gives (its float values
may differ within η′); otherwise (too wide a rounding for w, or M < U) the caller sweeps γ′. A sweep over the
corners with p ≥ p′ (darrm_opt.certify.monotone) decides a monotone γ′ in the same way: the bound holds on
every multiset of the subset, and for monotone γ′ the subset attains the maximum.
With D = 10⁻⁶ (6 printed decimals) w = :func:`wide_margin` is about 5·10⁻⁶ at mε = 0.3: some 6·10⁴ of the
2.8·10¹⁰ multisets at K = 101.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import mpmath
import numpy as np
from mpmath import iv

from darrm_opt.certify.certificate import NEAR_TIGHT, Certificate, is_symmetric, validate_gamma
from darrm_opt.certify.exact import MP_DIGITS, exp_interval, interval_dps, interval_ends, recheck
from darrm_opt.certify.monotone import monotone_applies
from darrm_opt.certify.sweep import SweepProblem, SweepResult, error_bound, signed_h
from darrm_opt.model.corners import corners
from darrm_opt.model.params import Params

#: multisets per block of the direct evaluation (bounded memory)
CHUNK = 4096


def wide_margin(params: Params, decimals: int) -> float:
    """w = 2.2 (e^{mε} + 1) 10^{−decimals}: twice the rounding's reach D (e^{mε} + 1) plus room for γ's own
    distance to the bound (τ/2 ≈ 5·10⁻⁹ for γ_opt), so the kept maximum is at least U."""
    return 2.2 * (math.exp(params.m * params.epsilon) + 1.0) * 10.0**-decimals


def _reach(gamma: np.ndarray, shown: np.ndarray) -> float | None:
    """max_l (γ_l − γ′_l) in exact arithmetic, rounded up; None when some γ′_l > γ_l."""
    diffs = [Fraction(float(a)) - Fraction(float(b)) for a, b in zip(gamma, shown, strict=True)]
    if min(diffs) < 0:
        return None
    d = max(diffs)
    x = float(d)
    return x if Fraction(x) >= d else math.nextafter(x, math.inf)


def _costs(params: Params, shown: np.ndarray, counts: np.ndarray, E: float) -> np.ndarray:
    """f(n; γ′) for the rows of ``counts`` from FFT pmfs (the sweep's float path and error bound)."""
    C = corners(params)
    prob = SweepProblem(C, signed_h(shown), E)
    h = prob.h
    out = [np.zeros(0)]
    for i in range(0, counts.shape[0], CHUNK):
        P, Q = prob._pmfs(counts[i: i + CHUNK], range(C.shape[0]), params.K + 1)
        out.append(P @ h - E * (Q @ h))
    return np.concatenate(out)


def certify_rounded(params: Params, gamma, shown, cert: Certificate, res: SweepResult) -> Certificate | None:
    """The certificate of ``shown`` (≤ ``gamma``) from γ's certificate ``cert`` and its sweep ``res`` (module
    docstring), or None when that sweep cannot decide it."""
    t0 = time.perf_counter()
    g, gp = validate_gamma(gamma, params.K), validate_gamma(shown, params.K)
    if res.wide is None or res.wide_level is None:
        return None
    if cert.corners_swept is not None and not monotone_applies(gp):  # the subset covers monotone tables only
        return None
    D = _reach(g, gp)
    if D is None or not (is_symmetric(g) and is_symmetric(gp)):
        return None
    E, B = math.exp(params.m * params.epsilon), params.bound
    with interval_dps(MP_DIGITS):
        e_me = exp_interval(iv.mpf(params.m) * iv.mpf(params.epsilon))
        U = interval_ends(iv.mpf(res.wide_level) + iv.mpf(cert.error_bound) + iv.mpf(D) * (e_me + 1))[1]
        if not U <= interval_ends(e_me - 1 + 2 * iv.mpf(params.delta))[0]:
            return None
        u_out = math.nextafter(float(mpmath.mpf(U)), math.inf)  # rounded up: the kept maximum must reach U
    W = np.asarray(res.wide)
    f = _costs(params, gp, W, E)
    eta = error_bound(params.K, E, float(np.abs(signed_h(gp)).max()))
    if f.size == 0 or float(f.max()) < u_out:
        return None
    k = int(f.argmax())
    max_cost, worst, hp, certified, reason = float(f[k]), [int(x) for x in W[k]], 0, True, ""
    if max_cost > B + eta:
        certified, reason = False, f"multiset {worst} exceeds the bound by {max_cost - B:.3g}"
    else:
        near = f > B - max(eta, NEAR_TIGHT)
        if near.any():
            exact = recheck(params, gp, W[near], False)
            certified, reason, max_cost = exact.certified, exact.reason, exact.max_cost
            worst, hp = [int(x) for x in exact.worst], exact.checked
    return Certificate(certified=certified, max_privacy_cost=float(max_cost), bound=float(B),
                       multisets_checked=cert.multisets_checked, worst_multiset=worst, corners=cert.corners,
                       error_bound=float(eta), high_precision_checked=hp, seconds=time.perf_counter() - t0,
                       reason=reason, corners_swept=cert.corners_swept)
