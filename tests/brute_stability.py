"""Independent truths for the stability kind's tests: GNMax's answer law on one histogram by a direct sum over
its noise, the discrete Laplace cdf by a direct sum, and a job's exact error by a recursion over the threshold
noise ρ and the count of unstable queries. None of it uses the library's error code."""

from __future__ import annotations

import itertools

import numpy as np

from darrm_opt.privacy.stability import SvtParams, dlap_pmf


def discrete_gaussian(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """(z, Pr[Z = z]) for Z ~ N_ℤ(0, σ²), normalised over a range far beyond its mass."""
    z = np.arange(-int(25 * sigma) - 5, int(25 * sigma) + 6)
    w = np.exp(-z.astype(float) ** 2 / (2 * sigma * sigma))
    return z, w / w.sum()


def gnmax_answer_law(h: tuple[int, ...], sigma: float) -> np.ndarray:
    """Pr[GNMax answers c | h] for every class c: a direct sum over the answering class's noise, the others below
    it or tied with it (every subset of tied classes enumerated, noisy ties split uniformly)."""
    z, p = discrete_gaussian(sigma)
    C = len(h)
    out = np.zeros(C)
    for c in range(C):
        for vz, pv in zip(z, p, strict=True):
            v = h[c] + vz
            less = [float(p[h[o] + z < v].sum()) for o in range(C) if o != c]
            eq = [float(p[h[o] + z == v].sum()) for o in range(C) if o != c]
            for mask in itertools.product((0, 1), repeat=C - 1):
                out[c] += pv * float(np.prod([eq[j] if m else less[j] for j, m in enumerate(mask)])) / (1 + sum(mask))
    return out


def dlap_le(t: int, x: int) -> float:
    """Pr[ν ≤ x] for ν ~ DLap(t), summed directly over a wide range."""
    y = np.arange(-60 * t - abs(x), x + 1)
    return float(dlap_pmf(t, y).sum())


def job_error_recursion(svt: SvtParams, Q: int, rows: list[tuple[float, int, float, float]], fallback: bool
                        ) -> tuple[float, float]:
    """(error, answered) of a job of Q i.i.d. queries whose histogram law is ``rows`` = (probability, d, wrong
    when stable, wrong when answered by GNMax): per ρ = z in its support (|z| ≤ 80·t_ρ), a recursion over the
    count of unstable queries so far (⊥ after c of them; an unstable query before is ⊥, counted an error, or
    with ``fallback`` GNMax's answer)."""
    err = ans = 0.0
    for z in range(-80 * svt.t_rho, 80 * svt.t_rho + 1):
        pz = float(dlap_pmf(svt.t_rho, np.array([z]))[0])
        pu = {d: dlap_le(svt.t_nu, svt.threshold + z - svt.scale * d) for d in {r[1] for r in rows}}
        u = sum(ph * pu[d] for ph, d, _, _ in rows)
        e_run = sum(ph * (pu[d] * (gw if fallback else 1.0) + (1 - pu[d]) * w) for ph, d, w, gw in rows)
        state = np.zeros(svt.cutoff + 1)
        state[0] = 1.0
        e = a = 0.0
        for _ in range(Q):
            run = state[:-1].sum()
            e += run * e_run + state[-1]
            a += run * (1.0 if fallback else 1 - u)
            nxt = np.zeros_like(state)
            nxt[:-1] += state[:-1] * (1 - u)
            nxt[1:] += state[:-1] * u
            nxt[-1] += state[-1]
            state = nxt
        err += pz * e / Q
        ans += pz * a
    return err, ans
